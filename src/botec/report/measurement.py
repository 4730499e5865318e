"""How `botec measure` and `botec calibrate` show what was measured and what it pins down."""

from __future__ import annotations

import json

from botec.units import format_quantity

__all__ = ["measurement_lines", "calibration_json", "calibration_lines", "fake_lines"]


def measurement_lines(measured) -> list[str]:
    summary, median = measured.summary, measured.summary.median
    lines = [f"measured {measured.workload.model.name} on {measured.environment.world_size} × "
             f"{measured.environment.device_name} ({measured.workload.precision})",
             f"  step {format_quantity(median['step_seconds'], 's')} (p90 "
             f"{format_quantity(summary.p90['step_seconds'], 's')}): input wait "
             f"{format_quantity(median['input_wait_seconds'], 's')}, forward+backward "
             f"{format_quantity(median['forward_backward_seconds'], 's')}, sync "
             f"{format_quantity(median['sync_seconds'], 's')}, optimizer {format_quantity(median['optimizer_seconds'], 's')}"]
    mfu = f", MFU {summary.mfu:.3g}" if summary.mfu is not None else ""
    lines.append(f"  {summary.tokens_per_s:,.0f} tokens/s, {format_quantity(summary.achieved_flops_per_s, 'FLOP/s')}"
                 f"{mfu}")
    if measured.memory:
        m = measured.memory
        lines.append(f"  peak memory {format_quantity(m.peak_bytes, 'B')}: parameters "
                     f"{format_quantity(m.parameters_bytes, 'B')}, optimizer {format_quantity(m.optimizer_bytes, 'B')}, "
                     f"activations {format_quantity(m.activations_bytes, 'B')} (saved-tensor factor "
                     f"{m.saved_tensor_factor:.3g})")
    if measured.checkpoint:
        lines.append(f"  checkpoint {format_quantity(measured.checkpoint.bytes, 'B')} in "
                     f"{format_quantity(measured.checkpoint.seconds, 's')}")
    lora, model = measured.workload.lora, measured.workload.model
    if lora is not None:
        share = model.trainable_parameters / model.parameters
        gradients = format_quantity(measured.workload.gradient_bytes or 0.0, "B")
        base = lora.measured_base_weights + (f" in place of {lora.base_weights}"
                                             if lora.measured_base_weights != lora.base_weights else "")
        lines.append(f"  LoRA rank {lora.rank} on {', '.join(lora.target_modules)}: {model.trainable_parameters:,} "
                     f"trainable of {model.parameters:,} parameters ({share:.2%}); their gradients {gradients}, "
                     f"base {base}")
    lines += [f"  note: {note}" for note in measured.notes]
    return lines


def fake_lines(name: str, micro: int, sequence: int, factor: dict, contract_factor: float,
               categories: dict | None, error: str | None) -> list[str]:
    lines = [f"{name}, micro-batch {micro} × {sequence:,} tokens, BF16, on fake tensors (nothing allocated):",
             f"  one layer keeps {format_quantity(factor['activation_bytes_per_layer'], 'B')} for the backward pass = "
             f"{factor['saved_tensor_factor']:.3g} hidden-state tensors of "
             f"{format_quantity(factor['hidden_state_bytes'], 'B')} (the lesson's placeholder: 8; this contract: "
             f"{contract_factor:g})"]
    if error is not None:
        lines.append(f"  (step memory not available: {error})")
    elif categories:
        lines.append("  a training step's peak by category: " + ", ".join(
            f"{key.lower()} {format_quantity(value, 'B')}" for key, value in categories.items() if value))
    return lines


def calibration_json(calibration) -> str:
    data = {
        "comparisons": [{"name": c.name, "unit": c.unit, "estimated": c.estimated, "measured": c.measured,
                         "ratio": c.ratio, **({"note": c.note} if c.note else {})}
                        for c in calibration.comparisons],
        "assumptions": {k: {"value": v, "source": n} for k, (v, n) in calibration.assumptions.items()},
        "diagnosis": calibration.diagnosis, "notes": calibration.notes}
    if calibration.measured:
        data["measured"] = calibration.measured
    if calibration.missing:
        data["missing"] = calibration.missing
    if getattr(calibration, "serving", None):
        data["serving"] = calibration.serving     # the measured load as botec read it (a serving benchmark)
    return json.dumps(data, indent=2)


def _assumption_text(path: str, value: float) -> str:
    """A back-solved value: a time (a serving step overhead) with its unit, a ratio as a plain number."""
    return format_quantity(value, "s") if path == "assumptions.step_overhead" else f"{value:.4g}"


def calibration_lines(calibration, contract, measurement_file) -> list[str]:
    lines = [f"estimate ({contract}) beside measurement ({measurement_file}):"]
    lines += [f"  {line}" for line in calibration.measured]
    for c in calibration.comparisons:
        lines.append(f"  {c.name}: estimated {format_quantity(c.estimated, c.unit)}, measured "
                     f"{format_quantity(c.measured, c.unit)} (× {c.ratio:.3g})")
        if c.note:
            lines.append(f"      {c.note}")
    if calibration.missing:
        lines.append("not compared (the measurement does not have them):")
        lines += [f"  {line}" for line in calibration.missing]
    lines.append("assumptions the measurement pins down:")
    lines += [f"  {path} = {_assumption_text(path, value)}  [{note}]"
              for path, (value, note) in calibration.assumptions.items()]
    if not calibration.assumptions and getattr(calibration, "serving", None):
        lines.append("  none (see the diagnosis)")
    lines += [f"  note: {note}" for note in calibration.notes]
    lines.append("diagnosis:")
    lines += [f"  {line}" for line in calibration.diagnosis]
    return lines
