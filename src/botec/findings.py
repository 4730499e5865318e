"""Findings: what the numbers mean, in plain words, each tied to its account.

A finding has a level: ``ok`` (a check passed), ``warn`` (holds only under a condition the
text names), ``fail`` (the plan does not hold) or ``info`` (a headline figure). The
thresholds that decide the level are themselves named assumptions of the contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from botec.quantities import Quantity, declare_input
from botec.units import format_number, format_quantity

__all__ = ["Finding", "findings_for"]

declare_input("collective_overlap_share_threshold", account="findings", unit="fraction",
              meaning="collective floor share of the step above which communication must overlap with compute")
declare_input("checkpoint_pause_share_threshold", account="findings", unit="fraction",
              meaning="share of wall time lost to checkpoint writes above which it is a problem")


@dataclass(frozen=True)
class Finding:
    account: str
    level: str  # ok | warn | fail | info
    message: str
    quantities: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"account": self.account, "level": self.level, "message": self.message,
                "quantities": list(self.quantities)}


def findings_for(q: dict[str, Quantity], system: str = "decimal", reevaluate=None) -> list[Finding]:
    """The findings a set of resolved quantities supports (skips accounts whose inputs are missing)."""

    def f(name: str) -> str:
        return q[name].formatted(system)

    def n(name: str) -> str:
        return format_number(q[name].value)

    found: list[Finding] = []

    found.append(Finding(
        "compute", "info",
        f"run: {f('run_seconds')} on {f('accelerators')} ({f('accelerator_hours')}), "
        f"{f('steps')} of {f('step_seconds')}",
        ("run_seconds", "accelerators", "accelerator_hours", "steps", "step_seconds")))

    if "memory_spare_bytes" in q:
        spare = q["memory_spare_bytes"].value
        planned, capacity = f("planned_device_bytes"), f("device_memory_bytes")
        largest = f"the largest micro-batch that fits is {f('max_micro_batch_size')}"
        if spare >= 0:
            found.append(Finding("memory", "ok", f"fits: {planned} of {capacity} planned, {f('memory_spare_bytes')} "
                                                 f"spare; {largest}",
                                 ("planned_device_bytes", "device_memory_bytes", "memory_spare_bytes",
                                  "max_micro_batch_size")))
        else:
            short = format_quantity(-spare, "B", system)
            found.append(Finding("memory", "fail", f"does not fit: {planned} planned on a {capacity} device "
                                                   f"({short} short); {largest}",
                                 ("planned_device_bytes", "device_memory_bytes", "max_micro_batch_size")))

    if "collective_floor_share" in q:
        share = q["collective_floor_share"].value
        threshold = q["collective_overlap_share_threshold"].value
        names = ("collective_floor_seconds", "step_seconds", "collective_floor_share")
        floor, step, percent = f("collective_floor_seconds"), f("step_seconds"), f("collective_floor_share")
        kind = "all-reduce's" if q["parameter_gather_bytes_sent_per_step"].value == 0 else "collectives'"
        if q["collective_bytes_sent_per_step"].value == 0:
            found.append(Finding("network", "ok", "no gradient synchronization: a single replica", names))
        elif share >= 1:
            found.append(Finding(
                "network", "fail",
                f"the {kind} bandwidth floor ({floor}) is longer than the step ({step}): the network, not "
                "compute, sets the pace; the step estimate cannot hold", names))
        elif share > threshold:
            found.append(Finding(
                "network", "warn",
                f"the {kind} bandwidth floor is {percent} of the step ({floor} of {step}): it must overlap "
                "with the backward pass", names))
        else:
            found.append(Finding("network", "ok",
                                 f"the {kind} bandwidth floor is {percent} of the step ({floor} of {step})", names))
    elif "collective_bytes_sent_per_step" in q:
        found.append(Finding("network", "info",
                             f"{f('collective_bytes_sent_per_step')} sent per accelerator per step; state "
                             "supply.network.bandwidth to compare it with the step",
                             ("collective_bytes_sent_per_step",)))

    if "checkpoint_write_seconds" in q:
        share = q["checkpoint_pause_share"].value
        threshold = q["checkpoint_pause_share_threshold"].value
        level = "warn" if share > threshold else "info"
        found.append(Finding(
            "storage", level,
            f"each checkpoint blocks training for {f('checkpoint_write_seconds')} if saves block "
            f"({f('checkpoint_pause_share')} of wall time at one save per {f('checkpoint_interval_seconds')})",
            ("checkpoint_write_seconds", "checkpoint_pause_share", "checkpoint_interval_seconds")))
    else:
        found.append(Finding("storage", "info",
                             f"one checkpoint is {f('checkpoint_bytes')}; state supply.storage.write_bandwidth "
                             "to size its write time", ("checkpoint_bytes",)))
    found.append(Finding(
        "storage", "info",
        f"retained: {f('retained_storage_bytes')} ({n('retained_checkpoints')} × {f('checkpoint_bytes')} "
        f"checkpoints, {n('dataset_copies')} × {f('dataset_bytes')} data, {f('export_bytes')} export), "
        "before logs, replication and backups",
        ("retained_storage_bytes", "retained_checkpoint_bytes", "dataset_bytes", "export_bytes")))
    found.append(Finding(
        "storage", "info",
        f"average input rate {f('input_bytes_per_s')}: small, but a low average does not prove the input "
        "pipeline healthy (small objects, decoding, prefetch)", ("input_bytes_per_s",)))

    if "training_cost_usd" in q:
        found.append(Finding("cost", "info",
                             f"costs {f('training_cost_usd')} ({f('cost_per_million_tokens_usd')} per million "
                             "tokens)", ("training_cost_usd", "cost_per_million_tokens_usd")))
    if "energy_joules" in q:
        found.append(Finding("cost", "info", f"uses {f('energy_joules')} of accelerator energy, PUE included",
                             ("energy_joules",)))
    elif "pue" in q:
        found.append(Finding("cost", "info", "no energy figure: the accelerator has no published power; state "
                                             "supply.power_per_accelerator", ("pue",)))
    return found
