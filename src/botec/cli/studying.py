"""`botec study`: a grid of serving contracts × vary points × rates × seeds as one job, one tidy table."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from botec.cli.common import FORCE_HELP, app, emit, is_stdout, numpy_needed
from botec.cli.quick import echo
from botec.errors import UserError
from botec.simulation_limits import MAX_STUDY_REQUESTS, SIMULATED_CPU_SECONDS_PER_REQUEST


@app.command()
def study(
    study_file: Path = typer.Argument(..., metavar="STUDY", help="A study file (YAML): study, contracts, and "
                                      "optionally vary, rates, seeds, requests, replicas, measure.",
                                      show_default=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="The table: a .csv file (default: CSV on "
                                          "stdout) or a .parquet file (needs pyarrow).", show_default=False),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write an HTML summary: each cell's mean and 95 % "
                                        "interval over the seeds, and a figure (needs plotly).", show_default=False),
    workers: Optional[int] = typer.Option(None, "--workers", help="Local worker processes (default: the cores). "
                                          "The table is the same whatever the count.", show_default=False),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run on this Ray cluster (or $RAY_ADDRESS; 'local' starts "
                                      "one here); needs pip install 'botec[ray]'.", show_default=False),
    max_requests: int = typer.Option(MAX_STUDY_REQUESTS, "--max-requests", metavar="N",
                                     help=f"Refuse a study of more simulated requests (runs × requests per run) "
                                     f"than this; the default, {MAX_STUDY_REQUESTS:,}, is about "
                                     f"{MAX_STUDY_REQUESTS * SIMULATED_CPU_SECONDS_PER_REQUEST / 60:,.0f} "
                                     f"CPU-minutes at {SIMULATED_CPU_SECONDS_PER_REQUEST * 1e6:g} µs a request "
                                     "(benchmarks/simulate_100k.py)."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> None:
    """Run a study: every contract × vary point × rate × seed simulated (one run each), one row per run.

    A row holds the run's coordinates, the simulated TTFT/TPOT/end-to-end percentiles, throughput and goodput,
    the verdicts against the contract's targets and the analytic figures at the same load. Runs fan out over
    local processes or a Ray cluster; each carries its seed, so the table is identical whatever the worker
    count. Ctrl-C writes the runs finished so far and says how many are missing (exit 130).

    Before any run the study's work is printed on stderr: its simulated requests (runs × requests per run) and
    their CPU time at botec's measured rate; a study past --max-requests is refused before it starts.

    Example: `botec study examples/studies/llama-8b-accelerators.yaml -o runs.csv --html summary.html`
    """
    numpy_needed()
    from botec.fanout import Interrupted, check_workers, run_tasks
    from botec.report.study import parquet_needed, summary_needed
    from botec.contract.stated import MAX_WHOLE_NUMBER
    from botec.study import load_study, rows_of, run_cell, work_text
    from botec.units import excerpt

    parquet = output is not None and output.suffix.lower() == ".parquet"
    if parquet:
        if is_stdout(output):
            raise UserError("-o/--output: Parquet is a file; name one, or leave -o out for CSV on stdout")
        parquet_needed()
    _check_destination(output, "-o/--output")
    if html is not None:
        summary_needed()
        _check_destination(html, "--html")
        if is_stdout(html) and is_stdout(output):
            raise UserError("--html: the table goes to stdout already; give the summary a file, or the table -o FILE")
        if not is_stdout(output) and os.path.realpath(html) == os.path.realpath(output):
            raise UserError(f"--html: {html} is also the -o/--output file; give the summary a name of its own")
    if ray is None:
        check_workers(workers)
    if isinstance(max_requests, bool) or not 1 <= max_requests < MAX_WHOLE_NUMBER:
        raise UserError(f"--max-requests: expected a whole number of simulated requests from 1 to below 10^18, "
                        f"got {excerpt(max_requests)}")
    plan = load_study(study_file, max_requests)
    echo(f"botec: study: {work_text(len(plan.runs), plan.spec.requests)}", err=True)
    missing = 0
    with _progress(sys.stderr.isatty()) as progress:
        try:
            results = run_tasks(run_cell, plan.runs, workers=workers, ray_address=ray, progress=progress)
        except Interrupted as interrupted:
            results = interrupted.results
            missing = len(results) - interrupted.finished
    rows = rows_of(plan, results)
    _write(plan, rows, output, parquet, force)
    if html is not None:
        from botec.report.study import study_html

        emit(study_html(plan, rows, missing), html, "--html", force)
    if missing:
        echo(f"botec: note: interrupted: {len(rows):,} of {len(plan.runs):,} runs finished and written; "
             f"{missing:,} missing", err=True)
        raise typer.Exit(130)


def _write(plan, rows, output, parquet: bool, force: bool) -> None:
    from botec.report.study import csv_text, write_parquet

    if parquet:
        write_parquet(plan, rows, output, force=force)
        echo(f"wrote {output}", err=True)
    else:
        emit(csv_text(plan, rows), output, force=force)


def _check_destination(path: Optional[Path], option: str) -> None:
    """Before any run: a one-line error when ``path`` cannot be written (a folder, or in a folder that is absent)."""
    if path is None or is_stdout(path):
        return
    if path.is_dir():
        raise UserError(f"{option}: {path}: cannot write (it is a directory)")
    if not path.resolve().parent.is_dir():
        raise UserError(f"{option}: {path}: cannot write (no folder {path.parent})")


def _progress(show: bool):
    """A progress bar of runs on stderr (a terminal only), or a callback that does nothing."""
    import contextlib

    if not show:
        return contextlib.nullcontext(None)
    from botec.report.progress import space_progress

    return space_progress()
