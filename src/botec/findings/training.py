"""What a training estimate means: the run, the step's parts, whether it fits, whether the network
keeps up, what storage must hold and write, what it costs."""

from __future__ import annotations

from botec.findings import Finding
from botec.findings.fit import FITS, FITS_DEVICE, plan_fits, spares_of
from botec.graph import Quantity
from botec.graph.elementwise import is_scalar
from botec.layout import Recompute
from botec.units import format_number, format_quantity

# Collectives that hurt when they cross nodes: (their time, the group, what to do about it).
_CROSSING = (
    ("tp_communication_seconds", "tp", "keep TP within a node"),
    ("cp_communication_seconds", "cp", "keep TP × CP within a node"),
    ("ep_communication_seconds", "ep", "keep TP × CP × EP within a node"),
    ("dense_parameter_gather_seconds", "shard", "shard within a node and replicate across nodes (fsdp: hybrid_shard)"),
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
    if inputs.choices.get("compute") == "op_level":
        found.append(_stack(inputs, q))
    if components:
        bubble = (f" + pipeline bubble {f('pipeline_bubble_seconds')} ({n('pipeline_bubble_to_compute_ratio')} × the "
                  "compute)" if q["pipeline_bubble_seconds"].value else "")
        found.append(Finding(
            "compute", "info",
            f"step {f('step_seconds')} = compute {f('compute_seconds_per_step')}{bubble} + exposed communication "
            f"{f('exposed_communication_seconds')} ({f('exposed_communication_share')} of the step)"
            + (f" + exposed offloading {f('exposed_offload_seconds')}" if q["exposed_offload_seconds"].value else "")
            + f"; achieved MFU {n('end_to_end_mfu')}",
            ("step_seconds", "compute_seconds_per_step", "pipeline_bubble_seconds", "exposed_communication_seconds",
             "exposed_offload_seconds", "end_to_end_mfu")))
    if ("pipeline_bubble_to_compute_ratio" in q
            and q["pipeline_bubble_to_compute_ratio"].value > q["pipeline_bubble_share_threshold"].value):
        schedule = inputs.layout.schedule.value
        shrink = ("more micro-batches per step, an interleaved schedule or a zero-bubble one (strategy.pipeline_schedule: "
                  "zb-h1) shrinks it" if schedule in ("1f1b", "interleaved") else "more micro-batches per step shrink it")
        found.append(Finding(
            "compute", "warn",
            f"the pipeline bubble is {n('pipeline_bubble_to_compute_ratio')} × the compute time ({schedule} with p = "
            f"{n('pipeline_parallel')}, v = {n('virtual_pipeline_stages')}, m = {n('gradient_accumulation_steps')} "
            f"micro-batches): {shrink}",
            ("pipeline_bubble_to_compute_ratio", "pipeline_parallel", "virtual_pipeline_stages",
             "gradient_accumulation_steps", "pipeline_bubble_share_threshold")))
    if (is_scalar(inputs.layout.recompute) and inputs.layout.recompute == Recompute.SELECTIVE
            and "fused_attention" in q and q["fused_attention"].value
            and not ("selective_recompute_policy" in q and q["selective_recompute_policy"].value >= 1)):
        found.append(Finding(
            "memory", "info",
            "strategy.recompute: selective buys nothing with flash attention: the fused kernel keeps none of the "
            "attention scores that selective recomputation drops (Korthikanti et al. 2022; Dao et al. 2022), so "
            "it frees no memory and recomputes nothing: the estimate is that of recompute: none",
            ("fused_attention", "activation_bytes")))

    planned, capacity = f("planned_device_bytes"), f("device_memory_bytes")
    largest = f"the largest micro-batch that keeps the headroom is {f('max_micro_batch_size')}"
    if plan_fits(spares_of(q), FITS, host=False):
        found.append(Finding("memory", "ok", f"fits: {planned} of {capacity} planned{_saver_parts(q, f)}, "
                                             f"{f('memory_spare_bytes')} spare; {largest}",
                             ("planned_device_bytes", "device_memory_bytes", "memory_spare_bytes",
                              "max_micro_batch_size")))
    elif "memory_spare_before_headroom_bytes" in q and plan_fits(spares_of(q), FITS_DEVICE, host=False):
        # the allocations fit the device only by eating the headroom: by the one verdict (botec.findings.fit) the
        # plan does not fit; `--subject-to fits_device` is the constraint that accepts it
        needed = format_quantity(q["planned_device_bytes"].value / (1 + q["headroom"].value), "B", system)
        found.append(Finding(
            "memory", "fail",
            f"does not fit within the headroom: {planned} planned against {capacity}; the {needed} it needs"
            f"{_saver_parts(q, f)} fit the device only by eating the {f('memory_headroom_bytes')} headroom "
            f"(assumptions.headroom {format_number(100 * q['headroom'].value)} %; "
            f"{f('memory_spare_before_headroom_bytes')} left); {largest}{relief}",
            ("planned_device_bytes", "device_memory_bytes", "memory_spare_before_headroom_bytes",
             "memory_headroom_bytes", "headroom", "max_micro_batch_size")))
    else:
        short = format_quantity(-q["memory_spare_before_headroom_bytes"].value if "memory_spare_before_headroom_bytes"
                                in q else -q["memory_spare_bytes"].value, "B", system)
        parts = (f"state {f('state_bytes')} (weights {f('weight_memory_bytes')}, gradients "
                 f"{f('gradient_memory_bytes')}, optimizer {f('optimizer_memory_bytes')}), activations "
                 f"{f('activation_bytes')}, buffers {f('runtime_buffer_bytes')}{_saver_parts(q, f)}")
        found.append(Finding(
            "memory", "fail", f"does not fit: {planned} planned against {capacity} ({short} short even without the "
                              f"headroom): {parts}; "
                              f"{largest}{relief}",
            ("planned_device_bytes", "device_memory_bytes", "state_bytes", "activation_bytes", "max_micro_batch_size")))

    if "frozen_weight_memory_bytes" in q and q["frozen_base"].value:
        lora = inputs.peft
        total = q["parameters"].value + q["trainable_parameters"].value     # PEFT's "all params"
        adapters = q["state_bytes"].value - q["frozen_weight_memory_bytes"].value
        found.append(Finding(
            "memory", "info",
            f"LoRA trains {n('trainable_parameters')} of {format_number(total)} parameters "
            f"({100 * q['trainable_parameters'].value / total:.2g} %); the frozen {lora.base_weights} base takes "
            f"{f('frozen_weight_memory_bytes')} per accelerator, the adapters' weights, gradients and optimizer state "
            f"{format_quantity(adapters, 'B', system)}",
            ("trainable_parameters", "parameters", "frozen_weight_memory_bytes", "state_bytes")))

    found += _savers(q, f, components, system)
    found += _network(inputs, q, components, f)

    found += _checkpoints(q, f)
    found.append(Finding(
        "storage", "info",
        f"retained: {f('retained_storage_bytes')} ({n('retained_checkpoints')} × {f('checkpoint_bytes')} checkpoints, "
        f"{n('dataset_copies')} × {f('dataset_bytes')} data, {f('export_bytes')} export), before logs, replication and "
        "backups", ("retained_storage_bytes", "retained_checkpoint_bytes", "dataset_bytes", "export_bytes")))
    found.append(Finding(
        "storage", "info",
        f"average input rate {f('input_bytes_per_s')}: small, but a low average does not prove the input pipeline "
        "healthy (small objects, decoding, prefetch)", ("input_bytes_per_s",)))
    found += _failures(q, f, system)

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


def _stack(inputs, q: dict[str, Quantity]) -> Finding:
    """Which training stack the op-level step assumes, and whose efficiency figures: the measured defaults or a
    named calibration. Where the contract names no stack, what the assumed one's choices weigh in this estimate:
    its elementwise ops' share of a layer's time, 3·t_e / t_layer (forward, and the backward's two passes over the
    same bytes), and the bytes per logit its loss keeps, so the user sees what naming another would move."""
    from botec.catalog import training_stacks
    stack = inputs.stack
    attention = f"{stack.training_attention} attention" if stack.attention_kernel == "flash" else "eager attention"
    calibration = inputs.calibration
    figures = (f"calibration {calibration}: figures fitted to end-to-end runs" if calibration
               else "operator measurements (catalog/efficiency.yaml)")
    text = (f"stack: {stack.name} ({stack.how}): {attention}, {stack.elementwise} elementwise ops, {stack.loss} "
            f"loss; kernel figures from {figures}")
    if not stack.named_by_contract and q.get("layer_seconds") and q["layer_seconds"].value > 0:
        share = 3 * q["elementwise_seconds"].value / q["layer_seconds"].value
        kept = training_stacks().loss[stack.loss]["kept_bytes_per_logit"]
        others = ", ".join(name for name in training_stacks().stacks if name != stack.name)
        text += (f"; here its {stack.elementwise} elementwise ops take {share * 100:.0f} % of a layer's time"
                 + (" (fused kernels move a quarter of their bytes)" if stack.elementwise == "eager" else "")
                 + f" and its loss keeps {kept:g} B per logit; another stack ({others}) changes both")
    return Finding("compute", "info", text, ("attention_efficiency", "matmul_efficiency", "elementwise_traffic_factor"))


def _checkpoints(q: dict[str, Quantity], f) -> list[Finding]:
    """The checkpoint pause (synchronous or asynchronous) and the host memory of asynchronous saves."""
    if "checkpoint_pause_seconds_each" not in q:
        return [Finding("storage", "info", f"one checkpoint is {f('checkpoint_bytes')}; state "
                                           "supply.storage.write_bandwidth to size its write time, the checkpoint "
                                           "pause and goodput", ("checkpoint_bytes",))]
    found: list[Finding] = []
    level = "warn" if q["checkpoint_pause_share"].value > q["checkpoint_pause_share_threshold"].value else "info"
    share = f"{f('checkpoint_pause_share')} of wall time at one save per {f('checkpoint_interval_seconds')}"
    if q["checkpoint_mode_async"].value:
        waits = q["checkpoint_write_seconds"].value > q["checkpoint_interval_seconds"].value
        found.append(Finding(
            "storage", "warn" if waits else level,
            f"each asynchronous checkpoint pauses training for {f('checkpoint_pause_seconds_each')} ({share}): "
            f"{f('checkpoint_snapshot_seconds')} to copy {f('checkpoint_bytes_per_accelerator')} per accelerator to "
            f"host memory, then {f('checkpoint_write_seconds')} of background writing"
            + (", longer than the interval: each save waits for the one before (write faster or save less often)"
               if waits else ""),
            ("checkpoint_pause_seconds_each", "checkpoint_snapshot_seconds", "checkpoint_write_seconds",
             "checkpoint_pause_share")))
        if "checkpoint_host_memory_share" in q:
            fits = q["checkpoint_host_memory_share"].value <= 1
            found.append(Finding(
                "storage", "info" if fits else "warn",
                f"asynchronous saves stage {f('checkpoint_host_memory_bytes_per_node')} per node in host memory "
                f"({format_quantity(q['checkpoint_host_memory_share'].value, 'fraction')} of its "
                f"{f('host_memory_bytes')})"
                + ("" if fits else ": it does not fit; use synchronous saves or more host memory"),
                ("checkpoint_host_memory_bytes_per_node", "host_memory_bytes", "checkpoint_host_memory_share")))
        else:
            found.append(Finding(
                "storage", "info", f"asynchronous saves stage {f('checkpoint_host_memory_bytes_per_node')} per node "
                                   "in host memory; state supply.host_memory to check it fits",
                ("checkpoint_host_memory_bytes_per_node",)))
    else:
        found.append(Finding(
            "storage", level, f"each checkpoint blocks training for {f('checkpoint_pause_seconds_each')} while it is "
                              f"written ({share})",
            ("checkpoint_pause_seconds_each", "checkpoint_pause_share", "checkpoint_interval_seconds")))
    return found


def _failures(q: dict[str, Quantity], f, system: str) -> list[Finding]:
    """What failures, restarts and checkpoint pauses do to the run: goodput, expected wall time and cost, and the
    checkpoint interval that minimizes them (absent with the checkpoint pause: _checkpoints names the field)."""
    if "goodput" not in q:
        return []
    found: list[Finding] = []
    rate = q["job_interruptions_per_hour"].value
    low = q["goodput"].value < q["goodput_threshold"].value
    cost = f", {f('expected_training_cost_usd')}" if "expected_training_cost_usd" in q else ""
    if rate > 0:
        every = format_quantity(3600 / rate, "s", system)
        failures = (f"{f('expected_interruptions')} expected (one every {every} at {f('accelerators')} × "
                    f"{f('failure_rate_per_accelerator_hour')}), each costing {f('lost_seconds_per_interruption')} "
                    f"(restart {f('restart_seconds')} and work redone)")
    else:
        failures = "none assumed (assumptions.failure_rate is 0)"
    found.append(Finding(
        "compute", "warn" if low else "info",
        f"failures: {failures}; goodput {f('goodput')}: expected wall time {f('expected_wall_seconds')} "
        f"({f('expected_accelerator_hours')}{cost})"
        + (f", below the {f('goodput_threshold')} threshold" if low else ""),
        ("expected_interruptions", "job_interruptions_per_hour", "lost_seconds_per_interruption", "goodput",
         "expected_wall_seconds", "expected_accelerator_hours")))
    if rate > 0:
        saving = q["optimal_interval_saving_seconds"].value   # never negative: the stated interval kept if better
        whole = q["daly_checkpoint_interval_seconds"].value >= q["run_seconds"].value
        young = f"Young's √(2δM) {f('young_checkpoint_interval_seconds')}"
        if saving > 0:
            worth = f": {f('optimal_interval_saving_seconds')} less wall time" + (
                f" ({f('optimal_interval_saving_usd')})" if "optimal_interval_saving_usd" in q else "")
            best = ("one save at the end minimizes the expected wall time (failures are rare against the run)"
                    if whole else f"{f('optimal_checkpoint_interval_seconds')} minimizes the expected wall time "
                                  f"(Daly 2006; {young})")
            text = f"checkpoint interval: {f('checkpoint_interval_seconds')} stated; {best}{worth}"
        else:
            daly = "one save at the end" if whole else f"{f('daly_checkpoint_interval_seconds')} ({young})"
            text = (f"checkpoint interval: {f('checkpoint_interval_seconds')} stated, kept: Daly 2006's optimum, "
                    f"{daly}, saves no wall time over it")
        found.append(Finding(
            "compute", "info", text,
            ("checkpoint_interval_seconds", "optimal_checkpoint_interval_seconds", "daly_checkpoint_interval_seconds",
             "young_checkpoint_interval_seconds", "optimal_interval_saving_seconds")))
    return found


def _saver_parts(q: dict[str, Quantity], f) -> str:
    """The memory savers' terms of the plan that are not zero: `` (with FSDP gather buffers 1.21 GB, ...)``."""
    def nonzero(name: str) -> bool:
        return name in q and q[name].value > 0

    parts = []
    if nonzero("fsdp_gather_buffer_bytes"):
        parts.append(f"FSDP gather buffers {f('fsdp_gather_buffer_bytes')}")
    if nonzero("allocator_reserve_bytes"):
        parts.append(f"allocator reserve {f('allocator_reserve_bytes')}")
    if nonzero("offloaded_state_bytes"):
        parts.append(f"{f('offloaded_state_bytes')} of state offloaded")
    if nonzero("offloaded_activation_bytes"):
        parts.append(f"{f('offloaded_activation_bytes')} of activations offloaded")
    if nonzero("paged_optimizer_spill_bytes"):
        parts.append(f"{f('paged_optimizer_spill_bytes')} of optimizer state paged out")
    return f" (with {', '.join(parts)})" if parts else ""


def _savers(q: dict[str, Quantity], f, components: bool, system: str) -> list[Finding]:
    """Offloading's host memory and host-link time, and what a paged optimizer pages out."""
    found: list[Finding] = []
    if q["host_bytes_per_accelerator"].value > 0 and "host_memory_spare_bytes" in q:
        holds = (f"offloading holds {f('host_bytes_per_accelerator')} per accelerator in host memory, "
                 f"{f('host_bytes_per_node')} per node")
        names = ("host_bytes_per_accelerator", "host_bytes_per_node", "host_memory_bytes", "host_memory_spare_bytes")
        if q["host_memory_spare_bytes"].value >= 0:
            found.append(Finding("memory", "ok", f"host memory fits: {holds} of its {f('host_memory_bytes')}, "
                                                 f"{f('host_memory_spare_bytes')} spare", names))
        else:
            short = f"{format_quantity(-q['host_memory_spare_bytes'].value, 'B', system)} short"
            found.append(Finding("memory", "fail", f"host memory does not fit: {holds}, more than its "
                                                   f"{f('host_memory_bytes')} ({short}): more host memory, more "
                                                   "nodes, or offload less", names))
    moving = q["host_link_bytes_per_step"].value > 0 or q["cpu_optimizer_step_seconds"].value > 0
    if moving and "host_link_seconds" in q:
        cpu = (f"; the CPU optimizer step takes {f('cpu_optimizer_step_seconds')}"
               if q["cpu_optimizer_step_seconds"].value else "")
        text = (f"offloading copies {f('host_link_bytes_per_step')} over each host link per step "
                f"({f('host_link_seconds')} at {f('host_link_bytes_per_s')} per direction){cpu}")
        names = ("host_link_bytes_per_step", "host_link_seconds", "cpu_optimizer_step_seconds")
        if components and "exposed_offload_seconds" in q:
            share = q["exposed_offload_seconds"].value / q["step_seconds"].value
            level = "warn" if share > q["collective_overlap_share_threshold"].value else "info"
            found.append(Finding("compute", level, f"{text}: {f('exposed_offload_seconds')} of it is not hidden by "
                                                   f"compute ({format_number(100 * share)} % of the step)",
                                 names + ("exposed_offload_seconds", "step_seconds")))
        else:
            found.append(Finding("compute", "info", f"{text}; the efficiency step model does not add it to the step "
                                                    "(step_time_model: components does)", names))
    if q["optimizer_offload_paged"].value:
        if q["paged_optimizer_spill_bytes"].value > 0:
            found.append(Finding(
                "memory", "info",
                f"paged optimizer: {f('paged_optimizer_spill_bytes')} of the {f('optimizer_memory_bytes')} optimizer "
                f"state pages out to host memory at the peak and back for the update"
                + (f" ({f('paged_optimizer_seconds')} per step)" if "paged_optimizer_seconds" in q else ""),
                ("paged_optimizer_spill_bytes", "optimizer_memory_bytes", "paged_optimizer_seconds")))
        else:
            found.append(Finding("memory", "info", "paged optimizer: nothing pages out, the optimizer state fits on "
                                                   "the device", ("paged_optimizer_spill_bytes",)))
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
            if group == "shard" and is_scalar(inputs.layout.hybrid_shard) and inputs.layout.hybrid_shard:
                # already hybrid: the group is as large as the state needs (strategy.sharding_group), nothing to
                # move; say what it costs, the share the schedule leaves exposed included
                found.append(Finding(
                    "network", "info",
                    f"{place.carried} cross the inter-node tier ({f(seconds)} per step; hybrid shard groups of "
                    f"{format_number(place.span)} accelerators, a node has {format_number(per_node)}): "
                    f"{f('exposed_data_parallel_seconds')} of the data-parallel communication is exposed",
                    (seconds, "accelerators_per_node", "exposed_data_parallel_seconds")))
                continue
            found.append(Finding(
                "network", "warn",
                f"{place.carried} cross the inter-node tier ({f(seconds)} per step; the group spans "
                f"{format_number(place.span)} accelerators, a node has {format_number(per_node)}): {advice}",
                (seconds, "accelerators_per_node")))
    return found
