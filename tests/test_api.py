"""The Python API for notebooks: botec.estimate from a path, a mapping or a contract, fields changed as
keywords; results that show themselves in Jupyter, explain, DataFrames; botec.sweep (issue 14, item 6)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

import botec
from botec.errors import ContractError, UserError
from conftest import LESSON, LLAMA


def test_import_botec_loads_nothing_heavy():
    code = ("import sys, botec; heavy = [m for m in ('botec.estimation', 'botec.api', 'pydantic', 'numpy', 'pandas', "
            "'yaml') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_estimate_from_a_path_with_keyword_and_mapping_overrides():
    result = botec.estimate(LESSON)
    assert result.value("run_seconds") == pytest.approx(31_250)  # lesson 000: 6e18 / 192e12
    doubled = botec.estimate(str(LESSON), supply__count=8)
    assert doubled.value("run_seconds") == pytest.approx(15_625)
    both = botec.estimate(LESSON, overrides={"strategy.micro_batch_size": 4}, supply__count=8)
    assert both.value("micro_batch_size") == 4 and both.value("run_seconds") == pytest.approx(15_625)
    assert botec.estimate(LESSON, supply__accelerator__memory="64 GB").value("device_memory_bytes") == 64e9


def test_estimate_from_a_mapping_a_contract_object_and_none():
    data = yaml.safe_load(LESSON.read_text())
    assert botec.estimate(data).value("run_seconds") == pytest.approx(31_250)
    assert data["supply"]["count"] == 4  # the caller's mapping is not changed by an override
    assert botec.estimate(data, supply__count=2).value("run_seconds") == pytest.approx(62_500)
    assert data["supply"]["count"] == 4
    contract = botec.load_contract(LESSON)
    assert botec.estimate(contract, supply__count=8).value("run_seconds") == pytest.approx(15_625)
    assert botec.estimate().value("run_seconds") == pytest.approx(31_250)  # the reference workload


def test_botec_estimate_is_the_api_function_and_the_module_is_estimation():
    import botec.api
    import botec.estimation as module
    from botec import estimate

    # importing the module that computes estimates never rebinds botec.estimate (no module class swapped)
    assert estimate is botec.estimate is botec.api.estimate and callable(botec.estimate)
    assert module.Estimate is botec.Estimate
    assert isinstance(botec.estimate(LESSON), module.Estimate)
    with pytest.raises(AttributeError, match="no attribute 'estimat'"):
        botec.estimat  # noqa: B018


def test_an_estimate_shows_itself_whatever_was_imported():
    """Importing the estimation module loads neither the API nor report/ (start-up stays cheap); an Estimate made
    there has its notebook display and its DataFrame without ``botec.api`` ever being imported (issue 31)."""
    pytest.importorskip("pandas")
    code = ("import sys; from botec.estimation import estimate_file; "
            "print(sorted(m for m in sys.modules if m == 'botec.api' or m.startswith('botec.report'))); "
            f"r = estimate_file({str(LESSON)!r}); frame = r.to_dataframe(); html = r._repr_html_(); "
            "md = r._repr_markdown_(); print(frame.loc['run_seconds', 'value'], frame.loc['run_seconds', 'unit'], "
            "'run_seconds' in html and 'Findings' in html, md.startswith('# '), 'botec.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "31250.0 s True True False"]


@pytest.mark.parametrize("source, fields, field, words", [
    (LESSON, {"supply__count": 0}, "supply.count", ""),
    (LESSON, {"strategy__micro_batch_sise": 4}, "strategy", "micro_batch_sise"),
    (42, {}, "source", "got int"),
    (LESSON, {"supply__count": object()}, "supply.count", "cannot be written in a contract"),
])
def test_bad_input_is_a_one_line_contract_error_naming_the_field(source, fields, field, words):
    with pytest.raises(ContractError) as caught:
        botec.estimate(source, **fields)
    message = str(caught.value)
    assert "\n" not in message and field in message and words in message


def test_explain_is_a_method_returning_the_derivation():
    text = botec.estimate(LESSON).explain("run_seconds")
    assert text.splitlines()[0] == ("run_seconds = training_flops / useful_flops_per_s = "
                                    "6 × 10¹⁸ FLOP / 192 TFLOP/s = 8.68 h")
    assert "\n  training_flops = " in text
    with pytest.raises(UserError, match="did you mean 'run_seconds'"):
        botec.estimate(LESSON).explain("run_second")


def test_jupyter_shows_findings_then_the_accounts_tables():
    result = botec.estimate(LESSON)
    html = result._repr_html_()
    findings, compute, memory = (html.index(t) for t in ("Findings", "<h2>Compute", "<h2>Accelerator memory"))
    assert findings < compute < memory
    assert "fits: 25.2 GB of 32 GB planned, 6.82 GB spare" in html
    assert "<code>planned_device_bytes</code></td><td class=value>25.2 GB</td>" in html
    assert "<html" not in html and "plotly" not in html  # a cell, not a page
    markdown = result._repr_markdown_()
    assert "## Findings" in markdown and "| `planned_device_bytes` | 25.2 GB |" in markdown


def test_to_dataframe_has_every_quantity_in_base_units():
    pandas = pytest.importorskip("pandas")
    frame = botec.estimate(LESSON).to_dataframe()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == len(botec.estimate(LESSON).quantities)
    assert frame.loc["run_seconds", "value"] == pytest.approx(31_250) and frame.loc["run_seconds", "unit"] == "s"
    assert frame.loc["planned_device_bytes", "account"] == "memory"
    assert frame.loc["single_accelerator_mfu", "provenance"] == "assumed"
    assert (frame.loc["single_accelerator_mfu", "low"], frame.loc["single_accelerator_mfu", "high"]) == (0.2, 0.45)


def test_to_dataframe_without_pandas_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'botec\[pandas\]'"):
        botec.estimate(LESSON).to_dataframe()


def test_sweep_returns_a_dataframe_through_the_explore_code():
    pytest.importorskip("pandas")
    frame = botec.sweep(LESSON, {"supply.count": [4, 8, 16], "strategy.micro_batch_size": "13..14"},
                        outputs=["run_seconds"])
    assert list(frame.columns) == ["supply.count", "strategy.micro_batch_size", "run_seconds", "valid", "fits",
                                   "fits_device"]
    assert frame["supply.count"].tolist() == [4, 4, 8, 8, 16, 16]
    assert frame["run_seconds"].tolist() == pytest.approx([31_250, 31_250, 15_625, 15_625, 7_812.5, 7_812.5])
    # 13 sequences fit the 32 GB device only by eating the headroom (7 keep it), 14 not even that (issue 28)
    assert frame["fits"].tolist() == [False, False] * 3 and frame["fits_device"].tolist() == [True, False] * 3


def test_sweep_without_pandas_is_a_dict_of_arrays(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    table = botec.sweep(LESSON, {"supply.count": [4, 8]}, overrides={"strategy.micro_batch_size": 14})
    assert list(table) == ["supply.count", "run_seconds", "planned_device_bytes", "step_seconds", "valid", "fits",
                           "fits_device"]
    assert table["run_seconds"].tolist() == pytest.approx([31_250, 15_625])
    assert table["fits"].tolist() == table["fits_device"].tolist() == [False, False]


@pytest.mark.parametrize("axes, outputs, field, words", [
    ({"supply.cout": [4]}, ["run_seconds"], "axes", "did you mean 'supply.count'"),
    ({"supply.count": [4]}, ["run_second"], "outputs", "did you mean 'run_seconds'"),
    ({"supply.count": 4}, ["run_seconds"], "supply.count", "expected a list"),
    ({}, ["run_seconds"], "axes", "at least one field"),
])
def test_sweep_errors_name_the_argument(axes, outputs, field, words):
    with pytest.raises(ContractError) as caught:
        botec.sweep(LESSON, axes, outputs=outputs)
    assert str(caught.value).startswith(f"{field}: ") and words in str(caught.value)


def test_sweep_refuses_serving_contracts():
    with pytest.raises(ContractError, match="training contracts"):
        botec.sweep(LLAMA.parent / "serve-lesson-7b.yaml", {"supply.count": [1, 2]})
