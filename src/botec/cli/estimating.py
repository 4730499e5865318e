"""`botec estimate`, `botec report`, `botec explain`: an estimate, as a report or as a derivation."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import (CONTRACT_HELP, FORCE_HELP, OUTPUT_HELP, SET_HELP, Format, Units, app, emit, emit_text,
                              load_estimate, numpy_needed, units_of)
from botec.cli.fanning import RAY_HELP, WORKERS_HELP, interrupted_note
from botec.cli.quick import estimate_report
from botec.errors import UserError


@app.command()
def estimate(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text (rich), json or markdown."),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal (GB = 10^9 B) or binary (GiB = 2^30 B)."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP, show_default=False),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    allow_misfit: bool = typer.Option(False, "--allow-misfit",
                                      help="Report a plan that does not fit in memory instead of failing."),
    details: bool = typer.Option(False, "--details", help="Text report: show the intermediate quantities too."),
    uncertainty: bool = typer.Option(False, "--uncertainty", help="Sample the stated ranges: P10/P50/P90."),
    samples: int = typer.Option(10_000, "--samples", min=1, help="Monte Carlo samples for --uncertainty."),
    seed: int = typer.Option(0, "--seed", help="Seed for --uncertainty (the same seed, the same figures)."),
    deadline: Optional[str] = typer.Option(None, "--deadline", help="With --uncertainty: the chance to finish by "
                                                                     "this, e.g. '7 d'."),
    workers: Optional[int] = typer.Option(None, "--workers", help="With --uncertainty: " + WORKERS_HELP.format(
                                          unit="samples", threshold="1,000,000"), show_default=False),
    ray: Optional[str] = typer.Option(None, "--ray", help="With --uncertainty: " + RAY_HELP, show_default=False),
) -> None:
    """Estimate a training job in four accounts (compute, memory, network, storage) plus cost, or a serving fleet.

    Example: `botec estimate examples/llama2-70b-pretrain.yaml --set supply.count=2048 -f markdown`
    """
    system = units.value
    if not uncertainty:  # the one implementation, shared with botec.cli.quick's typer-free path
        estimate_report(contract, format.value, system, set_, output, allow_misfit, details, force)
        return
    from botec.estimation import check_fit

    result = load_estimate(contract, set_)
    if not allow_misfit:
        check_fit(result, system)
    numpy_needed()
    from botec.explore.uncertainty import IN_PROCESS_BELOW_SAMPLES, monte_carlo
    from botec.fanout import fanout_options
    from botec.report.explore import uncertainty_json, uncertainty_text
    from botec.units import UnitError, parse_quantity

    try:
        deadline_seconds = parse_quantity(deadline, "seconds") if deadline else None
    except UnitError as error:
        raise UserError(f"--deadline: {error}") from None
    mc = monte_carlo(result, samples, seed, deadline_seconds,
                     **fanout_options(workers, ray, samples, IN_PROCESS_BELOW_SAMPLES))
    if mc.samples < samples:
        interrupted_note(f"the figures of the {mc.samples:,} of {samples:,} samples drawn")
    if format is Format.json:
        emit(uncertainty_json(mc), output, force=force)
    else:
        emit_text("\n".join(uncertainty_text(mc, units_of(result.inputs), deadline, system)), output, force=force)


class ReportFormat(str, enum.Enum):
    """`botec report` writes a self-contained HTML page or Markdown."""

    html = "html"
    markdown = "markdown"


@app.command()
def report(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", show_default=False,
                                          help="The file: report.html by default (report.md with -f markdown); "
                                               "a .md or .markdown name writes Markdown; `-`: stdout."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    format: Optional[ReportFormat] = typer.Option(None, "--format", "-f", show_default=False,
                                                  help="html or markdown (default: by the -o name, else html)."),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal or binary."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Write a report to paste or share: one self-contained HTML file with plots (works offline), or Markdown.

    Examples: `botec report examples/llama3.1-70b-pretrain.yaml -o review.html`; `botec report -f markdown -o -`
    """
    suffix = output.suffix.lower() if output is not None else ""
    named = {".md": ReportFormat.markdown, ".markdown": ReportFormat.markdown, ".html": ReportFormat.html,
             ".htm": ReportFormat.html}.get(suffix)
    if format is None:
        format = named or ReportFormat.html
    elif named is not None and named is not format:  # -f markdown -o report.html: say which, not guess
        raise UserError(f"-f/--format {format.value} but -o/--output {str(output)!r} names {named.value}: "
                        f"give the file a {'.md' if format is ReportFormat.markdown else '.html'} name, "
                        "or leave -f out")
    if output is None:
        output = Path("report.md" if format is ReportFormat.markdown else "report.html")
    result = load_estimate(contract, set_)
    if format is ReportFormat.markdown:
        from botec.report.markdown import render as render_markdown

        emit(render_markdown(result, units.value), output, force=force)
        return
    try:
        import numpy  # noqa: F401   (the run-time-against-accelerators figure is a sweep)
        import plotly  # noqa: F401
    except ImportError:
        raise UserError("the HTML report draws with plotly and sweeps with numpy: pip install 'botec[report]'") \
            from None
    from botec.explore.figure_data import figure_data
    from botec.report.html import render as render_html

    emit(render_html(result, figure_data(result), units.value), output, force=force)


@app.command()
def explain(
    contract_or_quantity: str = typer.Argument(..., metavar="[CONTRACT] QUANTITY",
                                               help="A contract file, then a quantity name (the contract may be "
                                                    "left out: the reference workload)."),
    quantity: Optional[str] = typer.Argument(None, hidden=True),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal or binary."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    depth: Optional[int] = typer.Option(None, "--depth", min=0, show_default=False,
                                        help="How many levels of inputs to print under the quantity (0: its own "
                                             "line; default: down to the assumptions); `...` marks what is left "
                                             "out."),
) -> None:
    """Print how one quantity is derived, with the values substituted, down to the assumptions.

    Each input is shown once, indented under the first quantity that uses it; a long line wraps, its further lines
    4 columns deeper. Example: `botec explain examples/lesson-finetune-1b.yaml planned_device_bytes --depth 2`
    """
    from botec.catalog import did_you_mean_quantity
    from botec.graph.explain import explain as explain_chain

    contract = Path(contract_or_quantity) if quantity is not None else None
    name = quantity if quantity is not None else contract_or_quantity
    result = load_estimate(contract, set_)
    if name not in result.quantities:
        if name in result.inputs.graph:
            raise UserError(f"{name!r} is not resolved by this contract: "
                            f"{result.inputs.why_absent(name, result.quantities)}")
        hint = did_you_mean_quantity(name, result.quantities) or (
            f" ({len(result.quantities)} quantities here: `botec estimate --details` or `-f json` lists them)")
        raise UserError(f"{name!r} is not a quantity{hint}")
    emit_text("\n".join("  " * level + line for level, line in explain_chain(name, result.quantities, units.value,
                                                                             max_depth=depth)))
