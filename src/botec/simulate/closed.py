"""A closed loop of users, simulated: N users each send a request, wait for its last token, think Z seconds, and
send the next (NVIDIA NIM's genai-perf / AIPerf ``--concurrency``, ``vllm bench serve --max-concurrency``).

- **Start** (the users' first requests): user u = 0 … N − 1 sends its first at t_u = u·D/N, a ramp of D seconds,
  one user more every D/N, as AIPerf's ``--concurrency-ramp-duration D`` ramps ("Concurrency starts at 1 and
  increases by +1 at even intervals": ai-dynamo/aiperf, docs/tutorials/ramping.md). D = 0 starts all N at once, as
  genai-perf's ``--concurrency N`` and ``vllm bench serve --max-concurrency N --request-rate inf`` do. The default
  D is one cycle of the loop, D = N / X (X the fleet's closed-loop throughput the analytic model gives,
  :func:`closed_analytic`; by Little's law N / X = R + Z, a request's response time and think time): the first
  requests then arrive at the rate the loop settles to, spread over the phases a steady state holds, instead of
  one burst of N prefills that equal lengths on a deterministic engine never break up (a real server's jitter
  does: the benchmarks measure after a warm-up, on users whose phases have drifted apart).
- **Lengths**: the k-th request sent, fleet-wide, takes the k-th drawn prompt and output lengths of the open
  loop's own stream (:func:`botec.simulate.workload.synthetic_stream`, seeded: the contract's
  ``length_distribution``, or a histogram file), screened as an open run screens them
  (:func:`botec.simulate.ledger.screen`: a prompt over the context refused, an output cut at it, a request the
  whole KV cache cannot hold refused at once: its user thinks and sends the next).
- **Users and replicas**: user u is served by replica u mod r, so each replica holds ⌊N/r⌋ or ⌈N/r⌉ users (what a
  least-outstanding balancer keeps when a user's next request comes as its last one ends).
- **Timing**: a request finishing at the end of a step at f brings its user's next at f + Z; the replica's next step
  starting at or after f + Z takes it (a step starting at t takes the requests arrived by t). With Z = 0 that is
  the step right after: the replica pauses after every step in which a request finished
  (``Replica.pause_at_finish``) and the loop sends the users' next requests before it goes on. Requests are sent
  fleet-wide in time order (every replica is advanced to a send's time before it), so request numbers follow
  their send times as the measurements expect.
- **Front-end**: a request reaches the engine o seconds after its user sends it (the engine preset's
  ``request_overhead``), so the engine sees each user's next request Z + o after its last one ends; the
  measurements add o to every TTFT and end-to-end latency (:class:`botec.simulate.tally.Tally`), as a client-side
  benchmark's (genai-perf) hold it.
- **Streaming**: as an open run (:mod:`botec.simulate`), a request's state lives only while it is in the system
  (:class:`botec.simulate.ledger.StreamLedger`: at most N slots), lengths are drawn a block at a time, and a
  finished request goes into the running aggregates (:class:`botec.simulate.tally.Tally`): memory is flat in the
  request count (``benchmarks/simulate_closed_loop.py``).
- **After the last send** the replicas run until they are empty; the measurements are those of an open run:
  throughput in the window from the warm-up's end to the last admission, so the tail where users stop sending is
  not counted.

Beside it, the analytic model of the same loop (:func:`botec.serving.closed.at_concurrency`: X·(R(X) + Z) = n).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from botec.simulate.engine import Engine
from botec.simulate.ledger import StreamLedger, _Finish
from botec.simulate.replica import Replica

__all__ = ["simulate_closed", "run_closed_loop", "closed_analytic", "closed_description", "start_seconds",
           "BALANCER", "SETTLE_EVERY"]

BALANCER = "user-affinity"
"""What the report names the balancer of a closed loop: each user stays on its replica."""

SETTLE_EVERY = 8_192
"""Requests sent between two settlements of the tally's window (what waits for it: a few thousand finishes)."""


def start_seconds(users: int, ramp_seconds: float) -> np.ndarray:
    """t_u = u·D/N, u = 0 … N − 1: the users' first sends over a ramp of D seconds (see the module docstring)."""
    return np.arange(users) * (float(ramp_seconds) / users)


def simulate_closed(result, engine: Engine, requests: int, users: int, think_seconds: float, replicas: int,
                    seed: int = 0, progress=None, prompt_histogram=None, output_histogram=None,
                    ramp_seconds: float | None = None, records: int | None = None):
    """:func:`botec.simulate.simulate` of ``requests`` requests from ``users`` users in a closed loop: the lengths
    drawn as for an open run, the users started over ``ramp_seconds`` (default one cycle, N / X), the loop run
    (:func:`run_closed_loop`), measured as an open run is, and the analytic model beside it that of the same loop
    (:func:`closed_analytic`)."""
    import dataclasses

    from botec.errors import UserError
    from botec.simulate import RECORDS, _context_tokens, _simulation, _steady_state, _tally
    from botec.simulation_limits import MAX_REQUESTS
    from botec.simulate.workload import synthetic_stream

    if not 1 <= requests <= MAX_REQUESTS:
        raise UserError(f"--requests: a closed loop serves 1 to {MAX_REQUESTS:,} requests, got {requests:,}")
    q = result.quantities
    analytic = closed_analytic(result, users / replicas, think_seconds)
    if ramp_seconds is None:
        fleet_rate = analytic.requests_per_s_per_replica * replicas
        ramp_seconds = users / fleet_rate if fleet_rate > 0 and math.isfinite(fleet_rate) else 0.0
    elif not (ramp_seconds >= 0 and math.isfinite(ramp_seconds)):
        raise UserError(f"--ramp: expected seconds of at least 0, got {ramp_seconds:g}")
    stream = synthetic_stream(result.inputs.traffic, int(requests), math.inf, q["prompt_tokens"].value,
                              q["output_tokens"].value, seed, prompt_histogram, output_histogram)
    tally = _tally(result, stream.count, RECORDS if records is None else records)
    ledger = StreamLedger(stream, engine, _context_tokens(result), tally)
    front = float(q["request_overhead_seconds"].value) if "request_overhead_seconds" in q else 0.0
    fleet, (first, last) = run_closed_loop(engine, ledger, replicas, users, think_seconds, seed, progress, front,
                                           ramp_seconds)
    offered = (stream.count - 1) / (last - first) if last > first else math.inf
    lengths = stream.description.split(", ", 2)[-1]          # "<distribution> lengths around ..."
    description = closed_description(stream.count, users, think_seconds, lengths, ramp_seconds)
    sim = _simulation(result, engine, description, tally, fleet, replicas, BALANCER, seed, offered)
    return dataclasses.replace(sim, analytic=analytic, warnings=_steady_state(
        sim.requests - sim.warmup_requests, sim.offered_requests_per_s, analytic, sim.mean_decode_batch))


class _ClosedFinish(_Finish):
    """A stream ledger's ``finish_s`` that also notes, in order, the users whose requests finish: they send again."""

    __slots__ = ("user_of", "finished")

    def __init__(self, ledger: StreamLedger):
        super().__init__(ledger)
        self.user_of: dict[int, int] = {}           # slot -> the user whose request holds it
        self.finished: list[tuple[float, int]] = []  # (finish seconds, user)

    def __setitem__(self, slot, seconds):
        self.finished.append((seconds, self.user_of.pop(slot)))
        super().__setitem__(slot, seconds)


def run_closed_loop(engine: Engine, ledger: StreamLedger, replicas: int, users: int, think_seconds: float = 0.0,
                    seed: int = 0, progress=None, request_seconds: float = 0.0, ramp_seconds: float = 0.0):
    """Serve the requests of ``ledger`` (a :class:`StreamLedger`: its stream's lengths, in the order they are sent;
    its arrival times are the sends here, as they reach the engine) from ``users`` users in a closed loop with think
    time ``think_seconds`` on ``replicas`` replicas, the users started over ``ramp_seconds``
    (:func:`start_seconds`); ``request_seconds`` o: a request reaches the engine o after its user sends it (its
    user's next, Z + o after it ends). Return (the replicas once all are empty, (first, last) engine arrival)."""
    total = len(ledger)
    finish_s = ledger.finish_s = _ClosedFinish(ledger)        # before the replicas bind it
    streams = np.random.SeedSequence(seed).spawn(replicas + 1)
    fleet = [Replica(engine, ledger, k, np.random.default_rng(streams[k])) for k in range(replicas)]
    for replica in fleet:
        replica.pause_at_finish = True
    finished, user_of = finish_s.finished, finish_s.user_of
    tally = ledger.tally
    records = tally.records["arrival_s"]
    pending = [(start + request_seconds, user, user)            # (send time, order, user): a heap
               for user, start in enumerate(start_seconds(users, ramp_seconds).tolist())]
    heapq.heapify(pending)
    order = users
    report_every = max(total // 200, 1)
    blocks = ledger.blocks()
    block, offset, first_of_block = None, 0, 0
    sent, first_arrival, at = 0, math.nan, 0.0
    while sent < total:
        at = pending[0][0] if pending else math.inf   # none waiting to send: run to the next finish
        for replica in fleet:                    # every replica up to the send, back at each finish before it
            replica.advance(at)
        if finished:                             # users came back: one may send before ``at``
            for seconds, user in finished:
                heapq.heappush(pending, (seconds + think_seconds + request_seconds, order, user))
                order += 1
            finished.clear()
            continue
        if not pending:
            break                                # no user left (cannot happen with a user and a replica)
        at, _, user = heapq.heappop(pending)
        if block is None or offset == len(block[1]):
            block, offset = next(blocks), 0
            first_of_block = block[0]
        request = first_of_block + offset
        _, _, admitted, prompts, outputs, cached = block
        if sent == 0:
            first_arrival = tally.first_arrival = at
        if request < len(records):
            records[request] = at
        if admitted[offset]:
            slot = ledger.dispatch(request, at, prompts[offset], outputs[offset], cached[offset])
            user_of[slot] = user
            fleet[user % replicas].arrive(slot)
        else:                                    # refused at once: the user thinks and sends its next
            heapq.heappush(pending, (at + think_seconds, order, user))
            order += 1
        offset += 1
        sent += 1
        if sent % SETTLE_EVERY == 0:             # every replica is at ``at`` and no later send comes before it
            ledger.settle(at, fleet)
        if progress is not None and request % report_every == 0:
            progress(request, total)
    for replica in fleet:
        replica.pause_at_finish = False
        replica.advance(math.inf)
    finished.clear()
    ledger.settle(math.inf, fleet)
    if progress is not None:
        progress(total, total)
    return fleet, (first_arrival, at)


def closed_description(count: int, users: int, think_seconds: float, lengths: str, ramp_seconds: float = 0.0) -> str:
    """The workload's line: how many requests, from how many users, their think time and start, their lengths."""
    from botec.units import format_quantity

    think = f"think time {format_quantity(think_seconds, 's')}" if think_seconds else "no think time"
    start = (f"started over {format_quantity(ramp_seconds, 's')}" if ramp_seconds > 0 and users > 1
             else "started at once")
    return f"{count:,} requests from {users:,} users in a closed loop ({think}, {start}), {lengths}"


def closed_analytic(result, users_per_replica: float, think_seconds: float):
    """The estimate's closed-loop model for ``users_per_replica`` users and ``think_seconds`` on one replica, as
    :class:`botec.simulate.Analytic` (the wait of the users a saturated replica cannot run is in the TTFT)."""
    from statistics import NormalDist

    from botec.serving import closed, load, percentiles
    from botec.serving.instances import replica_of_quantities
    from botec.simulate import Analytic

    q = result.quantities
    replica = replica_of_quantities(q)
    capacity = float(q["offline_requests_per_s_per_replica"].value)
    level = float(q["latency_percentile"].value)
    rate, wait = closed.at_concurrency(replica, float(users_per_replica), float(think_seconds), capacity)
    state = load.at_load(replica, rate)
    ttft = float(load.ttft_mean(state)) + float(wait)
    return Analytic(float(rate), ttft, float(state.tpot_mean), float(percentiles.ttft_quantile(state, level)) + float(wait),
                    float(percentiles.tpot_quantile(replica, state, NormalDist().inv_cdf(level))), float(state.batch),
                    capacity, ttft + (float(q["output_tokens"].value) - 1) * float(state.tpot_mean))
