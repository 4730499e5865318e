"""A fleet: n replicas behind a load balancer, each simulated as :class:`~botec.simulate.replica.Replica`.

The replicas share nothing but the balancer's choices, made when a request arrives from the requests each
replica has outstanding (sent and not finished) at that instant:

- ``round-robin`` (the default): replica k mod n for the k-th request, whatever their load. It is what an LLM
  fleet's router does out of the box: the vLLM production-stack router (``routingLogic: roundrobin``, its Helm
  chart's and operator's), NVIDIA Dynamo's frontend (``--router-mode`` default ``round_robin``), a Kubernetes
  Service under IPVS (``rr``); SGLang's and vLLM's Rust routers (``cache_aware``) send a prompt sharing no cached
  prefix to the worker with the smallest prefix tree, for prompts of one length nearly a rotation;
- ``least-outstanding``: the replica with the fewest outstanding requests (ties: the next in turn), as NGINX's
  least_conn does (ties by round-robin; Envoy's LEAST_REQUEST scans every host with ``selection_method: FULL_SCAN``);
- ``power-of-two``: two distinct replicas drawn at random (seeded), the one with fewer outstanding requests
  (ties: the first drawn; Mitzenmacher 2001, "The power of two choices in randomized load balancing"), Envoy's
  LEAST_REQUEST default (``choice_count`` 2) and so Istio's.

The outstanding count is mostly decoding requests (a request decodes for hundreds of steps and waits for its
prefill a few), so it says little about the prompt queue a new request joins. With equal output lengths it
herds: prompts packed into one step (chunked prefill fills a step's token budget) decode in lockstep and finish
in the same step, the count of their replica drops by as many at once, and a least-outstanding balancer sends it
the next as many arrivals, which are packed together again. The clumps persist and merge (on the 70B fleet of
tests/test_estimate_matches_simulate.py a request's co-prefilled clump grows from 1.0 under round-robin to about
2 of at most 4), and the P99 TTFT climbs for some 10,000 requests to about 1.6 s against round-robin's stationary
0.21 s; power-of-two herds less (0.84 s). A real engine with a full-information least-request balancer and
fixed output lengths (a benchmark with ignore_eos) herds the same way; variable output lengths break the clumps.

A replica is advanced to an arrival only when the balancer needs its count (every replica for
least-outstanding, the two drawn for power-of-two, none for round-robin) or when it receives a request;
after the last arrival every replica runs until it is empty.
"""

from __future__ import annotations

import math

import numpy as np

from botec.errors import UserError
from botec.simulate.engine import Engine
from botec.simulate.ledger import StreamLedger
from botec.simulate.replica import Replica

__all__ = ["BALANCERS", "run_fleet"]

BALANCERS = ("round-robin", "least-outstanding", "power-of-two")


def run_fleet(engine: Engine, ledger, replicas: int, balancer: str = "round-robin", seed: int = 0,
              accepted=None, progress=None, replica_type=Replica) -> list[Replica]:
    """Serve every request of ``ledger`` (those ``accepted``, a boolean sequence; default all) on ``replicas``
    replicas behind ``balancer``; return the replicas (their stats) once all are empty. ``progress(done,
    total)`` is called as the arrivals are dispatched and once at the end.

    ``ledger``: a :class:`~botec.simulate.ledger.Ledger` (every request in memory) or a
    :class:`~botec.simulate.ledger.StreamLedger`, whose blocks are dispatched as they come (``accepted``
    is its own; a replica knows a request by the slot it holds there) and whose tally is settled after
    each block and at the end. ``replica_type(engine, ledger, index, rng)`` makes a replica (a
    :class:`~botec.simulate.disaggregated.DisaggregatedReplica` for disaggregated serving)."""
    if balancer not in BALANCERS:
        raise UserError(f"--balancer: expected one of {', '.join(BALANCERS)}, got {balancer!r}")
    if replicas < 1:
        raise UserError(f"--replicas: expected at least 1 replica, got {replicas}")
    streams = np.random.SeedSequence(seed).spawn(replicas + 1)
    fleet = [replica_type(engine, ledger, k, np.random.default_rng(streams[k])) for k in range(replicas)]
    streaming = isinstance(ledger, StreamLedger)
    total = len(ledger) if streaming else len(ledger.arrival)
    if streaming:
        blocks = ledger.blocks()
    else:
        blocks = [(0, ledger.arrival, [True] * total if accepted is None else list(accepted), None, None, None)]
    report_every = max(total // 200, 1)
    # power-of-two: the first picks of every request, then the second ones, from one generator (the second
    # generator starts where the first picks of all the requests end)
    first_rng = np.random.default_rng(streams[-1])
    if balancer == "power-of-two" and replicas > 1:
        second_rng = np.random.default_rng(streams[-1])
        for start in range(0, total, 1 << 16):
            second_rng.integers(replicas, size=min(1 << 16, total - start))
    turn = 0
    at = 0.0
    for first, arrivals, admitted, prompts, outputs, cached in blocks:
        if balancer == "power-of-two" and replicas > 1:
            first_pick = first_rng.integers(replicas, size=len(arrivals))
            second_pick = ((first_pick + second_rng.integers(1, replicas, size=len(arrivals))) % replicas).tolist()
            first_pick = first_pick.tolist()
        for offset, at in enumerate(arrivals):
            if not admitted[offset]:
                continue
            if replicas == 1:
                chosen = fleet[0]
            elif balancer == "round-robin":
                chosen = fleet[turn % replicas]
            elif balancer == "least-outstanding":
                best, chosen = math.inf, None
                for k in range(replicas):
                    replica = fleet[(turn + k) % replicas]
                    replica.advance(at)
                    count = replica.outstanding(at)
                    if count < best:
                        best, chosen = count, replica
            else:
                one, two = fleet[first_pick[offset]], fleet[second_pick[offset]]
                one.advance(at)
                two.advance(at)
                chosen = two if two.outstanding(at) < one.outstanding(at) else one
            turn += 1
            chosen.advance(at)
            request = first + offset
            chosen.arrive(ledger.dispatch(request, at, prompts[offset], outputs[offset], cached[offset])
                          if streaming else request)
            if progress is not None and request % report_every == 0:
                progress(request, total)
        if streaming:
            ledger.settle(at, fleet)
    for replica in fleet:
        replica.advance(math.inf)
    if streaming:
        ledger.settle(math.inf, fleet)
    if progress is not None:
        progress(total, total)
    return fleet
