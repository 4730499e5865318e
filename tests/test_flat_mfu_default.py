"""The flat compute model's default MFU is the op-level model's on its stated reference shape, recomputed here.

botec.contract.defaults.FLAT_MFU states a value and a range and says how they were obtained: Llama 3.1 8B,
sequence 8,192, micro-batch 2, one accelerator, BF16, no recomputation, the default NVIDIA stack, through the
op-level model with the families' measured kernel figures. These tests rerun that derivation through
botec.api.estimate and require the stored figures to agree to within 0.005 (they are stored to two digits), so
the default cannot drift from its derivation when a kernel figure or the op-level model changes.
"""

from __future__ import annotations

import re

import pytest

import botec
from botec.catalog import accelerators, training_stacks
from botec.catalog.efficiency import attention_efficiency_for, family_efficiency
from botec.contract.defaults import (FLAT_MFU, FLAT_MFU_RANGE_ACCELERATORS, FLAT_MFU_REFERENCE,
                                     FLAT_MFU_REFERENCE_ACCELERATOR)

TOLERANCE = 0.005   # the stored figures are rounded to two digits


def flat_mfu_on(accelerator: str, end: str = "value") -> float:
    """The MFU of the reference contract on ``accelerator`` through the op-level model, with its family's kernel
    figures at their typical values (``end="value"``), all at their low ends (``"low"``: e_mm, e_mem and the
    default stack's training attention share low, the kernel overhead t0 high) or all at their high ends:
    MFU = model_flops_per_token × global_tokens_per_step / (peak_flops_per_s × compute_seconds_per_step)."""
    contract = {**FLAT_MFU_REFERENCE, "supply": {**FLAT_MFU_REFERENCE["supply"], "accelerator": accelerator}}
    if end != "value":
        figures = family_efficiency(accelerators()[accelerator].family)
        stacks = training_stacks()
        kernel = stacks.stacks[stacks.default].training_attention   # flash2: torchtitan's SDPA
        favourable = end == "high"

        def pick(figure):
            return figure.high if favourable else figure.low

        overhead = figures["kernel_overhead"]
        contract["assumptions"] = {
            "matmul_efficiency": pick(figures["matmul_efficiency"]),
            "memory_bandwidth_efficiency": pick(figures["memory_bandwidth_efficiency"]),
            "attention_efficiency": pick(attention_efficiency_for(figures, True, kernel)),
            "kernel_overhead": f"{(overhead.low if favourable else overhead.high) * 1e6:g} us",
        }
    result = botec.estimate(contract)
    return (result.value("model_flops_per_token") * result.value("global_tokens_per_step")
            / (result.value("peak_flops_per_s") * result.value("compute_seconds_per_step")))


@pytest.fixture(scope="module")
def derived():
    return {(accelerator, end): flat_mfu_on(accelerator, end)
            for accelerator in FLAT_MFU_RANGE_ACCELERATORS for end in ("value", "low", "high")}


def test_the_reference_stack_is_the_default_nvidia_stack():
    stacks = training_stacks()
    assert "NVIDIA" not in stacks.default_by_vendor and stacks.default == "torchtitan"
    assert accelerators()[FLAT_MFU_REFERENCE_ACCELERATOR].family == "hopper"


def test_the_value_is_the_reference_accelerators_op_level_mfu(derived):
    assert FLAT_MFU.value == pytest.approx(derived[(FLAT_MFU_REFERENCE_ACCELERATOR, "value")], abs=TOLERANCE)


def test_the_range_spans_the_families_at_their_figures_ends(derived):
    lowest = min(derived[(a, "low")] for a in FLAT_MFU_RANGE_ACCELERATORS)
    highest = max(derived[(a, "high")] for a in FLAT_MFU_RANGE_ACCELERATORS)
    assert FLAT_MFU.low == pytest.approx(lowest, abs=TOLERANCE)
    assert FLAT_MFU.high == pytest.approx(highest, abs=TOLERANCE)
    # each family's own typical MFU lies inside its own ends, and inside the stated range
    for accelerator in FLAT_MFU_RANGE_ACCELERATORS:
        assert derived[(accelerator, "low")] < derived[(accelerator, "value")] < derived[(accelerator, "high")]
        assert FLAT_MFU.low <= derived[(accelerator, "value")] <= FLAT_MFU.high


def test_the_flat_model_at_the_default_reproduces_the_op_level_compute_time_on_the_reference_shape():
    """The point of the derivation: at the reference shape, compute_model flat with no MFU stated (FLAT_MFU) gives
    the op-level model's compute seconds per step, to the rounding of the stored value (0.52 of 0.5244: 0.8 %)."""
    op_level = botec.estimate(FLAT_MFU_REFERENCE)
    flat = botec.estimate({**FLAT_MFU_REFERENCE, "assumptions": {"compute_model": "flat"}})
    assert flat.value("compute_seconds_per_step") == pytest.approx(op_level.value("compute_seconds_per_step"),
                                                                    rel=TOLERANCE / FLAT_MFU.value)
    assert flat.value("optimizer_step_seconds") == 0.0   # the stated utilization covers the optimizer step


def test_the_source_says_how_the_value_was_obtained():
    source = FLAT_MFU.source
    for said in ("op-level model", "Llama 3.1 8B", "sequence 8,192", "micro-batch 2", "one accelerator",
                 "no recomputation", "torchtitan", "FlashAttention-2", "catalog/efficiency.yaml", "H100",
                 "A100", "B200", "not a published run"):
        assert said in source, said
    quoted = {float(x) for x in re.findall(r"\b0\.\d\d\b", source)}
    assert {FLAT_MFU.value, FLAT_MFU.low, FLAT_MFU.high} <= quoted
    # the reference contract is the one the source describes
    assert FLAT_MFU_REFERENCE["workload"]["model"] == "llama-3.1-8b"
    assert FLAT_MFU_REFERENCE["workload"]["sequence_length"] == 8192
    assert FLAT_MFU_REFERENCE["strategy"]["micro_batch_size"] == 2
    assert FLAT_MFU_REFERENCE["supply"]["count"] == 1


def test_a_bare_parameter_count_runs_at_the_flat_default():
    """A model given only as a parameter count (layers and width, no heads) runs the flat model at FLAT_MFU: 1B
    parameters on one H100, 2,048-token sequences, 8 per micro-batch, 6 FLOPs per parameter and token (no attention
    term without heads): 6 × 10⁹ × 16,384 tokens / (989.4 TFLOP/s × 0.52) = 0.191 s."""
    result = botec.estimate({"workload": {"model": {"name": "bare", "parameters": "1B", "layers": 16,
                                                    "hidden_size": 2048}, "tokens": "1B",
                                          "sequence_length": 2048},
                             "supply": {"accelerator": "h100-sxm", "count": 1},
                             "strategy": {"micro_batch_size": 8}})
    assert result.value("microbatch_compute_seconds") == pytest.approx(6e9 * 16384 / (989.4e12 * 0.52), rel=1e-3)
