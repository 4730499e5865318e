"""What a serving estimate means: what binds the running batch, where the step turns compute-bound, whether the
latency targets are reachable at their percentile and at the fleet's load, how many replicas and why, and what a
token costs (never the price of a fleet that misses its targets)."""

from __future__ import annotations

import math

from botec.findings import Finding
from botec.graph import Quantity
from botec.units import format_number

_SATURATION_LIMITS = {"max_concurrent_requests": "the KV cache binds", "max_batch_size": "the engine's max_batch_size "
                                                                                       "binds"}


def _percentile(q: dict[str, Quantity]) -> str:
    return f"P{round(q['latency_percentile'].value * 100)}"


def _users(q: dict[str, Quantity], f) -> str:
    """What a closed loop's concurrency means: users across the whole fleet, spread evenly over the replicas."""
    think = q["think_time_seconds"].value
    return (f"{f('concurrency')} in flight (a closed loop; concurrency counts users across the whole fleet, "
            f"{f('concurrency_per_replica')} per replica" + (f", think time {f('think_time_seconds')})" if think
                                                              else ", no think time)"))


def _engine_assumed(q: dict[str, Quantity], n) -> list[Finding]:
    """The engine behaviour botec assumed where the contract is silent: its default limits counted per data-parallel
    attention rank, a token budget that bounds the prefill chunk only, no overlap of the all-to-all with compute."""
    said = []
    ranked = q["data_parallel_attention"].value > 0   # one rank (no data-parallel attention): nothing to multiply
    for name in ("max_batch_size", "max_batched_tokens"):
        source = q[name].source or ""
        if ranked and q[name].provenance == "catalog" and "counted per data-parallel attention rank" in source:
            ranks = q["tensor_parallel"].value / q["attention_tensor_parallel"].value
            said.append(f"{name} {n(name)} is the engine's default of {format_number(q[name].value / ranks)} per "
                        f"data-parallel attention rank × {format_number(ranks)} ranks")
    if q["decode_tokens_in_budget"].value == 0:
        said.append("the token budget bounds the prefill chunk only, not the decode batch")
    exchanging = q["data_parallel_attention"].value > 0 and q["experts"].value > 0
    if exchanging and q["two_batch_overlap"].value == 0:
        said.append("the MoE all-to-all adds to the step (no two-batch overlap stated: strategy.two_batch_overlap)")
    found = []
    if said:
        found.append(Finding("serving", "info", "engine behaviour assumed (not stated in the contract): "
                             + "; ".join(said), ("max_batch_size", "max_batched_tokens", "decode_tokens_in_budget")))
    if exchanging and q["two_batch_overlap"].value > 0:
        found.append(Finding("serving", "info", "engine behaviour stated: two-batch overlap: each step runs as two "
                             "micro-batches, one's MoE all-to-all (" + q["moe_exchange_seconds_per_token"].formatted()
                             + " per token) in flight under the other's compute; each micro-batch reads the weights "
                             "itself; the SM time DeepEP's kernels take to send and receive is not modelled (counted "
                             "as hidden)", ("two_batch_overlap", "moe_exchange_seconds_per_token")))
    return found


def serving_findings(q: dict[str, Quantity], system: str = "decimal") -> list[Finding]:
    def f(name: str) -> str:
        return q[name].formatted(system)

    def n(name: str) -> str:
        return format_number(q[name].value)

    found: list[Finding] = []
    concurrent, saturated = q["max_concurrent_requests"].value, q["saturation_batch_size"].value
    memory_text = (f"weights take {f('weight_memory_bytes')} of {f('usable_memory_bytes')} usable per accelerator "
                   f"({f('weight_spare_bytes')} spare); at {n('reserved_kv_tokens_per_request')} cached tokens held "
                   f"per running request {n('max_concurrent_requests')} requests fit")
    binding = next((text for name, text in _SATURATION_LIMITS.items() if q[name].value == saturated),
                   "the step's token budget binds")
    found.append(Finding("serving", "ok" if concurrent >= 1 else "fail",
                         f"{memory_text}; saturated, {n('saturation_batch_size')} run: {binding}",
                         ("weight_memory_bytes", "max_concurrent_requests", "saturation_batch_size")))
    found.append(Finding("serving", "info",
                         f"offline (saturated): {f('offline_output_tokens_per_s_per_accelerator')} output tokens per "
                         f"accelerator, {f('offline_requests_per_s_per_replica')} per replica",
                         ("offline_output_tokens_per_s_per_accelerator", "offline_requests_per_s_per_replica")))
    if q["prefill_instances"].value > 0:
        prefill, decode = q["prefill_pool_requests_per_s"].value, q["decode_requests_per_s_per_replica"].value
        found.append(Finding("serving", "info",
                             f"disaggregated: {n('prefill_instances')} prefill instance(s) per decode instance; at "
                             f"saturation the prompts {f('prefill_pool_requests_per_s')}, the decoding "
                             f"{f('decode_requests_per_s_per_replica')}: the {'prefill' if prefill < decode else 'decode'}"
                             f" side binds; each prompt's KV crosses in {f('kv_transfer_seconds')}",
                             ("prefill_pool_requests_per_s", "decode_requests_per_s_per_replica",
                              "kv_transfer_seconds")))
    found += _instance_findings(q, f, n)
    found += _engine_assumed(q, n)
    critical = q["critical_batch_size"].value
    regime = "memory-bound" if q["decode_batch_size"].value < critical else "compute-bound"
    found.append(Finding("serving", "info",
                         f"a step is memory-bound below {format_number(critical)} tokens (the weight read); at the "
                         f"fleet's load {n('decode_batch_size')} requests decode together: {regime} "
                         f"({f('time_per_output_token_seconds')} per token on average)",
                         ("critical_batch_size", "decode_batch_size", "time_per_output_token_seconds")))
    percentile = _percentile(q)
    reachable = q["targets_reachable"].value >= 1
    for short, target, floor, at, advice in (
            ("TTFT", "time_to_first_token_target_seconds", "time_to_first_token_floor_seconds",
             "time_to_first_token_percentile_seconds", "raise tensor_parallel or the target"),
            ("TPOT", "time_per_output_token_target_seconds", "time_per_output_token_floor_seconds",
             "time_per_output_token_percentile_seconds",
             "raise tensor_parallel, quantize, or use a faster device")):
        if target not in q:
            found.append(Finding("serving", "info", f"{short} {f(at)} ({percentile}) at the fleet's load; no target "
                                                    f"stated", (at,)))
        elif q[floor].value > q[target].value:
            found.append(Finding("serving", "fail",
                                 f"the {short} target {f(target)} is below the physical floor of {f(floor)} (one "
                                 f"request on an idle replica): no load meets it; {advice}", (floor, target)))
        else:
            found.append(_verdict(q, f, short, target, floor, at, percentile))
    pinned = q["replicas"].field == "supply.replicas"
    if pinned:   # the fleet is stated, not sized: say whether it carries the load and meets the targets
        found.append(_pinned_fleet(q, f, reachable))
    elif reachable:
        limits = {"ttft_limited_requests_per_s": "the TTFT target", "tpot_limited_requests_per_s": "the TPOT target"}
        per_replica = q["requests_per_s_per_replica"].value
        cap = q["utilization_cap"].value * q["offline_requests_per_s_per_replica"].value
        why = "the utilization cap" if per_replica >= cap * (1 - 1e-9) else next(
            (text for name, text in limits.items() if q[name].value <= per_replica * (1 + 1e-9)), "the targets")
        if "concurrency" in q:
            text = (f"{f('replicas')} × {f('replica_accelerators')} = {f('serving_accelerators')} for "
                    f"{_users(q, f)}: they complete {f('requests_per_s')}; each replica holds at most "
                    f"{f('users_per_replica_within_targets')} within the targets, at most "
                    f"{f('requests_per_s_per_replica')} ({why} binds), {f('serving_utilization')} of the fleet's "
                    "saturated capacity in use")
        else:
            text = (f"{f('replicas')} × {f('replica_accelerators')} = {f('serving_accelerators')} for "
                    f"{f('requests_per_s')}: each replica carries at most {f('requests_per_s_per_replica')} ({why} "
                    f"binds), {f('serving_utilization')} of the fleet's saturated capacity in use")
        found.append(Finding("capacity", "info", text, ("replicas", "serving_accelerators", "serving_utilization")))
    else:
        load = f"hold {_users(q, f)} ({f('requests_per_s')})" if "concurrency" in q else f"carry {f('requests_per_s')}"
        found.append(Finding("capacity", "fail", f"no fleet meets the targets: {f('replicas')} replicas would {load} "
                                                 "for throughput alone, missing them; not priced",
                             ("replicas", "targets_reachable")))
    if q.get("closed_loop_wait_seconds") is not None and q["closed_loop_wait_seconds"].value > 0:
        found.append(Finding("capacity", "warn",
                             f"{f('concurrency_per_replica')} users per replica are more than it runs at saturation: "
                             f"each request waits {f('closed_loop_wait_seconds')} for a slot (in the TTFT)",
                             ("closed_loop_wait_seconds", "concurrency_per_replica")))
    if not reachable:
        found.append(Finding("cost", "info", "no price: the latency targets cannot be met on this replica",
                             ("targets_reachable",)))
    elif "serving_cost_per_day_usd" in q:
        found.append(Finding("cost", "info",
                             f"{f('serving_cost_per_day_usd')} per day: {f('cost_per_million_output_tokens_usd')} per "
                             f"million output tokens, {f('cost_per_million_input_tokens_usd')} per million input "
                             f"tokens, {f('cost_per_request_usd')} per request",
                             ("serving_cost_per_day_usd", "cost_per_million_output_tokens_usd",
                              "cost_per_million_input_tokens_usd", "cost_per_request_usd")))
    else:
        found.append(Finding("cost", "info", "no cost figures: state supply.price_per_accelerator_hour",
                             ("serving_accelerators",)))
    if reachable and "api_cost_per_day_usd" in q and "serving_cost_per_day_usd" in q:
        api, own = q["api_cost_per_day_usd"].value, q["serving_cost_per_day_usd"].value
        cheaper = "self-hosting is cheaper" if own < api else "the API is cheaper"
        found.append(Finding("cost", "info",
                             f"the API would cost {f('api_cost_per_day_usd')} per day against "
                             f"{f('serving_cost_per_day_usd')}: {cheaper}; one always-on replica breaks even at "
                             f"{f('break_even_requests_per_s')}",
                             ("api_cost_per_day_usd", "serving_cost_per_day_usd", "break_even_requests_per_s")))
    if "energy_per_token_joules" in q:
        found.append(Finding("cost", "info", f"energy: {format_number(q['energy_per_token_joules'].value)} J per "
                                             "token at the fleet's average draw, PUE included",
                             ("energy_per_token_joules",)))
    return found


def _instance_findings(q: dict[str, Quantity], f, n) -> list[Finding]:
    """Expert placement (uneven: the busiest rank binds) and a prefill instance of its own layout (its memory fit)."""
    found = []
    for prefix, what in (("", "each rank"), ("prefill_instance_", "a prefill instance's rank")):
        imbalance = q.get(f"{prefix}expert_placement_imbalance")
        if imbalance is not None and imbalance.value > 1 + 1e-9:
            total = q["experts"].value + q[f"{prefix}redundant_experts"].value
            found.append(Finding("serving", "warn",
                                 f"uneven expert placement: {format_number(total)} routed experts over EP "
                                 f"{n(prefix + 'expert_parallel')} leave the busiest rank "
                                 f"{n(prefix + 'routed_experts_per_device')} per layer, {imbalance.value:.3g}× the mean "
                                 f"({what}); it bounds the memory per device and the step's expert read (state "
                                 "redundant_experts so that EP divides experts + redundant, as DeepSeek's EPLB does)",
                                 (f"{prefix}routed_experts_per_device", f"{prefix}expert_placement_imbalance")))
    if q.get("prefill_instance_layout") is not None and q["prefill_instance_layout"].value > 0:
        spare = q["prefill_instance_kv_spare_bytes"].value
        fits = q["prefill_instance_weight_memory_bytes"].value <= q["usable_memory_bytes"].value and spare >= 0
        found.append(Finding("serving", "ok" if fits else "fail",
                             f"prefill instance ({n('prefill_instance_accelerators')} accelerators, TP "
                             f"{n('prefill_instance_tensor_parallel')}, EP {n('prefill_instance_expert_parallel')}): "
                             f"weights take {f('prefill_instance_weight_memory_bytes')} of "
                             f"{f('usable_memory_bytes')} usable per accelerator; a full step of "
                             f"{n('prefill_instance_max_batched_tokens')} prompt tokens leaves "
                             f"{f('prefill_instance_kv_spare_bytes')} of its KV budget"
                             + ("" if fits else ": it does not fit; raise its tensor_parallel or lower its "
                                                "max_batched_tokens"),
                             ("prefill_instance_weight_memory_bytes", "prefill_instance_kv_spare_bytes")))
    return found


def _pinned_fleet(q, f, reachable: bool) -> Finding:
    """The capacity line of a fleet pinned by ``supply.replicas``: over its saturated capacity (an open load the
    replicas cannot carry: the queue grows without bound), missing a target, or meeting them; and the fewest
    replicas that would meet them (what botec sizes when the count is not pinned)."""
    load = _users(q, f) if "concurrency" in q else f("requests_per_s")
    head = (f"{f('replicas')} pinned (supply.replicas) × {f('replica_accelerators')} = {f('serving_accelerators')} "
            f"for {load}")
    if "concurrency" not in q and q["serving_utilization"].value >= 1:
        return Finding("capacity", "fail", f"{head}: over the fleet's saturated capacity ({f('serving_utilization')} "
                                           "in use), its queue grows without bound: no latency holds",
                       ("replicas", "serving_utilization"))
    missed = [short for short, at, target in (
        ("TTFT", "time_to_first_token_percentile_seconds", "time_to_first_token_target_seconds"),
        ("TPOT", "time_per_output_token_percentile_seconds", "time_per_output_token_target_seconds"))
        if target in q and q[at].value > q[target].value * (1 + 1e-9)]
    numerator, denominator = (("concurrency", "users_per_replica_within_targets") if "concurrency" in q
                              else ("requests_per_s", "requests_per_s_per_replica"))
    sized = max(math.ceil(q[numerator].value / max(q[denominator].value, 1e-300) - 1e-9), 1)
    advice = (f"; unpinned, botec would deploy {sized:,} (the targets within the utilization cap)" if reachable
              else "; no fleet meets them (a target is below its floor)")
    verdict = (f"misses the {' and '.join(missed)} target{'s' if len(missed) > 1 else ''}" if missed
               else "meets every stated target")
    return Finding("capacity", "warn" if missed else "ok",
                   f"{head}: {verdict} ({f('serving_utilization')} of its saturated capacity in use){advice}",
                   ("replicas", "serving_accelerators", "serving_utilization"))


def _verdict(q, f, short: str, target: str, floor: str, at: str, percentile: str) -> Finding:
    """Met (within the margin kept), marginal (met, but inside the margin the analytic model cannot resolve:
    botec simulate settles it) or missed."""
    value, goal = q[at].value, q[target].value
    margin = q["latency_margin"].value if "latency_margin" in q else 0.0
    text = f"{short} {f(at)} ({percentile}) at the fleet's load, target {f(target)}; floor {f(floor)}"
    if value <= goal * (1 - margin) * (1 + 1e-9):
        return Finding("serving", "ok", text, (at, target, floor))
    if value <= goal * (1 + 1e-9):
        return Finding("serving", "warn", f"marginal: {text}, inside the {margin:.0%} margin "
                                          "(workload.latency.margin) the analytic model cannot resolve: settle it "
                                          "with botec simulate", (at, target, floor, "latency_margin"))
    return Finding("serving", "warn", text, (at, target, floor))

