"""`botec simulate`: a discrete-event simulation of a serving contract's replicas, beside its estimate."""

from __future__ import annotations

import enum
import math
import sys
from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import SET_HELP, Format, app, emit, emit_drawn, load_estimate, numpy_needed
from botec.errors import UserError

PROGRESS_FROM_REQUESTS = 20_000
"""Runs of at least this many requests show a progress bar on stderr (when it is a terminal)."""


class Balancer(str, enum.Enum):
    round_robin = "round-robin"
    least_outstanding = "least-outstanding"
    power_of_two = "power-of-two"


@app.command()
def simulate(
    contract: Path = typer.Argument(..., help="A serving contract (YAML or JSON).", show_default=False),
    requests: int = typer.Option(10_000, "--requests", "-n", help="Requests to simulate (a trace sets its own)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Arrivals per second for the whole fleet (default: the "
                                         "contract's traffic; 'inf': every request at t = 0).", show_default=False),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="Replicas (default: the estimate's).",
                                           show_default=False),
    balancer: Balancer = typer.Option(Balancer.least_outstanding, "--balancer",
                                      help="round-robin, least-outstanding or power-of-two."),
    trace: Optional[Path] = typer.Option(None, "--trace", help="Replay requests from a CSV (arrival_s,prompt_tokens,"
                                         "output_tokens) or JSON-lines file.", show_default=False),
    prompt_histogram: Optional[Path] = typer.Option(None, "--prompt-histogram", help="Draw prompt lengths from a "
                                                    "CSV histogram (tokens,weight).", show_default=False),
    output_histogram: Optional[Path] = typer.Option(None, "--output-histogram", help="Draw output lengths from a "
                                                    "CSV histogram (tokens,weight).", show_default=False),
    seed: int = typer.Option(0, "--seed", help="Seed for the arrivals, lengths, balancer and speculation."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text (rich), json or markdown."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to a file."),
) -> None:
    """Simulate a serving contract request by request: every engine step of every replica, its batch, its KV cache.

    Each replica runs iteration-level scheduling (chunked prefill, paged KV blocks, preemption, prefix caching,
    speculative decoding) with the estimate's own step costs; replicas sit behind a load balancer. The report puts
    the simulated TTFT, TPOT and end-to-end percentiles beside the analytic estimate's, with throughput, goodput
    and a verdict per latency target. The first 5 % of the requests are a warm-up and are not measured.

    Example: `botec simulate examples/serve-llama3.1-8b-h100.yaml --requests 20000 --rate 30 -f json`
    """
    numpy_needed()
    if rate is not None and (math.isnan(rate) or rate <= 0):
        raise UserError(f"--rate: expected a positive number of requests per second (or inf), got {rate:g}")
    if requests < 1:
        raise UserError(f"--requests: expected at least 1 request, got {requests}")
    if replicas is not None and replicas < 1:
        raise UserError(f"--replicas: expected at least 1 replica, got {replicas}")
    result = load_estimate(contract, set_)
    if result.kind != "serving":
        raise UserError(f"{contract}: botec simulate needs a serving contract (workload.kind: serving); this is a "
                        f"{result.kind} contract")
    from botec.report.simulation import simulation_json, simulation_markdown, simulation_progress, simulation_text
    from botec.simulate import simulate as run

    show = sys.stderr.isatty() and (trace is not None or requests >= PROGRESS_FROM_REQUESTS)
    with simulation_progress(show) as progress:
        sim = run(result, requests=requests, seed=seed, rate=rate, replicas=replicas, balancer=balancer.value,
                  trace=trace, progress=progress, prompt_histogram=prompt_histogram,
                  output_histogram=output_histogram)
    if format is Format.json:
        emit(simulation_json(sim), output)
    elif format is Format.markdown:
        emit(simulation_markdown(sim), output)
    else:
        emit_drawn(lambda console: simulation_text(sim, console), output)
