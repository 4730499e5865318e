"""`botec validate`: botec against the published, measured figures it ships."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import Format, app, emit, emit_drawn
from botec.errors import UserError


@app.command()
def validate(
    case: List[str] = typer.Argument(None, help="Case ids (or their beginnings) to run; default: all.",
                                     show_default=False),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, markdown or json."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report here."),
    strict: bool = typer.Option(False, "--strict", help="Exit with code 1 when a case misses its target."),
    list_cases: bool = typer.Option(False, "--list", help="List the cases and exit."),
) -> None:
    """Put botec's estimates beside published measurements: signed error per row, mean and max |error| per case.

    Each case is a botec contract of a published run (shipped with botec), the published figure and its source,
    its FLOP convention, and what the case assumes where the source is silent. One set of defaults per
    accelerator family for every case: nothing is tuned per case.

    Example: `botec validate train-korthikanti -f json`
    """
    from botec.validate import cases, run_all

    known = cases()
    if list_cases:
        for c in known:
            typer.echo(f"{c.id}  ({len(c.rows)} rows, {c.metric}): {c.title}")
        return
    for wanted in case or []:
        if not any(c.id.startswith(wanted) for c in known):
            raise UserError(f"no validation case starts with {wanted!r} (cases: {', '.join(c.id for c in known)})")

    def progress(index: int, count: int, name: str) -> None:
        typer.echo(f"validate: {index + 1}/{count} {name}", err=True)

    results = run_all(case or None, progress if format is Format.text and output is None else None)
    from botec.report.validation import validation_json, validation_markdown, validation_text

    if format is Format.json:
        emit(validation_json(results), output)
    elif format is Format.markdown:
        emit(validation_markdown(results), output)
    else:
        emit_drawn(lambda console: validation_text(results, console), output)
    if strict and not all(met for r in results for met in r.checks.values()):
        raise typer.Exit(code=1)
