"""Serving: KV cache, roofline prefill and decode, capacity, unit economics, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate


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


# Llama-3.1-8B (8,030,261,248 parameters, 128,256 × 4,096 embedding, 32 layers of 32 heads × 128, 131,072 B of
# KV per token in BF16) on one H100 SXM (989.4 TFLOP/s BF16, 3.35 TB/s), with the step's figures stated: GEMMs at
# 0.5 of the peak, fused attention at 0.5, 0.8 of the bandwidth, no kernel or engine overhead.
PARAMETERS, HEAD = 8_030_261_248, 128_256 * 4096
PEAK, BANDWIDTH, KV_PER_TOKEN = 989.4e12, 3.35e12 * 0.8, 131_072
FIGURES = {"matmul_efficiency": 0.5, "attention_efficiency": 0.5, "memory_bandwidth_efficiency": 0.8,
           "kernel_overhead": 0, "step_overhead": 0}
G = 2 * (PARAMETERS - 2 * HEAD) / (PEAK * 0.5)    # GEMM seconds per token (all but the embedding lookup and head)
W = (PARAMETERS - HEAD) * 2 / BANDWIDTH            # the weights, read once per step, but the input
#   embedding: a gather of the step's T rows (T·h values), not the V·h table; the untied head's V·h is read
A = 2 * 32 * 32 * (128 + 128) / (PEAK * 0.5)       # attention seconds per cached token a query reads
C = KV_PER_TOKEN / BANDWIDTH                       # KV read seconds per cached token
L = 2 * HEAD / (PEAK * 0.5)                        # LM head seconds per sampled token
# memory-bound ops per token, 2-byte activations over 32 layers: norms and residual adds 10·h, the gated
# activation 3·f (read gate and up, write their product)
E = 2 * 32 * (10 * 4096 + 3 * 14336) / BANDWIDTH


def step(decoding, context, prefill=0.0, prefill_context=0.0, sampled=None):
    """engine_step_seconds written out: max(g·T, w) + max(a·(C_d + C_p), c·(C_d + p)) + l·s + e·T."""
    tokens = decoding + prefill
    sampled = decoding if sampled is None else sampled
    return (max(G * tokens, W) + max(A * (context + prefill_context), C * (context + prefill)) + L * sampled
            + E * tokens)


def test_the_step_function_is_the_written_roofline():
    from botec.serving.step import StepModel

    result = run(serving(assumptions=FIGURES))
    model = StepModel.from_quantities(result.quantities)
    for decoding, context, prefill in ((1, 1152, 0), (64, 64 * 1152, 0), (300, 300 * 1152, 2048), (0, 0, 1024)):
        prefill_context = prefill * 512
        sampled = decoding + (1 if prefill else 0)
        assert model.step(decoding, context, prefill, prefill_context, sampled) == pytest.approx(
            step(decoding, context, prefill, prefill_context, sampled))


def test_memory_bound_decode_floor_by_hand():
    """Batch 1: the weights and one sequence's KV at its mean context (1,024 + 256 / 2) through the bandwidth."""
    result = run(serving(assumptions=FIGURES))
    assert result.value("weight_read_seconds") == pytest.approx(W)
    assert result.value("elementwise_seconds_per_token") == pytest.approx(E)
    assert result.value("time_per_output_token_floor_seconds") == pytest.approx(W + C * 1152 + L + E)


def test_prefill_floor_by_hand():
    """One 1,024-token prompt on an idle replica: one chunk (the 8,192-token budget), compute-bound, its causal
    attention over 512 tokens per query on average, the LM head for its last position; plus the front-end's
    o = 2 ms per request (vLLM's request_overhead in engines.yaml: HTTP, tokenization), outside the engine."""
    result = run(serving(assumptions=FIGURES))
    assert result.value("time_to_first_token_floor_seconds") == pytest.approx(
        max(G * 1024, W) + max(A * 1024 * 512, C * 1024) + L + E * 1024 + 2e-3)


def test_tensor_parallel_all_reduces_by_hand():
    """Llama-2-70B, TP 4 on a DGX A100 (NVLink 230 GB/s achieved): 2 all-reduces per layer of a token's 8,192 × 2 B,
    each 2·3/4 of it through the link plus the engine's small-message latency (stated 10 µs: the measured all-reduce
    table steps aside, and the two sides join as their sum: the knee exponent 0)."""
    result = run(serving("llama-2-70b", "a100-sxm-80gb", strategy={"tensor_parallel": 4},
                         supply={"cluster": {"node": "dgx-a100"}},
                         assumptions=FIGURES | {"allreduce_latency": "10 us"}))
    assert result.value("allreduce_table_index") == -1
    assert result.value("allreduce_seconds_per_token") == pytest.approx(2 * 80 * 2 * 3 / 4 * 8192 * 2 / 230e9)
    assert result.value("allreduce_seconds_per_step") == pytest.approx(2 * 80 * 10e-6)
    assert result.value("allreduce_knee_exponent") == 0
    assert result.value("communication_seconds_per_token") == 0   # nothing beside the all-reduces under plain TP
    assert result.value("fixed_seconds_per_step") == pytest.approx(0.0, abs=1e-12)   # FIGURES: no kernel or engine
    assert result.value("weight_memory_bytes") == pytest.approx(68_976_648_192 * 2 / 4)
    assert 0.020 < result.value("time_per_output_token_floor_seconds") < 0.030   # research note: 22 ms at 80 % BW


def test_saturation_by_hand():
    """Prompt 1,024, output 256, a 8,192-token budget: each running request brings 1 decode token and 1,024 / 256 = 4
    prompt tokens of the request replacing it: at most ⌊8,192 / 5⌋ = 1,638 run, fewer when the KV cache binds.
    The B/256 requests finishing each step are replaced by whole prompts: a step carries n·1,024 prompt tokens
    (n ≥ 1) or, when fewer than one finishes per step, a share n of the steps carries one prompt: the mean step is
    that mixture, not the step of the mean."""
    result = run(serving(assumptions=FIGURES))
    fits = result.value("max_concurrent_requests")
    batch = min(fits, 1024, 8192 // 5)                              # vLLM's max_num_seqs 1,024
    assert result.value("saturation_batch_size") == batch
    finishing = batch / 256
    chunk = min(8192 - batch, 1024 * max(1.0, finishing))
    share = min(1.0, finishing * 1024 / chunk)
    seconds = ((1 - share) * step(batch, batch * 1152)
               + share * step(batch, batch * 1152, chunk, chunk * 512, batch + chunk / 1024))
    assert result.value("saturation_round_seconds") == pytest.approx(seconds)
    assert result.value("offline_requests_per_s_per_replica") == pytest.approx(batch / (256 * seconds))
    assert result.value("offline_output_tokens_per_s_per_accelerator") == pytest.approx(batch / seconds)


def test_critical_batch_and_regimes():
    """The weight GEMMs turn compute-bound when g·T exceeds w: T* = w / g."""
    result = run(serving(traffic={"prompt_tokens": 64, "output_tokens": 64}, assumptions=FIGURES))
    assert result.value("critical_batch_size") == pytest.approx(W / G)
    assert any("a step is memory-bound below" in f.message for f in result.findings)


def test_load_follows_littles_law():
    """At λ requests/s the decoding requests number λ · O · TPOT (Little's law), and TPOT is the step at that batch."""
    result = run(serving(traffic={"requests_per_second": 10}, assumptions=FIGURES))
    batch, tpot = result.value("decode_batch_size"), result.value("time_per_output_token_seconds")
    rate = result.value("requests_per_s_on_a_replica")
    assert batch == pytest.approx(rate * 256 * tpot, rel=0.05)
    assert tpot > result.value("time_per_output_token_floor_seconds")
    assert result.value("time_to_first_token_seconds") >= result.value("time_to_first_token_floor_seconds")


def test_under_load_a_share_of_steps_carries_a_whole_prompt():
    """At 10 requests/s each 1,024-token prompt fits one step's budget: a share ρ = λ·t̄ of the steps carries one,
    so t̄ = (1 − ρ)·t₀ + ρ·t₁ solves to t₀ / (1 − λ·(t₁ − t₀)), the steps holding the B + 1 requests a decoding
    request steps with; TTFT is the M/G/1 wait ρ_q·S/(2(1 − ρ_q)) with ρ_q = λ·S (fixed lengths), half a decode
    step when the engine is stepping (probability 1 − e^(−B)), and the prompt's own step S, both at the batch B an
    arrival finds."""
    import math

    result = run(serving(traffic={"requests_per_second": 10}, assumptions=FIGURES))
    rate, batch = 10.0, result.value("decode_batch_size")
    seen = batch + 1                  # a decoding request steps with itself and the B others it finds
    without = step(seen, seen * 1152)
    with_prompt = step(seen, seen * 1152, 1024, 1024 * 512, seen + 1)
    mean = without / (1 - rate * (with_prompt - without))
    assert result.value("time_per_output_token_seconds") == pytest.approx(mean, rel=1e-6)
    assert batch == pytest.approx(rate * 255 * mean, rel=1e-6)    # Little's law: O − 1 tokens after the prefill's
    # an arriving prompt finds the time-average batch B (Poisson arrivals see time averages); prompts keep the
    # engine busy a share λ·S of the time (the M/G/1 utilization)
    prompt_step = step(batch, batch * 1152, 1024, 1024 * 512, batch + 1)
    busy = rate * prompt_step
    wait = busy * prompt_step / (2 * (1 - busy))
    in_progress = (1 - math.exp(-batch)) * step(batch, batch * 1152) / 2
    front = 2e-3   # vLLM's request_overhead (engines.yaml): HTTP and tokenization, once per request
    assert result.value("time_to_first_token_seconds") == pytest.approx(wait + in_progress + prompt_step + front,
                                                                        rel=1e-6)


def test_capacity_and_unit_economics():
    """50 requests/s, no targets: replicas carry at most 0.8 of their saturation capacity (the utilization cap).
    Cost per day = replicas × 24 h × $2; one replica breaks even with the API at $2/h / API cost per request."""
    data = serving(traffic={"requests_per_second": 50}, assumptions=FIGURES,
                   supply={"price_per_accelerator_hour": 2.0, "api_price": {"input_per_million": 0.1,
                                                                            "output_per_million": 0.2}})
    result = run(data)
    capacity = result.value("offline_requests_per_s_per_replica")
    assert result.value("requests_per_s_per_replica") == pytest.approx(0.8 * capacity)
    replicas = math.ceil(50 / (0.8 * capacity))
    assert result.value("replicas") == replicas
    assert result.value("serving_cost_per_day_usd") == pytest.approx(replicas * 24 * 2.0)
    api_per_request = (1024 * 0.1 + 256 * 0.2) / 1e6
    assert result.value("api_cost_per_day_usd") == pytest.approx(api_per_request * 50 * 86_400)
    assert result.value("break_even_requests_per_s") == pytest.approx(2.0 / 3600 / api_per_request)


def test_a_tight_ttft_target_needs_more_replicas_than_throughput():
    data = serving("llama-2-70b", "a100-sxm-80gb", strategy={"tensor_parallel": 4},
                   supply={"cluster": {"node": "dgx-a100"}},
                   traffic={"requests_per_second": 2, "prompt_tokens": 2048, "output_tokens": 64})
    loose = run(data)
    # a 2,048-token prefill takes 0.35 s alone: a P99 of 400 ms leaves little room to queue
    data["workload"]["latency"] = {"time_to_first_token": "400 ms", "percentile": 99}
    tight = run(data)
    assert tight.value("requests_per_s_per_replica") < loose.value("requests_per_s_per_replica")
    assert tight.value("replicas") > loose.value("replicas")
    assert tight.value("time_to_first_token_percentile_seconds") <= 0.4


def test_speculative_decoding_emits_the_expected_tokens_per_step():
    """Leviathan et al. 2023: k = 4 drafts accepted each with α = 0.7 give (1 − 0.7⁵) / (1 − 0.7) tokens per step."""
    result = run(serving(assumptions={"speculative_decoding": {"draft_tokens": 4, "acceptance_rate": 0.7}}))
    assert result.value("tokens_per_step") == pytest.approx((1 - 0.7 ** 5) / 0.3)
    plain = run(serving())
    assert result.value("time_per_output_token_floor_seconds") < plain.value("time_per_output_token_floor_seconds")


def test_prefix_caching_computes_only_the_missed_tokens():
    result = run(serving(assumptions={"prefix_cache_hit_rate": 0.75}))
    assert result.value("prefill_tokens_per_request") == 256
    assert result.value("prefill_attention_tokens") == pytest.approx(768 + 128)   # the cached prefix + causal half


def test_moe_decode_reads_only_the_experts_its_tokens_pick():
    """DeepSeek-V3 at batch 1 reads its 8 of 256 experts per MoE layer, not all (formula audit row 29)."""
    from botec.serving.step import experts_touched_share

    assert experts_touched_share(1, 8 / 256) == pytest.approx(8 / 256)
    assert experts_touched_share(64, 8 / 256) == pytest.approx(1 - (1 - 8 / 256) ** 64)
    result = run(serving("deepseek-v3", "h200", strategy={"tensor_parallel": 8, "weight_precision": "fp8"},
                         supply={"cluster": {"node": "dgx-h200"}}))
    experts = result.value("expert_read_seconds")
    assert experts > 4 * result.value("weight_read_seconds")         # most of the weights are routed experts
    # batch 1 reads the dense weights and 8/256 of the experts: far below reading all of them
    assert result.value("time_per_output_token_floor_seconds") < result.value("weight_read_seconds") + 0.2 * experts


def test_data_parallel_attention_stops_copying_the_mla_latent():
    """DeepSeek-V3 on 8 ranks: with attention data-parallel each rank caches only its own requests (the KV splits
    8 ways instead of being copied on every rank) and holds whole attention weights: 187,107,328 per layer (q down
    7168·1536 + norm 1536 + q up 1536·128·192; kv down 7168·576 + norm 512 + kv up 512·128·256; out 128·128·7168),
    7/8 of them beyond the TP share, over 61 layers, one byte each in FP8."""
    strategy = {"tensor_parallel": 8, "expert_parallel": 8, "weight_precision": "fp8"}
    copied = run(serving("deepseek-v3", "h200", strategy=strategy, supply={"cluster": {"node": "dgx-h200"}}))
    spread = run(serving("deepseek-v3", "h200", strategy=strategy | {"data_parallel_attention": True},
                         supply={"cluster": {"node": "dgx-h200"}}))
    assert spread.value("kv_bytes_per_token_per_device") == 70_272 / 8
    # each rank holds the attention (187,107,328 per layer) and the shared expert (3 × 7,168 × 2,048 in each of the
    # 58 MoE layers) whole: 7/8 of them beyond its TP share (DeepSeek's inference system: "MLA and shared expert DP")
    replicated = (187_107_328 * 61 + 58 * 3 * 7168 * 2048) * 7 / 8
    assert spread.value("replicated_attention_parameters") == pytest.approx(replicated)
    assert spread.value("weight_memory_bytes") - copied.value("weight_memory_bytes") == pytest.approx(replicated)
    # the budget shrinks by those weights, the cache per request by 8: several times the requests fit
    budget_ratio = spread.value("kv_budget_bytes") / copied.value("kv_budget_bytes")
    assert spread.value("max_concurrent_requests") == pytest.approx(
        8 * budget_ratio * copied.value("max_concurrent_requests"), rel=0.01)
    assert spread.value("max_concurrent_requests") > 5 * copied.value("max_concurrent_requests")
    with pytest.raises(ContractError, match="strategy.data_parallel_attention"):
        parse_contract(serving(strategy={"data_parallel_attention": True}))


def test_disaggregated_prefill_and_decode_by_hand():
    """One prefill and one decode instance of Llama 3.1-8B (TP 1 each) in a DGX H100: decode steps carry no
    prompt chunk, prompts queue for the prefill instance, and each prompt's KV (131,072 B per token) crosses
    NVLink before its first token."""
    from botec.serving.step import StepModel

    data = serving(strategy={"disaggregation": {"prefill_instances": 1}}, supply={"cluster": {"node": "dgx-h100"}})
    result = run(data)
    q = result.value
    step = StepModel.from_quantities(result.quantities)
    prompt, output, budget, mean_kv = 1024, 256, q("max_batched_tokens"), q("mean_kv_tokens_per_request")
    assert q("replica_accelerators") == 2
    assert q("kv_transfer_seconds") == pytest.approx(131_072 * prompt / q("intra_node_bytes_per_s"))
    # the decode instance: its batch is capped by memory and max_num_seqs only (no prompt share of the budget)
    batch = min(q("max_concurrent_requests"), q("max_batch_size"), budget)
    assert q("saturation_batch_size") == batch
    decode_capacity = batch / (output * step.step(batch, batch * mean_kv))
    # the prefill instance fills each step with b prompt tokens (the last position of each prompt sampled)
    full_step = step.step(0.0, 0.0, budget, budget * prompt / 2, budget / prompt)
    prefill_capacity = budget / (prompt * full_step)
    assert q("offline_requests_per_s_per_replica") == pytest.approx(min(decode_capacity, prefill_capacity), rel=1e-6)
    # TPOT: a decode step at the batch Little's law gives, never a prompt chunk in it
    decoding = q("decode_batch_size")
    seen = decoding + 1
    assert q("time_per_output_token_seconds") == pytest.approx(step.step(seen, seen * mean_kv), rel=1e-9)
    assert decoding == pytest.approx(1.0 * (output - 1) * step.step(seen, seen * mean_kv), rel=1e-6)  # O − 1 decoded
    # TTFT on an idle pair: one prefill step of the whole prompt, then the KV transfer
    alone = step.step(0.0, 0.0, prompt, prompt * prompt / 2, 1.0)
    front = q("request_overhead_seconds")   # the engine's front-end (HTTP, tokenization), once per request
    assert q("time_to_first_token_floor_seconds") == pytest.approx(alone + q("kv_transfer_seconds") + front,
                                                                   rel=1e-9)
    # under load the prompt waits in an M/G/1 queue whose mean service is P·t_b/b
    busy = 1.0 * prompt * full_step / budget
    wait = busy * (prompt * full_step / budget) / (2 * (1 - busy))
    assert q("time_to_first_token_seconds") == pytest.approx(wait + alone + q("kv_transfer_seconds") + front,
                                                             rel=1e-6)
    assert q("prefill_time_share") == 0.5
    # nine instances do not fit one node: the KV crosses the NICs; a stated bandwidth replaces the tier's
    wide = run(serving(strategy={"disaggregation": {"prefill_instances": 8}}, supply={"cluster": {"node": "dgx-h100"}}))
    assert wide.value("kv_transfer_seconds") == pytest.approx(131_072 * prompt / wide.value("inter_node_bytes_per_s"))
    stated = run(serving(strategy={"disaggregation": {"prefill_instances": 1, "kv_transfer_bandwidth": "25 GB/s"}}))
    assert stated.value("kv_transfer_seconds") == pytest.approx(131_072 * prompt / 25e9)


def test_engines_set_the_memory_budget():
    """vLLM: 0.92 of the memory, less weights and reserve; TensorRT-LLM: 0.9 of what weights and reserve leave."""
    vllm = run(serving(strategy={"engine": "vllm"}))
    trt = run(serving(strategy={"engine": "tensorrt-llm"}))
    memory, weights = 80e9, PARAMETERS * 2
    reserve = 3.5 * 2 ** 30
    assert vllm.value("kv_budget_bytes") == pytest.approx(0.92 * memory - weights - reserve)
    assert trt.value("kv_budget_bytes") == pytest.approx(0.9 * (memory - weights - reserve))


def test_training_cost_per_million_tokens_by_hand():
    """Lesson 004's Llama 2-70B: 6 × 70e9 × 2e12 FLOP at 1,024 × 312 TFLOP/s × 0.435 for $1.80 an A100-hour."""
    from botec.estimation import estimate_file

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


def test_tpot_target_below_the_physical_floor_is_a_finding_with_the_floor(cli, tmp_path):
    import yaml

    data = serving(accelerator="l4", strategy={"weight_precision": "fp8"}, latency={"time_per_output_token": "10 ms"})
    result = run(data)
    failed = [f for f in result.findings if f.level == "fail"]
    assert failed and "below the physical floor of" in failed[0].message
    assert result.value("time_per_output_token_floor_seconds") > 0.010
    assert result.value("targets_reachable") == 0
    assert not any(f.account == "cost" and "per day" in f.message for f in result.findings)   # never priced
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = cli("estimate", str(path))
    assert code == 2 and "workload.latency.time_per_output_token" in err and "floor" in err


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
    # the starter names the user's file and shows how to compare other accelerators (commented out)
    text = path.read_text()
    assert f"{path.name}" in text.split("Run it:")[1].splitlines()[0] and "# candidates:" in text
