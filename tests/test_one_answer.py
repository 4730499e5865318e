"""One answer from the estimate and the simulator (issue 20, item 1): the arrivals' burstiness in the estimate's
prompt queue, a stated margin in fleet sizing, and a "marginal" verdict that names `botec simulate`.

The queue formulas are checked against hand derivations (Pollaczek–Khinchine, the M^X/G/1 mean of Chaudhry and
Templeton, Kingman's G/G/1); the estimate is then checked against the simulator on the same contract and load,
where it matches (evenly spaced arrivals) and where it only moves the same way (bursts: the exponential tail errs
long, measured and stated below)."""

from __future__ import annotations

import math

import pytest

from conftest import EXAMPLES

H100 = EXAMPLES / "serve-llama3.1-8b-h100.yaml"


def test_queue_wait_reduces_to_pollaczek_khinchine_for_single_poisson_arrivals():
    """ρ = 0.4, S = 30 ms, fixed lengths (c_s² = 0): W̄ = ρ·S/(2(1 − ρ)) = 0.4 · 0.03 / 1.2 = 10 ms; π = ρ."""
    from botec.serving.load import queue_wait

    wait, waiting, rest_of_burst = queue_wait(0.4, 0.030, 0.0, 1.0, 1.0)
    assert wait == pytest.approx(0.010, rel=1e-12)
    assert waiting == pytest.approx(0.4, rel=1e-12) and rest_of_burst == 0.0


def test_queue_wait_of_poisson_bursts_is_the_batch_queue_plus_the_rest_of_the_burst():
    """Bursts of m = 8 at Poisson epochs, ρ = 0.4, S = 30 ms, c_s² = 0. By hand, the burst waits as one customer of
    service 8·S in an M/G/1 queue: λ_b·E[B²]/(2(1 − ρ)) with λ_b = ρ/(8S), E[B²] = 64·S²: 0.4 · 8 · 0.03 / 1.2 =
    80 ms, the burst waiting with probability π = ρ = 0.4; then the engine packs the burst's prompts into the same
    steps, so a request waits for the other 7 as well: 7 · 30 = 210 ms."""
    from botec.serving.load import queue_wait

    wait, waiting, rest_of_burst = queue_wait(0.4, 0.030, 0.0, 1.0, 8.0)
    assert wait == pytest.approx(0.080, rel=1e-12)
    assert waiting == pytest.approx(0.4, rel=1e-12)
    assert rest_of_burst == pytest.approx(0.210, rel=1e-12)


def test_a_burst_dealt_out_over_replicas():
    """λ = 20 requests/s in bursts of 8 (2.5 epochs/s). A replica receiving 20/3 requests/s (a fleet of 3) gets
    a = 8/3 of each burst; one receiving 20 requests/s (alone) the whole 8; one of 10 replicas (2 requests/s) one
    request, never less. Dealt out, X is 2 or 3 (a = 2.5: each half the time): E[X²]/E[X] = (4 + 9)/2 / 2.5 = 2.6,
    so the excess is 1.6 and, with ρ = 0.4, S = 30 ms, c_s² = 0: W̄ = 0.4·0.03·(1 + 1.6)/1.2 = 26 ms in the queue,
    then 1.6·0.03 = 48 ms for the rest of the burst."""
    from botec.serving.load import burst_on_a_replica, queue_wait

    assert burst_on_a_replica(20 / 3, 8.0, 2.5) == pytest.approx(8 / 3, rel=1e-12)
    assert burst_on_a_replica(20.0, 8.0, 2.5) == 8.0
    assert burst_on_a_replica(2.0, 8.0, 2.5) == 1.0
    assert burst_on_a_replica(2.0, 8.0, 0.0) == 8.0       # no fleet rate: whole bursts
    wait, waiting, rest_of_burst = queue_wait(0.4, 0.030, 0.0, 1.0, 2.5)
    assert wait == pytest.approx(0.4 * 0.03 * 2.6 / 1.2, rel=1e-12)
    assert rest_of_burst == pytest.approx(1.6 * 0.03, rel=1e-12) and waiting == 0.4


def test_round_robin_leaves_a_replica_every_rth_gap():
    """Behind round-robin a replica of R takes every R-th epoch of the fleet's (R > m): its gaps are sums of R/m of
    the fleet's, c² = c_a²·m/R. By hand: Poisson (c_a² = 1) at 20 requests/s on 5 replicas of 4 requests/s each:
    Erlang-5 gaps, 1/5; bursts of 2 (10 epochs/s): every 2.5th epoch, 2/5; bursts of 8 (2.5 epochs/s, m ≥ R): every
    epoch reaches every replica, 1; evenly spaced arrivals stay 0; one replica (no fleet rate) keeps c_a²."""
    from botec.serving.load import arrival_variation_on_a_replica

    assert arrival_variation_on_a_replica(4.0, 1.0, 1.0, 20.0) == pytest.approx(0.2, rel=1e-12)
    assert arrival_variation_on_a_replica(4.0, 1.0, 2.0, 10.0) == pytest.approx(0.4, rel=1e-12)
    assert arrival_variation_on_a_replica(4.0, 1.0, 8.0, 2.5) == 1.0
    assert arrival_variation_on_a_replica(4.0, 0.0, 1.0, 20.0) == 0.0
    assert arrival_variation_on_a_replica(4.0, 1.0, 1.0, 0.0) == 1.0


def test_the_ttft_tail_is_the_sums_not_the_sum_of_the_terms_tails():
    """A share π = 0.5 waits, θ = 100 ms on average; every arrival finds a step of L = 50 ms in progress (s = 1);
    no prefill. Beyond L, P(W + U > t) = π·e^(−t/θ)·E[e^(U/θ)], E[e^(U/θ)] = θ(e^(L/θ) − 1)/L = 2·(e^0.5 − 1) =
    1.29744: t_99 = 0.1·ln(0.5 · 1.29744 / 0.01) = 0.41724 s, where adding the terms' quantiles gives
    0.1·ln(50) + 0.99·0.05 = 0.44070 s. Checked by sampling: 4·10⁶ draws land within 1 % of the formula."""
    import numpy as np

    from botec.serving.load import Load
    from botec.serving.percentiles import ttft_quantile

    load = Load(rate=1.0, batch=1.0, round_seconds=0.05, busy_share=0.0, tpot_mean=0.0, tpot_low=0.0, tpot_high=0.0,
                prefill_seconds=0.0, wait_mean=0.05, queue_busy_share=0.5, stepping_share=1.0,
                step_in_progress=0.05, waiting_share=0.5)
    assert ttft_quantile(load, 0.99) == pytest.approx(0.1 * math.log(0.5 * 2 * (math.exp(0.5) - 1) / 0.01), rel=1e-12)
    rng = np.random.default_rng(7)
    draws = 4_000_000
    wait = np.where(rng.random(draws) < 0.5, rng.exponential(0.1, draws), 0.0)
    assert np.quantile(wait + rng.uniform(0, 0.05, draws), 0.99) == pytest.approx(0.41724, rel=0.01)


def test_evenly_spaced_arrivals_of_fixed_prompts_never_queue():
    """Kingman: W̄ ≈ ρ·S·(c_a² + c_s²)/(2(1 − ρ)) = 0 with c_a² = c_s² = 0 (a D/D/1 queue below capacity); with
    exponential lengths (c_s² = 1) half the M/M/1 wait: 0.4 · 0.03 · 1 / 1.2 = 10 ms."""
    from botec.serving.load import queue_wait

    assert queue_wait(0.4, 0.030, 0.0, 0.0, 1.0)[0] == 0.0
    assert queue_wait(0.4, 0.030, 1.0, 0.0, 1.0)[0] == pytest.approx(0.010, rel=1e-12)


def _estimate(**changes):
    from botec.api import estimate

    return estimate(H100, overrides={"supply.candidates": None} | changes)


def test_the_estimate_moves_with_the_arrivals_and_agrees_with_the_simulator_for_even_ones():
    """The same load (15 requests/s on one replica) under three arrival processes. Evenly spaced arrivals: the
    estimate's mean and P99 TTFT stand within 5 % of the simulator's (by construction nothing queues; what is left
    is the prefill and the step in progress). Bursts of 8, all on this one replica: both move up several-fold from
    Poisson; measured on this contract, the simulator's mean is ~216 ms and P99 ~487 ms against the estimate's
    ~263 ms and ~778 ms (the queue's exponential tail errs long for a burst's fixed service)."""
    from botec.simulate import simulate

    ttft = {}
    for arrivals in ("poisson", "bursty", "uniform"):
        result = _estimate(**{"workload.traffic.arrivals": arrivals, "workload.latency.percentile": 99})
        run = simulate(result, requests=6_000, rate=15.0, replicas=1, seed=3)
        analytic = run.analytic
        ttft[arrivals] = (analytic.time_to_first_token_seconds, analytic.time_to_first_token_percentile_seconds,
                          run.ttft.mean_seconds, run.ttft.p99_seconds)
    mean, p99, simulated_mean, simulated_p99 = ttft["uniform"]
    assert mean == pytest.approx(simulated_mean, rel=0.05)
    assert p99 == pytest.approx(simulated_p99, rel=0.05)
    for column in range(4):   # bursts move the estimate and the simulation alike, well above Poisson
        assert ttft["bursty"][column] > 2.5 * ttft["poisson"][column]
    assert 0.9 < ttft["bursty"][0] / ttft["bursty"][2] < 1.35   # mean: within -10 % .. +35 % of the simulator
    assert 1.0 < ttft["bursty"][1] / ttft["bursty"][3] < 2.0    # P99: errs long, never short


def test_the_fleet_keeps_the_margin_it_states():
    """At 100 requests/s with a 40 ms TPOT target at P90, the fleet is sized so that TPOT stays at or under
    40 × (1 − m) ms; m = 0 sizes to the target itself and needs no more replicas than m = 0.3."""
    sized = {}
    for margin in (0.0, 0.1, 0.3):
        result = _estimate(**{"workload.traffic.requests_per_second": 100, "workload.latency.margin": margin,
                              "assumptions.utilization_cap": 1.0})
        q = result.quantities
        tpot = q["time_per_output_token_percentile_seconds"].value
        assert tpot <= 0.040 * (1 - margin) * (1 + 1e-9)
        sized[margin] = q["replicas"].value
    assert sized[0.0] <= sized[0.1] <= sized[0.3]


def test_a_target_inside_the_margin_is_called_marginal_and_names_simulate():
    """A TPOT target 3 % above the idle replica's TPOT (its floor at the percentile): no load keeps a 10 % margin,
    so the fleet is sized to the target itself and the verdict says marginal, naming botec simulate."""
    base = _estimate()
    floor = base.quantities["time_per_output_token_floor_seconds"].value
    result = _estimate(**{"workload.latency.time_per_output_token": f"{floor * 1.03 * 1e3:.4f} ms",
                          "workload.traffic.requests_per_second": 1})
    messages = [finding.message for finding in result.findings if finding.account == "serving"]
    marginal = [m for m in messages if m.startswith("marginal: TPOT")]
    assert marginal and "botec simulate" in marginal[0] and "10%" in marginal[0]
    assert result.quantities["targets_reachable"].value == 1


def test_a_margin_out_of_range_names_its_field():
    from botec.errors import ContractError

    with pytest.raises(ContractError) as error:
        _estimate(**{"workload.latency.margin": 0.95})
    assert "workload.latency.margin" in str(error.value) and "at most 0.9" in str(error.value)
    assert not math.isnan(_estimate(**{"workload.latency.margin": 0}).value("replicas"))


def test_the_interval_over_runs_is_students_t_by_hand():
    """Runs 1, 2, 3, 4 s: x̄ = 2.5, s = √(5/3) = 1.29099, t(0.975, 3) = 3.182: half-width 3.182 · 1.29099 / 2 =
    2.05397 s."""
    from botec.simulate.replications import interval, requests_beyond

    found = interval([1.0, 2.0, 3.0, 4.0])
    assert found.mean_seconds == 2.5
    assert found.half_width_seconds == pytest.approx(3.182 * math.sqrt(5 / 3) / 2, rel=1e-12)
    assert math.isnan(interval([1.0]).half_width_seconds)
    assert requests_beyond(9_500, 99) == pytest.approx(95.0)


def test_simulate_seeds_reports_each_run_and_the_interval(cli):
    """--seeds 3 runs seeds 5, 6, 7: its P99 TTFT runs are what --seed 5, 6 and 7 give alone, and 2,000 requests
    (1,900 measured, 19 beyond the P99) are called too few for the P99."""
    import json

    args = ["simulate", str(H100), "-n", "2000", "-f", "json"]
    code, out, _ = cli(*args, "--seeds", "3", "--seed", "5")
    assert code == 0
    spread = json.loads(out)["replications"]
    assert spread["seeds"] == [5, 6, 7] and spread["thin_tails"] == ["P99"]
    alone = [json.loads(cli(*args, "--seed", str(seed))[1])["time_to_first_token"]["p99_seconds"] for seed in (5, 6, 7)]
    assert spread["ttft_p99"]["runs_seconds"] == alone
    assert spread["ttft_p99"]["mean_seconds"] == pytest.approx(sum(alone) / 3, rel=1e-12)
    code, _, err = cli("simulate", str(H100), "--seeds", "0")
    assert code == 2 and "--seeds: expected 1 to 100 runs, got 0" in err


SEVENTY_B_H100 = {"supply.accelerator": "h100-sxm", "supply.cluster": {"node": "dgx-h100"},
                  "workload.traffic.requests_per_second": 20, "workload.latency.percentile": 99}
"""Issue 20's case: Llama 2-70B at TP 4 on H100s, 20 requests/s of 1,024 + 256 tokens, P99 TTFT target 2 s, TPOT
50 ms (examples/serve-llama2-70b-a100-tp4.yaml moved to a DGX H100)."""


FLEET = {"poisson": 3, "bursty": 4}
"""The replicas the estimate sizes. Under bursts it was 3 until the TP all-reduces were priced from the measured vLLM
table (a 2,048-token chunk step 7 % dearer): on 3 replicas the bursty P99 TPOT nears the 50 ms target (estimate
48.9 ms; simulated, 10 seeds, up to 51.1 ms: some runs miss it), so it sizes 4."""


@pytest.mark.parametrize("arrivals", ["poisson", "bursty"])
def test_seventy_b_on_h100_one_answer_over_ten_seeds(arrivals):
    """The estimate's P99 TTFT against the simulator's over 10 seeds of 10,000 requests each on the fleet the
    estimate sized (:data:`FLEET`), and the verdicts agree (both meet both targets). Measured when written (the TP
    all-reduces and decode attention from the measured tables, the simulator balancing round-robin): Poisson, 3
    replicas, estimate 0.180 s against 0.178 s simulated, +1.5 % (a replica behind round-robin takes every third
    arrival: gaps of c_a² = 1/3; with the fleet's Poisson gaps on each replica and the least-outstanding balancer it
    was +17.8 %, an xfail). Bursts of 8 (2 of each on every one of the 4 replicas they size) move both, about 3×:
    0.555 s against 0.491 s, +13.1 % (on 3 replicas and least-outstanding balancing −23 %)."""
    from botec.api import estimate
    from botec.simulate.replications import interval

    from botec.simulate import simulate

    result = estimate(EXAMPLES / "serve-llama2-70b-a100-tp4.yaml",
                      overrides=SEVENTY_B_H100 | {"workload.traffic.arrivals": arrivals})
    q = result.quantities
    assert q["replicas"].value == FLEET[arrivals]
    runs = [simulate(result, requests=10_000, seed=seed) for seed in range(10)]
    simulated = interval([run.ttft.p99_seconds for run in runs])
    estimated = q["time_to_first_token_percentile_seconds"].value
    error = estimated / simulated.mean_seconds - 1
    for run in runs:   # the verdicts: every target met by the estimate and in every simulated run
        assert run.ttft.p99_seconds < 2.0 and run.tpot.p99_seconds < 0.050
    assert q["time_per_output_token_percentile_seconds"].value < 0.050 and estimated < 2.0
    assert abs(error) <= 0.15
    if arrivals == "poisson":
        assert estimated < 0.3 and simulated.mean_seconds < 0.3
    else:
        assert estimated > 1.5 * 0.3 and simulated.mean_seconds > 1.5 * 0.3   # bursts move both, on a fleet of 4
