"""The efficiency assumptions both kinds of contract state the same way: one section, one set of field names.

The op-level compute model (training's ``compute_model: op_level``, and every serving step) runs each op on
its roofline: a GEMM at ``matmul_efficiency`` of the dense peak plus ``kernel_overhead`` per kernel, a
memory-bound op at ``memory_bandwidth_efficiency`` of the bandwidth, fused attention at
``attention_efficiency`` of the 16-bit peak. Left out, each figure comes from a measured curve the contract
names (``efficiency_curve``), else the accelerator family's curve in ``catalog/efficiency.yaml`` (or the
opt-in calibration set ``efficiency_set``); serving's ``kernel_overhead`` defaults to the engine's, whose
decode step runs as a captured CUDA graph. ``attention_flops`` says which attention-score FLOPs are counted.

:class:`botec.contract.training.TrainingAssumptions` and :class:`botec.contract.serving.ServingAssumptions`
inherit these fields, so a contract writes them flat under ``assumptions:`` in either kind, and one
definition validates them.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from botec.contract.sections import Section
from botec.contract.stated import quantity

__all__ = ["EfficiencyAssumptions", "OP_LEVEL_FIGURES"]


class EfficiencyAssumptions(Section):
    """How the compute is counted and at what efficiency each op runs (default: the accelerator family's curve)."""

    attention_flops: Literal["full", "causal", "none"] = Field(
        "full", description="attention-score FLOPs counted: full (PaLM, nanoGPT), causal half (Megatron) or none")
    matmul_efficiency: Optional[quantity(
        "ratio", "Share of the dense peak a large GEMM sustains (default: the accelerator family's curve in the "
                 "catalog)", exclusive_minimum=0, maximum=1)] = None
    kernel_overhead: Optional[quantity(
        "seconds", "Fixed time of every kernel: launch and last partial wave (default: the family's curve; "
                   "serving: the engine's, its decode step captured in CUDA graphs)", minimum=0)] = None
    memory_bandwidth_efficiency: Optional[quantity(
        "ratio", "Share of the memory bandwidth memory-bound ops (weights, KV cache) sustain (default: the family's "
                 "curve)", exclusive_minimum=0, maximum=1)] = None
    attention_efficiency: Optional[quantity(
        "ratio", "Share of the 16-bit peak a fused attention kernel sustains (default: the family's curve)",
        exclusive_minimum=0, maximum=1)] = None
    efficiency_curve: Optional[str] = Field(
        None, description="a curve file written by `botec measure --efficiency-curve` on this contract's "
                          "accelerator (a path relative to the contract): measured figures in place of the catalog's")
    efficiency_set: Optional[str] = Field(
        None, description="a named calibration set of the catalog (catalog/calibrations/: megatron-2022-fit) whose "
                          "figures, fitted to end-to-end runs, replace the measured defaults of its families; opt-in "
                          "only: the defaults come from operator measurements")


OP_LEVEL_FIGURES = ("matmul_efficiency", "kernel_overhead", "memory_bandwidth_efficiency", "attention_efficiency",
                    "efficiency_curve")
"""The fields that only the op-level compute model reads (refused beside training's flat or efficiency methods)."""
