"""The linear layers of a model's blocks (what LoRA adapts, what a quantized base stores in 4 or 8 bits), the
target-module names LoRA accepts for each family, and the parameters of the low-rank adapters on them."""

from __future__ import annotations

from dataclasses import dataclass

from botec.architecture.shape import T5_FAMILIES, Architecture
from botec.errors import ContractError

__all__ = ["LinearMatrix", "AdapterCount", "linear_matrices", "module_names", "lora_parameters"]

# What a LoRA target module names: a role in the block (q, k, v, fused qkv, o, gate, up, down). The
# Hugging Face names of each family, and the Llama names accepted everywhere they map cleanly.
_LLAMA_NAMES = {"q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",), "o_proj": ("o",), "gate_proj": ("gate",),
                "up_proj": ("up",), "down_proj": ("down",)}
_MIXTRAL_NAMES = {"w1": ("gate",), "w3": ("up",), "w2": ("down",)}   # block_sparse_moe.experts.N.w1/w3/w2
_GPT2_NAMES = {"c_attn": ("qkv",), "c_proj": ("o", "down"), "c_fc": ("up",)}   # attn.c_proj and mlp.c_proj
_NEOX_NAMES = {"query_key_value": ("qkv",), "dense": ("o",), "dense_h_to_4h": ("up",), "dense_4h_to_h": ("down",)}
_FUSED_QKV = {"gpt2": _GPT2_NAMES, "gpt3": _GPT2_NAMES, "gpt_neox": _NEOX_NAMES, "bloom": _NEOX_NAMES}
# T5 / mT5: SelfAttention and EncDecAttention q, k, v, o (one name adapts both); DenseReluDense wi (plain) or
# wi_0 (gate), wi_1 (up), and wo (down)
_T5_NAMES = {"q": ("q",), "k": ("k",), "v": ("v",), "o": ("o",), "wo": ("down",)}
_ATTENTION_ROLES = ("q", "k", "v", "qkv", "o")


@dataclass(frozen=True)
class LinearMatrix:
    """One kind of weight matrix of the transformer blocks: d_in → d_out, ``count`` of them in the model."""

    role: str            # q, k, v, qkv (fused), o, gate, up, down
    input_size: int      # d_in
    output_size: int     # d_out
    count: int           # matrices of this kind in the model (experts: E per MoE layer)
    expert: bool = False  # a routed expert's matrix (a token passes k_e of the E)

    @property
    def parameters(self) -> int:
        return self.count * self.input_size * self.output_size


def linear_matrices(arch: Architecture) -> tuple[LinearMatrix, ...]:
    """Every weight matrix of the transformer blocks (not the embeddings, the LM head, norms or routers): the
    attention projections (q, k, v, or one fused qkv; o), the dense MLPs (gate, up, down), the routed and
    shared experts of MoE layers. What LoRA adapts and what a quantized base stores in 4 or 8 bits."""
    if arch.mla:
        raise ContractError(f"{arch.name}: multi-head latent attention (MLA) has no q/k/v projections LoRA can be "
                            "mapped to here; LoRA is modelled for MHA/GQA/MQA models", field="strategy.lora")
    h, a, k, d, L = arch.hidden_size, arch.attention_heads, arch.kv_heads, arch.resolved_head_dim, arch.layers
    if arch.family in _FUSED_QKV:
        attention = [LinearMatrix("qkv", h, (a + 2 * k) * d, L)]
    else:
        attention = [LinearMatrix("q", h, a * d, L), LinearMatrix("k", h, k * d, L), LinearMatrix("v", h, k * d, L)]
    attention.append(LinearMatrix("o", a * d, h, L))
    if arch.decoder_layers:   # the decoder's cross attention: Q from the decoder, K and V from the encoder's output
        D = arch.decoder_layers
        attention += [LinearMatrix("q", h, a * d, D), LinearMatrix("k", h, k * d, D), LinearMatrix("v", h, k * d, D),
                      LinearMatrix("o", a * d, h, D)]

    def mlp(ffn: int, count: int, expert: bool = False) -> list[LinearMatrix]:
        gate = [LinearMatrix("gate", h, ffn, count, expert)] if arch.mlp == "gated" else []
        return gate + [LinearMatrix("up", h, ffn, count, expert), LinearMatrix("down", ffn, h, count, expert)]

    moe_layers = arch.moe_layers
    matrices = attention + (mlp(arch.ffn_size, L - moe_layers) if L > moe_layers else [])
    if arch.moe:
        matrices += mlp(arch.moe.expert_ffn_size, moe_layers * arch.moe.experts, expert=True)
        if arch.moe.shared_experts:
            matrices += mlp(arch.moe.expert_ffn_size, moe_layers * arch.moe.shared_experts)
    return tuple(matrices)


def module_names(arch: Architecture) -> dict[str, tuple[str, ...]]:
    """The target-module names LoRA accepts for ``arch`` → the roles each adapts: the family's Hugging Face
    names (GPT-2 c_attn/c_proj/c_fc, GPT-NeoX and BLOOM query_key_value/dense/dense_h_to_4h/dense_4h_to_h,
    Mixtral's experts w1/w3/w2) and the Llama names wherever they map cleanly (a fused QKV has no q_proj)."""
    roles = {m.role for m in linear_matrices(arch)}
    names = {name: r for name, r in _LLAMA_NAMES.items() if set(r) <= roles}
    names |= _FUSED_QKV.get(arch.family, {})
    if arch.family in T5_FAMILIES:
        names |= _T5_NAMES | ({"wi_0": ("gate",), "wi_1": ("up",)} if arch.mlp == "gated" else {"wi": ("up",)})
    if arch.moe:
        names |= _MIXTRAL_NAMES
    return names


@dataclass(frozen=True)
class AdapterCount:
    """LoRA on ``arch``: every adapted matrix d_in → d_out gets A (d_in × r) and B (r × d_out), r·(d_in + d_out)
    parameters (Hu et al. 2021, §4); what the training graph reads of them; and the linear weights the frozen
    base stores in its own format (all of them, adapted or not)."""

    rank: int
    modules: tuple[str, ...]            # the target-module names, as stated
    adapted: tuple[LinearMatrix, ...]   # the matrices that get adapters
    matrices: tuple[LinearMatrix, ...]  # every linear matrix of the blocks
    layers: int
    moe_layers: int
    experts_per_token: int
    experts: int

    def _sum(self, value, expert: bool | None = None, matrices=None) -> float:
        return sum(value(m) for m in (self.adapted if matrices is None else matrices)
                   if expert is None or m.expert == expert)

    @property
    def parameters(self) -> int:
        """Trainable parameters: Σ over adapted matrices of r·(d_in + d_out)."""
        return int(self._sum(lambda m: m.count * self.rank * (m.input_size + m.output_size)))

    @property
    def expert_parameters(self) -> int:
        """The part on routed experts."""
        return int(self._sum(lambda m: m.count * self.rank * (m.input_size + m.output_size), expert=True))

    @property
    def active_parameters(self) -> float:
        """Adapter parameters one token passes through (a routed expert's adapters: k_e of the E)."""
        share = self.experts_per_token / self.experts if self.experts else 0.0
        return self.parameters - self.expert_parameters * (1 - share)

    def width(self, side: str, expert: bool) -> float:
        """Σ d_in (side ``input``) or Σ d_out (``output``) of the adapted matrices: per layer, averaged over the
        layers, for the non-expert ones; per routed expert for the experts'."""
        size = (lambda m: m.input_size) if side == "input" else (lambda m: m.output_size)
        per = self.moe_layers * self.experts if expert else self.layers
        return self._sum(lambda m: m.count * size(m), expert=expert) / per if per else 0.0

    def count(self, expert: bool, matrices=None) -> float:
        """Matrices per layer (averaged), or per routed expert."""
        per = self.moe_layers * self.experts if expert else self.layers
        return self._sum(lambda m: m.count, expert=expert, matrices=matrices) / per if per else 0.0

    @property
    def linear_parameters(self) -> int:
        """The blocks' linear weights (adapted or not): what a 4- or 8-bit base stores quantized."""
        return sum(m.parameters for m in self.matrices)

    @property
    def linear_rows(self) -> int:
        """Output rows of those matrices (LLM.int8() keeps one FP32 scale per row)."""
        return sum(m.count * m.output_size for m in self.matrices)

    @property
    def largest_matrix(self) -> int:
        """The largest of them: the one a dequantizing kernel holds in 16 bits at a time."""
        return max(m.input_size * m.output_size for m in self.matrices)


def lora_parameters(arch: Architecture, rank: int, target_modules) -> AdapterCount:
    """LoRA of rank ``rank`` on ``target_modules`` (Hugging Face names, or ``all-linear`` / ``attention``) of
    ``arch``. A name the architecture lacks is a :class:`ContractError` naming ``strategy.lora.target_modules``.

    Llama-2-7B, r = 8 on q_proj, v_proj: 32 × 8 × (4,096 + 4,096) × 2 = 4,194,304, as PEFT prints
    ("trainable params: 4,194,304 || all params: 6,742,609,920")."""
    from botec.catalog import did_you_mean

    matrices = linear_matrices(arch)
    names = module_names(arch)
    if isinstance(target_modules, str):
        if target_modules not in ("all-linear", "attention"):
            raise ContractError(f"unknown set {target_modules!r} (all-linear, attention, or a list of module names)",
                                field="strategy.lora.target_modules")
        modules = (target_modules,)
        roles = {m.role for m in matrices if target_modules == "all-linear" or m.role in _ATTENTION_ROLES}
    else:
        modules, roles = tuple(target_modules), set()
        for name in modules:
            if name not in names:
                why = ""
                if name in _LLAMA_NAMES and _LLAMA_NAMES[name][0] in ("q", "k", "v") and arch.family in _FUSED_QKV:
                    fused = next(n for n, r in names.items() if r == ("qkv",))
                    why = f"; {arch.family} fuses Q, K and V in one matrix: target {fused}"
                elif name == "gate_proj" and arch.mlp == "plain":
                    why = f"; the MLP of {arch.name} is not gated"
                raise ContractError(f"{name!r} is not a linear module of {arch.name}{why or did_you_mean(name, names)} "
                                    f"(its modules: {', '.join(names)}; or all-linear, attention)",
                                    field="strategy.lora.target_modules")
            roles |= set(names[name])
    adapted = tuple(m for m in matrices if m.role in roles)
    moe = arch.moe
    return AdapterCount(rank=rank, modules=modules, adapted=adapted, matrices=matrices, layers=arch.layers,
                        moe_layers=arch.moe_layers, experts_per_token=moe.experts_per_token if moe else 0,
                        experts=moe.experts if moe else 0)

