"""From a contract to the inputs, once: absence is absence, nothing stands in for what is not stated;
contracts of either kind, their notes and versions; every report says what produced it."""

from __future__ import annotations

import json

import pytest
import yaml

from botec import __version__
from botec.catalog import catalog_revised
from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate, estimate_file
from botec.inputs import build_inputs

from conftest import EXAMPLES, LESSON, write

SERVE = EXAMPLES / "serve-llama3.1-8b-h100.yaml"


def serving_without_targets() -> dict:
    data = yaml.safe_load(SERVE.read_text())
    data["workload"].pop("latency", None)
    return data


def test_a_serving_estimate_without_targets_states_none():
    """The review's bug 6: no TTFT target was a 1e9 s target, printed as "31.7 years"."""
    from botec.report.markdown import render

    result = estimate(parse_contract(serving_without_targets()))
    assert result.choices == {"ttft_target": "none", "tpot_target": "none", "kv_budget": "of_total",
                              "kv_reservation": "incremental", "expert_placement": "busiest"}
    assert "time_to_first_token_target_seconds" not in result.quantities
    text = render(result)
    assert "years" not in text and "no target stated" in text
    # the load per replica is then bound by the utilization cap alone
    assert result.value("requests_per_s_per_replica") == pytest.approx(
        result.value("utilization_cap") * result.value("offline_requests_per_s_per_replica"))


def test_the_serving_methods_line_counts_two_flops_per_parameter():
    from botec.report import methods

    lines = methods(estimate_file(SERVE))
    assert any("FLOPs 2·N(active, matmul) per token" in line for line in lines)
    assert not any("6·N" in line for line in lines)


def test_a_sweep_to_more_accelerators_than_any_link_serves_leaves_them_out(cli, tmp_path):
    """The review's bug 2: from one accelerator with no link, a sweep to 8 gave a 560-year step, marked feasible."""
    text = LESSON.read_text().replace("  count: 4 ", "  count: 1 ").replace(
        '  network:\n    bandwidth: {value: 25 GB/s, source: "lesson 000: usable interconnect per direction during the '
        'collective"}\n', "")
    path = write(tmp_path, text)
    code, out, err = cli("sweep", str(path), "--set", "supply.count=1,8", "--set",
                         "assumptions.single_accelerator_mfu=0.3", "--quantity", "step_seconds", "-f", "json")
    assert code == 0, err
    # the efficiency model's step needs no link: both rows are estimates
    rows = json.loads(out)["rows"]
    assert [row[0] for row in rows] == [1.0, 8.0] and all(row[-1] is not None for row in rows)
    code, out, err = cli("sweep", str(path), "--set", "supply.count=1,8", "--quantity", "collective_floor_seconds",
                         "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert payload["rows"][0][1] == 0 and payload["rows"][0][-1] is True          # one accelerator: no collectives
    assert payload["rows"][1][1] is None and payload["rows"][1][-1] is None       # 8: a link is needed, not invented
    assert payload["counts"]["unplaced"] == {
        "supply.cluster.intra_node.bandwidth is needed: the data-parallel gradient all-reduces need the intra-node "
        "tier": 1}


def test_explore_commands_resolve_a_config_path_beside_the_contract(cli, tmp_path):
    """The review's bug 3: search, solve, sensitivity and --uncertainty failed on the FSDP example's config.json."""
    import os

    path = EXAMPLES / "llama2-7b-fsdp-finetune.yaml"
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for args in (["search", str(path), "--top", "1"], ["estimate", str(path), "--uncertainty", "--samples", "50"],
                     ["solve", str(path), "--maximize", "strategy.micro_batch_size", "--over",
                      "strategy.micro_batch_size=1..4"], ["sensitivity", str(path)]):
            code, out, err = cli(*args)
            assert "no such file" not in err, args
            assert code == 0 or "no assumption of this contract states a range" in err, (args, err)
    finally:
        os.chdir(cwd)


def test_a_newer_schema_version_is_refused_and_the_current_one_read():
    data = yaml.safe_load(LESSON.read_text())
    assert build_inputs(parse_contract({**data, "schema_version": 1}))
    with pytest.raises(ContractError, match="written for contract schema 2; this botec reads schema 1") as error:
        parse_contract({**data, "schema_version": 2})
    assert error.value.field == "schema_version"


def test_a_field_of_the_other_kind_earlier_botec_ignored_is_ignored_with_a_note(cli, tmp_path):
    data = yaml.safe_load(SERVE.read_text())
    data["assumptions"]["headroom"] = 0.2           # a training assumption: serving never read it
    data["strategy"]["precision"] = "bf16"          # the training default, stated in a serving contract
    contract = parse_contract(data)
    assert contract.notes == ["strategy.precision applies to training contracts: ignored",
                              "assumptions.headroom applies to training contracts: ignored"]
    code, out, err = cli("estimate", str(write(tmp_path, yaml.safe_dump(data))), "-f", "json")
    assert code == 0 and "botec: note: assumptions.headroom applies to training contracts: ignored" in err
    assert json.loads(out)["notes"] == contract.notes
    data["strategy"]["micro_batch_size"] = 4        # a training field with a value: refused, as it always was
    with pytest.raises(ContractError, match="applies to training contracts"):
        parse_contract(data)


@pytest.mark.parametrize("form", ["text", "json", "markdown", "html"])
def test_every_report_names_the_version_and_the_catalog(cli, tmp_path, form):
    stamp = f"botec {__version__}; catalog revised {catalog_revised()}"
    if form == "html":
        code, out, err = cli("report", "-o", str(tmp_path / "r.html"))
        text = (tmp_path / "r.html").read_text()
    else:
        code, out, err = cli("estimate", "-f", form)
        text = out
    assert code == 0, err
    if form == "json":
        payload = json.loads(text)
        assert payload["botec_version"] == __version__ and payload["catalog_revised"] == catalog_revised()
    else:
        assert stamp in text


def test_fp16_training_uses_the_fp16_peak_and_names_loss_scaling():
    data = yaml.safe_load((EXAMPLES / "llama3.1-70b-pretrain.yaml").read_text())
    data["strategy"]["precision"] = "fp16"
    result = estimate(parse_contract(data))
    assert result.value("peak_flops_per_s") == pytest.approx(989.4e12)    # H100 SXM FP16 tensor, dense
    assert result.quantities["peak_flops_per_s"].source.startswith("fp16 dense")
    from botec.report import methods

    assert any("FP16 with dynamic loss scaling" in line for line in methods(result))
    data["supply"] = {"accelerator": "tpu-v5p", "count": 1024}
    with pytest.raises(ContractError, match="tpu-v5p has no published fp16 peak") as error:
        build_inputs(parse_contract(data))
    assert error.value.field == "strategy.precision"


def test_the_estimate_carries_its_inputs_and_every_consumer_reuses_them():
    result = estimate_file(EXAMPLES / "llama2-7b-fsdp-finetune.yaml")
    inputs = result.inputs
    assert inputs.base_dir == EXAMPLES.resolve()
    assert inputs.given["parameters"].value == 6_738_415_616        # read from the config.json beside the contract
    assert inputs.vary({}).given.keys() == inputs.given.keys()


# --- issue 21: one setter, one efficiency section, the engines from the catalog, rebuild validates ---------------


def test_one_setter_creates_sections_replaces_values_and_names_a_path_through_a_value():
    from botec.contract import apply_overrides, remove_field, set_field

    data = {"strategy": {"tensor_parallel": 2}, "assumptions": None}
    set_field(data, "strategy.lora.rank", 16)
    set_field(data, "assumptions.headroom", 0.25)        # a null section becomes a mapping
    set_field(data, "strategy.tensor_parallel", 4)
    assert data == {"strategy": {"tensor_parallel": 4, "lora": {"rank": 16}}, "assumptions": {"headroom": 0.25}}
    remove_field(data, "strategy.lora.rank")
    remove_field(data, "supply.count")                   # absent already: nothing happens, nothing is created
    assert data == {"strategy": {"tensor_parallel": 4, "lora": {}}, "assumptions": {"headroom": 0.25}}
    with pytest.raises(ContractError) as caught:
        set_field(data, "strategy.tensor_parallel.degree", 2)
    assert str(caught.value) == "strategy.tensor_parallel.degree: 'tensor_parallel' is not a section"
    # --set reads YAML values through the same setter, on a copy
    changed = apply_overrides(data, ["strategy.lora.rank=8", "supply.accelerator=h100-sxm", "workload.model={a: 1}"])
    assert changed["strategy"]["lora"] == {"rank": 8} and changed["supply"] == {"accelerator": "h100-sxm"}
    assert changed["workload"] == {"model": {"a": 1}} and "supply" not in data


def test_the_validation_cases_change_fields_through_the_same_setter():
    """The validation cases' changes (None removes a field) go through the contract's setter: its errors too."""
    import botec.validate as validate

    data = {"workload": {"kind": "training"}}
    validate._set(data, "strategy.lora.rank", 8)
    validate._set(data, "workload.kind", None)
    assert data == {"workload": {}, "strategy": {"lora": {"rank": 8}}}
    with pytest.raises(ContractError, match="strategy.lora.rank.x: 'rank' is not a section"):
        validate._set(data, "strategy.lora.rank.x", 1)


def test_training_and_serving_share_one_efficiency_section():
    from botec.contract.efficiency import EfficiencyAssumptions
    from botec.contract.serving import ServingAssumptions
    from botec.contract.training import TrainingAssumptions

    shared = set(EfficiencyAssumptions.model_fields)
    assert shared == {"attention_flops", "matmul_efficiency", "kernel_overhead", "memory_bandwidth_efficiency",
                      "attention_efficiency", "efficiency_curve", "efficiency_set"}
    for kind in (TrainingAssumptions, ServingAssumptions):
        assert issubclass(kind, EfficiencyAssumptions)
        assert all(repr(kind.model_fields[name]) == repr(EfficiencyAssumptions.model_fields[name]) for name in shared)
    # the same YAML, flat under assumptions, and the same validation in both kinds
    for path in (EXAMPLES / "llama3.1-8b-finetune-h100.yaml", SERVE):
        data = yaml.safe_load(path.read_text())
        data.setdefault("assumptions", {})["matmul_efficiency"] = 1.5
        with pytest.raises(ContractError) as caught:
            parse_contract(data)
        assert caught.value.field == "assumptions.matmul_efficiency" and "1" in caught.value.detail
        data["assumptions"]["matmul_efficiency"] = "70 %"
        assert parse_contract(data).assumptions.matmul_efficiency.value == pytest.approx(0.70)


def test_the_engine_names_come_from_the_catalog():
    from botec.catalog.engines import engine_presets

    data = yaml.safe_load(SERVE.read_text())
    for engine in engine_presets():
        data["strategy"]["engine"] = engine
        assert parse_contract(data).strategy.engine == engine
    for wrong, hint in (("sglan", "; did you mean 'sglang'?"), (7, "")):
        data["strategy"]["engine"] = wrong
        with pytest.raises(ContractError) as caught:
            parse_contract(data)
        assert caught.value.field == "strategy.engine"
        assert caught.value.detail == (f"unknown engine {wrong!r}{hint} (engines: {', '.join(engine_presets())})")


def test_rebuild_validates_the_changed_contract_and_none_restores_a_default():
    inputs = build_inputs(parse_contract(yaml.safe_load((EXAMPLES / "llama3.1-8b-finetune-h100.yaml").read_text())))
    lora = inputs.rebuild(strategy={"lora": {"rank": 16, "target_modules": "all-linear"}, "recompute": "full"})
    assert lora.contract.strategy.lora.rank == 16 and lora.contract.strategy.recompute == "full"
    assert inputs.contract.strategy.lora is None      # the original inputs are unchanged
    assert lora.rebuild(strategy={"lora": None}).contract.strategy.lora is None
    with pytest.raises(ContractError) as caught:      # a change that breaks a rule names its field
        inputs.rebuild(strategy={"recompute": "selective", "recompute_layer_fraction": 0.5})
    assert caught.value.field == "strategy.recompute_layer_fraction"
