"""Findings: what the numbers mean, in plain words, each tied to its account.

A finding has a level: ``ok`` (a check passed), ``warn`` (holds only under a condition the
text names), ``fail`` (the plan does not hold) or ``info`` (a headline figure). The
thresholds that decide the level are themselves named assumptions of the contract. When the
plan does not fit or a collective crosses the slow tier, the finding names the change that
relieves it, found by evaluating the same contract with that change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from botec.quantities import Quantity, declare_input
from botec.units import format_number, format_quantity

__all__ = ["Finding", "findings_for", "memory_relief"]

declare_input("collective_overlap_share_threshold", account="findings", unit="fraction",
              meaning="collective floor share of the step above which communication must overlap with compute")
declare_input("checkpoint_pause_share_threshold", account="findings", unit="fraction",
              meaning="share of wall time lost to checkpoint writes above which it is a problem")

Reevaluate = Callable[[dict], dict]

_GROUPS = (  # (name in text, seconds, span, what to do when it crosses nodes)
    ("tensor-parallel all-reduces", "tp_communication_seconds", "tensor_parallel", "keep TP within a node"),
    ("context-parallel exchanges", "cp_communication_seconds", "context_parallel_span",
     "keep TP × CP within a node"),
    ("expert all-to-alls", "ep_communication_seconds", "expert_parallel_span", "keep TP × CP × EP within a node"),
    ("ZeRO/FSDP shard collectives", "parameter_gather_seconds", "sharding_span",
     "shard within a node and replicate across nodes (fsdp: hybrid_shard)"),
)


@dataclass(frozen=True)
class Finding:
    account: str
    level: str  # ok | warn | fail | info
    message: str
    quantities: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"account": self.account, "level": self.level, "message": self.message,
                "quantities": list(self.quantities)}


_ZERO_COST = {0: 0, 1: 0, 2: 0, 3: 2}        # ZeRO-1/2 move no more bytes than the all-reduce; ZeRO-3 1.5×
_RECOMPUTE_COST = {0: 0, 1: 1, 2: 3}         # selective: the attention core again; full: the whole forward
_RECOMPUTE_NAME = {1: "selective recomputation", 2: "full recomputation (about a third more compute)"}


def memory_relief(q: dict[str, Quantity], reevaluate: Reevaluate | None, system: str) -> str:
    """The cheapest ZeRO stage and recomputation that make the plan fit, found by evaluating the same
    contract with them (ZeRO-1/2 are free, selective recomputation cheap, ZeRO-3 and full recomputation dear)."""
    if reevaluate is None:
        return ""
    zero, recompute = int(q["zero_stage"].value), int(q["recompute"].value)
    options = []
    for new_zero in range(zero, 4):
        for new_recompute in range(recompute, 3):
            if (new_zero, new_recompute) == (zero, recompute):
                continue
            changed = reevaluate({"zero_stage": float(new_zero), "recompute": float(new_recompute)})
            if "memory_spare_bytes" in changed and changed["memory_spare_bytes"].value >= 0:
                cost = _ZERO_COST[new_zero] + _RECOMPUTE_COST[new_recompute]
                options.append((cost, new_zero, new_recompute, changed["planned_device_bytes"].value))
    if not options:
        return ("; no ZeRO stage or recomputation makes it fit: add tensor or pipeline parallelism, "
                "more accelerators or a larger device")
    _, new_zero, new_recompute, planned = min(options)
    changes = []
    if new_zero != zero:
        changes.append(f"ZeRO-{new_zero} over {format_number(q['sharding_degree'].value)} ranks")
    if new_recompute != recompute:
        changes.append(_RECOMPUTE_NAME[new_recompute])
    freed = format_quantity(q["planned_device_bytes"].value - planned, "B", system)
    return f"; {' with '.join(changes)} frees {freed} and fits ({format_quantity(planned, 'B', system)} planned)"


def findings_for(q: dict[str, Quantity], system: str = "decimal", reevaluate: Reevaluate | None = None
                 ) -> list[Finding]:
    """The findings a set of resolved quantities supports (skips accounts whose inputs are missing)."""

    def f(name: str) -> str:
        return q[name].formatted(system)

    def n(name: str) -> str:
        return format_number(q[name].value)

    def share(part: str, whole: str) -> str:
        return format_quantity(q[part].value / q[whole].value, "fraction") if q[whole].value else "0 %"

    if "time_per_output_token_seconds" in q:
        return serving_findings(q, system)
    found: list[Finding] = []
    components = "pipeline_bubble_seconds" in q and "exposed_communication_seconds" in q and \
        q["step_seconds"].inputs == ("compute_seconds_per_step", "pipeline_bubble_seconds",
                                     "exposed_communication_seconds")

    found.append(Finding(
        "compute", "info",
        f"run: {f('run_seconds')} on {f('accelerators')} ({f('accelerator_hours')}), "
        f"{f('steps')} of {f('step_seconds')}",
        ("run_seconds", "accelerators", "accelerator_hours", "steps", "step_seconds")))
    if components:
        bubble = (f" + pipeline bubble {f('pipeline_bubble_seconds')} "
                  f"({share('pipeline_bubble_seconds', 'step_seconds')})" if q["pipeline_bubble_seconds"].value else "")
        found.append(Finding(
            "compute", "info",
            f"step {f('step_seconds')} = compute {f('compute_seconds_per_step')}{bubble} + exposed "
            f"communication {f('exposed_communication_seconds')} "
            f"({share('exposed_communication_seconds', 'step_seconds')}); achieved MFU {n('end_to_end_mfu')}",
            ("step_seconds", "compute_seconds_per_step", "pipeline_bubble_seconds", "exposed_communication_seconds",
             "end_to_end_mfu")))
    if "pipeline_bubble_seconds" in q and q["pipeline_parallel"].value > 1:
        bubble = q["pipeline_bubble_seconds"].value / q["compute_seconds_per_step"].value
        if bubble > 0.10:
            found.append(Finding(
                "compute", "warn",
                f"the pipeline bubble is {format_quantity(bubble, 'fraction')} of the compute time "
                f"((p − 1)/(v·m) with p = {n('pipeline_parallel')}, m = {n('gradient_accumulation_steps')} "
                "micro-batches): more micro-batches per step or an interleaved schedule shrinks it",
                ("pipeline_bubble_seconds", "pipeline_parallel", "gradient_accumulation_steps")))

    if "memory_spare_bytes" in q:
        spare = q["memory_spare_bytes"].value
        planned, capacity = f("planned_device_bytes"), f("device_memory_bytes")
        largest = f"the largest micro-batch that fits is {f('max_micro_batch_size')}"
        parts = (f"state {f('state_bytes')} (weights {f('weight_memory_bytes')}, gradients "
                 f"{f('gradient_memory_bytes')}, optimizer {f('optimizer_memory_bytes')}), activations "
                 f"{f('activation_bytes')}, buffers {f('runtime_buffer_bytes')}")
        if spare >= 0:
            found.append(Finding("memory", "ok", f"fits: {planned} of {capacity} planned, {f('memory_spare_bytes')} "
                                                 f"spare; {largest}",
                                 ("planned_device_bytes", "device_memory_bytes", "memory_spare_bytes",
                                  "max_micro_batch_size")))
        else:
            short = format_quantity(-spare, "B", system)
            found.append(Finding(
                "memory", "fail",
                f"does not fit: {planned} planned against {capacity} ({short} short): {parts}; {largest}"
                f"{memory_relief(q, reevaluate, system)}",
                ("planned_device_bytes", "device_memory_bytes", "state_bytes", "activation_bytes",
                 "max_micro_batch_size")))

    if "collective_floor_share" in q:
        floor_share = q["collective_floor_share"].value
        threshold = q["collective_overlap_share_threshold"].value
        names = ("collective_floor_seconds", "step_seconds", "collective_floor_share")
        floor, step, percent = f("collective_floor_seconds"), f("step_seconds"), f("collective_floor_share")
        only_data_parallel = q["collective_bytes_sent_per_step"].value == q["ring_bytes_sent_per_step"].value
        kind = "all-reduce's" if only_data_parallel else "collectives'"
        if q["collective_bytes_sent_per_step"].value == 0:
            found.append(Finding("network", "ok", "no collectives: a single accelerator", names))
        elif components:
            exposed = q["exposed_communication_seconds"].value / q["step_seconds"].value
            level = "warn" if exposed > threshold else "ok"
            found.append(Finding(
                "network", level,
                f"communication takes {f('communication_seconds')} per step, {f('exposed_communication_seconds')} "
                f"of it exposed ({format_quantity(exposed, 'fraction')} of the step); bandwidth floor {floor}",
                ("communication_seconds", "exposed_communication_seconds", "collective_floor_seconds")))
        elif floor_share >= 1:
            found.append(Finding(
                "network", "fail",
                f"the {kind} bandwidth floor ({floor}) is longer than the step ({step}): the network, not "
                "compute, sets the pace; the step estimate cannot hold", names))
        elif floor_share > threshold:
            found.append(Finding(
                "network", "warn",
                f"the {kind} bandwidth floor is {percent} of the step ({floor} of {step}): it must overlap "
                "with the backward pass", names))
        else:
            found.append(Finding("network", "ok",
                                 f"the {kind} bandwidth floor is {percent} of the step ({floor} of {step})", names))
        if "accelerators_per_node" in q:
            per_node = q["accelerators_per_node"].value
            for label, seconds, span, advice in _GROUPS:
                if seconds in q and span in q and q[seconds].value > 0 and q[span].value > per_node:
                    found.append(Finding(
                        "network", "warn",
                        f"{label} cross the inter-node tier ({f(seconds)} per step; the group spans "
                        f"{n(span)} accelerators, a node has {format_number(per_node)}): {advice}",
                        (seconds, span, "accelerators_per_node")))
    elif "collective_bytes_sent_per_step" in q:
        found.append(Finding("network", "info",
                             f"{f('collective_bytes_sent_per_step')} sent per accelerator per step; state "
                             "supply.network.bandwidth to compare it with the step",
                             ("collective_bytes_sent_per_step",)))

    if "checkpoint_write_seconds" in q:
        pause = q["checkpoint_pause_share"].value
        level = "warn" if pause > q["checkpoint_pause_share_threshold"].value else "info"
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


def serving_findings(q: dict[str, Quantity], system: str = "decimal") -> list[Finding]:
    """What a serving estimate means: what binds the batch, where decode turns compute-bound, whether the
    latency targets are physically reachable, how many replicas and why, what a token costs."""

    def f(name: str) -> str:
        return q[name].formatted(system)

    def n(name: str) -> str:
        return format_number(q[name].value)

    found: list[Finding] = []
    concurrent, batch = q["max_concurrent_requests"].value, q["decode_batch_size"].value
    spare = q["usable_memory_bytes"].value - q["weight_memory_bytes"].value
    memory_text = (f"weights take {f('weight_memory_bytes')} of {f('usable_memory_bytes')} usable per accelerator "
                   f"({format_quantity(spare, 'B', system)} spare); at {n('kv_tokens_per_request')}-token contexts "
                   f"({f('kv_bytes_per_request')} of KV cache each) {n('max_concurrent_requests')} requests fit")
    limits = {"max_concurrent_requests": "the KV cache binds", "tpot_batch_limit": "the TPOT target binds",
              "max_batch_size": "the engine's max_batch_size binds"}
    binding = next((limits[name] for name in limits if q[name].value == batch), "")
    found.append(Finding("serving", "ok" if concurrent >= 1 else "fail",
                         f"{memory_text}; batch {n('decode_batch_size')}: {binding}" if binding else memory_text,
                         ("weight_memory_bytes", "kv_bytes_per_request", "max_concurrent_requests",
                          "decode_batch_size")))
    critical = q["critical_batch_size"].value
    if critical > 0:
        regime = "memory-bound" if batch < critical else "compute-bound"
        found.append(Finding("serving", "info",
                             f"decode is memory-bound below batch {format_number(critical)}; at batch "
                             f"{n('decode_batch_size')} it is {regime} ({f('time_per_output_token_seconds')} per token)",
                             ("critical_batch_size", "decode_batch_size", "time_per_output_token_seconds")))
    else:
        found.append(Finding("serving", "info",
                             "decode is memory-bound at every batch: reading a sequence's KV cache costs more than "
                             "computing its token", ("critical_batch_size",)))
    ttft_target = q["time_to_first_token_target_seconds"]
    if ttft_target.provenance != "assumed" or ttft_target.field:
        if q["time_to_first_token_seconds"].value > ttft_target.value:
            found.append(Finding("serving", "fail",
                                 f"the TTFT target {f('time_to_first_token_target_seconds')} is below the physical "
                                 f"floor: one prefill of {n('prompt_tokens')} tokens takes "
                                 f"{f('time_to_first_token_seconds')} on this replica; raise tensor_parallel or the "
                                 "target", ("time_to_first_token_seconds", "time_to_first_token_target_seconds")))
        else:
            found.append(Finding("serving", "ok", f"TTFT {f('time_to_first_token_seconds')} unloaded, target "
                                                  f"{f('time_to_first_token_target_seconds')}",
                                 ("time_to_first_token_seconds", "time_to_first_token_target_seconds")))
    tpot_target = q["time_per_output_token_target_seconds"]
    if tpot_target.field:
        floor = q["time_per_output_token_floor_seconds"].value
        if floor > tpot_target.value:
            found.append(Finding("serving", "fail",
                                 f"the TPOT target {f('time_per_output_token_target_seconds')} is below the physical "
                                 f"floor of {f('time_per_output_token_floor_seconds')} (batch 1: reading the weights "
                                 "alone takes longer); raise tensor_parallel, quantize, or use a faster device",
                                 ("time_per_output_token_floor_seconds", "time_per_output_token_target_seconds")))
        else:
            found.append(Finding("serving", "ok", f"TPOT {f('time_per_output_token_seconds')} at batch "
                                                  f"{n('decode_batch_size')}, target {f('time_per_output_token_target_seconds')}",
                                 ("time_per_output_token_seconds", "time_per_output_token_target_seconds")))
    throughput, ttft_replicas = q["replicas_for_throughput"].value, q["replicas_for_time_to_first_token"].value
    text = (f"{f('replicas')} × {f('replica_accelerators')} = {f('serving_accelerators')} for "
            f"{f('requests_per_s')} ({f('serving_utilization')} utilized; one replica carries "
            f"{f('requests_per_s_per_replica')})")
    if ttft_replicas > throughput:
        text += (f"; the TTFT target needs {format_number(ttft_replicas)} replicas even though throughput needs "
                 f"{format_number(throughput)}")
    found.append(Finding("capacity", "info", text, ("replicas", "serving_accelerators", "serving_utilization")))
    if "serving_cost_per_day_usd" in q:
        found.append(Finding("cost", "info",
                             f"{f('serving_cost_per_day_usd')} per day: {f('cost_per_million_output_tokens_usd')} per "
                             f"million output tokens, {f('cost_per_million_input_tokens_usd')} per million input "
                             f"tokens, {f('cost_per_request_usd')} per request",
                             ("serving_cost_per_day_usd", "cost_per_million_output_tokens_usd",
                              "cost_per_million_input_tokens_usd", "cost_per_request_usd")))
    if "api_cost_per_day_usd" in q and "serving_cost_per_day_usd" in q:
        api, own = q["api_cost_per_day_usd"].value, q["serving_cost_per_day_usd"].value
        cheaper = "self-hosting is cheaper" if own < api else "the API is cheaper"
        found.append(Finding("cost", "info",
                             f"the API would cost {f('api_cost_per_day_usd')} per day against "
                             f"{f('serving_cost_per_day_usd')}: {cheaper}; one always-on replica breaks even at "
                             f"{f('break_even_requests_per_s')}",
                             ("api_cost_per_day_usd", "serving_cost_per_day_usd", "break_even_requests_per_s")))
    if "energy_per_token_joules" in q:
        found.append(Finding("cost", "info", f"energy: {format_number(q['energy_per_token_joules'].value)} J per "
                                             "token at rated power, PUE included", ("energy_per_token_joules",)))
    return found
