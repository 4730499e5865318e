"""DeepSeek serving as DeepSeek and SGLang ran it (issue 29, item 2; launch-audit-3 Part B, P4 and P6): two-batch
overlap, DeepEP's two kernel families, and the errors for a two-batch overlap that has nothing to overlap.

Every figure is hand-derived: the two-batch step 2·max(C(T/2), m·T/2) + f on chosen costs; DeepEP's low-latency
dispatch, one message per (token, expert) (csrc/kernels/internode_ll.cu), and its normal kernels, one RDMA copy per
remote node forwarded over NVLink (DeepEP docs/legacy.md), on the H800 links of the EP 144 example (NIC 46 GB/s,
NVLink 153 GB/s).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from botec.errors import ContractError
from botec.estimation import estimate_file
from botec.serving.instances import replica_of_quantities
from botec.serving.step import StepModel

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EP144 = EXAMPLES / "serve-deepseek-v3-ep144-disaggregated.yaml"
H = 7168
DISPATCH_COMBINE = 1 + 4 / 128 + 2   # FP8 and one FP32 scale per 128 elements out, BF16 back (B per element)


def _model(**costs) -> StepModel:
    base = dict(gemm_seconds_per_token=2e-6, weight_read_seconds=1e-3, expert_read_seconds=0.0,
                expert_pick_probability=0.0, attention_seconds_per_context_token=1e-9,
                prefill_attention_seconds_per_context_token=0.0, kv_read_seconds_per_context_token=0.0,
                logit_seconds_per_token=0.0, communication_seconds_per_token=3e-6, fixed_seconds_per_step=0.5e-3,
                moe_exchange_seconds_per_token=2e-6)
    return StepModel(**(base | costs))


def test_two_batch_overlap_hides_the_exchange_under_the_other_half():
    # T = 1,000 decode tokens, contexts 10^6: GEMMs max(2 ms, 1 ms), attention 1 ms, r·T 3 ms, f 0.5 ms = 6.5 ms.
    # Two halves of 500: C = max(1, 1) + 1/2 + (3 − 2)·0.5 = 2 ms, m·T/2 = 1 ms: 2 × 2 + 0.5 = 4.5 ms
    plain, overlapped = _model(), _model(two_batch_overlap=1.0)
    assert plain.step(1000, 1e6) == pytest.approx(6.5e-3, rel=1e-12)
    assert overlapped.step(1000, 1e6) == pytest.approx(4.5e-3, rel=1e-12)
    # the exchange binds: r = m = 8 µs: C = 1 + 0.5 + 0 = 1.5 ms < m·T/2 = 4 ms: 2 × 4 + 0.5 = 8.5 ms (plain 11.5)
    bound = dict(communication_seconds_per_token=8e-6, moe_exchange_seconds_per_token=8e-6)
    assert _model(**bound).step(1000, 1e6) == pytest.approx(11.5e-3, rel=1e-12)
    assert _model(two_batch_overlap=1.0, **bound).step(1000, 1e6) == pytest.approx(8.5e-3, rel=1e-12)
    # a small batch: each half reads the 1 ms of weights itself: T = 100: plain max(0.2, 1) + 0.1 + 0.3 + 0.5 =
    # 1.9 ms; halves C = 1 + 0.05 + 0.05 = 1.1 ms: 2 × 1.1 + 0.5 = 2.7 ms (LMSYS: TBO loses below 64-128 tokens)
    assert plain.step(100, 1e5) == pytest.approx(1.9e-3, rel=1e-12)
    assert overlapped.step(100, 1e5) == pytest.approx(2.7e-3, rel=1e-12)
    assert overlapped.scalar_step()(100, 1e5, 0, 0, 100) == overlapped.step(100, 1e5)


@pytest.fixture(scope="module")
def ep144():
    return estimate_file(EP144)


def test_decode_sends_one_copy_per_token_and_expert(ep144):
    # EP 144 over 18 nodes: 8 × 143/144 copies leave the rank; its link (143/144) / (136/(144 × 46 GB/s)) = 48.37 GB/s
    q = ep144.quantities
    link = (143 / 144) / (136 / (144 * 46e9))
    assert q["ep_link_bytes_per_s"].value == pytest.approx(link, rel=1e-9)
    assert q["expert_remote_copies"].value == pytest.approx(8 * 143 / 144, rel=1e-12)
    hand = 58 * (8 * 143 / 144) * H * DISPATCH_COMBINE / 144 / link
    assert q["moe_exchange_seconds_per_token"].value == pytest.approx(hand, rel=1e-9)
    assert hand == pytest.approx(1.4375e-6, rel=1e-4)   # 58 × 7.944 × 7,168 × 3.031 B / 144 / 48.37 GB/s


def test_prefill_sends_one_rdma_copy_per_remote_node(ep144):
    # EP 32 on 4 nodes: N_r = 3 × (1 − (3/4)^8) = 2.69966 IB copies (per rank: 24 × (1 − (31/32)^8) = 5.38), NVLink
    # forwarding D·7/8 = 32 × (1 − (31/32)^8) × 7/8 = 6.2804 copies; max(2.69966/46e9, 6.2804/153e9): the NIC binds
    q = ep144.quantities
    rdma, nvlink = 3 * (1 - 0.75 ** 8), 32 * (1 - (31 / 32) ** 8) * 7 / 8
    assert rdma == pytest.approx(2.69966, rel=1e-5) and nvlink == pytest.approx(6.2804, rel=1e-4)
    assert q["prefill_instance_expert_parallel_nodes"].value == 4
    assert q["prefill_instance_deepep_normal_kernels"].value == 1 and q["deepep_normal_kernels"].value == 0
    per_byte = max(rdma / 46e9, nvlink / 153e9)
    assert q["prefill_instance_forwarded_exchange_seconds_per_byte"].value == pytest.approx(per_byte, rel=1e-9)
    hand = 58 * H * DISPATCH_COMBINE / 32 * per_byte
    assert q["prefill_instance_moe_exchange_seconds_per_token"].value == pytest.approx(hand, rel=1e-9)
    assert hand == pytest.approx(2.3e-6, rel=0.01)   # 2.30 µs per prompt token, was 4.56 at one copy per remote rank


def test_two_batch_overlap_moves_deepseek_per_user_speed_toward_the_published(ep144):
    # DeepSeek day 6: 20-22 output tokens/s per request at 128 requests per GPU (MTP, 2 tokens a step, 85 % accepted)
    def per_user(result):
        replica = replica_of_quantities(result.quantities)
        return result.value("tokens_per_step") / replica.stage_step(128 * 144, 0.0)

    overlapped = estimate_file(EP144, ["strategy.two_batch_overlap=true"])
    assert per_user(ep144) < 14 and per_user(overlapped) == pytest.approx(21, rel=0.15)
    assert overlapped.value("prefill_instance_two_batch_overlap") == 1   # the prefill instance takes the replica's
    said = " ".join(f.message for f in overlapped.findings)
    assert "two-batch overlap: each step runs as two micro-batches" in said
    assert "no two-batch overlap stated: strategy.two_batch_overlap" in " ".join(f.message for f in ep144.findings)


def test_two_batch_overlap_needs_something_to_overlap():
    with pytest.raises(ContractError) as raised:
        estimate_file(EXAMPLES / "serve-deepseek-v3-h200.yaml",
                      ["strategy.data_parallel_attention=false", "strategy.two_batch_overlap=true"])
    assert "two_batch_overlap" in str(raised.value) and "set data_parallel_attention: true" in str(raised.value)
    with pytest.raises(ContractError) as raised:
        estimate_file(EXAMPLES / "serve-llama2-70b-a100-tp4.yaml",
                      ["strategy.data_parallel_attention=true", "strategy.two_batch_overlap=true"])
    assert "two_batch_overlap" in str(raised.value) and "no routed experts" in str(raised.value)


def test_sglang_writes_and_reads_two_batch_overlap():
    from botec.launch import sglang

    text = sglang.export(estimate_file(EXAMPLES / "serve-deepseek-v3-sglang-96-h100.yaml",
                                       ["strategy.two_batch_overlap=true"]))
    assert text.count("--enable-two-batch-overlap") == 2   # the prefill and the decode server
    assert sglang.read(text, "sglang.sh")["strategy"]["two_batch_overlap"] is True
