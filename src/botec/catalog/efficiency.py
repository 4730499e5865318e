"""The compute-efficiency curves of ``efficiency.yaml``: one set per accelerator family.

Each family gives four figures of the op-level step model (:mod:`botec.training.ops`), each with a
typical value, a range and its basis (measured, fit, assumed) and source:

- ``matmul_efficiency``  e_mm: share of the dense peak a large GEMM sustains;
- ``kernel_overhead``    t0: fixed seconds per kernel (launch, last partial wave);
- ``memory_bandwidth_efficiency`` e_mem: share of the memory bandwidth a memory-bound op sustains;
- ``attention_efficiency`` e_attn: share of the 16-bit peak the fused attention forward of a serving
  engine sustains (prefill);

``training_attention_efficiency``: per kernel a training stack of stacks.yaml runs (``flash2``: PyTorch SDPA's
FlashAttention-2; ``cudnn``: Transformer Engine's cuDNN fused attention), the share of the 16-bit peak its
forward plus backward sustains (:func:`attention_efficiency_for`); and, optionally,
``low_precision_matmul``: per format (fp8, fp4), the share of the 16-bit e_mm a GEMM in that format
sustains of its own peak (:func:`matmul_efficiency_in`).

A figure derived from an operator table names it (``measurement``: a file of ``measurements/``, read by
:func:`operator_measurements`). Named calibration sets (``calibrations/*.yaml``, :func:`efficiency_sets`)
hold figures fitted to end-to-end runs; a contract opts into one with ``assumptions.efficiency_set``
(:func:`family_efficiency`), and each set names the validation cases it was fitted to.

Together they are a size-dependent efficiency curve: a GEMM of F FLOPs sustains
e(F) = e_mm × F / (F + e_mm × peak × t0) of the peak (:func:`matmul_efficiency_at`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from botec.catalog.root import catalog_cache, catalog_root
from botec.units import parse_quantity

__all__ = ["EfficiencyFigure", "FamilyEfficiency", "EfficiencySet", "OperatorMeasurement", "FIGURES",
           "attention_efficiency_for", "efficiency_sets", "family_efficiency", "families",
           "matmul_efficiency_at", "matmul_efficiency_in", "operator_measurements"]

# name -> the graph input it becomes, its unit dimension for parsing
FIGURES = {
    "matmul_efficiency": "ratio",
    "kernel_overhead": "seconds",
    "memory_bandwidth_efficiency": "ratio",
    "attention_efficiency": "ratio",
}
BASES = ("measured", "fit", "assumed")


class EfficiencyFigure(NamedTuple):
    """One figure with its range, basis and source (a record: a NamedTuple is built at start-up in a seventh of a
    frozen dataclass's time)."""

    value: float
    low: float
    high: float
    basis: str       # measured | fit | assumed
    source: str
    measurement: str | None = None   # the operator table (measurements/<name>.yaml) the figure is derived from


@dataclass(frozen=True)
class FamilyEfficiency:
    family: str
    figures: dict[str, EfficiencyFigure]
    low_precision_matmul: dict[str, EfficiencyFigure] = field(default_factory=dict)  # fp8/fp4: share of 16-bit e_mm
    training_attention: dict[str, EfficiencyFigure] = field(default_factory=dict)    # flash2/cudnn: fwd + bwd share
    calibration: str | None = None   # the calibration set whose figures replace measured ones here, if any

    def __getitem__(self, name: str) -> EfficiencyFigure:
        return self.figures[name]


class EfficiencySet(NamedTuple):
    """A named calibration: figures fitted to end-to-end runs, per family, and the validation cases they were
    fitted to (``botec validate`` reports those rows as calibration rows when the set is in force)."""

    name: str
    description: str
    fitted_to: tuple[str, ...]
    families: dict[str, dict[str, EfficiencyFigure]]


class OperatorMeasurement(NamedTuple):
    """A measured operator table (``measurements/*.yaml``): GEMM points (m, n, k, seconds) or causal context
    attention points (batch, sequence, seconds), with where they were measured and copied from."""

    name: str
    kind: str            # gemm | context_attention
    device: str          # the catalog key of the accelerator measured
    measured_on: str
    source: dict
    points: tuple[tuple[float, ...], ...]   # latencies in seconds
    shape: dict                             # the table's fixed dimensions (may be empty)


def _figure(raw: dict, dimension: str, where: str) -> EfficiencyFigure:
    figure = EfficiencyFigure(
        value=parse_quantity(raw["value"], dimension), low=parse_quantity(raw["low"], dimension),
        high=parse_quantity(raw["high"], dimension), basis=str(raw["basis"]), source=str(raw["source"]),
        measurement=raw.get("measurement"))
    if not figure.low <= figure.value <= figure.high or figure.basis not in BASES:
        raise ValueError(f"{where} needs low ≤ value ≤ high and a basis in {BASES}")
    return figure


@catalog_cache
def families() -> dict[str, FamilyEfficiency]:
    """Every family's figures, parsed and checked (low ≤ value ≤ high, a basis and a source each)."""
    from botec.yamlfile import load_yaml_text

    data = load_yaml_text(catalog_root().joinpath("efficiency.yaml").read_text(encoding="utf-8"))
    out = {}
    for family, entry in data["families"].items():
        figures = {name: _figure(entry[name], dimension, f"efficiency.yaml: {family}.{name}")
                   for name, dimension in FIGURES.items()}
        training_attention = {kernel: _figure(raw, "ratio", f"efficiency.yaml: {family}.training_attention_efficiency."
                                                            f"{kernel}")
                              for kernel, raw in (entry.get("training_attention_efficiency") or {}).items()}
        low_precision = {}
        for precision, raw in (entry.get("low_precision_matmul") or {}).items():
            ratio = EfficiencyFigure(value=float(raw["value"]), low=float(raw["low"]), high=float(raw["high"]),
                                     basis=str(raw["basis"]), source=str(raw["source"]))
            if not 0 < ratio.low <= ratio.value <= ratio.high or ratio.basis not in BASES:
                raise ValueError(f"efficiency.yaml: {family}.low_precision_matmul.{precision} needs 0 < low ≤ value ≤ "
                                 f"high and a basis in {BASES}")
            low_precision[precision] = ratio
        out[family] = FamilyEfficiency(family, figures, low_precision, training_attention)
    return out


@catalog_cache
def efficiency_sets() -> dict[str, EfficiencySet]:
    """The named calibration sets of ``calibrations/*.yaml`` (opt-in: ``assumptions.efficiency_set``)."""
    from botec.yamlfile import load_yaml_text

    out = {}
    for path in sorted(catalog_root().joinpath("calibrations").iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".yaml"):
            continue
        data = load_yaml_text(path.read_text(encoding="utf-8"))
        name = str(data["name"])
        overrides = {family: {figure: _figure(raw, FIGURES[figure], f"calibrations/{path.name}: {family}.{figure}")
                              for figure, raw in entry.items()}
                     for family, entry in data["families"].items()}
        out[name] = EfficiencySet(name, str(data["description"]), tuple(data.get("fitted_to") or ()), overrides)
    return out


@catalog_cache
def operator_measurements() -> dict[str, OperatorMeasurement]:
    """The operator tables the measured figures of ``efficiency.yaml`` are derived from, by file name."""
    from botec.yamlfile import load_yaml_text

    out = {}
    for path in sorted(catalog_root().joinpath("measurements").iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".yaml"):
            continue
        data = load_yaml_text(path.read_text(encoding="utf-8"))
        points = tuple(tuple(row[:-1]) + (row[-1] * 1e-6,) for row in data["points"])   # microseconds -> seconds
        name = path.name[:-len(".yaml")]
        out[name] = OperatorMeasurement(name, str(data["kind"]), str(data["device"]), str(data["measured_on"]),
                                        dict(data["source"]), points, dict(data.get("shape") or {}))
    return out


def family_efficiency(family: str | None, efficiency_set: str | None = None) -> FamilyEfficiency:
    """The figures of ``family`` (the generic set for a device with none, or an unknown family), with the
    figures of the calibration ``efficiency_set`` in place of the measured ones where it gives them."""
    table = families()
    figures = table.get(family or "generic", table["generic"])
    if efficiency_set is None:
        return figures
    calibrated = efficiency_sets()[efficiency_set].families.get(figures.family)
    if not calibrated:
        return figures
    return FamilyEfficiency(figures.family, {**figures.figures, **calibrated}, figures.low_precision_matmul,
                            figures.training_attention, calibration=efficiency_set)


def attention_efficiency_for(figures: FamilyEfficiency, training: bool, kernel: str = "flash2") -> EfficiencyFigure:
    """The fused attention figure of a training step (forward + backward of ``kernel``) or of serving (the
    engine's forward). A family without a training figure lends its serving forward, marked assumed."""
    serving = figures["attention_efficiency"]
    if not training:
        return serving
    own = figures.training_attention.get(kernel)
    if own is not None:
        return own
    return EfficiencyFigure(serving.value, serving.low, serving.high, "assumed",
                            f"no forward + backward figure for {kernel} in this family: its serving forward "
                            f"({serving.basis}: {serving.source})")


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
