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
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from botec.errors import ContractError
from botec.estimate import Estimate
from botec.explore.solve import solve_for
from botec.measure.measurement import Measurement
from botec.units import format_quantity


@dataclass(frozen=True)
class Comparison:
    name: str
    unit: str
    estimated: float
    measured: float

    @property
    def ratio(self) -> float:
        return self.measured / self.estimated if self.estimated else float("nan")


@dataclass(frozen=True)
class Calibration:
    comparisons: list[Comparison]
    assumptions: dict[str, tuple[float, str]]   # contract path -> (value, note)
    diagnosis: list[str]
    notes: list[str]


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


def calibrate(result: Estimate, measurement: Measurement, source: str, allow_workload_change: bool = False
              ) -> Calibration:
    """Compare, back-solve and diagnose."""
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
    if result.choices.get("step_time") == "components":
        value, _ = solve_for(inputs, "compute_seconds_per_step", compute, "assumptions.single_accelerator_mfu")
        assumptions["assumptions.single_accelerator_mfu"] = (value, f"{note}: forward + backward + optimizer time")
    else:
        value, _ = solve_for(inputs, "step_seconds", step, "assumptions.end_to_end_mfu")
        assumptions["assumptions.end_to_end_mfu"] = (value, f"{note}: median step time")
        if "single_accelerator_mfu" in q:
            notes.append("end_to_end_mfu replaces single_accelerator_mfu × scaling_efficiency: the measured step "
                         "already includes the scaling losses, so multiplying by a scaling factor would count them "
                         "twice")
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
