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
    assert wide.value("tp_link_bytes_per_s") == pytest.approx(50e9)      # the TP group crosses nodes


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
    alpha, link = 3.4e-6, 300e9                                       # dgx-a100 NVLink tier
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


def test_critical_batch_and_regimes():
    # short contexts: KV reads are small, decode turns compute-bound at w / (a − k)
    result = run(serving(traffic={"prompt_tokens": 64, "output_tokens": 64}))
    a = result.value("decode_compute_seconds_per_sequence")
    k = result.value("kv_read_seconds_per_sequence")
    w = result.value("weight_read_seconds")
    assert result.value("critical_batch_size") == pytest.approx(w / (a - k))
    assert any("decode is memory-bound below batch" in f.message for f in result.findings)


def test_capacity_and_unit_economics():
    data = serving(traffic={"requests_per_second": 50}, supply={"price_per_accelerator_hour": 2.0,
                                                                 "api_price": {"input_per_million": 0.1,
                                                                               "output_per_million": 0.2}})
    result = run(data)
    per_replica = result.value("requests_per_s_per_replica")
    assert result.value("replicas") == math.ceil(50 / per_replica)
    assert result.value("serving_cost_per_day_usd") == pytest.approx(result.value("replicas") * 24 * 2.0)
    day = 50 * 86400
    assert result.value("cost_per_request_usd") == pytest.approx(result.value("serving_cost_per_day_usd") / day)
    share = result.value("prefill_time_share")
    assert result.value("cost_per_million_output_tokens_usd") == pytest.approx(
        result.value("serving_cost_per_day_usd") * (1 - share) / (day * 256) * 1e6)
    api_per_request = (1024 * 0.1 + 256 * 0.2) / 1e6
    assert result.value("api_cost_per_day_usd") == pytest.approx(api_per_request * day)
    assert result.value("break_even_requests_per_s") == pytest.approx(2.0 / 3600 / api_per_request)


def test_ttft_target_can_need_more_replicas_than_throughput():
    data = serving("llama-2-70b", "a100-sxm-80gb", strategy={"tensor_parallel": 4},
                   supply={"cluster": {"node": "dgx-a100"}},
                   traffic={"requests_per_second": 2, "prompt_tokens": 2048, "output_tokens": 64},
                   latency={"time_to_first_token": "700 ms"})
    result = run(data)
    assert result.value("replicas_for_time_to_first_token") > result.value("replicas_for_throughput")
    assert any("the TTFT target needs" in f.message for f in result.findings)


def test_training_cost_per_billion_tokens(lesson):
    from botec.estimate import estimate_file

    from conftest import LLAMA

    result = estimate_file(LLAMA)
    assert result.value("cost_per_billion_training_tokens_usd") == pytest.approx(
        result.value("training_cost_usd") / 2e12 * 1e9)


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
@given(st.floats(0.01, 500), st.integers(1, 50), st.integers(1, 50))
def test_more_replicas_never_lower_the_traffic_served(rate, replicas, extra):
    from botec.estimate import serving_given
    from botec.quantities import Given, evaluate

    given_, _, _ = serving_given(parse_contract(serving(traffic={"requests_per_second": rate})))
    fewer = evaluate({**given_, "replicas": Given(float(replicas))})["served_requests_per_s"].value
    more = evaluate({**given_, "replicas": Given(float(replicas + extra))})["served_requests_per_s"].value
    assert more >= fewer


@SETTINGS
@given(st.floats(0.01, 100), st.floats(0.001, 100), st.floats(0.01, 500))
def test_a_higher_price_never_lowers_the_cost_per_token(price, increase, rate):
    low = run(serving(traffic={"requests_per_second": rate}, supply={"price_per_accelerator_hour": price}))
    high = run(serving(traffic={"requests_per_second": rate}, supply={"price_per_accelerator_hour": price + increase}))
    for name in ("cost_per_million_output_tokens_usd", "cost_per_million_input_tokens_usd", "cost_per_request_usd"):
        assert high.value(name) >= low.value(name)
        assert math.isfinite(high.value(name))


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
