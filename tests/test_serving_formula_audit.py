"""The serving defects of formula audit 2 (§4, issue 20 item 7), each against a derivation by hand:

- N3: a speculative verification reads each request's KV cache once, its k + 1 queries computed against it;
- N9: the draft's weights and KV cache are in memory, and its cost follows from its shape;
- N4: the MoE critical batch counts the routed experts' reads;
- N6: MLA prefills at the decompressed MHA width, decodes at the absorbed one;
- N12: a shared prefix's cache is held once per replica, not once per request.

The figures are written out from the models' shapes and the stated efficiencies, never read back from botec.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate


def serving(model="llama-3.1-8b", accelerator="h100-sxm", strategy=None, traffic=None, supply=None, assumptions=None):
    return {
        "workload": {"kind": "serving", "model": model,
                     "traffic": {"requests_per_second": 1, "prompt_tokens": 1024, "output_tokens": 256,
                                 **(traffic or {})}},
        "supply": {"accelerator": accelerator, **(supply or {})},
        "strategy": strategy or {},
        "assumptions": {"attention_flops": "causal", **(assumptions or {})},
    }


def run(data):
    return estimate(parse_contract(data))


# Llama-3.1-8B (8,030,261,248 parameters; 128,256 × 4,096 embedding and LM head; 32 layers of 32 query heads and 8
# KV heads of 128; FFN 14,336) on one H100 SXM (989.4 TFLOP/s BF16, 3.35 TB/s), the step's figures stated: GEMMs
# and attention at 0.5 of the peak, 0.8 of the bandwidth, no kernel or engine overhead.
PARAMETERS, HEAD = 8_030_261_248, 128_256 * 4096
PEAK, BANDWIDTH, KV_PER_TOKEN = 989.4e12, 3.35e12 * 0.8, 131_072
FIGURES = {"matmul_efficiency": 0.5, "attention_efficiency": 0.5, "memory_bandwidth_efficiency": 0.8,
           "kernel_overhead": 0, "step_overhead": 0}
G = 2 * (PARAMETERS - 2 * HEAD) / (PEAK * 0.5)    # GEMM seconds per token (all but the embedding lookup and head)
W = (PARAMETERS - HEAD) * 2 / BANDWIDTH            # the weights read once per step, but the input embedding
#   (a gather of the step's rows, not the V·h table): 5.60 ms
A = 2 * 32 * 32 * (128 + 128) / (PEAK * 0.5)       # attention seconds per cached token one query reads
C = KV_PER_TOKEN / BANDWIDTH                       # KV read seconds per cached token
L = 2 * HEAD / (PEAK * 0.5)                        # LM head seconds per sampled token
E = 2 * 32 * (10 * 4096 + 3 * 14336) / BANDWIDTH   # memory-bound ops per token (norms, residuals, SwiGLU)


def decode_step(requests, context, queries=1):
    """One decode step of ``requests`` requests of ``context`` cached tokens each, ``queries`` tokens each:
    max(g·T, w) + max(a·q·C_d, c·C_d) + l·T + e·T (the cache read once per request, the LM head at every
    position verified)."""
    tokens = requests * queries
    return max(G * tokens, W) + max(A * queries * requests * context, C * requests * context) + L * tokens \
        + E * tokens


# --- N3: the verification reads the cache once ---------------------------------------------------

LONG = {"prompt_tokens": 16_000, "output_tokens": 1_000}
SPECULATING = {"draft_tokens": 4, "acceptance_rate": 0.8, "draft_cost": 0.05}


def test_speculative_verification_reads_the_cache_once():
    """Formula audit 2, N3: 16,000 prompt + 1,000 output tokens, k = 4 drafts accepted at α = 0.8, a draft token
    0.05 of a decode step. One request's mean context C̄ = 16,000 + 1,000/2 = 16,500 tokens. The verification step
    carries 5 tokens whose queries attend C̄ in one read of the cache:

        t_v = max(5g, w) + max(5·a·C̄, c·C̄) + 5l + 5e ≈ 5.60 + 0.807 + 0.011 + 0.012 ms = 6.43 ms

    (the memory side c·C̄ = 16,500 × 131,072 B / 2.68 TB/s = 0.807 ms, the compute side 5·a·C̄ = 0.087 ms; the LM
    head scores all 5 positions, 5 × 2·V·h / (0.5 × peak) = 5 × 2.12 µs), and the draft's 4 steps
    4 × 0.05 × t(1) = 0.2 × 6.41 ms. Tokens per step (1 − 0.8⁵)/0.2 = 3.3616: TPOT floor = (6.43 + 1.28) / 3.3616
    ≈ 2.294 ms. Reading the cache 5 times (c·5·C̄ = 4.03 ms) gave ≈ 3.25 ms."""
    result = run(serving(traffic=LONG, assumptions=FIGURES | {"speculative_decoding": SPECULATING}))
    context = 16_500
    verify = max(5 * G, W) + max(5 * A * context, C * context) + 5 * L + 5 * E
    assert verify == pytest.approx(decode_step(1, context, queries=5))
    emitted = (1 - 0.8 ** 5) / (1 - 0.8)
    floor = (verify + 4 * 0.05 * decode_step(1, context)) / emitted
    assert result.value("time_per_output_token_floor_seconds") == pytest.approx(floor, rel=1e-9)
    assert floor == pytest.approx(2.294e-3, rel=1e-3)
    read_five_times = (max(5 * G, W) + 5 * C * context + 5 * L + 5 * E + 4 * 0.05 * decode_step(1, context)) / emitted
    assert read_five_times == pytest.approx(3.254e-3, rel=1e-3)


def test_the_step_and_the_simulator_count_k_plus_1_queries_per_cache_read():
    """At a batch where attention turns compute-bound the k + 1 queries still count: B = 64 requests of 1,152 cached
    tokens verifying 5 tokens each: the step is max(320g, w) + max(5·a·C_d, c·C_d) + 320·l + 320·e, C_d = 64 × 1,152
    (one read; the LM head at all 320 positions); the simulator's round takes the same step plus the draft's
    4 × 0.05 × t(64)."""
    from botec.serving.step import StepModel
    from botec.simulate.replica import Engine

    result = run(serving(assumptions=FIGURES | {"speculative_decoding": SPECULATING}))
    model = StepModel.from_quantities(result.quantities)
    context = 64 * 1152
    hand = max(320 * G, W) + max(5 * A * context, C * context) + 320 * L + 320 * E
    assert model.step(320, context, 0, 0, 320, 5) == pytest.approx(hand, rel=1e-12)
    round_seconds = Engine.from_estimate(result).round_function()
    assert round_seconds(64, context, 0, 0, 64) == pytest.approx(hand + 4 * 0.05 * decode_step(64, 1152), rel=1e-12)


# --- N9: the draft's memory and cost -------------------------------------------------------------

# An EAGLE head for Llama-3.1-8B: one decoder layer of the target's shape — attention 4,096 × 4,096 × 2 (Q, O) +
# 4,096 × 1,024 × 2 (K, V) = 41,943,040; SwiGLU 3 × 4,096 × 14,336 = 176,160,768; two norms 8,192 — and the
# 2h → h projection 2 × 4,096² = 33,554,432: 251,666,432 parameters, 503,332,864 B in BF16. It shares the
# embeddings and the LM head, and caches one layer: 2 × 8 × 128 × 2 B = 4,096 B per token.
EAGLE_PARAMETERS = 41_943_040 + 176_160_768 + 8_192 + 33_554_432


def test_an_eagle_head_takes_memory_and_its_cost_follows_from_its_shape():
    """Weights 16,060,522,496 + 503,332,864 B; a token of cache 131,072 + 4,096 B: with memory_fraction 0.9 and a
    4 GB reserve the KV budget is 72 GB − 16.56 GB − 4 GB and ⌊K / (135,168 × 1,152)⌋ requests fit.
    The draft's step at batch 1: its layer, projection and the shared LM head read, (251,666,432 + 525,336,576) ×
    2 B, and its cache, 4,096 B × 1,152, through 2.68 TB/s: 0.582 ms; the target's t(1) = w + c·1,152 + l + e =
    5.66 ms (w without the input embedding, which a step gathers by row): a draft token costs 0.1027 of a decode
    step (no kernel overhead stated here)."""
    stated = {"memory_fraction": 0.9}
    eagle = run(serving(strategy=stated, assumptions=FIGURES | {"activation_reserve": "4 GB", "speculative_decoding": {
        "draft_tokens": 3, "acceptance_rate": 0.7, "method": "eagle"}}))
    q = eagle.value
    assert q("draft_parameters") == EAGLE_PARAMETERS == 251_666_432
    assert q("draft_weight_bytes") == 503_332_864
    assert q("weight_memory_bytes") == PARAMETERS * 2 + 503_332_864
    assert q("weight_read_seconds") == pytest.approx(W)          # the target's step does not read the draft
    assert q("cache_bytes_per_token_per_device") == 131_072 + 4_096
    budget = 80e9 * 0.9 - (PARAMETERS * 2 + 503_332_864) - 4e9
    assert q("max_concurrent_requests") == (budget // (135_168 * 1152)) == 330
    draft = ((EAGLE_PARAMETERS + HEAD) * 2 + 4_096 * 1152) / BANDWIDTH
    target = W + C * 1152 + L + E
    assert q("draft_step_cost") == pytest.approx(draft / target, rel=1e-9)
    assert draft / target == pytest.approx(0.1027, rel=1e-3)


def test_kernels_set_a_small_draft_step():
    """A stated 3 µs per kernel and 20 µs of engine overhead per step: the EAGLE head adds 9 × 1 + 2 = 11 kernels
    (33 µs) to its reads; the target's step 9 × 32 + 2 = 290 kernels (870 µs) and the 20 µs overhead."""
    overheads = FIGURES | {"kernel_overhead": "3 us", "step_overhead": "20 us"}
    eagle = run(serving(assumptions=overheads | {"speculative_decoding": {"draft_tokens": 3, "acceptance_rate": 0.7,
                                                                          "method": "eagle"}}))
    draft = ((EAGLE_PARAMETERS + HEAD) * 2 + 4_096 * 1152) / BANDWIDTH + 11 * 3e-6
    target = W + C * 1152 + L + E + 290 * 3e-6 + 20e-6
    assert eagle.value("draft_step_seconds") == pytest.approx(draft, rel=1e-9)
    assert eagle.value("draft_step_cost") == pytest.approx(draft / target, rel=1e-9)


def test_deepseek_v3_drafts_with_its_mtp_module():
    """DeepSeek-V3's MTP module (DeepSeek-V3 report §2.2): an MoE layer — attention 187,107,328, two norms 14,336,
    256 routed + 1 shared experts of 3 × 7,168 × 2,048 = 44,040,192, a router (7,168 + 1) × 256 = 1,835,264 — a
    2 × 7,168² = 102,760,448 projection and three norms 21,504: 11,610,068,224 parameters, 1 B each in FP8 over
    TP 8: 1,451,258,528 B per GPU. Its cache is one layer's latent, (512 + 64) × 2 B = 1,152 B per token."""
    result = run(serving("deepseek-v3", "h200", strategy={"tensor_parallel": 8, "expert_parallel": 8,
                                                          "weight_precision": "fp8"},
                         supply={"cluster": {"node": "dgx-h200"}},
                         assumptions={"speculative_decoding": {"draft_tokens": 1, "acceptance_rate": 0.8,
                                                               "method": "mtp"}}))
    module = 187_107_328 + 14_336 + 257 * 44_040_192 + 1_835_264 + 102_760_448 + 21_504
    assert module == 11_610_068_224
    assert result.value("draft_parameters") == module
    assert result.value("draft_weight_bytes") == pytest.approx(module / 8)
    assert result.value("draft_kv_bytes_per_token_per_device") == 1_152     # MLA's latent: not split by TP
    assert result.value("cache_bytes_per_token_per_device") == 70_272 + 1_152


def test_a_named_draft_model_and_prompt_lookup():
    """Llama-3.1-70B on TP 4 drafting with Llama-3.1-8B: the draft's 8,030,261,248 × 2 B / 4 per GPU, its cache
    32 layers × 2 × 8 × 128 × 2 B = 131,072 B per token split over min(4, 8) ranks: 32,768 B. Prompt lookup
    (ngram): nothing resident, a draft token costs nothing. A draft step reads all of the draft's weights but the
    embedding lookup: 8,030,261,248 − 525,336,576."""
    strategy, supply = {"tensor_parallel": 4}, {"cluster": {"node": "dgx-h100"}}
    named = run(serving("llama-3.1-70b", strategy=strategy, supply=supply, assumptions={"speculative_decoding": {
        "draft_tokens": 4, "acceptance_rate": 0.7, "draft_model": "llama-3.1-8b"}}))
    assert named.value("draft_weight_bytes") == PARAMETERS * 2 / 4
    assert named.value("draft_read_parameters") == PARAMETERS - HEAD       # all but its embedding lookup
    assert named.value("draft_kv_bytes_per_token_per_device") == 131_072 / 4
    assert 0 < named.value("draft_step_cost") < 1
    ngram = run(serving(assumptions=FIGURES | {"speculative_decoding": {"draft_tokens": 4, "acceptance_rate": 0.8,
                                                                        "method": "ngram"}}))
    assert ngram.value("draft_weight_bytes") == 0 and ngram.value("draft_step_cost") == 0
    context = 1024 + 128
    assert ngram.value("time_per_output_token_floor_seconds") == pytest.approx(
        decode_step(1, context, queries=5) / ((1 - 0.8 ** 5) / 0.2), rel=1e-9)


def test_contracts_without_a_named_draft_keep_their_meaning():
    """A contract that states only k and α still parses, its draft 0.05 of a decode step, nothing added to memory."""
    old = run(serving(assumptions={"speculative_decoding": {"draft_tokens": 4, "acceptance_rate": 0.7}}))
    plain = run(serving())
    assert old.value("draft_step_cost") == 0.05
    assert old.value("weight_memory_bytes") == plain.value("weight_memory_bytes")
    assert old.value("max_concurrent_requests") == plain.value("max_concurrent_requests")


@pytest.mark.parametrize("speculative, field", [
    ({"method": "eagle", "draft_model": "llama-3.1-8b"}, "assumptions.speculative_decoding.draft_model"),
    ({"draft_model": "llama-3.2-1b"}, "assumptions.speculative_decoding.draft_model"),
    ({"method": "mtp"}, "assumptions.speculative_decoding.method"),
    ({"draft_model": "missing/config.json"}, "assumptions.speculative_decoding.draft_model"),
    ({"draft_model": "llama-3.1-70b"}, "assumptions.speculative_decoding.draft_model"),   # larger than the target
])
def test_a_bad_draft_names_its_field(speculative, field):
    data = serving(assumptions={"speculative_decoding": {"draft_tokens": 2, "acceptance_rate": 0.7} | speculative})
    with pytest.raises(ContractError) as caught:
        run(data)
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


# --- N4: the MoE critical batch ------------------------------------------------------------------

def test_the_moe_critical_batch_counts_the_experts():
    """Mixtral-8x7B on TP 2 × EP 2 (H100, the figures stated): per GPU the non-expert weights 1,605,636,096 / 2
    (attention 1,342,177,280, embeddings and head 2 × 131,072,000, routers 1,048,576, norms 266,240) and the experts
    45,097,156,608 / 2, both in BF16; a token's GEMMs 2 × 12,617,781,248 / 2 FLOP (attention, 2 of 8 experts,
    routers; the LM head apart). A step reads them all but the input embedding (gathered by row: 131,072,000 / 2
    parameters): w = 0.550 ms, x = 16.83 ms, g = 25.5 ns: g·T = w + x·(1 − 0.75^T) crosses at T* = 681.3
    (0.75^681 ≈ 10⁻⁸⁵: all experts touched), not at w/g = 21.6."""
    result = run(serving("mixtral-8x7b", strategy={"tensor_parallel": 2, "expert_parallel": 2},
                         supply={"cluster": {"node": "dgx-h100"}}, assumptions=FIGURES))
    w = (1_605_636_096 - 131_072_000) / 2 * 2 / BANDWIDTH
    x = 45_097_156_608 / 2 * 2 / BANDWIDTH
    g = 2 * 12_617_781_248 / 2 / (PEAK * 0.5)
    assert result.value("weight_read_seconds") == pytest.approx(w)
    assert result.value("expert_read_seconds") == pytest.approx(x)
    assert result.value("gemm_seconds_per_token") == pytest.approx(g)
    assert result.value("critical_batch_size") == pytest.approx((w + x) / g, rel=1e-9)
    assert (w + x) / g == pytest.approx(681.3, abs=0.1)
    assert w / g == pytest.approx(21.6, abs=0.1)


def test_the_crossover_where_few_experts_are_touched():
    """g = 1, w = 10, x = 10, k/E = 0.05: T = 10 + 10·(1 − 0.95^T). By hand, iterating from 20: 16.42, 15.69,
    15.54, ... → 15.4797 (0.95^15.4797 = 0.45203, 10 + 5.4797). Elementwise over arrays; dense (k/E = 0): w / g."""
    from botec.serving.step import critical_step_tokens

    assert critical_step_tokens(1.0, 10.0, 10.0, 0.05) == pytest.approx(15.479688698, rel=1e-9)
    assert critical_step_tokens(2.0, 10.0, 10.0, 0.0) == 5.0
    many = critical_step_tokens(np.array([1.0, 2.0]), np.array([10.0, 10.0]), np.array([10.0, 10.0]),
                                np.array([0.05, 0.0]))
    assert many == pytest.approx([15.479688698, 5.0], rel=1e-9)


# --- N6: MLA prefill at the MHA width ------------------------------------------------------------

def test_mla_prefills_in_mha_form_and_decodes_absorbed():
    """DeepSeek-V3 (128 heads; d_qk = 128 + 64, d_v = 128; r_kv = 512, d_rope = 64) on TP 8, attention at 0.5 of the
    H200's 989.4 TFLOP/s: prefill a·(d_qk + d_v) = 128 × 320 = 40,960 multiply-adds per attended token per layer,
    decode a·(2·r_kv + d_rope) = 128 × 1,088 = 139,264. A 4,096-token prompt attends 4,096 × 2,048 tokens
    (causal): 2 × 61 × 40,960 / 8 / 494.7 TFLOP/s × 8,388,608 = 10.6 ms of attention, not 36.0 ms."""
    from botec.serving.step import StepModel

    result = run(serving("deepseek-v3", "h200", strategy={"tensor_parallel": 8, "weight_precision": "fp8"},
                         traffic={"prompt_tokens": 4096}, supply={"cluster": {"node": "dgx-h200"}},
                         assumptions={"attention_efficiency": 0.5}))
    prefill = 2 * 61 * 40_960 / 8 / (989.4e12 * 0.5)
    decode = 2 * 61 * 139_264 / 8 / (989.4e12 * 0.5)
    assert result.value("prefill_attention_seconds_per_context_token") == pytest.approx(prefill)
    assert result.value("attention_seconds_per_context_token") == pytest.approx(decode)
    attended = 4096 * 2048
    assert prefill * attended == pytest.approx(10.59e-3, rel=1e-3)
    assert decode * attended == pytest.approx(36.0e-3, rel=1e-3)
    model = StepModel.from_quantities(result.quantities)
    floor = model.step(0, 0, 4096, attended, 1)
    front = result.value("request_overhead_seconds")   # the engine's front-end (HTTP, tokenization), once
    assert result.value("time_to_first_token_floor_seconds") == pytest.approx(floor + front, rel=1e-9)
    absorbed = dataclasses.replace(model, prefill_attention_seconds_per_context_token=decode)
    assert absorbed.step(0, 0, 4096, attended, 1) - floor == pytest.approx((decode - prefill) * attended, rel=1e-9)


# --- N12: a shared prefix is held once -----------------------------------------------------------

RESERVED = {"memory_fraction": 0.9}
BUDGET = 80e9 * 0.9 - PARAMETERS * 2 - 4e9      # 51,939,477,504 B of KV cache on one H100


@pytest.mark.parametrize("reservation, tokens", [("incremental", 1024 + 128), ("full", 1024 + 256)])
def test_a_shared_prefix_is_cached_once(reservation, tokens):
    """1,024-token prompts, half of each in the prefix cache: one 512-token prefix held once, each request the rest
    of its R tokens (R = 1,152 held on average as blocks grow; 1,280 reserved whole): ⌊(K − 512·m) / ((R − 512)·m)⌋
    with m = 131,072 B — 618 requests against ⌊K / (1,152·m)⌋ = 343 (incremental); 515 against 309 (full)."""
    strategy = RESERVED | {"kv_reservation": reservation}
    shared = run(serving(strategy=strategy, assumptions={"activation_reserve": "4 GB", "prefix_cache_hit_rate": 0.5}))
    alone = run(serving(strategy=strategy, assumptions={"activation_reserve": "4 GB"}))
    assert shared.value("shared_prefix_tokens") == 512
    m = KV_PER_TOKEN
    assert shared.value("max_concurrent_requests") == (BUDGET - 512 * m) // ((tokens - 512) * m)
    assert alone.value("max_concurrent_requests") == BUDGET // (tokens * m)
    expected = {"incremental": (618, 343), "full": (515, 309)}[reservation]
    assert (shared.value("max_concurrent_requests"), alone.value("max_concurrent_requests")) == expected


def test_a_prefix_past_the_window_and_under_data_parallel_attention():
    """Mistral-7B's 4,096-token window: 7,168 + 1,024 tokens slide past their prefix, so nothing is shared.
    DeepSeek-V3 with attention data-parallel over 8 ranks: each rank caches the prefix for its own requests, 8
    copies of 70,272 / 8 B per token on the device's share."""
    windowed = run(serving("mistral-7b", traffic={"prompt_tokens": 7168, "output_tokens": 1024},
                           assumptions={"prefix_cache_hit_rate": 0.5}))
    assert windowed.value("shared_prefix_tokens") == 0
    spread = run(serving("deepseek-v3", "h200", strategy={"tensor_parallel": 8, "expert_parallel": 8,
                                                          "weight_precision": "fp8", "data_parallel_attention": True},
                         supply={"cluster": {"node": "dgx-h200"}}, assumptions={"prefix_cache_hit_rate": 0.5}))
    q = spread.value
    assert q("shared_prefix_copies") == 8
    assert q("max_concurrent_requests") == (q("kv_budget_bytes") - 70_272 / 8 * 512 * 8) // (70_272 / 8 * 640)


def test_the_simulator_holds_a_shared_prefix_once():
    """1,024-token prompts, 512 of them cached: 32 shared blocks of 16 tokens, held once, and 32 more per request.
    A cache of 192 blocks admits (192 − 32) / 32 = 5 prompts at once (⌊192 / 64⌋ = 3 if each held its own copy);
    one output token each, so all finish in their prefill step and the replica ends idle with only the prefix."""
    from botec.estimation import estimate_file
    from botec.simulate.fleet import run_fleet
    from botec.simulate.replica import Engine, Ledger

    from conftest import EXAMPLES

    result = estimate_file(EXAMPLES / "serve-llama3.1-8b-h100.yaml", ["supply.candidates=[]"])
    engine = dataclasses.replace(Engine.from_estimate(result), kv_capacity_blocks=192, prefix_cache_hit_rate=0.5)
    prompt, output = np.full(12, 1024), np.ones(12, dtype=int)
    cached = engine.cached_tokens(prompt)
    assert set(cached.tolist()) == {512}
    ledger = Ledger(np.zeros(12), prompt, output, cached)
    (replica,) = run_fleet(engine, ledger, 1)
    assert replica.stats.max_running == 5
    assert replica.stats.preemptions == 0
    assert np.isfinite(ledger.finish_s).all()
    assert replica.stats.idle_state["blocks"] == 0


# --- N5: data-parallel attention in the time model ----------------------------------------------------------------
# DeepSeek-V3 on one DGX H200 (TP 8, EP 8, attention data-parallel, FP8 weights): 61 layers (3 dense, 58 MoE), h = 7,168,
# 128 heads, MLA prefilled in MHA form at a·(d_qk + d_v) = 128 × (192 + 128); attention projections 11,413,547,008
# parameters in all; k = 8 of 256 experts. H200: 1,978.9 TFLOP/s FP8, 989.4 TFLOP/s BF16; the node's NVLink at
# 370 GB/s (the dgx-h200 preset botec reads for TP). GEMMs and attention stated at 0.5 of their peaks.

DSV3 = {"tensor_parallel": 8, "expert_parallel": 8, "data_parallel_attention": True, "weight_precision": "fp8",
        "engine": "sglang"}


def deepseek(strategy=None, **traffic):
    return run(serving("deepseek-v3", "h200", strategy={**DSV3, **(strategy or {})},
                       traffic={"prompt_tokens": 4096, "output_tokens": 1024, **traffic},
                       supply={"cluster": {"node": "dgx-h200"}},
                       assumptions={"matmul_efficiency": 0.5, "attention_efficiency": 0.5}))


def test_data_parallel_attention_sends_the_moe_tokens_all_to_all():
    """Balanced ranks: each of the 8 ranks sends its own 1/8 of the step's tokens. A decoding step runs DeepEP's
    low-latency kernels: one message per (token, expert), so 8 × 7/8 = 7 copies leave the rank (csrc/kernels/
    internode_ll.cu; per distinct rank it would be 8 × (1 − (7/8)^8) × 7/8 = 4.594737), FP8 with one FP32 scale per
    128 elements out (1 + 4/128 B) and BF16 back (2 B); the 3 dense layers gather and scatter (one all-reduce's
    bytes). Per token: 58 × 7 × 7,168 × 3.03125 B / 8 = 1,102,696 B; dense 3 × 2 × 7/8 × 7,168 × 2 B = 75,264 B;
    (1,102,696 + 75,264) / 370e9 = 3.1837 µs (plain TP's two all-reduces: 61 × 2 × 1.75 × 14,336 B / B_ar, their own step
    term, at the measured table's fitted bus bandwidth; 8.27 µs at the link's 370 GB/s)."""
    q = deepseek().quantities
    assert float(q["expert_destination_ranks"].value) == pytest.approx(4.594737, rel=1e-6)
    assert float(q["expert_remote_copies"].value) == 7
    assert float(q["moe_exchange_seconds_per_token"].value) == pytest.approx(1_102_696 / 370e9, rel=1e-6)
    assert float(q["communication_seconds_per_token"].value) == pytest.approx(1_177_960 / 370e9, rel=1e-6)
    plain = run(serving("deepseek-v3", "h200", strategy={**DSV3, "data_parallel_attention": False},
                        supply={"cluster": {"node": "dgx-h200"}})).quantities
    assert float(plain["communication_seconds_per_token"].value) == 0
    bus = float(plain["tp_allreduce_bus_bytes_per_s"].value)
    assert float(plain["allreduce_seconds_per_token"].value) == pytest.approx(61 * 2 * 1.75 * 14336 / bus, rel=1e-9)
    assert float(q["allreduce_seconds_per_token"].value) == 0   # DP attention: its gathers are in the line above
    assert float(plain["lone_prompt_excess_seconds"].value) == 0


def test_one_prompt_prefills_on_its_own_attention_rank():
    """A 4,096-token prompt's attention and projections run on its one rank; the step's costs divide them by 8, so
    the prompt takes (8/1 − 1) = 7 × its per-rank share more, per token:
      projections 2 × 11,413,547,008 / (8 × 0.5 × 1,978.9e12) = 2.88382 µs
      attention   2 × 61 × 40,960 / (8 × 0.5 × 989.4e12) × 2,048 attended = 2.58594 µs (1.262665 ns per token)
      all-to-all  58 × 7 × 7,168 × 3.03125 / (8 × 370e9) = 2.98026 µs (a colocated step: DeepEP's low-latency
                  kernels, one copy per token and expert; FP8 with its scales out, BF16 back)
    Δ = 4,096 × 7 × 8.45002 µs = 0.242279 s, added to the floor, the mean and the percentile TTFT (not to the TPOT).
    The audit's 71 ms attention and 90 ms projections on one rank: here 4,096 × 8 × 2.58594 µs = 84.7 ms of
    attention (e_attn 0.5, not 0.6) and 4,096 × 8 × 2.88382 µs = 94.5 ms of projections."""
    q = deepseek().quantities
    excess = 4096 * 7 * (2 * 11_413_547_008 / (8 * 0.5 * 1978.9e12) + 2 * 61 * 40_960 / (8 * 0.5 * 989.4e12) * 2048
                         + 58 * 7 * 7168 * (1 + 4 / 128 + 2) / (8 * 370e9))
    assert excess == pytest.approx(0.242279, rel=1e-5)
    assert float(q["lone_prompt_excess_seconds"].value) == pytest.approx(excess, rel=1e-5)
    # the floor: the balanced prefill step (a 4,096-token chunk, compute-bound) plus Δ; the step alone is the floor
    # of the same replica with Δ taken out, so the floor must exceed Δ by at least the chunk's GEMMs 4,096 × g
    floor = float(q["time_to_first_token_floor_seconds"].value)
    assert floor > excess + 4096 * float(q["gemm_seconds_per_token"].value)
    for name in ("time_to_first_token_seconds", "time_to_first_token_percentile_seconds"):
        assert float(q[name].value) >= floor
    # an attention group of 8 ranks is plain TP's split of the prompt: no excess
    assert float(deepseek({"attention_tensor_parallel": 8}).quantities["lone_prompt_excess_seconds"].value) == 0


def test_attention_tensor_parallel_groups_the_ranks():
    """Llama-3.1-8B (32 heads, 8 KV heads; attention 32 × 4,096 × (4,096 + 2 × 1,024 + 4,096) = 1,342,177,280
    parameters). TP 8 with attention groups of 4: D = 2 groups, each caching its own requests and splitting its heads
    4 ways: the KV splits 2 × min(4, 8) = 8 ways; each rank holds 1/4 of the attention, 1/8 beyond its TP share:
    1,342,177,280 × (1/4 − 1/8) = 167,772,160 replicated parameters."""
    q = run(serving(strategy={"tensor_parallel": 8, "data_parallel_attention": True,
                              "attention_tensor_parallel": 4})).quantities
    assert float(q["kv_tensor_split"].value) == 8
    assert float(q["replicated_attention_parameters"].value) == pytest.approx(167_772_160)
    assert float(q["shared_prefix_copies"].value) == 2


def test_data_parallel_attention_frees_tp_from_the_heads():
    """TP 6 does not divide 32 heads: refused under plain TP, allowed under DP attention (groups of 1, or of 2, which
    divides both 32 and 6); groups of 3 do not divide the heads, groups of 4 not TP 6."""
    with pytest.raises(ContractError, match="does not divide"):
        run(serving(strategy={"tensor_parallel": 6}))
    run(serving(strategy={"tensor_parallel": 6, "data_parallel_attention": True}))
    run(serving(strategy={"tensor_parallel": 6, "data_parallel_attention": True, "attention_tensor_parallel": 2}))
    with pytest.raises(ContractError, match="attention_tensor_parallel 3 does not divide the 32"):
        run(serving(strategy={"tensor_parallel": 6, "data_parallel_attention": True, "attention_tensor_parallel": 3}))
    with pytest.raises(ContractError, match="does not divide tensor_parallel 6"):
        run(serving(strategy={"tensor_parallel": 6, "data_parallel_attention": True, "attention_tensor_parallel": 4}))
    with pytest.raises(ContractError, match="set data_parallel_attention"):
        run(serving(strategy={"tensor_parallel": 8, "attention_tensor_parallel": 2}))
