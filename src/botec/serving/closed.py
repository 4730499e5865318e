"""A closed loop: N users in flight, each sending its next request when its last one returns (after a think time).

This is how NVIDIA NIM's benchmarks (genai-perf / AIPerf ``--concurrency``), ``vllm bench serve
--max-concurrency`` and SGLang's ``bench_serving --max-concurrency`` load a server: the load is not a rate
but a number of users, and the rate follows from the replies. Symbols: N users across the fleet (the
contract's ``workload.traffic.concurrency``), r replicas, n = N / r users on one replica (spread evenly, as a
least-outstanding balancer keeps them), Z the think time, X a replica's throughput (requests/s), R(X) the
mean response time the open load model gives at arrival rate X (:mod:`botec.serving.load`: R = TTFT +
(O − 1)·TPOT, the estimate's ``end_to_end_latency_seconds``), X_sat the replica's saturated capacity.

- **Throughput** (the interactive response-time law: Denning & Buzen, "The operational analysis of queueing
  network models", Computing Surveys 1978; Lazowska et al., *Quantitative System Performance*, 1984, §3.3.3):
  every user is either waiting for a reply (R) or thinking (Z), so by Little's law on the whole loop
  X = n / (R(X) + Z). The root of g(X) = X·(R(X) + Z) − n, increasing in X (X grows and R with it), lies in
  (0, min(X_sat, n / (R(0) + Z))]: found by bisection, elementwise.
- **Saturation**: when g(X_sat) < 0 the replica cannot take all n users in its batch: it runs at X = X_sat and
  the users beyond wait for a slot; the loop's Little's law, exact, gives their wait
  W = n / X_sat − Z − R(X_sat), added to the time to first token (to its mean and, as a constant, to its
  percentile).
- **Fleet**: a replica meets the latency targets at any load up to λ_max (``requests_per_s_per_replica``:
  the targets and the utilization cap); its latencies grow with its load and its load with its users, so it
  meets them with n users exactly when X(n) ≤ λ_max, i.e. n ≤ n_max = λ_max·(R(λ_max) + Z). Replicas
  r = ⌈N / n_max⌉ (no target reachable: n_max at the utilization cap, for throughput alone, as an open load).
  The fleet's rate is r·X(N / r). ``supply.replicas`` pins r instead (a benchmark of one server): the users are
  spread over those replicas and the findings say whether they meet the targets.

The open model's prompt queue (M/G/1, Poisson arrivals) is kept as the response time at each rate: a closed
loop's arrivals are smoother than Poisson, so it errs long on the queue's wait; and users that start together
with equal lengths move in waves (``botec simulate --concurrency N --ramp 0`` shows them step by step; its default
start, over one cycle, does not), which no steady-state mean captures.
"""

from __future__ import annotations

from typing import Callable

from botec.graph import Formulas, ceil, maximum, minimum, where
from botec.graph.elementwise import all_true
from botec.serving import load as model, percentiles
from botec.serving.instances import replica_of
from botec.serving.latency import READS

__all__ = ["formulas", "closed_loop_throughput", "at_concurrency", "mean_response_seconds", "BISECTIONS"]

BISECTIONS = 60
"""Halvings of the bracket at most; the bisection stops once it is within 1e-12 of its upper end."""

formulas = Formulas(account="capacity")

formulas.input("concurrency", unit="users",
               meaning="closed loop: users in flight across the fleet, each sending its next request when its last "
                       "returns")
formulas.input("think_time_seconds", unit="s",
               meaning="closed loop: a user's pause between a reply and its next request")


def closed_loop_throughput(response_seconds: Callable, users, think_seconds, ceiling):
    """(X, W): the throughput of ``users`` in a closed loop with think time Z = ``think_seconds`` on a server whose
    mean response time at rate x is ``response_seconds(x)`` (non-decreasing in x), at most ``ceiling`` requests/s,
    and the wait W of the users beyond what it runs (0 below saturation). X solves X·(R(X) + Z) = N by bisection
    on (0, min(ceiling, N / (R(0) + Z))]; when ceiling·(R(ceiling) + Z) < N, X = ceiling and W = N / ceiling − Z −
    R(ceiling). Elementwise over numpy arrays.

    >>> round(closed_loop_throughput(lambda x: 0.5, 10, 1.5, 100.0)[0], 9)    # no interference: N / (S + Z)
    5.0
    """
    at_ceiling = response_seconds(ceiling)
    saturated = ceiling * (at_ceiling + think_seconds) <= users
    idle = response_seconds(ceiling * 0.0)
    low, high = ceiling * 0.0, minimum(ceiling, users / maximum(idle + think_seconds, 1e-300))
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        short = middle * (response_seconds(middle) + think_seconds) < users
        low, high = where(short, middle, low), where(short, high, middle)
        if all_true(high - low <= 1e-12 * high):
            break
    rate = where(saturated, ceiling, (low + high) / 2)
    wait = where(saturated, maximum(users / ceiling - think_seconds - at_ceiling, 0.0), 0.0)
    return rate, wait


def mean_response_seconds(replica: model.Replica, state: model.Load):
    """R = TTFT + (O − 1)·TPOT at a steady state: a request's mean time from its arrival to its last token."""
    return model.ttft_mean(state) + (replica.output_tokens - 1) * state.tpot_mean


def at_concurrency(replica: model.Replica, users, think_seconds, capacity):
    """(X, W) of ``users`` in a closed loop on one replica (:func:`closed_loop_throughput` with the open load
    model's response time, each bisection step starting its fixed point from the last one's)."""
    near: list = [None]

    def response(rate):
        near[0] = model.at_load(replica, rate, near=near[0])
        return mean_response_seconds(replica, near[0])

    return closed_loop_throughput(response, users, think_seconds, capacity)


def _replica(values: dict) -> model.Replica:
    return replica_of(values)


def _users_within(values: dict):
    replica = _replica(values)
    limit = values["requests_per_s_per_replica"]
    rate = where(limit > 0, limit, values["utilization_cap"] * values["offline_requests_per_s_per_replica"])
    return rate * (mean_response_seconds(replica, model.at_load(replica, rate)) + values["think_time_seconds"])


@formulas.formula(unit="users", meaning="closed loop: the most users one replica holds with every target met (their "
                                        "throughput within the largest load meeting the targets)",
                  expression="λ_max × (R(λ_max) + think_time_seconds), λ_max = requests_per_s_per_replica (none "
                             "reachable: utilization_cap × offline_requests_per_s_per_replica)",
                  reads=READS + ("requests_per_s_per_replica", "utilization_cap",
                                   "offline_requests_per_s_per_replica", "think_time_seconds"),
                  source="Little's law on the closed loop (Denning & Buzen 1978)",
                  symbols={"λ_max": "requests_per_s_per_replica", "R": "mean end-to-end latency at that load"})
def users_per_replica_within_targets(**values):
    return _users_within(values)


@formulas.formula(unit="replicas", meaning="replicas to deploy for the users in flight: the fewest that hold them "
                                           "with every target met",
                  expression="max(1, ⌈concurrency / users_per_replica_within_targets⌉)", choice=("load", "closed"))
def replicas(concurrency, users_per_replica_within_targets):
    return maximum(ceil(concurrency / maximum(users_per_replica_within_targets, 1e-300)), 1.0)


@formulas.formula(unit="users", meaning="closed loop: users in flight on each replica (the fleet's users spread "
                                        "evenly)", expression="concurrency / replicas")
def concurrency_per_replica(concurrency, replicas):
    return concurrency / replicas


@formulas.formula(unit="requests/s", meaning="closed loop: requests each replica completes per second with its users",
                  expression="X solving X × (R(X) + think_time_seconds) = concurrency_per_replica (bisection), at "
                             "most offline_requests_per_s_per_replica",
                  reads=READS + ("concurrency_per_replica", "think_time_seconds",
                                   "offline_requests_per_s_per_replica"),
                  source="the interactive response-time law (Denning & Buzen 1978; Lazowska et al. 1984, §3.3.3)",
                  choice=("load", "closed"),
                  symbols={"X": "requests/s on one replica", "R": "the mean end-to-end latency the load model gives "
                                                                  "at the rate X"})
def requests_per_s_on_a_replica(**values):
    return at_concurrency(_replica(values), values["concurrency_per_replica"], values["think_time_seconds"],
                          values["offline_requests_per_s_per_replica"])[0]


@formulas.formula(unit="requests/s", meaning="closed loop: requests the fleet completes per second",
                  expression="replicas × requests_per_s_on_a_replica", choice=("load", "closed"))
def requests_per_s(replicas, requests_per_s_on_a_replica):
    return replicas * requests_per_s_on_a_replica


@formulas.formula(unit="epochs/s", detail=True, meaning="closed loop: no bursts (each user sends alone)",
                  expression="0", choice=("load", "closed"))
def burst_epochs_per_s():
    return 0.0


@formulas.formula(unit="s", meaning="closed loop: the wait for a batch slot of the users a saturated replica cannot "
                                    "run (0 below saturation)",
                  expression="max(0, concurrency_per_replica / X − think_time_seconds − R(X)), X = "
                             "requests_per_s_on_a_replica",
                  reads=READS + ("concurrency_per_replica", "think_time_seconds", "requests_per_s_on_a_replica"),
                  source="Little's law on the closed loop", detail=True,
                  symbols={"X": "requests_per_s_on_a_replica", "R": "the mean end-to-end latency at X"})
def closed_loop_wait_seconds(**values):
    replica, rate = _replica(values), values["requests_per_s_on_a_replica"]
    response = mean_response_seconds(replica, model.at_load(replica, rate)) + values["think_time_seconds"]
    wait = values["concurrency_per_replica"] / rate - response
    return where(wait > 1e-9 * response, wait, 0.0)   # below saturation X·(R + Z) = n to the bisection's precision


@formulas.formula(unit="s", meaning="mean time to first token with the fleet's users (TTFT): the open model's at "
                                    "their throughput, plus the wait for a slot when they saturate the replica",
                  expression="the open model's TTFT at requests_per_s_on_a_replica + closed_loop_wait_seconds",
                  reads=READS + ("requests_per_s_on_a_replica", "closed_loop_wait_seconds"),
                  choice=("load", "closed"))
def time_to_first_token_seconds(**values):
    state = model.at_load(_replica(values), values["requests_per_s_on_a_replica"])
    return model.ttft_mean(state) + values["closed_loop_wait_seconds"]


@formulas.formula(unit="s", meaning="time to first token at the targets' percentile with the fleet's users",
                  expression="the open model's TTFT quantile at requests_per_s_on_a_replica + closed_loop_wait_seconds",
                  reads=READS + ("requests_per_s_on_a_replica", "latency_percentile", "closed_loop_wait_seconds"),
                  choice=("load", "closed"))
def time_to_first_token_percentile_seconds(**values):
    state = model.at_load(_replica(values), values["requests_per_s_on_a_replica"])
    return percentiles.ttft_quantile(state, values["latency_percentile"]) + values["closed_loop_wait_seconds"]
