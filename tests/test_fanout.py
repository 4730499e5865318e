"""Fanning work out (botec.fanout): the same figures on 1, 2 and 4 local workers and on a local Ray cluster, the
progress counted in this process, partial results kept on Ctrl-C, and one-line errors for bad options."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from botec.errors import UserError
from botec.estimation import estimate_file
from botec.explore import uncertainty
from botec.explore.search import search
from botec.explore.space import Space, evaluate_space, parse_axes
from botec.fanout import Interrupted, check_workers, fanout_options, run_tasks
from botec.report.simulation import simulation_json
from botec.simulate.replications import replicate

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SERVING = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
LESSON = EXAMPLES / "lesson-finetune-1b.yaml"
GPT3 = EXAMPLES / "gpt3-175b-search.yaml"


@pytest.fixture(scope="module")
def serving():
    return estimate_file(SERVING)


@pytest.fixture(scope="module")
def lesson():
    return estimate_file(LESSON)


def _replications_json(result, workers, ray_address=""):
    runs = replicate(result, 4, seed=5, workers=workers, ray_address=ray_address, requests=300, rate=20.0)
    return simulation_json(runs.runs[0], runs)


def _sweep(inputs, workers, ray_address=""):
    space = Space(inputs, parse_axes(["supply.count=8..2048/8", "strategy.micro_batch_size=1..8"], inputs))
    return evaluate_space(space, chunk=500, wanted=["step_seconds", "memory_spare_bytes"], workers=workers,
                          ray_address=ray_address)


def _monte_carlo(result, workers, ray_address=""):
    mc = uncertainty.monte_carlo(result, samples=3_500, seed=11, deadline_seconds=9 * 3600, workers=workers,
                                 ray_address=ray_address)
    return mc.samples, mc.percentiles, mc.probability_fits, mc.probability_deadline, mc.varied


def _same_sweep(one, other) -> None:
    (columns, valid, counts), (other_columns, other_valid, other_counts) = one, other
    assert counts == other_counts and np.array_equal(valid, other_valid)
    assert columns.keys() == other_columns.keys()
    for name in columns:
        assert np.array_equal(columns[name], other_columns[name], equal_nan=True), name


def test_simulate_seeds_are_the_same_on_1_2_and_4_workers(serving):
    """Run k's seed is 5 + k whoever runs it: the report, every run's percentiles and the intervals, byte for byte."""
    alone = _replications_json(serving, 1)
    assert json.loads(alone)["replications"]["seeds"] == [5, 6, 7, 8]
    assert _replications_json(serving, 2) == alone
    assert _replications_json(serving, 4) == alone


def test_a_sweep_is_the_same_on_1_2_and_4_workers(lesson, monkeypatch):
    """256 × 8 = 2,048 rows in chunks of 500 (5 tasks): every column, the valid mask and the counts."""
    alone = _sweep(lesson.inputs, 1)
    assert alone[2]["candidates"] == 2_048 and alone[1].sum() == alone[2]["evaluated"] > 0
    _same_sweep(_sweep(lesson.inputs, 2), alone)
    _same_sweep(_sweep(lesson.inputs, 4), alone)


def test_a_search_is_the_same_on_1_2_and_4_workers():
    """GPT-3's 161,280 layouts in chunks of 16,384 (10 tasks): the best 5 merged in one total order."""
    from botec.cli.common import load_inputs

    inputs = load_inputs(GPT3)
    alone = search(inputs, top=5, chunk=16_384, workers=1)
    assert (alone.candidates, alone.examined) == (161_280, 161_280) and len(alone.best) == 5
    for workers in (2, 4):
        fanned = search(inputs, top=5, chunk=16_384, workers=workers)
        assert (fanned.candidates, fanned.evaluated, fanned.feasible) == \
            (alone.candidates, alone.evaluated, alone.feasible)
        assert fanned.best == alone.best


def test_monte_carlo_is_the_same_on_1_2_and_4_workers(lesson, monkeypatch):
    """3,500 samples in blocks of 1,000 (block b seeded by (11, b)): the same percentiles and shares."""
    monkeypatch.setattr(uncertainty, "MONTE_CARLO_BLOCK_SAMPLES", 1_000)
    alone = _monte_carlo(lesson, 1)
    assert alone[0] == 3_500 and 0 < alone[3] < 1
    assert _monte_carlo(lesson, 2) == alone
    assert _monte_carlo(lesson, 4) == alone


def test_monte_carlo_blocks_are_seeded_by_seed_and_block_number(lesson):
    """The first block's samples are numpy's SeedSequence(seed, spawn_key=(0,)) draws: a block's samples do not
    depend on how many samples follow it."""
    short = uncertainty.monte_carlo(lesson, samples=2_000, seed=4)
    longer = uncertainty.monte_carlo(lesson, samples=4_000, seed=4)
    again = uncertainty.monte_carlo(lesson, samples=2_000, seed=4)
    assert short.percentiles == again.percentiles
    assert short.percentiles["run_seconds"] != longer.percentiles["run_seconds"]   # more samples, other P50


def test_a_local_ray_cluster_gives_the_same_figures(serving, lesson, monkeypatch, tmp_path, capsys):
    """Simulate's seeds, Monte Carlo and a study (botec study --ray local, through the command line) on a local
    Ray cluster: the same figures, byte for byte, as in this process."""
    from conftest import run_cli
    from test_study import TINY

    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'botec[ray]')")
    monkeypatch.setattr(uncertainty, "MONTE_CARLO_BLOCK_SAMPLES", 1_000)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert _replications_json(serving, None, "local") == _replications_json(serving, 1)
        assert _monte_carlo(lesson, None, "local") == _monte_carlo(lesson, 1)
        study = tmp_path / "tiny.yaml"
        study.write_text(TINY, encoding="utf-8")
        tables = []
        for options in (["--workers", "1"], ["--ray", "local"]):
            code, out, err = run_cli(["study", str(study), *options], capsys)
            assert code == 0, err
            tables.append(out)
        assert tables[0] == tables[1] and len(tables[0].strip().splitlines()) == 1 + 2 * 2 * 2   # header + 8 runs
    finally:
        ray.shutdown()


def test_run_tasks_keeps_task_order_and_counts_progress_here():
    seen = []
    assert run_tasks(abs, [-3, 1, -2], workers=1, progress=lambda done, total: seen.append((done, total))) == [3, 1, 2]
    assert seen == [(1, 3), (2, 3), (3, 3)]
    seen.clear()
    assert run_tasks(abs, [-3, 1, -2, 7, -5], workers=2, ray_address="",
                     progress=lambda done, total: seen.append((done, total))) == [3, 1, 2, 7, 5]
    assert seen == [(done, 5) for done in range(1, 6)]


def test_an_interrupt_keeps_the_tasks_that_finished():
    def stop_at_two(task):
        if task == 2:
            raise KeyboardInterrupt
        return task * 10

    with pytest.raises(Interrupted) as stopped:
        run_tasks(stop_at_two, [0, 1, 2, 3], workers=1)
    assert stopped.value.results == [0, 10, None, None] and stopped.value.finished == 2


def test_an_interrupted_sweep_keeps_its_first_chunks(lesson):
    def interrupt_after_two(done, total):
        if done >= 1_000:
            raise KeyboardInterrupt

    space = Space(lesson.inputs, parse_axes(["supply.count=8..2048/8", "strategy.micro_batch_size=1..8"],
                                            lesson.inputs))
    columns, valid, counts = evaluate_space(space, chunk=500, wanted=["step_seconds"], progress=interrupt_after_two)
    assert counts["interrupted"] == 1 and valid.size == 1_000 and columns["step_seconds"].size == 1_000
    whole, whole_valid, _ = evaluate_space(space, chunk=500, wanted=["step_seconds"])
    assert np.array_equal(columns["step_seconds"], whole["step_seconds"][:1_000], equal_nan=True)


def test_interrupted_replications_keep_the_runs_that_finished(serving):
    def interrupt_in_the_third_run(done, total):
        if done > 2 * total // 4:
            raise KeyboardInterrupt

    runs = replicate(serving, 4, seed=0, requests=200, rate=20.0, progress=interrupt_in_the_third_run)
    assert runs.seeds == (0, 1) and runs.planned == 4


def test_small_jobs_run_here_and_explicit_choices_are_honoured(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert fanout_options(None, None, 99_999, 100_000) == {"workers": 1, "ray_address": ""}
    assert fanout_options(None, None, 100_000, 100_000) == {"workers": None, "ray_address": None}   # $RAY_ADDRESS
    assert fanout_options(3, None, 10, 100_000) == {"workers": 3, "ray_address": ""}
    assert fanout_options(None, "auto", 10, 100_000) == {"workers": None, "ray_address": "auto"}
    assert check_workers(None) >= 1


@pytest.mark.parametrize("workers", [0, -2, 1025])
def test_a_worker_count_out_of_range_is_one_line_naming_the_option(workers):
    with pytest.raises(UserError, match=r"^--workers: expected a whole number of worker processes from 1 to 1,024"):
        fanout_options(workers, None, 10, 100_000)


def test_simulate_refuses_a_bad_worker_count_on_the_command_line(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "botec.cli", "simulate", str(SERVING), "-n", "100", "--workers", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == ["botec: error: --workers: expected a whole number of worker processes "
                                               "from 1 to 1,024, got 0"]
