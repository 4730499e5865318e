"""The compute-efficiency curves of ``efficiency.yaml``: one set per accelerator family.

Each family gives four figures of the op-level step model (:mod:`botec.training.ops`), each with a
typical value, a range and its basis (measured, fit, assumed) and source:

- ``matmul_efficiency``  e_mm: share of the dense peak a large GEMM sustains;
- ``kernel_overhead``    t0: fixed seconds per kernel (launch, last partial wave);
- ``memory_bandwidth_efficiency`` e_mem: share of the memory bandwidth a memory-bound op sustains;
- ``attention_efficiency`` e_attn: share of the 16-bit peak a fused (flash) attention kernel sustains;

and, optionally, ``low_precision_matmul``: per format (fp8, fp4), the share of the 16-bit e_mm a GEMM
in that format sustains of its own peak (:func:`matmul_efficiency_in`).

Together they are a size-dependent efficiency curve: a GEMM of F FLOPs sustains
e(F) = e_mm × F / (F + e_mm × peak × t0) of the peak (:func:`matmul_efficiency_at`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from botec.units import parse_quantity

__all__ = ["EfficiencyFigure", "FamilyEfficiency", "FIGURES", "family_efficiency", "families", "matmul_efficiency_at",
           "matmul_efficiency_in"]

# name -> the graph input it becomes, its unit dimension for parsing
FIGURES = {
    "matmul_efficiency": "ratio",
    "kernel_overhead": "seconds",
    "memory_bandwidth_efficiency": "ratio",
    "attention_efficiency": "ratio",
}
BASES = ("measured", "fit", "assumed")


@dataclass(frozen=True)
class EfficiencyFigure:
    value: float
    low: float
    high: float
    basis: str       # measured | fit | assumed
    source: str


@dataclass(frozen=True)
class FamilyEfficiency:
    family: str
    figures: dict[str, EfficiencyFigure]
    low_precision_matmul: dict[str, EfficiencyFigure] = field(default_factory=dict)  # fp8/fp4: share of 16-bit e_mm

    def __getitem__(self, name: str) -> EfficiencyFigure:
        return self.figures[name]


@lru_cache(maxsize=None)
def families() -> dict[str, FamilyEfficiency]:
    """Every family's figures, parsed and checked (low ≤ value ≤ high, a basis and a source each)."""
    from importlib import resources

    from botec.catalog import load_yaml_text

    data = load_yaml_text(resources.files("botec.catalog").joinpath("efficiency.yaml").read_text(encoding="utf-8"))
    out = {}
    for family, entry in data["families"].items():
        figures = {}
        for name, dimension in FIGURES.items():
            raw = entry[name]
            figure = EfficiencyFigure(
                value=parse_quantity(raw["value"], dimension), low=parse_quantity(raw["low"], dimension),
                high=parse_quantity(raw["high"], dimension), basis=str(raw["basis"]), source=str(raw["source"]))
            if not figure.low <= figure.value <= figure.high or figure.basis not in BASES:
                raise ValueError(f"efficiency.yaml: {family}.{name} needs low ≤ value ≤ high and a basis in {BASES}")
            figures[name] = figure
        low_precision = {}
        for precision, raw in (entry.get("low_precision_matmul") or {}).items():
            ratio = EfficiencyFigure(value=float(raw["value"]), low=float(raw["low"]), high=float(raw["high"]),
                                     basis=str(raw["basis"]), source=str(raw["source"]))
            if not 0 < ratio.low <= ratio.value <= ratio.high or ratio.basis not in BASES:
                raise ValueError(f"efficiency.yaml: {family}.low_precision_matmul.{precision} needs 0 < low ≤ value ≤ "
                                 f"high and a basis in {BASES}")
            low_precision[precision] = ratio
        out[family] = FamilyEfficiency(family, figures, low_precision)
    return out


def family_efficiency(family: str | None) -> FamilyEfficiency:
    """The figures of ``family`` (the generic set for a device with none, or an unknown family)."""
    table = families()
    return table.get(family or "generic", table["generic"])


def matmul_efficiency_in(figures: FamilyEfficiency, precision: str) -> EfficiencyFigure:
    """The family's e_mm at ``precision``: the 16-bit figure, times the format's ratio for FP8 and FP4
    (the generic family's ratio where the family states none); range low × low to min(1, high × high)."""
    base = figures["matmul_efficiency"]
    if precision not in ("fp8", "fp4"):
        return base
    ratio = figures.low_precision_matmul.get(precision) or families()["generic"].low_precision_matmul[precision]
    return EfficiencyFigure(value=base.value * ratio.value, low=base.low * ratio.low,
                            high=min(1.0, base.high * ratio.high), basis=ratio.basis,
                            source=f"{precision.upper()} GEMMs: the 16-bit e_mm {base.value:g} × {ratio.value:g} "
                                   f"({ratio.basis}: {ratio.source}); the 16-bit e_mm: {base.basis}: {base.source}")


def matmul_efficiency_at(gemm_flops, peak_flops_per_s, matmul_efficiency, kernel_overhead_seconds):
    """The share of the peak a GEMM of ``gemm_flops`` sustains: e(F) = e_mm · F / (F + e_mm · peak · t0).

    It follows from the kernel's time t = F / (e_mm · peak) + t0 (elementwise on arrays).
    """
    return gemm_flops / (peak_flops_per_s * (gemm_flops / (matmul_efficiency * peak_flops_per_s)
                                             + kernel_overhead_seconds))
