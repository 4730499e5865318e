"""The measured collective tables (catalog/measurements/operators/allreduce-*, from AIConfigurator 0.12.0,
Apache-2.0) and the serving step's all-reduces priced from them (botec.formulas.collective_tables). The figures are
the tables' own points (AIConfigurator's custom_allreduce_perf.parquet and nccl_perf.parquet on H100 SXM, read
with pandas: message_size in elements, latency in ms) and values derived by hand from them."""

from __future__ import annotations

import math

import pytest

from botec.formulas import collective_tables as ct


@pytest.fixture(scope="module")
def trtllm():
    return ct.collective_table("allreduce", "tensorrt-llm", "h100-sxm")


def test_grid_points_are_the_measurements(trtllm):
    """TensorRT-LLM 1.3.0rc20 on H100: 16,777,216 bf16 elements (32 MiB) at 4 ranks 0.174884 ms, 8,192 elements
    (16 KiB) at 2 ranks 0.002849 ms; NCCL 2.27.3 all_reduce, 8 ranks, 1,048,576 elements (2 MiB): 0.03855 and
    0.03869 ms in its two collections, their median 0.03862 ms; vLLM 0.24.0's CUDA-graph kernel, 2 ranks, 128
    elements (256 B): 0.0042915 ms."""
    assert ct.collective_seconds(trtllm, 4, 16_777_216 * 2) == pytest.approx(174.88e-6, abs=0.006e-6)
    assert ct.collective_seconds(trtllm, 2, 8192 * 2) == pytest.approx(2.85e-6, abs=0.006e-6)
    nccl = ct.collective_table("allreduce", "nccl", "h100-sxm")
    assert ct.collective_seconds(nccl, 8, 1_048_576 * 2) == pytest.approx(38.62e-6, abs=0.006e-6)
    vllm = ct.collective_table("allreduce", "vllm", "h100-sxm")
    assert ct.collective_seconds(vllm, 2, 256) == pytest.approx(4.29e-6, abs=0.006e-6)
    assert trtllm.ranks == (2, 4, 8) and trtllm.message_bytes[0] == 256 and trtllm.message_bytes[-1] == 2 ** 30
    assert ct.collective_table("allgather", "nccl", "h100-sxm").op == "all_gather"


def test_lookup_between_and_beyond_the_points(trtllm):
    """Log-log between neighbours: at the geometric mean of 16 MiB and 32 MiB (8,388,608 and 16,777,216 elements:
    78.53 and 142.65 µs, 2 ranks) the geometric mean of the two; above 1 GiB proportional to size; below 256 B the
    smallest size's."""
    middle = math.sqrt(16 * 2 ** 20 * 32 * 2 ** 20)
    assert ct.collective_seconds(trtllm, 2, middle) == pytest.approx(math.sqrt(78.53e-6 * 142.65e-6), rel=1e-9)
    assert ct.collective_seconds(trtllm, 2, 2 ** 31) == pytest.approx(2 * 3243.16e-6, rel=1e-9)
    assert ct.collective_seconds(trtllm, 2, 16) == pytest.approx(2.66e-6, rel=1e-9)
    with pytest.raises(ValueError):
        ct.collective_seconds(trtllm, 3, 1024)


def test_engine_table_else_nccl():
    """Each engine's own kernel where measured; an engine without one (none here) would take NCCL's; no table on an
    accelerator AIConfigurator did not measure."""
    assert ct.allreduce_table("h100-sxm", "sglang").name == "allreduce-sglang-h100-sxm"
    assert ct.allreduce_table("h200", "unknown-engine").name == "allreduce-nccl-h200"
    assert ct.allreduce_table("mi300x", "vllm") is None


def test_the_fit_follows_the_table_within_its_stated_error(trtllm):
    """Llama 70B (h = 8,192, BF16) at TP 4 under TensorRT-LLM, T = 1 … 8,192: the knee is within 25 % of every
    fitted table point, where the straight α + β·S (q = 1) misses T = 128 by 40 %; and its reported worst error is
    the largest of those points' own."""
    knee = ct.allreduce_knee(trtllm.name, 4, 8192.0, 2.0, 8192.0)
    assert knee.tokens == tuple(2.0 ** i for i in range(14))
    errors = [knee.seconds(t * 8192 * 2) / ct.collective_seconds(trtllm, 4, t * 8192 * 2) - 1 for t in knee.tokens]
    assert max(abs(e) for e in errors) == pytest.approx(knee.worst_error, rel=1e-12)
    assert knee.worst_error < 0.25
    assert 0.25 <= knee.exponent < 1.0          # the curve lies above α + β·S near the crossover
    # the table's own points at T = 2,048 (32 MiB, 174.88 µs) and T = 1 (16 KiB, 3.44 µs), within the bound
    assert knee.seconds(2048 * 8192 * 2) == pytest.approx(174.88e-6, rel=0.25)
    assert knee.seconds(8192 * 2) == pytest.approx(3.44e-6, rel=0.25)


def test_two_ranks_fit_closely():
    """vLLM's kernel at TP 2 on H100, h = 8,192: within 21 % everywhere over T = 1 … 8,192, q near 1."""
    knee = ct.allreduce_knee("allreduce-vllm-h100-sxm", 2, 8192.0, 2.0, 8192.0)
    assert knee.worst_error < 0.22 and 0.9 < knee.exponent < 1.3


def test_a_contract_prices_its_all_reduces_from_the_table():
    """Llama 3.1 70B, TP 4, TensorRT-LLM on a DGX H100: the step's all-reduce sides come from the knee, 2 × 80
    all-reduces: A = 160·α, R = 160 · 2·3/4 · 8,192 · 2 B / B_ar, q the fit's; and the reason says the fit's error."""
    from botec.api import estimate

    contract = {"workload": {"kind": "serving", "model": "llama-3.1-70b",
                             "traffic": {"requests_per_second": 1, "prompt_tokens": 2048, "output_tokens": 2}},
                "supply": {"accelerator": "h100-sxm", "cluster": {"node": "dgx-h100"}},
                "strategy": {"engine": "tensorrt-llm", "tensor_parallel": 4, "weight_precision": "fp8",
                             "kv_cache_precision": "fp8"}}
    q = estimate(contract).quantities
    knee = ct.allreduce_knee("allreduce-tensorrt-llm-h100-sxm", 4, 8192.0, 2.0, 8192.0)
    assert float(q["allreduce_seconds_per_step"].value) == pytest.approx(160 * knee.latency_seconds, rel=1e-12)
    assert float(q["allreduce_seconds_per_token"].value) == pytest.approx(160 * knee.seconds_per_byte * 8192 * 2,
                                                                          rel=1e-12)
    assert float(q["allreduce_knee_exponent"].value) == pytest.approx(knee.exponent, rel=1e-12)
    assert float(q["communication_seconds_per_token"].value) == 0
    reason = q["allreduce_table_index"].source
    assert "allreduce-tensorrt-llm-h100-sxm" in reason and f"within {knee.worst_error:.0%}" in reason
    # a step of T = 2,048 pays 160 all-reduces within the fit's error of the table's 174.88 µs each
    from botec.serving.step import allreduce_term

    step = allreduce_term(float(q["allreduce_seconds_per_token"].value) * 2048,
                          float(q["allreduce_seconds_per_step"].value), float(q["allreduce_knee_exponent"].value))
    assert step == pytest.approx(160 * knee.seconds(2048 * 8192 * 2), rel=1e-12)
    assert step == pytest.approx(160 * 174.88e-6, rel=knee.worst_error)


def test_fallback_says_why():
    """TP 16 across two DGX H100 nodes: no table of 16 ranks inside a node: the engine's α and the link, their sum
    (knee exponent 0); a stated latency sets the table aside."""
    from botec.api import estimate

    def contract(accelerator, tp, node=None, **assumptions):
        supply = {"accelerator": accelerator} | ({"cluster": {"node": node}} if node else {})
        return {"workload": {"kind": "serving", "model": "llama-3.1-70b",
                             "traffic": {"requests_per_second": 1, "prompt_tokens": 512, "output_tokens": 64}},
                "supply": supply, "strategy": {"engine": "vllm", "tensor_parallel": tp}, "assumptions": assumptions}

    q = estimate(contract("h100-sxm", 16, "dgx-h100")).quantities
    assert float(q["allreduce_knee_exponent"].value) == 0
    assert float(q["tp_allreduce_latency_seconds"].value) == float(q["allreduce_latency_seconds"].value)
    assert float(q["tp_allreduce_bus_bytes_per_s"].value) == float(q["tp_link_bytes_per_s"].value)
    assert "spans nodes" in q["allreduce_table_index"].source
    q = estimate(contract("h100-sxm", 2, "dgx-h100", allreduce_latency="7 us")).quantities
    assert float(q["allreduce_table_index"].value) == -1
    assert float(q["allreduce_seconds_per_step"].value) == pytest.approx(2 * 80 * 7e-6)


def test_data_parallel_attention_runs_no_all_reduce_around_attention():
    """DeepSeek-V3 (61 layers, 58 MoE) on 8 × H200 with data-parallel attention (t_a = 1): the latency of 2
    collectives per dense layer (3 × 2 = 6), not 2 × 61 = 122 all-reduces; no bandwidth side (its gathers are in
    communication_seconds_per_token)."""
    from botec.api import estimate

    contract = {"workload": {"kind": "serving", "model": "deepseek-v3",
                             "traffic": {"requests_per_second": 1, "prompt_tokens": 1000, "output_tokens": 2}},
                "supply": {"accelerator": "h200", "cluster": {"node": "dgx-h200"}},
                "strategy": {"engine": "sglang", "tensor_parallel": 8, "expert_parallel": 8,
                             "data_parallel_attention": True, "weight_precision": "fp8",
                             "kv_cache_precision": "bf16"}}
    q = estimate(contract).quantities
    alpha = float(q["tp_allreduce_latency_seconds"].value)
    assert float(q["allreduce_seconds_per_step"].value) == pytest.approx(6 * alpha, rel=1e-12)
    assert float(q["allreduce_seconds_per_token"].value) == 0
