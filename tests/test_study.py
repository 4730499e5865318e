"""`botec study`: a grid of serving contracts × vary points × rates × seeds, one row per run, an HTML summary."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES, run_cli

H100 = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
TINY = f"""
study: tiny
contracts: [{H100}]
vary:
  supply.accelerator: [h100-sxm, h200]
rates: [10, 20]
seeds: 2
requests: 300
"""


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY, encoding="utf-8")
    return path


def test_a_tiny_study_has_a_row_per_run_with_the_figures_of_simulate(tiny, capsys):
    from botec.estimation import estimate_file
    from botec.simulate import simulate

    code, out, err = run_cli(["study", str(tiny), "--workers", "1"], capsys)
    assert code == 0, err
    rows = _rows(out)
    assert [(r["supply.accelerator"], r["rate_requests_per_s"], r["seed"]) for r in rows] == [
        (accelerator, rate, seed) for accelerator in ("h100-sxm", "h200") for rate in ("10", "20") for seed in "01"]
    assert list(rows[0])[:7] == ["study", "contract", "supply.accelerator", "rate_requests_per_s", "seed", "requests",
                                 "contract_name"]
    assert {"ttft_p99_s", "tpot_p50_s", "e2e_p90_s", "throughput_requests_per_s", "goodput_requests_per_s",
            "ttft_target_met", "analytic_tpot_mean_s"} <= set(rows[0])
    # one cell, run directly: `botec simulate H100 --set supply.accelerator=h200 --rate 20 --seed 1 --requests 300`
    direct = simulate(estimate_file(H100, ["supply.accelerator=h200"]), requests=300, seed=1, rate=20)
    row = rows[7]
    assert row["status"] == "ok" and row["requests"] == "300"
    assert float(row["ttft_p99_s"]) == direct.ttft.p99_seconds
    assert float(row["tpot_p50_s"]) == direct.tpot.p50_seconds
    assert float(row["goodput_requests_per_s"]) == direct.goodput_requests_per_s
    assert float(row["analytic_ttft_mean_s"]) == direct.analytic.time_to_first_token_seconds
    assert row["tpot_target_s"] == "0.04" and row["tpot_target_met"] == str(direct.verdicts[1].met)
    # the seed changes the run: seeds 0 and 1 of a cell differ
    assert rows[6]["ttft_p99_s"] != rows[7]["ttft_p99_s"]


def test_the_table_is_the_same_whatever_the_worker_count(tiny, tmp_path, capsys):
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    assert run_cli(["study", str(tiny), "--workers", "1", "-o", str(one)], capsys)[0] == 0
    assert run_cli(["study", str(tiny), "--workers", "2", "-o", str(two)], capsys)[0] == 0
    assert one.read_bytes() == two.read_bytes()
    assert len(_rows(one.read_text())) == 8


def test_the_summary_holds_each_cell_over_its_seeds_and_the_figure(tiny, tmp_path, capsys):
    pytest.importorskip("plotly")
    table, page = tmp_path / "runs.csv", tmp_path / "summary.html"
    code, _, err = run_cli(["study", str(tiny), "--workers", "1", "-o", str(table), "--html", str(page)], capsys)
    assert code == 0, err
    rows = _rows(table.read_text())
    html = page.read_text(encoding="utf-8")
    start = html.index('Plotly.newPlot(') + len('Plotly.newPlot(')
    decoder = json.JSONDecoder()
    _, at = decoder.raw_decode(html, html.index('"study-figure"', start))
    data, at = decoder.raw_decode(html, html.index("[", at))
    layout, _ = decoder.raw_decode(html, html.index("{", at))
    assert [trace["name"] for trace in data] == ["serve-llama3.1-8b-h100 · supply.accelerator=h100-sxm",
                                                 "serve-llama3.1-8b-h100 · supply.accelerator=h200"]
    h200 = data[1]
    assert h200["x"] == [10.0, 20.0]
    seeds = [float(r["ttft_p99_s"]) * 1e3 for r in rows if r["supply.accelerator"] == "h200" and
             r["rate_requests_per_s"] == "20"]
    assert h200["y"][1] == pytest.approx(sum(seeds) / 2, rel=1e-12)
    # the 95 % interval of two runs: t(0.975, 1) = 12.706 times the standard error |a − b| / 2
    assert h200["error_y"]["array"][1] == pytest.approx(12.706 * abs(seeds[0] - seeds[1]) / 2, rel=1e-9)
    assert [shape["y0"] for shape in layout["shapes"]] == [500.0]     # the 500 ms TTFT target
    assert "TTFT P99" in layout["title"]["text"] and "95 % CI" in layout["title"]["text"]
    assert "supply.accelerator=h200</td><td class=value>20</td><td class=value>2</td>" in html


def test_an_interrupted_study_writes_the_finished_runs(tiny, tmp_path, capsys, monkeypatch):
    import botec.fanout

    def three_then_ctrl_c(function, tasks, **options):
        results = [function(task) for task in tasks[:3]] + [None] * (len(tasks) - 3)
        raise botec.fanout.Interrupted(results)

    monkeypatch.setattr(botec.fanout, "run_tasks", three_then_ctrl_c)
    table = tmp_path / "runs.csv"
    code, _, err = run_cli(["study", str(tiny), "-o", str(table)], capsys)
    assert code == 130
    assert "3 of 8 runs finished and written; 5 missing" in err
    assert [(r["supply.accelerator"], r["rate_requests_per_s"], r["seed"]) for r in _rows(table.read_text())] == [
        ("h100-sxm", "10", "0"), ("h100-sxm", "10", "1"), ("h100-sxm", "20", "0")]


GRID = f"contracts: [{H100}]\nrates: [10]\nrequests: 300\n"


@pytest.mark.parametrize("text, fragments", [
    ("study: s\n" + GRID + "rate: [10]\n", ["rate: unknown key; did you mean 'rates'?"]),
    ("study: s\n" + GRID.replace("rates: [10]", "rates: [10, -5]"),
     ["rates[1]: expected a positive, finite number of requests per second, got -5"]),
    ("study: s\ncontracts: [nowhere.yaml]\n", ["contracts[0]: no such contract file: nowhere.yaml"]),
    ("study: s\n" + GRID + "vary: {supply.accelerator: []}\n",
     ["vary: supply.accelerator: expected at least one value, got an empty list"]),
    ("study: s\n" + GRID + "vary: {supply.accelerator: [h100-sxm, h999]}\n",
     ["vary.supply.accelerator:", "unknown accelerator 'h999'"]),
    ("study: s\n" + GRID + "vary: {workload.traffic.prompt_tokens: [" + ", ".join(map(str, range(1, 1002)))
     + "]}\nseeds: 100\n", ["vary: the grid holds 100,100 runs", "expected at most 100,000"]),
    (f"study: s\ncontracts: [{EXAMPLES / 'lesson-finetune-1b.yaml'}]\n",
     ["contracts[0]:", "is a training contract", "botec sweep"]),
    ("study: s\n" + GRID + "measure: [ttft_p95]\n", ["measure: unknown measure 'ttft_p95'"]),
    ("study: s\n" + GRID + "seeds: 0\n", ["seeds: expected 1 to 100 runs per cell"]),
    (GRID, ["study: required key is missing"]),
])
def test_a_bad_study_is_one_line_naming_the_key_and_nothing_is_written(text, fragments, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    table, page = tmp_path / "runs.csv", tmp_path / "summary.html"
    code, out, err = run_cli(["study", str(path), "-o", str(table), "--html", str(page)], capsys)
    assert code == 2, err
    assert err.startswith("botec: error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err
    assert not table.exists() and not page.exists() and out == ""


def test_parquet_without_pyarrow_names_it(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)      # as on an install without the parquet extra
    code, _, err = run_cli(["study", str(tiny), "-o", str(tmp_path / "runs.parquet")], capsys)
    assert code == 2 and "-o/--output: writing Parquet needs pyarrow: pip install 'botec[parquet]'" in err
    assert not (tmp_path / "runs.parquet").exists()


def test_the_example_study(tmp_path, capsys):
    """examples/studies/llama-8b-accelerators.yaml, as the README runs it: 2 accelerators × 3 rates × 3 seeds."""
    table = tmp_path / "runs.csv"
    code, _, err = run_cli(["study", str(EXAMPLES / "studies" / "llama-8b-accelerators.yaml"), "--workers", "1",
                            "-o", str(table)], capsys)
    assert code == 0, err
    rows = _rows(table.read_text())
    assert len(rows) == 18 and {r["status"] for r in rows} == {"ok"}

    def mean(column, accelerator, rate):
        values = [float(r[column]) for r in rows
                  if r["supply.accelerator"] == accelerator and r["rate_requests_per_s"] == rate]
        assert len(values) == 3
        return sum(values) / 3

    for rate in ("10", "20"):   # the H200's 4.8 TB/s against the H100's 3.35: faster decode steps
        assert mean("tpot_p99_s", "h200", rate) < mean("tpot_p99_s", "h100-sxm", rate)
    # at 30 requests/s both replicas saturate (analytic capacity 23.4 and 26.2 requests/s with the measured
    # decode-attention table): the H100's queue grows faster, its TTFT P99 about 4× the H200's (22.3 s and 5.5 s)
    assert mean("ttft_p99_s", "h100-sxm", "30") > 2 * mean("ttft_p99_s", "h200", "30")
    # one H100 replica saturates near its analytic capacity (about 23 requests/s): 30 offered, fewer served
    capacity = float(rows[0]["analytic_capacity_requests_per_s_per_replica"])
    assert rows[0]["replicas"] == "1" and 20 < capacity < 30
    assert mean("throughput_requests_per_s", "h100-sxm", "30") < 30
    assert all(r["ttft_target_met"] == "True" for r in rows if r["rate_requests_per_s"] == "10")
    assert not any(math.isnan(float(r["ttft_p99_s"])) for r in rows)


# ------------------------------------------------------------------------------------------------ work before runs

def test_the_work_is_printed_before_the_runs(tiny, capsys):
    code, _, err = run_cli(["study", str(tiny), "--workers", "1"], capsys)
    assert code == 0, err
    # 2 accelerators × 2 rates × 2 seeds = 8 runs of 300 requests; 2,400 × 20 µs = 48 ms
    assert "botec: study: 8 runs × 300 requests = 2,400 simulated requests, about 48 ms of CPU at 20 µs a request\n" \
        in err


def test_a_study_past_the_work_cap_is_refused_before_any_estimate(tmp_path, capsys, monkeypatch):
    """reliability-3 D3: 80,000 runs × 100,000 requests (8·10⁹, about 44 CPU-hours at 20 µs) started; now one line
    names the figures and --max-requests, before a single contract is estimated."""
    import botec.study

    def never(*args):
        raise AssertionError("estimated before the work was checked")

    monkeypatch.setattr(botec.study, "_estimate", never)
    prompts = ", ".join(str(tokens) for tokens in range(100, 100 + 800))
    path = tmp_path / "big.yaml"
    path.write_text(f"study: big\ncontracts: [{H100}]\nvary: {{workload.traffic.prompt_tokens: [{prompts}]}}\n"
                    "seeds: 100\nrequests: 100000\n", encoding="utf-8")
    code, out, err = run_cli(["study", str(path), "-o", str(tmp_path / "runs.csv")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert (f"botec: error: {path}: the study is 80,000 runs × 100,000 requests = 8,000,000,000 simulated "
            "requests, about 44.4 h of CPU at 20 µs a request") in err
    assert "above the cap of 100,000,000 simulated requests: pass --max-requests 8000000000" in err
    assert not (tmp_path / "runs.csv").exists()


def test_max_requests_moves_the_cap(tiny, capsys):
    code, _, err = run_cli(["study", str(tiny), "--workers", "1", "--max-requests", "2399"], capsys)
    assert code == 2 and "8 runs × 300 requests = 2,400 simulated requests" in err
    assert "above the cap of 2,399 simulated requests: pass --max-requests 2400" in err
    code, out, err = run_cli(["study", str(tiny), "--workers", "1", "--max-requests", "2400"], capsys)
    assert code == 0 and len(_rows(out)) == 8, err


@pytest.mark.parametrize("value", ["0", str(10**18)])
def test_max_requests_is_a_whole_number_below_the_bound(tiny, value, capsys):
    code, _, err = run_cli(["study", str(tiny), "--max-requests", value], capsys)
    assert code == 2 and err.startswith("botec: error: --max-requests: expected a whole number"), err


def test_the_help_gives_the_cap_and_the_rate_it_rests_on(capsys):
    code, out, _ = run_cli(["study", "-h"], capsys)
    text = " ".join(out.replace("│", " ").split())
    assert code == 0
    assert "the default, 100,000,000, is about 33 CPU-minutes at 20 µs a request (benchmarks/simulate_100k.py)" in text


# ------------------------------------------------------------------------------------------------ Ray

@pytest.mark.parametrize("address, words", [
    # reliability-3 D17: under a 4 GiB address-space cap Ray's node times out starting: a bare Exception
    ("local", ["--ray local: Ray could not start a cluster on this machine (The current node timed out during "
               "startup", "try --workers N"]),
    ("10.0.0.1:6379", ["--ray: cannot reach the Ray cluster at '10.0.0.1:6379' (The current node timed out",
                       "check the address"]),
])
def test_a_ray_that_does_not_start_is_one_line_naming_ray(tiny, address, words, capsys, monkeypatch):
    import types

    def init(**options):
        raise Exception("The current node timed out during startup. This could happen because some of the Ray "
                        "processes failed to startup.\nmore lines")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setitem(sys.modules, "ray", fake)
    code, out, err = run_cli(["study", str(tiny), "--ray", address], capsys)
    assert code == 2 and out == "", err
    assert err.count("\n") == 2 and "internal error" not in err, err   # the work line, then the refusal
    refusal = err.splitlines()[1]
    assert refusal.startswith("botec: error: --ray")
    for word in words:
        assert word in refusal, refusal
