"""Every shipped example runs, fits, and says what its comments promise."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES

ALL = sorted(p.name for p in EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("name", ALL)
def test_example_runs_in_every_format(cli, name):
    for fmt in ("text", "markdown", "json"):
        code, out, err = cli("estimate", str(EXAMPLES / name), "-f", fmt)
        assert code == 0, (name, fmt, err)
    assert json.loads(out)["fits"] is True


def quantities(cli, name, *overrides):
    args = ["estimate", str(EXAMPLES / name), "-f", "json"]
    for override in overrides:
        args += ["--set", override]
    code, out, err = cli(*args)
    assert code == 0, err
    return {q["name"]: q["value"] for q in json.loads(out)["quantities"]}


def test_llama31_70b_layout(cli):
    q = quantities(cli, "llama3.1-70b-pretrain.yaml")
    assert q["data_parallel_degree"] == 32 and q["gradient_accumulation_steps"] == 64     # 2,048 / (1 × 32)
    assert q["parameters"] == 70_553_706_496
    # selective recompute + SP, fused attention: s·b·(10h + 2·(attention 18,432 + gated MLP 3 × 28,672))/t per layer
    # (GQA: 64 query and 8 KV heads of 128), × 80 layers' worth on the first stage (4 micro-batches of 20 layers)
    per_layer = 8192 * (10 * 8192 + 2 * (8192 + 2 * 1024 + 8192 + 3 * 28672)) / 8
    assert q["activation_bytes"] == pytest.approx(80 * per_layer)
    assert q["pipeline_bubble_seconds"] == pytest.approx(
        3 * (q["microbatch_compute_seconds"] + q["exposed_model_parallel_seconds"] / 64))
    # NVLink 4 achieved inside a node; the DP group has one rank per node (TP fills it): one NIC, achieved
    assert q["tp_link_bytes_per_s"] == pytest.approx(370e9) and q["dp_link_bytes_per_s"] == pytest.approx(46e9)
    # Megatron's optimizer: 2 B weights + 4 B FP32 gradients + 12 B sharded 32 ways, on the first stage's parameters
    assert q["state_bytes_per_parameter"] == pytest.approx(2 + 4 + 12 / 32)


def test_mixtral_expert_parallel(cli):
    q = quantities(cli, "mixtral-8x7b-finetune.yaml")
    assert q["expert_parallel"] == 8 and q["expert_data_parallel_degree"] == 4
    assert q["ep_link_bytes_per_s"] == pytest.approx(370e9)          # EP 8 stays inside the node (achieved)
    assert q["ep_bytes_sent_per_step"] > 0


def test_fsdp_example_reads_the_config_and_shards(cli):
    q = quantities(cli, "llama2-7b-fsdp-finetune.yaml")
    assert q["parameters"] == 6_738_415_616
    assert q["state_bytes"] == pytest.approx(6_738_415_616 * 16 / 8)
    # accumulation 64 / (4 × 8) = 2 micro-batches, each gathering the weights twice
    assert q["parameter_gather_bytes_sent_per_step"] == pytest.approx(2 * 2 * 7 / 8 * 6_738_415_616 * 2)


def test_fsdp_offload_example_on_a10g(cli):
    """Llama 2-7B, FSDP full shard + CPUOffload(offload_params=True) on a g5.48xlarge: the host holds 18 B per
    parameter (16-bit weights 2, FP32 master 4, moments 8, FP32 gradients 4) for the node's 8 GPUs; each GPU keeps
    only FSDP's gathered blocks: 2 blocks' weights and 1 block's gradients of 202,383,360 parameters."""
    q = quantities(cli, "llama2-7b-fsdp-offload-a10g.yaml")
    parameters, block = 6_738_415_616, 202_383_360
    assert q["offloaded_state_bytes"] == pytest.approx(q["state_bytes"]) == pytest.approx(16 * parameters / 8)
    assert q["host_bytes_per_node"] == pytest.approx(18 * parameters)
    assert q["fsdp_gather_buffer_bytes"] == pytest.approx(6 * block)
    assert q["host_memory_bytes"] == 768 * 2**30
    # 4 micro-batches of 2: 2 gathers each copy the 2 B/parameter shard up; the gradients go down after each
    assert q["host_link_bytes_per_step"] == pytest.approx((4 * 2 + 4) * 2 * parameters / 8)
    assert q["memory_spare_bytes"] > 0 and q["host_memory_spare_bytes"] > 0


# --- every shipped example through every command ---------------------------------------------------

_KEY = {"training": "run_seconds", "serving": "time_per_output_token_seconds"}


@pytest.mark.parametrize("name", ALL)
def test_every_command_runs_on_every_example(cli, tmp_path, name):
    """estimate (and --uncertainty), explain, report (Markdown, HTML), sweep, search, solve and sensitivity on each
    example, from another working directory than the contract's (a config.json path is relative to the contract)."""
    import os

    import yaml

    path = EXAMPLES / name
    kind = yaml.safe_load(path.read_text())["workload"].get("kind", "training")
    key = _KEY[kind]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = cli("estimate", str(path), "-f", "json")
        assert code == 0, err
        value = {q["name"]: q["value"] for q in json.loads(out)["quantities"]}[key]
        for args in (["estimate", str(path), "--uncertainty", "--samples", "200"],
                     ["explain", str(path), key],
                     ["report", str(path), "-o", str(tmp_path / "r.md")],
                     ["report", str(path), "-o", str(tmp_path / "r.html")],
                     ["search", str(path), "--top", "2"]):
            code, out, err = cli(*args)
            assert code == 0, (args, err)
        if kind == "training":
            for args in (["sweep", str(path), "--set", "strategy.micro_batch_size=1,2"],
                         ["solve", str(path), "--maximize", "strategy.micro_batch_size", "--subject-to", "fits",
                          "--over", "strategy.micro_batch_size=1..8"]):
                code, out, err = cli(*args)
                assert code == 0, (args, err)
        else:
            code, out, err = cli("solve", str(path), "--find", "assumptions.memory_bandwidth_efficiency", "--given",
                                 f"{key}={value * 1.1}")
            assert code == 0, err
        code, out, err = cli("sensitivity", str(path), "--quantity", key)
        assert code == 0 or "no assumption of this contract states a range" in err, err
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("name", ALL)
def test_every_example_through_the_web_api(name):
    fastapi = pytest.importorskip("fastapi")  # noqa: F841
    from fastapi.testclient import TestClient

    from botec.web.app import app

    text = (EXAMPLES / name).read_text()
    response = TestClient(app, base_url="http://127.0.0.1").post("/api/estimate", json={"contract": text})
    if "config:" in text:   # the web app reads no files on a request's behalf
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "workload.model.config"
    else:
        assert response.status_code == 200, response.text
        assert response.json()["fits"] is True
