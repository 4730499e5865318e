"""How ``botec simulate`` shows a simulation: its latency percentiles beside the analytic estimate's, throughput,
goodput, the batch, and a verdict per latency target; as text (rich), Markdown or JSON."""

from __future__ import annotations

import contextlib
import json
import math

from botec.units import format_number, format_quantity

__all__ = ["simulation_text", "simulation_markdown", "simulation_json", "simulation_progress", "verdict_lines"]


def _s(value) -> str:
    return "—" if value is None or not math.isfinite(value) else format_quantity(value, "s")


def _rate(value, unit: str = "requests/s") -> str:
    return "—" if value is None or not math.isfinite(value) else format_quantity(value, unit)


def _header(sim) -> list[str]:
    replicas = (f"{sim.replicas} replicas behind a {sim.balancer} balancer" if sim.replicas > 1
                else "1 replica")
    instances = getattr(sim, "prefill_instances", 0)
    if instances:   # botec.simulate.disaggregated
        replicas += (f", disaggregated: {instances} prefill instance{'s' if instances > 1 else ''} (taking the "
                     "prompts in turn) + 1 decode instance each")
    engine = f"{sim.engine} ({'chunked prefill' if sim.chunked_prefill else 'whole-prompt prefill steps'})"
    lines = [f"{sim.workload}",
             f"{replicas}, {format_quantity(sim.accelerators, 'accelerators')}, engine {engine}, seed {sim.seed}",
             f"the first {sim.warmup_requests:,} requests (5 %) are a warm-up, not measured; "
             f"{sim.measured_requests:,} measured; {_accuracy(sim)}"]
    over_context = getattr(sim, "prompts_over_context", 0)
    if over_context:
        lines.append(f"{over_context:,} requests refused: the prompt is longer than the model's "
                     f"{sim.context_tokens:,}-token context (vLLM refuses it)")
    if sim.rejected_requests - over_context:
        lines.append(f"{sim.rejected_requests - over_context:,} requests refused: prompt and output exceed the "
                     "replica's whole KV cache")
    if getattr(sim, "outputs_cut_at_context", 0):
        lines.append(f"{sim.outputs_cut_at_context:,} outputs cut where prompt and output reach the "
                     f"{sim.context_tokens:,}-token context (the engine stops a request there)")
    if sim.unfinished_requests:
        lines.append(f"{sim.unfinished_requests:,} requests never finished")
    lines += [f"warning: {warning}" for warning in getattr(sim, "warnings", ())]
    return lines


def _accuracy(sim) -> str:
    """What the percentiles are: exact, or a quantile sketch's within its relative accuracy."""
    accuracy = getattr(sim, "percentile_relative_accuracy", 0.0)
    if not accuracy:
        return "means and percentiles exact"
    return (f"means exact, percentiles from a quantile sketch within {format_number(accuracy * 100)} % "
            "(DDSketch, Masson et al. 2019)")


def _latency_rows(sim) -> list[list[str]]:
    """Rows: metric, simulated mean, P50, P90, P99, analytic mean, analytic at the targets' percentile."""
    analytic = sim.analytic
    over = analytic.over_capacity
    rows = []
    for name, latency, mean, at in (
            ("TTFT", sim.ttft, analytic.time_to_first_token_seconds, analytic.time_to_first_token_percentile_seconds),
            ("TPOT", sim.tpot, analytic.time_per_output_token_seconds,
             analytic.time_per_output_token_percentile_seconds),
            ("end to end", sim.end_to_end, analytic.end_to_end_seconds, None)):
        cells = [name, _s(latency.mean_seconds), _s(latency.p50_seconds), _s(latency.p90_seconds),
                 _s(latency.p99_seconds)]
        if sim.latency_percentile not in (50, 90, 99):
            cells.append(_s(latency.at_target_percentile_seconds))
        cells += ["over capacity" if over and mean is not None else _s(mean),
                  "over capacity" if over and at is not None else _s(at)]
        rows.append(cells)
    return rows


def _latency_header(sim) -> list[str]:
    header = ["", "mean", "P50", "P90", "P99"]
    if sim.latency_percentile not in (50, 90, 99):
        header.append(f"P{sim.latency_percentile}")
    return header + ["analytic mean", f"analytic P{sim.latency_percentile}"]


def _summary(sim) -> list[str]:
    analytic = sim.analytic
    offered = ("all at t = 0" if math.isinf(sim.offered_requests_per_s)
               else f"{_rate(sim.offered_requests_per_s)} offered")
    lines = [f"throughput: {_rate(sim.throughput_requests_per_s)} ({offered}), "
             f"{_rate(sim.output_tokens_per_s, 'tokens/s')} output, "
             f"{_rate(sim.output_tokens_per_s_per_accelerator, 'tokens/s')} per accelerator; the analytic capacity "
             f"of a replica is {_rate(analytic.offline_requests_per_s_per_replica)}"]
    if sim.ttft_target_seconds is not None or sim.tpot_target_seconds is not None:
        lines.append(f"goodput: {_rate(sim.goodput_requests_per_s)} meeting every target "
                     f"({format_number(sim.share_meeting_targets * 100)} % of the requests)")
    lines.append(f"batch: {format_number(sim.mean_decode_batch)} requests decoding on average (analytic "
                 f"{format_number(analytic.decode_batch_size)}), {format_number(sim.mean_step_batch)} per step, "
                 f"{sim.max_running_batch} running at most; {sim.preemptions:,} preemptions")
    lines.append(f"simulated: {format_quantity(sim.simulated_seconds, 's')} of serving in {sim.steps:,} engine steps"
                 + (f"; prefill computed {sim.prefill_tokens_computed:,} of {sim.prompt_tokens:,} prompt tokens"
                    if sim.prefill_tokens_computed != sim.prompt_tokens else ""))
    if sim.speculative_tokens_per_step is not None:
        lines.append(f"speculative decoding: {format_number(sim.speculative_tokens_per_step)} tokens per step")
    return lines


def verdict_lines(sim) -> list[tuple[bool, str]]:
    """(met, "P90 TTFT 412 ms ≤ 500 ms target: met") per stated target."""
    out = []
    for v in sim.verdicts:
        sign = "≤" if v.met else ">"
        out.append((v.met, f"P{v.percentile} {v.metric} {_s(v.simulated_seconds)} {sign} {_s(v.target_seconds)} "
                           f"target: {'met' if v.met else 'missed'}"))
    return out


SPREAD_HEADER = ["percentile", "TTFT", "TPOT", "end to end"]


def _spread_rows(spread) -> list[list[str]]:
    """Per percentile: the mean over the runs ± the 95 % half-width, per metric."""
    rows = []
    for level in (50, 90, 99):
        cells = [f"P{level}"]
        for short in ("ttft", "tpot", "end_to_end"):
            found = spread.intervals[(short, level)]
            cells.append(f"{_s(found.mean_seconds)} ± {_s(found.half_width_seconds)}")
        rows.append(cells)
    return rows


def _spread_lines(spread) -> list[str]:
    seeds = spread.seeds
    lines = [f"{len(seeds)} independent runs (seeds {seeds[0]} to {seeds[-1]}): each percentile's mean over the runs "
             "± its 95 % confidence half-width (Student's t); the tables above are the first run"]
    thin = spread.thin_tails()
    if thin:
        lines.append(f"{', '.join(thin)} rest on fewer than 100 measured requests beyond them in a run: raise "
                     "--requests before trusting them")
    return lines


def _table(title: str, header: list[str], rows: list[list[str]]):
    """A rich table: the first column left-aligned, the figures right-aligned."""
    from rich.text import Text

    from botec.report.tables import rich_table

    table = rich_table(title)
    for k, column in enumerate(header):
        table.add_column(column, justify="left" if k == 0 else "right")
    for cells in rows:
        table.add_row(*(Text(c) for c in cells))
    return table


def simulation_text(sim, console, spread=None) -> None:
    from rich.text import Text

    from botec.report.width import print_table, say

    say(console, Text(f"botec simulate: {sim.contract_name}", style="bold"))
    for line in _header(sim):
        say(console, Text(line, style="dim"), indent=2)
    print_table(console, _table("Latency (simulated, and the analytic model at the same load per replica)",
                                _latency_header(sim), _latency_rows(sim)))
    for line in _summary(sim):
        say(console, Text(line), indent=2)
    verdicts = verdict_lines(sim)
    if verdicts:
        console.print()
    for met, line in verdicts:
        say(console, Text(f"{'✔' if met else '✘'} {line}", style="green" if met else "red"), indent=2)
    if spread is not None:
        print_table(console, _table("Across the runs", SPREAD_HEADER, _spread_rows(spread)))
        for line in _spread_lines(spread):
            say(console, Text(line), indent=2)


def simulation_markdown(sim, spread=None) -> str:
    from botec.report.tables import markdown_table

    lines = [f"# botec simulate: {sim.contract_name}", ""] + [f"- {line}" for line in _header(sim)] + [""]
    lines += ["## Latency", "", "Simulated, and the analytic model at the same load per replica.", ""]
    lines += markdown_table(_latency_header(sim), _latency_rows(sim))
    lines += ["", "## Throughput and batch", ""] + [f"- {line}" for line in _summary(sim)]
    verdicts = verdict_lines(sim)
    if verdicts:
        lines += ["", "## Targets", ""] + [f"- {'✔' if met else '✘'} {line}" for met, line in verdicts]
    if spread is not None:
        lines += ["", "## Across the runs", ""] + markdown_table(SPREAD_HEADER, _spread_rows(spread))
        lines += [""] + [f"- {line}" for line in _spread_lines(spread)]
    return "\n".join(lines)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _latency_json(latency) -> dict:
    return {"mean_seconds": _finite(latency.mean_seconds), "p50_seconds": _finite(latency.p50_seconds),
            "p90_seconds": _finite(latency.p90_seconds), "p99_seconds": _finite(latency.p99_seconds),
            "at_target_percentile_seconds": _finite(latency.at_target_percentile_seconds),
            "percentile_relative_accuracy": latency.relative_accuracy}


def _spread_json(spread) -> dict:
    return {"seeds": list(spread.seeds), "confidence": 0.95, "thin_tails": spread.thin_tails(),
            **{f"{short}_p{level}": {"mean_seconds": _finite(found.mean_seconds),
                                      "half_width_seconds": _finite(found.half_width_seconds),
                                      "runs_seconds": [_finite(x) for x in found.runs]}
               for (short, level), found in spread.intervals.items()}}


def simulation_json(sim, spread=None) -> str:
    a = sim.analytic
    return json.dumps(({"replications": _spread_json(spread)} if spread is not None else {}) | {
        "contract": sim.contract_name, "workload": sim.workload, "engine": sim.engine,
        "chunked_prefill": sim.chunked_prefill, "seed": sim.seed,
        "requests": sim.requests, "warmup_requests": sim.warmup_requests, "measured_requests": sim.measured_requests,
        "rejected_requests": sim.rejected_requests, "unfinished_requests": sim.unfinished_requests,
        "context_tokens": sim.context_tokens, "prompts_over_context": sim.prompts_over_context,
        "outputs_cut_at_context": sim.outputs_cut_at_context,
        "percentile_relative_accuracy": sim.percentile_relative_accuracy,
        "warnings": list(getattr(sim, "warnings", ())),
        "replicas": sim.replicas, "accelerators": sim.accelerators, "balancer": sim.balancer,
        "disaggregated": getattr(sim, "prefill_instances", 0) > 0,
        "prefill_instances_per_replica": getattr(sim, "prefill_instances", 0),
        "offered_requests_per_s": _finite(sim.offered_requests_per_s), "latency_percentile": sim.latency_percentile,
        "time_to_first_token": _latency_json(sim.ttft), "time_per_output_token": _latency_json(sim.tpot),
        "end_to_end": _latency_json(sim.end_to_end),
        "targets": {"time_to_first_token_seconds": sim.ttft_target_seconds,
                    "time_per_output_token_seconds": sim.tpot_target_seconds},
        "verdicts": [{"metric": v.metric, "percentile": v.percentile, "simulated_seconds": _finite(v.simulated_seconds),
                      "target_seconds": v.target_seconds, "met": v.met} for v in sim.verdicts],
        "share_meeting_targets": _finite(sim.share_meeting_targets),
        "goodput_requests_per_s": _finite(sim.goodput_requests_per_s),
        "throughput_requests_per_s": _finite(sim.throughput_requests_per_s),
        "output_tokens_per_s": _finite(sim.output_tokens_per_s),
        "output_tokens_per_s_per_accelerator": _finite(sim.output_tokens_per_s_per_accelerator),
        "mean_decode_batch": _finite(sim.mean_decode_batch), "mean_step_batch": _finite(sim.mean_step_batch),
        "max_running_batch": sim.max_running_batch, "preemptions": sim.preemptions,
        "simulated_seconds": _finite(sim.simulated_seconds),
        "measurement_window_seconds": [_finite(x) for x in sim.measurement_window_seconds],
        "steps": sim.steps, "prompt_tokens": sim.prompt_tokens, "prefill_tokens_computed": sim.prefill_tokens_computed,
        "speculative_tokens_per_step": sim.speculative_tokens_per_step,
        "analytic": {"requests_per_s_per_replica": _finite(a.requests_per_s_per_replica),
                     "over_capacity": a.over_capacity,
                     "time_to_first_token_seconds": _finite(a.time_to_first_token_seconds),
                     "time_per_output_token_seconds": _finite(a.time_per_output_token_seconds),
                     "time_to_first_token_percentile_seconds": _finite(a.time_to_first_token_percentile_seconds),
                     "time_per_output_token_percentile_seconds": _finite(a.time_per_output_token_percentile_seconds),
                     "end_to_end_seconds": _finite(a.end_to_end_seconds),
                     "decode_batch_size": _finite(a.decode_batch_size),
                     "offline_requests_per_s_per_replica": _finite(a.offline_requests_per_s_per_replica)},
    }, indent=1)


@contextlib.contextmanager
def simulation_progress(show: bool = True):
    """A callback (done, total) showing the requests dispatched, on stderr (nothing when ``show`` is false)."""
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("requests", total=None)

        def report(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield report
