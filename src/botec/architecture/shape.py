"""A model's shape (:class:`Architecture`) -> its parameters by part (:func:`breakdown`), total and active per token.

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

from dataclasses import dataclass, field

__all__ = ["Architecture", "MoE", "MLA", "ParameterBreakdown", "breakdown", "T5_FAMILIES"]

T5_FAMILIES = ("t5", "mt5")   # the encoder-decoder families (decoder_layers, cross attention, relative positions)


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
        """Layers with routed experts: every n-th of the L − k layers after the k leading dense ones, the first of
        them included, ⌈(L − k) / n⌉ (counted, not listed: nothing grows with L)."""
        if self.moe is None:
            return 0
        after_dense = max(0, self.layers - self.moe.first_dense_layers)
        return -(-after_dense // self.moe.layer_frequency)


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

