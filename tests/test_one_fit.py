"""One meaning of "fits" (issue 28, item 5): the estimate, solve, sweep, search, Monte Carlo and the JSON report read
one verdict, the plan fits with its headroom kept (botec.findings.fit); "fits the device, the headroom eaten" is a
second, named verdict, fits_device. And the search's top rows are different plans.

The lesson's card (examples/lesson-finetune-1b.yaml, the default contract): 32 GB; 1B parameters × 16 B = 16 GB of
state, 2 GB of buffers; activations 8 (saved-tensor factor) × 16 layers × 2,048 × 2,048 × 2 B = 1,073,741,824 B per
sequence; headroom 25 %. With the headroom kept, (32 / 1.25 − 18) / 1.0737 = 7.08 ⇒ 7 sequences; on the device
alone, (32 − 18) / 1.0737 = 13.04 ⇒ 13. Eight sequences plan (18 + 8 × 1.0737) × 1.25 = 33.24 GB, of which 26.59 GB
without the headroom.
"""

from __future__ import annotations

import json

import pytest

from botec.contract import load_contract
from botec.estimation import estimate_file
from botec.explore.space import Space, evaluate_space, fit_quantities, fits_mask, parse_axis
from botec.inputs import build_inputs

from conftest import EXAMPLES, LESSON

pytest.importorskip("numpy")

GPT3 = EXAMPLES / "gpt3-175b-search.yaml"
OFFLOAD = EXAMPLES / "llama2-7b-fsdp-offload-a10g.yaml"
PER_SEQUENCE = 8 * 16 * 2048 * 2048 * 2          # activation bytes per sequence of the lesson
FIXED = 16e9 + 2e9                               # state and buffers


def test_the_lesson_by_hand():
    result = estimate_file(LESSON, ["strategy.micro_batch_size=8"])
    assert PER_SEQUENCE == 1_073_741_824
    assert int((32e9 / 1.25 - FIXED) / PER_SEQUENCE) == result.value("max_micro_batch_size") == 7
    assert int((32e9 - FIXED) / PER_SEQUENCE) == 13
    assert result.value("planned_device_bytes") == pytest.approx((FIXED + 8 * PER_SEQUENCE) * 1.25) \
        == pytest.approx(33.24e9, rel=1e-3)
    assert not result.fits and result.fits_device


def test_solve_subject_to_fits_prints_the_estimates_7(cli):
    code, out, err = cli("solve", "--maximize", "strategy.micro_batch_size", "--subject-to", "fits")
    assert code == 0, err
    assert out.startswith("strategy.micro_batch_size = 7  (7 of 256 values tried meet the constraints)")
    assert "fits_device" not in out
    code, out, err = cli("estimate", "--set", "strategy.micro_batch_size=16")
    assert code == 2 and "at most 7 fit" in err


def test_solve_subject_to_fits_device_gives_13_and_says_so(cli):
    code, out, err = cli("solve", "--maximize", "strategy.micro_batch_size", "--subject-to", "fits_device")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("strategy.micro_batch_size = 13  (13 of 256 values tried")
    assert "  fits_device: the plan fits the device, its 25 % headroom eaten (assumptions.headroom)" in lines
    assert "  with the headroom kept (--subject-to fits): strategy.micro_batch_size = 7" in lines
    code, out, err = cli("solve", "--maximize", "strategy.micro_batch_size", "--subject-to", "fits_device",
                         "-f", "json")
    payload = json.loads(out)
    assert (payload["value"], payload["verdict"], payload["value_keeping_headroom"]) == (13, "fits_device", 7)
    # 13 × 1.0737 + 18 = 31.96 GB of the 32: 41.4 MB left before the headroom, −7.95 GB after it
    row = {entry["name"]: entry["value"] for entry in payload["row"]}
    assert row["memory_spare_before_headroom_bytes"] == pytest.approx(32e9 - FIXED - 13 * PER_SEQUENCE, abs=1)
    assert row["memory_spare_bytes"] == pytest.approx(32e9 - 1.25 * (FIXED + 13 * PER_SEQUENCE), abs=1)


def test_a_constraint_word_that_is_neither_is_refused(cli):
    code, out, err = cli("solve", "--maximize", "strategy.micro_batch_size", "--subject-to", "fits_host")
    assert code == 2 and err.count("\n") == 1
    assert "--subject-to" in err and "'fits' (the headroom kept) or 'fits_device'" in err


def test_the_sweep_says_33_2_gb_on_32_gb_does_not_fit(cli):
    code, out, err = cli("sweep", "--set", "strategy.micro_batch_size=7,8", "-q", "planned_device_bytes",
                         "-f", "markdown")
    assert code == 0, err
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert table[0] == "| strategy.micro_batch_size | planned_device_bytes | fits | fits_device |"
    assert table[1:] == ["| 7 | 31.9 GB | fits | yes |", "| 8 | 33.2 GB | does not fit | yes |"]
    assert "2 configurations, 2 valid layouts, 1 fit (the headroom kept; 1 more fit the device by eating it)" in err


def test_the_estimate_refuses_a_plan_that_eats_its_headroom(cli):
    code, out, err = cli("estimate", "--set", "strategy.micro_batch_size=8")
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert ("strategy.micro_batch_size: 8 sequences per accelerator need 33.2 GB planned per accelerator, more than "
            "its 32 GB (it fits the device only by eating the 25 % headroom: 26.6 GB without it;") in err
    assert "; at most 7 fit;" in err
    code, out, err = cli("estimate", "--set", "strategy.micro_batch_size=8", "--allow-misfit", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["fits"] is False and payload["fits_device"] is True and "fits_with_headroom" not in payload
    memory = next(f for f in payload["findings"] if f["account"] == "memory")
    assert memory["level"] == "fail" and memory["message"].startswith(
        "does not fit within the headroom: 33.2 GB planned against 32 GB; the 26.6 GB it needs fit the device only "
        "by eating the 6.65 GB headroom")
    code, out, err = cli("estimate", "-f", "json")
    assert json.loads(out)["fits"] is True and json.loads(out)["fits_device"] is True


@pytest.mark.parametrize("path, axes", [
    (LESSON, ["supply.count=1,2,4", "strategy.micro_batch_size=1..16"]),
    (OFFLOAD, ["supply.host_memory=64 GB,128 GB,256 GB", "strategy.micro_batch_size=1,4,8"]),
])
def test_the_scalar_verdict_and_the_sweeps_mask_are_one_rule(path, axes):
    """Every row of a sweep: its fits / fits_device mask equals the single estimate's Estimate.fits / fits_device
    (the offload example states host memory: 121 GB a node, so 64 GB fails both verdicts on the host)."""
    inputs = build_inputs(load_contract(path), path.parent)
    parsed = [parse_axis(axis, inputs) for axis in axes]
    columns, valid, _ = evaluate_space(Space(inputs, parsed), wanted=fit_quantities(inputs))
    fits, device = fits_mask(columns, valid), fits_mask(columns, valid, "fits_device")
    seen = set()
    for row in range(len(valid)):
        overrides = [f"{axis.path}={columns[axis.path][row]:.0f}" for axis in parsed]
        single = estimate_file(path, overrides)
        assert (bool(fits[row]), bool(device[row])) == (single.fits, single.fits_device), overrides
        seen.add((single.fits, single.fits_device))
    assert {(True, True), (False, False)} <= seen
    if path == LESSON:
        assert (False, True) in seen       # the rows that fit only by eating the headroom


def test_monte_carlo_chance_of_fitting_keeps_the_headroom():
    """Seven sequences with the saved-tensor factor drawn triangular(4, 8, 16): the plan fits with the headroom kept
    when 18 GB + 7 × f × 134,217,728 B ≤ 25.6 GB, f ≤ 8.0892, a chance of 1 − (16 − 8.0892)² / (12 × 8) = 0.348
    (the device alone would hold f ≤ 14.90: 0.987)."""
    from botec.explore.uncertainty import monte_carlo

    bound = (32e9 / 1.25 - FIXED) / (7 * PER_SEQUENCE / 8)
    assert bound == pytest.approx(8.0892, abs=1e-4)
    expected = 1 - (16 - bound) ** 2 / (12 * 8)
    assert expected == pytest.approx(0.3481, abs=1e-4)
    mc = monte_carlo(estimate_file(LESSON, ["strategy.micro_batch_size=7"]), samples=20_000, seed=5)
    assert "assumptions.saved_tensor_factor" in mc.varied
    assert mc.probability_fits == pytest.approx(expected, abs=0.015)


def test_the_search_lists_five_different_plans(cli):
    """GPT-3 175B (examples/gpt3-175b-search.yaml, flash attention): recomputation none and selective are the same
    plan, so they were listed twice (newcomer-3.md #17); now one row each names both."""
    from botec.explore.search import PLAN_DEGREES, as_overrides, search

    result = search(estimate_file(GPT3).inputs, top=5)
    assert len(result.best) == 5
    plans = {(tuple(entry["layout"][path] for path in PLAN_DEGREES), tuple(entry["figures"].values()))
             for entry in result.best}
    assert len(plans) == 5
    first = result.best[0]
    assert first["merged"] == {"strategy.recompute": ["none", "selective"]}
    assert first["layout"]["strategy.recompute"] == "none"            # the first candidate's --set line
    none = estimate_file(GPT3, as_overrides(first["layout"]))
    selective = estimate_file(GPT3, as_overrides(first["layout"] | {"strategy.recompute": "selective"}))
    for name in ("step_seconds", "planned_device_bytes", "end_to_end_mfu", "memory_spare_bytes"):
        assert none.value(name) == selective.value(name) == first["figures"][name], name
    code, out, err = cli("search", str(GPT3), "--top", "5")
    assert code == 0, err
    ranked = [line for line in out.splitlines() if line[:2] in {f"{n}." for n in range(1, 6)}]
    assert len(ranked) == 5 and all("recompute none or selective" in line for line in ranked)
