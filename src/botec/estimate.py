"""From a contract to an estimate: the given quantities, the evaluated graph, the findings.

This is the only place that knows which contract field feeds which quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

from botec.contract import Contract, Stated, load_contract
from botec.errors import ContractError
from botec.findings import Finding, findings_for
from botec.quantities import Given, Quantity, evaluate

__all__ = ["Estimate", "REFERENCE_CONTRACT", "estimate", "given_quantities", "reference_contract_path"]

REFERENCE_CONTRACT = "lesson-finetune-1b.yaml"


def reference_contract_path():
    """The built-in reference workload (lesson 000), shipped inside the package."""
    return resources.files("botec.contracts").joinpath(REFERENCE_CONTRACT)


@dataclass(frozen=True)
class Estimate:
    """A contract, every quantity it resolves to, and what they mean."""

    contract: Contract
    quantities: dict[str, Quantity]
    findings: list[Finding]
    accelerator_name: str
    optimizer_name: str

    def value(self, name: str) -> float:
        return self.quantities[name].value

    @property
    def fits(self) -> bool:
        return self.quantities["memory_spare_bytes"].value >= 0


def _stated(stated: Stated, field: str) -> Given:
    return Given(stated.value, stated.provenance, stated.source, field, stated.low, stated.high)


def given_quantities(contract: Contract) -> tuple[dict[str, Given], str, str]:
    """The inputs of the quantity graph, each with its provenance and the contract field it came from.

    Returns (given, accelerator label, optimizer label).
    """
    from botec.catalog import accelerators, optimizer_presets

    workload, supply, strategy, assumptions = (
        contract.workload, contract.supply, contract.strategy, contract.assumptions)
    given: dict[str, Given] = {
        "parameters": _stated(workload.model.parameters, "workload.model.parameters"),
        "layers": _stated(workload.model.layers, "workload.model.layers"),
        "hidden_size": _stated(workload.model.hidden_size, "workload.model.hidden_size"),
        "tokens": _stated(workload.tokens, "workload.tokens"),
        "sequence_length": _stated(workload.sequence_length, "workload.sequence_length"),
        "token_bytes": _stated(workload.token_bytes, "workload.token_bytes"),
        "accelerators": _stated(supply.count, "supply.count"),
        "micro_batch_size": _stated(strategy.micro_batch_size, "strategy.micro_batch_size"),
        "gradient_accumulation_steps": _stated(strategy.gradient_accumulation_steps,
                                               "strategy.gradient_accumulation_steps"),
        "zero_stage": Given(float(strategy.zero_stage), "assumed", None, "strategy.zero_stage"),
        "activation_bytes_per_element": _stated(strategy.activation_bytes_per_element,
                                                "strategy.activation_bytes_per_element"),
        "checkpoint_interval_seconds": _stated(strategy.checkpoint.interval, "strategy.checkpoint.interval"),
        "retained_checkpoints": _stated(strategy.checkpoint.retained, "strategy.checkpoint.retained"),
        "dataset_copies": _stated(strategy.retention.dataset_copies, "strategy.retention.dataset_copies"),
        "export_bytes_per_parameter": _stated(strategy.retention.export_bytes_per_parameter,
                                              "strategy.retention.export_bytes_per_parameter"),
        "saved_tensor_factor": _stated(assumptions.saved_tensor_factor, "assumptions.saved_tensor_factor"),
        "runtime_buffer_bytes": _stated(assumptions.runtime_buffer, "assumptions.runtime_buffer"),
        "headroom": _stated(assumptions.headroom, "assumptions.headroom"),
        "collective_overlap_share_threshold": _stated(assumptions.thresholds.collective_overlap_share,
                                                      "assumptions.thresholds.collective_overlap_share"),
        "checkpoint_pause_share_threshold": _stated(assumptions.thresholds.checkpoint_pause_share,
                                                    "assumptions.thresholds.checkpoint_pause_share"),
    }
    for name, stated in assumptions.efficiency().items():
        given[name] = _stated(stated, f"assumptions.{name}")

    # The optimizer: a preset from the catalog, or bytes per parameter stated in the contract.
    components = ("weight", "gradient", "master_weight", "optimizer_state")
    if isinstance(strategy.optimizer, str):
        preset = optimizer_presets()[strategy.optimizer]
        optimizer_name = f"{preset.key}: {preset.description}"
        for part in components:
            name = f"{part}_bytes_per_parameter"
            given[name] = Given(getattr(preset, name), "catalog", f"preset {preset.key}", "strategy.optimizer")
    else:
        optimizer_name = "custom optimizer state"
        for part, field in zip(components, ("weights", "gradients", "master_weights", "optimizer_states")):
            given[f"{part}_bytes_per_parameter"] = _stated(getattr(strategy.optimizer, field),
                                                           f"strategy.optimizer.{field}")

    # The accelerator: catalog figures with their sources, or an inline (hypothetical) device.
    accelerator = supply.accelerator
    link_bandwidth = power = None
    if isinstance(accelerator, str):
        device = accelerators()[accelerator]
        accelerator_name = f"{device.name} ({device.key})"
        if strategy.precision not in device.peak_flops_per_s:
            raise ContractError(
                f"{device.key} has no published {strategy.precision} peak (it has: "
                f"{', '.join(device.peak_flops_per_s)})", field="strategy.precision")
        given["peak_flops_per_s"] = Given(device.peak_flops_per_s[strategy.precision], "catalog",
                                          device.source_of("peak_flops_per_s"), "supply.accelerator")
        given["device_memory_bytes"] = Given(device.memory_bytes, "catalog", device.source_of("memory"),
                                             "supply.accelerator")
        if device.link_bandwidth_bytes_per_s is not None:
            link_bandwidth = Given(device.link_bandwidth_bytes_per_s, "catalog",
                                   f"{device.link}; {device.source_of('link_bandwidth')}", "supply.accelerator")
        if device.tdp_watts is not None:
            power = Given(device.tdp_watts, "catalog", f"TDP; {device.source_of('tdp')}", "supply.accelerator")
    else:
        accelerator_name = accelerator.name
        given["peak_flops_per_s"] = _stated(accelerator.peak_flops_per_s, "supply.accelerator.peak_flops_per_s")
        given["device_memory_bytes"] = _stated(accelerator.memory, "supply.accelerator.memory")
        if accelerator.link_bandwidth is not None:
            link_bandwidth = _stated(accelerator.link_bandwidth, "supply.accelerator.link_bandwidth")
        if accelerator.tdp is not None:
            power = _stated(accelerator.tdp, "supply.accelerator.tdp")

    if supply.network is not None:
        link_bandwidth = _stated(supply.network.bandwidth, "supply.network.bandwidth")
    if link_bandwidth is not None:
        given["interconnect_bytes_per_s"] = link_bandwidth
    if supply.storage is not None:
        given["storage_write_bytes_per_s"] = _stated(supply.storage.write_bandwidth, "supply.storage.write_bandwidth")
    if supply.power_per_accelerator is not None:
        power = _stated(supply.power_per_accelerator, "supply.power_per_accelerator")
    if power is not None:
        given["accelerator_power_watts"] = power
    if supply.pue is not None:
        given["pue"] = _stated(supply.pue, "supply.pue")
    if supply.price_per_accelerator_hour is not None:
        given["price_per_accelerator_hour"] = _stated(supply.price_per_accelerator_hour,
                                                      "supply.price_per_accelerator_hour")
    return given, accelerator_name, optimizer_name


def _check_finite(quantities: dict[str, Quantity]) -> None:
    for quantity in quantities.values():
        value = quantity.value
        if isinstance(value, (int, float)) and not math.isfinite(value):
            inputs = ", ".join(quantity.inputs) or "its inputs"
            raise ContractError(f"not a finite number; check its inputs: {inputs}", field=quantity.name)


def check_fit(result: "Estimate") -> None:
    """Raise a :class:`ContractError` naming the batch when the plan does not fit the device."""
    q = result.quantities
    if result.fits:
        return
    planned, capacity = q["planned_device_bytes"].formatted(), q["device_memory_bytes"].formatted()
    largest = int(q["max_micro_batch_size"].value)
    batch = int(q["micro_batch_size"].value)
    if largest >= 1:
        advice = f"at most {largest} fit{'s' if largest == 1 else ''}"
    else:
        advice = (f"not even 1 fits: the state alone is {q['state_bytes'].formatted()} per accelerator "
                  "(shard it with strategy.zero_stage, or use a larger device)")
    raise ContractError(
        f"{batch} sequences per accelerator need {planned} planned per accelerator, more than its {capacity}; "
        f"{advice}", field="strategy.micro_batch_size")


def estimate(contract: Contract) -> Estimate:
    """Evaluate every quantity the contract determines, and the findings they support."""
    given, accelerator_name, optimizer_name = given_quantities(contract)
    quantities = evaluate(given)
    _check_finite(quantities)
    return Estimate(contract, quantities, findings_for(quantities), accelerator_name, optimizer_name)


def estimate_file(path=None, overrides: list[str] | None = None) -> Estimate:
    """Load a contract file (the reference workload when ``path`` is None) and estimate it."""
    if path is None:
        with resources.as_file(reference_contract_path()) as reference:
            return estimate(load_contract(reference, overrides, origin=f"reference workload {REFERENCE_CONTRACT}"))
    return estimate(load_contract(path, overrides))
