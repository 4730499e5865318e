"""Calibrating from a Megatron-LM or torchtitan training log (:mod:`botec.measure.logs`).

A Megatron-LM or torchtitan training log (:mod:`botec.measure.logs`) is a partial measurement: it is
compared on what it gives (step time, tokens/s, FLOP/s per accelerator in each side's FLOP count, peak
memory), the comparisons it cannot support are listed as missing, and the one assumption it pins down
is the efficiency that reproduces the measured step (the same back-solver, on ``step_seconds``). Its
workload is the contract's, checked against what the log states (global batch, sequence length, ...).
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.estimation import Estimate
from botec.explore.solve import solve_for
from botec.measure.calibrate.results import END_TO_END_NOTE, Calibration, Comparison, efficiency_assumption
from botec.measure.logs import LogMeasurement
from botec.units import format_quantity

LEAST_PLAUSIBLE_MFU = 1e-3
"""The least MFU (on botec's count) a logged training step is taken to have: below it the accelerators would be
idle 99.9 % of the step, which a log in another unit (a time 1,000 × too long) gives far more often than a run."""


# What a log may state about its workload -> (words, the contract field, the contract's value, unit).
def _contract_values(q) -> dict:
    def value(name):
        return float(q[name].value) if name in q else None

    sequence, tokens = value("sequence_length"), value("global_tokens_per_step")
    pipeline = value("pipeline_parallel")
    return {
        "global_batch_size": ("global batch size", "strategy.global_batch_size",
                              tokens / sequence if tokens and sequence else None, "sequences"),
        "tokens_per_step": ("tokens per step", "strategy.global_batch_size", tokens, "tokens"),
        "sequence_length": ("sequence length", "workload.sequence_length", sequence, "tokens"),
        "micro_batch_size": ("micro-batch", "strategy.micro_batch_size", value("micro_batch_size"), "sequences"),
        # torchtitan's local batch is the micro-batch unless pipeline stages split it further
        "local_batch_size": ("local batch size", "strategy.micro_batch_size",
                             value("micro_batch_size") if pipeline in (None, 1.0) else None, "sequences"),
        "accelerators": ("accelerators (world size)", "supply.count", value("accelerators"), "accelerators"),
        "tensor_parallel": ("tensor-parallel degree", "strategy.tensor_parallel", value("tensor_parallel"), ""),
        "pipeline_parallel": ("pipeline-parallel degree", "strategy.pipeline_parallel", pipeline, ""),
    }


def check_log_workload(result: Estimate, log: LogMeasurement) -> list[tuple[str, str]]:
    """Where the log states its workload and the contract says otherwise: (contract field, words)."""
    differences = []
    for name, (words, path, contract_value, unit) in _contract_values(result.quantities).items():
        logged = log.stated.get(name)
        if logged is None or contract_value is None:
            continue
        if abs(logged - contract_value) > 1e-9 * max(abs(contract_value), 1.0):
            unit_text = f" {unit}" if unit else ""
            differences.append((path, f"{words} {logged:,.0f}{unit_text} in the log, {contract_value:,.0f} in the "
                                      f"contract ({path})"))
    return differences


def _botec_flop_convention(result: Estimate) -> str:
    try:
        contract = result.contract
        if contract.workload.model.kind == "count":
            return "botec's count: 6·P per token (a bare parameter count), no recomputation"
        return (f"botec's count: 6·N(active, matmul) + attention scores counted "
                f"{contract.assumptions.attention_flops}, no recomputation")
    except AttributeError:
        return "botec's count (model_flops_per_token), no recomputation"


def _spread_text(spread, unit: str) -> str:
    if spread.count == 1:
        return "one logged interval"
    return (f"median of {spread.count} logged intervals; p90 {format_quantity(spread.p90, unit)}, range "
            f"{format_quantity(spread.low, unit)} – {format_quantity(spread.high, unit)}")


def _dropped_text(log: LogMeasurement) -> str:
    reasons: dict[str, list[str]] = {}
    for step, why in log.dropped:
        reasons.setdefault(why, []).append(str(step))
    return "; ".join(f"{', '.join(steps)} ({why})" for why, steps in reasons.items())


def _where_memory(log: LogMeasurement) -> str:
    if log.memory_ranks > 1:
        return f"the largest of {log.memory_ranks} ranks reporting"
    return "one rank reporting" if log.memory_ranks else "the largest over the used steps"


def log_device_mismatch(result: Estimate, log: LogMeasurement) -> str | None:
    """Why the device a log names is not the contract's catalog accelerator, or None (no device named, an inline
    accelerator taken at its word, or the same device: :func:`botec.measure.gemm_curve.device_matches`)."""
    from botec.measure.gemm_curve import device_matches

    accelerator = result.inputs.accelerator
    if log.device_name is None or not isinstance(accelerator, str) or device_matches(log.device_name, accelerator):
        return None
    return f"the {log.tool} log ran on {log.device_name}, not the contract's {accelerator}"


def check_plausible_step(result: Estimate, log: LogMeasurement, tokens_per_s: float, accelerators: float) -> None:
    """Refuse a logged step the contract's accelerators cannot have run: the MFU it implies on botec's count,

        MFU = tokens/s × model_flops_per_token / (accelerators × peak_flops_per_s),

    above 1 (faster than the peak) or below :data:`LEAST_PLAUSIBLE_MFU` (the accelerators idle 99.9 % of the
    step); either is almost always a figure in another unit than the tool's (seconds logged where Megatron-LM
    prints ms, a job's tokens/s where torchtitan prints them per accelerator) or a log of another model."""
    q = result.quantities
    if "peak_flops_per_s" not in q or "model_flops_per_token" not in q:
        return
    mfu = tokens_per_s * q["model_flops_per_token"].value / (accelerators * q["peak_flops_per_s"].value)
    if LEAST_PLAUSIBLE_MFU <= mfu <= 1:
        return
    if log.format == "megatron" and log.step_seconds is not None:
        field = "elapsed time per iteration (ms)"
        unit = ("is the time in seconds where Megatron-LM prints ms?" if mfu > 1
                else "is the time in µs or another unit where Megatron-LM prints ms?")
    else:
        field = "tps" if log.format == "torchtitan" else "tokens per second"
        unit = ("are they the whole job's tokens/s where the log gives them per accelerator?" if mfu > 1
                else "are they in another unit than tokens per second per accelerator?")
    raise ContractError(f"the logged step implies an MFU of {mfu:.3g} on botec's count ({tokens_per_s:,.4g} tokens/s "
                        f"on {accelerators:,.0f} × {format_quantity(q['peak_flops_per_s'].value, 'FLOP/s')}), "
                        f"{'above 1' if mfu > 1 else f'below {LEAST_PLAUSIBLE_MFU:g}'}: {unit} (or the log is of "
                        "another model)", field=field, origin=log.path)


def calibrate_log(result: Estimate, log: LogMeasurement, source: str, allow_workload_change: bool = False,
                  device_independent_only: bool = False) -> Calibration:
    """Compare with a training log on what it gives, back-solve the efficiency that reproduces its step, and
    list what a log cannot support.

    A log that names another device than the contract's accelerator (:func:`log_device_mismatch`) is refused;
    with ``device_independent_only`` only its memory is compared and nothing is back-solved (a log gives no
    device-independent assumption: no activations apart, no checkpoint size)."""
    q, inputs = result.quantities, result.inputs
    tool = log.tool
    notes: list[str] = []
    mismatch = log_device_mismatch(result, log)
    if mismatch is not None and not device_independent_only:
        raise ContractError(f"{mismatch}: its step time says nothing about that accelerator's efficiency; calibrate "
                            "a contract of that device, or pass --device-independent-only to compare only the memory",
                            field="supply.accelerator", origin=log.path)
    differences = check_log_workload(result, log)
    if differences:
        text = "; ".join(words for _, words in differences)
        if not allow_workload_change:
            raise ContractError(f"the {tool} log is of a different workload ({text}); calibrate the contract that "
                                "describes the logged run, or pass --allow-workload-change",
                                field=differences[0][0], origin=log.path)
        notes.append(f"the logged workload differs from the contract's ({text}): compared anyway, "
                     "--allow-workload-change")
    accelerators = log.stated.get("accelerators") or float(q["accelerators"].value)
    sequence = log.stated.get("sequence_length") or float(q["sequence_length"].value)
    if log.stated.get("tokens_per_step"):
        tokens_per_step, tokens_from = log.stated["tokens_per_step"], "the log's"
    elif log.stated.get("global_batch_size"):
        tokens_per_step = log.stated["global_batch_size"] * sequence
        tokens_from = "the log's global batch × " + ("its" if "sequence_length" in log.stated else "the contract's") \
            + " sequence length"
    else:
        tokens_per_step, tokens_from = float(q["global_tokens_per_step"].value), "the contract's"

    measured_lines = [f"read as a {tool} log: {log.logged} iteration line(s), {len(log.used)} used"
                      + (f"; dropped {_dropped_text(log)}" if log.dropped else "")]
    if log.step_seconds is not None:
        step = log.step_seconds.median
        tokens_per_s = tokens_per_step / step
        step_note = f"{tool}'s elapsed time per iteration, {_spread_text(log.step_seconds, 's')}"
        tokens_note = f"{tokens_per_step:,.0f} tokens per step ({tokens_from}) / the median step"
    elif log.tokens_per_s_per_device is not None or log.tokens_per_s is not None:
        if log.tokens_per_s_per_device is not None:
            tokens_per_s = log.tokens_per_s_per_device.median * accelerators
            spread = _spread_text(log.tokens_per_s_per_device, "tokens/s")
            tokens_note = f"{tool}'s median tokens/s per accelerator ({spread}) × {accelerators:,.0f} accelerators"
        else:
            tokens_per_s = log.tokens_per_s.median
            tokens_note = f"{tool}'s median tokens/s ({_spread_text(log.tokens_per_s, 'tokens/s')})"
        step = tokens_per_step / tokens_per_s
        step_note = f"derived: {tokens_per_step:,.0f} tokens per step ({tokens_from}) / the measured tokens/s"
    else:  # the parsers keep no line without one or the other
        raise ContractError("the log gives neither iteration times nor tokens/s", origin=log.path)
    if not device_independent_only:
        check_plausible_step(result, log, tokens_per_s, accelerators)

    botec_convention = _botec_flop_convention(result)
    estimated_flops = q["useful_flops_per_s"].value / q["accelerators"].value
    comparisons = [
        Comparison("step_seconds", "s", q["step_seconds"].value, step, step_note),
        Comparison("tokens_per_s", "tokens/s", q["tokens_per_s"].value, tokens_per_s, tokens_note),
    ]
    missing = ["compute_seconds_per_step, input wait and synchronization: the log has no per-phase times of botec's "
               "(" + ("Megatron's timers, shown above, count communication inside forward-backward"
                      if log.phases else "no timers printed") + ")",
               "activation_bytes and the saved-tensor factor: the log has only the peak memory, not the activations "
               "apart",
               "checkpoint_bytes and the storage write bandwidth: the log has no checkpoint size"]
    if log.flops_per_s_per_device is not None:
        comparisons.append(Comparison(
            "FLOP/s per accelerator (as logged)", "FLOP/s", estimated_flops, log.flops_per_s_per_device.median,
            f"estimated in {botec_convention}; measured in {log.flop_convention}"))
        measured_lines.append(f"{format_quantity(log.flops_per_s_per_device.median, 'FLOP/s')} per accelerator as "
                              f"logged ({_spread_text(log.flops_per_s_per_device, 'FLOP/s')})")
    else:
        missing.append("FLOP/s per accelerator as logged (botec's count of the measured tokens is compared "
                       "instead): " + (
            "no 'throughput per GPU (TFLOP/s/GPU)' field (Megatron-LM before core 0.5, or run without "
            "--log-throughput)" if log.format == "megatron" else "no 'tflops:' field (torchtitan before 2025-02)"))
    comparisons.append(Comparison(
        "FLOP/s per accelerator (botec's count of the measured tokens/s)", "FLOP/s", estimated_flops,
        tokens_per_s * q["model_flops_per_token"].value / accelerators, f"both sides in {botec_convention}"))
    if log.mfu is not None and "end_to_end_mfu" in q:
        comparisons.append(Comparison(
            "MFU (as logged)", "fraction", q["end_to_end_mfu"].value, log.mfu,
            f"estimated: end-to-end MFU of botec's count against the catalog peak "
            f"({format_quantity(q['peak_flops_per_s'].value, 'FLOP/s')}); measured: {tool}'s FLOPs over its own "
            "peak table"))
    if "planned_device_bytes" in q:
        headroom = q["memory_headroom_bytes"].value if "memory_headroom_bytes" in q else 0.0
        before_headroom = q["planned_device_bytes"].value - headroom
        if log.peak_reserved_bytes is not None:
            comparisons.append(Comparison(
                "peak memory per accelerator (max reserved)", "B", before_headroom, log.peak_reserved_bytes,
                "estimated: state + activations + runtime buffer, before the planning headroom; measured: the "
                "allocator's max reserved, " + _where_memory(log)))
        if log.peak_allocated_bytes is not None and "state_bytes" in q and "activation_bytes" in q:
            comparisons.append(Comparison(
                "peak memory per accelerator (max allocated)", "B",
                q["state_bytes"].value + q["activation_bytes"].value, log.peak_allocated_bytes,
                "estimated: state + activations (tensors only); measured: the allocator's max allocated"))
    if log.peak_reserved_bytes is None and log.peak_allocated_bytes is None:
        missing.append("peak memory: " + ("no '[Rank N] (after K iterations) memory (MB)' report in the log"
                                          if log.format == "megatron" else "no 'memory:' field in the step lines"))
    if log.peak_reserved_bytes is not None or log.peak_allocated_bytes is not None:
        parts = [f"max {kind} {format_quantity(value, 'B')}" for kind, value in
                 (("allocated", log.peak_allocated_bytes), ("reserved", log.peak_reserved_bytes)) if value is not None]
        measured_lines.append(f"peak memory: {', '.join(parts)} ({_where_memory(log)})")
    if log.phases:
        measured_lines.append("timers (per iteration, slowest rank): " + ", ".join(
            f"{name} {format_quantity(seconds, 's')}" for name, seconds in log.phases.items()))
    stated = [f"{_contract_values(q)[name][0]} {value:,.0f}" for name, value in log.stated.items()
              if name in _contract_values(q)]
    if stated:
        measured_lines.append("the log states: " + ", ".join(stated))
    if log.device_name:
        measured_lines.append(f"device: {log.device_name}")
    notes += list(log.notes)
    efficiency = efficiency_assumption(result)
    if device_independent_only:
        device = log.device_name or "a device the log does not name"
        missing.insert(0, f"{efficiency.removeprefix('assumptions.')}, step time, tokens/s and FLOP/s: measured on "
                          f"{device}, not taken (--device-independent-only)")
        diagnosis = [f"device-independent figures only: {mismatch or 'as asked'}; a training log pins down no "
                     "device-independent assumption (no activations apart, no checkpoint size): nothing back-solved"]
        return Calibration([c for c in comparisons if c.unit == "B"], {}, diagnosis, notes, measured_lines, missing)

    assumptions: dict[str, tuple[float, str]] = {}
    try:
        value, _ = solve_for(inputs, "step_seconds", step, efficiency)
        assumptions[efficiency] = (value, f"measured: {source}: median step time")
    except ContractError as error:
        notes.append(f"{efficiency.removeprefix('assumptions.')} not back-solved: {error.detail}")
    if result.choices.get("step_time") == "components":
        notes.append(f"the log has no per-phase times: {efficiency.removeprefix('assumptions.')} is solved on the "
                     "whole step, the pipeline bubble and exposed communication kept as the contract models them, "
                     "so it absorbs any error in those too")
    elif "single_accelerator_mfu" in q:
        notes.append(END_TO_END_NOTE)
    return Calibration(comparisons, assumptions, diagnose_log(result, log, step, efficiency), notes,
                       measured_lines, missing)


def diagnose_log(result: Estimate, log: LogMeasurement, measured_step: float, efficiency: str) -> list[str]:
    """What a log can say about the step-time gap: its size, the timers' split when printed, and that the rest
    needs per-phase times."""
    q = result.quantities
    estimated_step = q["step_seconds"].value
    gap = measured_step - estimated_step
    lines = [f"step: estimated {format_quantity(estimated_step, 's')}, measured {format_quantity(measured_step, 's')} "
             f"({measured_step / estimated_step:.2f}×)"]
    phases = log.phases
    known = {}
    if "forward-backward" in phases:
        known["forward-backward"] = phases["forward-backward"]
    elif "forward-compute" in phases and "backward-compute" in phases:  # Megatron before core 0.4
        known["forward-compute + backward-compute"] = phases["forward-compute"] + phases["backward-compute"]
    if "optimizer" in phases:
        known["optimizer"] = phases["optimizer"]
    if len(known) == 2 and log.step_seconds is not None:
        rest = measured_step - sum(known.values())
        lines.append(f"  {log.tool}'s timers: " + ", ".join(f"{name} {format_quantity(v, 's')}"
                                                          for name, v in known.items())
                     + f", the rest {format_quantity(rest, 's')} (data loading, logging, what no timer covers)")
    if abs(gap) <= 0.05 * estimated_step:
        lines.append("within 5 % of the estimate: no assumption failed")
    elif gap > 0:
        lines.append(f"the gap of {format_quantity(gap, 's')} ({gap / measured_step:.0%} of the measured step) cannot "
                     f"be attributed from a log (no input-wait, synchronization or compute times apart): the "
                     f"back-solved {efficiency.removeprefix('assumptions.')} absorbs it; `botec measure` records the "
                     "phases of a step")
    else:
        lines.append(f"the run is faster than estimated by {format_quantity(-gap, 's')}: the assumptions are "
                     "conservative")
    return lines


