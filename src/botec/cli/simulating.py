"""`botec simulate`: a discrete-event simulation of a serving contract's replicas, beside its estimate."""

from __future__ import annotations

import enum
import math
import sys
from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import FORCE_HELP, SET_HELP, Format, app, emit, emit_drawn, load_estimate, numpy_needed
from botec.cli.fanning import RAY_HELP, WORKERS_HELP, interrupted_note
from botec.errors import UserError

MAX_SEEDS = 100   # independent runs of --seeds: enough for a narrow interval, few enough to finish

PROGRESS_FROM_REQUESTS = 20_000
"""Runs of at least this many requests show a progress bar on stderr (when it is a terminal)."""


class Balancer(str, enum.Enum):
    round_robin = "round-robin"
    least_outstanding = "least-outstanding"
    power_of_two = "power-of-two"


@app.command()
def simulate(
    contract: Path = typer.Argument(..., help="A serving contract (YAML or JSON).", show_default=False),
    requests: int = typer.Option(10_000, "--requests", "-n", help="Requests to simulate, at most 100,000,000 (a "
                                 "trace sets its own). Memory does not grow with them: they stream."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Arrivals per second for the whole fleet (default: the "
                                         "contract's traffic; 'inf': every request at t = 0).", show_default=False),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Users in flight across the fleet, each "
                                              "sending its next request when its last one ends (a closed loop, as "
                                              "vllm bench serve --max-concurrency; default: the contract's traffic).",
                                              show_default=False),
    think_time: Optional[str] = typer.Option(None, "--think-time", help="With --concurrency: a user's pause between "
                                             "a reply and its next request, e.g. '2 s' (default: the contract's, "
                                             "else 0).", show_default=False),
    ramp: Optional[str] = typer.Option(None, "--ramp", help="With --concurrency: start the users over this long, one "
                                       "more every ramp / N, e.g. '30 s' (AIPerf's --concurrency-ramp-duration); 0: "
                                       "all at once, as genai-perf starts them (default: one cycle of the loop).",
                                       show_default=False),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="Replicas (default: the estimate's), at most "
                                           "10,000 and no more than the requests.", show_default=False),
    balancer: Balancer = typer.Option(Balancer.round_robin, "--balancer",
                                      help="round-robin (as vLLM's production-stack router and Dynamo's frontend "
                                      "route by default), least-outstanding or power-of-two (Envoy's least-request)."),
    trace: Optional[Path] = typer.Option(None, "--trace", help="Replay requests from a CSV (arrival_s,prompt_tokens,"
                                         "output_tokens) or JSON-lines file, read line by line: at most "
                                         "100,000,000 requests and 10 GB.", show_default=False),
    prompt_histogram: Optional[Path] = typer.Option(None, "--prompt-histogram", help="Draw prompt lengths from a "
                                                    "CSV histogram (tokens,weight).", show_default=False),
    output_histogram: Optional[Path] = typer.Option(None, "--output-histogram", help="Draw output lengths from a "
                                                    "CSV histogram (tokens,weight).", show_default=False),
    seed: int = typer.Option(0, "--seed", help="Seed for the arrivals, lengths, balancer and speculation, 0 to "
                             "4,294,967,295 (2^32 - 1)."),
    seeds: int = typer.Option(1, "--seeds", help="Independent runs (seeds --seed, --seed + 1, ...): each "
                              "percentile's mean over them and its 95 % confidence interval."),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP.format(unit="requests in all",
                                          threshold="100,000"), show_default=False),
    ray: Optional[str] = typer.Option(None, "--ray", help=RAY_HELP, show_default=False),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text (rich), json or markdown."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to a file."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> None:
    """Simulate a serving contract request by request: every engine step of every replica, its batch, its KV cache.

    Each replica runs iteration-level scheduling (chunked prefill, paged KV blocks, preemption, prefix caching,
    speculative decoding) with the estimate's own step costs; replicas sit behind a load balancer. A disaggregated
    contract runs each replica as its prefill instances (prompts in turn) and a decode instance. The report puts
    the simulated TTFT, TPOT and end-to-end percentiles beside the analytic estimate's, with throughput, goodput
    and a verdict per latency target. The first 5 % of the requests are a warm-up and are not measured. Requests
    stream (memory stays flat, 10 million need under 500 MB): the means are exact, the percentiles exact up to
    100,000 values and then within 1 % (a quantile sketch). A prompt longer than the model's context is refused
    and an output cut at it, as vLLM does; both are counted.

    Example: `botec simulate examples/serve-llama3.1-8b-h100.yaml --requests 20000 --rate 30 -f json`;
    `--concurrency 64` for 64 users in a closed loop instead of a rate; `--seeds 10 --workers 4` for ten runs on
    four processes, `--ray auto` on the Ray cluster this machine belongs to (the same figures either way).
    """
    numpy_needed()
    from botec.simulation_limits import MAX_REQUESTS, check_arrival_span, check_replicas, check_seed

    if rate is not None and (math.isnan(rate) or rate <= 0):
        raise UserError(f"--rate: expected a positive number of requests per second (or inf), got {rate:g}")
    if requests < 1:
        raise UserError(f"--requests: expected at least 1 request, got {requests}")
    if requests > MAX_REQUESTS:
        raise UserError(f"--requests: expected at most {MAX_REQUESTS:,} requests, got {requests:,}")
    if rate is not None and trace is None:
        check_arrival_span(requests, rate, "--rate")
    if replicas is not None:
        check_replicas(replicas)
    if not 1 <= seeds <= MAX_SEEDS:
        raise UserError(f"--seeds: expected 1 to {MAX_SEEDS} runs, got {seeds}")
    check_seed(seed, seeds)
    if concurrency is not None and concurrency < 1:
        raise UserError(f"--concurrency: expected at least 1 user in flight, got {concurrency}")
    think_seconds = None
    if think_time is not None:
        from botec.units import UnitError, parse_quantity

        try:
            think_seconds = parse_quantity(think_time, "seconds")
        except UnitError as error:
            raise UserError(f"--think-time: {error}") from None
    ramp_seconds = None
    if ramp is not None:
        from botec.units import UnitError, parse_quantity

        try:
            ramp_seconds = parse_quantity(ramp if ramp.strip() != "0" else "0 s", "seconds")
        except UnitError as error:
            raise UserError(f"--ramp: {error}") from None
        if not (ramp_seconds >= 0 and math.isfinite(ramp_seconds)):
            raise UserError(f"--ramp: expected seconds of at least 0, got {ramp!r}")
    result = load_estimate(contract, set_)
    if result.kind != "serving":
        raise UserError(f"{contract}: botec simulate needs a serving contract (workload.kind: serving); this is a "
                        f"{result.kind} contract")
    from botec.report.simulation import simulation_json, simulation_markdown, simulation_progress, simulation_text

    from botec.fanout import fanout_options
    from botec.simulate.replications import IN_PROCESS_BELOW_REQUESTS, replicate

    # a trace's requests are not counted before it is read: its runs fan out (it is seldom short)
    work = math.inf if trace is not None and seeds > 1 else requests * seeds
    fan = fanout_options(workers, ray, work, IN_PROCESS_BELOW_REQUESTS)
    show = sys.stderr.isatty() and (trace is not None or requests * seeds >= PROGRESS_FROM_REQUESTS)
    with simulation_progress(show) as progress:
        runs = replicate(result, seeds, seed=seed, **fan, progress=progress, requests=requests, rate=rate,
                         replicas=replicas, balancer=balancer.value, trace=trace,
                         prompt_histogram=prompt_histogram, output_histogram=output_histogram,
                         concurrency=concurrency, think_time=think_seconds, ramp=ramp_seconds)
    if len(runs.runs) < seeds:
        interrupted_note(f"reporting the {len(runs.runs)} of {seeds} runs that finished (seeds "
                         f"{', '.join(str(s) for s in runs.seeds)})")
    sim, spread = runs.runs[0], (runs if len(runs.runs) > 1 else None)
    if format is Format.json:
        emit(simulation_json(sim, spread), output, force=force)
    elif format is Format.markdown:
        emit(simulation_markdown(sim, spread), output, force=force)
    else:
        emit_drawn(lambda console: simulation_text(sim, console, spread), output, force)
