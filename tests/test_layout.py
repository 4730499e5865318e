"""The layout: one rule list behind the estimate's check, the sweep's mask and the search's candidates;
uneven pipeline stages as published runs used them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate
from botec.inputs import build_inputs
from botec.layout import SEARCH_BOUNDS, ModelFacts, candidates, default_stage_layers

from conftest import LESSON, run_cli


# --- uneven pipeline stages -----------------------------------------------------------------------

@pytest.mark.parametrize("layers, stages, split", [
    (80, 4, (20, 20, 20, 20)),                       # p divides L: L/p each
    (126, 16, (7,) + (8,) * 14 + (7,)),              # Llama 3.1 405B: "one layer fewer on the first and last"
    (70, 12, (5,) + (6,) * 10 + (5,)),               # BLOOM: 72 slots (70 + embedding + head) / 12
    (61, 16, (3,) + (4,) * 14 + (2,)),               # DeepSeek-V3: 63 slots, the 15 extra to the middle and first
    (40, 16, (1,) + (3,) * 10 + (2,) * 4 + (1,)),    # 42 slots: 2 each, the 10 extra to the first middle ones
])
def test_the_default_split(layers, stages, split):
    assert default_stage_layers(layers, stages) == split
    assert sum(split) == layers


def test_no_default_split_when_the_ends_would_be_empty():
    assert default_stage_layers(5, 4) is None       # 7 slots over 4 stages: the first and last would hold 0
    assert default_stage_layers(8, 9) is None       # more stages than layers


def pretraining(model, count, strategy, sequence=8192, accelerator="h100-sxm", node="dgx-h100"):
    return parse_contract({
        "workload": {"model": model, "tokens": "15T", "sequence_length": sequence},
        "supply": {"accelerator": accelerator, "count": count, "cluster": {"node": node}},
        "strategy": {"micro_batch_size": 1, "recompute": "full", "zero_stage": 1, **strategy},
        "assumptions": {"step_time_model": "components", "activation_model": "korthikanti",
                        "attention_flops": "causal", "single_accelerator_mfu": 0.4}})


def test_llama_405b_on_16_stages_as_meta_ran_it():
    """Llama 3 paper §3.3.2: 16K H100s, TP 8 × PP 16 × DP 128, 126 layers: the first and last stage one fewer.

    The fullest stage holds 8 layers: it sets the step (8 / (126 / 16) of an even stage's compute) and the
    state; under 1F1B the second stage keeps the most activations in flight: (16 − 1) × 8 = 120 layers' worth."""
    result = estimate(pretraining("llama-3.1-405b", 16_384, {"tensor_parallel": 8, "pipeline_parallel": 16,
                                                             "global_batch_size": 2048}))
    assert result.inputs.layout.stage_layer_split == (7,) + (8,) * 14 + (7,)
    assert result.value("pipeline_stage_layers") == 8
    assert result.value("pipeline_activation_layers") == 120
    assert result.value("pipeline_stage_imbalance") == pytest.approx(8 * 16 / 126)
    # a middle stage's 8 layers are the fullest (the first and last hold 7 layers and the embeddings or the head)
    block = (result.value("parameters") - 2 * 128_256 * 16_384) / 126
    assert result.value("dense_parameters_per_device") == pytest.approx(block * 8 / 8)
    # + the one layer full recomputation rebuilds during its backward (fused attention: its linear parts only)
    remat = result.value("layer_linear_activation_bytes")
    assert result.value("rematerialized_layer_bytes") == remat
    assert result.value("activation_bytes") == pytest.approx(120 * result.value("activation_bytes_per_layer") + remat)
    assert "stages of 7, 8 × 14, 7 layers" in __import__("botec.report", fromlist=["layout_line"]).layout_line(result)


def test_bloom_on_12_stages():
    """BLOOM: 384 A100s, TP 4 × PP 12 × DP 8; 70 layers as 5, 6 × 10, 5 (its embedding and head are stages' layers)."""
    result = estimate(pretraining("bloom-176b", 384, {"tensor_parallel": 4, "pipeline_parallel": 12,
                                                      "global_batch_size": 2048}, sequence=2048,
                                  accelerator="a100-sxm-80gb", node="dgx-a100"))
    assert result.inputs.layout.stage_layer_split == (5,) + (6,) * 10 + (5,)
    assert result.value("pipeline_stage_layers") == 6


def test_deepseek_v3_on_16_stages():
    """DeepSeek-V3 report §3.2: PP 16, EP 64 over 2,048 GPUs; 61 layers split 3, 4 × 14, 2."""
    result = estimate(pretraining("deepseek-v3", 2048, {"pipeline_parallel": 16, "expert_parallel": 64,
                                                        "global_batch_size": 15_360}, sequence=4096,
                                  accelerator="h200", node="dgx-h200"))
    assert result.inputs.layout.stage_layer_split == (3,) + (4,) * 14 + (2,)
    assert result.value("pipeline_stage_layers") == 4


def test_a_stated_split_is_used_as_written():
    split = [6] + [8] * 14 + [8]
    result = estimate(pretraining("llama-3.1-405b", 16_384, {"tensor_parallel": 8, "pipeline_parallel": 16,
                                                             "global_batch_size": 2048,
                                                             "pipeline_stage_layers": split}))
    assert result.value("pipeline_stage_layers") == 8
    assert result.value("pipeline_activation_layers") == max((16 - i) * n for i, n in enumerate(split))


def test_interleaving_needs_pipeline_stages_in_the_estimate_and_the_sweep():
    """The review's bug 4: PP 1 with an interleaved schedule was accepted by the estimate and masked by the sweep."""
    data = {"workload": {"model": "llama-2-7b", "tokens": "1B", "sequence_length": 2048},
            "supply": {"accelerator": "h100-sxm", "count": 8},
            "strategy": {"micro_batch_size": 1, "pipeline_schedule": "interleaved", "virtual_pipeline_stages": 2}}
    with pytest.raises(ContractError, match="it needs pipeline_parallel > 1") as error:
        build_inputs(parse_contract(data))
    assert error.value.field == "strategy.virtual_pipeline_stages"
    base = build_inputs(parse_contract({**data, "strategy": {"micro_batch_size": 1}}))
    assert not base.vary({"strategy.virtual_pipeline_stages": np.array([2.0])}).valid[0]


# --- one rule list: the estimate accepts ⇔ the sweep marks valid ⇔ the search enumerates -------------

MODELS = {  # name: (layers, heads, KV heads, experts)
    "llama-2-7b": (32, 32, 32, None),
    "llama-3.1-8b": (32, 32, 8, None),
    "qwen2.5-7b": (28, 28, 4, None),
    "mixtral-8x7b": (32, 32, 8, 8),
}

layouts = st.fixed_dictionaries({
    "model": st.sampled_from(list(MODELS)),
    "count": st.sampled_from([1, 2, 4, 8, 12, 16, 24, 32, 64]),
    "tensor_parallel": st.integers(1, 16),
    "pipeline_parallel": st.integers(1, 12),
    "virtual_pipeline_stages": st.integers(1, 4),
    "context_parallel": st.integers(1, 4),
    "expert_parallel": st.sampled_from([1, 2, 4, 8, 16]),
    "zero_stage": st.integers(0, 3),
    "micro_batch_size": st.sampled_from([1, 2, 4, 8]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "sequence_parallel": st.booleans(),
    "global_batch_size": st.sampled_from([None, 64, 96, 256]),
    "sequence_length": st.sampled_from([2048, 3000, 4096]),
})


def _contract(layout: dict) -> dict:
    strategy = {key: layout[key] for key in ("tensor_parallel", "pipeline_parallel", "virtual_pipeline_stages",
                                             "context_parallel", "expert_parallel", "zero_stage", "micro_batch_size",
                                             "recompute", "sequence_parallel")}
    strategy["pipeline_schedule"] = "interleaved" if layout["virtual_pipeline_stages"] > 1 else "1f1b"
    if layout["global_batch_size"] is not None:
        strategy["global_batch_size"] = layout["global_batch_size"]
    return {"workload": {"model": layout["model"], "tokens": "1B", "sequence_length": layout["sequence_length"]},
            "supply": {"accelerator": "h100-sxm", "count": layout["count"], "cluster": {"node": "dgx-h100"}},
            "strategy": strategy}


_SPEC = {"count": "supply.count", "recompute": "strategy.recompute", "sequence_parallel": "strategy.sequence_parallel"}
_RECOMPUTE = {"none": 0.0, "selective": 1.0, "full": 2.0}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts)
def test_estimate_accepts_iff_the_sweep_marks_valid_iff_the_search_enumerates(layout):
    try:
        build_inputs(parse_contract(_contract(layout)))
        accepted = True
    except ContractError:
        accepted = False
    base = dict(layout, count=1, tensor_parallel=1, pipeline_parallel=1, virtual_pipeline_stages=1,
                context_parallel=1, expert_parallel=1, zero_stage=0, sequence_parallel=False, global_batch_size=None,
                micro_batch_size=1, sequence_length=layout["sequence_length"])
    inputs = build_inputs(parse_contract(_contract(base)))
    changes = {}
    for key in ("count", "tensor_parallel", "pipeline_parallel", "virtual_pipeline_stages", "context_parallel",
                "expert_parallel", "zero_stage", "micro_batch_size", "sequence_parallel", "recompute",
                "global_batch_size"):
        value = layout[key]
        if key == "global_batch_size" and value is None:
            continue
        value = _RECOMPUTE[value] if key == "recompute" else float(value)
        changes[_SPEC.get(key, f"strategy.{key}")] = np.array([value])
    assert bool(inputs.vary(changes).valid[0]) == accepted, layout
    layers, heads, kv_heads, experts = MODELS[layout["model"]]
    within = (layout["virtual_pipeline_stages"] in SEARCH_BOUNDS.virtual_pipeline_stages
              and layout["context_parallel"] <= SEARCH_BOUNDS.max_context_parallel
              and layout["micro_batch_size"] in SEARCH_BOUNDS.micro_batch_sizes)
    if accepted and within:
        tried = candidates(ModelFacts(layout["model"], layers, heads, kv_heads, experts, layout["sequence_length"]),
                           layout["count"])
        for key in ("tensor_parallel", "pipeline_parallel", "virtual_pipeline_stages", "context_parallel",
                    "expert_parallel", "zero_stage", "micro_batch_size"):
            assert layout[key] in tried[f"strategy.{key}"], (key, layout)


def test_a_layout_rule_error_is_the_same_line_from_the_cli(capsys, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(LESSON.read_text())
    code, out, err = run_cli(["estimate", str(path), "--set", "strategy.tensor_parallel=2"], capsys)
    assert code == 2 and "strategy.tensor_parallel: tensor_parallel needs the model's attention heads" in err


def test_search_candidates_cover_uneven_pipelines():
    """PP need not divide the layers now: 126 layers on 16 stages is a candidate on 16,384 accelerators."""
    tried = candidates(ModelFacts("405b", 126, 128, 8, None, 8192), 16_384)
    assert 16 in tried["strategy.pipeline_parallel"] and 3 not in tried["strategy.pipeline_parallel"]


# --- issue 21: the recompute choice's words travel with its definition (graph/ never imports layout/) --------

def test_explain_words_the_recompute_choice_from_its_definitions_labels():
    from botec.graph import Definition, Quantity
    from botec.graph.explain import explain_line, worded
    from botec.layout import Recompute

    result = estimate(parse_contract(__import__("yaml").safe_load(LESSON.read_text())
                                     | {"strategy": {"micro_batch_size": 1, "recompute": "full"}}))
    recompute = result.quantities["recompute"]
    assert recompute.definition.labels == tuple(mode.label for mode in Recompute) == ("none", "selective", "full")
    assert worded(recompute) == "full"
    assert explain_line(recompute, result.quantities) == "recompute = full  [assumed, strategy.recompute]"
    # a quantity without labels, or a value without a word, is written as a number
    bare = Definition("count", "compute", "1", "a count")
    assert worded(Quantity(bare, 2.0, "assumed")) is None
    assert worded(recompute._replace(value=7.0)) is None and worded(recompute._replace(value=1.5)) is None
