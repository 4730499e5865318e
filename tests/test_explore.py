"""Sweeps, solvers, the layout search, Monte Carlo and sensitivity."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botec.contract import load_contract, parse_contract
from botec.errors import ContractError
from botec.estimate import estimate, estimate_file, given_quantities
from botec.explore.search import as_overrides, search
from botec.explore.solve import back_solve, optimize
from botec.explore.space import Space, evaluate_space, parse_axis
from botec.explore.uncertainty import monte_carlo, sensitivity

from conftest import EXAMPLES, LESSON, LLAMA

GPT3 = EXAMPLES / "gpt3-175b-search.yaml"


def test_sweep_matches_single_estimates():
    contract = load_contract(LESSON)
    base, _, _ = given_quantities(contract)
    axes = [parse_axis("supply.count=1,2,4,8,16", base), parse_axis("strategy.micro_batch_size=1..8", base)]
    columns, valid, counts = evaluate_space(Space(contract, axes), wanted=["run_seconds", "planned_device_bytes"])
    assert counts == {"candidates": 40, "evaluated": 40}
    for i in range(40):
        count, micro = int(columns["supply.count"][i]), int(columns["strategy.micro_batch_size"][i])
        single = estimate_file(LESSON, [f"supply.count={count}", f"strategy.micro_batch_size={micro}"])
        assert columns["run_seconds"][i] == pytest.approx(single.value("run_seconds"))
        assert columns["planned_device_bytes"][i] == pytest.approx(single.value("planned_device_bytes"))


def test_fewest_accelerators_within_4_hours_matches_brute_force():
    solution = optimize(load_contract(LESSON), "supply.count", "min", ["run_seconds <= 4 h"], "supply.count=1..64")
    brute = next(n for n in range(1, 65) if estimate_file(LESSON, [f"supply.count={n}"]).value("run_seconds")
                 <= 4 * 3600)
    assert solution.value == brute == 9          # 31,250 s × 4 / N ≤ 14,400 s ⇒ N ≥ 8.68


def test_largest_batch_that_fits_matches_brute_force():
    solution = optimize(load_contract(LESSON), "strategy.micro_batch_size", "max", ["fits"])
    fitting = [b for b in range(1, 33) if estimate_file(LESSON, [f"strategy.micro_batch_size={b}"]).fits]
    assert solution.value == max(fitting) == 7


def test_infeasible_problem_says_which_constraint_and_how_close():
    solution = optimize(load_contract(LESSON), "supply.count", "min", ["run_seconds <= 1 s"], "supply.count=1..64")
    assert solution.value is None
    # the best of 1..64 accelerators: 31,250 s × 4 / 64 = 1,953 s = 32.6 min
    assert "'run_seconds <= 1 s' cannot be met" in solution.closest and "32.6 min" in solution.closest


def test_back_solve_the_llama_mfu():
    value, reached = back_solve(load_contract(LLAMA), "assumptions.end_to_end_mfu", "accelerator_hours=1720320")
    # 8.4e23 / (312e12 × 3600 × 1,720,320) = 0.4347
    assert value == pytest.approx(8.4e23 / (312e12 * 3600 * 1_720_320), rel=1e-6)
    assert reached == pytest.approx(1_720_320, rel=1e-6)


def test_gpt3_layout_search_best_fits_and_keeps_tp_in_a_node():
    result = search(load_contract(GPT3), top=5)
    assert result.candidates > 300_000 and 0 < result.feasible <= result.evaluated <= result.candidates
    best = result.best[0]
    assert best["figures"]["memory_spare_bytes"] >= 0
    assert best["layout"]["strategy.tensor_parallel"] <= 8                     # a DGX A100 node
    steps = [entry["figures"]["step_seconds"] for entry in result.best]
    assert steps == sorted(steps)
    # every reported layout recomputes to the same figures through the single estimate
    for entry in result.best:
        single = estimate_file(GPT3, as_overrides(entry["layout"]))
        assert single.fits
        for name in ("step_seconds", "planned_device_bytes", "run_seconds", "end_to_end_mfu"):
            assert single.value(name) == pytest.approx(entry["figures"][name], rel=1e-9), name


def test_search_is_faster_than_the_megatron_layout():
    result = search(load_contract(GPT3), top=1)
    megatron = estimate_file(GPT3)                     # TP 8, PP 8, full recomputation
    assert result.best[0]["figures"]["step_seconds"] <= megatron.value("step_seconds")


def test_monte_carlo_with_collapsed_ranges_is_the_point_estimate():
    result = estimate_file(LESSON)
    data = load_contract(LESSON)
    collapsed = json.loads(data.model_dump_json())
    for section in ("assumptions", "supply", "strategy", "workload"):
        _collapse(collapsed[section])
    point = estimate(parse_contract(collapsed))
    mc = monte_carlo(point, samples=50, seed=3)
    assert mc.varied == []
    for name, (p10, p50, p90) in mc.percentiles.items():
        assert p10 == p50 == p90 == pytest.approx(point.value(name), rel=0, abs=0), name
    assert point.value("run_seconds") == result.value("run_seconds")


def _collapse(node):
    if isinstance(node, dict):
        if "value" in node and "low" in node:
            node["low"] = node["high"] = None
        for value in node.values():
            _collapse(value)


def test_monte_carlo_is_reproducible_and_reports_probabilities():
    result = estimate_file(LESSON)
    one = monte_carlo(result, samples=2000, seed=7, deadline_seconds=10 * 3600)
    two = monte_carlo(result, samples=2000, seed=7, deadline_seconds=10 * 3600)
    assert one.percentiles == two.percentiles
    assert set(one.varied) == {"single_accelerator_mfu", "scaling_efficiency", "saved_tensor_factor"}
    assert 0 < one.probability_deadline < 1 and one.probability_fits == 1.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.floats(0.05, 0.5), st.floats(0.0, 0.4), st.floats(0.0, 0.4), st.integers(0, 10_000))
def test_percentiles_are_ordered(mfu, below, above, seed):
    data = json.loads(load_contract(LESSON).model_dump_json())
    data["assumptions"]["single_accelerator_mfu"] = {"value": mfu, "low": max(mfu - below, 0.01),
                                                     "high": min(mfu + above, 1.0)}
    mc = monte_carlo(estimate(parse_contract(data)), samples=300, seed=seed)
    for p10, p50, p90 in mc.percentiles.values():
        assert p10 <= p50 <= p90


def test_sensitivity_ranks_the_mfu_first_for_run_time():
    swings = sensitivity(estimate_file(LESSON), "run_seconds")
    assert [s.input for s in swings][:2] == ["single_accelerator_mfu", "scaling_efficiency"]
    top = swings[0]
    # 6e18 / (4 × 200e12 × 0.8 × mfu) at 0.20 and 0.45
    assert top.output_at_low == pytest.approx(6e18 / (4 * 200e12 * 0.8 * 0.20))
    assert top.output_at_high == pytest.approx(6e18 / (4 * 200e12 * 0.8 * 0.45))
    memory = sensitivity(estimate_file(LESSON), "planned_device_bytes")
    assert memory[0].input == "saved_tensor_factor"


# --- bad input ----------------------------------------------------------------------------------------

def test_sweep_of_an_unknown_field(cli):
    code, out, err = cli("sweep", "--set", "supply.cuont=1,2")
    assert code == 2 and "cannot sweep 'supply.cuont'; did you mean 'supply.count'?" in err


def test_empty_range(cli):
    code, out, err = cli("sweep", "--set", "supply.count=8..4")
    assert code == 2 and "supply.count: the range '8..4' is empty" in err


def test_constraint_on_an_unknown_quantity(cli):
    code, out, err = cli("solve", "--minimize", "supply.count", "--subject-to", "run_secnds <= 4 h")
    assert code == 2 and "unknown quantity 'run_secnds'; did you mean 'run_seconds'?" in err


def test_space_larger_than_the_cap(cli):
    code, out, err = cli("sweep", "--set", "supply.count=1..1000", "--set", "strategy.micro_batch_size=1..100",
                         "--cap", "50000")
    assert code == 2 and "100,000 configurations, more than the cap of 50,000" in err and "--force" in err


def test_sweep_cli_marks_feasible_rows(cli, tmp_path):
    csv = tmp_path / "sweep.csv"
    code, out, err = cli("sweep", "--set", "strategy.micro_batch_size=6..8", "--csv", str(csv), "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert [row[-1] for row in payload["rows"]] == [True, True, False]   # 7 fits 32 GB, 8 does not
    assert csv.read_text().splitlines()[0].endswith("feasible")


def test_estimate_uncertainty_cli(cli):
    code, out, err = cli("estimate", "--uncertainty", "--samples", "500", "--deadline", "10 h")
    assert code == 0, err
    assert "run_seconds: P10" in out and "chance the run finishes within 10 h" in out


def test_an_interrupted_space_returns_what_was_found():
    contract = load_contract(LESSON)
    base, _, _ = given_quantities(contract)
    axes = [parse_axis("supply.count=1..100", base)]
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    columns, valid, counts = evaluate_space(Space(contract, axes), chunk=30, wanted=["run_seconds"], progress=progress)
    assert counts.get("interrupted") == 1
    assert len(valid) == 60 and len(columns["run_seconds"]) == 60     # two chunks of 30 done, the rest not
    assert columns["run_seconds"][3] == pytest.approx(estimate_file(LESSON, ["supply.count=4"]).value("run_seconds"))


def test_serving_search_ranks_by_cost(cli):
    code, out, err = cli("search", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"), "-f", "json")
    assert code == 0, err
    rows = json.loads(out)
    costs = [r["cost_per_day_usd"] for r in rows if r["cost_per_day_usd"] is not None]
    assert costs == sorted(costs) and rows[0]["accelerator"] == "h200"
    assert all(r["tpot_seconds"] <= 0.040 for r in rows)          # every kept layout meets the 40 ms target


def test_cheapest_accelerator_for_a_training_run(cli):
    code, out, err = cli("solve", str(LLAMA), "--minimize", "accelerator_hours", "--over",
                         "supply.accelerator=a100-sxm-80gb,h100-sxm,l4", "--subject-to", "run_seconds <= 90 d")
    assert code == 0, err
    # same MFU, so the fastest peak needs the fewest accelerator-hours: H100 (989 TFLOP/s) first
    assert out.startswith("best: h100-sxm")
    assert "l4: does not fit in memory" in out      # 24 GB cannot hold 70B's sharded state and activations


def test_solve_on_a_serving_contract(cli):
    serving = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
    code, out, err = cli("solve", str(serving), "--minimize", "supply.count")
    assert code == 2 and "botec search" in err
    # the bandwidth efficiency that makes the TPOT 30 ms at the chosen batch
    code, out, err = cli("solve", str(serving), "--find", "assumptions.decode_bandwidth_efficiency", "--given",
                         "time_per_output_token_seconds=30 ms")
    assert code == 0, err
    value = float(out.split("=")[1].split()[0])
    check = estimate_file(serving, [f"assumptions.decode_bandwidth_efficiency={value}"])
    assert check.value("time_per_output_token_seconds") == pytest.approx(0.030, rel=1e-6)


@pytest.mark.parametrize("distribution", ["triangular", "uniform", "normal", "lognormal"])
def test_named_distributions(distribution):
    data = json.loads(load_contract(LESSON).model_dump_json())
    data["assumptions"]["single_accelerator_mfu"] = {"value": 0.3, "low": 0.2, "high": 0.45,
                                                     "distribution": distribution}
    data["assumptions"]["scaling_efficiency"] = {"value": 0.8}        # only the MFU varies
    result = estimate(parse_contract(data))
    mc = monte_carlo(result, samples=20_000, seed=1)
    p10, p50, p90 = mc.percentiles["run_seconds"]
    assert p10 <= p50 <= p90
    if distribution == "normal":
        # run time ∝ 1 / MFU: its median sits at the mean MFU's run time
        assert p50 == pytest.approx(result.value("run_seconds"), rel=0.02)
    if distribution == "uniform":
        # MFU uniform on [0.2, 0.45]: P50 of 1/MFU is 1/0.325
        assert p50 == pytest.approx(result.value("run_seconds") * 0.3 / 0.325, rel=0.02)


def test_unknown_distribution_is_refused():
    data = json.loads(load_contract(LESSON).model_dump_json())
    data["assumptions"]["headroom"] = {"value": 0.25, "low": 0.1, "high": 0.4, "distribution": "gamma"}
    with pytest.raises(ContractError, match="distribution must be one of triangular, uniform, normal, lognormal"):
        parse_contract(data)
