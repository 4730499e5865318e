"""The figures of the op-level compute model as inputs: the contract's, a measured curve's, or the catalog's.

In this order, per figure: a value the contract states (``assumptions.matmul_efficiency`` ...); a
curve measured on this very accelerator by ``botec measure --efficiency-curve``
(``assumptions.efficiency_curve``: refused for any other device, never used silently); the
accelerator family's curve in ``catalog/efficiency.yaml``, with its range and basis.

A measured curve gives GEMM efficiencies e_i at sizes F_i. The kernel model t = F / (e_mm · peak) + t0
is a line in F, so a least-squares line through the points' times t_i = F_i / (e_i · peak) gives
e_mm (from its slope) and t0 (its intercept); the memory-bound figure is the mean efficiency of the
three largest transfers.
"""

from __future__ import annotations

from pathlib import Path

from botec.catalog.efficiency import (FIGURES, attention_efficiency_for, efficiency_sets, families, family_efficiency,
                                      matmul_efficiency_in)
from botec.errors import ContractError
from botec.graph import Given
from botec.inputs.stated import StatedInputs

__all__ = ["efficiency_given", "fit_curve", "INPUT_OF"]

# catalog figure -> graph input
INPUT_OF = {"matmul_efficiency": "matmul_efficiency", "kernel_overhead": "kernel_overhead_seconds",
            "memory_bandwidth_efficiency": "memory_bandwidth_efficiency", "attention_efficiency": "attention_efficiency"}
_SIXTEEN_BIT = ("bf16", "fp16")


def fit_curve(matmul_points, memory_points, peak_flops_per_s: float) -> dict[str, float]:
    """(e_mm, t0, e_mem) from measured points: ``matmul_points`` as (GFLOP, efficiency), ``memory_points`` as
    (MB, efficiency), efficiencies relative to ``peak_flops_per_s``."""
    flops = [gflop * 1e9 for gflop, _ in matmul_points]
    seconds = [f / (efficiency * peak_flops_per_s) for f, (_, efficiency) in zip(flops, matmul_points)]
    count = len(flops)
    if count < 2:
        raise ContractError("a measured efficiency curve needs at least two GEMM sizes", field="assumptions.efficiency_curve")
    mean_f, mean_t = sum(flops) / count, sum(seconds) / count
    spread = sum((f - mean_f) ** 2 for f in flops)
    slope = sum((f - mean_f) * (t - mean_t) for f, t in zip(flops, seconds)) / spread if spread else 0.0
    if slope <= 0:
        raise ContractError("the measured GEMM times do not grow with size: the curve cannot be fitted",
                            field="assumptions.efficiency_curve")
    intercept = mean_t - slope * mean_f
    largest = sorted(memory_points)[-3:]
    fitted = {"matmul_efficiency": min(1.0, 1 / (slope * peak_flops_per_s)), "kernel_overhead": max(0.0, intercept)}
    if largest:
        fitted["memory_bandwidth_efficiency"] = min(1.0, sum(e for _, e in largest) / len(largest))
    return fitted


def _measured(assumptions, device, accelerator_name: str, peak: float, base_dir: Path | None) -> tuple[dict, str]:
    """The figures of the curve file the contract names, fitted, and their source text."""
    from botec.catalog.curves import read
    from botec.errors import check_user_path

    check_user_path(assumptions.efficiency_curve, field="assumptions.efficiency_curve")
    path = Path(assumptions.efficiency_curve)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    curve = read(path)
    key = device.key if device is not None else accelerator_name
    if not curve.matches(key):
        raise ContractError(f"{path.name} was measured on {curve.device_name} ({curve.accelerator or 'no catalog key'}), "
                            f"not on this contract's {key}: a curve applies only to the device it was measured on",
                            field="assumptions.efficiency_curve")
    fitted = fit_curve(curve.matmul_points, curve.memory_points, curve.peak_flops_per_s)
    fitted["matmul_efficiency"] = min(1.0, fitted["matmul_efficiency"] * curve.peak_flops_per_s / peak)
    return fitted, f"measured: {path.name} ({curve.device_name}, {curve.created[:10]}), fitted to t = F / (e·peak) + t0"


def calibration_of(assumptions) -> str | None:
    """The calibration set the contract opts into (``assumptions.efficiency_set``), checked against the catalog."""
    name = getattr(assumptions, "efficiency_set", None)
    if name is None:
        return None
    known = efficiency_sets()
    if name not in known:
        from botec.catalog import did_you_mean

        raise ContractError(f"no calibration set named {name!r}{did_you_mean(name, known)}; the catalog has "
                            f"{', '.join(sorted(known))} (leave it out for the measured defaults)",
                            field="assumptions.efficiency_set")
    return name


def efficiency_given(assumptions, supply, device, precision: str, base_dir: Path | None,
                     stated: StatedInputs, training_attention_kernel: str | None = None) -> dict[str, Given]:
    """The op-level figures and the 16-bit peak attention runs at, as inputs.

    ``training_attention_kernel`` (flash2, cudnn: the training stack's) selects the forward + backward attention
    figure of a training step; without it (serving) the engine's forward figure applies.
    """
    family = getattr(device, "family", None) if device is not None else None
    known = family in families()
    calibration = calibration_of(assumptions)
    figures = family_efficiency(family if known else None, calibration)
    label = f"{family} family" if known else "no family (an inline or unclassified device): generic"
    given: dict[str, Given] = {}
    if device is not None:
        sixteen = next((p for p in _SIXTEEN_BIT if p in device.peak_flops_per_s), precision)
        given["attention_peak_flops_per_s"] = Given(device.peak_flops_per_s[sixteen], "catalog",
                                                    f"{sixteen} dense: attention runs in 16-bit; "
                                                    f"{device.source_of('peak_flops_per_s')}", "supply.accelerator")
        peak = device.peak_flops_per_s[precision]
        name = device.key
    else:
        peak = supply.accelerator.peak_flops_per_s.value
        name = supply.accelerator.name
        given["attention_peak_flops_per_s"] = Given(peak, "assumed", "the stated peak (an inline device has one)",
                                                    "supply.accelerator.peak_flops_per_s")
    measured, measured_source = ({}, "")
    if assumptions.efficiency_curve is not None:
        measured, measured_source = _measured(assumptions, device, name, peak, base_dir)
    for figure in FIGURES:
        name_in_graph, field = INPUT_OF[figure], f"assumptions.{figure}"
        own = getattr(assumptions, figure)
        if figure == "matmul_efficiency":
            catalog = matmul_efficiency_in(figures, precision)
        elif figure == "attention_efficiency":
            catalog = attention_efficiency_for(figures, training_attention_kernel is not None,
                                               training_attention_kernel or "flash2")
        else:
            catalog = figures[figure]
        if own is not None:
            given[name_in_graph] = stated.given(name_in_graph, own, field)
        elif figure in measured:
            given[name_in_graph] = Given(measured[figure], "measured", measured_source, field, catalog.low, catalog.high)
            stated.fields.setdefault(field, []).append(name_in_graph)
        else:
            kind = ("calibration " + calibration + ", fit" if catalog.basis == "fit" else catalog.basis)
            what = (f"{label}, {training_attention_kernel} forward + backward" if figure == "attention_efficiency"
                    and training_attention_kernel else label)
            given[name_in_graph] = Given(catalog.value, "catalog", f"{what}, {kind}: {catalog.source}", field,
                                         catalog.low, catalog.high)
            stated.fields.setdefault(field, []).append(name_in_graph)
    return given
