"""``botec simulate``: a discrete-event simulation of LLM serving replicas and a fleet, beside the estimate.

The estimate's serving figures are analytic (:mod:`botec.serving.load`: Little's law for the decode batch,
an M/G/1 queue for the prompts). The simulation serves a stream of requests through the same engine step
(:func:`botec.serving.step.engine_step_seconds`, with the estimate's per-unit costs), step by step, with
the engine's scheduler in full (:mod:`botec.simulate.replica`: admission, chunked prefill, paged KV blocks,
preemption, prefix caching, speculative decoding) and n replicas behind a balancer
(:mod:`botec.simulate.fleet`). It measures what the analytic model approximates: latency distributions,
queueing under bursts, the effect of variable lengths, the balancer's choice.

Measurements (:class:`Simulation`):

- per request: TTFT = first token − arrival; TPOT = (finish − first token) / (O − 1), the mean time per
  output token after the first (requests with one output token have none); end-to-end = finish − arrival;
  their means and P50 / P90 / P99 (and the contract's percentile), over the requests after a warm-up: the
  first 5 % of requests by arrival are dropped (:data:`WARMUP_SHARE`);
- throughput: completions per second inside a window from the warm-up's end (5 % of the requests done)
  to the last admission (the last time the queue of a replica empties), so neither the ramp-up nor the
  drain counts; output tokens per second, and per accelerator; goodput: the completions in that window
  meeting every stated target, per second, and the share of requests meeting them;
- the batch: decoding requests averaged over time (Little's law's B, comparable to ``decode_batch_size``)
  and per step, the most requests running at once; preemptions; the simulated time;
- beside them, the analytic model's figures at the same load per replica (``at_load`` of
  :mod:`botec.serving.load`, the estimate's own functions).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Callable, Optional

__all__ = ["simulate", "Simulation", "Latency", "Analytic", "Verdict", "WARMUP_SHARE", "PERCENTILES"]

WARMUP_SHARE = 0.05
"""Share of the requests, first by arrival, left out of every measurement (the replica fills up meanwhile)."""

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class Latency:
    """A latency's mean and percentiles, seconds (NaN when no request measured it)."""

    mean_seconds: float
    p50_seconds: float
    p90_seconds: float
    p99_seconds: float
    at_target_percentile_seconds: float   # at the contract's latency percentile

    def percentile(self, level: int) -> float:
        return {50: self.p50_seconds, 90: self.p90_seconds, 99: self.p99_seconds}[level]


@dataclass(frozen=True)
class Analytic:
    """The estimate's model at the simulated load per replica (``botec.serving.load.at_load``)."""

    requests_per_s_per_replica: float
    time_to_first_token_seconds: float
    time_per_output_token_seconds: float
    time_to_first_token_percentile_seconds: float
    time_per_output_token_percentile_seconds: float
    decode_batch_size: float
    offline_requests_per_s_per_replica: float
    end_to_end_seconds: float              # TTFT + (O − 1) × TPOT, as end_to_end_latency_seconds

    @property
    def over_capacity(self) -> bool:
        return self.requests_per_s_per_replica >= self.offline_requests_per_s_per_replica


@dataclass(frozen=True)
class Verdict:
    """One latency target against the simulated percentile."""

    metric: str               # "TTFT" or "TPOT"
    percentile: int
    simulated_seconds: float
    target_seconds: float

    @property
    def met(self) -> bool:
        return self.simulated_seconds <= self.target_seconds


@dataclass
class Simulation:
    """What a simulation measured (see the module docstring); per-request records in ``records``."""

    contract_name: str
    workload: str
    engine: str
    chunked_prefill: bool
    requests: int
    warmup_requests: int
    measured_requests: int
    rejected_requests: int
    unfinished_requests: int
    replicas: int
    accelerators: int
    balancer: str
    seed: int
    offered_requests_per_s: float
    latency_percentile: int
    ttft: Latency
    tpot: Latency
    end_to_end: Latency
    ttft_target_seconds: Optional[float]
    tpot_target_seconds: Optional[float]
    share_meeting_targets: float
    goodput_requests_per_s: float
    throughput_requests_per_s: float
    output_tokens_per_s: float
    output_tokens_per_s_per_accelerator: float
    mean_decode_batch: float
    mean_step_batch: float
    max_running_batch: int
    preemptions: int
    simulated_seconds: float
    measurement_window_seconds: tuple[float, float]
    steps: int
    prompt_tokens: int
    prefill_tokens_computed: int
    speculative_tokens_per_step: Optional[float]
    analytic: Analytic
    records: dict = field(repr=False, default_factory=dict)

    @property
    def verdicts(self) -> list[Verdict]:
        out = []
        for metric, latency, target in (("TTFT", self.ttft, self.ttft_target_seconds),
                                        ("TPOT", self.tpot, self.tpot_target_seconds)):
            if target is not None:
                out.append(Verdict(metric, self.latency_percentile, latency.at_target_percentile_seconds, target))
        return out


def simulate(result, requests: int = 10_000, seed: int = 0, rate: Optional[float] = None,
             replicas: Optional[int] = None, balancer: str = "least-outstanding", trace=None,
             progress: Optional[Callable[[int, int], None]] = None, prompt_histogram=None,
             output_histogram=None) -> Simulation:
    """Simulate a serving estimate (``botec.estimate.estimate_file``'s result) serving ``requests`` requests.

    ``rate``: the fleet's arrivals per second (default the contract's traffic; ``math.inf``: all at t = 0);
    ``replicas``: default the estimate's; ``trace``: a CSV or JSON-lines file of recorded requests instead
    of drawn ones (it sets the count and the arrivals); the histogram files replace the drawn lengths.
    ``progress(done, total)`` follows the arrivals. Bad input raises a one-line UserError."""
    from botec.errors import UserError
    from botec.simulate.fleet import run_fleet
    from botec.simulate.replica import Engine, Ledger
    from botec.simulate.workload import read_trace, synthetic_workload

    if getattr(result, "kind", None) != "serving":
        raise UserError("botec simulate needs a serving contract (workload.kind: serving); this one is "
                        f"{getattr(result, 'kind', 'unknown')!r}")
    q = result.quantities
    if "prefill_instances" in q and q["prefill_instances"].value > 0:
        raise UserError("botec simulate runs prefill and decode on the same replicas (in-flight batching); this "
                        "contract disaggregates them (prefill instances): not simulated")
    if rate is not None and not (rate > 0):
        raise UserError(f"--rate: expected a positive number of requests per second, got {rate:g}")
    if trace is not None and rate is not None:
        raise UserError("--rate and --trace exclude each other: a trace carries its own arrival times")
    if replicas is None:
        estimated = float(q["replicas"].value)
        if not (math.isfinite(estimated) and estimated >= 1):
            raise UserError("the estimate has no replica count (no target can be met?): give --replicas")
        replicas = int(round(estimated))
    if replicas < 1:
        raise UserError(f"--replicas: expected at least 1 replica, got {replicas}")
    engine = Engine.from_estimate(result)
    if trace is not None:
        workload = read_trace(trace)
    else:
        if requests < 1:
            raise UserError(f"--requests: expected at least 1 request, got {requests}")
        offered = float(q["requests_per_s"].value) if rate is None else float(rate)
        workload = synthetic_workload(result.contract.workload.traffic, int(requests), offered,
                                      q["prompt_tokens"].value, q["output_tokens"].value, seed,
                                      prompt_histogram, output_histogram)
    offered = workload.mean_rate_per_s if trace is not None else offered
    cached = engine.cached_tokens(workload.prompt_tokens)
    ledger = Ledger(workload.arrival_seconds, workload.prompt_tokens, workload.output_tokens, cached)
    accepted = engine.footprint_blocks(workload.prompt_tokens, workload.output_tokens) <= engine.kv_capacity_blocks
    fleet = run_fleet(engine, ledger, replicas, balancer, seed, accepted.tolist(), progress)
    return _measure(result, engine, workload, ledger, fleet, accepted, replicas, balancer, seed, offered)


def _percentiles(values, level: int) -> "Latency":
    import numpy as np

    if len(values) == 0:
        return Latency(*(math.nan,) * 5)
    p50, p90, p99, at = np.percentile(values, [50, 90, 99, level])
    return Latency(float(np.mean(values)), float(p50), float(p90), float(p99), float(at))


def _analytic(result, rate_per_replica: float) -> Analytic:
    """The analytic model at ``rate_per_replica`` (capped just below saturation when over it)."""
    from botec.serving import latency, load

    q = result.quantities
    replica = load.Replica(**{name: q[name].value for name in latency.REPLICA if name in q})
    capacity = float(q["offline_requests_per_s_per_replica"].value)
    level = float(q["latency_percentile"].value)
    state = load.at_load(replica, min(rate_per_replica, capacity))
    z = NormalDist().inv_cdf(level)
    ttft = float(load.ttft_mean(state))
    return Analytic(rate_per_replica, ttft, float(state.tpot_mean), float(load.ttft_quantile(state, level)),
                    float(load.tpot_quantile(replica, state, z)), float(state.batch), capacity,
                    ttft + (float(q["output_tokens"].value) - 1) * float(state.tpot_mean))


def _measure(result, engine, workload, ledger, fleet, accepted, replicas, balancer, seed, offered) -> Simulation:
    import numpy as np

    q = result.quantities
    count = len(workload)
    arrival = workload.arrival_seconds
    first = np.array(ledger.first_token_s)
    finish = np.array(ledger.finish_s)
    outputs = workload.output_tokens
    warmup = math.ceil(WARMUP_SHARE * count) if count > 1 else 0
    done = np.isfinite(finish)
    kept = done.copy()
    kept[:warmup] = False
    level = int(round(float(q["latency_percentile"].value) * 100))
    ttft = first - arrival
    multi = outputs > 1
    tpot = np.where(multi, (finish - first) / np.maximum(outputs - 1, 1), np.nan)
    e2e = finish - arrival

    targets = {name: float(q[name].value) if name in q else None
               for name in ("time_to_first_token_target_seconds", "time_per_output_token_target_seconds")}
    meets = np.ones(count, dtype=bool)
    if targets["time_to_first_token_target_seconds"] is not None:
        meets &= ttft <= targets["time_to_first_token_target_seconds"]
    if targets["time_per_output_token_target_seconds"] is not None:
        meets &= ~multi | (tpot <= targets["time_per_output_token_target_seconds"])
    meets &= done

    # the window: from the warm-up's end (5 % of the requests done) to the last admission anywhere
    finished_sorted = np.sort(finish[done])
    start = float(finished_sorted[max(warmup - 1, 0)]) if len(finished_sorted) else 0.0
    admissions = [r.stats.last_admission_s for r in fleet if r.assigned]
    end = min(admissions) if admissions else math.nan
    in_window = None
    if not (end - start > 0) or np.count_nonzero((finish > start) & (finish <= end)) < 2:
        start, end = float(arrival[0]), float(finished_sorted[-1]) if len(finished_sorted) else 0.0
        in_window = done
    else:
        in_window = done & (finish > start) & (finish <= end)
    span = end - start
    throughput = np.count_nonzero(in_window) / span if span > 0 else math.nan
    tokens_per_s = float(outputs[in_window].sum()) / span if span > 0 else math.nan
    goodput = np.count_nonzero(in_window & meets) / span if span > 0 else math.nan
    accelerators = replicas * int(round(q["replica_accelerators"].value))

    stats = [r.stats for r in fleet]
    last = float(np.nanmax(finish)) if done.any() else float(arrival[0])
    duration = last - float(arrival[0])
    busy_span = [max(s.last_finish_s - s.first_arrival_s, 0.0) for s in stats if s.steps]
    mean_decode = (sum(s.decode_batch_seconds for s in stats) / sum(busy_span)) if sum(busy_span) > 0 else 0.0
    steps = sum(s.steps for s in stats)
    spec_steps = sum(s.speculative_steps for s in stats)
    kept_count = int(np.count_nonzero(kept))
    return Simulation(
        contract_name=result.contract.name or "contract", workload=workload.description,
        engine=result.contract.strategy.engine, chunked_prefill=engine.chunked_prefill, requests=count,
        warmup_requests=warmup, measured_requests=kept_count,
        rejected_requests=int(np.count_nonzero(~np.asarray(accepted))),
        unfinished_requests=int(np.count_nonzero(np.asarray(accepted) & ~done)), replicas=replicas,
        accelerators=accelerators, balancer=balancer, seed=seed, offered_requests_per_s=float(offered),
        latency_percentile=level, ttft=_percentiles(ttft[kept], level),
        tpot=_percentiles(tpot[kept & multi], level), end_to_end=_percentiles(e2e[kept], level),
        ttft_target_seconds=targets["time_to_first_token_target_seconds"],
        tpot_target_seconds=targets["time_per_output_token_target_seconds"],
        share_meeting_targets=float(np.count_nonzero(meets & kept)) / kept_count if kept_count else math.nan,
        goodput_requests_per_s=float(goodput), throughput_requests_per_s=float(throughput),
        output_tokens_per_s=tokens_per_s, output_tokens_per_s_per_accelerator=tokens_per_s / accelerators,
        mean_decode_batch=float(mean_decode),
        mean_step_batch=sum(s.decode_request_steps for s in stats) / steps if steps else 0.0,
        max_running_batch=max(s.max_running for s in stats), preemptions=sum(s.preemptions for s in stats),
        simulated_seconds=duration, measurement_window_seconds=(start, end), steps=steps,
        prompt_tokens=int(workload.prompt_tokens[np.asarray(accepted)].sum()),
        prefill_tokens_computed=sum(s.prefill_tokens for s in stats),
        speculative_tokens_per_step=(sum(s.speculative_tokens for s in stats) / spec_steps) if spec_steps else None,
        analytic=_analytic(result, offered / replicas),
        records={"arrival_s": arrival, "first_token_s": first, "finish_s": finish,
                 "prompt_tokens": workload.prompt_tokens, "output_tokens": outputs,
                 "replica": np.array(ledger.replica), "preemptions": np.array(ledger.preemptions),
                 "prefill_tokens_computed": np.array(ledger.prefill_computed), "measured": kept},
    )
