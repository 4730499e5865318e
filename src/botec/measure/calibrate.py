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
activations per unit factor). The memory MemTracker saw is compared part by part with the estimate's state
(weights, the trainable parameters' gradients, optimizer state) and activations, and the peak with state +
activations.

A LoRA measurement (``workload.lora``) calibrates a contract with the same ``strategy.lora`` (rank, target
modules): the estimate's FLOPs, gradients and optimizer state are then the adapters' as the measured run's
were. A quantized base (NF4, FP4, INT8) measured in BF16 leaves the step time without the dequantization, so
no efficiency is back-solved from it (listed as missing); the saved-tensor factor still is.

The calibrated contract carries them as ``provenance: measured`` with the file and date; the
workload must be the measured one (sequence length, micro-batch, model) unless overridden.

The device must be the contract's accelerator too (:func:`device_mismatch`): a step timed on a CPU says
nothing about an H100's MFU. A measurement from another device is refused, or, with
``device_independent_only``, only what does not depend on the device is taken: the saved-tensor factor
(activation memory), the checkpoint write bandwidth (storage) and the input wait (reported); no efficiency,
no interconnect bandwidth, and the step time is not compared.

A Megatron-LM or torchtitan training log (:mod:`botec.measure.logs`) is a partial measurement: it is
compared on what it gives (step time, tokens/s, FLOP/s per accelerator in each side's FLOP count, peak
memory), the comparisons it cannot support are listed as missing, and the one assumption it pins down
is the efficiency that reproduces the measured step (the same back-solver, on ``step_seconds``). Its
workload is the contract's, checked against what the log states (global batch, sequence length, ...).

A vLLM or SGLang serving benchmark (:mod:`botec.measure.serving_bench`) is one server at one load: a
serving contract is estimated at the measured traffic on one replica (:func:`measured_contract_data`:
prompt and output tokens from the totals, the achieved request throughput as the load, no latency
targets, utilization cap 1) and compared on mean and percentile TTFT and TPOT, end-to-end latency and
output tokens/s per accelerator. The back-solver gives ``memory_bandwidth_efficiency`` from the mean
TPOT and ``matmul_efficiency`` from the mean TTFT, alternately until both settle; ``step_overhead``
from the TPOT when no efficiency in (0, 1] reproduces it; ``matmul_efficiency`` from the throughput
when the measured load is above botec's saturated capacity (:func:`calibrate_serving`).
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
    measured: list[str] = field(default_factory=list)   # what was read, for a training log or a serving benchmark
    missing: list[str] = field(default_factory=list)    # comparisons the measurement cannot support, and why
    serving: dict = field(default_factory=dict)         # a serving benchmark: the measured load as botec read it


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
    differences += _lora_differences(getattr(result.contract.strategy, "lora", None), measured,
                                     q["trainable_parameters"].value if "trainable_parameters" in q else None)
    return differences


def _lora_differences(stated, measured, trainable: float | None) -> list[str]:
    """Where the contract's strategy.lora and the measured adapters differ: one absent, another rank, or other
    adapted matrices (the trainable parameters differ)."""
    def words(rank, modules) -> str:
        return f"LoRA rank {rank} on {', '.join(modules)}"

    adapters = measured.lora
    if stated is None and adapters is None:
        return []
    if stated is None:
        return [f"full training in the contract, {words(adapters.rank, adapters.target_modules)} measured"]
    named = [stated.target_modules] if isinstance(stated.target_modules, str) else list(stated.target_modules)
    if adapters is None:
        return [f"{words(stated.rank, named)} in the contract (strategy.lora), full training measured"]
    counted = measured.model.trainable_parameters
    if stated.rank != adapters.rank or (trainable is not None and counted is not None and trainable != counted):
        return [f"{words(stated.rank, named)} in the contract ({trainable:,.0f} trainable parameters), "
                f"{words(adapters.rank, adapters.target_modules)} measured ({counted:,})"]
    return []


def _memory_comparisons(result: Estimate, measurement: Measurement) -> list[Comparison]:
    """MemTracker's categories beside the estimate's state and activations (the activations at the measured
    precision); the gradients are the trainable parameters' (at the peak of a step they are not yet allocated)."""
    q, memory = result.quantities, measurement.memory
    precision = f"measured in {measurement.workload.precision}"
    comparisons = []
    for name, measured, how in (("weight_memory_bytes", memory.parameters_bytes, "MemTracker's parameters"),
                                ("gradient_memory_bytes", measurement.workload.gradient_bytes,
                                 "the bytes of the parameters that took a gradient"),
                                ("optimizer_memory_bytes", memory.optimizer_bytes, "MemTracker's optimizer state")):
        if name in q and measured is not None:
            comparisons.append(Comparison(name, "B", q[name].value, measured, f"{how}, {precision}"))
    comparisons.append(Comparison("activation_bytes (as measured, at the measured precision)", "B",
                                  q["activation_bytes"].value * memory.activation_bytes_per_element
                                  / q["activation_bytes_per_element"].value, memory.activations_bytes))
    if "state_bytes" in q:
        comparisons.append(Comparison(
            "peak memory (tensors)", "B", q["state_bytes"].value + q["activation_bytes"].value, memory.peak_bytes,
            f"estimated: state + activations, before runtime buffer and headroom; measured: MemTracker's peak, "
            f"{precision}"))
    return comparisons


def device_mismatch(result: Estimate, measurement: Measurement) -> str | None:
    """Why the measured device is not the contract's accelerator, or None when it is (as far as botec can tell).

    A catalog accelerator must be the device torch named (``NVIDIA H100 80GB HBM3`` is ``h100-sxm``); a CPU is
    never one. An inline accelerator is the user's own description, taken at its word, except that a CPU run
    only stands for an inline device whose name says it is a CPU (the lesson's hypothetical 200 TFLOP/s
    accelerator is not the laptop it was measured on).
    """
    from botec.measure.gemm_curve import device_matches

    environment = measurement.environment
    accelerator = result.contract.supply.accelerator
    ran_on = f"{environment.device_name} ({environment.device})"
    if isinstance(accelerator, str):
        if environment.device == "cuda" and device_matches(environment.device_name, accelerator):
            return None
        return f"the measurement ran on {ran_on}, not the contract's {accelerator}"
    if environment.device == "cpu" and "cpu" not in accelerator.name.lower():
        return (f"the measurement ran on {ran_on}, not the contract's {accelerator.name!r} (describe the CPU "
                "inline with a name that says CPU to calibrate for it)")
    return None


def calibrate(result: Estimate, measurement: Measurement | LogMeasurement, source: str,
              allow_workload_change: bool = False, device_independent_only: bool = False) -> Calibration:
    """Compare, back-solve and diagnose (a training log: :func:`calibrate_log`).

    ``device_independent_only``: take only what does not depend on the device (for a run on other hardware
    than the contract's accelerator, which is otherwise refused)."""
    if isinstance(measurement, LogMeasurement):
        return calibrate_log(result, measurement, source, allow_workload_change)
    differences = check_same_workload(result, measurement)
    if differences and not allow_workload_change:
        raise ContractError(f"the measurement is of a different workload ({'; '.join(differences)}); calibrate the "
                            "contract that describes the measured run, or pass --allow-workload-change",
                            field="workload")
    mismatch = device_mismatch(result, measurement)
    if mismatch is not None and not device_independent_only:
        raise ContractError(f"{mismatch}: its step time says nothing about that accelerator's efficiency; measure "
                            "on it, or pass --device-independent-only to take only the activation memory, input "
                            "wait and checkpoint write bandwidth", field="supply.accelerator")
    if device_independent_only:
        return _device_independent(result, measurement, source, mismatch, differences)
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
    notes: list[str] = list(measurement.notes)
    missing: list[str] = []
    efficiency = efficiency_assumption(result)
    lora = measurement.workload.lora
    if lora is not None and lora.measured_base_weights != lora.base_weights:
        missing.append(f"{efficiency.removeprefix('assumptions.')}: the {lora.base_weights} base was measured in "
                       f"{lora.measured_base_weights.upper()}, so the step time lacks the dequantization of the "
                       "base; measure on a device with bitsandbytes' kernels, or calibrate a "
                       f"{lora.measured_base_weights} contract")
    elif result.choices.get("step_time") == "components":
        value, _ = solve_for(inputs, "compute_seconds_per_step", compute, efficiency)
        assumptions[efficiency] = (value, f"{note}: forward + backward + optimizer time")
    else:
        value, _ = solve_for(inputs, "step_seconds", step, efficiency)
        assumptions[efficiency] = (value, f"{note}: median step time")
        if "single_accelerator_mfu" in q:
            notes.append(END_TO_END_NOTE)
    memory = measurement.memory
    if memory is not None:
        comparisons += _memory_comparisons(result, measurement)
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
    _checkpoint(result, measurement, note, comparisons, assumptions)
    return Calibration(comparisons, assumptions, diagnose(result, measurement), notes, missing=missing)


def _checkpoint(result: Estimate, measurement: Measurement, note: str, comparisons: list, assumptions: dict) -> None:
    """A measured checkpoint save (a device-independent figure): its bytes against the estimate's, and the storage
    write bandwidth that makes the estimate's write time the measured one."""
    checkpoint = measurement.checkpoint
    if checkpoint is None or checkpoint.seconds <= 0:
        return
    q = result.quantities
    comparisons.append(Comparison("checkpoint_bytes", "B", q["checkpoint_bytes"].value, checkpoint.bytes))
    if "storage_write_bytes_per_s" in q:
        bandwidth, _ = solve_for(result.inputs, "checkpoint_write_seconds", checkpoint.seconds,
                                 "storage_write_bytes_per_s", {"checkpoint_bytes": checkpoint.bytes})
        assumptions["supply.storage.write_bandwidth"] = (bandwidth, f"{note}: checkpoint bytes / save time")


def _device_independent(result: Estimate, measurement: Measurement, source: str, mismatch: str | None,
                        differences: list[str]) -> Calibration:
    """Only what a run on another device says about the planned one: the saved-tensor factor (activations per
    layer and hidden state), the storage write bandwidth, the input wait; no efficiency, no interconnect.

    The saved-tensor factor holds for the measured shape only: a scaled-down proxy (another workload) keeps
    attention's s × s terms while its hidden state shrinks, so its factor is not written."""
    note = f"measured: {source}"
    device = f"{measurement.environment.device_name} ({measurement.environment.device})"
    comparisons: list[Comparison] = []
    assumptions: dict[str, tuple[float, str]] = {}
    notes: list[str] = list(measurement.notes)
    efficiency = efficiency_assumption(result).removeprefix("assumptions.")
    missing = [f"{efficiency}, step time and tokens/s: measured on {device}, which is not the planned accelerator",
               f"supply.network.bandwidth: the synchronization ran on {device}'s interconnect"]
    memory = measurement.memory
    if memory is not None:
        comparisons += _memory_comparisons(result, measurement)
        if differences:
            notes.append(f"saved_tensor_factor {memory.saved_tensor_factor:.3g} measured; not written: it was "
                         f"measured on another workload ({'; '.join(differences)}), and activations per hidden "
                         "state depend on the shape")
        elif result.choices.get("activations") == "saved_tensor_factor":
            assumptions["assumptions.saved_tensor_factor"] = (
                memory.saved_tensor_factor, f"{note}: activations / (layers × hidden-state tensor), on {device}")
        else:
            notes.append(f"saved_tensor_factor {memory.saved_tensor_factor:.3g} measured; not written: the contract "
                         f"models activations with {result.choices.get('activations')}")
    _checkpoint(result, measurement, note, comparisons, assumptions)
    median = measurement.summary.median
    wait, step = median["input_wait_seconds"], median["step_seconds"]
    diagnosis = [f"device-independent figures only: {mismatch or 'as asked'}",
                 f"input wait: {format_quantity(wait, 's')} per step ({wait / step:.0%} of the measured step)"
                 + (": the input pipeline did not keep up; the estimate assumes no input wait" if wait > 0.05 * step
                    else ": the input pipeline kept up")]
    return Calibration(comparisons, assumptions, diagnosis, notes, missing=missing)


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


def calibrated_contract(contract_path: str | Path | None, calibration: Calibration, origin_text: str | None = None,
                        overrides: list[str] | tuple[str, ...] = ()) -> str:
    """The contract's YAML, with the ``--set`` overrides the calibration ran with, and the back-solved
    assumptions written in (measured, with their source)."""
    import yaml

    from botec.contract import apply_overrides, read_contract_data
    from botec.estimate import reference_contract_path

    if contract_path is None:
        data = yaml.safe_load(reference_contract_path().read_text(encoding="utf-8"))
    else:
        data = read_contract_data(contract_path)
    if overrides:
        data = apply_overrides(data, list(overrides))
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
        if keys[-1] in ("end_to_end_mfu", "end_to_end_hfu"):
            for replaced in ("single_accelerator_mfu", "single_accelerator_hfu", "scaling_efficiency"):
                target.pop(replaced, None)
    stamp = datetime.date.today().isoformat()
    header = (f"# botec calibrated contract ({stamp}): assumptions marked provenance: measured were back-solved "
              f"by `botec calibrate`{' from ' + origin_text if origin_text else ''}.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# --- serving: a vLLM or SGLang benchmark of one server at one load ------------------------------------------

SOLVE_ROUNDS = 3            # TPOT then TTFT, alternately: enough at light load; nearer saturation, where prefill
SETTLED = 1e-4              # chunks ride in most steps and each efficiency moves the other's figure, Newton's
NEWTON_STEPS = 50           # method on the pair finishes (:func:`_settle`) until both are within SETTLED
LENGTH_TOLERANCE = 0.10     # the contract's prompt/output lengths this far from the run's are pointed out
AGREEMENT = 0.05            # measured within this share of the estimate: no assumption failed
CROWDED = 0.9               # above this share of the capacity the queue dominates TTFT: the pair is loosely pinned
TPOT_NOTE = ("{tool}'s TPOT is per request (end-to-end − TTFT) / (output tokens − 1), the first token excluded, "
             "averaged over requests; botec's is the mean time per output token after the first (the mean engine "
             "step at this load over the tokens a step gives each request){itl}")
RATE_NOTE = ("at a given load botec's output rate is that load × its output tokens per request: agreement checks "
             "the traffic as read, not the step model; the step model's saturated capacity is {capacity} per "
             "accelerator")
CLOSED_RATE_NOTE = ("with {users:,} users in a closed loop botec's output rate is its own: X solving X × R(X) = "
                    "{users:,} with its response time R, so agreement checks the step model; its saturated capacity "
                    "is {capacity} per accelerator")
# The quantities compared, and where a serving run's figure of each is read.
_TTFT, _TPOT = "time_to_first_token_seconds", "time_per_output_token_seconds"
_TTFT_P, _TPOT_P = "time_to_first_token_percentile_seconds", "time_per_output_token_percentile_seconds"
_E2E, _RATE = "end_to_end_latency_seconds", "output_tokens_per_s_per_accelerator"
_CAPACITY = "offline_requests_per_s_per_replica"
_LOAD = "requests_per_s_on_a_replica"
_COMPARED = (_TTFT, _TPOT, _TTFT_P, _TPOT_P, _E2E, _RATE, "replica_accelerators",
             "offline_output_tokens_per_s_per_accelerator", _CAPACITY, _LOAD)


def _set_path(data: dict, dotted: str, value) -> None:
    """Set ``a.b.c`` in a nested mapping, creating the mappings on the way."""
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[keys[-1]] = value


def closed_loop_users(run) -> int | None:
    """The users of a closed-loop run: ``max_concurrency`` when nothing else paced the requests (``request_rate``
    inf or not stated: each client sent its next request as its last returned); None for a run at a rate (a
    finite ``request_rate`` paces it, even under a concurrency cap)."""
    import math

    if run.max_concurrency is None or (run.request_rate is not None and math.isfinite(run.request_rate)):
        return None
    return int(run.max_concurrency)


def measured_contract_data(data: dict, run) -> dict:
    """A serving contract's data with its traffic replaced by a measured run's, on one replica.

    prompt_tokens = round(total_input_tokens / completed), output_tokens = round(total_output_tokens /
    completed) (each at least 1), the load: concurrency = max_concurrency for a closed-loop run
    (:func:`closed_loop_users`: the users, whose rate botec then derives), else requests_per_second =
    request_throughput (the achieved load); no latency targets (the percentile set to the one the run gives),
    utilization_cap = 1 (so one replica carries the load whenever botec's saturated capacity allows), no
    candidate accelerators. Everything else (model, accelerator, layout, engine, assumptions) is the contract's.
    """
    import copy

    data = copy.deepcopy(data)
    traffic = dict(data["workload"].get("traffic") or {})
    for key in ("requests_per_second", "requests_per_day", "concurrency", "think_time"):
        traffic.pop(key, None)
    users = closed_loop_users(run)
    traffic |= ({"concurrency": users} if users is not None else {"requests_per_second": float(run.requests_per_s)})
    traffic |= {"prompt_tokens": max(1, round(run.prompt_tokens)),
                "output_tokens": max(1, round(run.output_tokens))}
    data["workload"]["traffic"] = traffic
    latency = data["workload"].get("latency")
    percentile = run.percentile or (latency.get("percentile") if isinstance(latency, dict) else None)
    data["workload"]["latency"] = {"percentile": percentile} if percentile else {}
    _set_path(data, "assumptions.utilization_cap", 1)
    if isinstance(data.get("supply"), dict):
        data["supply"].pop("candidates", None)
    return data


def _evaluate(inputs, pinned: dict[str, float], wanted) -> dict[str, float]:
    """The wanted quantities with ``pinned`` graph quantities held at the given values (what the back-solver
    does meanwhile: :func:`botec.explore.solve.solve_for`'s overrides)."""
    from botec.graph import Given

    given = dict(inputs.given) | {name: Given(float(value), "measured") for name, value in pinned.items()}
    resolved = inputs.graph.evaluate(given, wanted=list(wanted), choices=inputs.choices)
    return {name: float(resolved[name].value) for name in wanted if name in resolved}


def _solve(inputs, quantity: str, target: float, path: str, held: dict[str, float]) -> float | None:
    """The value of contract field ``path`` at which ``quantity`` equals ``target``, the ``held`` quantities
    pinned meanwhile; None when no value in the back-solver's bracket gives it (an efficiency: (0, 1])."""
    name = inputs.stated_fields[path][0]
    overrides = {key: value for key, value in held.items() if key != name}
    try:
        value, reached = solve_for(inputs, quantity, target, path, overrides)
    except ContractError:
        return None
    if abs(reached - target) > 1e-3 * abs(target):   # a jump in the quantity, not a root
        return None
    return value


def _misses(inputs, held: dict[str, float], targets) -> float:
    """The largest relative miss, |estimated / measured − 1|, of the solved figures with ``held`` pinned."""
    if not targets:
        return 0.0
    values = _evaluate(inputs, held, [quantity for quantity, *_ in targets])
    return max(abs(values[quantity] / measured - 1) for quantity, measured, *_ in targets)


def _settle(inputs, held: dict[str, float], targets) -> dict[str, float]:
    """Newton's method on two solved inputs at once, from their alternating solution: x ← x − J⁻¹·r, with
    r_i = estimated_i / measured_i − 1 and the Jacobian J by forward differences (a step of 10⁻⁴ of each
    input); a step is halved until it stays in (0, bound] and misses by less. Returns the inputs that meet both figures within
    :data:`SETTLED`, or the starting ones when the method does not get there."""
    names = [name for _, _, name, _ in targets]
    bounds = [bound for *_, bound in targets]

    def residuals(x: list[float]) -> list[float]:
        values = _evaluate(inputs, held | dict(zip(names, x)), [quantity for quantity, *_ in targets])
        return [values[quantity] / measured - 1 for quantity, measured, *_ in targets]

    x = [held[name] for name in names]
    for _ in range(NEWTON_STEPS):
        r = residuals(x)
        if max(abs(v) for v in r) <= SETTLED:
            return dict(zip(names, x))
        columns = []
        for j in range(2):
            h = 1e-4 * x[j]
            shifted = list(x)
            shifted[j] += h
            columns.append([(a - b) / h for a, b in zip(residuals(shifted), r)])
        (j00, j10), (j01, j11) = columns
        determinant = j00 * j11 - j01 * j10
        if determinant == 0:
            break
        step = [(r[0] * j11 - r[1] * j01) / determinant, (j00 * r[1] - j10 * r[0]) / determinant]
        worst = max(abs(v) for v in r)
        for _ in range(30):   # halve the step until it stays in bounds and misses by less
            trial = [value - delta for value, delta in zip(x, step)]
            if all(0 < value <= bound for value, bound in zip(trial, bounds)) and \
                    max(abs(v) for v in residuals(trial)) < worst:
                break
            step = [delta / 2 for delta in step]
        else:
            break
        x = trial
    final = dict(zip(names, x))
    return final if max(abs(v) for v in residuals(x)) <= SETTLED else {name: held[name] for name in names}


def _percent(share: float) -> str:
    """0.21 -> '21 %' (the report's way of writing a share)."""
    return f"{share * 100:.0f} %"


def _slower(measured: float, estimated: float) -> str:
    """'21 % slower than estimated' for measured / estimated = 1.21."""
    change = measured / estimated - 1
    return f"{_percent(abs(change))} {'slower' if change > 0 else 'faster'} than estimated"


def _arrivals(run) -> str:
    import math

    if run.max_concurrency is not None:
        rate = "" if run.request_rate is None or math.isinf(run.request_rate) else \
            f", sent at up to {run.request_rate:g} requests/s"
        return f"closed loop: at most {run.max_concurrency:,} requests in flight{rate}"
    if run.request_rate is None:
        return "arrivals not stated"
    if math.isinf(run.request_rate):
        return "every prompt sent at once (request_rate inf, no concurrency cap)"
    if run.burstiness is None or run.burstiness == 1:
        return f"Poisson arrivals at {run.request_rate:g} requests/s"
    return f"gamma arrivals at {run.request_rate:g} requests/s, burstiness {run.burstiness:g}"


def calibrate_serving(contract_path: str | Path, run, source: str, overrides: list[str] | tuple[str, ...] = ()
                      ) -> Calibration:
    """Compare a serving contract with a vLLM or SGLang benchmark of one server, back-solve the step model's
    efficiencies and name the one that failed.

    The estimate is the contract at the measured traffic on one replica (:func:`measured_contract_data`),
    its load per replica held at the measured ``request_throughput`` while solving. Then, by the back-solver
    (:func:`botec.explore.solve.solve_for`, the graph's own formulas read backwards):

    - ``memory_bandwidth_efficiency`` at which ``time_per_output_token_seconds`` equals the measured mean TPOT
      (when no value in (0, 1] does: ``step_overhead`` instead, seconds ≥ 0);
    - ``matmul_efficiency`` at which ``time_to_first_token_seconds`` equals the measured mean TTFT, the solved
      bandwidth efficiency held; the two alternate for :data:`SOLVE_ROUNDS` rounds, then, if the pair does not
      yet give both figures, Newton's method on the pair finishes (:func:`_settle`);
    - when botec's saturated capacity (``offline_requests_per_s_per_replica``) is below the measured request
      throughput, the latencies cannot be reproduced at that load: ``matmul_efficiency`` at which the capacity
      equals the measured throughput instead.

    The failed assumption is the back-solved one farthest, as a ratio, from the contract's value. ``overrides``:
    ``--set FIELD=VALUE`` applied to the contract first.
    """
    import math

    from botec.contract import apply_overrides, parse_contract, read_contract_data
    from botec.estimate import estimate

    contract_path = Path(contract_path)
    data = read_contract_data(contract_path)
    if overrides:
        data = apply_overrides(data, list(overrides))
    measured_data = measured_contract_data(data, run)
    contract = parse_contract(measured_data, origin=f"{contract_path} at the load measured in {Path(run.path).name}")
    result = estimate(contract, base_dir=contract_path.resolve().parent, compare=False)
    q, inputs = result.quantities, result.inputs
    users = closed_loop_users(run)
    # a rate is held at the measured one; a closed loop's users on one replica give botec's own rate
    load = {_LOAD: run.requests_per_s} if users is None else {"replicas": 1.0}
    at_load = (f"at {run.requests_per_s:.4g} requests/s" if users is None
               else f"with {users:,} users in a closed loop")
    estimated = _evaluate(inputs, load, _COMPARED)
    capacity = estimated[_CAPACITY]
    overloaded = capacity < run.requests_per_s
    accelerators = estimated["replica_accelerators"]
    prompt, output = measured_data["workload"]["traffic"]["prompt_tokens"], \
        measured_data["workload"]["traffic"]["output_tokens"]
    percentile = run.percentile
    tool = run.tool
    note = f"measured: {source}"

    measured_lines = [
        f"read as {'an' if tool[0] in 'AEIOS' else 'a'} {tool} serving benchmark"
        + (f" (run {run.run} of {run.runs})" if run.runs > 1 else "") + f": {run.completed:,} requests completed in "
        f"{format_quantity(run.duration_seconds, 's')}" + (f", model {run.model}" if run.model else "")
        + (f", backend {run.backend}" if run.backend else "") + (f", {run.date}" if run.date else ""),
        f"traffic: {run.prompt_tokens:,.1f} prompt + {run.output_tokens:,.1f} output tokens per request (the totals "
        f"over the completed requests), {run.requests_per_s:.4g} requests/s achieved, "
        f"{run.output_tokens_per_s:,.1f} output tokens/s; {_arrivals(run)}",
        f"estimated as one replica of {accelerators:g} accelerator(s) {at_load} of "
        f"{prompt:,} + {output:,} tokens" + (f", latencies at P{percentile}" if percentile else ""),
    ]
    if run.mean_itl_seconds is not None:
        measured_lines.append(f"mean ITL {format_quantity(run.mean_itl_seconds, 's')} (the gap between streamed "
                              "chunks, per token)")
    if run.concurrency is not None:
        measured_lines.append(f"mean requests in flight {run.concurrency:.3g} ({tool}'s concurrency: the requests' "
                              "latencies summed over the duration)")
    notes = list(run.notes)
    missing: list[str] = []
    contract_traffic = data["workload"].get("traffic") or {}
    for words, key, measured_mean in (("prompt", "prompt_tokens", run.prompt_tokens),
                                      ("output", "output_tokens", run.output_tokens)):
        stated = contract_traffic.get(key)
        stated = stated.get("value") if isinstance(stated, dict) else stated
        if isinstance(stated, (int, float)) and abs(stated - measured_mean) > LENGTH_TOLERANCE * measured_mean:
            notes.append(f"the contract's {words} length is {stated:,.0f} tokens, the run's {measured_mean:,.1f} "
                         f"(more than {_percent(LENGTH_TOLERANCE)} apart): the calibration is of the measured lengths")
    if users is not None:
        notes.append(f"a closed-loop run (max_concurrency {run.max_concurrency:,}): a client sends its next request "
                     f"when one returns; estimated as workload.traffic.concurrency {users:,}, botec's rate the root of "
                     "X × R(X) = users (botec.serving.closed), its prompts' queue still the M/G/1 of random arrivals "
                     "(which errs long for a closed loop's smoother ones)")
    elif run.closed_loop:
        notes.append(f"a closed-loop run (max_concurrency {run.max_concurrency:,}) paced by a request rate of "
                     f"{run.request_rate:g}/s: estimated at the rate it achieved, the load")
    if not overloaded and run.requests_per_s > CROWDED * capacity:
        notes.append(f"at {_percent(run.requests_per_s / capacity)} of botec's saturated capacity the prompt queue "
                     "dominates the TTFT and each efficiency moves both figures: other pairs may give the same means; "
                     "a run at a lighter load pins them better")
    if run.burst:
        notes.append("request_rate inf with no concurrency cap: every prompt was sent at once, so the TTFT includes "
                     "the wait of a queue being drained, which no steady load reproduces; matmul_efficiency is not "
                     "solved on it (run with a request rate or a max_concurrency)")

    itl = (f"; its mean ITL, {format_quantity(run.mean_itl_seconds, 's')}, is the gap between streamed chunks"
           if run.mean_itl_seconds is not None else "")
    comparisons: list[Comparison] = []
    if overloaded:
        missing.append(f"TTFT: botec's replica cannot carry {run.requests_per_s:.4g} requests/s (its saturated "
                       f"capacity is {capacity:.4g}): its prompt queue grows without bound")
    else:
        comparisons.append(Comparison(_TTFT, "s", estimated[_TTFT], run.mean_ttft_seconds))
        if percentile:
            comparisons.append(Comparison(f"{_TTFT_P} (P{percentile})", "s", estimated[_TTFT_P],
                                          run.percentiles["ttft"][percentile]))
    comparisons.append(Comparison(_TPOT, "s", estimated[_TPOT], run.mean_tpot_seconds,
                                  TPOT_NOTE.format(tool=tool, itl=itl)))
    if percentile:
        comparisons.append(Comparison(f"{_TPOT_P} (P{percentile})", "s", estimated[_TPOT_P],
                                      run.percentiles["tpot"][percentile]))
    else:
        missing.append("latency percentiles: the file gives no P99, P95, P90 or median of both TTFT and TPOT")
    if run.mean_e2e_seconds is not None and not overloaded:
        comparisons.append(Comparison(_E2E, "s", estimated[_E2E], run.mean_e2e_seconds))
    elif run.mean_e2e_seconds is None:
        missing.append("end_to_end_latency_seconds: no mean end-to-end latency in the file"
                       + (" (add e2el to --percentile-metrics)" if run.format == "vllm-bench" else ""))
    capacity_text = format_quantity(estimated["offline_output_tokens_per_s_per_accelerator"], "tokens/s")
    comparisons.append(Comparison(_RATE, "tokens/s", estimated[_RATE], run.output_tokens_per_s / accelerators,
                                  RATE_NOTE.format(capacity=capacity_text) if users is None
                                  else CLOSED_RATE_NOTE.format(users=users, capacity=capacity_text)))

    # back-solving: each solve holds the load and the other solved assumptions
    held: dict[str, float] = dict(load)
    solved: dict[str, tuple[float, str, float, float]] = {}   # path -> (value, figure, measured, estimated)
    unsolved: list[str] = []

    def name_of(path: str) -> str:
        return inputs.stated_fields[path][0]

    def at_one(path: str) -> dict[str, float]:
        return _evaluate(inputs, {key: v for key, v in held.items() if key != name_of(path)} | {name_of(path): 1.0},
                         (_TTFT, _TPOT, _CAPACITY))

    if overloaded:
        path = "assumptions.matmul_efficiency"
        value = _solve(inputs, _CAPACITY, run.requests_per_s, path, {})
        if value is None:
            best = at_one(path)[_CAPACITY]
            unsolved.append(f"no matmul_efficiency in (0, 1] reproduces the measured {run.requests_per_s:.4g} "
                            f"requests/s: even at 1 botec's capacity is {best:.4g}; the step model charges a cost "
                            "this server does not pay (step overhead? a kernel?)")
        else:
            held[name_of(path)] = value
            solved[path] = (value, "the request throughput", run.requests_per_s, capacity)
    else:
        tpot_path: str | None = "assumptions.memory_bandwidth_efficiency"
        ttft_path: str | None = None if run.burst else "assumptions.matmul_efficiency"
        def targets(tpot_path, ttft_path) -> list[tuple[str, float, str, float]]:
            """(quantity, measured, graph input solved for it, its upper bound) of each solve in force."""
            return [(quantity, measured_value, name_of(path), 1.0 if "efficiency" in path else math.inf)
                    for quantity, measured_value, path in ((_TPOT, run.mean_tpot_seconds, tpot_path),
                                                           (_TTFT, run.mean_ttft_seconds, ttft_path)) if path]

        for _ in range(SOLVE_ROUNDS):
            if tpot_path is not None:
                value = _solve(inputs, _TPOT, run.mean_tpot_seconds, tpot_path, held)
                if value is None and tpot_path == "assumptions.memory_bandwidth_efficiency":
                    best = at_one(tpot_path)[_TPOT]
                    unsolved.append(
                        f"no memory_bandwidth_efficiency in (0, 1] reproduces the measured mean TPOT of "
                        f"{format_quantity(run.mean_tpot_seconds, 's')}: even at 1 botec's is "
                        f"{format_quantity(best, 's')}; the step model charges a cost this server does not pay "
                        "(step overhead? a kernel?): solving assumptions.step_overhead instead")
                    tpot_path = "assumptions.step_overhead"
                    value = _solve(inputs, _TPOT, run.mean_tpot_seconds, tpot_path, held)
                if value is None:
                    if tpot_path == "assumptions.step_overhead":
                        unsolved.append("no step_overhead ≥ 0 reproduces it either: botec's decode step is slower "
                                        "than measured without any fixed cost (check the model, the weight and KV "
                                        "precisions, prefix caching, speculative decoding)")
                    tpot_path = None
                else:
                    held[name_of(tpot_path)] = value
            if ttft_path is not None:
                value = _solve(inputs, _TTFT, run.mean_ttft_seconds, ttft_path, held)
                if value is None:
                    best = at_one(ttft_path)[_TTFT]
                    unsolved.append(
                        f"no matmul_efficiency in (0, 1] reproduces the measured mean TTFT of "
                        f"{format_quantity(run.mean_ttft_seconds, 's')}: even at 1 botec's is "
                        f"{format_quantity(best, 's')}; the step model charges a cost this server does not pay "
                        "(step overhead? a kernel?)")
                    ttft_path = None
                else:
                    held[name_of(ttft_path)] = value
            if _misses(inputs, held, targets(tpot_path, ttft_path)) <= SETTLED:
                break
        if tpot_path is not None and ttft_path is not None and \
                _misses(inputs, held, targets(tpot_path, ttft_path)) > SETTLED:
            held |= _settle(inputs, held, targets(tpot_path, ttft_path))
        if tpot_path is not None:
            solved[tpot_path] = (held[name_of(tpot_path)], "TPOT", run.mean_tpot_seconds, estimated[_TPOT])
        if ttft_path is not None:
            solved[ttft_path] = (held[name_of(ttft_path)], "TTFT", run.mean_ttft_seconds, estimated[_TTFT])
        if tpot_path == "assumptions.memory_bandwidth_efficiency":
            # one TPOT cannot tell a slower memory from a fixed cost per step: say what the other reading needs
            alternative = _solve(inputs, _TPOT, run.mean_tpot_seconds, "assumptions.step_overhead",
                                 {key: v for key, v in held.items() if key != name_of(tpot_path)})
            if alternative is not None:
                notes.append(f"one load cannot tell a slower memory from a fixed cost per step: at the assumed "
                             f"memory_bandwidth_efficiency {q[name_of(tpot_path)].value:.3g}, a step_overhead of "
                             f"{format_quantity(alternative, 's')} (assumed "
                             f"{format_quantity(q['step_overhead_seconds'].value, 's')}) reproduces the TPOT as well; "
                             "runs at two loads separate them")

    assumptions: dict[str, tuple[float, str]] = {}
    for path, (value, figure, measured_value, _) in solved.items():
        what = {"TPOT": f"mean TPOT {format_quantity(measured_value, 's')}",
                "TTFT": f"mean TTFT {format_quantity(measured_value, 's')}"}.get(
            figure, f"{run.requests_per_s:.4g} requests/s at saturation")
        assumptions[path] = (value, f"{note}: {what} {at_load} of {prompt:,} + {output:,} tokens")
    if solved and not overloaded:
        after = _evaluate(inputs, held, (_TTFT, _TPOT, _TTFT_P, _TPOT_P))
        parts = [f"TTFT {format_quantity(after[_TTFT], 's')} (measured {format_quantity(run.mean_ttft_seconds, 's')})",
                 f"TPOT {format_quantity(after[_TPOT], 's')} (measured {format_quantity(run.mean_tpot_seconds, 's')})"]
        if percentile:
            parts += [f"P{percentile} TTFT {format_quantity(after[_TTFT_P], 's')} (measured "
                      f"{format_quantity(run.percentiles['ttft'][percentile], 's')})",
                      f"P{percentile} TPOT {format_quantity(after[_TPOT_P], 's')} (measured "
                      f"{format_quantity(run.percentiles['tpot'][percentile], 's')})"]
        notes.append(f"with the back-solved assumptions at the measured {'load' if users is None else 'users'}: "
                     + ", ".join(parts))
        checked = [(name, target) for name, target, path in ((_TTFT, run.mean_ttft_seconds, ttft_path),
                                                             (_TPOT, run.mean_tpot_seconds, tpot_path)) if path]
        if any(abs(after[name] / target - 1) > 0.01 for name, target in checked):
            notes.append("the back-solved pair does not settle: it misses the measured figures by more than 1 % (see "
                         "above)")

    diagnosis = []
    if overloaded:
        diagnosis.append(f"botec's saturated capacity, {capacity:.4g} requests/s per replica, is below the measured "
                         f"{run.requests_per_s:.4g}: the estimate cannot carry the measured load on one replica; "
                         "botec's step model is too slow for this server, and matmul_efficiency is back-solved "
                         "from the throughput instead")
    else:
        diagnosis.append(f"load: {run.requests_per_s:.4g} requests/s on one replica"
                         + (f" ({users:,} users; botec's own rate with them {estimated[_LOAD]:.4g})" if users else "")
                         + f", {_percent(run.requests_per_s / capacity)} of botec's saturated capacity of "
                         f"{capacity:.4g} requests/s")
    if solved:
        def distance(item):
            path, (value, *_rest) = item
            return abs(math.log(value / q[name_of(path)].value))

        path, (value, figure, measured_value, estimated_value) = max(solved.items(), key=distance)
        assumed = q[name_of(path)].value

        def shown(v: float) -> str:
            return format_quantity(v, "s") if path == "assumptions.step_overhead" else f"{v:.3g}"

        if figure == "the request throughput":
            gap = f"the measured throughput is {_percent(measured_value / estimated_value - 1)} above botec's capacity"
        else:
            gap = f"{figure} {_slower(measured_value, estimated_value)}"
        latencies_agree = all(abs(c.ratio - 1) <= AGREEMENT for c in comparisons if c.name in (_TTFT, _TPOT))
        if latencies_agree and not overloaded:
            diagnosis.append(f"mean TTFT and TPOT within {_percent(AGREEMENT)} of the estimate: no assumption failed")
        else:
            diagnosis.append(f"the failed assumption: {path.removeprefix('assumptions.')}: {shown(assumed)} assumed, "
                             f"{shown(value)} measured ({gap})")
    diagnosis += unsolved
    context = {"format": run.format, "tool": tool, "run": run.run, "runs": run.runs,
               "requests_per_s": run.requests_per_s, "concurrency": users, "prompt_tokens": prompt,
               "output_tokens": output,
               "percentile": percentile, "replica_accelerators": accelerators,
               "capacity_requests_per_s_per_replica": capacity, "overloaded": overloaded}
    return Calibration(comparisons, assumptions, diagnosis, notes, measured_lines, missing, context)
