"""The op-level compute model and the physics fixes of the formula audit, each against a hand derivation."""

from __future__ import annotations

import pytest

from botec.catalog.efficiency import families, matmul_efficiency_at
from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate
from botec.formulas import collectives
from botec.inputs.efficiency import fit_curve

PEAK, BANDWIDTH = 989.4e12, 3.35e12          # H100 SXM: BF16 dense, HBM3


def contract(model="llama-2-7b", count=8, strategy=None, assumptions=None, supply=None, sequence=2048):
    return {"workload": {"model": model, "tokens": "1B", "sequence_length": sequence},
            "supply": {"accelerator": "h100-sxm", "count": count, "cluster": {"node": "dgx-h100"}, **(supply or {})},
            "strategy": {"micro_batch_size": 1, **(strategy or {})},
            "assumptions": assumptions or {}}


def run(data):
    return estimate(parse_contract(data))


FIGURES = {"matmul_efficiency": 0.5, "kernel_overhead": "10 us", "memory_bandwidth_efficiency": 0.8,
           "attention_efficiency": 0.4}


def gemm(m, k, n, e=0.5, t0=10e-6, e_mem=0.8):
    return max(2 * m * k * n / (e * PEAK), 2 * (m * k + k * n + m * n) / (e_mem * BANDWIDTH)) + t0


def test_attention_projections_are_two_gemms_on_the_roofline():
    """Llama-2-7B, T = 2,048 tokens, TP 1: QKV 2,048 × 4,096 by 4,096 × 12,288 and the output 4,096 × 4,096."""
    result = run(contract(assumptions=FIGURES))
    expected = gemm(2048, 4096, 12288) + gemm(2048, 4096, 4096)
    assert result.value("attention_projection_seconds") == pytest.approx(expected)
    # gated MLP: up and gate 4,096 × 2 × 11,008, down 11,008 × 4,096
    assert result.value("dense_mlp_seconds") == pytest.approx(gemm(2048, 4096, 22016) + gemm(2048, 11008, 4096))


def test_tensor_parallelism_splits_the_gemms():
    result = run(contract(strategy={"tensor_parallel": 4}, assumptions=FIGURES))
    expected = gemm(2048, 4096, 12288 / 4) + gemm(2048, 4096 / 4, 4096)
    assert result.value("attention_projection_seconds") == pytest.approx(expected)


def test_fused_attention_runs_the_causal_half_at_its_efficiency():
    """FLOPs 2·T·s·a·(d_qk + d_v)·½; backward 2.5× (FlashAttention-2 recomputes the scores)."""
    result = run(contract(assumptions=FIGURES))
    flops = 2 * 2048 * 2048 * 32 * (128 + 128) * 0.5
    assert result.value("attention_core_flops") == pytest.approx(flops)
    assert result.value("attention_core_seconds") == pytest.approx(flops / (0.4 * PEAK) + 10e-6)
    assert result.value("attention_core_backward_seconds") == pytest.approx(2.5 * flops / (0.4 * PEAK) + 10e-6)


def test_memory_bound_ops_at_the_sustained_bandwidth():
    """Two norms and two residual adds move 10·h elements per token, the SwiGLU 3·f; 5 fused kernels. Eager
    PyTorch (the torchtitan stack's default) moves 4 times the bytes in 28 kernels (catalog/stacks.yaml)."""
    elements = 2048 * 10 * 4096 + 2048 * 3 * 11008
    fused = run(contract(strategy={"elementwise": "fused"}, assumptions=FIGURES))
    assert fused.value("elementwise_seconds") == pytest.approx(2 * elements / (0.8 * BANDWIDTH) + 5 * 10e-6)
    eager = run(contract(assumptions=FIGURES))
    assert eager.value("elementwise_seconds") == pytest.approx(4 * 2 * elements / (0.8 * BANDWIDTH) + 28 * 10e-6)
    megatron = run(contract(strategy={"framework": "megatron-core"}, assumptions=FIGURES))
    assert megatron.value("elementwise_seconds") == fused.value("elementwise_seconds")


def test_the_step_is_its_micro_batches_the_optimizer_the_bubble_and_exposed_communication():
    result = run(contract(count=8, strategy={"gradient_accumulation_steps": 4}, assumptions=FIGURES))
    layer = (result.value("layer_forward_seconds") + result.value("layer_backward_seconds")
             + result.value("layer_recompute_seconds"))
    per_microbatch = 32 * layer + result.value("output_layer_seconds")          # one stage holds all 32 layers
    assert result.value("microbatch_compute_seconds") == pytest.approx(per_microbatch)
    # Adam streams 2 × (master + moments) + 2 × the gradients it updates + the working weights: 30 B/parameter
    assert result.value("optimizer_step_bytes") == pytest.approx(30 * 6_738_415_616)
    assert result.value("compute_seconds_per_step") == pytest.approx(4 * per_microbatch
                                                                     + result.value("optimizer_step_seconds"))
    assert result.value("step_seconds") == pytest.approx(result.value("compute_seconds_per_step")
                                                         + result.value("exposed_communication_seconds"))


def test_larger_models_sustain_a_larger_share_of_the_peak():
    """The size-dependent curve: the same layout runs a wider model at a higher hardware-FLOPs utilization."""
    small = run(contract("llama-3.1-8b", count=8, strategy={"tensor_parallel": 8}))
    large = run(contract("llama-3.1-70b", count=8, strategy={"tensor_parallel": 8, "recompute": "full"}))
    assert large.value("hardware_flops_utilization") > small.value("hardware_flops_utilization")


def test_the_catalog_curve_is_e_of_f_from_two_figures():
    ampere = families()["ampere"]
    e, t0 = ampere["matmul_efficiency"].value, ampere["kernel_overhead"].value
    f = 16e9
    assert matmul_efficiency_at(f, 312e12, e, t0) == pytest.approx(f / (312e12 * (f / (e * 312e12) + t0)))
    assert matmul_efficiency_at(1e15, 312e12, e, t0) == pytest.approx(e, rel=0.01)   # large GEMMs approach e_mm
    for family in families().values():
        for figure in family.figures.values():
            assert figure.low <= figure.value <= figure.high and figure.source


def test_a_measured_curve_is_fitted_back_to_its_figures():
    """Points made with e_mm = 0.7 and t0 = 5 µs on a 989.4 TFLOP/s peak give those two back exactly."""
    points = [(g, g * 1e9 / (PEAK * (g * 1e9 / (0.7 * PEAK) + 5e-6))) for g in (0.5, 4.0, 64.0, 512.0)]
    fitted = fit_curve(points, [(8.0, 0.5), (100.0, 0.8), (1000.0, 0.9), (3000.0, 0.92)], PEAK)
    assert fitted["matmul_efficiency"] == pytest.approx(0.7)
    assert fitted["kernel_overhead"] == pytest.approx(5e-6)
    assert fitted["memory_bandwidth_efficiency"] == pytest.approx((0.8 + 0.9 + 0.92) / 3)


CURVE = """\
schema: botec.efficiency-curve/1
device: {name: NVIDIA H100 80GB HBM3, accelerator: h100-sxm, backend: cuda, torch: 2.13.0}
precision: bf16
created: '2026-11-30T12:00:00+00:00'
peak_flops_per_s: 989.4e12
peak_source: catalog h100-sxm bf16
memory_bytes_per_s: 3.35e12
memory_bandwidth_source: catalog h100-sxm
matmul:
- {gflop: 1.0, efficiency: 0.4, m: 2048, k: 4096, n: 64, seconds: 2.5e-06}
- {gflop: 100.0, efficiency: 0.7, m: 4096, k: 4096, n: 3000, seconds: 1.4e-04}
memory:
- {megabytes: 100.0, efficiency: 0.85}
"""


def test_a_curve_measured_on_this_accelerator_replaces_the_catalogs(tmp_path):
    (tmp_path / "curve.yaml").write_text(CURVE)
    data = contract(assumptions={"efficiency_curve": "curve.yaml"})
    result = estimate(parse_contract(data), base_dir=tmp_path)
    quantity = result.quantities["matmul_efficiency"]
    assert quantity.provenance == "measured" and "curve.yaml" in quantity.source
    assert result.value("memory_bandwidth_efficiency") == pytest.approx(0.85)
    # on another accelerator the curve is refused, naming the field
    data["supply"]["accelerator"] = "a100-sxm-80gb"
    data["supply"]["cluster"] = {"node": "dgx-a100"}
    with pytest.raises(ContractError) as caught:
        estimate(parse_contract(data), base_dir=tmp_path)
    assert caught.value.field == "assumptions.efficiency_curve" and "h100-sxm" in str(caught.value)


# --- collectives across nodes (audit row 17) ---------------------------------------------------------

def test_hierarchical_rings_pool_the_nodes_nics():
    # 8 ranks per DGX A100: 8 NICs of 25 GB/s, or 8/7 of NVLink's 230 GB/s, whichever is slower
    assert collectives.hierarchical_bytes_per_s(8, 230e9, 25e9) == pytest.approx(200e9)
    assert collectives.hierarchical_bytes_per_s(1, 230e9, 25e9) == pytest.approx(25e9)        # one rank: one NIC
    assert collectives.hierarchical_bytes_per_s(8, 100e9, 25e9) == pytest.approx(8 / 7 * 100e9)  # NVLink-bound


def test_all_to_all_sends_off_node_bytes_through_each_ranks_nic():
    n, local = 16, 8
    expected = (15 / 16) / max(8 / (16 * 46e9), 7 / (16 * 370e9))
    assert collectives.all_to_all_bytes_per_s(n, local, 370e9, 46e9) == pytest.approx(expected)


def test_fsdp_across_nodes_uses_every_nic():
    """Llama-2-7B FSDP over 16 H100s (2 nodes): 8 shard ranks per node pool 8 NICs (46 GB/s achieved each)."""
    result = run(contract(count=16, strategy={"fsdp": "full_shard"}))
    assert result.value("shard_link_bytes_per_s") == pytest.approx(min(8 * 46e9, 8 / 7 * 370e9))


# --- ZeRO and FSDP synchronize as often as their policy says (audit row 20) ----------------------------

def test_zero_stages_reduce_and_gather_as_often_as_they_do():
    p, g = 6_738_415_616, 2
    share = 7 / 8
    zero1 = run(contract(strategy={"zero_stage": 1, "gradient_accumulation_steps": 4}))
    # once per step: a reduce-scatter of the gradients and a gather of the updated weights
    assert zero1.value("gradient_reduce_scatter_bytes_sent_per_step") == pytest.approx(share * g * p)
    assert zero1.value("parameter_gather_bytes_sent_per_step") == pytest.approx(share * 2 * p)
    zero2 = run(contract(strategy={"zero_stage": 2, "gradient_accumulation_steps": 4}))
    assert zero2.value("gradient_reduce_scatter_bytes_sent_per_step") == pytest.approx(4 * share * g * p)
    assert zero2.value("parameter_gather_bytes_sent_per_step") == pytest.approx(share * 2 * p)
    zero3 = run(contract(strategy={"zero_stage": 3, "gradient_accumulation_steps": 4}))
    assert zero3.value("parameter_gather_bytes_sent_per_step") == pytest.approx(8 * share * 2 * p)   # 2 per micro
    shard_grad_op = run(contract(strategy={"fsdp": "shard_grad_op", "gradient_accumulation_steps": 4}))
    assert shard_grad_op.value("parameter_gather_bytes_sent_per_step") == pytest.approx(4 * share * 2 * p)
    # the ZeRO paper's communication: ZeRO-1/2 2Ψ, ZeRO-3 3Ψ per step (one micro-batch)
    one = run(contract(strategy={"zero_stage": 3}))
    assert one.value("collective_bytes_sent_per_step") == pytest.approx(3 * share * 2 * p)


def test_megatron_reduces_fp32_gradients():
    """adam-megatron: 2 B weights, 4 B gradients (reduced in FP32), 12 B sharded: (n−1)/n·(4 + 2)·P per step."""
    result = run(contract(strategy={"zero_stage": 1, "optimizer": "adam-megatron"}))
    p = 6_738_415_616
    assert result.value("collective_bytes_sent_per_step") == pytest.approx(7 / 8 * (4 + 2) * p)
    assert result.value("state_bytes") == pytest.approx(p * (2 + 4 + 12 / 8))


def test_sequence_parallelism_gathers_the_input_again_in_the_backward():
    """5 all-reduces' worth per layer and micro-batch with SP (audit row 21), 4 without."""
    message = 2048 * 4096 * 2
    plain = run(contract(strategy={"tensor_parallel": 8}))
    sp = run(contract(strategy={"tensor_parallel": 8, "sequence_parallel": True}))
    assert plain.value("tp_bytes_sent_per_step") == pytest.approx(32 * 4 * 2 * 7 / 8 * message)
    assert sp.value("tp_bytes_sent_per_step") == pytest.approx(32 * 5 * 2 * 7 / 8 * message)


def test_data_parallel_overlap_is_bounded_by_the_backward_it_hides_behind():
    """Even a stated overlap of 1 hides no more than the last micro-batch's backward (audit row 26)."""
    result = run(contract(count=16, strategy={"gradient_accumulation_steps": 8}, assumptions={
        "data_parallel_overlap": 1.0}, supply={"cluster": {"node": "dgx-h100", "inter_node": {"bandwidth": "1 GB/s"}}}))
    window = result.value("microbatch_backward_seconds")
    assert result.value("data_parallel_overlap_window_seconds") == pytest.approx(window)
    total = result.value("data_parallel_communication_seconds")
    assert total > window
    assert result.value("exposed_data_parallel_seconds") == pytest.approx(total - window)


def test_fp8_gemms_keep_16_bit_attention_and_activations():
    result = run(contract(strategy={"precision": "fp8"}, assumptions=FIGURES))
    assert result.value("peak_flops_per_s") == pytest.approx(1978.9e12)
    assert result.value("attention_peak_flops_per_s") == pytest.approx(989.4e12)
    assert result.value("activation_bytes_per_element") == 2


def test_deepseek_v3_multi_token_prediction_adds_its_work():
    result = run(contract("deepseek-v3", count=64, strategy={"expert_parallel": 64, "zero_stage": 1},
                          assumptions={"attention_flops": "none"}))
    mtp = result.value("mtp_matmul_parameters")
    assert mtp > 0
    assert result.value("model_flops_per_token") == pytest.approx(6 * (result.value("matmul_parameters") + mtp))
    assert 0.02 < mtp / result.value("matmul_parameters") < 0.06    # the report's "about 4 %"


def test_the_busiest_expert_sets_the_moe_layer():
    """Mixtral, EP 8: each of the 8 local experts gets T·k·EP/E tokens on average, × the load imbalance."""
    even = run(contract("mixtral-8x7b", strategy={"expert_parallel": 8}))
    skewed = run(contract("mixtral-8x7b", strategy={"expert_parallel": 8}, assumptions={"expert_load_imbalance": 1.25}))
    assert even.value("expert_tokens") == pytest.approx(2048 * 2 * 8 / 8)
    assert skewed.value("expert_tokens") == pytest.approx(1.25 * 2048 * 2 * 8 / 8)
    assert skewed.value("expert_mlp_seconds") > even.value("expert_mlp_seconds")
    assert skewed.value("attention_projection_seconds") == even.value("attention_projection_seconds")


# --- expert data parallelism: the expert gradients and weights over their own group (audit N2) ------------------
# Mixtral-8x7B: 32 layers × 8 experts × 3 × 4,096 × 14,336 = 45,097,156,608 expert parameters; EP 8 leaves
# 5,637,144,576 on each GPU, 11,274,289,152 B of 16-bit gradients. On 4 DGX H100 (DP 32) the ranks holding the
# same expert sit EP = 8 apart: one per node, each behind its own NIC (46 GB/s achieved, 14 µs).

MIXTRAL_EXPERT_GRADIENT_BYTES = 2 * 45_097_156_608 / 8
NIC, NIC_LATENCY, NVLINK = 46e9, 14e-6, 370e9


def mixtral(ep=8, zero=2, **strategy):
    return run(contract("mixtral-8x7b", count=32, strategy={"expert_parallel": ep, "zero_stage": zero,
                                                            "gradient_accumulation_steps": 4, **strategy}))


def test_expert_gradients_reduce_scatter_over_the_expert_data_parallel_group():
    """ZeRO-2, EP 8, m = 4: a reduce-scatter per micro-batch over the 4 expert replicas, 4 × ¾ × 11.27 GB =
    33.8 GB, and one gather of the updated expert weights after the step, ¾ × 11.27 GB = 8.46 GB, both at one
    NIC: (33.8 + 8.46) GB / 46 GB/s + (4 + 1) × 3 × 14 µs = 0.919 s (the audit's ≈ 0.92 s; the dense DP group's
    pooled 368 GB/s gave 0.18 s)."""
    result = mixtral()
    assert result.value("expert_sharding_degree") == 4
    assert result.value("edp_link_bytes_per_s") == pytest.approx(NIC)
    reduce_scatter = 4 * 3 / 4 * MIXTRAL_EXPERT_GRADIENT_BYTES
    gather = 3 / 4 * MIXTRAL_EXPERT_GRADIENT_BYTES
    assert result.value("expert_gradient_reduce_scatter_bytes_sent_per_step") == pytest.approx(reduce_scatter)
    assert result.value("expert_gradient_all_reduce_bytes_sent_per_step") == 0      # nothing left to all-reduce
    assert result.value("expert_parameter_gather_bytes_sent_per_step") == pytest.approx(gather)
    expected = (reduce_scatter + gather) / NIC + (4 + 1) * 3 * NIC_LATENCY
    assert result.value("expert_data_parallel_seconds") == pytest.approx(expected)
    assert expected == pytest.approx(0.919, abs=0.001)
    # the dense weights are gathered over the whole shard group (32 ranks, 8 per node: 8 NICs), not the experts
    dense = result.value("parameter_gather_message_bytes") - result.value("expert_parameter_gather_message_bytes")
    assert result.value("dense_parameter_gather_bytes_sent_per_step") == pytest.approx(31 / 32 * dense)
    assert result.value("shard_link_bytes_per_s") == pytest.approx(min(8 * NIC, 8 / 7 * NVLINK))


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_the_expert_gradients_the_network_reduces_are_the_ones_memory_holds(ep):
    """ZeRO-2 over 32 ranks: memory keeps 1/(32/EP) of each expert's gradients; each reduce-scatter leaves every
    rank that shard, so each rank sends (e − 1) shards of it per micro-batch, e = 32 / EP."""
    result = mixtral(ep=ep)
    shards = 32 / ep
    dense_gradient_bytes = result.value("gradient_bytes") - result.value("expert_gradient_bytes")
    assert result.value("expert_gradient_bytes") == pytest.approx(2 * 45_097_156_608 / ep)
    expert_shard_held = result.value("gradient_memory_bytes") - dense_gradient_bytes / 32
    assert expert_shard_held == pytest.approx(result.value("expert_gradient_bytes") / shards)
    per_reduction = result.value("expert_gradient_reduce_scatter_bytes_sent_per_step") / 4
    assert per_reduction == pytest.approx((shards - 1) * expert_shard_held)
    # EP 8: one rank per node (one NIC); EP 4: two (two NICs); EP 2: four
    ranks_per_node = 8 / ep
    assert result.value("edp_link_bytes_per_s") == pytest.approx(
        min(ranks_per_node * NIC, ranks_per_node / max(ranks_per_node - 1, 1) * NVLINK) if ep < 8 else NIC)


def test_zero_1_reduces_and_gathers_the_experts_once_and_no_zero_all_reduces_them():
    """ZeRO-1: one reduce-scatter and one gather per step, ¾ × 11.27 GB each (2 × (n−1)/n, Megatron's distributed
    optimizer, not 3); no ZeRO: one ring all-reduce over the 4 replicas, 2 × ¾ × 11.27 GB, at the same one NIC."""
    zero1 = mixtral(zero=1)
    assert zero1.value("expert_gradient_reduce_scatter_bytes_sent_per_step") == pytest.approx(
        3 / 4 * MIXTRAL_EXPERT_GRADIENT_BYTES)
    assert zero1.value("expert_parameter_gather_bytes_sent_per_step") == pytest.approx(
        3 / 4 * MIXTRAL_EXPERT_GRADIENT_BYTES)
    plain = mixtral(zero=0)
    assert plain.value("expert_gradient_reduce_scatter_bytes_sent_per_step") == 0
    assert plain.value("expert_parameter_gather_bytes_sent_per_step") == 0
    sent = 2 * 3 / 4 * MIXTRAL_EXPERT_GRADIENT_BYTES
    assert plain.value("expert_gradient_all_reduce_bytes_sent_per_step") == pytest.approx(sent)
    assert plain.value("expert_gradient_all_reduce_seconds") == pytest.approx(sent / NIC + 2 * 3 * NIC_LATENCY)


# --- a sharded group with few ranks per node gets only their NICs ---------------------------------------------

def test_a_group_with_one_rank_per_node_gets_one_nic():
    """Hybrid shard over 4 DGX H100: the all-reduce across the replicas joins one rank of each node (8 such
    all-reduces at once, each through its own NIC): 46 GB/s, not the 8 pooled NICs of the whole DP group.
    torchtitan all-reduces per FSDP unit (32 blocks + 2): 34 all-reduces of g / 8 / 34, each NCCL's ring with the
    Simple protocol (4 ranks, one per node: 8.4 µs base + 2 × 3 steps of 14 µs, cheaper than its tree's size
    correction at ~50 MB): the bytes as before, 34 × 92.4 µs of latency.
    FSDP under TP 8 over 2 nodes: the shard group is 2 ranks, one per node: one NIC; under TP 4, two per node."""
    hybrid = run(contract(count=32, strategy={"fsdp": "hybrid_shard"}))
    assert hybrid.value("dp_link_bytes_per_s") == pytest.approx(NIC)
    g = 6_738_415_616 * 2
    assert hybrid.value("gradient_collectives_per_reduction") == 34
    assert hybrid.value("gradient_all_reduce_seconds") == pytest.approx(
        2 * 3 / 4 * g / 8 / NIC + 34 * (8.4e-6 + 2 * 3 * NIC_LATENCY))
    tp8 = run(contract(count=16, strategy={"fsdp": "full_shard", "tensor_parallel": 8}))
    assert tp8.value("shard_link_bytes_per_s") == pytest.approx(NIC)
    tp4 = run(contract(count=16, strategy={"fsdp": "full_shard", "tensor_parallel": 4}))
    assert tp4.value("shard_link_bytes_per_s") == pytest.approx(min(2 * NIC, 2 * NVLINK))


# --- MoE grouped GEMM (audit N10) ----------------------------------------------------------------------------

def test_the_local_experts_run_as_one_grouped_gemm_per_projection():
    """Mixtral, EP 2 on 8 GPUs: 4 local experts, each T·k·EP/E = 2,048 × 2 × 2 / 8 = 1,024 tokens. Megatron's
    GroupedMLP runs each projection's 4 experts in one kernel: 4 × the GEMM's FLOPs (both are compute-bound:
    up 4 × 2 × 1,024 × 4,096 × 28,672 FLOP = 1.94 ms at 0.5 × 989 TFLOP/s) and one t0, not four."""
    result = run(contract("mixtral-8x7b", strategy={"expert_parallel": 2}, assumptions=FIGURES))
    assert result.value("expert_tokens") == pytest.approx(1024)
    t0 = 10e-6
    router = gemm(2048, 4096, 8)
    up = 4 * (gemm(1024, 4096, 2 * 14336) - t0) + t0
    down = 4 * (gemm(1024, 14336, 4096) - t0) + t0
    assert up == pytest.approx(4 * 2 * 1024 * 4096 * 28672 / (0.5 * PEAK) + t0)      # compute-bound
    assert result.value("expert_mlp_seconds") == pytest.approx(router + up + down)


def test_fsdp_hides_each_layers_gather_behind_one_layers_compute():
    """Llama-2-7B, FSDP full shard over 2 DGX H100, m = 2, stated overlap 1, NICs of 50 GB/s (α = 0): the shard
    group pools min(8 × 50, 8/7 × 370) = 400 GB/s. One layer's gather is g = 15/16 × 13.48 GB / 400 GB/s / 32 =
    0.99 ms, its gradient reduce-scatter r the same (2 B gradients). With the next layer's gather issued while this
    one computes, each micro-batch exposes what nothing precedes: the first forward gather g and the first backward
    gather and the last reduce-scatter, g + r: 2 × 3g = 5.9 ms per step (the whole compute of 2 micro-batches as
    one window hid it all). Where one layer's communication outlasts its compute (1 GB/s NICs), only (L − 1) layers'
    compute hides any: exposed = communication − m·(L − 1)·(F + B)/L."""
    def fsdp(bandwidth):
        return run(contract(count=16, strategy={"fsdp": "full_shard", "gradient_accumulation_steps": 2},
                            assumptions={"data_parallel_overlap": 1.0},
                            supply={"cluster": {"node": "dgx-h100",
                                                "inter_node": {"bandwidth": bandwidth, "latency": "0 us"}}}))

    fast = fsdp("50 GB/s")
    g = 15 / 16 * 6_738_415_616 * 2 / min(8 * 50e9, 8 / 7 * 370e9) / 32
    assert fast.value("layer_parameter_gather_seconds") == pytest.approx(g)
    assert fast.value("layer_gradient_reduce_seconds") == pytest.approx(g)
    assert fast.value("data_parallel_communication_seconds") == pytest.approx(2 * 32 * 3 * g)   # 2 gathers + 1 RS
    assert fast.value("exposed_data_parallel_seconds") == pytest.approx(2 * 3 * g)
    assert 2 * 3 * g == pytest.approx(5.92e-3, rel=1e-3)
    slow = fsdp("1 GB/s")
    compute = slow.value("microbatch_compute_seconds")
    assert slow.value("data_parallel_overlap_window_seconds") == pytest.approx(2 * 31 * compute / 32)
    assert slow.value("exposed_data_parallel_seconds") == pytest.approx(
        slow.value("data_parallel_communication_seconds") - 2 * 31 * compute / 32)
