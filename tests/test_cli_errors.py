"""Bad input: one clear line naming the field and the expectation, exit code 2, no traceback,
and nothing written."""

from __future__ import annotations

import pytest

from conftest import LESSON, write

GOOD = LESSON.read_text(encoding="utf-8")
INLINE_DEVICE = """  accelerator:                 # a hypothetical device, described inline (or a catalog name: h100-sxm)
    name: lesson accelerator
    peak_flops_per_s: 200 TFLOP/s   # theoretical BF16 peak for the operations this model uses
    memory: 32 GB
"""


def with_catalog_device(key: str) -> str:
    assert INLINE_DEVICE in GOOD
    return GOOD.replace(INLINE_DEVICE, f"  accelerator: {key}\n")


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> str:
    assert code == 2, (code, out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("botec: error: ")
    assert "Traceback" not in err and "Traceback" not in out
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_malformed_yaml(cli, tmp_path):
    path = write(tmp_path, "workload:\n  model: [1, 2\nsupply: {}\n")
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, str(path), "malformed YAML at line")


def test_malformed_json(cli, tmp_path):
    path = write(tmp_path, '{"workload": ', name="contract.json")
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "malformed JSON at line 1")


def test_unknown_field_with_did_you_mean(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("  count: 4 ", "  cuont: 4 "))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "supply.cuont: unknown field; did you mean 'count'?")


def test_unknown_section_with_did_you_mean(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("assumptions:   ", "asumptions:   "))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "asumptions: unknown field; did you mean 'assumptions'?")


def test_unit_that_does_not_parse(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("memory: 32 GB", "memory: 32 GX"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "supply.accelerator.memory", "unknown unit 'GX' in '32 GX'",
                          "expected a byte size")


def test_unit_of_the_wrong_dimension(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("interval: 1 h", "interval: 1 GB"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "strategy.checkpoint.interval", "expected a duration")


@pytest.mark.parametrize("count, expected", [("0", "at least 1"), ("-4", "at least 1"), ("2.5", "a whole number")])
def test_zero_negative_or_fractional_count(cli, tmp_path, count, expected):
    path = write(tmp_path, GOOD.replace("  count: 4 ", f"  count: {count} "))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "supply.count", expected)


def test_negative_tokens(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("tokens: 1B ", "tokens: -1B "))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "workload.tokens", "greater than 0")


def test_efficiency_above_one(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("value: 0.30, low: 0.20, high: 0.45", "value: 1.3"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "assumptions.single_accelerator_mfu", "at most 1")


def test_range_that_excludes_the_value(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("value: 0.30, low: 0.20", "value: 0.30, low: 0.35"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "assumptions.single_accelerator_mfu", "low (0.35) must not exceed value")


def test_unknown_accelerator(cli, tmp_path):
    path = write(tmp_path, with_catalog_device("h100-sxn"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "supply.accelerator: unknown accelerator 'h100-sxn'; did you mean 'h100-sxm'?")


def test_unknown_optimizer(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("optimizer: adam-mixed", "optimizer: adam-mixd"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "strategy.optimizer", "did you mean 'adam-mixed'?")


def test_batch_that_does_not_fit(cli):
    code, out, err = cli("estimate", str(LESSON), "--set", "strategy.micro_batch_size=16")
    line = assert_one_line_error(code, out, err, "strategy.micro_batch_size: 16 sequences per accelerator need",
                                 "more than its 32 GB", "at most 7 fit")
    # (16 + 16 × 1.07 + 2) GB × 1.25 = 43.98 GB planned
    assert "44 GB planned" in line
    assert out == ""


def test_batch_that_does_not_fit_can_still_be_reported(cli):
    code, out, err = cli("estimate", str(LESSON), "--set", "strategy.micro_batch_size=16", "--allow-misfit",
                         "-f", "json")
    assert code == 0
    import json

    payload = json.loads(out)
    assert payload["fits"] is False
    assert [f for f in payload["findings"] if f["account"] == "memory"][0]["level"] == "fail"


def test_both_efficiency_models_is_a_double_count(cli):
    code, out, err = cli("estimate", str(LESSON), "--set", "assumptions.end_to_end_mfu=0.24")
    assert_one_line_error(code, out, err, "assumptions.end_to_end_mfu", "count them twice")


def test_missing_required_field(cli, tmp_path):
    path = write(tmp_path, GOOD.replace("  sequence_length: 2048        # S\n", ""))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "workload.sequence_length: required field is missing")


def test_missing_file(cli, tmp_path):
    code, out, err = cli("estimate", str(tmp_path / "nope.yaml"))
    assert_one_line_error(code, out, err, "nope.yaml: no such file")


def test_contract_that_is_not_a_mapping(cli, tmp_path):
    path = write(tmp_path, "- just\n- a list\n")
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "a contract is a mapping")


def test_bad_override(cli):
    code, out, err = cli("estimate", "--set", "supply.count")
    assert_one_line_error(code, out, err, "--set", "expected FIELD=VALUE")


def test_precision_the_catalog_lacks(cli, tmp_path):
    text = with_catalog_device("a100-sxm-80gb").replace("precision: bf16", "precision: fp8")
    code, out, err = cli("estimate", str(write(tmp_path, text)))
    assert_one_line_error(code, out, err, "strategy.precision", "a100-sxm-80gb has no published fp8 peak")


def test_unknown_quantity_in_explain(cli):
    code, out, err = cli("explain", str(LESSON), "planned_devise_bytes")
    assert_one_line_error(code, out, err, "'planned_devise_bytes' is not a quantity; did you mean 'planned_device_bytes'?")


def test_init_refuses_to_overwrite(cli, tmp_path):
    path = write(tmp_path, "keep me\n", name="botec.yaml")
    code, out, err = cli("init", str(path))
    assert_one_line_error(code, out, err, "already exists")
    assert path.read_text() == "keep me\n"


def test_failed_report_write_leaves_nothing(cli, tmp_path):
    target = tmp_path / "missing-dir" / "report.md"
    code, out, err = cli("estimate", "-f", "markdown", "-o", str(target))
    assert_one_line_error(code, out, err, "cannot write")
    assert not target.parent.exists()


def test_console_script_exit_code(tmp_path):
    """The installed `botec` script itself (a real process) exits 2 with one line."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    script = shutil.which("botec") or str(Path(sys.executable).with_name("botec"))
    path = write(tmp_path, GOOD.replace("memory: 32 GB", "memory: 32 GX"))
    completed = subprocess.run([script, "estimate", str(path)], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 2
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr


def test_overflowing_inputs_never_reach_a_result(cli):
    """1e300 parameters × 1e300 tokens would overflow: each stated number is bounded (within 1e-30…1e30 in base
    units, issue 15), so the first is refused by name before any formula runs, never an infinity."""
    code, out, err = cli("estimate", "--set", "workload.model.parameters=1e300", "--set", "workload.tokens=1e300")
    assert_one_line_error(code, out, err, "--set workload.model.parameters=1e300: value must be 0 or between 1e-30 "
                                          "and 1e30 in base units, got '1e300'")


# --- parallel layouts and model shapes (issue 3) ------------------------------------------------------

LLAMA_LAYOUT = """
workload: {model: llama-2-7b, tokens: 1B, sequence_length: 4096}
supply: {accelerator: h100-sxm, count: 64, cluster: {node: dgx-h100}}
strategy: {micro_batch_size: 1}
"""


def layout_error(cli, tmp_path, *overrides, options=()):
    path = write(tmp_path, LLAMA_LAYOUT)
    args = ["estimate", str(path), *options]
    for override in overrides:
        args += ["--set", override]
    return cli(*args)


def test_tp_that_does_not_divide_the_heads(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.tensor_parallel=3", "supply.count=48")
    assert_one_line_error(code, out, err, "strategy.tensor_parallel: tensor_parallel 3 does not divide the 32 "
                                          "attention heads")


def test_more_stages_than_layers(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.pipeline_parallel=64", "workload.model=llama-2-13b")
    assert_one_line_error(code, out, err, "strategy.pipeline_parallel: 64 stages for 40 layers: every stage needs "
                                          "a layer")


def test_stage_list_that_does_not_hold_the_layers(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.pipeline_parallel=4",
                                  "strategy.pipeline_stage_layers=[8, 8, 8, 9]")
    assert_one_line_error(code, out, err, "strategy.pipeline_stage_layers: the stages hold 33 layers, but "
                                          "Llama 2 7B has 32")


def test_stage_list_of_another_length(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.pipeline_parallel=2",
                                  "strategy.pipeline_stage_layers=[8, 8, 8, 8]")
    assert_one_line_error(code, out, err, "strategy.pipeline_stage_layers: lists 4 stages, but pipeline_parallel is 2")


def test_layout_that_does_not_divide_the_accelerators(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.tensor_parallel=8", "strategy.pipeline_parallel=3")
    assert_one_line_error(code, out, err, "supply.count", "= 24 does not divide the 64 accelerators")


def test_ep_larger_than_the_experts(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "workload.model=mixtral-8x7b", "strategy.expert_parallel=16")
    assert_one_line_error(code, out, err, "strategy.expert_parallel: expert_parallel 16 must divide the 8 experts")


def test_ep_on_a_dense_model(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.expert_parallel=2")
    assert_one_line_error(code, out, err, "strategy.expert_parallel: expert parallelism needs a mixture-of-experts")


def test_global_batch_that_micro_batch_times_dp_does_not_divide(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "strategy.global_batch_size=100", "strategy.micro_batch_size=2")
    assert_one_line_error(code, out, err, "strategy.global_batch_size: micro-batch 2 × DP 64 = 128 sequences does "
                                          "not divide the global batch of 100")


def test_config_json_of_an_unsupported_family(cli, tmp_path):
    from pathlib import Path

    config = Path(__file__).parent / "data" / "hf" / "unsupported" / "config.json"
    code, out, err = layout_error(cli, tmp_path, f"workload.model={{config: {config}}}")
    assert_one_line_error(code, out, err, "workload.model.config", "'mamba' is not a supported family")


def test_config_json_with_missing_keys(cli, tmp_path):
    from pathlib import Path

    config = Path(__file__).parent / "data" / "hf" / "missing-keys" / "config.json"
    code, out, err = layout_error(cli, tmp_path, f"workload.model={{config: {config}}}")
    assert_one_line_error(code, out, err, "workload.model.config", "no 'num_hidden_layers'")


def test_config_json_relative_to_the_contract(cli, tmp_path):
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).parent / "data" / "hf" / "llama-2-7b" / "config.json", tmp_path / "config.json")
    code, out, err = layout_error(cli, tmp_path, "workload.model={config: config.json}", "strategy.zero_stage=3")
    assert code == 0, err
    assert "6.74B parameters" in out


def test_unknown_catalog_model(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "workload.model=llama-2-7")
    assert_one_line_error(code, out, err, "workload.model.catalog: unknown model 'llama-2-7'; did you mean")


def test_model_named_two_ways(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "workload.model={catalog: llama-2-7b, attention_heads: 8}")
    # the field was written by --set, so the error names the --set (issue 14), not the contract file
    assert_one_line_error(code, out, err, "--set workload.model={catalog: llama-2-7b, attention_heads: 8}: "
                                          "name the model one way, not by catalog and architecture")


def test_korthikanti_needs_an_architecture(cli):
    code, out, err = cli("estimate", "--set", "assumptions.activation_model=korthikanti", "--set",
                         "assumptions.attention_kernel=eager")
    assert_one_line_error(code, out, err, "assumptions.attention_kernel", "need the attention heads")


def test_components_model_refuses_a_scaling_factor(cli):
    code, out, err = cli("estimate", "--set", "assumptions.step_time_model=components")
    assert_one_line_error(code, out, err, "assumptions.scaling_efficiency", "count the distribution losses twice")


def test_unknown_node_preset(cli, tmp_path):
    code, out, err = layout_error(cli, tmp_path, "supply.cluster.node=dgx-h10")
    assert_one_line_error(code, out, err, "--set supply.cluster.node=dgx-h10: unknown node preset 'dgx-h10'; "
                                          "did you mean 'dgx-h100'?")


def test_several_nodes_need_an_inter_node_bandwidth(cli, tmp_path):
    """The component step model needs the data-parallel all-reduce's time, which crosses nodes."""
    code, out, err = layout_error(cli, tmp_path, "supply.cluster={accelerators_per_node: 8, intra_node: "
                                                 "{bandwidth: 450 GB/s}}", "assumptions.step_time_model=components")
    assert_one_line_error(code, out, err, "supply.cluster.inter_node.bandwidth: needed for step_seconds: the "
                                          "data-parallel gradient all-reduces span 64 accelerators across nodes of 8")


def test_an_unstated_tier_is_named_where_the_lesson_method_only_compares(cli, tmp_path):
    """The efficiency model's step needs no link: the estimate runs, and the network finding names the field."""
    code, out, err = layout_error(cli, tmp_path, "supply.cluster={accelerators_per_node: 8, intra_node: "
                                                 "{bandwidth: 450 GB/s}}", "strategy.zero_stage=1",
                                  "assumptions.step_time_model=efficiency", options=("-f", "json"))
    import json

    assert code == 0, err
    result = json.loads(out)
    names = {q["name"] for q in result["quantities"]}
    # ZeRO-1 over all 64 ranks: the shard group's reduce-scatter and gather cross the 8 nodes, whose link is unstated;
    # the data-parallel all-reduce across replicas has one rank (the shard group is all of DP), so its tier is known
    assert "collective_floor_seconds" not in names and "shard_link_bytes_per_s" not in names
    assert "tp_link_bytes_per_s" in names and "dp_link_bytes_per_s" in names   # TP 1, DP replicas 1: no link needed
    network = [f["message"] for f in result["findings"] if f["account"] == "network"]
    assert any("state supply.cluster.inter_node.bandwidth to compare it with the step" in m for m in network)


def test_an_inline_device_without_links_on_eight_accelerators(cli, tmp_path):
    """The review's bug 1: no link, 8 accelerators, components: a one-line error, not a KeyError."""
    path = write(tmp_path, GOOD.replace("  count: 4 ", "  count: 8 ").replace(
        "  network:\n    bandwidth: {value: 25 GB/s, source: \"lesson 000: usable interconnect per direction during the "
        "collective\"}\n", ""))
    code, out, err = cli("estimate", str(path), "--set", "assumptions.step_time_model=components",
                         "--set", "assumptions.scaling_efficiency=null")
    assert_one_line_error(code, out, err, "supply.cluster.intra_node.bandwidth: needed for step_seconds: the "
                                          "data-parallel gradient all-reduces run over 8 accelerators inside a node")


def test_one_accelerator_needs_no_link(cli, tmp_path):
    """A single accelerator has no collectives: no bandwidth is needed, none is invented."""
    path = write(tmp_path, GOOD.replace("  count: 4 ", "  count: 1 ").replace(
        "  network:\n    bandwidth: {value: 25 GB/s, source: \"lesson 000: usable interconnect per direction during the "
        "collective\"}\n", ""))
    code, out, err = cli("estimate", str(path), "--set", "assumptions.step_time_model=components",
                         "--set", "assumptions.scaling_efficiency=null", "-f", "json")
    import json

    assert code == 0, err
    q = {item["name"]: item for item in json.loads(out)["quantities"]}
    assert q["communication_seconds"]["value"] == 0 and q["collective_floor_seconds"]["value"] == 0
    assert q["gradient_all_reduce_seconds"]["condition"] == "gradient_all_reduce_ranks = 1"
    assert not any(name.endswith("_link_bytes_per_s") for name in q)


def test_a_key_stated_twice_is_refused(cli, tmp_path):
    """YAML would keep the last of two equal keys silently; a contract names the line instead."""
    doubled = GOOD.replace("  headroom: {value: 0.25, source: \"lesson 000\"}\n",
                           "  headroom: {value: 0.25, source: \"lesson 000\"}\n  headroom: 0.5\n")
    assert doubled != GOOD
    code, out, err = cli("estimate", str(write(tmp_path, doubled)))
    assert_one_line_error(code, out, err, "malformed YAML at line", "'headroom' is stated twice in one mapping")
    code, out, err = cli("estimate", str(write(tmp_path, '{"workload": {"tokens": 1, "tokens": 2}}', "job.json")))
    assert_one_line_error(code, out, err, "malformed JSON: 'tokens' is stated twice in one object")


def test_sizes_past_floating_point_are_refused_not_crashed(cli):
    """9e293 accelerators would overflow the job's FLOP rate: a count is below 10^18 (issue 15), refused by name."""
    code, out, err = cli("estimate", "--set", "supply.count=8.98846567431158e+293")
    assert_one_line_error(code, out, err, "--set supply.count=8.98846567431158e+293: value must be a whole number "
                                          "below 10^18")
