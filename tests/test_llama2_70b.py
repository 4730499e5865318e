"""Lesson 004's worked example: Llama 2-70B on 2T tokens on A100-80GB.

These reproduce the lesson's arithmetic; they do not validate botec against the published run. The
example's end-to-end MFU (0.435) is itself implied by Meta's reported 1,720,320 GPU-hours, so "about
1.7 million GPU-hours" follows from 6·N·D at that MFU by construction. Validation against published
runs is `botec validate`'s job.
"""

from __future__ import annotations

import pytest

from botec.estimation import estimate_file

from conftest import LLAMA

HOURS_PER_YEAR = 365.25 * 24


def test_reproduces_the_lessons_1_7_million_gpu_hours():
    result = estimate_file(LLAMA)
    # 6 × 70e9 × 2e12 = 8.4e23 FLOP / (312e12 FLOP/s × 0.435) / 3600 = 1.719e6 h (Meta reports 1,720,320)
    assert result.value("training_flops") == pytest.approx(8.4e23)
    assert result.value("accelerator_hours") == pytest.approx(8.4e23 / (312e12 * 0.435) / 3600)
    assert result.quantities["end_to_end_mfu"].source.startswith("implied by Llama 2 paper")


def test_reproduces_the_lessons_195_years_on_one_gpu():
    # One GPU cannot hold the state, so the estimate is for compute only: the run time does not
    # depend on memory, and the report refuses such a plan (see test_cli_errors).
    result = estimate_file(LLAMA, ["supply.count=1"])
    years = result.value("run_seconds") / 3600 / HOURS_PER_YEAR
    assert years == pytest.approx(195, rel=0.02)
    assert not result.fits


def test_reproduces_the_lessons_week_on_10000_gpus():
    result = estimate_file(LLAMA, ["supply.count=10000"])
    days = result.value("run_seconds") / 86400
    assert 6.5 <= days <= 7.5            # 7.16 days
    assert result.fits


def test_zero3_shards_the_state_and_triples_the_traffic():
    result = estimate_file(LLAMA)
    n = 1024
    # 16 B/parameter / 1,024 ways: 70e9 × 16 / 1024 = 1.09 GB of state per GPU
    assert result.value("state_bytes") == pytest.approx(70e9 * 16 / n)
    # reduce-scatter of gradients + two all-gathers of weights: 3 (N−1)/N × 140 GB
    assert result.value("collective_bytes_sent_per_step") == pytest.approx(3 * (n - 1) / n * 140e9)
    # 8 ranks of the shard group in each DGX A100 share its 8 NICs of 25 GB/s (200 Gb/s); NVLink (230 GB/s
    # achieved) carries the other 7/8 at 8/7 × 230 GB/s: min(200, 262.9) = 200 GB/s per rank (audit row 17),
    # a 2.1 s floor beside a 12.7 s step, not the 16.8 s of one NIC carrying everything
    assert result.value("shard_link_bytes_per_s") == pytest.approx(min(8 * 25e9, 8 / 7 * 230e9))
    assert result.value("collective_floor_seconds") == pytest.approx(3 * (n - 1) / n * 140e9 / 200e9)
    network = [f for f in result.findings if f.account == "network"][0]
    assert network.level != "fail"


def test_cost_and_energy():
    result = estimate_file(LLAMA)
    hours = result.value("accelerator_hours")
    assert result.value("training_cost_usd") == pytest.approx(hours * 1.80)
    assert result.value("cost_per_million_tokens_usd") == pytest.approx(hours * 1.80 / 2e12 * 1e6)
    # E = N × T × (DGX A100: 6,500 W / 8 per GPU = 400 W GPU + 412.5 W host) × 0.75 average draw × 1.1 PUE
    assert result.value("host_power_per_accelerator_watts") == pytest.approx(6500 / 8 - 400)
    assert result.value("energy_joules") == pytest.approx(hours * 3600 * 6500 / 8 * 0.75 * 1.1)
