"""A replica's engine: its figures (:class:`Engine`, read from an estimate), the scheduling policy the replica's
scheduler follows (:class:`botec.simulate.replica.Replica` runs it), and the arithmetic of its steps.

The engine runs steps (Orca's iteration-level scheduling, Yu et al. 2022). Each step carries one token
of every decoding request (k + 1 when speculating) and, with chunked prefill (Sarathi-Serve, Agrawal et
al. 2024), chunks of the prompts being prefilled, first come first served, filling what is left of the
step's token budget. Its time is :func:`botec.serving.step.engine_step_seconds` — the function the
estimate uses — on the batch the step really holds: the decoding requests and the sum of their contexts,
the prefill tokens and the sum of the tokens each attends, the positions sampled.

Scheduling, as vLLM's scheduler does it (``vllm/core/scheduler.py``, V0; V1 keeps the policy):

- **admission**: the queue's head joins while fewer than ``max_batch_size`` requests run, the step has
  token budget left (chunked prefill), and the KV cache has the blocks for its prompt (paged attention,
  Kwon et al. 2023: blocks of 16 tokens; capacity ⌊kv_budget_bytes / cache_bytes_per_token_per_device / 16⌋
  blocks, a token's bytes the target's KV and a speculative draft's). First come, first served: a head that
  does not fit blocks the queue. With ``kv_reservation: full`` (TensorRT-LLM's GUARANTEED_NO_EVICT capacity
  scheduler) a request is admitted only when the blocks of its whole footprint, ⌈min(P + O − 1, W)/16⌉, fit
  beside those every running request has reserved: the cache never overflows and nothing is preempted
  (a lone request is admitted whatever its size, as with paging).
- **prefill**: chunked, a step carries the decode tokens and then prompt chunks up to the budget b (b −
  ⌈B/p⌉·(k+1) per micro-batch, at least one token); without chunked prefill (TensorRT-LLM's preset) a step
  prefills whole prompts, as many as the budget holds (at least one), and decodes pause for it. The last
  prompt token's step samples the first output token: the time to first token ends with that step.
- **prefix caching** removes ⌊h·P⌉ of a prompt's P tokens (h = ``prefix_cache_hit_rate``) from its prefill
  (at least the last token is computed); they are attended. Their full blocks are shared, held once per
  replica (vLLM's automatic prefix caching hashes and reference-counts full blocks; SGLang's radix tree):
  the requests' cached prefixes are read as one shared prefix (each request's the first ⌊h·P⌉ tokens of
  it), the replica holds the longest it has admitted (× ``shared_prefix_copies``: every rank's own
  copy under data-parallel attention), a request its other blocks. The prefix is never evicted; a
  request whose context outgrows the sliding window shares nothing.
- **decode**: a request's context (prompt + tokens generated) grows by a token per step and its blocks
  with it; a sliding attention window W caps both what a token attends and what the cache keeps.
- **preemption** (recompute): when the decoders' new blocks would overflow the cache, the most recently
  admitted running request is evicted; it returns to the queue's front with its generated tokens kept
  as prompt, to be prefilled again.
- **speculative decoding** (Leviathan et al. 2023): each step a request gains 1 + the accepted prefix of
  k drafts, each accepted with probability α, at most what its output still needs; the step verifies
  k + 1 tokens per request, their queries against one read of its cache, and adds the draft's k steps
  at ``draft_step_cost`` of a decode step (as :meth:`botec.serving.load.Replica.stage_step` does).
- **disaggregated** (:mod:`botec.simulate.disaggregated`): a request whose prompt a prefill instance computed
  arrives with its KV (state ``_PREFILLED``) and joins the decoders at admission, its blocks permitting; evicted, it
  is recomputed here as any other.

**Pipeline parallelism** follows :mod:`botec.serving.load`: p stages keep p micro-batches in flight (vLLM's
virtual engines), each of B/p requests, so one simulated step is a *round* in which every running request
takes one step: τ = p · t_stage(B/p decoding, their contexts / p, the prefill tokens / p, ...), each
micro-batch with its own budget b. A token's latency is p stage steps. With p = 1 a round is a step.

The step arithmetic the scheduler uses: :func:`steps_to_reach` (how many decode steps of linearly growing time
cover a span), :func:`decode_run` (the same, and a run's time, for a step curved in the context: summed step by
step) and :func:`attended_tokens` (what a prompt chunk attends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from botec.errors import UserError
from botec.serving.step import StepModel

__all__ = ["BLOCK_TOKENS", "Engine", "steps_to_reach", "decode_run", "attended_tokens"]

BLOCK_TOKENS = 16
"""Tokens per KV-cache block (vLLM's default block size)."""


@dataclass(frozen=True)
class Engine:
    """A replica's figures, read from an estimate: the step costs and the engine's limits."""

    step_model: StepModel
    pipeline_parallel: int
    max_batch_size: int
    max_batched_tokens: int
    kv_capacity_blocks: int
    attention_window_tokens: int
    prefix_cache_hit_rate: float
    draft_tokens: int
    draft_acceptance_rate: float
    draft_step_cost: float
    chunked_prefill: bool
    shared_prefix_copies: int = 1
    full_kv_reservation: bool = False      # kv_reservation: full (TensorRT-LLM); else incremental (paged)
    decode_tokens_in_budget: bool = True   # the budget bounds decode tokens too (False: prefill only, SGLang)

    @classmethod
    def from_estimate(cls, result) -> "Engine":
        """From a serving estimate's quantities (``result.quantities``) and its engine preset's chunked-prefill flag."""
        q = {name: quantity.value for name, quantity in result.quantities.items()}
        tokens = q["kv_budget_bytes"] / q["cache_bytes_per_token_per_device"]
        blocks = math.floor(tokens / BLOCK_TOKENS) if math.isfinite(tokens) else 0
        if blocks < 1:
            raise UserError("the weights leave no room for a KV cache on this replica: nothing to simulate "
                            f"(kv_budget_bytes = {q['kv_budget_bytes']:.4g})")
        preset = result.inputs.engine
        return cls(step_model=StepModel.from_quantities(result.quantities),
                   pipeline_parallel=int(q["pipeline_parallel"]), max_batch_size=int(q["max_batch_size"]),
                   max_batched_tokens=int(q["max_batched_tokens"]), kv_capacity_blocks=blocks,
                   attention_window_tokens=int(q["attention_window_tokens"]),
                   prefix_cache_hit_rate=float(q["prefix_cache_hit_rate"]), draft_tokens=int(q["draft_tokens"]),
                   draft_acceptance_rate=float(q["draft_acceptance_rate"]),
                   draft_step_cost=float(q["draft_step_cost"]),
                   chunked_prefill=bool(preset.value("chunked_prefill")),
                   shared_prefix_copies=int(q["shared_prefix_copies"]),
                   full_kv_reservation=result.inputs.choices["kv_reservation"] == "full",
                   decode_tokens_in_budget=bool(q["decode_tokens_in_budget"]))

    def round_function(self):
        """τ(decoding, decode context, prefill tokens, prefill context, sampled): one round of the replica,
        p × a stage step on 1/p of the batch (see the module docstring), plus the draft model's k steps when
        speculating. Every term is :func:`engine_step_seconds` with the StepModel's costs bound once, in its
        scalar form (:func:`botec.serving.step.scalar_engine_step`: the scheduler passes plain numbers)."""
        step = self.step_model.scalar_step()
        stages, drafts, draft_cost = self.pipeline_parallel, self.draft_tokens, self.draft_step_cost
        verified = drafts + 1

        if stages == 1 and drafts == 0:
            return step

        def round_seconds(decoding, decode_context, prefill, prefill_context, sampled):
            micro, context = decoding / stages, decode_context / stages
            stage = step(micro * verified, context, prefill / stages, prefill_context / stages,
                         (sampled + decoding * drafts) / stages,   # the LM head at each of the k + 1 positions
                         verified)   # k + 1 queries a request, its cache read once
            if drafts:
                stage += drafts * draft_cost * step(micro, context, 0.0, 0.0, micro)
            return stages * stage

        return round_seconds

    def cached_tokens(self, prompt_tokens):
        """Prompt tokens found in the prefix cache: ⌊h·P⌉, leaving at least one to compute (elementwise)."""
        return np.minimum(np.rint(self.prefix_cache_hit_rate * np.asarray(prompt_tokens)),
                          np.asarray(prompt_tokens) - 1).astype(np.int64)

    def footprint_blocks(self, prompt_tokens, output_tokens):
        """KV blocks a request holds at its last step: ⌈min(P + O − 1, W) / 16⌉ (elementwise)."""
        tokens = np.minimum(np.asarray(prompt_tokens) + np.asarray(output_tokens) - 1, self.attention_window_tokens)
        return -(-tokens // BLOCK_TOKENS)


_UNRESOLVED_STEPS = 2 ** 50
"""Steps beyond which a float64 sum of them no longer changes by one step (its last bit outweighs the step)."""


def steps_to_reach(seconds: float, first: float, slope: float) -> int:
    """The smallest j ≥ 1 whose steps, t_i = first + i·slope (i = 0 … j−1), last at least ``seconds``:
    j·first + slope·j(j − 1)/2 ≥ seconds (the positive root of the quadratic, then checked exactly).

    The root is within a step or two of exact (its relative error is float64's), so the checks take a step or two;
    beyond ``_UNRESOLVED_STEPS`` steps, where floats cannot tell j steps from j + 1, the root is kept as it is
    (checking it would never end)."""
    if slope > 0:
        half = first - slope / 2
        j = math.ceil(2 * seconds / (half + math.sqrt(half * half + 2 * slope * seconds)))
    else:
        j = math.ceil(seconds / first)
    if j < 1:
        j = 1
    elif j > _UNRESOLVED_STEPS:
        return j
    while j > 1 and (j - 1) * first + slope * (j - 1) * (j - 2) / 2 >= seconds:
        j -= 1
    while j * first + slope * j * (j - 1) / 2 < seconds:
        j += 1
    return j


def decode_run(round_seconds, decoding: int, context: int, growers: int, first: float, steps: int,
               seconds: float = math.inf) -> tuple[int, float]:
    """(j, Σ_{i<j} τ(d, C + i·g)): a decode-only run's steps summed one at a time, the exact time of a run whose
    step is not affine in the context (a measured attention table's knee ‖σ·d, κ·C‖_p, curved in C). d =
    ``decoding``, C = ``context`` (the first step's decode context), g = ``growers`` (the contexts still growing, one
    token a step each), τ = ``round_seconds`` and ``first`` = τ(d, C), already computed. j = ``steps``, or sooner
    the first j whose steps last at least ``seconds`` (as :func:`steps_to_reach`, for a curved step: an arrival at
    ``seconds`` joins after that step). The sum is the step-by-step one, so the clock it moves agrees with a step
    by step scheduler's to a few float64 roundings (each step's own rounding, no model error)."""
    if steps < 1:
        return 0, 0.0
    elapsed, j = first, 1
    while j < steps and elapsed < seconds:
        context += growers
        elapsed += round_seconds(decoding, context, 0, 0, decoding)
        j += 1
    return j, elapsed


def attended_tokens(position: int, tokens: int, window: int) -> int:
    """Σ over the prompt positions q = position … position + tokens − 1 of min(q + 1, W): the cached tokens
    each prefill token attends (causal, within a sliding window W)."""
    end = position + tokens
    below = min(end, window)                  # positions q < W attend q + 1 tokens
    total = (below * (below + 1) - position * (position + 1)) // 2 if below > position else 0
    return total + window * (end - max(position, window)) if end > window else total

