"""Pipeline schedules (issue 19, items 4c and 4e): interleaving over uneven stages, zero bubble (ZB-H1, ZB-H2),
DualPipe, and selective recomputation under flash attention (formula audit 2, N8 and N11).

The bubbles are derived by hand on Llama-2-7B (32 layers, h 4,096) on 8 H100s (one DGX node) at a stated HFU of
0.30, PP 4, m = 8 micro-batches of 1 × 2,048 tokens. Hardware FLOPs per token (no recomputation) =
6 × 6,607,343,616 (matmul) + 12 × 32 × 32 × 128 × 2,048 (attention, full); the busiest stage's micro-batch time
t = FLOPs/token × 2,048 × imbalance / (TP × PP × 989.4 TFLOP/s × 0.30), the imbalance the fullest stage's layers
× p / L. Each pipeline send of a micro-batch (2,048 × 4,096 × 2 B) crosses NVLink at 370 GB/s with α 3.4 µs,
2·v of them per micro-batch, all on the critical path: c = 2·v·(α + bytes / BW).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate
from botec.layout import ModelFacts, layout_of

MATMUL = 6_738_415_616 - 131_072_000                      # all but the input-embedding lookup
FLOPS_PER_TOKEN = 6 * MATMUL + 12 * 32 * 32 * 128 * 2048   # PaLM: 12·L·H·Q·T, full
PEAK, HFU = 989.4e12, 0.30
SEND = 3.4e-6 + 2048 * 4096 * 2 / 370e9                   # one pipeline send of one micro-batch


def contract(strategy=None, assumptions=None, model="llama-2-7b", count=8):
    return {
        "workload": {"model": model, "tokens": "1B", "sequence_length": 2048},
        "supply": {"accelerator": "h100-sxm", "count": count, "cluster": {"node": "dgx-h100"}},
        "strategy": {"micro_batch_size": 1, "pipeline_parallel": 4, "gradient_accumulation_steps": 8,
                     **(strategy or {})},
        "assumptions": {"single_accelerator_hfu": HFU, **(assumptions or {})},
    }


def run(strategy=None, assumptions=None):
    return estimate(parse_contract(contract(strategy, assumptions)))


def microbatch_seconds(fullest_stage_layers: int) -> float:
    """t: one micro-batch on the fullest stage of 4 (TP 1), at the stated HFU."""
    imbalance = fullest_stage_layers * 4 / 32
    return FLOPS_PER_TOKEN * 2048 * imbalance / (4 * PEAK * HFU)


# --- N8: interleaving over uneven stages ---------------------------------------------------------------

LLAMA_405B = ModelFacts("llama-3.1-405b", layers=126, attention_heads=128, kv_heads=8, sequence_length=8192)


def layout_405b(**fields):
    base = dict(accelerators=16384, accelerators_per_node=8, tensor_parallel=8, pipeline_parallel=16,
                micro_batch_size=1, global_batch_size=2048)
    return layout_of("training", LLAMA_405B, **(base | fields))


def test_llama3_405b_uneven_stages_interleave():
    """Llama 3 §3.3.2: 126 layers on 16 stages as 7, 8 × 14, 7, interleaved. A stage has 8 slots (the first
    and last count the embedding and the LM head): up to 8 chunks, each at least one slot. The largest chunk
    holds ⌈8 / v⌉ layers: 4 at v = 2, 3 at v = 3 (chunks of 3, 3, 2), 1 at v = 8."""
    for v, chunk in ((1, 8), (2, 4), (3, 3), (5, 2), (8, 1)):
        layout = layout_405b(virtual_pipeline_stages=v).check()
        assert layout.stage_layer_split == (7,) + (8,) * 14 + (7,)
        assert layout.pipeline_chunk_layers == chunk
    with pytest.raises(ContractError) as error:
        layout_405b(virtual_pipeline_stages=9).check()
    assert error.value.field == "strategy.virtual_pipeline_stages"
    # the sweep's mask applies the same rule
    chunks = np.arange(1.0, 11.0)
    assert layout_405b(virtual_pipeline_stages=chunks).mask(10).tolist() == [True] * 8 + [False] * 2


def test_interleaved_bubble_with_uneven_chunks():
    """Stages of 7, 9, 9, 7 layers in v = 2 chunks: the fullest splits 5 + 4, so each of the p − 1 hops of the
    fill and drain waits for 5 layers, 5/9 of the stage's micro-batch time (not the 1/2 of even chunks)."""
    result = run({"pipeline_stage_layers": [7, 9, 9, 7], "pipeline_schedule": "interleaved",
                  "virtual_pipeline_stages": 2})
    t = microbatch_seconds(9)
    c = 2 * 2 * SEND
    assert result.value("pipeline_chunk_share") == pytest.approx(5 / 9)
    assert result.value("pipeline_bubble_seconds") == pytest.approx(3 * 5 / 9 * (t + c))


def test_interleaved_bubble_with_even_chunks_is_narayanans():
    """8 layers a stage in 2 chunks of 4: (p − 1)/v of the micro-batch time, (p − 1)(t_f + t_b)/v."""
    result = run({"pipeline_schedule": "interleaved", "virtual_pipeline_stages": 2})
    t = microbatch_seconds(8)
    assert result.value("pipeline_bubble_seconds") == pytest.approx(3 / 2 * (t + 2 * 2 * SEND))
    one_f_one_b = run()
    assert one_f_one_b.value("pipeline_bubble_seconds") == pytest.approx(3 * (t + 2 * SEND))


def test_llama3_405b_example_is_written_with_its_published_layout():
    from pathlib import Path

    from botec.contract import load_contract

    path = Path(__file__).resolve().parents[1] / "examples" / "llama3-405b-16k-gpu-failures.yaml"
    result = estimate(load_contract(path))
    layout = result.inputs.layout
    assert layout.split_text() == "7, 8 × 14, 7"
    assert layout.virtual_pipeline_stages == 8 and layout.schedule.value == "interleaved"


# --- zero bubble and DualPipe -------------------------------------------------------------------------------

def weight_gradient_seconds(t: float) -> float:
    """W: 2 of the 6 FLOPs per parameter and token are the weight gradients (no recomputation: HFU = MFU)."""
    return t * 2 * MATMUL / FLOPS_PER_TOKEN


def test_zero_bubble_h1_and_h2_bubbles():
    """Qi et al. 2023 Table 1, with F + B + W = t: ZB-H1 (p − 1)(F + B − W) = (p − 1)(t − 2W), ZB-H2
    (p − 1)(F + B − 2W) = (p − 1)(t − 3W); the on-path sends per hop as under 1F1B."""
    t = microbatch_seconds(8)
    w = weight_gradient_seconds(t)
    assert w / t == pytest.approx(0.3083, abs=1e-4)            # attention's FLOPs have no weight gradient
    h1 = run({"pipeline_schedule": "zb-h1"})
    h2 = run({"pipeline_schedule": "zb-h2"})
    assert h1.value("microbatch_weight_gradient_seconds") == pytest.approx(w)
    assert h1.value("pipeline_bubble_seconds") == pytest.approx(3 * (t - 2 * w + 2 * SEND))
    assert h2.value("pipeline_bubble_seconds") == pytest.approx(3 * (t - 3 * w + 2 * SEND))
    # at F = B = W, ZB-H1 is a third of 1F1B: here W is a little under t/3, so a little more than a third
    one_f_one_b = run().value("pipeline_bubble_seconds")
    assert 1 / 3 < h1.value("pipeline_bubble_seconds") / one_f_one_b < 0.45


def test_zero_bubble_memory():
    """ZB-H1 keeps 1F1B's p micro-batches in flight; ZB-H2 2p − 1 of them (here 7 of the m = 8)."""
    one_f_one_b = run().value("activation_bytes")
    assert run({"pipeline_schedule": "zb-h1"}).value("activation_bytes") == pytest.approx(one_f_one_b)
    assert run({"pipeline_schedule": "zb-h2"}).value("activation_bytes") == pytest.approx(one_f_one_b * 7 / 4)


def test_dualpipe_bubble_and_memory():
    """DeepSeek-V3 Table 2: (PP/2 − 1)(F&B + B − 3W), F&B charged as F + B: (4/2 − 1)(t + B − 3W) with B the
    full backward, 2/3 of t at a stated utilization; 2× parameters, PP + 1 micro-batches of activations."""
    t = microbatch_seconds(8)
    w = weight_gradient_seconds(t)
    result = run({"pipeline_schedule": "dualpipe"})
    assert result.value("pipeline_bubble_seconds") == pytest.approx(1 * (t + 2 / 3 * t - 3 * w + 2 * SEND))
    base = run()
    assert result.value("state_bytes") == pytest.approx(2 * base.value("state_bytes"))
    assert result.value("activation_bytes") == pytest.approx(base.value("activation_bytes") * 5 / 4)


@pytest.mark.parametrize("strategy, field", [
    ({"pipeline_schedule": "dualpipe", "pipeline_parallel": 2, "gradient_accumulation_steps": 3},
     "strategy.gradient_accumulation_steps"),                                  # m odd
    ({"pipeline_schedule": "dualpipe", "gradient_accumulation_steps": 6}, "strategy.gradient_accumulation_steps"),
    ({"pipeline_schedule": "zb-h1", "pipeline_parallel": 1}, "strategy.pipeline_schedule"),
    ({"pipeline_schedule": "zb-h2", "virtual_pipeline_stages": 2}, "strategy.virtual_pipeline_stages"),
])
def test_schedule_rules(strategy, field):
    with pytest.raises(ContractError) as error:
        run(strategy)
    assert error.value.field == field


def test_dualpipe_needs_an_even_pipeline():
    layout = layout_405b(pipeline_parallel=7, pipeline_schedule="dualpipe", global_batch_size=None,
                         gradient_accumulation_steps=14, accelerators=7 * 8)
    with pytest.raises(ContractError) as error:
        layout.check()
    assert error.value.field == "strategy.pipeline_schedule"
    assert "even pipeline_parallel" in str(error.value)


def test_schedules_in_a_sweep_match_the_estimate():
    """The bubble's per-row schedule choice works over arrays (a sweep of PP under zb-h1)."""
    from botec.inputs import build_inputs

    inputs = build_inputs(parse_contract(contract({"pipeline_schedule": "zb-h1"})))
    varied = inputs.vary({"strategy.pipeline_parallel": np.array([2.0, 4.0, 8.0])})
    assert varied.valid.all()
    arrays = inputs.graph.evaluate(varied.given, choices=inputs.choices)
    for i, p in enumerate((2, 4, 8)):
        single = run({"pipeline_schedule": "zb-h1", "pipeline_parallel": p})
        assert arrays["pipeline_bubble_seconds"].value[i] == pytest.approx(single.value("pipeline_bubble_seconds"))
        assert math.isfinite(arrays["step_seconds"].value[i])


# --- N11: selective recomputation under flash attention ---------------------------------------------------

def test_selective_recompute_buys_nothing_under_flash():
    """Llama 3.1 70B example (flash attention): selective and none give the same step and the same activations,
    and a finding names strategy.recompute. With eager attention selective still repeats the attention core."""
    from pathlib import Path

    from botec.contract import load_contract

    path = Path(__file__).resolve().parents[1] / "examples" / "llama3.1-70b-pretrain.yaml"
    selective = estimate(load_contract(path))
    none = estimate(load_contract(path, overrides=["strategy.recompute=none"]))
    assert selective.value("step_seconds") == pytest.approx(none.value("step_seconds"))
    assert selective.value("activation_bytes") == pytest.approx(none.value("activation_bytes"))
    assert selective.value("layer_recompute_seconds") == 0
    assert any("strategy.recompute" in finding.message and "flash" in finding.message
               for finding in selective.findings)
    assert not any("selective buys nothing" in finding.message for finding in none.findings)
    eager = estimate(load_contract(path, overrides=["assumptions.attention_kernel=eager"]))
    assert eager.value("layer_recompute_seconds") == pytest.approx(eager.value("attention_core_seconds"))
