"""`botec export` and `botec import` (issue 22): files written whole, formats told from content, what is missing
listed, one-line errors with exit code 2, and the README's flow."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from conftest import EXAMPLES, run_cli

H100 = EXAMPLES / "llama3.1-8b-finetune-h100.yaml"
HF_CONFIG = EXAMPLES.parent / "tests" / "data" / "hf" / "llama-2-7b" / "config.json"


def _json_value(cli, contract, name: str) -> float:
    code, out, err = cli("estimate", str(contract), "-f", "json")
    assert code == 0, err
    return next(q["value"] for q in json.loads(out)["quantities"] if q["name"] == name)


@pytest.mark.parametrize("command", ["export", "import"])
def test_dash_h_is_help(cli, command):
    code, out, _ = cli(command, "-h")
    assert code == 0 and f" {command} [OPTIONS]" in out and "Example:" in out


def test_export_prints_the_file_naming_tool_and_version(cli):
    code, out, _ = cli("export", str(H100), "--to", "megatron", "--set", "strategy.micro_batch_size=1")
    assert code == 0
    assert out.startswith("#!/usr/bin/env bash\n# Megatron-LM core_v0.19.2")
    assert "  --micro-batch-size 1 \\\n" in out and "torchrun --nproc-per-node 8 --nnodes 1 pretrain_gpt.py" in out


def test_the_readme_flow_export_then_import_gives_the_same_estimate(cli, tmp_path):
    """README: export the plan as a torchtitan launch script, read it back on the same base: the same step."""
    script, job = tmp_path / "train.sh", tmp_path / "job.yaml"
    assert cli("export", str(H100), "--to", "torchtitan", "-o", str(script))[0] == 0
    code, _, err = cli("import", str(script), "--base", str(H100), "-o", str(job))
    assert code == 0 and f"wrote {job}" in err
    data = yaml.safe_load(job.read_text())
    assert data["strategy"]["micro_batch_size"] == 2 and data["workload"]["model"] == "llama-3.1-8b"
    assert _json_value(cli, job, "step_seconds") == pytest.approx(_json_value(cli, H100, "step_seconds"), rel=1e-12)


def test_export_all_writes_one_file_per_training_format(cli, tmp_path):
    folder = tmp_path / "launch"
    code, _, err = cli("export", str(EXAMPLES / "mixtral-8x7b-finetune.yaml"), "--to", "all", "-o", str(folder))
    assert code == 0, err
    assert sorted(os.listdir(folder)) == ["accelerate.yaml", "deepspeed.json", "megatron.sh", "torchtitan.sh"]


def test_export_all_needs_a_folder(cli, tmp_path):
    code, _, err = cli("export", str(H100), "--to", "all")
    assert code == 2 and err.strip() == ("botec: error: --to all writes one file per format: name a folder with "
                                         "-o/--output")
    file = tmp_path / "x.txt"
    file.write_text("x")
    code, _, err = cli("export", str(H100), "--to", "all", "-o", str(file))
    assert code == 2 and "needs a folder" in err and file.read_text() == "x"


def test_an_unknown_format_is_one_line_naming_the_formats(cli):
    code, _, err = cli("export", str(H100), "--to", "megatorn")
    assert code == 2 and err.count("\n") == 1
    assert "unknown launch format 'megatorn'" in err and "torchtitan, megatron, deepspeed, accelerate" in err


def test_a_training_format_for_a_serving_contract_is_refused(cli):
    code, _, err = cli("export", str(EXAMPLES / "serve-lesson-7b.yaml"), "--to", "deepspeed")
    assert code == 2 and "--to deepspeed: a training format, and this is a serving contract" in err


def test_a_read_only_output_is_kept_without_force(cli, tmp_path):
    target = tmp_path / "ds.json"
    target.write_text("{}")
    target.chmod(0o444)
    if os.access(target, os.W_OK) and os.geteuid() != 0:
        pytest.skip("the file system ignores permission bits")
    code, _, err = cli("export", str(H100), "--to", "deepspeed", "-o", str(target))
    assert code == 2 and "read-only; pass --force" in err and target.read_text() == "{}"
    assert cli("export", str(H100), "--to", "deepspeed", "-o", str(target), "--force")[0] == 0
    assert json.loads(target.read_text())["train_batch_size"] == 16


def test_a_hand_written_megatron_script_imports_by_its_content(cli, tmp_path):
    script = tmp_path / "run_70b.sh"
    script.write_text(
        "#!/bin/bash\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n"
        "torchrun --nproc_per_node 8 --nnodes 16 --node_rank $RANK \\\n  /opt/Megatron-LM/pretrain_gpt.py \\\n"
        "  --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --sequence-parallel \\\n"
        "  --micro-batch-size 1 --global-batch-size 512 --seq-length 4096 \\\n"
        "  --train-iters 1000 --use-distributed-optimizer --bf16 \\\n"
        "  --recompute-granularity selective --lr 1.5e-4   # the learning rate is not botec's\n")
    code, out, _ = cli("import", str(script))
    assert code == 0
    data = yaml.safe_load(out)
    assert data["supply"]["count"] == 128
    strategy = data["strategy"]
    assert {k: strategy[k] for k in ("tensor_parallel", "pipeline_parallel", "micro_batch_size", "global_batch_size",
                                      "sequence_parallel", "zero_stage", "precision", "recompute")} == {
        "tensor_parallel": 8, "pipeline_parallel": 4, "micro_batch_size": 1, "global_batch_size": 512,
        "sequence_parallel": True, "zero_stage": 1, "precision": "bf16", "recompute": "selective"}
    assert data["workload"] == {"kind": "training", "tokens": 1000 * 512 * 4096, "sequence_length": 4096}
    assert "# note: options botec does not read: --lr" in out
    assert "# missing: workload.model" in out and "# missing: supply.accelerator" in out


def test_an_incomplete_import_names_the_missing_field_at_estimate(cli, tmp_path):
    job = tmp_path / "job.yaml"
    assert cli("export", str(H100), "--to", "deepspeed", "-o", str(tmp_path / "ds.json"))[0] == 0
    assert cli("import", str(tmp_path / "ds.json"), "-o", str(job))[0] == 0
    code, _, err = cli("estimate", str(job))
    assert code == 2 and err.count("\n") == 1 and "workload.model: required field is missing" in err


def test_a_bad_option_value_is_one_line_naming_the_option(cli, tmp_path):
    script = tmp_path / "bad.sh"
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --tensor-model-parallel-size two\n")
    code, _, err = cli("import", str(script), "-o", str(tmp_path / "out.yaml"))
    assert code == 2 and err.count("\n") == 1
    assert "--tensor-model-parallel-size: expected a whole number, got 'two'" in err
    assert not (tmp_path / "out.yaml").exists()


def test_a_file_of_no_known_format_asks_for_from(cli, tmp_path):
    odd = tmp_path / "notes.txt"
    odd.write_text("hello\n")
    code, _, err = cli("import", str(odd))
    assert code == 2 and "cannot tell which launch format this is" in err and "pass --from FORMAT" in err


def test_a_hugging_face_config_becomes_the_model_of_the_base(cli, tmp_path):
    job = tmp_path / "job.yaml"
    code, out, err = cli("import", str(HF_CONFIG), "--base", str(H100), "-o", str(job))
    assert code == 0, err
    model = yaml.safe_load(job.read_text())["workload"]["model"]
    assert list(model) == ["config"] and (tmp_path / model["config"]).resolve() == HF_CONFIG.resolve()
    assert _json_value(cli, job, "parameters") == pytest.approx(6_738_415_616)   # Llama 2 7B, exactly


def test_a_base_with_a_relative_model_config_still_finds_it(cli, tmp_path):
    job = tmp_path / "sub" / "job.yaml"
    job.parent.mkdir()
    base = EXAMPLES / "llama2-7b-fsdp-finetune.yaml"
    assert cli("export", str(base), "--to", "accelerate", "-o", str(tmp_path / "acc.yaml"))[0] == 0
    assert cli("import", str(tmp_path / "acc.yaml"), "--base", str(base), "-o", str(job))[0] == 0
    assert _json_value(cli, job, "parameters") == pytest.approx(6_738_415_616)


def test_best_exports_the_layout_the_search_ranks_first(capsys):
    """--best: GPT-3 175B on 1,024 A100s: the search's first layout (TP 4 + SP, PP 4 interleaved 8, ZeRO-1,
    micro-batch 1) is what the Megatron script says, and a note names it; serving: the cheapest accelerator."""
    from botec.estimation import estimate_file
    from botec.explore.search import search

    contract = EXAMPLES / "gpt3-175b-search.yaml"
    layout = search(estimate_file(contract).inputs, "step_seconds", 1).best[0]["layout"]
    code, out, err = run_cli(["export", str(contract), "--to", "megatron", "--best"], capsys)
    assert code == 0, err
    assert (layout["strategy.tensor_parallel"], layout["strategy.pipeline_parallel"],
            layout["strategy.virtual_pipeline_stages"]) == (4, 4, 8)
    for option in ("--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 4",
                   "--num-virtual-stages-per-pipeline-rank 8", "--micro-batch-size 1", "--sequence-parallel",
                   "--use-distributed-optimizer"):
        assert option in out
    assert "--best: the plan `botec search` ranks first: --set strategy.tensor_parallel=4" in err
