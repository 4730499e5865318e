"""The measured fused-MoE tables (catalog/measurements/operators/moe-*.yaml, from AIConfigurator 0.12.0's
moe_perf.parquet, TensorRT-LLM 1.3.0rc20, Apache-2.0) and the step terms fitted from them
(botec.serving.moe_operators, botec.serving.expert_gemms). The figures are the tables' own points (H100 SXM, FP8,
Mixtral 8x7B and DeepSeek-V3) and values derived by hand from them."""

from __future__ import annotations

import math

import pytest

from botec.serving import moe_operators as mo

MIXTRAL = (4096.0, 14336.0, 8.0, 2.0)
DEEPSEEK = (7168.0, 2048.0, 256.0, 8.0)
# AIConfigurator's H100 FP8 table, Mixtral 8x7B at moe_tp 1 × moe_ep 1, routing power law 1.2, at T = 1, 16, 32 (µs)
MIXTRAL_TP1 = {1: 140.61, 16: 483.69, 32: 505.77, 8192: 4152.08, 16384: 8269.77}


@pytest.fixture(scope="module")
def fp8():
    return mo.load_moe_table("moe-fp8-h100-sxm")


def test_a_grid_point_is_its_own_measurement_and_between_them_log_log(fp8):
    shape = fp8.shapes[MIXTRAL + ("power_law_1.2",)]
    assert mo.moe_seconds(fp8, shape, (1.0, 1.0), 1.0) == pytest.approx(140.61e-6, rel=1e-12)
    assert mo.moe_seconds(fp8, shape, (2.0, 1.0), 8192.0) == pytest.approx(2179.07e-6, rel=1e-12)
    weight = (math.log(24) - math.log(16)) / (math.log(32) - math.log(16))   # T = 24 between 16 and 32
    hand = math.exp((1 - weight) * math.log(483.69e-6) + weight * math.log(505.77e-6))
    assert mo.moe_seconds(fp8, shape, (1.0, 1.0), 24.0) == pytest.approx(hand, rel=1e-12)
    assert mo.moe_seconds(fp8, shape, (1.0, 1.0), 32768.0) == pytest.approx(2 * 8269.77e-6, rel=1e-12)


def test_layouts_map_to_the_table_by_experts_per_rank():
    table = mo.load_moe_table("moe-fp8-block-h100-sxm")
    # SGLang's 96-H100 decode: EP 72 over 288 physical experts = 4 per rank, the table's moe_ep 64 of 256, at
    # T·256/288 tokens, routing balanced (EPLB)
    shape, layout, scale = mo.table_layout(table, *DEEPSEEK, 32, 1, 72)
    assert layout == (1.0, 64.0) and scale == pytest.approx(256 / 288) and shape.distribution == "balanced"
    assert mo.table_layout(table, *DEEPSEEK, 32, 1, 24) is None          # 12 per rank: 256/12 is no layout
    shape, layout, scale = mo.table_layout(table, *DEEPSEEK, 0, 1, 8)  # no EPLB: AIConfigurator's DeepSeek skew
    assert layout == (1.0, 8.0) and scale == 1.0 and shape.distribution == "power_law_1.01"
    shape, layout, _ = mo.table_layout(mo.load_moe_table("moe-fp8-h100-sxm"), *MIXTRAL, 0, 2, 1)
    assert layout == (2.0, 1.0) and shape.distribution == "power_law_1.2"


def test_the_fit_passes_through_the_tables_floor_and_full_read(fp8):
    """F_e + x·q = L(1), F_e + x·(1 − (1 − q)^17) = L(17) (q = 2/8: 17 tokens touch 99 % of the experts; L(17)
    log-interpolated between 16 and 32), g_e = (L(16,384) − L(8,192)) / 8,192."""
    index = mo.table_index(fp8)
    fit = mo.expert_fit(index, *MIXTRAL, 0.0, 1.0, 1.0)
    q = 0.25
    assert math.ceil(math.log(0.01) / math.log(1 - q)) == 17
    weight = (math.log(17) - math.log(16)) / (math.log(32) - math.log(16))
    at_17 = math.exp((1 - weight) * math.log(MIXTRAL_TP1[16]) + weight * math.log(MIXTRAL_TP1[32])) * 1e-6
    share_17 = 1 - (1 - q) ** 17
    read = (at_17 - MIXTRAL_TP1[1] * 1e-6) / (share_17 - q)
    assert fit.read_seconds == pytest.approx(read, rel=1e-9)
    assert fit.floor_seconds == pytest.approx(MIXTRAL_TP1[1] * 1e-6 - read * q, rel=1e-9)
    assert fit.seconds_per_token == pytest.approx((MIXTRAL_TP1[16384] - MIXTRAL_TP1[8192]) * 1e-6 / 8192, rel=1e-9)
    # the read is all 8 experts' FP8 weights (3 × 4096 × 14336 bytes each, 1.41 GB) at 84-96 % of 3.35 TB/s
    assert 8 * 3 * 4096 * 14336 / 3.35e12 / fit.read_seconds == pytest.approx(0.90, abs=0.06)


def test_the_step_prices_mixtral_experts_from_the_table_under_tensorrt_llm_only(fp8):
    from botec.contract import parse_contract
    from botec.estimation import estimate

    contract = {"name": "mixtral", "workload": {"kind": "serving", "model": "mixtral-8x7b",
                                                "traffic": {"requests_per_second": 1, "prompt_tokens": 128,
                                                            "output_tokens": 128}},
                "supply": {"accelerator": "h100-sxm"},
                "strategy": {"engine": "tensorrt-llm", "tensor_parallel": 1, "weight_precision": "fp8",
                             "kv_cache_precision": "fp8"}}
    result = estimate(parse_contract(contract, origin="test"))
    fit = mo.expert_fit(mo.table_index(fp8), *MIXTRAL, 0.0, 1.0, 1.0)
    assert result.value("expert_table_covers") == 1.0
    assert result.value("expert_read_seconds") == pytest.approx(32 * fit.read_seconds, rel=1e-12)
    # every layer's experts at g_e, on top of the attention projections the GEMM table prices
    assert result.value("gemm_seconds_per_token") == pytest.approx(
        32 * fit.seconds_per_token + 32 * result.value("table_gemm_seconds_per_token_per_layer"), rel=1e-12)
    assert result.value("gemm_knee_exponent") >= 1.0
    contract["strategy"]["engine"] = "vllm"      # vLLM's Triton fused_moe is not the table's kernel
    roofline = estimate(parse_contract(contract, origin="test"))
    assert roofline.value("moe_table_index") == -1.0 and roofline.value("expert_table_covers") == 0.0
    assert roofline.value("expert_read_seconds") == pytest.approx(
        roofline.value("expert_weight_bytes") / (roofline.value("memory_bandwidth_efficiency")
                                                 * roofline.value("memory_bandwidth_bytes_per_s")), rel=1e-12)


def test_the_closed_form_follows_the_table_over_the_grid(fp8):
    """The fitted layer, ‖g_e·T, F_e + x·(1 − (1 − q)^T)‖_p, within ±13 % of the table from T = 8 to 8,192 (Mixtral
    TP 1 and TP 2, H100 FP8). Below, the closed form's uniform picks touch more experts than the table's skewed
    routing (power law 1.2) does: at T = 2-4 it is up to a third high (TP 2, T = 4: 191 µs against 144)."""
    from botec.serving.operators import KNEE_TOKENS, fit_knee_exponent
    from botec.serving.step import gemm_term

    for tp in (1.0, 2.0):
        fit = mo.expert_fit(mo.table_index(fp8), *MIXTRAL, 0.0, tp, 1.0)
        weights = [fit.floor_seconds + fit.read_seconds * (1 - 0.75 ** m) for m in KNEE_TOKENS]
        p = fit_knee_exponent(list(fit.curve), weights, fit.seconds_per_token)
        for m, measured, w in zip(KNEE_TOKENS, fit.curve, weights):
            error = gemm_term(fit.seconds_per_token * m, w, p) / measured - 1
            assert -0.13 <= error <= (0.13 if m >= 8 else 0.35), (tp, m, error)
            if m == 1:
                assert error == pytest.approx(0, abs=0.01)   # the floor is the table's own point
