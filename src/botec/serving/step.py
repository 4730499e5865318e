"""One engine step of in-flight batching, on the rooflines: the function the estimate and the simulator share.

An engine (vLLM, TensorRT-LLM, SGLang) runs steps: each carries one token of every running
request that is decoding and a chunk of prompt tokens of the requests being prefilled
(Orca's iteration-level scheduling, Yu et al. 2022; chunked prefill, Agrawal et al. 2024,
Sarathi-Serve). On one accelerator of a replica a step of ``T = d + p`` tokens (d decoding
sequences, p prefill tokens) takes

    t = max(F_gemm / (e_mm · peak), W(T) / (e_mem · BW))                 the weight GEMMs
      + max(F_attn / (e_attn · peak₁₆), KV / (e_mem · BW))                attention over the cache
      + F_logits / (e_mm · peak)                                          the LM head, sampled tokens only
      + n_ar · (α_ar + 2(t−1)/t · T·h·b / B_link)                        tensor-parallel all-reduces
      + T · e                                                             norms, residuals, activation, permutation
      + n_kernels · t0 + t_step                                           kernel and engine overheads

with F_gemm = 2·N_active·T / t (matmul parameters per device), W(T) the weights read once per
step — the dense ones always, each expert only when one of the T tokens picks it (expected
experts touched: E·(1 − (1 − k/E)^T)) — F_attn = 2 · (attention width per context token) ×
(the context tokens the step's queries attend), KV the cache bytes those contexts read, α_ar the
small-message latency of one all-reduce (the engine's custom all-reduce or NCCL's low-latency
protocol), t0 a fixed cost per kernel with the decode step captured in CUDA graphs, and t_step the
engine's CPU overhead per step not hidden behind the GPU (scheduling, sampling). The figures
e_mm, e_mem, e_attn are the accelerator family's (``catalog/efficiency.yaml``, as in training);
α_ar, t0 and t_step the engine's (``catalog/engines.yaml``).

Every function here is elementwise: the estimate calls it on floats or numpy arrays (sweeps), the
simulator on the batch each step really holds. Sources: the roofline (Williams et al. 2009);
the decode roofline max(B·a, w + B·k) of Databricks' MBU and the scaling book; the expected
number of distinct experts (formula audit row 29); speculative decoding's expected tokens
(Leviathan et al. 2023, eq. 1).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from botec.graph.elementwise import maximum, where

__all__ = ["engine_step_seconds", "experts_touched_share", "speculative_tokens_per_step", "StepModel",
           "STEP_INPUTS"]


def experts_touched_share(tokens, expert_pick_probability):
    """Expected share of the experts that at least one of ``tokens`` routes to: 1 − (1 − k/E)^T (0 for dense)."""
    return where(expert_pick_probability > 0, 1 - (1 - expert_pick_probability) ** maximum(tokens, 0), 0.0)


def speculative_tokens_per_step(draft_tokens, acceptance_rate):
    """Tokens a sequence gains per verification step with k draft tokens accepted each with probability α:
    (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023); 1 without speculation (k = 0)."""
    alpha = maximum(acceptance_rate, 0.0)
    return where(alpha < 1, (1 - alpha ** (draft_tokens + 1)) / maximum(1 - alpha, 1e-12), draft_tokens + 1)


def engine_step_seconds(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens, sampled_tokens,
                        *, gemm_seconds_per_token, weight_read_seconds, expert_read_seconds, expert_pick_probability,
                        attention_seconds_per_context_token, kv_read_seconds_per_context_token,
                        logit_seconds_per_token, communication_seconds_per_token, fixed_seconds_per_step,
                        elementwise_seconds_per_token=0.0):
    """Seconds of one engine step on one accelerator of a replica (see the module docstring), from the
    replica's per-unit costs:

    ``decode_tokens`` d (one per decoding request, k + 1 when speculating) and ``prefill_tokens`` p make the
    step's T tokens; ``decode_context_tokens`` is the sum of the decoding tokens' contexts (each reads its
    whole cache) and ``prefill_context_tokens`` the sum, over prefill tokens, of the tokens each attends;
    ``sampled_tokens`` the positions the LM head runs for.

        t = max(g·T, w + x·(1 − (1 − k/E)^T)) + max(a·(C_d + C_p), c·(C_d + p)) + l·s + (r + e)·T + f

    g = gemm_seconds_per_token, w = weight_read_seconds, x = expert_read_seconds, a =
    attention_seconds_per_context_token, c = kv_read_seconds_per_context_token, l =
    logit_seconds_per_token, r = communication_seconds_per_token, f = fixed_seconds_per_step, e =
    elementwise_seconds_per_token (the memory-bound ops of each token).
    """
    tokens = decode_tokens + prefill_tokens
    weights = weight_read_seconds + expert_read_seconds * experts_touched_share(tokens, expert_pick_probability)
    gemms = maximum(gemm_seconds_per_token * tokens, weights)
    attention = maximum(attention_seconds_per_context_token * (decode_context_tokens + prefill_context_tokens),
                        kv_read_seconds_per_context_token * (decode_context_tokens + prefill_tokens))
    return (gemms + attention + logit_seconds_per_token * sampled_tokens
            + (communication_seconds_per_token + elementwise_seconds_per_token) * tokens + fixed_seconds_per_step)


# The graph quantities an engine step reads, in the order of engine_step_seconds's keyword arguments.
STEP_INPUTS = ("gemm_seconds_per_token", "weight_read_seconds", "expert_read_seconds", "expert_pick_probability",
               "attention_seconds_per_context_token", "kv_read_seconds_per_context_token", "logit_seconds_per_token",
               "communication_seconds_per_token", "fixed_seconds_per_step", "elementwise_seconds_per_token")


@dataclass(frozen=True)
class StepModel:
    """One replica's per-unit costs, bound from an estimate: ``step(...)`` is engine_step_seconds."""

    gemm_seconds_per_token: float
    weight_read_seconds: float
    expert_read_seconds: float
    expert_pick_probability: float
    attention_seconds_per_context_token: float
    kv_read_seconds_per_context_token: float
    logit_seconds_per_token: float
    communication_seconds_per_token: float
    fixed_seconds_per_step: float
    elementwise_seconds_per_token: float = 0.0

    @classmethod
    def from_quantities(cls, quantities) -> "StepModel":
        """From an estimate's quantities (``result.quantities``: name -> Quantity)."""
        return cls(*(float(quantities[name].value) for name in STEP_INPUTS))

    def step(self, decode_tokens, decode_context_tokens, prefill_tokens=0.0, prefill_context_tokens=0.0,
             sampled_tokens=None):
        """Seconds of a step (``sampled_tokens`` defaults to the decoding tokens)."""
        if sampled_tokens is None:
            sampled_tokens = decode_tokens
        return engine_step_seconds(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                                   sampled_tokens, **{f.name: getattr(self, f.name) for f in fields(self)})
