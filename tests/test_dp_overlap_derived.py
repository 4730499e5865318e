"""The data-parallel overlap derived from the stack's schedule (issue 30): an output, a stated value overrides it.

Megatron-Core (core_r0.8.0 distributed_data_parallel_config.py): buckets of max(40M, 1M × DP) parameters, each reduced
as its gradients are ready in the last micro-batch's backward; --overlap-param-gather all-gathers the updated weights
under the next step's first forward. Megatron-LM in 2021-22 all-reduced after the backward.
"""

from __future__ import annotations

import pytest

import botec

BASE = {
    "workload": {"model": "llama-2-7b", "tokens": "1B", "sequence_length": 4096},
    "supply": {"accelerator": "h100-sxm", "count": 64, "cluster": {"node": "dgx-h100"}},
    "strategy": {"framework": "megatron-core", "zero_stage": 1, "micro_batch_size": 1, "global_batch_size": 256},
}


def _estimate(strategy=None, assumptions=None):
    return botec.estimate({**BASE, "strategy": {**BASE["strategy"], **(strategy or {})},
                           "assumptions": assumptions or {}})


def test_megatron_core_hides_all_but_the_last_bucket_when_the_backward_is_long_enough():
    """DP 64: the bucket is max(40M, 64 × 1M) = 64M parameters of the 6.74B each rank holds (k = 0.0095); with two
    micro-batches of two sequences per rank the last one's backward and the next first forward outlast the
    reduce-scatter and the all-gather (106 buckets each, priced one by one), so the overlap is 1 − k."""
    result = _estimate(strategy={"micro_batch_size": 2})
    params = result.value("trainable_parameters_per_device")
    assert params == pytest.approx(6_738_415_616, rel=1e-3)
    share = 64e6 / params
    assert result.value("exposed_bucket_share") == pytest.approx(share)
    gradient, gather = result.value("gradient_sync_seconds"), result.value("parameter_gather_seconds")
    backward = result.value("microbatch_backward_seconds")
    forward = result.value("microbatch_compute_seconds") - backward
    assert (1 - share) * gradient < backward and (1 - share) * gather < forward   # the premise of this case
    assert result.value("data_parallel_overlap") == pytest.approx(1 - share)
    assert result.value("exposed_data_parallel_seconds") == pytest.approx(share * (gradient + gather))


def test_a_slow_network_exposes_what_the_backward_and_forward_cannot_hide():
    """NICs of 2 GB/s: the reduce-scatter outlasts the last backward B and the gather the next forward F: hidden
    B + F, the overlap (B + F) / D."""
    result = botec.estimate({**BASE, "supply": {**BASE["supply"], "cluster": {
        "node": "dgx-h100", "inter_node": {"bandwidth": "2 GB/s"}}}})
    backward = result.value("microbatch_backward_seconds")
    forward = result.value("microbatch_compute_seconds") - backward
    total = result.value("data_parallel_communication_seconds")
    assert result.value("gradient_sync_seconds") > backward and result.value("parameter_gather_seconds") > forward
    assert result.value("data_parallel_overlap") == pytest.approx((backward + forward) / total)


def test_megatron_2022_reduces_after_the_backward_and_a_stated_share_overrides():
    after = _estimate(strategy={"framework": "megatron-2022"})
    assert after.value("data_parallel_overlap") == 0
    assert after.value("exposed_data_parallel_seconds") == pytest.approx(
        after.value("data_parallel_communication_seconds"))
    stated = _estimate(assumptions={"data_parallel_overlap": 0.3})
    assert stated.value("data_parallel_overlap") == pytest.approx(0.3)
    assert stated.quantities["data_parallel_overlap_stated"].provenance != "catalog"
