"""The measured operator tables (catalog/measurements/operators, from AIConfigurator, Apache-2.0) and the serving
step they price (botec.serving.operators). The figures are the tables' own published points (AIConfigurator's
gemm_perf.parquet, TensorRT-LLM 1.3.0rc20 on H100 SXM) and values derived by hand from them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from botec.serving import operators


@pytest.fixture(scope="module")
def fp8():
    return operators.gemm_table("h100-sxm", "fp8")


@pytest.fixture(scope="module")
def bf16():
    return operators.gemm_table("h100-sxm", "bf16")


def test_a_grid_point_is_its_own_measurement(fp8, bf16):
    """AIConfigurator's H100 table: 4096 × 4096 at m = 1 is 18.49 µs in FP8 and 16.56 µs in BF16 (the issue's
    18.5 against 16.6); FP8 at m = 4,096 is 150.74 µs."""
    assert operators.gemm_seconds(fp8, 1, 4096, 4096) == pytest.approx(18.49e-6, rel=1e-9)
    assert operators.gemm_seconds(bf16, 1, 4096, 4096) == pytest.approx(16.56e-6, rel=1e-9)
    assert operators.gemm_seconds(fp8, 4096, 4096, 4096) == pytest.approx(150.74e-6, rel=1e-9)
    assert operators.gemm_reach(fp8, 1, 4096, 4096) == "measured"


def test_fp8_small_m_is_no_faster_than_bf16(fp8, bf16):
    """The published table fact the step now follows: an FP8 GEMM at m = 1, 4096 × 4096, is not faster than
    BF16's (≥ 0.9 × BF16's figure), where a bandwidth roofline would halve it."""
    assert operators.gemm_seconds(fp8, 1, 4096, 4096) >= 0.9 * operators.gemm_seconds(bf16, 1, 4096, 4096)


def test_interpolation_lies_between_neighbours_and_is_monotone(fp8):
    """Between m = 2,048 and 4,096 (78.43, 150.74 µs at 4096 × 4096) the lookup rises monotonically and stays
    between them; at the geometric midpoint it is their geometric mean (log-log linear)."""
    m = np.geomspace(2048, 4096, 9)
    seconds = operators.gemm_seconds(fp8, m, 4096, 4096)
    assert np.all(np.diff(seconds) > 0)
    assert seconds[0] == pytest.approx(78.43e-6) and seconds[-1] == pytest.approx(150.74e-6)
    assert seconds[4] == pytest.approx(math.sqrt(78.43e-6 * 150.74e-6), rel=1e-9)
    assert operators.gemm_reach(fp8, 3000, 4096, 4096) == "interpolated"


def test_outside_the_grid(fp8):
    """m above 8,192 scales with m from the last point (compute-bound); n beyond 51,200 (an LM head of 128,256)
    goes to the caller's roofline, and without one the lookup refuses."""
    assert operators.gemm_seconds(fp8, 16384, 4096, 4096) == pytest.approx(
        2 * operators.gemm_seconds(fp8, 8192, 4096, 4096))
    assert operators.gemm_reach(fp8, 16384, 4096, 4096) == "extrapolated"
    assert operators.gemm_reach(fp8, 1, 128256, 4096) == "roofline"
    roofline = lambda m, n, k: n * k * 1.0 / 3.35e12   # FP8 bytes at the full bandwidth
    assert operators.gemm_seconds(fp8, 1, 128256, 4096, roofline) == pytest.approx(128256 * 4096 / 3.35e12)
    with pytest.raises(ValueError):
        operators.gemm_seconds(fp8, 1, 128256, 4096)


def test_every_table_names_its_source():
    for name in operators.table_names():
        table = operators.load_table(name)
        assert table.source["license"] == "Apache-2.0" and table.source["engine"].startswith("TRTLLM")
        assert table.source["repository"] == "ai-dynamo/aiconfigurator"


def test_the_8b_decode_step_at_batch_1_from_the_table(fp8):
    """Llama-3.1-8B FP8 on one H100 at batch 1: the layer's four GEMMs at m = 1 from the table — QKV 6144 × 4096
    21.82 µs and O 4096 × 4096 18.49 µs (grid points); gate/up 28672 × 4096 between n = 16,384 (36.93 µs) and
    51,200 (87.64 µs) at k = 4,096; down 4096 × 14336 between k = 12,288 (32.43 µs) and 16,384 (38.17 µs) —
    log-log interpolated by hand, times 32 layers, is the estimate's weight-read floor less the LM head's (and the
    norms') roofline read; the input embedding table (128,256 × 4,096 at 1 B, untied) is gathered, not read."""
    from botec.contract import parse_contract
    from botec.estimation import estimate

    def between(x, x0, x1, y0, y1):
        return math.exp(math.log(y0) + (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
                        * (math.log(y1) - math.log(y0)))

    gate_up = between(28672, 16384, 51200, 36.93, 87.64)
    down = between(14336, 12288, 16384, 32.43, 38.17)
    layer = (21.82 + 18.49 + gate_up + down) * 1e-6
    contract = {"name": "nim-8b", "workload": {"kind": "serving", "model": "llama-3.1-8b",
                                               "traffic": {"concurrency": 1, "prompt_tokens": 200,
                                                           "output_tokens": 200}},
                "supply": {"accelerator": "h100-sxm"}, "strategy": {"engine": "tensorrt-llm", "weight_precision": "fp8"},
                "assumptions": {"utilization_cap": 1}}
    q = estimate(parse_contract(contract, origin="test"), compare=False).quantities
    assert q["table_gemm_floor_seconds_per_layer"].value == pytest.approx(layer, rel=1e-3)
    embedding_bytes = 128256 * 4096 * 1.0
    rest = (q["weight_memory_bytes"].value - 32 * q["table_gemm_weight_bytes_per_layer"].value - embedding_bytes) / (
        q["memory_bandwidth_efficiency"].value * q["memory_bandwidth_bytes_per_s"].value)
    assert q["weight_read_seconds"].value == pytest.approx(32 * layer + rest, rel=1e-3)
    assert q["table_gemm_weight_bytes_per_layer"].value == (6144 + 4096 + 28672 + 14336) * 4096
