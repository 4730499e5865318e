"""The engines' limits where the engines count them (issue 29, item 2; launch-audit-3 Part B, P1-P3).

Every figure is hand-derived or published: SGLang's max_running_requests default (2,048) holds per DP-attention rank
(sglang 0.5.23 pool_configurator.py), its chunked_prefill_size bounds prefill only (schedule_policy.py PrefillAdder),
a disaggregated prompt's KV leaves one rank through one NIC, and the two DeepSeek examples, at engine defaults, land
within 15 % of the published decode throughput per node (DeepSeek day 6: 14.8k output tokens/s per H800 node; LMSYS
2025-05-05: 22,282 per H100 node).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from botec.catalog.engines import COUNTED_PER, LIMIT_FIGURES, counting_units, engine_presets
from botec.estimation import estimate_file
from botec.launch import trtllm

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EP144 = EXAMPLES / "serve-deepseek-v3-ep144-disaggregated.yaml"
SGL96 = EXAMPLES / "serve-deepseek-v3-sglang-96-h100.yaml"


@pytest.fixture(scope="module")
def ep144():
    return estimate_file(EP144)


@pytest.fixture(scope="module")
def sgl96():
    return estimate_file(SGL96)


def test_every_limit_says_where_the_engine_counts_it():
    for preset in engine_presets().values():
        for name in LIMIT_FIGURES:
            assert preset[name].per in COUNTED_PER and len(preset[name].per_source) > 20, (preset.key, name)
    assert counting_units("dp_rank", 144, 144) == 144 and counting_units("replica", 144, 144) == 1


def test_sglang_running_requests_per_dp_rank(ep144, sgl96):
    # P1: 2,048 per DP-attention rank × 144 ranks (× 72), not 2,048 for the whole replica (14 per GPU)
    assert ep144.value("max_batch_size") == 2048 * 144
    assert sgl96.value("max_batch_size") == 2048 * 72
    # SGLang's chunked_prefill_size is the server's total (divided per rank by SGLang itself): not scaled
    assert ep144.value("max_batched_tokens") == 8192


def test_sglang_chunked_prefill_does_not_bound_decode(sgl96):
    # P2: the decode batch is bounded by the KV pool, not by chunked_prefill_size (8,192 -> 114 per GPU before)
    assert sgl96.value("decode_tokens_in_budget") == 0
    assert sgl96.value("saturation_batch_size") == sgl96.value("max_concurrent_requests")
    assert sgl96.value("saturation_batch_size") / 72 > 256 * 0.9   # the blog ran 256 per GPU


def test_kv_transfer_leaves_one_rank_through_one_nic(ep144):
    # P3: 4,400 tokens × 61 layers × 576 × 2 B = 309 MB over one 400 Gb/s NIC (46 GB/s): 6.72 ms, not 6.72/144
    hand = 4400 * 61 * 576 * 2 / 46e9
    assert ep144.value("kv_transfer_seconds") == pytest.approx(hand, rel=0.01)
    assert hand == pytest.approx(6.72e-3, rel=0.002)


def test_trtllm_limits_per_rank_under_attention_dp():
    # R1: under enable_attention_dp trtllm-serve's --max_batch_size / --max_num_tokens are per rank; NVIDIA's
    # DeepSeek-R1 H200 recipe: 128 and 1,127 per rank on 8 GPUs
    text = trtllm.export(estimate_file(EXAMPLES / "serve-deepseek-v3-h200.yaml",
                                       ["strategy.engine=tensorrt-llm", "strategy.max_batch_size=1024",
                                        "strategy.max_batched_tokens=9016"]))
    assert "--max_batch_size 128" in text and "--max_num_tokens 1127" in text
    strategy = trtllm.read(text, "trtllm.sh")["strategy"]   # read back as the replica's totals
    assert strategy["max_batch_size"] == 1024 and strategy["max_batched_tokens"] == 9016


def _decode_per_node(result) -> float:
    return (result.value("decode_requests_per_s_per_replica") * result.value("output_tokens")
            / (result.value("instance_accelerators") / 8))


def test_deepseek_examples_within_15_percent_of_published_at_engine_defaults(ep144, sgl96):
    for result in (ep144, sgl96):   # no cap stated: the engine's defaults bind
        assert result.contract.strategy.max_batch_size is None and result.contract.strategy.max_batched_tokens is None
    assert _decode_per_node(ep144) == pytest.approx(14_800, rel=0.15)   # DeepSeek day 6, per H800 node
    assert _decode_per_node(sgl96) == pytest.approx(22_282, rel=0.15)   # LMSYS 2025-05-05, per H100 node
