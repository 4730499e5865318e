"""The bounds of an architecture's numbers and the relations its formulas need: one table for a contract's
``workload.model`` fields (:mod:`botec.contract.model`) and a Hugging Face ``config.json``'s keys
(:mod:`botec.architecture.hf_config`), so that the two ways of writing a shape accept the same shapes.

Every number of a shape is a whole number. Its lower end is what it counts: layers, heads, experts and widths
are at least 1; leading dense layers, shared experts, multi-token-prediction modules and learned positions may
be 0. Its upper end is at least 100 times the largest published value, so that no real or planned model is
refused, and small enough that every product botec forms of them stays finite:

==========================================  ==========  ====================================================
bound                                       range       largest published
==========================================  ==========  ====================================================
layers of a stack (and MoE spacing)         1 to 10^5   126 (Llama 3.1-405B); 1,000 (DeepNet, Wang et al. 2022)
attention and key/value heads               1 to 10^5   128 (DeepSeek-V3); 232 (Falcon-180B)
widths: hidden, FFN, expert FFN, head,      1 to 10^7   73,728 (PaLM-540B's FFN); 53,248 (Llama 3.1-405B's)
MLA ranks and head widths
vocabulary                                  1 to 10^8   262,144 (Gemma 3); 250,112 (mT5)
routed and shared experts                   1 to 10^8   2^20 = 1,048,576 (PEER, He 2024); 256 (DeepSeek-V3)
positions: context, sliding window,         1 to 10^9   10,485,760 (Llama 4 Scout's context)
learned positions, T5's relative buckets
==========================================  ==========  ====================================================

The largest product botec forms of them is the routed experts' parameters, L·E·3·h·f_e ≤ 10^5 · 10^8 · 3 ·
10^7 · 10^7 = 3·10^34; the training FLOPs 6·P·D with the 10^30 tokens a contract may state at most are
2·10^65, and a variance (their square) 4·10^130: all far below a float's 1.8·10^308. No allocation grows with
any of them (the MoE layers are counted, not listed: :attr:`~botec.architecture.shape.Architecture.moe_layers`).

The relations (:func:`shape_problem`): key/value heads divide the attention heads (each KV head serves a whole
group of query heads, GQA; MQA is 1, MHA all of them); without a stated head width the heads divide the hidden
size (d = h / a); a token's experts are no more than the experts; the leading dense layers are no more than
the layers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Bound", "LAYERS", "HEADS", "WIDTH", "VOCABULARY", "EXPERTS", "POSITIONS", "whole_number",
           "shape_problem"]


@dataclass(frozen=True)
class Bound:
    """A whole number from ``least`` to ``most``, both included."""

    least: int
    most: int

    @property
    def from_zero(self) -> "Bound":
        """The same upper end, 0 allowed (a count that may be none)."""
        return Bound(0, self.most)

    @property
    def expected(self) -> str:
        """What a refusal says was expected: ``a whole number from 1 to 100,000``."""
        return f"a whole number from {self.least:,} to {self.most:,}"


LAYERS = Bound(1, 10**5)
HEADS = Bound(1, 10**5)
WIDTH = Bound(1, 10**7)
VOCABULARY = Bound(1, 10**8)
EXPERTS = Bound(1, 10**8)
POSITIONS = Bound(1, 10**9)


def whole_number(value, bound: Bound) -> int | None:
    """``value`` as an int when it is a whole number within ``bound``, else None.

    A whole number is a JSON integer, or a float whose value is whole (``4096.0``: JSON has one kind of number,
    and some writers add the ``.0``). Not a bool (``true`` is no count), not a string (``"32"``: botec does not
    guess that text is a number, nor does transformers), not a fraction, NaN or infinity.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        if not (math.isfinite(value) and value.is_integer()):
            return None
        value = int(value)
    return value if bound.least <= value <= bound.most else None


def shape_problem(hidden_size: int, attention_heads: int, kv_heads: int, head_dim: int | None, layers: int,
                  experts: int | None = None, experts_per_token: int | None = None,
                  first_dense_layers: int = 0, latent_attention: bool = False) -> tuple[str, str] | None:
    """The first relation a shape breaks, as (the role it blames, what was expected), or None when it keeps them all.

    Roles: ``kv_heads``, ``attention_heads``, ``experts_per_token``, ``first_dense_layers`` (each reader names
    its own key or field for the role). ``latent_attention``: MLA (DeepSeek-V2/V3) has its own head widths, so
    the heads need not divide the hidden size.
    """
    if kv_heads > attention_heads or attention_heads % kv_heads:
        return "kv_heads", (f"key/value heads that divide the {attention_heads:,} attention heads (each serves a "
                            f"whole group of query heads), got {kv_heads:,}")
    if head_dim is None and not latent_attention and hidden_size % attention_heads:
        return "attention_heads", (f"heads that divide the hidden size {hidden_size:,} (no head width is stated: "
                                   f"d = h / a), got {attention_heads:,}")
    if experts is not None and experts_per_token is not None and experts_per_token > experts:
        return "experts_per_token", f"at most the {experts:,} experts, got {experts_per_token:,}"
    if first_dense_layers > layers:
        return "first_dense_layers", f"at most the {layers:,} layers, got {first_dense_layers:,}"
    return None
