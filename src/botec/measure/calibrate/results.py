"""What a calibration gives: each figure estimated beside measured (:class:`Comparison`), the assumptions it pins
down with their notes, the diagnosis (:class:`Calibration`), and the assumption that sets a training step's
compute time (:func:`efficiency_assumption`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from botec.errors import ContractError
from botec.estimation import Estimate
from botec.units import format_quantity


@dataclass(frozen=True)
class Comparison:
    name: str
    unit: str
    estimated: float
    measured: float
    note: str = ""     # how each side was counted, when it needs saying (a FLOP convention, a derivation)

    @property
    def ratio(self) -> float:
        return self.measured / self.estimated if self.estimated else float("nan")


END_TO_END_NOTE = ("end_to_end_mfu replaces single_accelerator_mfu × scaling_efficiency: the measured step "
                   "already includes the scaling losses, so multiplying by a scaling factor would count them twice")


@dataclass(frozen=True)
class Calibration:
    comparisons: list[Comparison]
    assumptions: dict[str, tuple[float, str]]   # contract path -> (value, note)
    diagnosis: list[str]
    notes: list[str]
    measured: list[str] = field(default_factory=list)   # what was read, for a training log or a serving benchmark
    missing: list[str] = field(default_factory=list)    # comparisons the measurement cannot support, and why
    serving: dict = field(default_factory=dict)         # a serving benchmark: the measured load as botec read it

    def __post_init__(self) -> None:
        """Every figure finite (JSON has no NaN or Infinity, and a report of one says nothing): a figure that is
        not is refused in one line naming it; a comparison whose estimate is 0 has no ratio, and is told in the
        notes instead."""
        figures = [(f"{side} {c.name}", c.name, value) for c in self.comparisons
                   for side, value in (("measured", c.measured), ("estimated", c.estimated))]
        figures += [(f"back-solved {path}", path, value) for path, (value, _) in self.assumptions.items()]
        figures += [(f"serving {key}", key, value) for key, value in self.serving.items()
                    if isinstance(value, float)]
        for words, name, value in figures:
            if not math.isfinite(value):
                raise ContractError(f"the {words} is {value}, not a finite number: is a figure of the measurement "
                                    "far out of range, or in another unit?", field=name)
        unmatched = [c for c in self.comparisons if c.estimated == 0]
        if unmatched:
            self.comparisons[:] = [c for c in self.comparisons if c.estimated != 0]
            self.notes.extend(f"{c.name}: estimated 0, measured {format_quantity(c.measured, c.unit)} (no ratio)"
                              for c in unmatched)


def efficiency_assumption(result: Estimate) -> str:
    """The assumption that sets the compute time of a step: with the step built from its components, the
    large-GEMM efficiency of the op-level model, or the stated MFU or HFU of the flat one; else the end-to-end
    MFU (given in place of MFU × scaling)."""
    if result.choices.get("step_time") == "components":
        return {"op_level": "assumptions.matmul_efficiency", "hardware_flops": "assumptions.single_accelerator_hfu"}.get(
            result.choices.get("compute"), "assumptions.single_accelerator_mfu")
    if result.choices.get("step_time") == "efficiency_hfu":  # the contract states its utilization as an HFU
        return "assumptions.end_to_end_hfu"
    return "assumptions.end_to_end_mfu"


