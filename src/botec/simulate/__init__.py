"""``botec simulate``: a discrete-event simulation of LLM serving replicas and a fleet, beside the estimate.

The estimate's serving figures are analytic (:mod:`botec.serving.load`: Little's law for the decode batch,
a replica's G/G/1 queue for the prompts, with the gaps the default round-robin balancer leaves it). The simulation serves a stream of requests through the same engine step
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
  meeting every stated target, per second, and the share of requests meeting them; a warning when the measured
  requests arrive over less than :data:`STEADY_FILLS` × the time a request stays (the batch never settles);
- the batch: decoding requests averaged over time (Little's law's B, comparable to ``decode_batch_size``)
  and per step, the most requests running at once; preemptions; the simulated time;
- beside them, the analytic model's figures at the same load per replica (``at_load`` of
  :mod:`botec.serving.load`, the estimate's own functions).

**Streaming.** Nothing grows with the number of requests: they are drawn (or read from a trace) in blocks as
they are served (:mod:`botec.simulate.workload`, :mod:`botec.simulate.trace`), a request's state lives only
while it is in the system (:class:`botec.simulate.ledger.StreamLedger`), and a finished one is folded into
running aggregates (:class:`botec.simulate.tally.Tally`): exact counts and means, percentiles exact up to
100,000 values and then from a quantile sketch within 1 % of the exact ones
(:mod:`botec.simulate.streaming`; ``Latency.relative_accuracy`` says which). Per-request records
(``Simulation.records``) are kept for the first 100,000 requests. Memory is then what the requests in the
system at once take: a steady load holds a few hundred; a fleet over capacity, or ``rate=inf``, queues
requests without bound, each waiting one holding its scheduler state (about 0.6 kB, as before streaming).
Before a request queues, a prompt longer than the model's context is refused and an output the context cannot
hold is cut, as vLLM does (:func:`botec.simulate.ledger.screen`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Callable, Optional

__all__ = ["simulate", "Simulation", "Latency", "Analytic", "Verdict", "WARMUP_SHARE", "PERCENTILES", "RECORDS"]

WARMUP_SHARE = 0.05
"""Share of the requests, first by arrival, left out of every measurement (the replica fills up meanwhile)."""

RECORDS = 100_000
"""Requests, first by arrival, whose per-request times ``Simulation.records`` keeps (memory: 60 bytes each)."""

PERCENTILES = (50, 90, 99)

STEADY_FILLS = 10
"""A run is in steady state when its measured requests arrive over at least this many times the time a request stays
(the analytic end-to-end latency: the decode batch fills in about that long, and drains as long after the last
arrival), so that at most about a tenth of them see the batch filling or draining; else the report warns."""


@dataclass(frozen=True)
class Latency:
    """A latency's mean and percentiles, seconds (NaN when no request measured it); the mean is exact, the
    percentiles exact (``relative_accuracy`` 0) or within ``relative_accuracy`` of exact (a quantile sketch)."""

    mean_seconds: float
    p50_seconds: float
    p90_seconds: float
    p99_seconds: float
    at_target_percentile_seconds: float   # at the contract's latency percentile
    relative_accuracy: float = 0.0

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
    """What a simulation measured (see the module docstring). ``records``: per-request arrays (arrival_s,
    first_token_s, finish_s, prompt_tokens, output_tokens as served, replica, preemptions,
    prefill_tokens_computed, measured) of the first ``RECORDS`` requests by arrival (all of a smaller run)."""

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
    context_tokens: Optional[int] = None          # the model's context, L (None: it states none)
    prompts_over_context: int = 0                 # refused: the prompt is longer than L (counted in rejected)
    outputs_cut_at_context: int = 0               # served, the output cut at L − P tokens
    records: dict = field(repr=False, default_factory=dict)
    prefill_instances: int = 0                    # disaggregated: prefill instances per decode instance (0: colocated)
    warnings: tuple = ()                          # one line each: what makes the figures less than they seem

    @property
    def disaggregated(self) -> bool:
        return self.prefill_instances > 0

    @property
    def percentile_relative_accuracy(self) -> float:
        """0 when every percentile is exact, else the sketch's relative accuracy."""
        return max(self.ttft.relative_accuracy, self.tpot.relative_accuracy, self.end_to_end.relative_accuracy)

    @property
    def verdicts(self) -> list[Verdict]:
        out = []
        for metric, latency, target in (("TTFT", self.ttft, self.ttft_target_seconds),
                                        ("TPOT", self.tpot, self.tpot_target_seconds)):
            if target is not None:
                out.append(Verdict(metric, self.latency_percentile, latency.at_target_percentile_seconds, target))
        return out


def simulate(result, requests: int = 10_000, seed: int = 0, rate: Optional[float] = None,
             replicas: Optional[int] = None, balancer: str = "round-robin", trace=None,
             progress: Optional[Callable[[int, int], None]] = None, prompt_histogram=None,
             output_histogram=None, concurrency: Optional[int] = None,
             think_time: Optional[float] = None, records: int = RECORDS, prefill_instance=None,
             ramp: Optional[float] = None) -> Simulation:
    """Simulate a serving estimate (``botec.estimation.estimate_file``'s result) serving ``requests`` requests.

    ``rate``: the fleet's arrivals per second (default the contract's traffic; ``math.inf``: all at t = 0);
    ``concurrency``: instead, that many users in a closed loop, each sending its next request when its last one
    ends, after ``think_time`` seconds (:mod:`botec.simulate.closed`; the default for a contract whose traffic
    states concurrency); ``ramp``: the closed loop's users start over that many seconds, one more every ramp / N
    (0: all at once; default one cycle of the loop, :mod:`botec.simulate.closed`); ``replicas``: default the
    estimate's (``supply.replicas`` when the contract pins the fleet); ``trace``: a CSV or JSON-lines file of recorded
    requests instead of drawn ones (it sets the count and the arrivals); the histogram files replace the drawn
    lengths. ``progress(done, total)`` follows the arrivals; ``records``: per-request records kept for that many
    requests, first by arrival. A disaggregated contract runs each replica as its prefill instances and a decode
    instance (:mod:`botec.simulate.disaggregated`); ``prefill_instance``, a :class:`botec.serving.load.Replica`,
    gives the prefill instances costs of their own (default the decode instance's layout), in the simulation and
    the analytic figures beside it. Bad input raises a one-line UserError."""
    from botec.errors import UserError
    from botec.simulate.engine import Engine
    from botec.simulate.fleet import run_fleet
    from botec.simulate.ledger import StreamLedger
    from botec.simulation_limits import (MAX_REQUESTS, check_arrival_span, check_replicas, check_seed,
                                       check_think_time)
    from botec.simulate.trace import trace_stream
    from botec.simulate.workload import synthetic_stream

    if getattr(result, "kind", None) != "serving":
        raise UserError("botec simulate needs a serving contract (workload.kind: serving); this one is "
                        f"{getattr(result, 'kind', 'unknown')!r}")
    q = result.quantities
    instances = int(round(float(q["prefill_instances"].value))) if "prefill_instances" in q else 0
    if prefill_instance is not None and not instances:
        raise UserError("prefill_instance: the contract runs prefill and decode on the same replicas; give "
                        "strategy.disaggregation for prefill instances of their own")
    if instances and prefill_instance is None:
        from botec.serving.instances import replica_of_quantities

        prefill_instance = replica_of_quantities(q).prefill_instance   # strategy.disaggregation.prefill, if stated
    if rate is not None and not (rate > 0):
        raise UserError(f"--rate: expected a positive number of requests per second, got {rate:g}")
    if trace is not None and rate is not None:
        raise UserError("--rate and --trace exclude each other: a trace carries its own arrival times")
    check_seed(seed)
    users, think = _closed_loop(result, rate, trace, concurrency, think_time)
    given = replicas is not None
    if replicas is None:
        estimated = float(q["replicas"].value)
        if not (math.isfinite(estimated) and estimated >= 1):
            raise UserError("the estimate has no replica count (no target can be met?): give --replicas")
        replicas = int(round(estimated))
    check_replicas(replicas, given)
    engine = Engine.from_estimate(result)
    if users is not None and instances:
        raise UserError("--concurrency: a closed loop is not simulated on disaggregated replicas "
                        "(strategy.disaggregation); give --rate")
    if users is not None:
        from botec.simulate.closed import simulate_closed

        check_think_time(requests, users, think, "--think-time" if think_time is not None else
                         "workload.traffic.think_time")
        return simulate_closed(result, engine, requests, users, think, replicas, seed, progress, prompt_histogram,
                               output_histogram, ramp, records)
    if ramp is not None:
        raise UserError("--ramp starts a closed loop's users: give --concurrency (or a contract whose traffic states "
                        "concurrency)")
    if trace is not None:
        stream = trace_stream(trace)
        offered = stream.mean_rate_per_s
    else:
        if requests < 1:
            raise UserError(f"--requests: expected at least 1 request, got {requests}")
        if requests > MAX_REQUESTS:
            raise UserError(f"--requests: expected at most {MAX_REQUESTS:,} requests, got {requests:,}")
        offered = float(q["requests_per_s"].value) if rate is None else float(rate)
        traffic = result.inputs.traffic
        stated = "requests_per_day" if getattr(traffic, "requests_per_day", None) is not None else "requests_per_second"
        check_arrival_span(requests, offered, "--rate" if rate is not None else f"workload.traffic.{stated}")
        stream = synthetic_stream(traffic, int(requests), offered,
                                  q["prompt_tokens"].value, q["output_tokens"].value, seed,
                                  prompt_histogram, output_histogram)
    tally = _tally(result, stream.count, records)
    ledger = StreamLedger(stream, engine, _context_tokens(result), tally)
    if instances:
        from botec.simulate.disaggregated import run_disaggregated

        fleet = run_disaggregated(result, engine, ledger, replicas, balancer, seed, progress, prefill_instance)
    else:
        fleet = run_fleet(engine, ledger, replicas, balancer, seed, None, progress)
    return _simulation(result, engine, stream.description, tally, fleet, replicas, balancer, seed, offered,
                       prefill_instance)


def _closed_loop(result, rate, trace, concurrency, think_time) -> tuple[Optional[int], float]:
    """(users, think seconds) of a closed loop, or (None, 0) for arrivals at a rate: ``concurrency`` when given,
    else the contract's when its traffic states concurrency and no rate or trace replaces it."""
    from botec.errors import UserError

    if concurrency is not None:
        if rate is not None or trace is not None:
            raise UserError(f"--concurrency and --{'rate' if rate is not None else 'trace'} exclude each other: a "
                            "closed loop's users send as their replies come back")
        if concurrency < 1:
            raise UserError(f"--concurrency: expected at least 1 user in flight, got {concurrency}")
    if think_time is not None and not (think_time >= 0 and math.isfinite(think_time)):
        raise UserError(f"--think-time: expected seconds of at least 0, got {think_time:g}")
    q = result.quantities
    if concurrency is None and rate is None and trace is None and "concurrency" in q:
        concurrency = int(round(q["concurrency"].value))
    if concurrency is None:
        if think_time is not None:
            raise UserError("--think-time is a closed loop's pause: give --concurrency (or a contract whose traffic "
                            "states concurrency)")
        return None, 0.0
    if think_time is None:
        think_time = float(q["think_time_seconds"].value) if "think_time_seconds" in q else 0.0
    return int(concurrency), float(think_time)


def _context_tokens(result) -> Optional[int]:
    """The model's context L (config.json's max_position_embeddings), None when it states none."""
    length = getattr(getattr(result, "architecture", None), "max_sequence_length", None)
    return int(length) if length else None


def _tally(result, count: int, records: int = RECORDS):
    """The running aggregates of ``count`` requests, with the contract's latency percentile and targets."""
    from botec.simulate.tally import Tally

    q = result.quantities
    targets = [float(q[name].value) if name in q else None
               for name in ("time_to_first_token_target_seconds", "time_per_output_token_target_seconds")]
    front = float(q["request_overhead_seconds"].value) if "request_overhead_seconds" in q else 0.0
    return Tally(count, int(round(float(q["latency_percentile"].value) * 100)), *targets, records=records,
                 front_seconds=front)


def _analytic(result, rate_per_replica: float, replicas: int = 1, prefill_instance=None) -> Analytic:
    """The analytic model at ``rate_per_replica`` (capped just below saturation when over it), on one of
    ``replicas`` (the balancer deals a burst out over them); ``prefill_instance``: a disaggregated replica's prefill
    instances' own :class:`botec.serving.load.Replica`."""
    import dataclasses

    from botec.serving import load, percentiles
    from botec.serving.instances import replica_of_quantities

    q = result.quantities
    replica = replica_of_quantities(q)
    replica = dataclasses.replace(replica, burst_epochs_per_s=rate_per_replica * replicas / replica.burst_size)
    capacity = float(q["offline_requests_per_s_per_replica"].value)
    if prefill_instance is not None:
        replica = dataclasses.replace(replica, prefill_instance=prefill_instance)
        capacity = float(load.saturation(replica)[1])
    level = float(q["latency_percentile"].value)
    state = load.at_load(replica, min(rate_per_replica, capacity))
    z = NormalDist().inv_cdf(level)
    ttft = float(load.ttft_mean(state))
    return Analytic(rate_per_replica, ttft, float(state.tpot_mean), float(percentiles.ttft_quantile(state, level)),
                    float(percentiles.tpot_quantile(replica, state, z)), float(state.batch), capacity,
                    ttft + (float(q["output_tokens"].value) - 1) * float(state.tpot_mean))


def _window_end(fleet) -> float:
    """The measurement window's end: the last admission of the replica that stopped admitting first."""
    admissions = [r.stats.last_admission_s for r in fleet if r.assigned]
    return min(admissions) if admissions else math.nan


def _simulation(result, engine, description, tally, fleet, replicas, balancer, seed, offered,
                prefill_instance=None) -> Simulation:
    """The :class:`Simulation` a settled tally and the replicas' stats measured."""
    import numpy as np

    q = result.quantities
    start, end, in_window, window_tokens, window_meeting = tally.measurement_window(_window_end(fleet))
    span = end - start
    throughput = in_window / span if span > 0 else math.nan
    tokens_per_s = window_tokens / span if span > 0 else math.nan
    goodput = window_meeting / span if span > 0 else math.nan
    accelerators = replicas * int(round(q["replica_accelerators"].value))

    stats = [r.stats for r in fleet]
    last = tally.last_finish if tally.finished else tally.first_arrival
    busy_span = [max(s.last_finish_s - s.first_arrival_s, 0.0) for s in stats if s.steps]
    mean_decode = (sum(s.decode_batch_seconds for s in stats) / sum(busy_span)) if sum(busy_span) > 0 else 0.0
    steps = sum(s.steps for s in stats)
    decode_steps = steps - sum(getattr(s, "prefill_instance_steps", 0) for s in stats)   # disaggregated: decode's
    spec_steps = sum(s.speculative_steps for s in stats)
    records = dict(tally.records)
    records["measured"] = np.isfinite(records["finish_s"]) & (np.arange(len(records["finish_s"])) >= tally.warmup)
    level = tally.level
    analytic = _analytic(result, offered / replicas, replicas, prefill_instance)
    return Simulation(
        contract_name=result.inputs.name or "contract", workload=description,
        engine=result.inputs.engine.key, chunked_prefill=engine.chunked_prefill, requests=tally.count,
        warmup_requests=tally.warmup, measured_requests=tally.measured,
        rejected_requests=tally.count - tally.accepted, unfinished_requests=tally.accepted - tally.finished,
        replicas=replicas, accelerators=accelerators, balancer=balancer, seed=seed,
        offered_requests_per_s=float(offered), latency_percentile=level,
        ttft=Latency(*tally.ttft.summary(level)), tpot=Latency(*tally.tpot.summary(level)),
        end_to_end=Latency(*tally.end_to_end.summary(level)),
        ttft_target_seconds=tally.ttft_target, tpot_target_seconds=tally.tpot_target,
        share_meeting_targets=tally.measured_meeting / tally.measured if tally.measured else math.nan,
        goodput_requests_per_s=float(goodput), throughput_requests_per_s=float(throughput),
        output_tokens_per_s=tokens_per_s, output_tokens_per_s_per_accelerator=tokens_per_s / accelerators,
        mean_decode_batch=float(mean_decode),
        mean_step_batch=sum(s.decode_request_steps for s in stats) / decode_steps if decode_steps else 0.0,
        max_running_batch=max(s.max_running for s in stats), preemptions=sum(s.preemptions for s in stats),
        simulated_seconds=last - tally.first_arrival, measurement_window_seconds=(start, end), steps=steps,
        prompt_tokens=tally.prompt_tokens, prefill_tokens_computed=sum(s.prefill_tokens for s in stats),
        speculative_tokens_per_step=(sum(s.speculative_tokens for s in stats) / spec_steps) if spec_steps else None,
        analytic=analytic,
        context_tokens=_context_tokens(result),
        prompts_over_context=tally.refused_over_context, outputs_cut_at_context=tally.outputs_cut, records=records,
        prefill_instances=int(round(float(q["prefill_instances"].value))) if "prefill_instances" in q else 0,
        warnings=_steady_state(tally.count - tally.warmup, float(offered), analytic, mean_decode),
    )


def _steady_state(measured: int, offered_per_s: float, analytic: Analytic, mean_decode_batch: float) -> tuple:
    """A warning when the ``measured`` requests arrive (at ``offered_per_s``) over less than STEADY_FILLS × the time a
    request stays; none for an offline batch (every request at t = 0: a drain by design)."""
    stay = analytic.end_to_end_seconds
    if not (0 < offered_per_s < math.inf and 0 < stay < math.inf) or measured / offered_per_s >= STEADY_FILLS * stay:
        return ()
    needed = math.ceil(STEADY_FILLS * stay * offered_per_s / (1 - WARMUP_SHARE))
    return (f"not in steady state: the {measured:,} measured requests arrive over {measured / offered_per_s:.3g} s, "
            f"less than {STEADY_FILLS} × the {stay:.3g} s a request stays (the analytic end-to-end latency, the time "
            f"the decode batch takes to fill), so the batch is filling or draining for much of the run (decoding "
            f"{mean_decode_batch:,.0f} on average, analytic {analytic.decode_batch_size:,.0f}): simulate at least "
            f"{needed:,} requests at this rate",)
