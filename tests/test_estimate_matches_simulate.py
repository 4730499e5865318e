"""The estimate's P99 latencies against the simulator's on the 70B fleet (issue 29 item 4; newcomer-3 defects 2, 6).

Llama 3.1 70B, TP 4 on H100, 5 replicas, 20 requests/s of 2,048 prompt + 256 output tokens, P99 targets TTFT 2 s
and TPOT 50 ms: newcomer-3's case. The simulator's figures are the reference: the mean over 10 seeds of 10,000
requests (the simulate default) behind its round-robin balancer (the default of vLLM's production-stack router and
Dynamo's frontend); the estimate's are its own functions at the
same load per replica (``Simulation.analytic``: ``botec.serving.load``, as ``time_per_output_token_percentile_seconds``
computes them). About 5 CPU s in all.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numpy")

CASE = {"workload.kind": "serving", "workload.model": "llama-3.1-70b", "supply.accelerator": "h100-sxm",
        "strategy.engine": "vllm", "strategy.tensor_parallel": 4, "workload.traffic.requests_per_second": 20,
        "workload.traffic.prompt_tokens": 2048, "workload.traffic.output_tokens": 256,
        "workload.latency.time_to_first_token": "2 s", "workload.latency.time_per_output_token": "50 ms",
        "workload.latency.percentile": 99}
REPLICAS, SEEDS, REQUESTS = 5, 10, 10_000


def _contract(arrivals: str) -> dict:
    """The newcomer's contract as a mapping (botec init --serving --model llama-3.1-70b, with their --set lines)."""
    out: dict = {"name": "fleet-70b"}
    for path, value in (CASE | {"workload.traffic.arrivals": arrivals}).items():
        node = out
        *parents, leaf = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return out


_RUNS: dict = {}


def _run(arrivals: str):
    """(analytic figures, simulated P99 TTFT, simulated P99 TPOT, targets) over the seeds, computed once."""
    if arrivals not in _RUNS:
        from botec.api import estimate
        from botec.simulate import simulate

        result = estimate(_contract(arrivals))
        runs = [simulate(result, requests=REQUESTS, seed=seed, replicas=REPLICAS) for seed in range(SEEDS)]
        _RUNS[arrivals] = (runs[0].analytic, float(np.mean([r.ttft.p99_seconds for r in runs])),
                           float(np.mean([r.tpot.p99_seconds for r in runs])),
                           (runs[0].ttft_target_seconds, runs[0].tpot_target_seconds))
    return _RUNS[arrivals]


@pytest.mark.parametrize("arrivals", ["poisson", "bursty"])
def test_p99_tpot_within_15_percent_of_the_simulated(arrivals):
    """Bursts move TPOT: the simulated P99 is ~45 ms (Poisson) and ~66 ms (bursts of 8); the estimate said 38.4 ms
    for both before (newcomer-3 #2), so its ✔ stood against the simulator's ✘ under bursts. Its decode window's
    fixed point unsettled, it said 85.6 ms under bursts (+29.5 %); solved, 75.0 ms (+13 %)."""
    analytic, _, simulated, _ = _run(arrivals)
    estimated = analytic.time_per_output_token_percentile_seconds
    assert estimated == pytest.approx(simulated, rel=0.15)


@pytest.mark.parametrize("arrivals", ["poisson", "bursty"])
def test_p99_tpot_verdicts_agree(arrivals):
    """The estimate's ✔/✘ against the 50 ms P99 TPOT target is the simulator's (newcomer-3 #2)."""
    analytic, _, simulated, (_, target) = _run(arrivals)
    estimated = analytic.time_per_output_token_percentile_seconds
    assert (estimated <= target) == (simulated <= target)


@pytest.mark.parametrize("arrivals", ["poisson", "bursty"])
def test_p99_ttft_within_15_percent_of_the_simulated_and_the_verdicts_agree(arrivals):
    """Each replica queues its own prompts (a request is bound to its replica when it arrives): the estimate's prompt
    queue is a replica's G/G/1 with the gaps round-robin leaves it (c_a² = 1/5 of Poisson arrivals, the Erlang-5 gaps
    of every fifth arrival; bursts of 8 reach every replica, 1 or 2 requests each). Measured: simulated 0.213 s
    (Poisson) and 1.078 s (bursts), estimated 0.239 s and 1.112 s (+12 %, +3 %); before, a replica's queue took the
    fleet's Poisson gaps (0.641 s) and the simulator's least-outstanding balancer herded (1.28 s)."""
    analytic, simulated, _, (target, _) = _run(arrivals)
    estimated = analytic.time_to_first_token_percentile_seconds
    assert estimated == pytest.approx(simulated, rel=0.15)
    assert (estimated <= target) == (simulated <= target)


def test_tpot_quantile_is_the_mean_at_the_windows_rate_quantile():
    """Hand-derived: Λ_q = λ·(1 + z·√v), v = m·c_a²/(λ_f·T), T = (O − 1)·TPOT_q; with evenly spaced arrivals
    (c_a² = 0) v = 0 and the quantile is the mean."""
    import dataclasses

    from botec.api import estimate
    from botec.serving import load, percentiles
    from botec.serving.instances import replica_of_quantities

    replica = replica_of_quantities(estimate(_contract("poisson")).quantities)
    even = dataclasses.replace(replica, arrival_variation=0.0, burst_epochs_per_s=20.0)
    state = load.at_load(even, 4.0)
    assert percentiles.tpot_quantile(even, state, 2.3263479) == pytest.approx(float(state.tpot_mean), rel=1e-9)
    poisson = dataclasses.replace(replica, burst_epochs_per_s=20.0)
    state = load.at_load(poisson, 4.0)
    got = float(percentiles.tpot_quantile(poisson, state, 2.3263479))
    window = 255 * got   # the fixed point, within its last iteration's move
    rate = 4.0 * (1 + 2.3263479 * (1 / (20.0 * window)) ** 0.5)
    assert got == pytest.approx(float(load.at_load(poisson, rate).tpot_mean), rel=0.01)


def test_the_decode_windows_fixed_point_is_solved():
    """TPOT_q is the root of q = G(q), G the mean TPOT at the rate quantile of the window (O − 1)·q: on the bursty
    fleet the plain iteration q ← G(q) swings 132 → 60 → 86 → 70 → … ms and settles near 75 ms only after ten steps."""
    import dataclasses
    from statistics import NormalDist

    from botec.api import estimate
    from botec.serving import load, percentiles
    from botec.serving.instances import replica_of_quantities

    replica = replica_of_quantities(estimate(_contract("bursty")).quantities)
    replica = dataclasses.replace(replica, burst_epochs_per_s=20 / replica.burst_size)   # 20 requests/s, 8 a burst
    state = load.at_load(replica, 20 / REPLICAS)
    z = NormalDist().inv_cdf(0.99)
    quantile = float(percentiles.tpot_quantile(replica, state, z))
    window = (replica.output_tokens - 1) * quantile                       # T = (O − 1)·q
    variation = replica.burst_size * replica.arrival_variation / (20 * window)   # v = m·c_a²/(λ_f·T)
    again = load.at_load(replica, state.rate * (1 + z * variation ** 0.5)).tpot_mean   # G(q)
    assert again == pytest.approx(quantile, rel=1e-3)
    assert 0.070 < quantile < 0.080   # the plain iteration's third step said 0.0856
