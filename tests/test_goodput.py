"""The failure and goodput model (botec.training.goodput): Young/Daly's optimum, the expected wall time against a
Monte Carlo of failures, asynchronous checkpoints, and the estimate's figures with and without failures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from botec.contract import apply_overrides, parse_contract, read_contract_data
from botec.errors import ContractError
from botec.estimation import estimate
from botec.training.goodput import (daly_checkpoint_interval_seconds, expected_wall_seconds,
                                    young_checkpoint_interval_seconds)

from conftest import EXAMPLES, LESSON

HOUR = 3600.0
LONG_RUN = 1e9  # seconds: a run long enough that the optimal interval is not capped by it


def lesson_with(*overrides: str):
    return estimate(parse_contract(apply_overrides(read_contract_data(LESSON), list(overrides))))


# --- Young 1974 and Daly 2006 ------------------------------------------------------------------------

def test_young_and_daly_reproduce_their_published_formulas():
    """δ = 60 s, M = 24 h: Young τ = √(2 · 60 · 86,400) = √10,368,000 = 3,219.9 s. Daly: y = δ/2M = 60 / 172,800
    = 3.472e-4, √y = 0.018634; τ = 3,219.94 × (1 + 0.018634/3 + 3.472e-4/9) − 60 = 3,219.94 × 1.0062499 − 60
    = 3,180.1 s."""
    rate = 1 / 24  # failures per hour: M = 24 h
    assert young_checkpoint_interval_seconds(60.0, rate, LONG_RUN) == pytest.approx(3219.94, abs=0.01)
    assert daly_checkpoint_interval_seconds(60.0, rate, LONG_RUN) == pytest.approx(3180.06, abs=0.01)
    # δ ≥ 2M: Daly's estimate is M itself (δ = 3 h, M = 1 h)
    assert daly_checkpoint_interval_seconds(3 * HOUR, 1.0, LONG_RUN) == pytest.approx(HOUR)
    # asynchronous saves: never below the background write (δ = 10 ms, M = 3 h: Daly's 14.7 s < a 300 s write)
    assert daly_checkpoint_interval_seconds(0.01, 1 / 3, LONG_RUN) == pytest.approx(14.70, abs=0.01)
    assert daly_checkpoint_interval_seconds(0.01, 1 / 3, LONG_RUN, 300.0) == 300.0
    # never longer than the run, and finite without failures
    assert daly_checkpoint_interval_seconds(60.0, rate, 1000.0) == 1000.0
    assert young_checkpoint_interval_seconds(60.0, 0.0, 5000.0) == daly_checkpoint_interval_seconds(60.0, 0.0,
                                                                                                   5000.0) == 5000.0


@pytest.mark.parametrize("pause, mtbf_hours, daly_within", [(60, 24, 1e-4), (60, 3, 1e-4), (600, 3, 1e-3),
                                                             (1800, 2, 5e-3)])
def test_the_expected_wall_time_is_least_at_the_daly_interval(pause, mtbf_hours, daly_within):
    """Minimize the model's own expected wall time over τ numerically (a fine grid, the formula on arrays): Daly's
    estimate lands on the minimum (within 0.01 % while δ ≪ M, 0.2 % at δ = M/4); Young's first-order τ is longer
    (by 1.3 % at δ/M = 7e-4, 28 % at δ/M = 1/4) and never better."""
    rate, mtbf = 1 / mtbf_hours, mtbf_hours * HOUR
    taus = np.linspace(pause, 10 * math.sqrt(2 * pause * mtbf), 200_001)
    walls = expected_wall_seconds(LONG_RUN, taus, float(pause), 900.0, 0.0, rate)
    best = taus[np.argmin(walls)]
    daly = daly_checkpoint_interval_seconds(float(pause), rate, LONG_RUN)
    young = young_checkpoint_interval_seconds(float(pause), rate, LONG_RUN)
    assert daly == pytest.approx(best, rel=daly_within)
    assert young > daly
    at = {name: expected_wall_seconds(LONG_RUN, tau, float(pause), 900.0, 0.0, rate)
          for name, tau in (("daly", daly), ("young", young))}
    assert at["daly"] == pytest.approx(walls.min(), rel=1e-6)
    assert at["young"] >= at["daly"]


def test_expected_wall_time_by_hand():
    """T = 100 h, τ = 1 h, δ = 2 min, R = 15 min, L = 0, M = 10 h (Daly's complete model):
    W = T/τ · M·e^{R/M}·(e^{(τ+δ)/M} − 1) = 100 × 10 h × e^{0.025} × (e^{0.10333} − 1)
      = 1,000 h × 1.025315 × 0.108861 = 111.617 h;
    first order it is T(1 + δ/τ)(1 + (R + (τ+δ)/2)/M) = 103.33 × 1.07667 = 111.26 h."""
    wall = expected_wall_seconds(100 * HOUR, HOUR, 120.0, 900.0, 0.0, 0.1)
    assert wall / HOUR == pytest.approx(1000 * math.exp(0.025) * math.expm1(3720 / 36000), rel=1e-12)
    assert wall / HOUR == pytest.approx(111.617, abs=1e-3)
    # no failures: the pauses only, T (τ + δ)/τ
    assert expected_wall_seconds(100 * HOUR, HOUR, 120.0, 900.0, 0.0, 0.0) == pytest.approx(100 * 3720)


# --- a Monte Carlo of failures -----------------------------------------------------------------------

def simulate_runs(run, interval, pause, restart_seconds, write_behind, mtbf, runs, seed):
    """Wall time and failure count of ``runs`` independent jobs, vectorized over the jobs, one failure at a time.

    A job trains T/τ segments of τ + δ. A checkpoint becomes safe in storage L after its pause ends. Failures come
    with exponential gaps of mean M, during restarts too; each one rolls the job back to its last safe checkpoint
    and it starts again after R (the first start has no restart). After a (re)start at checkpoint c, checkpoint k
    is safe at R + (k − c)(τ + δ) + L, and the run ends at R + (n − c)(τ + δ)."""
    rng = np.random.default_rng(seed)
    segments, segment = round(run / interval), interval + pause
    wall, failures = np.zeros(runs), np.zeros(runs)
    safe = np.zeros(runs)              # the last checkpoint safe in storage
    ahead = np.zeros(runs)             # the restart ahead of each job: none at the first start
    running = np.arange(runs)
    while running.size:
        gap = rng.exponential(mtbf, running.size)
        finish = ahead[running] + (segments - safe[running]) * segment
        done = finish <= gap
        wall[running[done]] += finish[done]
        hit, gap = running[~done], gap[~done]
        trained = gap - ahead[hit]     # < 0: the failure struck during the restart
        saved = np.floor((trained - write_behind) / segment)   # checkpoints made safe since the (re)start
        safe[hit] += np.where(trained >= write_behind, saved, 0)
        wall[hit] += gap
        failures[hit] += 1
        ahead[hit] = restart_seconds
        running = hit
    return wall, failures


@pytest.mark.parametrize("pause, write_behind, mtbf_hours", [(120.0, 0.0, 10), (300.0, 0.0, 2),
                                                              (10.0, 1200.0, 10), (30.0, 3000.0, 5)])
def test_a_monte_carlo_of_failures_agrees_with_the_expected_wall_time(pause, write_behind, mtbf_hours):
    """20,000 seeded runs of 100 h of training with saves every hour and a 15-minute restart, synchronous (L = 0)
    and asynchronous (a background write of 20 or 50 min): the mean wall time, lost time and failure count agree
    with the analytic ones within 5 % (they do within 0.7 %: only the run's last segment differs), and the
    standard error of the mean is far below the tolerance (under 0.1 % of the wall time)."""
    run, interval, restart, mtbf = 100 * HOUR, HOUR, 900.0, mtbf_hours * HOUR
    wall, failures = simulate_runs(run, interval, pause, restart, write_behind, mtbf, 20_000, seed=13)
    expected = expected_wall_seconds(run, interval, pause, restart, write_behind, 1 / mtbf_hours)
    standard_error = wall.std() / math.sqrt(wall.size)
    assert standard_error / expected < 0.001
    assert wall.mean() == pytest.approx(expected, rel=0.05)
    assert wall.mean() == pytest.approx(expected, rel=0.01)
    pauses_only = run * (1 + pause / interval)
    assert wall.mean() - pauses_only == pytest.approx(expected - pauses_only, rel=0.05)   # the lost time
    assert failures.mean() == pytest.approx(expected / mtbf, rel=0.05)                    # W/M interruptions
    # the simulation tells models apart: the first-order T(1 + δ/τ)(1 + (R + L + (τ + δ)/2)/M) misses it by 7 %
    # at M = 2 h (151.2 h against 162.9 h), by 0.3 % at M = 10 h
    first_order = pauses_only * (1 + (restart + write_behind + (interval + pause) / 2) / mtbf)
    assert abs(first_order / wall.mean() - 1) > (0.05 if mtbf_hours == 2 else 0.002)


def test_the_first_order_model_is_what_the_exact_one_tends_to():
    """Lost per failure → R + L + (τ + δ)/2 as failures become rare: 15 + 20 + 31 = 66 min at M = 10⁴ h."""
    from botec.training.goodput import lost_seconds_per_interruption

    rate, run = 1e-4, 1e5 * HOUR
    wall = expected_wall_seconds(run, HOUR, 120.0, 900.0, 1200.0, rate)
    lost = wall - run * (1 + 120 / HOUR)
    per = lost_seconds_per_interruption(lost, wall * rate / HOUR, 900.0, 1200.0, HOUR, 120.0)
    assert per / 60 == pytest.approx(15 + 20 + 31, rel=1e-3)
    assert lost_seconds_per_interruption(0.0, 0.0, 900.0, 0.0, HOUR, 120.0) == 900 + 3720 / 2


# --- the estimate: sync keeps the lesson's figures, async changes the pause and the host memory ---------------

def test_sync_keeps_the_lessons_checkpoint_figures(lesson):
    q = lesson.quantities
    assert q["checkpoint_pause_seconds_each"].value == pytest.approx(14)               # 14 GB / 1 GB/s
    assert round(q["checkpoint_pause_share"].value * 100, 1) == 0.4                     # 14 s per hour
    assert q["checkpoint_snapshot_seconds"].value == 0 and q["checkpoint_write_behind_seconds"].value == 0
    # 4 accelerators × 2.7e-5 (the fleet default) = 1.08e-4 failures per hour: M = 9,259 h = 3.333e7 s. Daly's
    # optimum √(2δM)·(1 + ⅓·√(δ/2M) + δ/18M) − δ = 30,550.5 × 1.000153 − 14 = 30,541 s, just under the
    # 31,250 s run
    assert q["job_interruptions_per_hour"].value == pytest.approx(1.08e-4)
    assert q["run_seconds"].value == pytest.approx(31_250)
    assert q["optimal_checkpoint_interval_seconds"].value == pytest.approx(30_541, abs=1)
    storage = [f.message for f in lesson.findings if f.account == "storage"]
    assert any("blocks training for 14 s" in m for m in storage)


def test_async_pauses_for_the_copy_to_host_memory():
    """The lesson with asynchronous saves over a 25 GB/s host link and 512 GB of host memory per node: each of the
    4 accelerators copies 14 GB / 4 = 3.5 GB: 3.5 GB / 25 GB/s = 0.14 s; the write (14 s) runs behind. No cluster
    is stated, so the 4 accelerators share a node: 4 × 3.5 GB = 14 GB of host memory, 2.73 % of 512 GB."""
    result = lesson_with("strategy.checkpoint.mode=async", "supply.host_link_bandwidth=25 GB/s",
                         "supply.host_memory=512 GB")
    q = {name: quantity.value for name, quantity in result.quantities.items()}
    assert q["checkpoint_bytes_per_accelerator"] == pytest.approx(3.5e9)
    assert q["checkpoint_snapshot_seconds"] == pytest.approx(0.14)
    assert q["checkpoint_pause_seconds_each"] == pytest.approx(0.14)
    assert q["checkpoint_pause_share"] == pytest.approx(0.14 / 3600.14)             # of wall time: δ / (τ + δ)
    assert q["checkpoint_write_behind_seconds"] == pytest.approx(14)
    assert q["checkpoint_host_memory_bytes_per_node"] == pytest.approx(14e9)
    assert q["checkpoint_host_memory_share"] == pytest.approx(14 / 512)
    # the run's expected wall time: pauses of 0.14 s, and a failure during the 14 s write loses one more interval
    assert q["expected_wall_seconds"] == pytest.approx(expected_wall_seconds(
        q["run_seconds"], 3600.0, 0.14, 900.0, 14.0, 4 * 2.7e-5))
    messages = " ".join(f.message for f in result.findings)
    assert "pauses training for 0.14 s" in messages and "14 GB per node in host memory" in messages


def test_an_async_write_longer_than_the_interval_makes_the_next_save_wait():
    """A 1 GB/s store and a 5 s interval: the 14 s write outlasts the interval by 9 s, which the next save waits."""
    result = lesson_with("strategy.checkpoint.mode=async", "supply.host_link_bandwidth=25 GB/s",
                         "strategy.checkpoint.interval=5 s")
    assert result.value("checkpoint_pause_seconds_each") == pytest.approx(0.14 + 9)
    assert any(f.level == "warn" and "each save waits for the one before" in f.message for f in result.findings)


def test_host_memory_that_cannot_stage_the_shards_is_a_warning():
    result = lesson_with("strategy.checkpoint.mode=async", "supply.host_link_bandwidth=25 GB/s",
                         "supply.host_memory=8 GB")
    assert result.value("checkpoint_host_memory_share") == pytest.approx(14 / 8)
    assert any(f.level == "warn" and "does not fit" in f.message for f in result.findings)


def test_async_without_a_host_link_names_the_field():
    with pytest.raises(ContractError) as error:
        lesson_with("strategy.checkpoint.mode=async")   # an inline accelerator: no catalog host link
    assert error.value.field == "supply.host_link_bandwidth"


def test_no_failures_leaves_the_pause_only_goodput(lesson):
    """failure_rate 0: no interruptions, and goodput = τ/(τ + δ) = 1 − pause share (δ/(τ + δ)) = 3,600/3,614
    = 99.61 %."""
    result = lesson_with("assumptions.failure_rate=0")
    q = {name: quantity.value for name, quantity in result.quantities.items()}
    assert q["expected_interruptions"] == 0 and q["failure_lost_seconds"] == pytest.approx(0, abs=1e-6)
    assert q["goodput"] == pytest.approx(1 - q["checkpoint_pause_share"])
    assert q["goodput"] == pytest.approx(3600 / 3614)
    assert q["expected_wall_seconds"] == pytest.approx(q["run_seconds"] * 3614 / 3600)
    assert q["optimal_checkpoint_interval_seconds"] == q["run_seconds"]
    assert any("none assumed" in f.message for f in result.findings)
    # the run's other figures do not move
    assert q["run_seconds"] == lesson.value("run_seconds")


# --- the 16k-GPU example: Llama 3's rate, goodput, cost and the ranges -------------------------------------

@pytest.fixture(scope="module")
def llama3():
    from botec.estimation import estimate_file

    return estimate_file(EXAMPLES / "llama3-405b-16k-gpu-failures.yaml")


def test_llama3_failure_rate_and_expected_interruptions(llama3):
    """16,384 × 2e-5 = 0.328 failures per hour: one every 3.05 h (Llama 3: 419 in 54 days, one every 3.1 h)."""
    q = {name: quantity.value for name, quantity in llama3.quantities.items()}
    assert q["job_interruptions_per_hour"] == pytest.approx(0.32768)
    assert 419 / (54 * 24) == pytest.approx(q["job_interruptions_per_hour"], rel=0.02)
    assert q["expected_interruptions"] == pytest.approx(q["expected_wall_seconds"] * 0.32768 / 3600)
    assert q["goodput"] == pytest.approx(q["run_seconds"] / q["expected_wall_seconds"])
    # cost: the expected accelerator-hours at $2.50/h
    assert q["expected_accelerator_hours"] == pytest.approx(16384 * q["expected_wall_seconds"] / 3600)
    assert q["expected_training_cost_usd"] == pytest.approx(q["expected_accelerator_hours"] * 2.50)
    # the optimal interval (a 5.67 TB state at 2 TB/s: a 2.8 s pause) is minutes, and saves time over 1 h
    assert q["checkpoint_pause_seconds_each"] == pytest.approx(q["checkpoint_bytes"] / 2e12)
    mtbf = 3600 / 0.32768
    assert q["young_checkpoint_interval_seconds"] == pytest.approx(math.sqrt(2 * q["checkpoint_pause_seconds_each"]
                                                                             * mtbf))
    assert q["optimal_checkpoint_interval_seconds"] < 600 and q["optimal_interval_saving_seconds"] > 0
    assert q["optimal_interval_saving_usd"] == pytest.approx(q["optimal_interval_saving_seconds"] * 16384 / 3600
                                                             * 2.50)


def test_failure_rate_and_restart_time_are_ranged_inputs_uncertainty_varies(llama3):
    from botec.explore.uncertainty import sensitivity

    ranged = llama3.inputs.ranged()
    assert {"assumptions.failure_rate", "assumptions.restart_time"} <= set(ranged)
    swings = {swing.input: swing for swing in sensitivity(llama3, "goodput")}
    failure = swings["assumptions.failure_rate"]
    assert failure.output_at_low > llama3.value("goodput") > failure.output_at_high   # more failures, less goodput
    assert swings["assumptions.restart_time"].output_at_high < llama3.value("goodput")


def test_the_default_failure_rate_is_two_fleets_pooled():
    """Kokolis et al. 2024 (arXiv:2410.21680): r_f = 6.50 (RSC-1, 16k A100) and 2.34 (RSC-2, 8k A100) failures per
    1,000 node-days, 8 GPUs a node: 3.39e-5 and 1.22e-5 per GPU-hour; pooled by size (2:1) 2.66e-5, stored as 2.7e-5.
    The high end: RSC-1's 1,024-GPU jobs failed every 7.9 h, 1 / (7.9 × 1,024) = 1.24e-4 per GPU-hour."""
    from botec.contract.training import TrainingAssumptions

    def per_gpu_hour(per_1000_node_days):
        return per_1000_node_days / 1000 / (8 * 24)

    rsc1, rsc2 = per_gpu_hour(6.50), per_gpu_hour(2.34)
    default = TrainingAssumptions().failure_rate
    assert default.value == pytest.approx((16_384 * rsc1 + 8_192 * rsc2) / 24_576, abs=0.05e-5)
    assert default.low == pytest.approx(rsc2, rel=0.02)
    assert default.high == pytest.approx(1 / (7.9 * 1024), rel=0.03)
    assert default.low < rsc1 < default.high                     # the range spans both fleets
    assert "Kokolis et al. 2024" in default.source and "Llama" not in default.source
