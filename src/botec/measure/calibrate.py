"""Calibration: the estimate beside a measurement, the assumptions the measurement pins down, and
which assumption failed when the step time differs.

Back-solved assumptions, each from one measured figure by the back-solver
(:func:`botec.explore.solve.solve_for`): the quantity graph's own formulas read backwards, nothing
inverted by hand:

- end-to-end MFU: the value at which ``step_seconds`` equals the measured step (replaces MFU × scaling);
- single-accelerator MFU (component step model): at which ``compute_seconds_per_step`` equals the
  measured forward + backward + optimizer time;
- collective bandwidth: at which ``gradient_sync_seconds`` equals the measured synchronization, the
  gradient message pinned to the bytes the run all-reduced;
- storage write bandwidth: at which ``checkpoint_write_seconds`` equals the measured save, the
  checkpoint pinned to the bytes the run wrote.

The saved-tensor factor is measured by the harness itself (activations over the graph's
activations per unit factor).

The calibrated contract carries them as ``provenance: measured`` with the file and date; the
workload must be the measured one (sequence length, micro-batch, model) unless overridden.

A Megatron-LM or torchtitan training log (:mod:`botec.measure.logs`) is a partial measurement: it is
compared on what it gives (step time, tokens/s, FLOP/s per accelerator in each side's FLOP count, peak
memory), the comparisons it cannot support are listed as missing, and the one assumption it pins down
is the efficiency that reproduces the measured step (the same back-solver, on ``step_seconds``). Its
workload is the contract's, checked against what the log states (global batch, sequence length, ...).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from botec.errors import ContractError
from botec.estimate import Estimate
from botec.explore.solve import solve_for
from botec.measure.logs import LogMeasurement
from botec.measure.measurement import Measurement
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
    measured: list[str] = field(default_factory=list)   # what was read, for a training log
    missing: list[str] = field(default_factory=list)    # comparisons the measurement cannot support, and why


def efficiency_assumption(result: Estimate) -> str:
    """The assumption that sets the compute time of a step: with the step built from its components, the
    large-GEMM efficiency of the op-level model, or the stated MFU or HFU of the flat one; else the end-to-end
    MFU (given in place of MFU × scaling)."""
    if result.choices.get("step_time") == "components":
        return {"op_level": "assumptions.matmul_efficiency", "hardware_flops": "assumptions.single_accelerator_hfu"}.get(
            result.choices.get("compute"), "assumptions.single_accelerator_mfu")
    return "assumptions.end_to_end_mfu"


def check_same_workload(result: Estimate, measurement: Measurement) -> list[str]:
    """The differences between the contract's workload and the measured one (empty when the same)."""
    q, measured = result.quantities, measurement.workload
    differences = []
    pairs = [("sequence_length", q["sequence_length"].value, measured.sequence_length),
             ("micro_batch_size", q["micro_batch_size"].value, measured.micro_batch_size),
             ("layers", q["layers"].value, measured.model.layers),
             ("hidden_size", q["hidden_size"].value, measured.model.hidden_size),
             ("data-parallel degree", q["data_parallel_degree"].value, measured.data_parallel_degree)]
    for name, contract_value, measured_value in pairs:
        if float(contract_value) != float(measured_value):
            differences.append(f"{name} {contract_value:g} in the contract, {measured_value:g} measured")
    parameters, measured_parameters = q["parameters"].value, measured.model.parameters
    if abs(parameters - measured_parameters) > 0.01 * measured_parameters:
        differences.append(f"parameters {parameters:,.0f} in the contract, {measured_parameters:,} measured")
    return differences


def calibrate(result: Estimate, measurement: Measurement | LogMeasurement, source: str,
              allow_workload_change: bool = False) -> Calibration:
    """Compare, back-solve and diagnose (a training log: :func:`calibrate_log`)."""
    if isinstance(measurement, LogMeasurement):
        return calibrate_log(result, measurement, source, allow_workload_change)
    differences = check_same_workload(result, measurement)
    if differences and not allow_workload_change:
        raise ContractError(f"the measurement is of a different workload ({'; '.join(differences)}); calibrate the "
                            "contract that describes the measured run, or pass --allow-workload-change",
                            field="workload")
    q, inputs = result.quantities, result.inputs
    median = measurement.summary.median
    step = median["step_seconds"]
    compute = median["forward_backward_seconds"] + median["optimizer_seconds"]
    note = f"measured: {source}"
    comparisons = [
        Comparison("step_seconds", "s", q["step_seconds"].value, step),
        Comparison("tokens_per_s", "tokens/s", q["tokens_per_s"].value, measurement.summary.tokens_per_s),
    ]
    if "compute_seconds_per_step" in q:
        comparisons.append(Comparison("compute_seconds_per_step", "s", q["compute_seconds_per_step"].value, compute))
    assumptions: dict[str, tuple[float, str]] = {}
    notes: list[str] = []
    efficiency = efficiency_assumption(result)
    if result.choices.get("step_time") == "components":
        value, _ = solve_for(inputs, "compute_seconds_per_step", compute, efficiency)
        assumptions[efficiency] = (value, f"{note}: forward + backward + optimizer time")
    else:
        value, _ = solve_for(inputs, "step_seconds", step, efficiency)
        assumptions[efficiency] = (value, f"{note}: median step time")
        if "single_accelerator_mfu" in q:
            notes.append(END_TO_END_NOTE)
    memory = measurement.memory
    if memory is not None:
        comparisons.append(Comparison("activation_bytes (as measured, at the measured precision)", "B",
                                      q["activation_bytes"].value * memory.activation_bytes_per_element
                                      / q["activation_bytes_per_element"].value, memory.activations_bytes))
        if result.choices.get("activations") == "saved_tensor_factor":
            assumptions["assumptions.saved_tensor_factor"] = (
                memory.saved_tensor_factor, f"{note}: activations / (layers × hidden-state tensor)")
    sync = median["sync_seconds"]
    if measurement.environment.world_size > 1 and sync > 0 and q["gradient_sync_bytes_sent_per_step"].value > 0:
        pinned = {"gradient_bytes": measurement.workload.gradient_bytes} if measurement.workload.gradient_bytes else {}
        bandwidth, _ = solve_for(inputs, "gradient_sync_seconds", sync, "dp_link_bytes_per_s", pinned)
        assumptions["supply.network.bandwidth"] = (bandwidth, f"{note}: gradient all-reduce bytes / synchronization "
                                                              "time")
        if "collective_floor_seconds" in q:
            comparisons.append(Comparison("collective_floor_seconds", "s", q["collective_floor_seconds"].value, sync))
    checkpoint = measurement.checkpoint
    if checkpoint is not None and checkpoint.seconds > 0:
        comparisons.append(Comparison("checkpoint_bytes", "B", q["checkpoint_bytes"].value, checkpoint.bytes))
        if "storage_write_bytes_per_s" in q:
            bandwidth, _ = solve_for(inputs, "checkpoint_write_seconds", checkpoint.seconds, "storage_write_bytes_per_s",
                                     {"checkpoint_bytes": checkpoint.bytes})
            assumptions["supply.storage.write_bandwidth"] = (bandwidth, f"{note}: checkpoint bytes / save time")
    return Calibration(comparisons, assumptions, diagnose(result, measurement), notes)


def diagnose(result: Estimate, measurement: Measurement) -> list[str]:
    """Attribute the step-time gap to compute, input wait, synchronization and checkpoint pauses."""
    q = result.quantities
    median = measurement.summary.median
    measured_step, estimated_step = median["step_seconds"], q["step_seconds"].value
    gap = measured_step - estimated_step
    lines = [f"step: estimated {format_quantity(estimated_step, 's')}, measured {format_quantity(measured_step, 's')} "
             f"({measured_step / estimated_step:.2f}×)"]
    estimated_compute = q.get("compute_seconds_per_step")
    estimated_compute = estimated_compute.value if estimated_compute is not None else estimated_step
    estimated_sync = max(estimated_step - estimated_compute, 0.0)
    if "exposed_communication_seconds" in q and result.choices.get("step_time") == "components":
        estimated_sync = q["exposed_communication_seconds"].value
    checkpoint_per_step = 0.0
    if measurement.checkpoint is not None and "checkpoint_interval_seconds" in q:
        checkpoint_per_step = measurement.checkpoint.seconds * measured_step / q["checkpoint_interval_seconds"].value
    parts = [
        ("compute (forward, backward, optimizer)", median["forward_backward_seconds"] + median["optimizer_seconds"],
         estimated_compute, "the sustained single-accelerator MFU"),
        ("input wait", median["input_wait_seconds"], 0.0,
         "that the input pipeline keeps up (the estimate assumes no input wait)"),
        ("synchronization wait", median["sync_seconds"], estimated_sync,
         "the scaling efficiency / interconnect bandwidth"),
        ("checkpoint pauses (per step)", checkpoint_per_step,
         q["checkpoint_pause_share"].value * estimated_step if "checkpoint_pause_share" in q else 0.0,
         "the storage write bandwidth"),
    ]
    excess = []
    for label, measured, estimated, assumption in parts:
        lines.append(f"  {label}: estimated {format_quantity(estimated, 's')}, measured "
                     f"{format_quantity(measured, 's')}")
        excess.append((measured - estimated, label, assumption))
    worst = max(excess)
    if abs(gap) <= 0.05 * estimated_step:
        lines.append("within 5 % of the estimate: no assumption failed")
    elif gap > 0 and worst[0] > 0:
        share = worst[0] / measured_step
        lines.append(f"the gap of {format_quantity(gap, 's')} comes mostly from {worst[1]} "
                     f"(+{format_quantity(worst[0], 's')}, {share:.0%} of the measured step): the failed assumption "
                     f"is {worst[2]}")
    else:
        lines.append(f"the run is faster than estimated by {format_quantity(-gap, 's')}: the assumptions are "
                     "conservative")
    return lines


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


def calibrate_log(result: Estimate, log: LogMeasurement, source: str, allow_workload_change: bool = False
                  ) -> Calibration:
    """Compare with a training log on what it gives, back-solve the efficiency that reproduces its step, and
    list what a log cannot support."""
    q, inputs = result.quantities, result.inputs
    tool = log.tool
    notes: list[str] = []
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

    assumptions: dict[str, tuple[float, str]] = {}
    efficiency = efficiency_assumption(result)
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


def calibrated_contract(contract_path: str | Path | None, calibration: Calibration, origin_text: str | None = None
                        ) -> str:
    """The contract's YAML with the back-solved assumptions written in (measured, with their source)."""
    import yaml

    from botec.contract import read_contract_data
    from botec.estimate import reference_contract_path

    if contract_path is None:
        data = yaml.safe_load(reference_contract_path().read_text(encoding="utf-8"))
    else:
        data = read_contract_data(contract_path)
    for path, (value, note) in calibration.assumptions.items():
        keys = path.split(".")
        target = data
        for key in keys[:-1]:
            node = target.get(key)
            if not isinstance(node, dict):
                node = {}
                target[key] = node
            target = node
        target[keys[-1]] = {"value": float(f"{value:.6g}"), "source": note, "provenance": "measured"}
        if keys[-1] == "end_to_end_mfu":
            target.pop("single_accelerator_mfu", None)
            target.pop("scaling_efficiency", None)
    stamp = datetime.date.today().isoformat()
    header = (f"# botec calibrated contract ({stamp}): assumptions marked provenance: measured were back-solved "
              f"by `botec calibrate`{' from ' + origin_text if origin_text else ''}.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
