"""Tensor-parallel communication overlapped with the GEMMs it feeds (strategy.tp_comm_overlap, issue 30).

Transformer Engine's userbuffers (transformer_engine/pytorch/module/base.py, initialize_ub) pair each sequence-parallel
collective with a GEMM of its own block; the pipelined and bulk overlaps take 16 of an H100's 132 SMs.
"""

from __future__ import annotations

import pytest

import botec
from botec.errors import ContractError
from botec.training.network.model_parallel import _tp_block_exposed

SIGMA = 16 / 132   # TE's default num_sm for pipeline and bulk overlaps, of an H100's SMs


def test_a_block_exposes_what_its_gemms_cannot_hide_and_the_sm_share_it_takes():
    """Hand-derived: c = 0.2 ms per collective, the block's forward GEMMs 0.363 ms (70B, TP 8, 4,096 tokens):
    forward max(0, 0.4 − 0.363) + 16/116 × 0.2 = 0.0646 ms; backward max(0, 0.6 − 0.726) + 16/116 × 0.4 = 0.0552 ms."""
    assert _tp_block_exposed(0.2e-3, 0.363e-3, 1.0, SIGMA) == pytest.approx(0.037e-3 + 16 / 116 * 0.6e-3)
    # a GEMM far longer than the collectives hides them; only the SM share is left
    assert _tp_block_exposed(0.1e-3, 10e-3, 1.0, SIGMA) == pytest.approx(16 / 116 * 0.3e-3)
    # no GEMM to hide behind: all five collectives exposed
    assert _tp_block_exposed(0.1e-3, 0.0, 1.0, SIGMA) == pytest.approx(0.5e-3)


CONTRACT = {
    "workload": {"model": "llama-3.1-70b", "tokens": "1B", "sequence_length": 8192},
    "supply": {"accelerator": "h100-sxm", "count": 64, "cluster": {"node": "dgx-h100"}},
    "strategy": {"framework": "megatron-core", "tensor_parallel": 8, "sequence_parallel": True, "pipeline_parallel": 4,
                 "zero_stage": 1, "micro_batch_size": 1, "global_batch_size": 64},
}


def _estimate(**strategy):
    contract = {**CONTRACT, "strategy": {**CONTRACT["strategy"], **strategy}}
    return botec.estimate(contract)


def test_sequential_tp_communication_is_all_exposed_and_overlap_hides_most_of_it():
    plain = _estimate()
    assert plain.value("exposed_tp_communication_seconds") == pytest.approx(plain.value("tp_communication_seconds"))
    overlapped = _estimate(tp_comm_overlap=True)
    total = overlapped.value("tp_communication_seconds")
    assert total == pytest.approx(plain.value("tp_communication_seconds"))
    # Llama 3.1 70B at TP 8: the MLP's GEMMs hide its collectives; grouped-query attention's smaller projections
    # (2.25·h² weights against the MLP's 10.5·h²) cannot hide all of the attention block's: part stays exposed
    assert 0.1 * total < overlapped.value("exposed_tp_communication_seconds") < 0.5 * total
    assert overlapped.value("step_seconds") < plain.value("step_seconds")


def test_the_flat_compute_model_overlaps_too():
    flat = botec.estimate({**CONTRACT, "strategy": {**CONTRACT["strategy"], "tp_comm_overlap": True},
                           "assumptions": {"compute_model": "flat"}})
    assert 0 < flat.value("exposed_tp_communication_seconds") < flat.value("tp_communication_seconds")


def test_overlap_without_sequence_parallelism_is_refused():
    with pytest.raises(ContractError, match="tp_comm_overlap"):
        _estimate(sequence_parallel=False, tp_comm_overlap=True)


def test_the_split_gemms_add_their_kernels():
    """TE splits a ring-exchange GEMM into t chunks and a pipelined one into 4: at t = 8 and t0 = 3.5 µs, forward
    (7 + 3) and backward 7 more kernels per block: 17 × 3.5 µs beside the SM share."""
    assert _tp_block_exposed(0.1e-3, 10e-3, 1.0, SIGMA, 8, 3.5e-6) == pytest.approx(16 / 116 * 0.3e-3 + 17 * 3.5e-6)
