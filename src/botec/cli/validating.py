"""`botec validate`: botec against the published, measured figures it ships."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import FORCE_HELP, Format, app, emit, emit_drawn, emit_text
from botec.errors import UserError


@app.command()
def validate(
    case: List[str] = typer.Argument(None, help="Case ids (or their beginnings) to run; default: all.",
                                     show_default=False),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, markdown or json."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    strict: bool = typer.Option(False, "--strict", help="Exit with code 1 when a case misses its target."),
    list_cases: bool = typer.Option(False, "--list", help="List the cases and exit."),
    efficiency_set: Optional[str] = typer.Option(
        None, "--efficiency-set", metavar="NAME",
        help="Run every case with assumptions.efficiency_set: NAME (a calibration set of the catalog, e.g. "
             "megatron-2022-fit); the rows of the cases it was fitted to are reported as calibration rows."),
) -> None:
    """Put botec's estimates beside published measurements: signed error per row, mean and max |error| per case.

    Each case is a botec contract of a published run (shipped with botec), the published figure and its source,
    its FLOP convention, and what the case assumes where the source is silent. One set of defaults per
    accelerator family for every case: nothing is tuned per case.

    Rows are reported in three kinds, never averaged together: prediction rows (no figure in force was fitted to
    them), calibration rows (the efficiency set in force was fitted to them: the fit's training error) and
    consistency checks (a formula against the published formula's own number: they cannot miss).

    Example: `botec validate train-korthikanti -f json`;
    `botec validate --efficiency-set megatron-2022-fit` (the old A100 fit on the rows it was fitted to)
    """
    from botec.validate import cases, run_all

    known = cases()
    if list_cases:
        lines = []
        for c in known:
            kind = "consistency" if c.role == "consistency" else "prediction"
            fitted = f"; fitted by {', '.join(c.fitted_by)}" if c.fitted_by else ""
            lines.append(f"{c.id}  ({len(c.rows)} rows, {c.metric}, {kind}{fitted}): {c.title}")
        emit_text("\n".join(lines))
        return
    for wanted in case or []:
        if not any(c.id.startswith(wanted) for c in known):
            raise UserError(f"no validation case starts with {wanted!r} (cases: {', '.join(c.id for c in known)})")
    if efficiency_set is not None:
        _check_efficiency_set(efficiency_set)

    def progress(index: int, count: int, name: str) -> None:
        typer.echo(f"validate: {index + 1}/{count} {name}", err=True)

    results = run_all(case or None, progress if format is Format.text and output is None else None, efficiency_set)
    from botec.report.validation import validation_json, validation_markdown, validation_text

    if format is Format.json:
        emit(validation_json(results), output, force=force)
    elif format is Format.markdown:
        emit(validation_markdown(results), output, force=force)
    else:
        emit_drawn(lambda console: validation_text(results, console), output, force)
    if strict and not all(met for r in results for met in r.checks.values()):
        raise typer.Exit(code=1)


def _check_efficiency_set(name: str) -> None:
    """One line naming the known calibration sets when ``name`` is none of them (exit code 2)."""
    from botec.catalog import did_you_mean
    from botec.catalog.efficiency import efficiency_sets

    known = efficiency_sets()
    if name not in known:
        raise UserError(f"--efficiency-set: no calibration set named {name!r}{did_you_mean(name, known)} (the catalog "
                        f"has: {', '.join(sorted(known)) or 'none'}; leave the option out for the measured defaults)")
