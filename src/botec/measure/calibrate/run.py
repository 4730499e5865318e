"""Calibrating from a ``botec measure`` run: the estimate beside it part by part, the assumptions it pins down, and
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
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.estimation import Estimate
from botec.explore.solve import solve_for
from botec.measure.calibrate.results import END_TO_END_NOTE, Calibration, Comparison, efficiency_assumption
from botec.measure.measurement import Measurement
from botec.units import format_quantity


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
    differences += _lora_differences(result.inputs.peft, measured,
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
    accelerator = result.inputs.accelerator
    ran_on = f"{environment.device_name} ({environment.device})"
    if isinstance(accelerator, str):
        if environment.device == "cuda" and device_matches(environment.device_name, accelerator):
            return None
        return f"the measurement ran on {ran_on}, not the contract's {accelerator}"
    if environment.device == "cpu" and "cpu" not in accelerator.name.lower():
        return (f"the measurement ran on {ran_on}, not the contract's {accelerator.name!r} (describe the CPU "
                "inline with a name that says CPU to calibrate for it)")
    return None


def calibrate_run(result: Estimate, measurement: Measurement, source: str, allow_workload_change: bool = False,
                  device_independent_only: bool = False) -> Calibration:
    """Compare with a ``botec measure`` run, back-solve and diagnose.

    ``device_independent_only``: take only what does not depend on the device (for a run on other hardware
    than the contract's accelerator, which is otherwise refused)."""
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
        value = _back_solve(inputs, "compute_seconds_per_step", compute, "s", efficiency,
                            "summary.median.forward_backward_seconds")
        assumptions[efficiency] = (value, f"{note}: forward + backward + optimizer time")
    else:
        value = _back_solve(inputs, "step_seconds", step, "s", efficiency, "summary.median.step_seconds")
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
        bandwidth = _back_solve(inputs, "gradient_sync_seconds", sync, "s", "dp_link_bytes_per_s",
                                "summary.median.sync_seconds", pinned)
        assumptions["supply.network.bandwidth"] = (bandwidth, f"{note}: gradient all-reduce bytes / synchronization "
                                                              "time")
        if "collective_floor_seconds" in q:
            comparisons.append(Comparison("collective_floor_seconds", "s", q["collective_floor_seconds"].value, sync))
    _checkpoint(result, measurement, note, comparisons, assumptions)
    return Calibration(comparisons, assumptions, diagnose(result, measurement), notes, missing=missing)


def _back_solve(inputs, quantity: str, measured: float, unit: str, path: str, field: str,
                overrides: dict | None = None) -> float:
    """The value of ``path`` at which ``quantity`` equals the measured figure (:func:`solve_for`), or a one-line
    error naming the measurement's ``field`` when none in the back-solver's range does (an efficiency above 1: a
    figure in the wrong unit, or a run of another workload)."""
    try:
        value, _ = solve_for(inputs, quantity, measured, path, overrides)
    except ContractError as error:
        raise ContractError(f"no {path.removeprefix('assumptions.')} reproduces the measured {quantity} of "
                            f"{format_quantity(measured, unit)} ({error.detail}): is the figure in the unit expected, "
                            "and the contract the measured run's?", field=field) from None
    return value


def _checkpoint(result: Estimate, measurement: Measurement, note: str, comparisons: list, assumptions: dict) -> None:
    """A measured checkpoint save (a device-independent figure): its bytes against the estimate's, and the storage
    write bandwidth that makes the estimate's write time the measured one."""
    checkpoint = measurement.checkpoint
    if checkpoint is None or checkpoint.seconds <= 0:
        return
    q = result.quantities
    comparisons.append(Comparison("checkpoint_bytes", "B", q["checkpoint_bytes"].value, checkpoint.bytes))
    if "storage_write_bytes_per_s" in q:
        bandwidth = _back_solve(result.inputs, "checkpoint_write_seconds", checkpoint.seconds, "s",
                                "storage_write_bytes_per_s", "checkpoint.seconds", {"checkpoint_bytes": checkpoint.bytes})
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
         q["checkpoint_pause_seconds_each"].value * estimated_step / q["checkpoint_interval_seconds"].value
         if "checkpoint_pause_seconds_each" in q else 0.0,
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


