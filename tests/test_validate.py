"""`botec validate`: botec beside the published figures it ships, with the targets of issues 11 and 19.

Three kinds of test, named as such: a *prediction* test grades rows no figure in force was fitted to (the
measured defaults); a *calibration regression* checks that a named fit (``efficiency_set``) still reproduces the
rows it was fitted to (its training error, not evidence of accuracy); a *consistency* check compares a formula with
the published formula's own number, or a catalog figure with the measurement it was copied from (it cannot miss).
"""

from __future__ import annotations

import json

import pytest

from botec.validate import KINDS, cases, run_all, run_case, summarize

FIT = "megatron-2022-fit"   # the A100 figures botec 0.6 fitted to Selene Table 5 and SC21 Table 1


def case(prefix: str, efficiency_set: str | None = None):
    return run_case(next(c for c in cases() if c.id.startswith(prefix)), efficiency_set)


def test_every_shipped_case_runs_every_row():
    for found in cases():
        result = run_case(found)
        assert result.rows and all(row.problem is None for row in result.rows), found.id
        assert found.source and found.published_as and found.flop_convention


def test_selene_table_5_predicted_from_the_measured_defaults():
    """Prediction: Selene, Korthikanti et al. 2022 Table 5, from the operator-measured defaults (no efficiency
    set): mean |error| ≤ 6 % (issue 19), every layout fits the device."""
    result = case("train-korthikanti-selene-table5")
    assert len(result.rows) == 8
    assert {row.kind for row in result.rows} == {"prediction"} and result.kind == "prediction"
    assert all(row.efficiency_set is None for row in result.rows)
    assert result.mean_abs_error <= 0.06
    assert all(row.fits_device for row in result.rows)            # these layouts ran on 80 GB A100s
    assert result.checks == {"mean_abs_error": True, "fits_device": True}
    published = {row.id: row.published for row in result.rows}
    assert published["175b-full"] == 18.13 and published["1t-seq-sel"] == 71.49


def test_sc21_weak_scaling_predicted_rising_from_the_measured_defaults():
    """Prediction: Narayanan et al. 2021 Table 1 from the measured defaults, rising from 1.7B to 1T as
    published, on the stack the case names (Megatron-LM of April 2021)."""
    result = case("train-megatron-sc21")
    assert len(result.rows) == 10
    assert {row.kind for row in result.rows} == {"prediction"}
    assert "Megatron-LM" in result.case.stack and "2021" in result.case.stack
    values = [row.botec for row in result.rows]
    assert values[-1] > values[0] and sum(values[5:]) > sum(values[:5])
    assert all(row.fits_device for row in result.rows)
    assert result.checks == {"trend": True, "fits_device": True}
    assert result.rows[0].published == pytest.approx(137e12)


def test_megatron_2022_fit_reproduces_selene_table_5():
    """Calibration regression, not validation: the A100 figures fitted to Table 5 (and SC21) still reproduce
    Table 5: mean |error| ≤ 4 %, max ≤ 9 % (Calculon: 3.7 %, 8.9 %)."""
    result = case("train-korthikanti-selene-table5", FIT)
    assert {row.kind for row in result.rows} == {"calibration"}
    assert {row.efficiency_set for row in result.rows} == {FIT}
    assert result.mean_abs_error <= 0.04 and result.max_abs_error <= 0.09
    assert result.checks == {"mean_abs_error": True, "max_abs_error": True, "fits_device": True}


def test_megatron_2022_fit_reproduces_sc21_weak_scaling():
    """Calibration regression, not validation: the fit reproduces its SC21 rows, every row within ±10 % and
    rising from 1.7B to 1T."""
    result = case("train-megatron-sc21", FIT)
    assert {row.kind for row in result.rows} == {"calibration"}
    assert all(abs(row.error) <= 0.10 for row in result.rows)
    values = [row.botec for row in result.rows]
    assert values[-1] > values[0] and sum(values[5:]) > sum(values[:5])
    assert result.checks == {"each_within": True, "trend": True, "fits_device": True}


def test_every_case_declares_what_was_fitted_to_it():
    """A case's fitted_by names exactly the catalog calibration sets fitted to it (each set's fitted_to), and
    the cases that cannot miss are declared consistency checks."""
    from botec.catalog.efficiency import efficiency_sets

    sets = efficiency_sets()
    for found in cases():
        assert set(found.fitted_by) <= set(sets), found.id
        assert set(found.fitted_by) == {name for name, s in sets.items() if found.id in s.fitted_to}, found.id
    consistency = {c.id for c in cases() if c.role == "consistency"}
    assert consistency == {"mem-korthikanti-activations", "mem-zero-model-states", "net-collectives",
                           "serve-vllm-opt13b-kv", "train-chinchilla-compute-optimal", "train-gpt3-175b"}
    assert all(c.stack for c in cases() if c.role != "consistency")   # a prediction names the stack it predicts


def test_a_row_is_calibration_only_under_a_set_fitted_to_its_case():
    """The kind follows the set in force: stated in the contract (as a row's change) or by --efficiency-set;
    a set fitted to other cases leaves a row a prediction; a consistency case stays consistency."""
    from dataclasses import replace

    from botec.validate import row_kind

    selene = next(c for c in cases() if c.id.startswith("train-korthikanti-selene"))
    row = selene.rows[0]
    assert row_kind(selene, row, None) == "prediction" and row_kind(selene, row, FIT) == "calibration"
    assert row_kind(selene, row, "another-fit") == "prediction"
    assert row_kind(selene, replace(row, fitted_by=()), FIT) == "prediction"      # a row may override
    assert row_kind(selene, replace(row, role="consistency"), FIT) == "consistency"
    stated = replace(selene, rows=(replace(row, changes={**row.changes, "assumptions.efficiency_set": FIT}),))
    (only,) = run_case(stated).rows
    assert only.kind == "calibration" and only.efficiency_set == FIT
    gpt3 = next(c for c in cases() if c.id.startswith("train-gpt3"))
    assert {r.kind for r in run_case(gpt3, FIT).rows} == {"consistency"}


def test_the_case_schema_reads_role_and_fitted_by_per_case_and_per_row():
    from botec.validate import _load

    text = """
id: x
title: t
metric: step_seconds
published_as: p
flop_convention: not needed
source: s
verification: v
fitted_by: [some-fit]
contract: {}
rows:
  - {id: a, label: a, published: 1 s}
  - {id: b, label: b, published: 1 s, role: consistency}
  - {id: c, label: c, published: 1 s, fitted_by: []}
"""
    loaded = _load(text, "x.yaml")
    assert loaded.fitted_by == ("some-fit",) and loaded.role == "prediction" and loaded.stack is None
    assert [(r.role, r.fitted_by) for r in loaded.rows] == [(None, None), ("consistency", None), (None, ())]
    with pytest.raises(ValueError, match="role must be one of prediction, consistency"):
        _load(text.replace("role: consistency", "role: calibration"), "x.yaml")


def test_the_summary_never_averages_across_kinds():
    """Per kind its own statistics; the prediction headline of issue 19 is over time-like prediction rows."""
    results = run_all()
    summary = summarize(results)
    assert set(summary) == set(KINDS)
    rows = {kind: [r for result in results for r in result.graded if r.kind == kind] for kind in KINDS}
    assert summary["prediction"]["rows"] == len(rows["prediction"]) > 0
    assert summary["calibration"]["rows"] == 0                    # the defaults are fitted to no case
    assert summary["consistency"]["rows"] == len(rows["consistency"]) > 0
    time_like = sorted(abs(r.error) for r in rows["prediction"] if r.unit in ("s", "FLOP/s", "tokens/s"))
    assert summary["prediction"]["time_like"]["rows"] == len(time_like)
    assert summary["prediction"]["time_like"]["median_abs_error"] == pytest.approx(
        (time_like[(len(time_like) - 1) // 2] + time_like[len(time_like) // 2]) / 2)
    fitted = summarize(run_all(["train"], efficiency_set=FIT))
    assert fitted["calibration"]["rows"] == 18
    assert set(fitted["calibration"]["cases"]) == {"train-korthikanti-selene-table5",
                                                   "train-megatron-sc21-weak-scaling"}
    # the A100 fit was fitted to none of the Hopper cases' rows: under it they stay predictions
    assert set(fitted["prediction"]["cases"]) == {"train-megatron-core-h100-weak-scaling",
                                                  "train-nemo-2502-gpt3-175b-h100"}


def test_prediction_rows_time_like_median_within_ten_percent():
    """Issue 19's done-when: on the prediction rows (the measured defaults), time-like figures (step seconds,
    FLOP/s, tokens/s) have a median |error| ≤ 10 %."""
    headline = summarize(run_all())["prediction"]["time_like"]
    assert headline["rows"] >= 20
    assert headline["median_abs_error"] <= 0.10


def test_memory_cases_are_exact():
    zero = case("mem-zero")
    assert [row.botec for row in zero.rows] == pytest.approx([120e9, 31.40625e9, 16.640625e9, 1.875e9])
    assert zero.checks == {"exact": True}
    korthikanti = case("mem-korthikanti")
    assert [row.botec for row in korthikanti.rows] == [2_868_903_936, 106_954_752, 50_331_648]


def test_consistency_flop_counts_transcribe_the_published_6nd():
    """Consistency: 6·N·D against the papers' own 6·N·D, and hours from the published MFU (no prediction)."""
    gpt3 = case("train-gpt3")
    assert {row.kind for row in gpt3.rows} == {"consistency"}
    assert gpt3.rows[0].botec == pytest.approx(3.14e23, rel=0.02)
    assert gpt3.rows[1].botec == pytest.approx(3.14e23 / (0.213 * 125e12 * 3600), rel=0.05)
    chinchilla = case("train-chinchilla")
    assert {row.kind for row in chinchilla.rows} == {"consistency"}
    assert chinchilla.checks == {"each_within": True}
    assert [row.id for row in chinchilla.rows if row.outside_target] == ["n-67b"]


def test_consistency_collectives_definition_and_the_presets_copied_bandwidths():
    """Consistency: NCCL's all-reduce definition evaluated, and the node presets' achieved NVLink bandwidths
    against the nccl-tests figures they were copied from (the case cannot miss: no evidence of accuracy)."""
    network = case("net-collectives")
    assert {row.kind for row in network.rows} == {"consistency"}
    assert network.rows[0].botec == pytest.approx(1e9 * 2 * 7 / 8 / 100e9)
    bandwidths = {row.id: (row.botec, row.published) for row in network.rows[1:]}
    assert bandwidths["a100-nvlink-busbw"][0] == pytest.approx(230e9, rel=0.10)
    assert bandwidths["h100-nvlink-busbw"][0] == pytest.approx(370e9, rel=0.10)


def test_cli_json_and_errors(cli):
    code, out, err = cli("validate", "mem-zero", "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    (only,) = data["cases"]
    assert only["id"] == "mem-zero-model-states" and only["summary"]["targets"] == {"exact": True}
    assert only["role"] == "consistency" and {row["kind"] for row in only["rows"]} == {"consistency"}
    assert data["summary"]["consistency"]["rows"] == 4 and data["summary"]["prediction"]["rows"] == 0
    assert [row["published"] for row in only["rows"]] == pytest.approx([120e9, 31.4e9, 16.6e9, 1.9e9])
    assert only["rows"][3]["error"] == pytest.approx(1.875 / 1.9 - 1)
    code, out, err = cli("validate", "no-such-case")
    assert code == 2 and "no validation case starts with 'no-such-case'" in err
    code, out, err = cli("validate", "--list")
    assert code == 0 and "train-korthikanti-selene-table5" in out and "fitted by megatron-2022-fit" in out
    code, out, err = cli("validate", "mem-zero", "--efficiency-set", "megatron-fit")
    assert code == 2 and "no calibration set named 'megatron-fit'" in err and "megatron-2022-fit" in err
    assert len(err.strip().splitlines()) == 1


def test_cli_efficiency_set_reports_the_fit_as_calibration_rows(cli):
    code, out, err = cli("validate", "train", "--efficiency-set", FIT, "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["efficiency_set"] == FIT
    kinds = {c["id"]: {row["kind"] for row in c["rows"]} for c in data["cases"]}
    assert kinds["train-korthikanti-selene-table5"] == kinds["train-megatron-sc21-weak-scaling"] == {"calibration"}
    assert kinds["train-gpt3-175b"] == {"consistency"}
    assert kinds["train-megatron-core-h100-weak-scaling"] == kinds["train-nemo-2502-gpt3-175b-h100"] == {"prediction"}
    assert data["summary"]["calibration"]["rows"] == 18
    code, out, err = cli("validate", "train", "--efficiency-set", FIT)
    assert code == 0, err
    assert "Calibration rows" in out and "train-korthikanti-selene-table5 [calibration: megatron-2022-fit]" in out
    assert "calibration: 18 rows in 2 cases" in out


def test_strict_passes_when_every_target_is_met_and_fails_when_one_is_missed(cli):
    # the Hopper weak-scaling case is left out: it misses its ±15 % (test_megatron_core_h100_rows_within_15_percent)
    code, out, err = cli("validate", "train-korthikanti", "train-megatron-sc21", "train-chinchilla", "train-gpt3", "mem",
                         "net", "--strict", "-f", "markdown")
    assert code == 0, err
    assert "### Prediction rows" in out and "### Calibration rows" in out and "### Consistency checks" in out
    assert "targets met 4 of 4." in out and "targets met 5 of 5." in out    # prediction; consistency
    # the serving set: the MLPerf Mixtral row is out of its ±15 % (botec over-predicts the MoE throughput), and
    # so is the Llama 2 70B H100 TP 2 row since the GEMMs are priced from the measured tables (issue 29: the
    # table's FP8 slope is faster than the old scalar efficiency, which was covering for another term); the
    # TensorRT-LLM v0.17 case meets its ±15 % since decode attention streams at the table's own cost per token
    # (its 20,000/2,000 rows were −19.5 % and −14.0 %)
    code, out, err = cli("validate", "serve", "--strict", "-f", "markdown")
    assert code == 1
    assert "targets met 2 of 4." in out and "serve-mlperf-v41-mixtral-offline" in out


@pytest.mark.xfail(strict=True, reason="issue 30: with the stated TP and DP overlaps hidden as the schedule hides "
                                       "them, botec runs the rows 10-19 % fast (119B and 177B outside ±15 %); the "
                                       "table's own small rows (48-96 GPUs, almost no communication) come out 39-57 % "
                                       "fast, so the op-level compute on these shapes is optimistic, not the network")
def test_megatron_core_h100_rows_within_15_percent():
    """Issue 30's done-when: public Hopper runs at 512 GPUs and more, each within 15 % with the defaults (Megatron-LM
    README, July 2024, images/model_table.png: 419.7-474.4 TFLOP/s per GPU on 768-6,144 H100)."""
    result = run_case(next(c for c in cases() if c.id == "train-megatron-core-h100-weak-scaling"))
    assert [r.published for r in result.graded] == pytest.approx([419.7e12, 420.5e12, 432.8e12, 474.4e12, 459.9e12])
    assert all(abs(r.error) <= 0.15 for r in result.graded)


def test_sc21_holds_its_rising_trend_without_naming_a_stack():
    """Issue 30's done-when: the SC21 weak-scaling case (Narayanan et al. 2021, Table 1: 137 → 163 TFLOP/s per A100
    from 1.7B to 1T) still rises with the model when its contract names no framework (the default stack assumed)."""
    import dataclasses

    from botec.validate import _rising

    case = next(c for c in cases() if c.id == "train-megatron-sc21-weak-scaling")
    contract = {**case.contract, "strategy": {k: v for k, v in case.contract["strategy"].items() if k != "framework"}}
    result = run_case(dataclasses.replace(case, contract=contract))
    assert all(r.botec is not None for r in result.rows)
    assert _rising([r.botec for r in result.rows])
