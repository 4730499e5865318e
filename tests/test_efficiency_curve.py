"""`botec measure --efficiency-curve`: the GEMMs a model's layers run, the curve file and its loader, a tiny real
run on this CPU and the CLI mode end to end."""

from __future__ import annotations

import math

import pytest
import yaml

from botec.architecture import model_catalog
from botec.errors import ContractError, UserError
from botec.catalog import curves
from botec.measure import gemm_curve
from botec.measure.gemm_shapes import GemmShape, layer_gemms, model_gemms, tensor_parallel_degrees

from conftest import tiny_cpu_contract

# the measuring tests' tiny CPU contract, two sequences per micro-batch (T = 256 tokens a GEMM)
TINY = tiny_cpu_contract().replace("micro_batch_size: 4", "micro_batch_size: 2")


def shapes_of(arch, tokens, tp):
    return {s.op: (s.m, s.k, s.n) for s in layer_gemms(arch, tokens, tp)}


# ---------------------------------------------------------------------------------------------
# The GEMM shape ladder
# ---------------------------------------------------------------------------------------------


def test_llama2_7b_layer_gemms_by_hand():
    """Llama-2-7B: h 4,096, 32 heads of 128 (MHA: 32 KV heads), FFN 11,008 (SwiGLU), vocabulary 32,000."""
    arch = model_catalog()["llama-2-7b"]
    one = shapes_of(arch, 4096, 1)
    assert one["qkv"] == (4096, 4096, (32 + 2 * 32) * 128) == (4096, 4096, 12288)
    assert one["attention_output"] == (4096, 4096, 4096)
    assert one["mlp_up"] == (4096, 4096, 2 * 11008)          # gate and up, fused
    assert one["mlp_down"] == (4096, 11008, 4096)
    assert one["lm_head"] == (4096, 4096, 32000)
    # TP 2: column-parallel layers split N, row-parallel ones split K
    two = shapes_of(arch, 4096, 2)
    assert two["qkv"] == (4096, 4096, 6144)
    assert two["attention_output"] == (4096, 2048, 4096)
    assert two["mlp_up"] == (4096, 4096, 11008)
    assert two["mlp_down"] == (4096, 5504, 4096)
    assert two["lm_head"] == (4096, 4096, 16000)
    assert GemmShape("qkv", 4096, 4096, 12288).gflop == pytest.approx(2 * 4096 * 4096 * 12288 / 1e9)


def test_gqa_replicates_kv_heads_beyond_their_count_and_plain_mlp_is_not_doubled():
    llama3 = model_catalog()["llama-3.1-8b"]             # 32 heads, 8 KV heads of 128
    assert shapes_of(llama3, 1024, 1)["qkv"] == (1024, 4096, (32 + 16) * 128)
    assert shapes_of(llama3, 1024, 8)["qkv"] == (1024, 4096, (4 + 2) * 128)   # one KV head per rank
    gpt2 = model_catalog()["gpt2"]                        # plain 4h MLP
    assert shapes_of(gpt2, 1024, 1)["mlp_up"] == (1024, 768, 3072)


def test_moe_and_mla_layers():
    mixtral = shapes_of(model_catalog()["mixtral-8x7b"], 4096, 1)   # 8 experts, top 2
    assert mixtral["router"] == (4096, 4096, 8)
    assert mixtral["expert_up"] == (4096 * 2 // 8, 4096, 2 * 14336)
    assert "mlp_up" not in mixtral                                   # every layer is MoE
    deepseek = shapes_of(model_catalog()["deepseek-v3"], 4096, 1)
    assert {"q_down", "q_up", "kv_down", "kv_up", "mlp_up", "expert_up", "shared_expert_up"} <= set(deepseek)
    assert deepseek["kv_down"] == (4096, 7168, 512 + 64)


def test_model_ladder_covers_tp_degrees_and_micro_batches():
    arch = model_catalog()["llama-2-7b"]
    assert tensor_parallel_degrees(arch, 1) == [1, 2, 4, 8]
    assert tensor_parallel_degrees(arch, 16) == [1, 2, 4, 8, 16]
    assert tensor_parallel_degrees(arch, 3) == [1, 2, 4, 8]        # 3 does not divide 32 heads
    shapes = model_gemms(arch, micro_batch_size=2, sequence_length=4096, tensor_parallel=1)
    keys = [(s.m, s.k, s.n) for s in shapes]
    assert len(keys) == len(set(keys))
    assert [s.flops for s in shapes] == sorted(s.flops for s in shapes)
    assert {s.m for s in shapes} == {4096, 8192}
    assert (8192, 4096, 12288 // 8) in keys                       # T = 2 × 4,096 at TP 8
    assert {s.m for s in model_gemms(arch, 2, 4096, context_parallel=2)} == {2048, 4096}


def test_device_names_match_catalog_keys():
    match = gemm_curve.device_matches
    assert match("NVIDIA H200", "h200")
    assert match("NVIDIA H100 80GB HBM3", "h100-sxm")
    assert not match("NVIDIA H100 PCIe", "h100-sxm") and match("NVIDIA H100 PCIe", "h100-pcie")
    assert match("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb")
    assert not match("NVIDIA L40S", "l4") and match("NVIDIA L4", "l4")
    assert not match("NVIDIA H200", "h100-sxm")


# ---------------------------------------------------------------------------------------------
# The file
# ---------------------------------------------------------------------------------------------

GOOD = """\
schema: botec.efficiency-curve/1
device: {name: NVIDIA H200, accelerator: h200, backend: cuda, torch: 2.11.0+cu130}
precision: bf16
created: '2026-11-30T12:00:00+00:00'
peak_flops_per_s: 989.4e12
peak_source: catalog h200 bf16
memory_bytes_per_s: 4.8e12
memory_bandwidth_source: catalog h200
matmul:
- {gflop: 0.5, efficiency: 0.41, m: 2048, k: 4096, n: 32, seconds: 1.2e-05}
- {gflop: 412.3, efficiency: 0.78, m: 4096, k: 4096, n: 12288, seconds: 0.00053, op: qkv, shapes: 2}
memory:
- {megabytes: 8.0, efficiency: 0.55}
- {megabytes: 3000.0, efficiency: 0.9, seconds: 0.00069, op: add}
"""


def test_curve_file_loads_and_matches_only_its_accelerator(tmp_path):
    path = tmp_path / "curve.yaml"
    path.write_text(GOOD)
    curve = curves.read(path)
    assert curve.device_name == "NVIDIA H200" and curve.backend == "cuda" and curve.precision == "bf16"
    assert curve.peak_flops_per_s == 989.4e12 and curve.memory_bytes_per_s == 4.8e12
    assert curve.matmul_points == ((0.5, 0.41), (412.3, 0.78))
    assert curve.memory_points == ((8.0, 0.55), (3000.0, 0.9))
    assert curve.created.startswith("2026-11-30") and "NVIDIA H200" in curve.source and "curve.yaml" in curve.source
    assert curve.matches("h200") and not curve.matches("h100-sxm")
    path.write_text(GOOD.replace("accelerator: h200", "accelerator: null"))
    assert not curves.read(path).matches("h200")


def test_curve_file_round_trips(tmp_path):
    data = curves.CurveFile.model_validate(yaml.safe_load(GOOD))
    path = tmp_path / "again.yaml"
    curves.write(data, path)
    assert path.read_text().startswith("# botec efficiency curve")
    assert curves.CurveFile.model_validate(yaml.safe_load(path.read_text())) == data
    assert curves.read(path) == curves.read(path)
    assert curves.read(path).matmul_points == ((0.5, 0.41), (412.3, 0.78))


BAD = {
    "truncated": (GOOD[: GOOD.index("m: 4096") + 3], "truncated YAML"),
    "truncated at a line": (GOOD[: GOOD.index("memory:")], "memory: missing"),
    "missing field": (GOOD.replace("peak_flops_per_s: 989.4e12\n", ""), "peak_flops_per_s: missing"),
    "efficiency 0": (GOOD.replace("efficiency: 0.41", "efficiency: 0"), "matmul[0].efficiency: "),
    "negative": (GOOD.replace("efficiency: 0.55", "efficiency: -0.2"), "memory[0].efficiency: "),
    "above 1.5": (GOOD.replace("efficiency: 0.78", "efficiency: 1.6"), "matmul[1].efficiency: "),
    "nan": (GOOD.replace("efficiency: 0.78", "efficiency: .nan"), "matmul[1].efficiency: "),
    "wrong schema": (GOOD.replace("botec.efficiency-curve/1", "botec.measurement/1"), "schema: "),
    "no schema": (GOOD.replace("schema: botec.efficiency-curve/1\n", ""), "schema: "),
    "unsorted": (GOOD.replace("gflop: 412.3", "gflop: 0.25"), "matmul: points must be sorted"),
    "no points": (GOOD[: GOOD.index("memory:")] + "memory: []\n", "memory: no points"),
    "bad backend": (GOOD.replace("backend: cuda", "backend: tpu"), "device.backend: "),
    "empty": ("", "empty"),
    "a list": ("- 1\n- 2\n", "mapping"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_loader_refuses_bad_files_naming_the_field(tmp_path, case):
    text, named = BAD[case]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ContractError) as caught:
        curves.read(path)
    message = str(caught.value)
    assert named in message and str(path) in message
    assert "\n" not in message


def test_loader_refuses_a_missing_file(tmp_path):
    with pytest.raises(ContractError, match="no such efficiency-curve file"):
        curves.read(tmp_path / "nowhere.yaml")


# ---------------------------------------------------------------------------------------------
# A tiny real run on this CPU
# ---------------------------------------------------------------------------------------------

torch_required = pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None,
                                    reason="needs PyTorch (botec[measure])")
SMALL = [GemmShape("square", 32, 32, 32), GemmShape("square", 64, 64, 64), GemmShape("qkv", 128, 128, 384, 1, 128),
         GemmShape("square", 256, 256, 256)]


@torch_required
def test_tiny_cpu_run_writes_a_curve_relative_to_its_best_point(tmp_path):
    run = gemm_curve.measure(SMALL, [64 * 1024, 256 * 1024], "bf16", budget_seconds=2.0, device="cpu")
    path = tmp_path / "cpu.yaml"
    curves.write(run.curve, path)
    curve = curves.read(path)
    assert curve.backend == "cpu" and curve.accelerator is None and curve.precision == "bf16"
    assert curve.peak_source == "best measured rate" and curve.memory_bandwidth_source == "best measured rate"
    for points in (curve.matmul_points, curve.memory_points):
        assert points and all(0 < efficiency <= 1 for _, efficiency in points)
        assert max(efficiency for _, efficiency in points) == 1.0
        assert [size for size, _ in points] == sorted(size for size, _ in points)
    assert math.isfinite(curve.peak_flops_per_s) and curve.peak_flops_per_s > 0
    assert math.isfinite(curve.memory_bytes_per_s) and curve.memory_bytes_per_s > 0
    for timing in run.matmul + run.memory:
        assert math.isfinite(timing.seconds) and timing.seconds > 0
    assert {(p.m, p.k, p.n) for p in run.curve.matmul} <= {(s.m, s.k, s.n) for s in SMALL}


@torch_required
def test_a_stated_peak_is_the_denominator_and_one_too_low_is_refused():
    run = gemm_curve.measure(SMALL[:2], [64 * 1024], "bf16", budget_seconds=1.0, peak_flops_per_s=1e15,
                             memory_bytes_per_s=1e13, device="cpu")
    assert run.curve.peak_source == "--peak-flops" and run.curve.peak_flops_per_s == 1e15
    assert run.curve.memory_bandwidth_source == "--memory-bandwidth"
    assert all(0 < p.efficiency < 1 for p in run.curve.matmul + run.curve.memory)
    with pytest.raises(UserError, match="--peak-flops"):
        gemm_curve.measure(SMALL[:1], [64 * 1024], "bf16", budget_seconds=1.0, peak_flops_per_s=1.0, device="cpu")
    with pytest.raises(UserError, match="bf16 or fp16"):
        gemm_curve.measure(SMALL[:1], [64 * 1024], "fp8", budget_seconds=1.0, device="cpu")


# ---------------------------------------------------------------------------------------------
# The CLI mode
# ---------------------------------------------------------------------------------------------


@torch_required
def test_cli_efficiency_curve_mode_end_to_end(tmp_path, cli):
    contract = tmp_path / "tiny.yaml"
    contract.write_text(TINY)
    output = tmp_path / "curve.yaml"
    code, out, err = cli("measure", str(contract), "--efficiency-curve", "--budget-seconds", "2", "-o", str(output))
    assert code == 0, err
    assert "GFLOP" in out and "efficiency" in out and "MB moved" in out
    assert f"wrote {output}" in err
    curve = curves.read(output)
    assert curve.backend == "cpu" and curve.precision == "bf16" and curve.accelerator is None
    assert all(0 < e <= 1 for _, e in curve.matmul_points + curve.memory_points)
    # the contract's own GEMMs were timed (T = 128 or 256 tokens, h = 128), not only the squares
    points = yaml.safe_load(output.read_text())["matmul"]
    assert any(p["m"] in (128, 256) and p["k"] in (128, 344) and not p["m"] == p["k"] == p["n"] for p in points)


@torch_required
def test_cli_efficiency_curve_with_stated_peaks(tmp_path, cli):
    contract = tmp_path / "tiny.yaml"
    contract.write_text(TINY)
    output = tmp_path / "curve.yaml"
    code, out, err = cli("measure", str(contract), "--efficiency-curve", "--budget-seconds", "1", "--peak-flops",
                         "100 TFLOP/s", "--memory-bandwidth", "10 TB/s", "-o", str(output))
    assert code == 0, err
    curve = curves.read(output)
    assert curve.peak_flops_per_s == 100e12 and curve.memory_bytes_per_s == 10e12
    assert "--peak-flops" in out and "best measured" not in out


@torch_required
def test_cli_efficiency_curve_refuses_mixed_modes(tmp_path, cli):
    contract = tmp_path / "tiny.yaml"
    contract.write_text(TINY)
    code, _, err = cli("measure", str(contract), "--efficiency-curve", "--fake")
    assert code == 2 and "--fake and --efficiency-curve" in err
    code, _, err = cli("measure", str(contract), "--memory-bandwidth", "1 TB/s", "--fake")
    assert code == 2 and "--memory-bandwidth goes with --efficiency-curve" in err
    code, _, err = cli("measure", str(contract), "--efficiency-curve", "--memory-bandwidth", "fast")
    assert code == 2 and "--memory-bandwidth" in err
