"""What a training estimate means: the run, the step's parts, whether it fits, whether the network
keeps up, what storage must hold and write, what it costs."""

from __future__ import annotations

from botec.findings import Finding
from botec.graph import Quantity
from botec.units import format_number, format_quantity

# Collectives that hurt when they cross nodes: (their time, the group, what to do about it).
_CROSSING = (
    ("tp_communication_seconds", "tp", "keep TP within a node"),
    ("cp_communication_seconds", "cp", "keep TP × CP within a node"),
    ("ep_communication_seconds", "ep", "keep TP × CP × EP within a node"),
    ("parameter_gather_seconds", "shard", "shard within a node and replicate across nodes (fsdp: hybrid_shard)"),
)


def training_findings(inputs, q: dict[str, Quantity], relief: str = "", system: str = "decimal") -> list[Finding]:
    def f(name: str) -> str:
        return q[name].formatted(system)

    def n(name: str) -> str:
        return format_number(q[name].value)

    components = inputs.choices.get("step_time") == "components"
    found: list[Finding] = [Finding(
        "compute", "info",
        f"run: {f('run_seconds')} on {f('accelerators')} ({f('accelerator_hours')}), {f('steps')} of "
        f"{f('step_seconds')}", ("run_seconds", "accelerators", "accelerator_hours", "steps", "step_seconds"))]
    if components:
        bubble = (f" + pipeline bubble {f('pipeline_bubble_seconds')} ({f('pipeline_bubble_share')} of the compute)"
                  if q["pipeline_bubble_seconds"].value else "")
        found.append(Finding(
            "compute", "info",
            f"step {f('step_seconds')} = compute {f('compute_seconds_per_step')}{bubble} + exposed communication "
            f"{f('exposed_communication_seconds')} ({f('exposed_communication_share')} of the step); achieved MFU "
            f"{n('end_to_end_mfu')}",
            ("step_seconds", "compute_seconds_per_step", "pipeline_bubble_seconds", "exposed_communication_seconds",
             "end_to_end_mfu")))
    if "pipeline_bubble_share" in q and q["pipeline_bubble_share"].value > q["pipeline_bubble_share_threshold"].value:
        found.append(Finding(
            "compute", "warn",
            f"the pipeline bubble is {f('pipeline_bubble_share')} of the compute time ((p − 1)/(v·m) with p = "
            f"{n('pipeline_parallel')}, m = {n('gradient_accumulation_steps')} micro-batches): more micro-batches per "
            "step or an interleaved schedule shrinks it",
            ("pipeline_bubble_share", "pipeline_parallel", "gradient_accumulation_steps",
             "pipeline_bubble_share_threshold")))

    planned, capacity = f("planned_device_bytes"), f("device_memory_bytes")
    largest = f"the largest micro-batch that fits is {f('max_micro_batch_size')}"
    if q["memory_spare_bytes"].value >= 0:
        found.append(Finding("memory", "ok", f"fits: {planned} of {capacity} planned, {f('memory_spare_bytes')} "
                                             f"spare; {largest}",
                             ("planned_device_bytes", "device_memory_bytes", "memory_spare_bytes",
                              "max_micro_batch_size")))
    else:
        short = format_quantity(-q["memory_spare_bytes"].value, "B", system)
        parts = (f"state {f('state_bytes')} (weights {f('weight_memory_bytes')}, gradients "
                 f"{f('gradient_memory_bytes')}, optimizer {f('optimizer_memory_bytes')}), activations "
                 f"{f('activation_bytes')}, buffers {f('runtime_buffer_bytes')}")
        found.append(Finding(
            "memory", "fail", f"does not fit: {planned} planned against {capacity} ({short} short): {parts}; "
                              f"{largest}{relief}",
            ("planned_device_bytes", "device_memory_bytes", "state_bytes", "activation_bytes", "max_micro_batch_size")))

    found += _network(inputs, q, components, f)

    if "checkpoint_write_seconds" in q:
        level = "warn" if q["checkpoint_pause_share"].value > q["checkpoint_pause_share_threshold"].value else "info"
        found.append(Finding(
            "storage", level,
            f"each checkpoint blocks training for {f('checkpoint_write_seconds')} if saves block "
            f"({f('checkpoint_pause_share')} of wall time at one save per {f('checkpoint_interval_seconds')})",
            ("checkpoint_write_seconds", "checkpoint_pause_share", "checkpoint_interval_seconds")))
    else:
        found.append(Finding("storage", "info", f"one checkpoint is {f('checkpoint_bytes')}; state "
                                                "supply.storage.write_bandwidth to size its write time",
                             ("checkpoint_bytes",)))
    found.append(Finding(
        "storage", "info",
        f"retained: {f('retained_storage_bytes')} ({n('retained_checkpoints')} × {f('checkpoint_bytes')} checkpoints, "
        f"{n('dataset_copies')} × {f('dataset_bytes')} data, {f('export_bytes')} export), before logs, replication and "
        "backups", ("retained_storage_bytes", "retained_checkpoint_bytes", "dataset_bytes", "export_bytes")))
    found.append(Finding(
        "storage", "info",
        f"average input rate {f('input_bytes_per_s')}: small, but a low average does not prove the input pipeline "
        "healthy (small objects, decoding, prefetch)", ("input_bytes_per_s",)))

    if "training_cost_usd" in q:
        found.append(Finding("cost", "info", f"costs {f('training_cost_usd')} ({f('cost_per_million_tokens_usd')} per "
                                             "million tokens)", ("training_cost_usd", "cost_per_million_tokens_usd")))
    if "energy_joules" in q:
        found.append(Finding("cost", "info", f"uses {f('energy_joules')} of accelerator energy, PUE included",
                             ("energy_joules",)))
    elif "pue" in q:
        found.append(Finding("cost", "info", "no energy figure: the accelerator has no published power; state "
                                             "supply.power_per_accelerator", ("pue",)))
    return found


def _network(inputs, q: dict[str, Quantity], components: bool, f) -> list[Finding]:
    found: list[Finding] = []
    if q["collective_bytes_sent_per_step"].value == 0:
        return [Finding("network", "ok", "no collectives: a single accelerator",
                        ("collective_bytes_sent_per_step",))]
    if components:
        exposed = q["exposed_communication_share"].value
        threshold = q["collective_overlap_share_threshold"].value
        found.append(Finding(
            "network", "warn" if exposed > threshold else "ok",
            f"communication takes {f('communication_seconds')} per step, {f('exposed_communication_seconds')} of it "
            f"exposed ({f('exposed_communication_share')} of the step); bandwidth floor {f('collective_floor_seconds')}",
            ("communication_seconds", "exposed_communication_seconds", "collective_floor_seconds")))
    elif "collective_floor_share" in q:
        share, threshold = q["collective_floor_share"].value, q["collective_overlap_share_threshold"].value
        names = ("collective_floor_seconds", "step_seconds", "collective_floor_share")
        kind = ("all-reduce's" if q["collective_bytes_sent_per_step"].value == q["ring_bytes_sent_per_step"].value
                else "collectives'")
        floor, step, percent = f("collective_floor_seconds"), f("step_seconds"), f("collective_floor_share")
        if share >= 1:
            found.append(Finding("network", "fail", f"the {kind} bandwidth floor ({floor}) is longer than the step "
                                                    f"({step}): the network, not compute, sets the pace; the step "
                                                    "estimate cannot hold", names))
        elif share > threshold:
            found.append(Finding("network", "warn", f"the {kind} bandwidth floor is {percent} of the step ({floor} "
                                                    f"of {step}): it must overlap with the backward pass", names))
        else:
            found.append(Finding("network", "ok", f"the {kind} bandwidth floor is {percent} of the step ({floor} of "
                                                  f"{step})", names))
    else:
        needed = inputs.needed_fields("collective_floor_seconds", q) or ["supply.network.bandwidth"]
        found.append(Finding("network", "info", f"{f('collective_bytes_sent_per_step')} sent per accelerator per step; "
                                                f"state {' and '.join(needed)} to compare it with the step",
                             ("collective_bytes_sent_per_step",)))
    per_node = q["accelerators_per_node"].value
    for seconds, group, advice in _CROSSING:
        place = inputs.placement.get(group)
        if place is not None and place.crosses_nodes and seconds in q and q[seconds].value > 0:
            found.append(Finding(
                "network", "warn",
                f"{place.carried} cross the inter-node tier ({f(seconds)} per step; the group spans "
                f"{format_number(place.span)} accelerators, a node has {format_number(per_node)}): {advice}",
                (seconds, "accelerators_per_node")))
    return found
