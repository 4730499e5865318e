"""Serving: KV cache, roofline prefill and decode, capacity, unit economics, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimate import estimate


def serving(model="llama-3.1-8b", accelerator="h100-sxm", strategy=None, traffic=None, latency=None, supply=None,
            assumptions=None):
    return {
        "workload": {"kind": "serving", "model": model,
                     "traffic": {"requests_per_second": 1, "prompt_tokens": 1024, "output_tokens": 256,
                                 **(traffic or {})},
                     "latency": latency or {}},
        "supply": {"accelerator": accelerator, **(supply or {})},
        "strategy": strategy or {},
        "assumptions": {"attention_flops": "causal", **(assumptions or {})},
    }


def run(data):
    return estimate(parse_contract(data))


@pytest.mark.parametrize("model, strategy, expected", [
    ("llama-2-7b", {}, 524_288),                    # 2 · 32 layers · 32 KV heads · 128 · 2 B
    ("llama-2-70b", {"tensor_parallel": 4}, 327_680),  # 2 · 80 · 8 · 128 · 2 (GQA)
    ("llama-3.1-8b", {}, 131_072),                  # 2 · 32 · 8 · 128 · 2 (Llama-3-8B's shape)
    ("deepseek-v3", {"tensor_parallel": 8, "weight_precision": "fp8"}, 70_272),  # 61 · (512 + 64) · 2 (MLA)
])
def test_kv_bytes_per_token_in_bf16(model, strategy, expected):
    accelerator = "h200" if model == "deepseek-v3" else "h100-sxm"
    result = run(serving(model, accelerator, strategy=strategy, traffic={"prompt_tokens": 512, "output_tokens": 64}))
    assert result.value("kv_bytes_per_token") == expected


def test_mla_latent_is_not_split_by_tp_but_gqa_heads_are():
    deepseek = run(serving("deepseek-v3", "h200", strategy={"tensor_parallel": 8, "weight_precision": "fp8"}))
    assert deepseek.value("kv_bytes_per_token_per_device") == 70_272
    llama = run(serving("llama-2-70b", strategy={"tensor_parallel": 4}))
    assert llama.value("kv_bytes_per_token_per_device") == 327_680 / 4
    # beyond the 8 KV heads, TP replicates them: TP 16 (two nodes) still splits the KV 8 ways
    wide = run(serving("llama-2-70b", strategy={"tensor_parallel": 16}, supply={"cluster": {"node": "dgx-h100"}}))
    assert wide.value("kv_bytes_per_token_per_device") == 327_680 / 8
    # the TP group crosses nodes, 8 of its ranks in each: their 8 NICs (46 GB/s achieved) or 8/7 of NVLink's 370
    assert wide.value("tp_link_bytes_per_s") == pytest.approx(min(8 * 46e9, 8 / 7 * 370e9))


def test_the_lessons_7b_weights_are_about_14_gb():
    result = run(serving("mistral-7b"))
    assert round(result.value("weight_memory_bytes") / 1e9) == 14           # 7.24B × 2 B
    assert result.value("weight_memory_bytes") == pytest.approx(7_241_732_096 * 2)


def test_sliding_window_caps_the_cache():
    result = run(serving("mistral-7b", traffic={"prompt_tokens": 7168, "output_tokens": 1024}))
    assert result.value("kv_tokens_per_request") == 4096                    # Mistral 7B v0.1's window
    assert result.value("kv_bytes_per_request") == pytest.approx(4096 * 131_072)


def test_memory_bound_decode_by_hand():
    # Llama-3.1-8B on one H100, batch 1: TPOT = (weights + one sequence's KV) / (3.35 TB/s × 0.8)
    result = run(serving(strategy={"max_batch_size": 1}, assumptions={"decode_bandwidth_efficiency": 0.8}))
    weights = 8_030_261_248 * 2
    kv = 131_072 * (1024 + 256 / 2)                     # the mean context while decoding
    assert result.value("time_per_output_token_seconds") == pytest.approx((weights + kv) / (3.35e12 * 0.8))
    assert result.value("decode_batch_size") == 1


def test_memory_bound_decode_with_tensor_parallelism_by_hand():
    # Llama-2-70B, TP 4 on a DGX A100, batch 16 (the research note's case)
    result = run(serving("llama-2-70b", "a100-sxm-80gb", strategy={"tensor_parallel": 4, "max_batch_size": 16},
                         supply={"cluster": {"node": "dgx-a100"}}))
    bandwidth = 2039e9 * 0.8
    weights = result.value("weight_memory_bytes")
    assert weights == pytest.approx((68_976_648_192 * 2) / 4)        # every matrix split 4 ways
    kv = 327_680 / 4 * (1024 + 128)
    alpha, link = 3.4e-6, 230e9                                       # dgx-a100 NVLink tier, achieved (nccl-tests)
    all_reduces = 2 * 80 * (2 * 3 * alpha + 2 * 3 / 4 * 16 * 8192 * 2 / link)
    assert result.value("time_per_output_token_seconds") == pytest.approx((weights + 16 * kv) / bandwidth
                                                                          + all_reduces)
    assert 0.020 < result.value("time_per_output_token_seconds") < 0.030   # research note: 22 ms at 80 % BW


def test_compute_bound_prefill_by_hand():
    result = run(serving(assumptions={"prefill_mfu": 0.5}))
    matmul = 8_030_261_248 - 128_256 * 4096            # all but the input-embedding lookup
    flops = 2 * matmul * 1024 + 2 * 32 * 32 * (128 + 128) * 1024 ** 2 * 0.5
    assert result.value("prefill_flops_per_request") == pytest.approx(flops)
    assert result.value("time_to_first_token_seconds") == pytest.approx(flops / (989.4e12 * 0.5))


# Llama-3.1-8B (8,030,261,248 parameters, 128,256 × 4,096 embedding, 32 layers of 32 heads × 128, 131,072 B of
# KV per token in BF16) on one H100 SXM (989.4 TFLOP/s BF16, 3.35 TB/s), the defaults' efficiencies:
# decode and prefill MFU 0.5, 0.8 of the bandwidth.
PARAMETERS, MATMUL = 8_030_261_248, 8_030_261_248 - 128_256 * 4096
PEAK, BANDWIDTH, KV_PER_TOKEN = 989.4e12, 3.35e12 * 0.8, 131_072
ATTENTION_PER_CONTEXT_TOKEN = 2 * 32 * 32 * (128 + 128)     # forward FLOPs of one token attending one token


def test_critical_batch_and_regimes():
    """Prompt 64, output 64: a sequence decodes at a mean context of 64 + 32 = 96 tokens.

    a = (2 × matmul + attention × 96) / (peak × 0.5); k = 131,072 B × 96 / bandwidth; w = weights / bandwidth;
    decode turns compute-bound at B* = w / (a − k)."""
    result = run(serving(traffic={"prompt_tokens": 64, "output_tokens": 64}))
    a = (2 * MATMUL + ATTENTION_PER_CONTEXT_TOKEN * 96) / (PEAK * 0.5)
    k = KV_PER_TOKEN * 96 / BANDWIDTH
    w = PARAMETERS * 2 / BANDWIDTH
    assert result.value("critical_batch_size") == pytest.approx(w / (a - k))
    assert any("decode is memory-bound below batch" in f.message for f in result.findings)


def test_capacity_and_unit_economics():
    """Batch 1 (max_batch_size 1), 50 requests/s of 1,024 + 256 tokens, $2/h, an API at $0.1 / $0.2 per million.

    TTFT = prefill FLOPs / (peak × 0.5) (compute-bound: 16 TFLOP against a 6 ms weight read);
    TPOT = (weights + KV at the mean context 1,152) / bandwidth (memory-bound at batch 1);
    one replica completes 1 / (TTFT + 256 × TPOT) requests/s; replicas = ⌈50 / that⌉;
    cost per day = replicas × 24 h × $2; one replica breaks even with the API at $2/h / API cost per request."""
    data = serving(traffic={"requests_per_second": 50}, strategy={"max_batch_size": 1},
                   supply={"price_per_accelerator_hour": 2.0, "api_price": {"input_per_million": 0.1,
                                                                            "output_per_million": 0.2}})
    result = run(data)
    prefill = 2 * MATMUL * 1024 + ATTENTION_PER_CONTEXT_TOKEN * 1024 ** 2 * 0.5
    ttft = prefill / (PEAK * 0.5)
    tpot = (PARAMETERS * 2 + KV_PER_TOKEN * (1024 + 128)) / BANDWIDTH
    replicas = math.ceil(50 * (ttft + 256 * tpot))
    assert result.value("time_to_first_token_seconds") == pytest.approx(ttft)
    assert result.value("time_per_output_token_seconds") == pytest.approx(tpot)
    assert result.value("replicas") == replicas
    assert result.value("serving_cost_per_day_usd") == pytest.approx(replicas * 24 * 2.0)
    api_per_request = (1024 * 0.1 + 256 * 0.2) / 1e6
    assert result.value("api_cost_per_day_usd") == pytest.approx(api_per_request * 50 * 86_400)
    assert result.value("break_even_requests_per_s") == pytest.approx(2.0 / 3600 / api_per_request)


def test_ttft_target_can_need_more_replicas_than_throughput():
    data = serving("llama-2-70b", "a100-sxm-80gb", strategy={"tensor_parallel": 4},
                   supply={"cluster": {"node": "dgx-a100"}},
                   traffic={"requests_per_second": 2, "prompt_tokens": 2048, "output_tokens": 64},
                   latency={"time_to_first_token": "700 ms"})
    result = run(data)
    assert result.value("replicas_for_time_to_first_token") > result.value("replicas_for_throughput")
    assert any("the TTFT target needs" in f.message for f in result.findings)


def test_training_cost_per_million_tokens_by_hand():
    """Lesson 004's Llama 2-70B: 6 × 70e9 × 2e12 FLOP at 1,024 × 312 TFLOP/s × 0.435 for $1.80 an A100-hour."""
    from botec.estimate import estimate_file

    from conftest import LLAMA

    result = estimate_file(LLAMA)
    hours = 6 * 70e9 * 2e12 / (312e12 * 0.435) / 3600
    assert result.value("cost_per_million_tokens_usd") == pytest.approx(hours * 1.80 / 2e12 * 1e6)


# --- bad input ----------------------------------------------------------------------------------------

def test_context_longer_than_the_model():
    with pytest.raises(ContractError, match="8,192 tokens exceeds Llama 2 7B's 4,096-token context"):
        run(serving("llama-2-7b", traffic={"prompt_tokens": 7168, "output_tokens": 1024}))


def test_fp8_on_an_accelerator_without_fp8():
    with pytest.raises(ContractError, match="a100-sxm-80gb has no FP8 tensor cores") as info:
        run(serving(accelerator="a100-sxm-80gb", strategy={"weight_precision": "fp8"}))
    assert info.value.field == "strategy.weight_precision"


def test_zero_traffic(cli, tmp_path):
    import yaml

    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(serving(traffic={"requests_per_second": 0})))
    code, out, err = cli("estimate", str(path))
    assert code == 2 and "workload.traffic.requests_per_second" in err and "greater than 0" in err


def test_tpot_target_below_the_physical_floor_is_a_finding_with_the_floor():
    result = run(serving(accelerator="l4", strategy={"weight_precision": "fp8"}, latency={"time_per_output_token":
                                                                                          "10 ms"}))
    failed = [f for f in result.findings if f.level == "fail"]
    assert failed and "below the physical floor of" in failed[0].message
    assert result.value("time_per_output_token_floor_seconds") > 0.010


def test_ttft_target_below_the_floor():
    result = run(serving("llama-2-70b", "a100-sxm-80gb", strategy={"tensor_parallel": 4},
                         supply={"cluster": {"node": "dgx-a100"}}, latency={"time_to_first_token": "50 ms"}))
    assert any(f.level == "fail" and "TTFT target 50 ms is below the physical floor" in f.message
               for f in result.findings)


def test_weights_that_do_not_fit(cli, tmp_path):
    import yaml

    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(serving("llama-2-70b")))
    code, out, err = cli("estimate", str(path))
    assert code == 2 and "strategy.tensor_parallel" in err and "weights take" in err


def test_serving_refuses_training_fields_and_a_count():
    with pytest.raises(ContractError, match="derives the accelerators from the traffic"):
        run(serving(supply={"count": 8}))
    with pytest.raises(ContractError, match="applies to training"):
        run(serving(strategy={"micro_batch_size": 4}))


def test_candidates_at_their_own_prices():
    result = run(serving(supply={"price_per_accelerator_hour": 2.5, "candidates": [
        {"accelerator": "l4", "price_per_accelerator_hour": 0.8}, "h200"]},
        latency={"time_per_output_token": "40 ms"}))
    outcomes = dict(result.candidates)
    assert "TPOT floor" in outcomes["l4"]                                # bf16 8B on an L4 reads too slowly
    assert outcomes["h100-sxm"]["serving_cost_per_day_usd"].value == pytest.approx(
        outcomes["h100-sxm"]["replicas"].value * 24 * 2.5)
    assert "serving_cost_per_day_usd" not in outcomes["h200"]            # no price stated for it


# --- properties ---------------------------------------------------------------------------------------

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.integers(16, 60_000), st.integers(1, 4000), st.integers(1, 60_000))
def test_a_longer_context_never_raises_the_concurrency(prompt, output, extra):
    shorter = run(serving(traffic={"prompt_tokens": prompt, "output_tokens": output}))
    prompt_longer = min(prompt + extra, 131_072 - output)
    longer = run(serving(traffic={"prompt_tokens": prompt_longer, "output_tokens": output}))
    assert longer.value("max_concurrent_requests") <= shorter.value("max_concurrent_requests")


@SETTINGS
@given(st.floats(0.01, 500), st.floats(0.01, 500))
def test_more_traffic_never_needs_fewer_replicas(rate, extra):
    targets = {"time_to_first_token": "2 s"}
    less = run(serving(traffic={"requests_per_second": rate}, latency=targets))
    more = run(serving(traffic={"requests_per_second": rate + extra}, latency=targets))
    assert more.value("replicas") >= less.value("replicas")
    assert more.value("serving_utilization") <= 1 and less.value("serving_utilization") <= 1


def test_init_writes_a_serving_starter(cli, tmp_path):
    path = tmp_path / "serve.yaml"
    code, out, err = cli("init", str(path), "--serving")
    assert code == 0, err
    code, out, err = cli("estimate", str(path), "-f", "json")
    assert code == 0, err
    import json

    payload = json.loads(out)
    assert payload["contract"]["workload"]["kind"] == "serving"
    assert {c["accelerator"] for c in payload["candidates"]} >= {"h100-sxm", "l4", "h200"}
