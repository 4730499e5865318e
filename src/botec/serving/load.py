"""A replica at saturation and under a load: the analytic model of in-flight batching.

Pure, elementwise functions over a replica's per-unit step costs (:mod:`botec.serving.step`) and
its requests, shared by the estimate's formulas (:mod:`botec.serving.latency`). Symbols: p pipeline
stages, B decoding requests, E tokens a request gains per step, P prompt tokens computed (prefix
cache hits excluded), O output tokens, λ arrivals per second on the replica, τ the time for every
running request to take one step (p stage steps), b the token budget of a step.

- Steady state at λ: B = λ·(O/E)·τ (Little's law), each stage step carries B/p decode tokens (× k+1
  when speculating) and, on average, λ·τ·P/p prefill tokens; τ = p · t_stage. Solved by fixed-point
  iteration from an empty replica (it converges below saturation; at and above it B is capped).
- Saturation: B_sat = min(max concurrent, max batch, ⌊b / (k₁ + E·P/O)⌋); capacity λ_sat = B_sat·E/(O·τ_sat).
- Prefill queue: the room left in a step, b − B/p·k₁ tokens, is the server of an M/G/1 queue of
  prompts; a prompt needs ⌈P / room⌉ chunks (S, through the p stages); the server is busy a share
  ρ = (λ·τ·P/p) / room of the steps. Wait: Pollaczek–Khinchine W̄ = ρ·S·(1 + c²)/(2(1 − ρ)), its
  q-quantile ≈ (W̄/ρ)·ln(ρ/(1 − q)) (an exponential tail with P(W > 0) = ρ). TTFT = W + S.
- TPOT: a request's steps carry a chunk with probability ρ: per token μ = p·((1 − ρ)·t₀ + ρ·t₁)/E; its
  q-quantile over the request's O/E steps ≈ μ + z_q · p·√(ρ(1 − ρ))·(t₁ − t₀)/(E·√(O/E)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from botec.graph.elementwise import ceil, floor, maximum, minimum, where
from botec.serving.step import engine_step_seconds

__all__ = ["Replica", "Load", "at_load", "saturation", "largest_rate_within"]

ITERATIONS = 60
BISECTIONS = 40


@dataclass
class Replica:
    """A replica's step costs (seconds per unit, see engine_step_seconds) and its requests' shape."""

    gemm_seconds_per_token: object
    weight_read_seconds: object
    expert_read_seconds: object
    expert_pick_probability: object
    attention_seconds_per_context_token: object
    kv_read_seconds_per_context_token: object
    logit_seconds_per_token: object
    communication_seconds_per_token: object
    fixed_seconds_per_step: object
    pipeline_parallel: object
    tokens_per_step: object           # E
    draft_tokens: object              # k (0: no speculation)
    draft_step_cost: object
    prefill_tokens_per_request: object    # P
    prefill_attention_tokens: object
    mean_kv_tokens_per_request: object    # cached tokens a decoding request reads
    output_tokens: object             # O
    max_batched_tokens: object        # b
    saturation_batch_size: object     # B_sat
    prompt_length_variation: object   # c²

    def stage_step(self, decoding, prefill):
        """One stage step with ``decoding`` requests (k + 1 tokens each when speculating) and ``prefill`` tokens,
        plus the draft model's k steps at their stated cost."""
        costs = dict(gemm_seconds_per_token=self.gemm_seconds_per_token, weight_read_seconds=self.weight_read_seconds,
                     expert_read_seconds=self.expert_read_seconds, expert_pick_probability=self.expert_pick_probability,
                     attention_seconds_per_context_token=self.attention_seconds_per_context_token,
                     kv_read_seconds_per_context_token=self.kv_read_seconds_per_context_token,
                     logit_seconds_per_token=self.logit_seconds_per_token,
                     communication_seconds_per_token=self.communication_seconds_per_token,
                     fixed_seconds_per_step=self.fixed_seconds_per_step)
        verify = self.draft_tokens + 1
        context = decoding * self.mean_kv_tokens_per_request
        finishing = prefill / maximum(self.prefill_tokens_per_request, 1.0)
        step = engine_step_seconds(decoding * verify, context * verify, prefill,
                                   prefill * self.prefill_attention_tokens, decoding + finishing, **costs)
        draft = engine_step_seconds(decoding, context, 0.0, 0.0, decoding, **costs)
        return step + self.draft_tokens * self.draft_step_cost * draft

    def room(self, decoding):
        """Prefill tokens a stage step may still carry beside ``decoding`` requests (at least one token)."""
        return maximum(self.max_batched_tokens - decoding * (self.draft_tokens + 1), 1.0)


@dataclass
class Load:
    rate: object            # λ, requests/s on the replica
    batch: object           # B, decoding requests
    round_seconds: object   # τ: every running request one step further
    busy_share: object      # ρ: the share of steps carrying a prefill chunk
    tpot_mean: object
    tpot_low: object        # t₀ (no chunk), per token
    tpot_high: object       # t₁ (a chunk), per token
    prefill_seconds: object  # S: a prompt's prefill, chunk by chunk through the stages
    wait_mean: object       # W̄


def _prefill(replica: Replica, batch, round_seconds, rate):
    """(ρ, S, t₀, t₁) for decode batch ``batch`` at ``rate`` with round ``round_seconds``."""
    stages = replica.pipeline_parallel
    micro = batch / stages
    room = replica.room(micro)
    chunk = minimum(room, replica.prefill_tokens_per_request)
    arriving = rate * round_seconds * replica.prefill_tokens_per_request / stages   # prefill tokens per stage step
    busy = minimum(arriving / room, 1.0)
    without, with_chunk = replica.stage_step(micro, 0.0), replica.stage_step(micro, chunk)
    chunks = ceil(replica.prefill_tokens_per_request / room)
    return busy, chunks * stages * with_chunk, without, with_chunk


def at_load(replica: Replica, rate) -> Load:
    """The steady state of a replica at ``rate`` requests/s (capped at its saturation batch)."""
    stages, emitted = replica.pipeline_parallel, replica.tokens_per_step
    round_seconds = stages * replica.stage_step(0.0, 0.0)
    batch = 0.0
    for _ in range(ITERATIONS):
        batch = minimum(rate * replica.output_tokens / emitted * round_seconds, replica.saturation_batch_size)
        prefill = minimum(rate * round_seconds * replica.prefill_tokens_per_request / stages,
                          replica.room(batch / stages))
        round_seconds = stages * replica.stage_step(batch / stages, prefill)
    busy, prefill_seconds, without, with_chunk = _prefill(replica, batch, round_seconds, rate)
    low, high = stages * without / emitted, stages * with_chunk / emitted
    mean = (1 - busy) * low + busy * high
    free = maximum(1 - busy, 1e-9)
    wait = busy * prefill_seconds * (1 + replica.prompt_length_variation) / (2 * free)
    return Load(rate, batch, round_seconds, busy, mean, low, high, prefill_seconds, wait)


def tpot_quantile(replica: Replica, load: Load, z):
    """The q-quantile of a request's mean time per output token (normal approximation over its O/E steps)."""
    steps = maximum(replica.output_tokens / replica.tokens_per_step, 1.0)
    spread = (load.tpot_high - load.tpot_low) * (load.busy_share * (1 - load.busy_share)) ** 0.5 / steps ** 0.5
    return load.tpot_mean + z * spread


def ttft_quantile(load: Load, q):
    """The q-quantile of the time to first token: the wait's exponential tail plus the prefill."""
    busy = maximum(load.busy_share, 1e-12)
    tail = where(busy > 1 - q, load.wait_mean / busy * _log(busy / maximum(1 - q, 1e-12)), 0.0)
    return tail + load.prefill_seconds


def _log(x):
    import numpy as np

    return np.log(x) if not isinstance(x, (int, float)) else math.log(x)


def saturation(replica: Replica):
    """(round seconds τ_sat, capacity λ_sat in requests/s) with B_sat requests running."""
    stages, batch = replica.pipeline_parallel, replica.saturation_batch_size
    prefill = batch / stages * replica.tokens_per_step * replica.prefill_tokens_per_request / replica.output_tokens
    round_seconds = stages * replica.stage_step(batch / stages, minimum(prefill, replica.room(batch / stages)))
    return round_seconds, batch * replica.tokens_per_step / (replica.output_tokens * round_seconds)


def largest_rate_within(replica: Replica, capacity, cap, meets):
    """The largest rate in [0, cap · capacity] at which ``meets(load)`` holds (monotone in the rate), by bisection;
    0 when even an idle replica fails."""
    low, high = capacity * 0.0, capacity * cap
    ok_high = meets(at_load(replica, high))
    ok_idle = meets(at_load(replica, capacity * 1e-9))
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        ok = meets(at_load(replica, middle))
        low, high = where(ok, middle, low), where(ok, high, middle)
    return where(ok_high, capacity * cap, where(ok_idle, low, 0.0))


def batch_limit(max_concurrent, max_batch, budget, decode_tokens, prefill_per_decode):
    """B_sat = max(1, min(max concurrent, max batch, ⌊b / (k₁ + E·P/O)⌋))."""
    return maximum(minimum(minimum(max_concurrent, max_batch), floor(budget / (decode_tokens + prefill_per_decode))),
                   1.0)
