"""The data-parallel collectives at the granularity each stack runs them (botec.training.network.granularity):
FSDP2 one per unit (torchtitan: token embeddings, every block, norm + output),
DDP 25 MiB buckets, DeepSpeed 5e8 / 5e7-element buckets, Megatron-Core max(40M, 1M × DP) parameters, Megatron-LM
2021-22 one message; each collective priced at its own size (across nodes through NCCL's cost model)."""

import math

import pytest

from botec.catalog import node_presets
from botec.formulas.nccl_tuning import cross_node_choice


def _estimate(count=16, **strategy):
    from botec.api import estimate

    contract = {"schema_version": 1,
                "workload": {"model": "llama-2-7b", "tokens": "1B", "sequence_length": 4096},
                "supply": {"accelerator": "h100-sxm", "count": count, "cluster": {"node": "dgx-h100"}},
                "strategy": {"micro_batch_size": 1, "global_batch_size": count} | strategy}
    return estimate(contract)


def _value(result, name):
    return float(result.quantities[name].value)


def test_fsdp2_gathers_and_reduces_one_unit_at_a_time_across_two_nodes():
    # Llama-2-7B, 32 blocks, FSDP full shard over 16 H100 (2 DGX nodes): 32 + 2 units (torchtitan's apply_fsdp);
    # each all-gather carries W / 34 and is what NCCL's model prices for 16 ranks, 8 per node, on 8 × 46 GB/s
    # with a 14 us network step; two gathers per micro-batch (forward, backward), one micro-batch.
    result = _estimate(framework="torchtitan", zero_stage=3)
    assert _value(result, "parameter_collectives_per_gather") == 34
    assert _value(result, "gradient_collectives_per_reduction") == 34
    weights = _value(result, "dense_parameter_gather_message_bytes")
    node = node_presets()["dgx-h100"]
    ring = min(8 * node.inter_node_achieved_bytes_per_s, 8 / 7 * node.intra_node_achieved_bytes_per_s)
    algorithm, protocol, one = cross_node_choice("allgather", weights / 34, 16.0, 8.0, ring,
                                                 node.intra_node_achieved_bytes_per_s, True, 1.0, 14e-6)
    assert algorithm == "Ring"
    gathers = _value(result, "parameter_gathers_per_step")
    assert _value(result, "dense_parameter_gather_seconds") == pytest.approx(gathers * 34 * one, rel=1e-9)
    # the same bytes in one message would cost one ring latency, not 34: the units cost more
    assert _value(result, "dense_parameter_gather_seconds") > gathers * cross_node_choice(
        "allgather", weights, 16.0, 8.0, ring, node.intra_node_achieved_bytes_per_s, True, 1.0, 14e-6)[2]


def test_megatron_core_buckets_grow_with_data_parallel_ranks():
    # bucket_size = max(40,000,000, 1,000,000 × DP) parameters: DP 16 → 40M, DP 64 → 64M
    small = _estimate(16, framework="megatron-core", zero_stage=1)
    large = _estimate(64, framework="megatron-core", zero_stage=1)
    dense = _value(small, "trainable_dense_parameters_per_device")
    assert _value(small, "gradient_collectives_per_reduction") == math.ceil(dense / 40e6)
    assert _value(large, "gradient_collectives_per_reduction") == math.ceil(dense / 64e6)
    assert _value(small, "parameter_collectives_per_gather") == math.ceil(dense / 40e6)


def test_deepspeed_buckets_and_megatron_2022_one_message():
    # DeepSpeed: reduce_bucket_size 5e8 elements, stage3_prefetch_bucket_size 5e7; Megatron-LM 2021-22: one call
    deepspeed = _estimate(framework="deepspeed", zero_stage=3)
    dense = _value(deepspeed, "trainable_dense_parameters_per_device")
    assert _value(deepspeed, "gradient_collectives_per_reduction") == math.ceil(dense / 5e8)
    assert _value(deepspeed, "parameter_collectives_per_gather") == math.ceil(dense / 5e7)
    megatron = _estimate(framework="megatron-2022")
    assert _value(megatron, "gradient_collectives_per_reduction") == 1


def test_ddp_without_sharding_uses_25_mib_buckets():
    # torchtitan without ZeRO/FSDP runs DDP: ⌈M / 25 MiB⌉ all-reduces of BF16 gradients
    result = _estimate(framework="torchtitan")
    message = _value(result, "gradient_all_reduce_message_bytes")
    assert _value(result, "gradient_collectives_per_reduction") == math.ceil(message / (25 * 2 ** 20))
