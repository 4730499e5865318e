"""Parallel strategies: ZeRO, Korthikanti activations, FLOPs conventions, collectives, layout checks."""

from __future__ import annotations

import pytest

from botec.contract import parse_contract
from botec.estimation import estimate
from botec.formulas import collectives


def contract(model, count=8, strategy=None, assumptions=None, supply=None, tokens="1B", sequence=2048):
    return {
        "workload": {"model": model, "tokens": tokens, "sequence_length": sequence},
        "supply": {"accelerator": "h100-sxm", "count": count, **(supply or {})},
        "strategy": {"micro_batch_size": 1, **(strategy or {})},
        "assumptions": assumptions or {},
    }


def run(data):
    return estimate(parse_contract(data))


# --- ZeRO: Rajbhandari et al. 2020, section 5 (figure 1): 7.5B parameters, 64-way DP ---------------

@pytest.mark.parametrize("stage, expected_gb", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_model_state_per_device(stage, expected_gb):
    data = contract({"parameters": "7.5B", "layers": 32, "hidden_size": 4096}, count=64,
                    strategy={"zero_stage": stage}, supply={"network": {"bandwidth": "25 GB/s"}})
    result = run(data)
    assert round(result.value("state_bytes") / 1e9, 1) == pytest.approx(expected_gb, abs=0.05)


def test_fsdp_names_map_to_zero_stages():
    base = {"parameters": "7.5B", "layers": 32, "hidden_size": 4096}
    for fsdp, stage in (("no_shard", 0), ("shard_grad_op", 2), ("full_shard", 3)):
        result = run(contract(base, count=64, strategy={"fsdp": fsdp}, supply={"network": {"bandwidth": "25 GB/s"}}))
        assert result.value("zero_stage") == stage


def test_hybrid_shard_shards_within_a_node_and_replicates_across():
    data = contract("llama-2-7b", count=32, strategy={"fsdp": "hybrid_shard"}, supply={"cluster": {"node": "dgx-h100"}})
    result = run(data)
    assert result.value("sharding_degree") == 8                    # one node
    assert result.value("state_bytes") == pytest.approx(6_738_415_616 * 16 / 8)
    # reduce-scatter over 8 ranks + all-reduce of the 1/8 shard across 4 replicas
    g = 6_738_415_616 * 2
    assert result.value("ring_bytes_sent_per_step") == pytest.approx(7 / 8 * g + 2 * 3 / 4 * g / 8)


# --- Korthikanti et al. 2022, table 2, on GPT-3 175B (public validation case mem-korthikanti-activations) -----
# s = 2048, b = 1, h = 12,288, a = 96, plain 4h MLP: sbh = 25,165,824; 5as/h = 80

S, B, H, A = 2048, 1, 12288, 96
SBH = S * B * H
GPT3 = {"tensor_parallel": 8}


@pytest.mark.parametrize("recompute, sequence_parallel, expected", [
    ("none", False, SBH * (10 + 24 / 8 + 5 * A * S / (H * 8))),
    ("none", True, SBH * (34 / 8 + 5 * A * S / (H * 8))),
    ("selective", False, SBH * (10 + 24 / 8)),
    ("selective", True, SBH * 34 / 8),           # 106,954,752 B: the case's 1.07e8
    ("full", False, 2 * SBH),
    ("full", True, 2 * SBH / 8),
])
def test_korthikanti_per_layer(recompute, sequence_parallel, expected):
    data = contract("gpt3-175b", count=8, sequence=S,
                    strategy={"tensor_parallel": 8, "sequence_parallel": sequence_parallel, "recompute": recompute,
                              "framework": "megatron-2022"},   # the paper's stack: eager attention, FP32 logits
                    assumptions={"activation_model": "korthikanti", "attention_kernel": "eager"})
    result = estimate(parse_contract(data))
    assert result.value("activation_bytes_per_layer") == pytest.approx(expected)
    output = 4 * S * B * (H + 50257) / 8                                  # §4.3: 4sbh(1 + V/h)/t
    remat = SBH * (10 + 24 / 8 + 5 * A * S / (H * 8)) if recompute == "full" and not sequence_parallel else \
        SBH * (34 / 8 + 5 * A * S / (H * 8)) if recompute == "full" else 0  # the layer being recomputed
    # 96 layers, p = 1; the layer being recomputed is never alive with the output layer's logits (freed first)
    assert result.value("activation_bytes") == pytest.approx(96 * expected + max(output, remat))


def test_korthikanti_without_parallelism_is_the_papers_worked_example():
    result = estimate(parse_contract(contract("gpt3-175b", count=1, sequence=S, assumptions={
        "activation_model": "korthikanti", "attention_kernel": "eager"})))
    assert result.value("activation_bytes_per_layer") == 2_868_903_936          # sbh(34 + 5as/h)
    full = estimate(parse_contract(contract("gpt3-175b", count=1, sequence=S, strategy={"recompute": "full"})))
    assert full.value("activation_bytes_per_layer") == 50_331_648               # 2sbh


def test_fused_attention_keeps_no_scores():
    """FlashAttention (the default) keeps no s × s tensor: no recomputation keeps what selective would."""
    eager = run_unchecked(contract("gpt3-175b", count=8, sequence=S, strategy={"tensor_parallel": 8},
                                   assumptions={"attention_kernel": "eager"}))
    flash = run_unchecked(contract("gpt3-175b", count=8, sequence=S, strategy={"tensor_parallel": 8}))
    assert flash.value("activation_bytes_per_layer") == pytest.approx(SBH * (10 + 24 / 8))
    assert eager.value("activation_bytes_per_layer") - flash.value("activation_bytes_per_layer") == \
        pytest.approx(5 * A * S * S * B / 8)


def test_activation_widths_follow_gqa_and_gated_mlps():
    """Llama-2-7B (MHA, SwiGLU f = 11,008): Q, K, V, output 4h and gate, up, product 3f replace GPT's 4h + 2·4h."""
    h, f = 4096, 11008
    result = run_unchecked(contract("llama-2-7b", count=1, sequence=S))
    expected = S * B * (10 * h + 2 * (4 * h + 3 * f))
    assert result.value("activation_bytes_per_layer") == pytest.approx(expected)
    # Llama-3.1-70B: GQA 64 query heads, 8 KV heads of 128: a·d + 2·k·d + a·d = 8,192 + 2,048 + 8,192
    llama = run_unchecked(contract("llama-3.1-70b", count=8, sequence=S, strategy={"tensor_parallel": 8}))
    assert llama.value("attention_activation_width") == 8192 + 2 * 8 * 128 + 8192


def test_moe_layers_keep_their_experts_activations():
    """Mixtral (top-2 of 8, f_e = 14,336, gated): each routed token keeps its permuted copy and gate, up and
    product per expert, 2·(h + 3f_e): 61·sbh per layer, not a dense layer's 34 (10 whole + 5 GQA attention + 46)."""
    h, f = 4096, 14336
    result = run_unchecked(contract("mixtral-8x7b", count=8, sequence=S, strategy={"expert_parallel": 8}))
    width = 2 * (h + 3 * f)
    assert result.value("mlp_activation_width") == width
    per_layer = S * B * (10 * h + 2 * (4 * h - 2 * h + 2 * 8 * 128 + width))  # GQA: 8 KV heads of 128
    assert result.value("activation_bytes_per_layer") == pytest.approx(per_layer)
    assert per_layer / (S * B * h) == pytest.approx(61.0)


def run_unchecked(data):
    return estimate(parse_contract(data))


def test_pipeline_keeps_p_micro_batches_on_the_first_stage():
    """Korthikanti et al. §4.2: under 1F1B the first of p stages holds p micro-batches of its L/p layers (L layers'
    worth), interleaving adds (p − 1)/(p·v); with fewer micro-batches than stages only m are in flight."""
    plan = {"pipeline_parallel": 4, "gradient_accumulation_steps": 8, "loss": "fused"}   # FP32 logits: 4 B each
    one_f_one_b = run(contract("llama-2-7b", count=8, strategy=plan))
    interleaved = run(contract("llama-2-7b", count=8, strategy=plan | {"pipeline_schedule": "interleaved",
                                                                       "virtual_pipeline_stages": 2}))
    starved = run(contract("llama-2-7b", count=8, strategy={"pipeline_parallel": 4, "loss": "fused"}))   # m = 1
    per_layer = one_f_one_b.value("activation_bytes_per_layer")
    assert one_f_one_b.value("activation_bytes") == pytest.approx(32 * per_layer)
    assert interleaved.value("activation_bytes") == pytest.approx(32 * per_layer * (1 + 3 / 8))
    # m = 1: one micro-batch in flight; the last stage's 8 layers and its output layer are the peak
    output = 4 * 2048 * (4096 + 32000)
    assert starved.value("activation_bytes") == pytest.approx(8 * per_layer + output)


# --- FLOPs per token --------------------------------------------------------------------------------

def test_attention_flops_conventions_and_recompute():
    full = run(contract("llama-2-7b", count=8, sequence=4096))
    causal = run(contract("llama-2-7b", count=8, sequence=4096, assumptions={"attention_flops": "causal"}))
    none = run(contract("llama-2-7b", count=8, sequence=4096, assumptions={"attention_flops": "none"}))
    matmul = 6_738_415_616 - 131_072_000               # all but the input-embedding lookup
    attention = 12 * 32 * 32 * 128 * 4096               # PaLM: 12·L·H·Q·T
    assert none.value("model_flops_per_token") == 6 * matmul
    assert full.value("model_flops_per_token") == pytest.approx(6 * matmul + attention)
    assert causal.value("model_flops_per_token") == pytest.approx(6 * matmul + attention / 2)
    megatron = {"recompute": "selective", "framework": "megatron-core"}   # Megatron's selective: the attention core
    selective = run(contract("llama-2-7b", count=8, sequence=4096, strategy=megatron,
                             assumptions={"attention_kernel": "eager"}))
    full_recompute = run(contract("llama-2-7b", count=8, sequence=4096, strategy={"recompute": "full"}))
    assert selective.value("hardware_flops_per_token") == pytest.approx(6 * matmul + attention * 4 / 3)
    # under flash attention (the default) selective keeps no scores to drop: nothing is recomputed (audit N11)
    flash = run(contract("llama-2-7b", count=8, sequence=4096, strategy=megatron))
    assert flash.value("hardware_flops_per_token") == pytest.approx(6 * matmul + attention)
    # torchtitan's selective (op-level SAC, the default stack) recomputes K, O and up of every layer: 3 × h² per
    # layer for Llama 2 7B (multi-head attention, f = 11,008): 2 × 32 × (4,096² + 4,096² + 4,096 × 11,008)
    titan = run(contract("llama-2-7b", count=8, sequence=4096, strategy={"recompute": "selective"}))
    assert titan.value("hardware_flops_per_token") == pytest.approx(
        6 * matmul + attention + 2 * 32 * (2 * 4096 ** 2 + 4096 * 11008))
    # Korthikanti §5: full recomputation repeats the layers' forward, not the output layer's V·h matmul
    head = 32000 * 4096
    assert full_recompute.value("hardware_flops_per_token") == pytest.approx(8 * matmul - 2 * head + attention * 4 / 3)
    assert full_recompute.value("model_flops_per_token") == full.value("model_flops_per_token")


def test_moe_flops_use_active_parameters():
    result = run(contract("mixtral-8x7b", count=8, assumptions={"attention_flops": "none"}))
    assert result.value("model_flops_per_token") == 6 * (12_879_925_248 - 131_072_000)


# --- collectives: the α–β model against NCCL's bus-bandwidth definitions ---------------------------
# NCCL doc/PERFORMANCE.md: busbw = algbw × 2(n−1)/n (all-reduce), (n−1)/n (reduce-scatter,
# all-gather, all-to-all); algbw = S / t. At busbw = link bandwidth B: t = S × factor / B.

def test_ring_all_reduce_matches_nccl_bus_bandwidth():
    size, n, bandwidth = 1e9, 8, 100e9
    t = collectives.all_reduce_seconds(size, n, bandwidth, 0.0)
    assert t == pytest.approx(0.0175)                     # 1 GB × 2·7/8 / 100 GB/s
    algbw = size / t
    assert algbw * 2 * (n - 1) / n == pytest.approx(bandwidth)


def test_gather_family_matches_nccl_bus_bandwidth():
    """Reduce-scatter, all-gather and all-to-all send (n−1)/n · S per rank: busbw = algbw × (n−1)/n."""
    size, n, bandwidth = 4e9, 16, 50e9
    t = collectives.gather_bytes_sent(size, n) / bandwidth
    assert t == pytest.approx(0.075)                      # 4 GB × 15/16 / 50 GB/s
    assert size / t * (n - 1) / n == pytest.approx(bandwidth)


def test_latency_terms_and_tree():
    # ring: 2(n−1) steps of α; tree: 2⌈log₂ n⌉
    assert collectives.all_reduce_seconds(0.0, 8, 1e9, 5e-6) == pytest.approx(14 * 5e-6)
    assert collectives.all_reduce_seconds(0.0, 8, 1e9, 5e-6, tree=1) == pytest.approx(6 * 5e-6)
    assert collectives.all_reduce_latency_steps(8) == 14 and collectives.all_reduce_latency_steps(9, tree=1) == 8
    assert collectives.all_reduce_seconds(1e9, 1, 1e9, 5e-6) == 0      # one rank: nothing to do


def test_pipeline_sends_by_hand():
    """Llama-2-7B on 8 × H100 (dgx-h100), PP 8, m = 4: 2 × 4 sends of one hidden state (1 × 2,048 × 4,096 × 2 B)
    per step; the 8 stages share one node, so each send crosses NVLink (achieved 370 GB/s, α 3.4 µs)."""
    result = run(contract("llama-2-7b", count=8, strategy={"pipeline_parallel": 8, "gradient_accumulation_steps": 4},
                          supply={"cluster": {"node": "dgx-h100"}}))
    message = 1 * 2048 * 4096 * 2
    assert result.value("pp_bytes_sent_per_step") == pytest.approx(2 * 4 * message)
    assert result.value("pp_communication_seconds") == pytest.approx(2 * 4 * (3.4e-6 + message / 370e9))


def test_tensor_parallel_traffic_and_tier():
    within = run(contract("llama-2-7b", count=16, strategy={"tensor_parallel": 8},
                          supply={"cluster": {"node": "dgx-h100"}}))
    message = 1 * 2048 * 4096 * 2                        # b·s·h·2 bytes
    per_step = 32 * 1 * 4 * 2 * 7 / 8 * message         # layers × micro-batches × 4 all-reduces × ring bytes
    assert within.value("tp_bytes_sent_per_step") == pytest.approx(per_step)
    assert within.value("tp_link_bytes_per_s") == pytest.approx(370e9)  # NVLink 4, achieved (nccl-tests #212)
    across = run(contract("llama-2-7b", count=16, strategy={"tensor_parallel": 16},
                          supply={"cluster": {"node": "dgx-h100"}}))
    # 8 of the 16 ranks in each node: their 8 NICs (46 GB/s achieved each) against 8/7 of NVLink's 370 GB/s
    assert across.value("tp_link_bytes_per_s") == pytest.approx(min(8 * 46e9, 8 / 7 * 370e9))
    assert any("tensor-parallel collectives cross the inter-node tier" in f.message for f in across.findings)


def test_expert_parallel_all_to_all():
    result = run(contract("mixtral-8x7b", count=8, strategy={"expert_parallel": 8, "zero_stage": 3},
                          supply={"cluster": {"node": "dgx-h100"}}))
    dispatch = 2048 * 4096 * 2 * 2                        # b·s·h·2 bytes × top-2
    assert result.value("ep_bytes_sent_per_step") == pytest.approx(32 * 4 * 7 / 8 * dispatch)
    # each device holds one expert of each layer: 45.1B / 8 expert parameters
    experts = 32 * 8 * 176_160_768
    assert result.value("expert_parameters_per_device") == pytest.approx(experts / 8)


def test_pipeline_bubble_in_the_component_step():
    """Llama-2-7B on 8 H100s, PP 4, m = 8, micro-batch 1 of 2,048 tokens: DP 2, 32,768 tokens per step, at a
    stated HFU of 0.30.

    Hardware FLOPs per token = 6 × 6,607,343,616 (matmul) + 12 × 32 × 32 × 128 × 2,048 (attention, full);
    each accelerator computes 1/8 of the step at 989.4 TFLOP/s × 0.30. The bubble is (p − 1)/m of the ideal
    time, which includes the pipeline sends on the critical path: 2 per micro-batch of 2,048 × 4,096 × 2 B over
    NVLink (370 GB/s achieved, α 3.4 µs).
    """
    data = contract("llama-2-7b", count=8, strategy={"pipeline_parallel": 4, "gradient_accumulation_steps": 8},
                    assumptions={"single_accelerator_hfu": 0.30}, supply={"cluster": {"node": "dgx-h100"}})
    result = run(data)
    assert result.choices["compute"] == "hardware_flops"
    flops_per_token = 6 * (6_738_415_616 - 131_072_000) + 12 * 32 * 32 * 128 * 2048
    compute = flops_per_token * 32_768 / (8 * 989.4e12 * 0.30)
    assert result.value("compute_seconds_per_step") == pytest.approx(compute)
    sends = 2 * 8 * (3.4e-6 + 2048 * 4096 * 2 / 370e9)
    assert result.value("pipeline_bubble_seconds") == pytest.approx((compute + sends) * 3 / 8)


def test_mfu_divides_model_flops_and_hfu_executed_flops():
    """Formula audit row 5: a stated MFU divides the model's FLOPs; an HFU divides what is executed, recomputation
    included. Llama-2-7B, full recompute: the same 0.5 means a shorter compute time as an MFU."""
    base = {"strategy": {"recompute": "full"}}
    as_mfu = run(contract("llama-2-7b", count=8, strategy=base["strategy"], assumptions={"single_accelerator_mfu": 0.5}))
    as_hfu = run(contract("llama-2-7b", count=8, strategy=base["strategy"], assumptions={"single_accelerator_hfu": 0.5}))
    ratio = as_hfu.value("compute_seconds_per_step") / as_mfu.value("compute_seconds_per_step")
    assert ratio == pytest.approx(as_mfu.value("hardware_flops_per_token") / as_mfu.value("model_flops_per_token"))
    assert as_mfu.value("hardware_flops_per_s_per_accelerator") > as_mfu.value("model_flops_per_s_per_accelerator")


def test_global_batch_sets_accumulation():
    result = run(contract("llama-2-7b", count=8, strategy={"global_batch_size": 64, "micro_batch_size": 2}))
    assert result.value("gradient_accumulation_steps") == 4               # 64 / (2 × 8)
    assert result.value("global_tokens_per_step") == 64 * 2048


def test_lesson_reference_is_unchanged_by_the_new_machinery(lesson):
    assert lesson.value("run_seconds") == pytest.approx(31_250)
    assert lesson.value("planned_device_bytes") == pytest.approx(25.18e9, rel=1e-3)
    assert lesson.value("ring_bytes_sent_per_step") == pytest.approx(3e9)
    assert lesson.choices == {"step_time": "efficiency", "activations": "saved_tensor_factor", "compute": "model_flops"}


def test_vectorized_layouts_through_the_same_definitions():
    import numpy as np

    from botec.inputs import build_inputs

    data = contract("llama-2-7b", count=64, strategy={"tensor_parallel": 8}, supply={"cluster": {"node": "dgx-h100"}},
                    assumptions={"step_time_model": "components", "activation_model": "korthikanti"})
    inputs = build_inputs(parse_contract(data))
    varied = inputs.vary({"strategy.tensor_parallel": np.array([1.0, 2.0, 4.0, 8.0])})
    assert varied.valid.all()
    arrays = inputs.graph.evaluate(varied.given, choices=inputs.choices)
    for i, tp in enumerate((1, 2, 4, 8)):
        single = run(contract("llama-2-7b", count=64, strategy={"tensor_parallel": tp},
                              supply={"cluster": {"node": "dgx-h100"}},
                              assumptions={"step_time_model": "components", "activation_model": "korthikanti"}))
        assert arrays["step_seconds"].value[i] == pytest.approx(single.value("step_seconds"))
        assert arrays["planned_device_bytes"].value[i] == pytest.approx(single.value("planned_device_bytes"))


def test_a_misfit_names_its_parts_and_the_relief():
    """The relief is the option (a higher ZeRO stage, more recomputation) that fits at the least cost: under the
    component step model (the default, as here) the one whose step is shortest. Each option is estimated here
    through the public path, independently of how the finding searched them. (With the data-parallel overlap derived
    from torchtitan's schedule, FSDP's layer-by-layer prefetch hides what ZeRO-1's unoverlapped weight all-gather
    after the step cannot: ZeRO-3 is the shortest step.)"""
    data = contract("llama-3.1-70b", count=64, sequence=8192,
                    strategy={"tensor_parallel": 8, "pipeline_parallel": 2, "sequence_parallel": True},
                    supply={"cluster": {"node": "dgx-h100"}}, assumptions={"activation_model": "korthikanti"})
    result = run(data)
    memory = [f for f in result.findings if f.account == "memory"][0]
    assert memory.level == "fail"
    assert "optimizer" in memory.message and "activations" in memory.message
    options = []
    for zero in range(4):
        for recompute in ("none", "selective", "full"):
            if (zero, recompute) == (0, "none"):
                continue
            option = run({**data, "strategy": {**data["strategy"], "zero_stage": zero, "recompute": recompute}})
            if option.fits:
                options.append((option.value("step_seconds"), zero, recompute))
    _, zero, recompute = min(options)
    expected = " with ".join([f"ZeRO-{zero} over 4 ranks"] * (zero > 0) + [f"{recompute} recomputation"]
                             * (recompute != "none"))
    assert f"; {expected} frees" in memory.message and "and fits" in memory.message


def test_node_presets_are_in_the_catalog(cli):
    import json

    code, out, err = cli("catalog", "-f", "json")
    nodes = {n["key"]: n for n in json.loads(out)["nodes"]}
    assert {"dgx-a100", "dgx-h100", "dgx-h200", "tpu-v5p-slice"} <= set(nodes)
    assert nodes["dgx-h100"]["inter_node_bytes_per_s"] == pytest.approx(50e9)       # 400 Gb/s per GPU
    assert nodes["dgx-h100"]["accelerators_per_node"] == 8
