"""The commands a user runs: estimate (text, JSON, Markdown), explain, schema, init, catalog."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import LESSON


def test_estimate_text_report_has_assumptions_accounts_findings(cli):
    code, out, err = cli("estimate")
    assert code == 0, err
    order = [out.index(title) for title in ("Findings", "Inputs and assumptions", "Compute", "Accelerator memory",
                                            "Network", "Storage")]  # findings first (issue 14)
    assert order == sorted(order)
    assert "0.2 – 0.45" in out          # the range of single_accelerator_mfu
    assert "25.2 GB" in out and "61,036 steps" in out


def test_estimate_json_is_scriptable(cli):
    code, out, err = cli("estimate", str(LESSON), "--format", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload) >= {"contract", "quantities", "findings"}
    quantities = {q["name"]: q for q in payload["quantities"]}
    planned = quantities["planned_device_bytes"]
    assert set(planned) >= {"name", "account", "value", "unit", "meaning", "formula", "inputs", "source"}
    assert planned["value"] == pytest.approx(25.18e9, rel=1e-3) and planned["unit"] == "B"
    assert planned["inputs"] == ["allocated_device_bytes", "allocator_reserve_bytes", "runtime_buffer_bytes",
                                 "paged_optimizer_spill_bytes", "headroom"]
    assert planned["source"]["provenance"] == "derived"
    assert quantities["run_seconds"]["value"] == pytest.approx(31_250) and quantities["run_seconds"]["unit"] == "s"
    assert quantities["training_flops"]["unit"] == "FLOP"
    mfu = quantities["single_accelerator_mfu"]
    assert (mfu["low"], mfu["value"], mfu["high"]) == (0.2, 0.3, 0.45)
    # the normalized contract is in base units
    assert payload["contract"]["supply"]["accelerator"]["memory"]["value"] == 32e9
    assert payload["contract"]["strategy"]["checkpoint"]["interval"]["value"] == 3600
    assert {f["account"] for f in payload["findings"]} >= {"compute", "memory", "network", "storage"}


def test_estimate_markdown_and_binary_units(cli, tmp_path):
    target = tmp_path / "review.md"
    code, out, err = cli("estimate", "-f", "markdown", "--units", "binary", "-o", str(target))
    assert code == 0, err
    text = target.read_text()
    assert text.startswith("# botec estimate: lesson-finetune-1b")
    assert "| `planned_device_bytes` | 23.5 GiB |" in text     # 25.18e9 B / 2^30
    assert "## Findings" in text and "## Storage" in text
    assert "| working weights | 2 | yes |" in text


def test_explain_prints_the_chain(cli):
    code, out, err = cli("explain", str(LESSON), "planned_device_bytes")
    assert code == 0, err
    lines = out.splitlines()   # a line over 100 columns wraps, its further lines 4 deeper
    assert " ".join(" ".join(lines[:2]).split()) == (
        "planned_device_bytes = (allocated_device_bytes + allocator_reserve_bytes + runtime_buffer_bytes − "
        "paged_optimizer_spill_bytes) × (1 + headroom) = (18.1 + 0 + 2 − 0) GB × 1.25 = 25.2 GB")
    assert lines[1].startswith("    paged_optimizer_spill_bytes")
    state = next(i for i, line in enumerate(lines) if line.startswith("    state_bytes = "))
    assert " ".join(" ".join(lines[state: state + 2]).split()) == (
        "state_bytes = weight_memory_bytes + gradient_memory_bytes + optimizer_memory_bytes = 2 GB + 2 GB + 12 GB "
        "= 16 GB")


def test_explain_on_the_reference_workload_by_default(cli):
    code, out, err = cli("explain", "run_seconds")
    assert code == 0, err
    assert out.startswith("run_seconds = training_flops / useful_flops_per_s = 6 × 10¹⁸ FLOP / 192 TFLOP/s = 8.68 h")


def test_schema_validates_every_example_and_refuses_what_botec_refuses(cli):
    """The JSON Schema an editor uses accepts each shipped contract and refuses a misspelt field, a serving field in
    a training contract and a training count in a serving one, as botec itself does."""
    import jsonschema
    import yaml

    from conftest import EXAMPLES

    code, out, err = cli("schema")
    assert code == 0, err
    schema = json.loads(out)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(EXAMPLES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert not list(validator.iter_errors(data)), path.name
    lesson = yaml.safe_load((EXAMPLES / "lesson-finetune-1b.yaml").read_text())
    misspelt = json.loads(json.dumps(lesson))
    misspelt["supply"]["cuont"] = 4
    assert list(validator.iter_errors(misspelt))
    serving_field = json.loads(json.dumps(lesson))
    serving_field["strategy"]["weight_precision"] = "fp8"
    assert list(validator.iter_errors(serving_field))
    serve = yaml.safe_load((EXAMPLES / "serve-llama3.1-8b-h100.yaml").read_text())
    serve["supply"]["count"] = 8
    assert list(validator.iter_errors(serve))
    text = json.dumps(schema)
    assert "Sequences per accelerator per micro-step B_local" in text and "a count such as" in text


def test_init_writes_a_commented_starter_that_estimates(cli, tmp_path):
    path = tmp_path / "job.yaml"
    code, out, err = cli("init", str(path))
    assert code == 0, err
    text = path.read_text()
    assert text.count("#") > 20                         # commented
    assert yaml.safe_load(text)["supply"]["count"] == 4
    # the starter states the lesson's methods, so its figures are the lesson's
    assumptions = yaml.safe_load(text)["assumptions"]
    assert assumptions["step_time_model"] == "efficiency"
    assert assumptions["activation_model"] == "saved_tensor_factor"
    code, out, err = cli("estimate", str(path), "-f", "json")
    assert code == 0, err
    run = next(q for q in json.loads(out)["quantities"] if q["name"] == "run_seconds")
    assert run["value"] == pytest.approx(31_250)


def test_catalog_lists_accelerators_and_presets(cli):
    code, out, err = cli("catalog", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    keys = {d["key"] for d in payload["accelerators"]}
    assert {"h100-sxm", "mi300x", "tpu-v5p"} <= keys
    assert {p["key"] for p in payload["optimizers"]} >= {"adam-mixed", "adam-8bit"}
    code, out, err = cli("catalog")
    assert code == 0 and "h100-sxm" in out and "989" in out


def test_json_contract_files_work(cli, tmp_path):
    data = yaml.safe_load(LESSON.read_text())
    path = tmp_path / "lesson.json"
    path.write_text(json.dumps(data))
    code, out, err = cli("estimate", str(path), "-f", "json")
    assert code == 0, err
    assert {q["name"]: q["value"] for q in json.loads(out)["quantities"]}["steps"] == 61_036


def test_version_and_help(cli):
    code, out, err = cli("--version")
    assert code == 0 and out.startswith("botec ")
    code, out, err = cli("estimate", "--help")
    assert code == 0 and "Example" in out
