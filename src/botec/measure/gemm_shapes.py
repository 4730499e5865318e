"""The GEMMs a model's layers run, per rank: the shapes ``botec measure --efficiency-curve`` times.

GEMMs (``torch.matmul`` of activations ``[M, K]`` by a weight stored ``[N, K]`` and used transposed,
as ``nn.Linear`` runs it), at the contract's precision (bf16 or fp16), for the shapes a layer of the
contract's model really runs, per rank:

==================  ======  =====================  =====================
GEMM                M       K                      N
==================  ======  =====================  =====================
QKV (fused)         T       h                      (a + 2·k)·d / t
attention output    T       a·d / t                h
MLP up (fused)      T       h                      2·f / t (gated), f / t
MLP down            T       f / t                  h
LM head             T       h                      V / t
==================  ======  =====================  =====================

T = b·s / cp tokens (micro-batch b of 1 and the contract's, sequence s, context parallel cp), h hidden
size, a heads, k KV heads (at least one per rank when t > k: the KV heads are replicated), d head
dimension, f FFN size, V vocabulary, t the tensor-parallel degree: 1, 2, 4, 8 and the contract's, those
that divide the heads. Column-parallel layers (QKV, MLP up, LM head) split N over the TP ranks,
row-parallel ones (attention output, MLP down) split K, as Megatron-LM does. MoE layers add the router
(N = E) and the experts' MLPs at the tokens an expert gets on average, T·k_e/E; MLA (DeepSeek) its
low-rank Q and KV projections. The attention core (scores and values) is a batched product that
FlashAttention fuses, not a plain GEMM, and is left out. Square GEMMs (64 to 8,192; 16,384 on CUDA) fill
the curve. FLOPs of a GEMM: 2·M·K·N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["GemmShape", "layer_gemms", "model_gemms", "square_gemms", "tensor_parallel_degrees"]


@dataclass(frozen=True)
class GemmShape:
    """One GEMM: ``[M, K] @ [K, N]``; ``op`` says which (``qkv``, ``mlp_down``, ``square``, ...)."""

    op: str
    m: int
    k: int
    n: int
    tensor_parallel: int | None = None
    tokens: int | None = None

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n

    @property
    def gflop(self) -> float:
        return self.flops / 1e9

    @property
    def label(self) -> str:
        tp = f" tp{self.tensor_parallel}" if self.tensor_parallel else ""
        return f"{self.op}{tp} {self.m}×{self.k}×{self.n}"


def _per_rank(width: int, tp: int) -> int:
    return max(1, math.ceil(width / tp))


def _mlp(prefix: str, tokens: int, h: int, ffn: int, gated: bool, tp: int) -> list[GemmShape]:
    up = (2 if gated else 1) * ffn
    return [GemmShape(f"{prefix}_up", tokens, h, _per_rank(up, tp), tp, tokens),
            GemmShape(f"{prefix}_down", tokens, _per_rank(ffn, tp), h, tp, tokens)]


def layer_gemms(arch, tokens: int, tensor_parallel: int = 1) -> list[GemmShape]:
    """The GEMMs one rank runs for ``tokens`` tokens through a layer of ``arch`` (and the LM head), at
    tensor-parallel degree ``tensor_parallel`` (see the module docstring for the table)."""
    t, h = tensor_parallel, arch.hidden_size
    a = arch.attention_heads
    q_heads = _per_rank(a, t)
    gated = arch.mlp == "gated"
    shapes: list[GemmShape] = []
    if arch.mla:
        m = arch.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            shapes += [GemmShape("q_down", tokens, h, m.q_lora_rank, t, tokens),
                       GemmShape("q_up", tokens, m.q_lora_rank, q_heads * qk, t, tokens)]
        else:
            shapes.append(GemmShape("q", tokens, h, q_heads * qk, t, tokens))
        shapes += [GemmShape("kv_down", tokens, h, m.kv_lora_rank + m.qk_rope_head_dim, t, tokens),
                   GemmShape("kv_up", tokens, m.kv_lora_rank, q_heads * (m.qk_nope_head_dim + m.v_head_dim), t,
                             tokens),
                   GemmShape("attention_output", tokens, q_heads * m.v_head_dim, h, t, tokens)]
    else:
        d = arch.resolved_head_dim
        kv_heads = _per_rank(arch.kv_heads, t)
        shapes += [GemmShape("qkv", tokens, h, (q_heads + 2 * kv_heads) * d, t, tokens),
                   GemmShape("attention_output", tokens, q_heads * d, h, t, tokens)]
    if arch.moe is None or arch.moe_layers < arch.layers:
        shapes += _mlp("mlp", tokens, h, arch.ffn_size, gated, t)
    if arch.moe is not None:
        moe = arch.moe
        shapes.append(GemmShape("router", tokens, h, moe.experts, t, tokens))
        per_expert = max(1, round(tokens * moe.experts_per_token / moe.experts))
        shapes += _mlp("expert", per_expert, h, moe.expert_ffn_size, gated, t)
        if moe.shared_experts:
            shapes += _mlp("shared_expert", tokens, h, moe.shared_experts * moe.expert_ffn_size, gated, t)
    shapes.append(GemmShape("lm_head", tokens, h, _per_rank(arch.vocab_size, t), t, tokens))
    return shapes


def tensor_parallel_degrees(arch, contract_tp: int = 1) -> list[int]:
    """1, 2, 4, 8 and the contract's degree: those that divide the attention heads."""
    return sorted(t for t in {1, 2, 4, 8, contract_tp} if arch.attention_heads % t == 0)


def model_gemms(arch, micro_batch_size: int, sequence_length: int, tensor_parallel: int = 1,
                context_parallel: int = 1) -> list[GemmShape]:
    """The distinct GEMMs of ``arch``'s layers over the token ladder (micro-batch 1 and the contract's) and the
    TP degrees of :func:`tensor_parallel_degrees`, smallest first."""
    tokens = sorted({max(1, b * sequence_length // context_parallel) for b in {1, micro_batch_size}})
    shapes: dict[tuple[int, int, int], GemmShape] = {}
    for t in tensor_parallel_degrees(arch, tensor_parallel):
        for count in tokens:
            for shape in layer_gemms(arch, count, t):
                shapes.setdefault((shape.m, shape.k, shape.n), shape)
    return sorted(shapes.values(), key=lambda s: (s.flops, s.m, s.k, s.n))


def square_gemms(largest: int = 8192) -> list[GemmShape]:
    """Square GEMMs from 64 to ``largest``, doubling: they fill the curve between the model's shapes."""
    sizes, n = [], 64
    while n <= largest:
        sizes.append(GemmShape("square", n, n, n))
        n *= 2
    return sizes
