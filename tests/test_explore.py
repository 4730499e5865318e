"""Sweeps, solvers, the layout search, Monte Carlo and sensitivity."""

from __future__ import annotations

import json

import pytest

from botec.contract import load_contract, parse_contract
from botec.errors import ContractError
from botec.estimation import estimate, estimate_file
from botec.explore.search import as_overrides, search
from botec.explore.solve import back_solve, optimize
from botec.explore.space import Space, evaluate_space, parse_axis
from botec.explore.uncertainty import monte_carlo, sensitivity
from botec.inputs import build_inputs

from conftest import EXAMPLES, LESSON, LLAMA

GPT3 = EXAMPLES / "gpt3-175b-search.yaml"


def inputs_of(path, overrides=()):
    """The inputs of a contract file, its config paths resolved beside it."""
    return build_inputs(load_contract(path, list(overrides)), path.parent)


def test_sweep_matches_single_estimates():
    inputs = inputs_of(LESSON)
    axes = [parse_axis("supply.count=1,2,4,8,16", inputs), parse_axis("strategy.micro_batch_size=1..8", inputs)]
    columns, valid, counts = evaluate_space(Space(inputs, axes), wanted=["run_seconds", "planned_device_bytes"])
    assert counts == {"candidates": 40, "evaluated": 40, "unplaced": {}}
    for i in range(40):
        count, micro = int(columns["supply.count"][i]), int(columns["strategy.micro_batch_size"][i])
        single = estimate_file(LESSON, [f"supply.count={count}", f"strategy.micro_batch_size={micro}"])
        assert columns["run_seconds"][i] == pytest.approx(single.value("run_seconds"))
        assert columns["planned_device_bytes"][i] == pytest.approx(single.value("planned_device_bytes"))


def test_fewest_accelerators_within_4_hours_matches_brute_force():
    solution = optimize(inputs_of(LESSON), "supply.count", "min", ["run_seconds <= 4 h"], "supply.count=1..64")
    brute = next(n for n in range(1, 65) if estimate_file(LESSON, [f"supply.count={n}"]).value("run_seconds")
                 <= 4 * 3600)
    assert solution.value == brute == 9          # 31,250 s × 4 / N ≤ 14,400 s ⇒ N ≥ 8.68


def test_largest_batch_that_fits_matches_brute_force():
    """Issue 28: one meaning of "fits". The lesson's card: 32 GB, 16 GB of state and 2 GB of buffers, and 8 × 16
    layers × 2,048 × 2,048 × 2 B = 1.074 GB of activations per sequence. Fits, the 25 % headroom kept:
    (32 / 1.25 − 18) / 1.074 = 7.08 ⇒ 7, the estimate's max_micro_batch_size; fits the device, the headroom eaten:
    (32 − 18) / 1.074 = 13.04 ⇒ 13."""
    solution = optimize(inputs_of(LESSON), "strategy.micro_batch_size", "max", ["fits"])
    results = [estimate_file(LESSON, [f"strategy.micro_batch_size={b}"]) for b in range(1, 33)]
    fitting = [b for b, result in enumerate(results, 1) if result.fits]
    assert solution.value == max(fitting) == results[0].value("max_micro_batch_size") == 7
    assert solution.verdict == "fits" and solution.value_keeping_headroom is None
    device = optimize(inputs_of(LESSON), "strategy.micro_batch_size", "max", ["fits_device"])
    assert device.value == max(b for b, result in enumerate(results, 1) if result.fits_device) == 13
    assert device.verdict == "fits_device" and device.value_keeping_headroom == 7
    assert results[6].fits and not results[7].fits and results[12].fits_device and not results[13].fits_device
    # naming both, the stronger verdict holds; naming neither, the estimate's verdict is still applied
    assert optimize(inputs_of(LESSON), "strategy.micro_batch_size", "max", ["fits", "fits_device"]).value == 7
    assert optimize(inputs_of(LESSON), "strategy.micro_batch_size", "max", []).value == 7


def test_infeasible_problem_says_which_constraint_and_how_close():
    solution = optimize(inputs_of(LESSON), "supply.count", "min", ["run_seconds <= 1 s"], "supply.count=1..64")
    assert solution.value is None
    # the best of 1..64 accelerators: 31,250 s × 4 / 64 = 1,953 s = 32.6 min
    assert "'run_seconds <= 1 s' cannot be met" in solution.closest and "32.6 min" in solution.closest


def test_back_solve_the_llama_mfu():
    value, reached = back_solve(inputs_of(LLAMA), "assumptions.end_to_end_mfu", "accelerator_hours=1720320")
    # 8.4e23 / (312e12 × 3600 × 1,720,320) = 0.4347
    assert value == pytest.approx(8.4e23 / (312e12 * 3600 * 1_720_320), rel=1e-6)
    assert reached == pytest.approx(1_720_320, rel=1e-6)


def test_gpt3_layout_search_best_fits_and_keeps_tp_in_a_node():
    result = search(inputs_of(GPT3), top=5)
    # TP divides gcd(96 heads, 1,024): 6 values; PP divides 1,024 and is at most 96: 7; v 1..8; CP divides
    # gcd(1,024, 2,048 tokens) up to 16: 5; EP 1; ZeRO 0..3; micro-batch 1, 2, 4, 8; 3 recomputations; SP or not
    assert result.candidates == 6 * 7 * 8 * 5 * 1 * 4 * 4 * 3 * 2
    assert 0 < result.feasible <= result.evaluated <= result.candidates
    best = result.best[0]
    assert best["layout"]["strategy.tensor_parallel"] <= 8                     # a DGX A100 node
    steps = [entry["figures"]["step_seconds"] for entry in result.best]
    assert steps == sorted(steps) and all(entry["figures"]["memory_spare_bytes"] >= 0 for entry in result.best)
    # every reported layout recomputes to the same figures through the single estimate
    for entry in result.best:
        single = estimate_file(GPT3, as_overrides(entry["layout"]))
        assert single.fits
        for name in ("step_seconds", "planned_device_bytes", "run_seconds", "end_to_end_mfu"):
            assert single.value(name) == pytest.approx(entry["figures"][name], rel=1e-9), name


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
    # the lesson's stated ranges, the model-parallel overlap default its exposed-communication quantities read (the
    # data-parallel share is derived from the stack's schedule, not a ranged default), and the failure model's rate
    # and restart time (goodput)
    assert set(one.varied) == {"assumptions.single_accelerator_mfu", "assumptions.scaling_efficiency",
                               "assumptions.saved_tensor_factor",
                               "assumptions.model_parallel_overlap", "assumptions.failure_rate",
                               "assumptions.restart_time"}
    assert one.percentiles["run_seconds"][1] == pytest.approx(31_250, rel=0.2)
    assert 0 < one.probability_deadline < 1 and one.probability_fits == 1.0


def test_sensitivity_ranks_the_mfu_first_for_run_time():
    swings = sensitivity(estimate_file(LESSON), "run_seconds")
    assert [s.input for s in swings][:2] == ["assumptions.single_accelerator_mfu", "assumptions.scaling_efficiency"]
    top = swings[0]
    # 6e18 / (4 × 200e12 × 0.8 × mfu) at 0.20 and 0.45
    assert top.output_at_low == pytest.approx(6e18 / (4 * 200e12 * 0.8 * 0.20))
    assert top.output_at_high == pytest.approx(6e18 / (4 * 200e12 * 0.8 * 0.45))
    memory = sensitivity(estimate_file(LESSON), "planned_device_bytes")
    assert memory[0].input == "assumptions.saved_tensor_factor"


@pytest.mark.parametrize("name, output", [("llama3.1-70b-pretrain.yaml", "run_seconds"),
                                          ("serve-llama3.1-8b-h100.yaml", "cost_per_million_output_tokens_usd")])
def test_the_vectorized_tornado_equals_one_estimate_per_end(name, output):
    """sensitivity() evaluates every end in one vectorized pass; each row must equal a scalar re-estimate."""
    result = estimate_file(LESSON.parent / name)
    inputs = result.inputs
    swings = sensitivity(result, output)
    assert len(swings) >= 10 and swings[0].swing > 0
    for swing in swings:
        for end, expected in ((swing.low, swing.output_at_low), (swing.high, swing.output_at_high)):
            scalar = inputs.graph.evaluate(inputs.vary({swing.input: end}).given, wanted=[output],
                                           choices=inputs.choices)[output].value
            assert expected == pytest.approx(float(scalar), rel=1e-12), (swing.input, end)


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
    code, out, err = cli("sweep", "--set", "strategy.micro_batch_size=12..14", "--csv", str(csv), "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    # 12 and 13 fit the 32 GB device only by eating the 25 % headroom (7 keeps it): they do not fit; 14 not even that
    assert [row[-2:] for row in payload["rows"]] == [[False, True], [False, True], [False, False]]
    assert payload["counts"]["fits"] == 0 and payload["counts"]["fits_device"] == 2
    assert csv.read_text().splitlines()[0].endswith("fits,fits_device")


def test_estimate_uncertainty_cli(cli):
    code, out, err = cli("estimate", "--uncertainty", "--samples", "500", "--deadline", "10 h")
    assert code == 0, err
    assert "run_seconds: P10" in out and "chance the run finishes within 10 h" in out


def test_an_interrupted_space_returns_what_was_found():
    inputs = inputs_of(LESSON)
    axes = [parse_axis("supply.count=1..100", inputs)]
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    columns, valid, counts = evaluate_space(Space(inputs, axes), chunk=30, wanted=["run_seconds"], progress=progress)
    assert counts.get("interrupted") == 1
    assert len(valid) == 60 and len(columns["run_seconds"]) == 60     # two chunks of 30 done, the rest not
    assert columns["run_seconds"][3] == pytest.approx(estimate_file(LESSON, ["supply.count=4"]).value("run_seconds"))


def test_serving_search_ranks_by_cost_and_each_row_is_an_estimate(cli):
    """Every accelerator × TP option is estimated here on its own: the search keeps exactly those that meet
    the targets, in order of cost, with the figures the estimate gives."""
    path = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
    code, out, err = cli("search", str(path), "-f", "json")
    assert code == 0, err
    rows = json.loads(out)
    costs = [r["cost_per_day_usd"] for r in rows]
    assert costs == sorted(costs)
    contract = load_contract(path)
    prices = {contract.supply.accelerator: contract.supply.price_per_accelerator_hour.value}
    prices |= {c.accelerator: c.price_per_accelerator_hour.value for c in contract.supply.candidates}
    expected = []
    for accelerator, price in prices.items():
        for tp in (1, 2, 4, 8):
            result = estimate_file(path, [f"supply.accelerator={accelerator}", f"supply.price_per_accelerator_hour={price}",
                                          "supply.candidates=null", f"strategy.tensor_parallel={tp}"])
            tpot, target = result.value("time_per_output_token_seconds"), result.value(
                "time_per_output_token_target_seconds")
            if result.value("time_per_output_token_floor_seconds") <= target and result.fits and \
                    result.value("time_to_first_token_seconds") <= result.value("time_to_first_token_target_seconds"):
                expected.append((result.value("serving_cost_per_day_usd"), accelerator, tp, tpot))
    assert [(r["accelerator"], r["tensor_parallel"]) for r in rows] == [(a, t) for _, a, t, _ in sorted(expected)][:10]
    for row, (cost, _, _, tpot) in zip(rows, sorted(expected)):
        assert row["cost_per_day_usd"] == pytest.approx(cost) and row["tpot_seconds"] == pytest.approx(tpot)


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
    code, out, err = cli("solve", str(serving), "--find", "assumptions.memory_bandwidth_efficiency", "--given",
                         "time_per_output_token_seconds=30 ms")
    assert code == 0, err
    value = float(out.split("=")[1].split()[0])
    check = estimate_file(serving, [f"assumptions.memory_bandwidth_efficiency={value}"])
    assert check.value("time_per_output_token_seconds") == pytest.approx(0.030, rel=1e-6)


# The MFU drawn between 0.2 and 0.45 around 0.3 (the only ranged input); run time ∝ 1/MFU, so each
# percentile of the run is the run at the opposite percentile of the MFU: P50(run) = run(median MFU),
# P10(run) = run(P90 MFU). The MFU's percentiles by hand:
#   triangular(0.2, 0.3, 0.45): c < (a+b)/2, so median = b − √((b−a)(b−c)/2) = 0.45 − √0.01875;
#     P10 = a + √(0.1 (b−a)(c−a)), P90 = b − √(0.1 (b−a)(b−c));
#   uniform: 0.2 + 0.25 × {0.1, 0.5, 0.9};
#   normal: mean 0.3, σ = 0.25 / (2 × 1.2816): 0.3 ± 0.125;
#   lognormal: in log space the same, so P10 = 0.2, median 0.3, P90 = 0.45.
_MFU_PERCENTILES = {
    "triangular": (0.2 + (0.1 * 0.25 * 0.1) ** 0.5, 0.45 - (0.25 * 0.15 / 2) ** 0.5, 0.45 - (0.1 * 0.25 * 0.15) ** 0.5),
    "uniform": (0.225, 0.325, 0.425),
    "normal": (0.3 - 0.125, 0.3, 0.3 + 0.125),
    "lognormal": (0.2, 0.3, 0.45),
}


@pytest.mark.parametrize("distribution", list(_MFU_PERCENTILES))
def test_named_distributions(distribution):
    data = json.loads(load_contract(LESSON).model_dump_json())
    data["assumptions"]["single_accelerator_mfu"] = {"value": 0.3, "low": 0.2, "high": 0.45,
                                                     "distribution": distribution}
    data["assumptions"]["scaling_efficiency"] = {"value": 0.8}        # only the MFU varies
    result = estimate(parse_contract(data))
    mc = monte_carlo(result, samples=40_000, seed=1)
    run = result.value("run_seconds")                                   # at MFU 0.3
    low, median, high = _MFU_PERCENTILES[distribution]
    p10, p50, p90 = mc.percentiles["run_seconds"]
    assert p50 == pytest.approx(run * 0.3 / median, rel=0.01)
    assert p10 == pytest.approx(run * 0.3 / high, rel=0.01)
    assert p90 == pytest.approx(run * 0.3 / low, rel=0.01)


def test_a_daily_traffic_range_keeps_its_distribution():
    """requests_per_day stated lognormal is sampled lognormal once converted to requests per second."""
    from botec.contract import load_contract as load

    data = json.loads(load(EXAMPLES / "serve-llama3.1-8b-h100.yaml").model_dump_json(exclude_none=True))
    data["workload"]["traffic"].pop("requests_per_second")
    data["workload"]["traffic"]["requests_per_day"] = {"value": 1e6, "low": 5e5, "high": 2e6,
                                                       "distribution": "lognormal"}
    inputs = build_inputs(parse_contract(data))
    rate = inputs.given["requests_per_s"]
    assert rate.distribution == "lognormal" and rate.value == pytest.approx(1e6 / 86_400)
    assert rate.low == pytest.approx(5e5 / 86_400) and rate.high == pytest.approx(2e6 / 86_400)


def test_unknown_distribution_is_refused():
    data = json.loads(load_contract(LESSON).model_dump_json())
    data["assumptions"]["headroom"] = {"value": 0.25, "low": 0.1, "high": 0.4, "distribution": "gamma"}
    with pytest.raises(ContractError, match="distribution must be one of triangular, uniform, normal, lognormal"):
        parse_contract(data)


@pytest.mark.parametrize("example, top", [("lesson-finetune-1b", 630), ("llama2-70b-pretrain", 700)])
def test_chunked_search_keeps_the_plans_a_brute_force_ranking_puts_first(example, top):
    """Issue 21: the search keeps a running top-k per chunk. Here 100-row chunks against one Python sort of every
    row that fits (the headroom kept; issue 28) by (objective, candidate number), the candidates that are the same
    plan (the same degrees and micro-batch, every figure equal) merged into the first, naming every merged choice."""
    import numpy as np

    from botec.explore.search import LAYOUT_FIELDS, MERGED_CHOICES, PLAN_DEGREES, default_axes
    from botec.explore.space import fit_quantities, fits_mask

    inputs = inputs_of(EXAMPLES / f"{example}.yaml")
    figures = list(dict.fromkeys(["step_seconds", *fit_quantities(inputs), "planned_device_bytes", "step_seconds",
                                  "run_seconds", "end_to_end_mfu", "accelerator_hours"]))
    columns, valid, _ = evaluate_space(Space(inputs, default_axes(inputs)), wanted=figures)
    fits = fits_mask(columns, valid)
    plans: dict[tuple, dict] = {}
    for row in sorted(np.flatnonzero(fits), key=lambda row: (columns["step_seconds"][row], row)):
        key = tuple(float(columns[name][row]) for name in (*PLAN_DEGREES, *figures))
        plan = plans.setdefault(key, {"row": row, "choices": {name: set() for name in MERGED_CHOICES}})
        for name in MERGED_CHOICES:
            plan["choices"][name].add(int(columns[name][row]))
    ranked = list(plans.values())[:top]
    result = search(inputs, top=top, chunk=100)
    assert result.feasible == int(fits.sum()) and len(result.best) == len(ranked) == min(top, len(plans))
    assert len(plans) < result.feasible                  # some candidates are one plan
    assert any(found["merged"] for found in result.best)
    for found, plan in zip(result.best, ranked):
        row = plan["row"]
        assert found["figures"]["step_seconds"] == columns["step_seconds"][row]
        numbers = {path: value for path, value in found["layout"].items() if path in LAYOUT_FIELDS}
        numbers["strategy.recompute"] = int(columns["strategy.recompute"][row])   # shown by its name
        numbers["strategy.sequence_parallel"] = int(numbers["strategy.sequence_parallel"])
        assert numbers == {path: int(columns[path][row]) for path in LAYOUT_FIELDS}
        merged = {path: values for path, values in plan["choices"].items() if len(values) > 1}
        assert set(found["merged"]) == set(merged)
        if "strategy.zero_stage" in merged:
            assert found["merged"]["strategy.zero_stage"] == sorted(merged["strategy.zero_stage"])


def test_evaluating_leaves_no_reference_cycle_to_hold_its_arrays():
    """Issue 21: the on-demand evaluation's resolver read itself through its closure, so each evaluation's arrays
    waited for the cyclic collector; a 10^7-candidate search piled up 2 GB of chunks. Now nothing is garbage."""
    import gc

    from botec.explore.search import default_axes
    from botec.explore.space import fit_quantities

    inputs = inputs_of(LESSON)
    gc.collect()
    gc.disable()
    try:
        evaluate_space(Space(inputs, default_axes(inputs)), wanted=["step_seconds", *fit_quantities(inputs)])
        left = gc.collect()
    finally:
        gc.enable()
    assert left == 0
