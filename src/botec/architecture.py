"""A model's shape -> its parameters (total and active per token), its FLOPs per token.

Four ways to name a model: a bare parameter count (the lesson's way), an architecture written
in the contract, a Hugging Face ``config.json`` read offline, or a name from the shipped
catalog (``catalog/models.yaml``). The last three give an :class:`Architecture`.

Parameter counting, per transformer layer (h hidden size, a heads, k KV heads, d head dim,
f FFN size, V vocabulary):

- attention (MHA/GQA/MQA): h·a·d (Q) + 2·h·k·d (K, V) + a·d·h (output), plus biases;
- attention (MLA, DeepSeek-V2/V3): h·r_q + r_q·a·(d_nope + d_rope) (Q through its low-rank
  bottleneck), h·(r_kv + d_rope) + r_kv·a·(d_nope + d_v) (latent KV), a·d_v·h (output), plus
  the two bottleneck norms;
- MLP: 3·h·f when gated (SwiGLU), 2·h·f when plain, plus biases;
- MoE: E routed experts and S shared experts of size f_e, a router h·E; k_e experts per token;
- norms: two per layer (h each for RMSNorm, 2h for LayerNorm), one final (and one after the
  embeddings, BLOOM);
- embeddings V·h (+ learned positions), an LM head V·h unless tied.

Encoder-decoder models (T5, mT5; Raffel et al. 2020): ``layers`` counts the blocks of both stacks,
``decoder_layers`` those of the decoder, each of which adds a cross-attention block (the same
Q, K, V, O shapes as its self-attention, K and V read from the encoder's output) and its norm; the
encoder's final norm is one more norm, and each stack's first layer keeps a relative position bias
of buckets × heads (a lookup, counted with the embeddings). T5's norms are RMS-style (weight only),
its projections have no bias; the embedding is shared by both stacks (and tied to the head in the
original T5, untied in T5 v1.1 and mT5). The training graph sees one sequence length for both
stacks (inputs and targets of equal length).

Checked against published counts: Llama-2-7B 6,738,415,616 and Llama-3.1-8B 8,030,261,248
exactly; T5-base 222,903,552, t5-v1_1-base 247,577,856, mT5-base 582,401,280 (tests/test_architecture.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from botec.errors import ContractError, read_text_file

__all__ = ["Architecture", "MoE", "MLA", "ParameterBreakdown", "from_hf_config", "read_hf_config", "model_catalog",
           "breakdown", "SUPPORTED_FAMILIES", "LinearMatrix", "AdapterCount", "linear_matrices", "module_names",
           "lora_parameters"]


@dataclass(frozen=True)
class MoE:
    experts: int                # routed experts E
    experts_per_token: int      # k_e
    expert_ffn_size: int        # f_e
    shared_experts: int = 0     # S, always active
    first_dense_layers: int = 0  # leading layers with a dense MLP (DeepSeek: 3)
    layer_frequency: int = 1     # every n-th layer after those is MoE
    router_bias: bool = False    # a bias per expert in the router (DeepSeek-V3's e_score_correction_bias)


@dataclass(frozen=True)
class MLA:
    q_lora_rank: int | None     # None: Q projected directly (DeepSeek-V2-Lite)
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer's shape."""

    name: str
    family: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    ffn_size: int
    vocab_size: int
    head_dim: int | None = None
    mlp: str = "gated"                 # gated | plain
    tied_embeddings: bool = False
    position_embeddings: int = 0
    norm: str = "rmsnorm"              # rmsnorm | layernorm
    attention_bias: str = "none"       # none | qkv | all
    mlp_bias: bool = False
    embedding_norm: bool = False       # a norm right after the token embeddings (BLOOM)
    max_sequence_length: int | None = None
    sliding_window: int | None = None  # every layer attends to at most this many tokens (Mistral 7B v0.1: 4,096)
    moe: MoE | None = None
    mla: MLA | None = None
    mtp_layers: int = 0
    source: str | None = None
    published_parameters: float | None = None
    decoder_layers: int = 0                 # encoder-decoder (T5): the decoder's blocks, each with cross attention
    relative_attention_buckets: int = 0     # T5: relative position bias, buckets × heads in each stack's first layer

    @property
    def encoder_layers(self) -> int:
        """Blocks of the encoder stack (0 for a decoder-only model)."""
        return self.layers - self.decoder_layers if self.decoder_layers else 0

    @property
    def resolved_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.attention_heads

    @property
    def qk_head_dim(self) -> int:
        """Width of one head's query/key (MLA: no-RoPE part + RoPE part)."""
        return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim if self.mla else self.resolved_head_dim

    @property
    def v_head_dim(self) -> int:
        return self.mla.v_head_dim if self.mla else self.resolved_head_dim

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """K and V elements one token leaves in the cache of one layer: 2·k·d (MHA/GQA/MQA), or the
        compressed latent plus the shared RoPE key, r_kv + d_rope (MLA)."""
        if self.mla:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.kv_heads * self.resolved_head_dim

    @property
    def moe_layers(self) -> int:
        if self.moe is None:
            return 0
        return len([i for i in range(self.moe.first_dense_layers, self.layers)
                    if (i - self.moe.first_dense_layers) % self.moe.layer_frequency == 0])


@dataclass(frozen=True)
class ParameterBreakdown:
    """Parameters by part; ``active`` counts what one token passes through."""

    embeddings: int            # token (and position) embeddings
    lm_head: int               # 0 when tied to the embeddings
    attention: int             # all layers
    mlp: int                   # dense MLPs of all layers
    experts: int               # routed experts of all MoE layers
    shared_experts: int
    routers: int
    norms: int                 # all layers + final norm
    active_experts: int        # routed experts a token uses, all MoE layers
    mtp: int = 0               # multi-token-prediction modules, not in the total
    parts: dict = field(default_factory=dict)  # per-layer figures for the report

    @property
    def total(self) -> int:
        return (self.embeddings + self.lm_head + self.attention + self.mlp + self.experts + self.shared_experts
                + self.routers + self.norms)

    @property
    def active(self) -> int:
        """Parameters one token passes through (embedding rows counted whole, as model cards do)."""
        return self.total - self.experts + self.active_experts

    @property
    def matmul_active(self) -> int:
        """Active parameters that take part in matrix multiplies: all but the input-embedding lookup
        (a tied embedding still does the output matmul, so it is counted once)."""
        lookup = self.embeddings if self.lm_head else self.embeddings - self.parts.get("token_embeddings", 0)
        return self.active - lookup


def _norm_parameters(arch: Architecture, width: int) -> int:
    return width * (2 if arch.norm == "layernorm" else 1)


def _attention_parameters(arch: Architecture) -> int:
    h, a = arch.hidden_size, arch.attention_heads
    if arch.mla:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a * qk   # down, norm, up
        else:
            q = h * a * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank \
            + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + a * m.v_head_dim * h
    d, k = arch.resolved_head_dim, arch.kv_heads
    weights = h * a * d + 2 * h * k * d + a * d * h
    bias = 0
    if arch.attention_bias in ("qkv", "all"):
        bias += a * d + 2 * k * d
    if arch.attention_bias == "all":
        bias += h
    return weights + bias


def _mlp_parameters(arch: Architecture, ffn: int) -> int:
    h = arch.hidden_size
    matrices = 3 if arch.mlp == "gated" else 2
    bias = (ffn * (2 if arch.mlp == "gated" else 1) + h) if arch.mlp_bias else 0
    return matrices * h * ffn + bias


def breakdown(arch: Architecture) -> ParameterBreakdown:
    """Count the parameters of ``arch`` by part (see the module docstring for the formulas)."""
    h, V = arch.hidden_size, arch.vocab_size
    token_embeddings = V * h
    stacks = 2 if arch.decoder_layers else 1
    position_bias = stacks * arch.relative_attention_buckets * arch.attention_heads  # T5: a lookup per stack
    embeddings = token_embeddings + arch.position_embeddings * h + position_bias
    lm_head = 0 if arch.tied_embeddings else V * h
    attention_per_layer = _attention_parameters(arch)
    norms_per_layer = 2 * _norm_parameters(arch, h)
    dense_mlp = _mlp_parameters(arch, arch.ffn_size)
    moe_layers = arch.moe_layers
    dense_layers = arch.layers - moe_layers
    experts = shared = routers = active_experts = router = 0
    per_expert = 0
    if arch.moe:
        per_expert = _mlp_parameters(arch, arch.moe.expert_ffn_size)
        experts = moe_layers * arch.moe.experts * per_expert
        shared = moe_layers * arch.moe.shared_experts * per_expert
        router = (h + arch.moe.router_bias) * arch.moe.experts   # the gate's matrix, and its bias per expert
        routers = moe_layers * router
        active_experts = moe_layers * arch.moe.experts_per_token * per_expert
    mtp = 0
    if arch.mtp_layers:
        # DeepSeek-V3 MTP module: a full (MoE) layer, a 2h -> h projection, two input norms and a final
        # norm; it shares the embeddings and the head with the main model.
        layer = attention_per_layer + norms_per_layer
        layer += (arch.moe.experts + arch.moe.shared_experts) * per_expert + router if arch.moe else dense_mlp
        mtp = arch.mtp_layers * (layer + 2 * h * h + 3 * _norm_parameters(arch, h))
    # encoder-decoder: each decoder block's cross attention (the self-attention's shapes) and its norm; the
    # encoder's final norm
    cross = arch.decoder_layers * (attention_per_layer + _norm_parameters(arch, h))
    final_norms = _norm_parameters(arch, h) * (stacks + arch.embedding_norm)
    return ParameterBreakdown(
        embeddings=embeddings,
        lm_head=lm_head,
        attention=arch.layers * attention_per_layer + arch.decoder_layers * attention_per_layer,
        mlp=dense_layers * dense_mlp,
        experts=experts,
        shared_experts=shared,
        routers=routers,
        norms=arch.layers * norms_per_layer + arch.decoder_layers * _norm_parameters(arch, h) + final_norms,
        active_experts=active_experts,
        mtp=mtp,
        parts={"token_embeddings": token_embeddings, "attention_per_layer": attention_per_layer,
               "dense_mlp_per_layer": dense_mlp, "expert": per_expert, "dense_layers": dense_layers,
               "moe_layers": moe_layers, "norms_per_layer": norms_per_layer, "cross_attention": cross,
               "position_bias": position_bias},
    )


# ---------------------------------------------------------------------------------------------
# The linear layers of the blocks, and the low-rank adapters (LoRA) on them
# ---------------------------------------------------------------------------------------------

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
_T5_FAMILIES = ("t5", "mt5")
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
    if arch.family in _T5_FAMILIES:
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


# ---------------------------------------------------------------------------------------------
# Hugging Face config.json, read offline
# ---------------------------------------------------------------------------------------------

SUPPORTED_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "gpt2", "gpt_neox", "deepseek_v3", "t5", "mt5")


def _require(config: dict, key: str, origin: str):
    if key not in config or config[key] is None:
        raise ContractError(f"config.json has no {key!r}, which a {config.get('model_type')} model needs",
                            origin=origin)
    return config[key]


def from_hf_config(config: dict, origin: str = "config.json", name: str | None = None) -> Architecture:
    """An :class:`Architecture` from the keys of a Hugging Face ``config.json`` (no network, no transformers)."""
    family = config.get("model_type")
    if family not in SUPPORTED_FAMILIES:
        raise ContractError(f"{family!r} is not a supported family (supported: {', '.join(SUPPORTED_FAMILIES)}); "
                            "describe the architecture in the contract instead", field="model_type", origin=origin)

    def get(key):
        return _require(config, key, origin)

    label = name or config.get("_name_or_path") or family
    if family in _T5_FAMILIES:
        return _t5_architecture(config, label, origin)
    if family == "gpt2":
        h = get("n_embd")
        return Architecture(
            name=label, family=family, layers=get("n_layer"), hidden_size=h, attention_heads=get("n_head"),
            kv_heads=get("n_head"), ffn_size=config.get("n_inner") or 4 * h, vocab_size=get("vocab_size"),
            mlp="plain", tied_embeddings=config.get("tie_word_embeddings", True),
            position_embeddings=get("n_positions"), norm="layernorm", attention_bias="all", mlp_bias=True,
            max_sequence_length=get("n_positions"), source=origin)
    common = dict(
        name=label, family=family, layers=get("num_hidden_layers"), hidden_size=get("hidden_size"),
        attention_heads=get("num_attention_heads"),
        kv_heads=config.get("num_key_value_heads") or get("num_attention_heads"),
        vocab_size=get("vocab_size"), max_sequence_length=config.get("max_position_embeddings"), source=origin,
    )
    if family == "gpt_neox":
        return Architecture(**common, ffn_size=get("intermediate_size"), mlp="plain",
                            tied_embeddings=config.get("tie_word_embeddings", False), norm="layernorm",
                            attention_bias="all" if config.get("attention_bias", True) else "none", mlp_bias=True)
    head_dim = config.get("head_dim")
    if head_dim == common["hidden_size"] // common["attention_heads"]:
        head_dim = None
    tied = bool(config.get("tie_word_embeddings", False))
    if family in ("llama", "mistral", "mixtral", "qwen2"):
        bias = "qkv" if family == "qwen2" else ("all" if config.get("attention_bias") else "none")
        window = config.get("sliding_window")
        if family == "qwen2" and not config.get("use_sliding_window", False):
            window = None
        moe = None
        if family == "mixtral":
            moe = MoE(experts=get("num_local_experts"), experts_per_token=get("num_experts_per_tok"),
                      expert_ffn_size=get("intermediate_size"))
        return Architecture(**common, ffn_size=get("intermediate_size"), head_dim=head_dim, tied_embeddings=tied,
                            attention_bias=bias, mlp_bias=bool(config.get("mlp_bias", False)), moe=moe,
                            sliding_window=window)
    # deepseek_v3
    moe = MoE(experts=get("n_routed_experts"), experts_per_token=get("num_experts_per_tok"),
              expert_ffn_size=get("moe_intermediate_size"), shared_experts=config.get("n_shared_experts") or 0,
              first_dense_layers=config.get("first_k_dense_replace", 0),
              layer_frequency=config.get("moe_layer_freq", 1), router_bias=config.get("topk_method") == "noaux_tc")
    mla = MLA(q_lora_rank=config.get("q_lora_rank"), kv_lora_rank=get("kv_lora_rank"),
              qk_nope_head_dim=get("qk_nope_head_dim"), qk_rope_head_dim=get("qk_rope_head_dim"),
              v_head_dim=get("v_head_dim"))
    return Architecture(**common, ffn_size=get("intermediate_size"), tied_embeddings=tied, moe=moe, mla=mla,
                        mtp_layers=config.get("num_nextn_predict_layers", 0))


def _t5_architecture(config: dict, label: str, origin: str) -> Architecture:
    """T5 / mT5 (``T5Config``): d_model, d_ff, num_layers (encoder), num_decoder_layers (default num_layers),
    num_heads of d_kv, vocab_size, feed_forward_proj (relu | gated-gelu: wi or wi_0/wi_1), relative position
    buckets, tie_word_embeddings (default True: the original T5; False in T5 v1.1 and mT5)."""
    def get(key):
        return _require(config, key, origin)

    if config.get("is_encoder_decoder") is False:
        raise ContractError("a T5 config with is_encoder_decoder false (an encoder alone) is not a model botec "
                            "trains; give the encoder-decoder's config", field="is_encoder_decoder", origin=origin)
    projection = str(config.get("feed_forward_proj", "relu"))   # relu, gelu (wi) or gated-gelu, gated-silu (wi_0, wi_1)
    encoder, heads = get("num_layers"), get("num_heads")
    decoder = config.get("num_decoder_layers") or encoder
    return Architecture(
        name=label, family=config["model_type"], layers=encoder + decoder, decoder_layers=decoder,
        hidden_size=get("d_model"), attention_heads=heads, kv_heads=heads, head_dim=get("d_kv"),
        ffn_size=get("d_ff"), vocab_size=get("vocab_size"), mlp="gated" if projection.startswith("gated") else "plain",
        tied_embeddings=bool(config.get("tie_word_embeddings", True)), norm="rmsnorm",
        relative_attention_buckets=config.get("relative_attention_num_buckets", 32),
        source=origin)   # relative positions: no learned table bounds the length (n_positions is informational)


def read_hf_config(path: str | Path) -> Architecture:
    """Read a ``config.json`` file (or a folder holding one) into an :class:`Architecture`."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    origin = str(path)
    text = read_text_file(path)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractError(f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                            origin=origin) from None
    if not isinstance(config, dict):
        raise ContractError("a config.json is a JSON object", origin=origin)
    return from_hf_config(config, origin=origin, name=path.parent.name or None)


# ---------------------------------------------------------------------------------------------
# The shipped model catalog
# ---------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def model_catalog() -> dict[str, Architecture]:
    """Well-known models from ``catalog/models.yaml``, keyed by the name a contract uses."""
    from importlib import resources

    from botec.catalog import load_yaml_text
    from botec.units import parse_quantity

    data = load_yaml_text(resources.files("botec.catalog").joinpath("models.yaml").read_text(encoding="utf-8"))
    catalog = {}
    for key, entry in data["models"].items():
        entry = dict(entry)
        moe = MoE(**entry.pop("moe")) if entry.get("moe") else None
        mla = MLA(**entry.pop("mla")) if entry.get("mla") else None
        entry.pop("moe", None), entry.pop("mla", None)
        published = entry.pop("published_parameters", None)
        source = f"{entry.pop('source')} ({entry.pop('date')})"
        catalog[key] = Architecture(
            moe=moe, mla=mla, source=source,
            published_parameters=None if published is None else parse_quantity(published, "count"),
            **entry)
    return catalog


def infer_from_count(parameters: float, layers: int, hidden_size: int) -> Architecture:
    """A GPT-style shape for a bare parameter count (for measuring it): heads of width 128, a plain
    4h MLP, untied embeddings, and the vocabulary that makes the count come out right. A guess,
    stated as such wherever it is used.

    The count is linear in the vocabulary (an embedding row and an LM-head row per token), so the
    vocabulary follows from :func:`breakdown` at two sizes: V = (P − count(V=0)) / (count(V=1) − count(V=0)).
    """
    heads = max(1, hidden_size // 128)
    shape = Architecture(name=f"a {parameters / 1e9:.3g}B GPT-style shape inferred from the parameter count",
                         family="inferred", layers=layers, hidden_size=hidden_size, attention_heads=heads,
                         kv_heads=heads, ffn_size=4 * hidden_size, vocab_size=0, mlp="plain", norm="layernorm",
                         source="inferred: heads of 128, 4h MLP, untied embeddings")
    without = breakdown(shape).total
    per_token = breakdown(replace(shape, vocab_size=1)).total - without
    return replace(shape, vocab_size=max(256, round((parameters - without) / per_token)))


def as_dict(arch: Architecture) -> dict:
    """The architecture as plain data (for JSON output)."""
    return asdict(arch)

