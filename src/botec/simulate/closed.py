"""A closed loop of users, simulated: N users each send a request, wait for its last token, think Z seconds, and
send the next (NVIDIA NIM's genai-perf ``--concurrency``, ``vllm bench serve --max-concurrency``).

- **Users**: all N send their first request at t = 0 (as the benchmarks start them); user u is served by
  replica u mod r, so each replica holds ⌊N/r⌋ or ⌈N/r⌉ users (what a least-outstanding balancer keeps when a
  user's next request comes as its last one ends). The k-th request sent, fleet-wide, takes the k-th drawn
  prompt and output lengths (:func:`botec.simulate.workload.synthetic_workload`, seeded). The run's requests
  are all held in memory (a :class:`Ledger`: the loop writes their send times as it runs), not streamed.
- **Timing**: a request finishing at the end of a step at f brings its user's next at f + Z; the replica's next step
  starting at or after f + Z takes it (a step starting at t takes the requests arrived by t). With Z = 0 that is
  the step right after: the replica pauses after every step in which a request finished
  (``Replica.pause_at_finish``) and the loop sends the users' next requests before it goes on. Requests are sent
  fleet-wide in time order (every replica is advanced to a send's time before it), so request numbers follow
  their send times as the measurements expect. A request the replica's whole KV cache cannot hold is refused at
  once: its user thinks and sends the next.
- **Front-end**: a request reaches the engine o seconds after its user sends it (the engine preset's
  ``request_overhead``: the HTTP round trip, the prompt's tokenization), so the engine sees each user's next request
  Z + o after its last one ends; the ledger holds the engine arrivals, and the measurements add o to every TTFT
  and end-to-end latency (:class:`botec.simulate.tally.Tally`), as a client-side benchmark's (genai-perf) hold it.
- **After the last send** the replicas run until they are empty; the measurements (:mod:`botec.simulate`) are
  those of an open run: throughput in the window from the warm-up's end to the last admission, so the tail where
  users stop sending is not counted.

Beside it, the analytic model of the same loop (:func:`botec.serving.closed.at_concurrency`: X·(R(X) + Z) = n).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from botec.simulate.engine import Engine
from botec.simulate.ledger import Ledger
from botec.simulate.replica import Replica

__all__ = ["simulate_closed", "run_closed_loop", "closed_analytic", "closed_description", "BALANCER",
           "MAX_REQUESTS"]

BALANCER = "user-affinity"
"""What the report names the balancer of a closed loop: each user stays on its replica."""

MAX_REQUESTS = 1_000_000
"""The most requests a closed loop serves: they are held in memory (a few hundred bytes each), not streamed."""


def simulate_closed(result, engine: Engine, requests: int, users: int, think_seconds: float, replicas: int,
                    seed: int = 0, progress=None, prompt_histogram=None, output_histogram=None):
    """:func:`botec.simulate.simulate` of ``requests`` requests from ``users`` users in a closed loop: the lengths
    drawn as for an open run, the loop run (:func:`run_closed_loop`), measured as an open run is, and the
    analytic model beside it that of the same loop (:func:`closed_analytic`)."""
    import dataclasses

    from botec.errors import UserError
    from botec.simulate import _measure, _steady_state
    from botec.simulate.workload import synthetic_workload

    if not 1 <= requests <= MAX_REQUESTS:
        raise UserError(f"--requests: a closed loop serves 1 to {MAX_REQUESTS:,} requests (held in memory), got "
                        f"{requests:,}")
    q = result.quantities
    drawn = synthetic_workload(result.contract.workload.traffic, int(requests), math.inf, q["prompt_tokens"].value,
                               q["output_tokens"].value, seed, prompt_histogram, output_histogram)
    ledger = Ledger(np.zeros(len(drawn)), drawn.prompt_tokens, drawn.output_tokens,
                    engine.cached_tokens(drawn.prompt_tokens))
    accepted = engine.footprint_blocks(drawn.prompt_tokens, drawn.output_tokens) <= engine.kv_capacity_blocks
    front = float(q["request_overhead_seconds"].value) if "request_overhead_seconds" in q else 0.0
    fleet = run_closed_loop(engine, ledger, replicas, users, think_seconds, seed, accepted.tolist(), progress, front)
    lengths = drawn.description.split(", ", 2)[-1]          # "<distribution> lengths around ..."
    workload = dataclasses.replace(drawn, arrival_seconds=np.array(ledger.arrival),
                                   description=closed_description(len(drawn), users, think_seconds, lengths))
    sim = _measure(result, engine, workload, ledger, fleet, accepted, replicas, BALANCER, seed,
                   workload.mean_rate_per_s)
    analytic = closed_analytic(result, users / replicas, think_seconds)
    return dataclasses.replace(sim, analytic=analytic, warnings=_steady_state(
        sim.requests - sim.warmup_requests, sim.offered_requests_per_s, analytic, sim.mean_decode_batch))


class _Finishes(list):
    """A ledger's finish times that note which requests finish, in order: the loop's users to send again."""

    def __init__(self, values):
        super().__init__(values)
        self.finished: list[int] = []

    def __setitem__(self, request, seconds):
        super().__setitem__(request, seconds)
        self.finished.append(request)


def run_closed_loop(engine: Engine, ledger: Ledger, replicas: int, users: int, think_seconds: float = 0.0,
                    seed: int = 0, accepted=None, progress=None, request_seconds: float = 0.0) -> list[Replica]:
    """Serve the requests of ``ledger`` (its arrival times are written here, as they reach the engine) from ``users``
    users in a closed loop with think time ``think_seconds`` on ``replicas`` replicas; return the replicas once
    all are empty. ``accepted``: which requests the replica's KV cache can hold (default all); ``request_seconds``
    o: a request reaches the engine o after its user sends it (its user's next, Z + o after it ends)."""
    total = len(ledger.arrival)
    accepted = [True] * total if accepted is None else list(accepted)
    finish_s = ledger.finish_s = _Finishes(ledger.finish_s)   # before the replicas bind it
    streams = np.random.SeedSequence(seed).spawn(replicas + 1)
    fleet = [Replica(engine, ledger, k, np.random.default_rng(streams[k])) for k in range(replicas)]
    for replica in fleet:
        replica.pause_at_finish = True
    arrival, finished = ledger.arrival, finish_s.finished
    pending = [(request_seconds, user, user) for user in range(users)]   # (send time, order, user): a heap
    heapq.heapify(pending)
    order = users
    user_of: dict = {}                                        # request in flight -> its user
    report_every = max(total // 200, 1)
    sent = 0
    while sent < total:
        at = pending[0][0] if pending else math.inf   # none waiting to send: run to the next finish
        for replica in fleet:                    # every replica up to the send, back at each finish before it
            replica.advance(at)
        if finished:                             # users came back: one may send before ``at``
            for request in finished:
                heapq.heappush(pending, (finish_s[request] + think_seconds + request_seconds, order,
                                         user_of.pop(request)))
                order += 1
            finished.clear()
            continue
        if not pending:
            break                                # no user left (cannot happen with a user and a replica)
        at, _, user = heapq.heappop(pending)
        request, sent = sent, sent + 1
        arrival[request] = at
        if accepted[request]:
            fleet[user % replicas].arrive(request)
            user_of[request] = user
        else:                                    # refused at once: the user thinks and sends its next
            heapq.heappush(pending, (at + think_seconds, order, user))
            order += 1
        if progress is not None and request % report_every == 0:
            progress(request, total)
    for replica in fleet:
        replica.pause_at_finish = False
        replica.advance(math.inf)
    if progress is not None:
        progress(total, total)
    return fleet


def closed_description(count: int, users: int, think_seconds: float, lengths: str) -> str:
    """The workload's line: how many requests, from how many users, their think time, their lengths."""
    from botec.units import format_quantity

    think = f"think time {format_quantity(think_seconds, 's')}" if think_seconds else "no think time"
    return f"{count:,} requests from {users:,} users in a closed loop ({think}), {lengths}"


def closed_analytic(result, users_per_replica: float, think_seconds: float):
    """The estimate's closed-loop model for ``users_per_replica`` users and ``think_seconds`` on one replica, as
    :class:`botec.simulate.Analytic` (the wait of the users a saturated replica cannot run is in the TTFT)."""
    from statistics import NormalDist

    from botec.serving import closed, load
    from botec.serving.instances import replica_of_quantities
    from botec.simulate import Analytic

    q = result.quantities
    replica = replica_of_quantities(q)
    capacity = float(q["offline_requests_per_s_per_replica"].value)
    level = float(q["latency_percentile"].value)
    rate, wait = closed.at_concurrency(replica, float(users_per_replica), float(think_seconds), capacity)
    state = load.at_load(replica, rate)
    ttft = float(load.ttft_mean(state)) + float(wait)
    return Analytic(float(rate), ttft, float(state.tpot_mean), float(load.ttft_quantile(state, level)) + float(wait),
                    float(load.tpot_quantile(replica, state, NormalDist().inv_cdf(level))), float(state.batch),
                    capacity, ttft + (float(q["output_tokens"].value) - 1) * float(state.tpot_mean))
