"""What a serving estimate means: what binds the batch, where decode turns compute-bound, whether the
latency targets are physically reachable, how many replicas and why, what a token costs."""

from __future__ import annotations

from botec.findings import Finding
from botec.graph import Quantity
from botec.units import format_number

_BATCH_LIMITS = {"max_concurrent_requests": "the KV cache binds", "tpot_batch_limit": "the TPOT target binds",
                 "max_batch_size": "the engine's max_batch_size binds"}


def serving_findings(q: dict[str, Quantity], system: str = "decimal") -> list[Finding]:
    def f(name: str) -> str:
        return q[name].formatted(system)

    def n(name: str) -> str:
        return format_number(q[name].value)

    found: list[Finding] = []
    concurrent, batch = q["max_concurrent_requests"].value, q["decode_batch_size"].value
    memory_text = (f"weights take {f('weight_memory_bytes')} of {f('usable_memory_bytes')} usable per accelerator "
                   f"({f('weight_spare_bytes')} spare); at {n('kv_tokens_per_request')}-token contexts "
                   f"({f('kv_bytes_per_request')} of KV cache each) {n('max_concurrent_requests')} requests fit")
    binding = next((text for name, text in _BATCH_LIMITS.items() if name in q and q[name].value == batch), "")
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
    if "time_to_first_token_target_seconds" in q:
        if q["time_to_first_token_seconds"].value > q["time_to_first_token_target_seconds"].value:
            found.append(Finding("serving", "fail",
                                 f"the TTFT target {f('time_to_first_token_target_seconds')} is below the physical "
                                 f"floor: one prefill of {n('prompt_tokens')} tokens takes "
                                 f"{f('time_to_first_token_seconds')} on this replica; raise tensor_parallel or the "
                                 "target", ("time_to_first_token_seconds", "time_to_first_token_target_seconds")))
        else:
            found.append(Finding("serving", "ok", f"TTFT {f('time_to_first_token_seconds')} unloaded, target "
                                                  f"{f('time_to_first_token_target_seconds')}",
                                 ("time_to_first_token_seconds", "time_to_first_token_target_seconds")))
    else:
        found.append(Finding("serving", "info", f"TTFT {f('time_to_first_token_seconds')} unloaded; no target stated "
                                                "(workload.latency.time_to_first_token)",
                             ("time_to_first_token_seconds",)))
    if "time_per_output_token_target_seconds" in q:
        if q["time_per_output_token_floor_seconds"].value > q["time_per_output_token_target_seconds"].value:
            found.append(Finding("serving", "fail",
                                 f"the TPOT target {f('time_per_output_token_target_seconds')} is below the physical "
                                 f"floor of {f('time_per_output_token_floor_seconds')} (batch 1: reading the weights "
                                 "alone takes longer); raise tensor_parallel, quantize, or use a faster device",
                                 ("time_per_output_token_floor_seconds", "time_per_output_token_target_seconds")))
        else:
            found.append(Finding("serving", "ok", f"TPOT {f('time_per_output_token_seconds')} at batch "
                                                  f"{n('decode_batch_size')}, target "
                                                  f"{f('time_per_output_token_target_seconds')}",
                                 ("time_per_output_token_seconds", "time_per_output_token_target_seconds")))
    else:
        found.append(Finding("serving", "info", f"TPOT {f('time_per_output_token_seconds')} at batch "
                                                f"{n('decode_batch_size')}; no target stated "
                                                "(workload.latency.time_per_output_token)",
                             ("time_per_output_token_seconds",)))
    text = (f"{f('replicas')} × {f('replica_accelerators')} = {f('serving_accelerators')} for "
            f"{f('requests_per_s')} ({f('serving_utilization')} utilized; one replica carries "
            f"{f('requests_per_s_per_replica')})")
    if "replicas_for_time_to_first_token" in q:
        throughput, ttft_replicas = q["replicas_for_throughput"].value, q["replicas_for_time_to_first_token"].value
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
    else:
        found.append(Finding("cost", "info", "no cost figures: state supply.price_per_accelerator_hour",
                             ("serving_accelerators",)))
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
