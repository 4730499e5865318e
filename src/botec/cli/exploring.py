"""`botec sweep`, `botec solve`, `botec search`, `botec sensitivity`, `botec recipes`: an estimate's inputs
varied."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import List, Optional

import typer

from botec.cli._process import keep_freed_arrays
from botec.cli.fanning import RAY_HELP, WORKERS_HELP, interrupted_note
from botec.cli.common import (CONTRACT_HELP, FORCE_HELP, OUTPUT_HELP, SET_HELP, Format, TableFormat, Units, app, emit,
                              emit_drawn, emit_text, is_stdout, load_estimate, load_inputs, numpy_needed, units_of)

QUANTITY_HELP = "A quantity to tabulate, e.g. `-q run_seconds` (repeatable)."


class SolveFormat(str, enum.Enum):
    """`botec solve` prints a few lines: text, or the same as JSON."""

    text = "text"
    json = "json"


def _not_a_quantity(output: Optional[Path], quantities) -> None:
    """`-o run_seconds` (the old meaning of -o in sweep/sensitivity) refused rather than written as a file."""
    if output is not None and not output.suffix and str(output) in quantities:
        raise UserError(f"-o/--output: {str(output)!r} is a quantity; name quantities with -q/--quantity "
                        "(-o/--output is the file to write)")
from botec.errors import UserError


@app.command()
def sweep(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    axes: List[str] = typer.Option([], "--set", help="FIELD=VALUES: 4,8,16 or 1..8 or 0.2:0.5:4 (repeatable)."),
    outputs: List[str] = typer.Option(["run_seconds", "planned_device_bytes", "step_seconds"], "--quantity", "-q",
                                      help=QUANTITY_HELP),
    format: TableFormat = typer.Option(TableFormat.text, "--format", "-f", help="text, json, markdown or csv."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP, show_default=False),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write every row as CSV to this file "
                                                                "(`-`: stdout).", show_default=False),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal (GB) or binary (GiB)."),
    cap: int = typer.Option(10_000_000, "--cap", help="Refuse spaces larger than this without --force."),
    force: bool = typer.Option(False, "--force", help="Evaluate a space larger than --cap, and replace a "
                                                      "read-only -o/--output or --csv file."),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP.format(unit="rows",
                                          threshold="1,000,000"), show_default=False),
    ray: Optional[str] = typer.Option(None, "--ray", help=RAY_HELP, show_default=False),
) -> None:
    """Evaluate the cross product of some fields through the same formulas, vectorized; each row's verdicts: fits
    (memory with the headroom kept, as the estimate) and fits_device (the device's memory, the headroom eaten).

    Example: `botec sweep --set supply.count=4,8,16,32 --set strategy.micro_batch_size=1..8`; a large space runs
    on every core (`--workers`), or on a Ray cluster with `--ray ADDRESS`, with the same rows either way.
    """
    numpy_needed()
    from botec.explore.space import IN_PROCESS_BELOW_ROWS, Space, evaluate_space, fit_quantities, fits_mask, parse_axes
    from botec.fanout import fanout_options
    from botec.report import explore as view

    inputs = load_inputs(contract)
    _not_a_quantity(output, inputs.graph)
    if inputs.kind != "training":
        raise UserError("sweeps run over training contracts (serving: vary the traffic with --set on estimate)")
    if not axes:
        raise UserError("--set: give at least one FIELD=VALUES to sweep")
    parsed = parse_axes(axes, inputs, None if force else cap, advice="; narrow it or pass --force")
    space = Space(inputs, parsed)
    fan = fanout_options(workers, ray, space.size, IN_PROCESS_BELOW_ROWS)
    keep_freed_arrays()
    from botec.report.progress import space_progress

    with space_progress() as progress:
        columns, valid, counts = evaluate_space(space, wanted=list(dict.fromkeys(outputs + fit_quantities(inputs))),
                                                progress=progress, **fan)
    if counts.get("interrupted"):
        interrupted_note(f"showing the first {len(valid):,} of {space.size:,} configurations")
    fits, device = fits_mask(columns, valid), fits_mask(columns, valid, "fits_device")   # the headroom kept, or eaten
    header = [a.path for a in parsed] + outputs + list(view.SWEEP_VERDICTS)
    rows = view.sweep_rows([a.path for a in parsed], outputs, columns, valid, fits, device)
    if csv_path is not None:
        emit(view.sweep_csv(header, rows), csv_path, "--csv", force)
    if csv_path is not None and is_stdout(csv_path) and is_stdout(output):
        pass   # `--csv -`: standard output holds the CSV alone (the summary below goes to stderr)
    elif format is TableFormat.json:
        emit(view.sweep_json(header, rows, counts, int(fits.sum()), int(device.sum())), output, force=force)
        return
    elif format is TableFormat.csv:
        emit(view.sweep_csv(header, rows), output, force=force)
        return
    elif format is TableFormat.markdown:
        emit(view.sweep_text(header, rows, units_of(inputs), format.value, units.value), output, force=force)
    else:
        from botec.report.width import print_table

        table = view.sweep_text(header, rows, units_of(inputs), format.value, units.value)
        emit_drawn(lambda console: print_table(console, table), output, force)
    for line in view.sweep_summary(counts, int(fits.sum()), len(rows) <= view.SWEEP_ROWS_SHOWN, int(device.sum())):
        typer.echo(line, err=True)


@app.command()
def solve(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    minimize: Optional[str] = typer.Option(None, "--minimize", help="A field to make as small as possible."),
    maximize: Optional[str] = typer.Option(None, "--maximize", help="A field to make as large as possible."),
    subject_to: List[str] = typer.Option([], "--subject-to", help="'QUANTITY OP VALUE' (e.g. 'run_seconds <= 4 h'), "
                                                                   "'fits' (memory with the headroom kept, as the "
                                                                   "estimate; the default) or 'fits_device' (the "
                                                                   "device's memory, the headroom eaten; in place "
                                                                   "of fits) (repeatable)."),
    over: Optional[str] = typer.Option(None, "--over", help="The values to try, FIELD=1..64 (default: a wide range)."),
    find: Optional[str] = typer.Option(None, "--find", help="An assumption to back-solve, e.g. "
                                                           "assumptions.end_to_end_mfu."),
    given: Optional[str] = typer.Option(None, "--given", help="The observed figure for --find, e.g. "
                                                             "accelerator_hours=1.72M."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    format: SolveFormat = typer.Option(SolveFormat.text, "--format", "-f", help="text or json (values in base "
                                                                                 "units, each with its unit)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP, show_default=False),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
) -> None:
    """Solve for a field under constraints, or back-solve an assumption from an observed figure.

    Examples: `botec solve --minimize supply.count --subject-to "run_seconds <= 4 h"`;
    `botec solve examples/llama2-70b-pretrain.yaml --find assumptions.end_to_end_mfu --given accelerator_hours=1.72M`
    """
    numpy_needed()
    import json

    from botec.explore.solve import back_solve, best_accelerator, optimize
    from botec.units import format_number, format_quantity

    inputs = load_inputs(contract, set_)
    units = units_of(inputs)

    def number(value) -> float | int:  # a count (supply.count = 9) as 9, not 9.0
        return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)

    def done(lines: list[str], payload: dict) -> None:
        if format is SolveFormat.json:
            emit(json.dumps(payload, indent=2), output, force=force)
        else:
            emit_text("\n".join(lines), output, force=force)

    if find is not None:
        if given is None:
            raise UserError("--find needs --given QUANTITY=VALUE")
        from botec.explore.solve import sets_table_aside

        value, reached = back_solve(inputs, find, given)
        quantity = given.partition("=")[0].strip()
        note = ("the roofline's: the measured GEMM table steps aside, as when a contract states it"
                if sets_table_aside(inputs, find) else None)
        done([f"{find} = {value:.6g} gives {quantity} = {format_quantity(reached, units[quantity])}"]
             + ([f"  ({note})"] if note else []),
             {"find": find, "value": float(value), "given": quantity, "reached": float(reached),
              "unit": units[quantity], **({"note": note} if note else {})})
        return
    if (minimize is None) == (maximize is None):
        raise UserError("give one of --minimize FIELD or --maximize FIELD (or --find with --given)")
    variable, direction = minimize or maximize, "min" if minimize else "max"
    if over is not None and over.partition("=")[0].strip() == "supply.accelerator":
        keys = [k.strip() for k in over.partition("=")[2].split(",") if k.strip()]
        rows = best_accelerator(inputs, variable, direction, subject_to, keys)
        if rows[0][1] is None:
            raise UserError("no accelerator meets the constraints: " + "; ".join(f"{key}: {why}" for key, _, why in rows))
        lines = [f"best: {rows[0][0]} ({variable} = {format_quantity(rows[0][1], units[variable])})"]
        lines += [f"  {key}: {format_quantity(value, units[variable]) if value is not None else why}"
                  for key, value, why in rows]
        done(lines, {"variable": variable, "unit": units[variable], "best": rows[0][0],
                     "accelerators": [{"accelerator": key, "value": None if value is None else number(value),
                                       "why_not": None if value is not None else why} for key, value, why in rows]})
        return
    solution = optimize(inputs, variable, direction, subject_to, over)
    if solution.value is None:
        raise UserError(f"no value of {variable} meets the constraints ({solution.evaluated:,} tried): "
                        f"{solution.closest}")
    lines = [f"{variable} = {format_number(solution.value)}  ({solution.feasible:,} of {solution.evaluated:,} "
             "values tried meet the constraints)"]
    shown = {name: value for name, value in solution.row.items() if name in units}
    lines += [f"  {name} = {format_quantity(value, units[name])}" for name, value in shown.items()]
    kept = solution.value_keeping_headroom
    if solution.verdict == "fits_device":   # say that the answer eats the headroom, and what keeps it
        headroom = format_number(100 * inputs.given["headroom"].value)
        lines += [f"  fits_device: the plan fits the device, its {headroom} % headroom eaten (assumptions.headroom)",
                  "  with the headroom kept (--subject-to fits): "
                  + (f"{variable} = {format_number(kept)}" if kept is not None else "no value tried")]
    done(lines, {"variable": variable, "value": number(solution.value), "feasible": solution.feasible,
                 "evaluated": solution.evaluated, "verdict": solution.verdict,
                 **({"value_keeping_headroom": None if kept is None else number(kept)}
                    if solution.verdict == "fits_device" else {}),
                 "row": [{"name": name, "value": number(value), "unit": units[name]} for name, value in shown.items()]})


@app.command()
def search(
    contract: Path = typer.Argument(..., help="A contract (its layout is the starting point)."),
    top: int = typer.Option(10, "--top", min=1, help="How many layouts to show."),
    objective: str = typer.Option("step_seconds", "--objective", help="Quantity to minimize (step_seconds, "
                                                                      "training_cost_usd, ...)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json or markdown."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP, show_default=False),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal (GB) or binary (GiB); markdown."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP.format(unit="candidates",
                                          threshold="2,000,000"), show_default=False),
    ray: Optional[str] = typer.Option(None, "--ray", help=RAY_HELP, show_default=False),
) -> None:
    """Search TP × PP × CP × DP (EP) × ZeRO × micro-batch × recomputation × SP × interleaving for the fastest
    layout that fits; for a serving contract, the accelerator and TP degree that meet the targets cheapest.

    Example: `botec search examples/gpt3-175b-search.yaml --top 5`
    """
    import json

    numpy_needed()
    from botec.explore.search import as_overrides, search as run_search, search_serving
    from botec.report import explore as view

    inputs = load_inputs(contract, set_)
    if inputs.kind == "serving":
        rows = search_serving(inputs, top)
        if format is Format.json:
            emit(json.dumps(rows, indent=2), output, force=force)
            return
        if not rows:
            raise UserError("no accelerator and tensor-parallel degree holds a request and meets the latency targets")
        percentile = round(inputs.given["latency_percentile"].value * 100)   # P99 stated as 0.99
        if format is Format.markdown:
            emit("\n".join(view.serving_search_markdown(rows, units.value, percentile)), output, force=force)
        else:
            emit_text("\n".join(view.serving_search_text(rows, percentile)), output, force=force)
        return
    from botec.explore.search import IN_PROCESS_BELOW_CANDIDATES, default_axes
    from botec.explore.space import Space
    from botec.fanout import fanout_options
    from botec.report.progress import space_progress

    axes = default_axes(inputs)
    fan = fanout_options(workers, ray, Space(inputs, axes).size, IN_PROCESS_BELOW_CANDIDATES)
    keep_freed_arrays()
    with space_progress() as progress:
        result = run_search(inputs, objective, top, axes, progress=progress, **fan)
    if result.examined < result.candidates:
        interrupted_note(f"the best of {result.examined:,} of the {result.candidates:,} candidates")
    if format is Format.json:
        emit(view.search_json(result), output, force=force)
    elif format is Format.markdown:
        emit("\n".join(view.search_markdown(result, contract, as_overrides, units.value)), output, force=force)
    else:
        from botec.report.width import report_width

        width = report_width(sys.stdout if is_stdout(output) else None)
        emit_text("\n".join(view.search_text(result, contract, as_overrides, width)), output, force=force)


@app.command()
def sensitivity(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    quantity: str = typer.Option("run_seconds", "--quantity", "-q", help="The quantity whose swings to rank."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json or markdown."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help=OUTPUT_HELP, show_default=False),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal (GB) or binary (GiB); markdown."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Rank the ranged assumptions by how far each moves one output across its range (a tornado table).

    Example: `botec sensitivity examples/lesson-finetune-1b.yaml -q planned_device_bytes`
    """
    numpy_needed()
    from botec.explore.uncertainty import sensitivity as run_sensitivity
    from botec.report import explore as view

    result = load_estimate(contract, set_)
    _not_a_quantity(output, result.quantities)
    if quantity not in result.quantities:
        from botec.catalog import did_you_mean_quantity

        raise UserError(f"--quantity: {quantity!r} is not a quantity of this contract"
                        f"{did_you_mean_quantity(quantity, result.quantities)}")
    swings = run_sensitivity(result, quantity)
    if not swings:
        raise UserError("no assumption of this contract states a range (low/high)")
    figures = (quantity, result.value(quantity), result.quantities[quantity].unit, swings)
    if format is Format.json:
        emit(view.sensitivity_json(*figures), output, force=force)
    elif format is Format.markdown:
        emit("\n".join(view.sensitivity_markdown(*figures, units.value)), output, force=force)
    else:
        emit_text("\n".join(view.sensitivity_text(*figures)), output, force=force)


@app.command()
def recipes(
    contract: Path = typer.Argument(..., help="A training contract (its model, tokens, batch and accelerators)."),
    only: Optional[str] = typer.Option(None, "--recipes", help="Recipes to compare, comma-separated "
                                                               "(default: full, full-offload, lora, qlora)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, markdown or json."),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal (GB) or binary (GiB)."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """Compare fine-tuning recipes on the contract's accelerators: full, full with CPU offload, LoRA and
    QLoRA, each at the lightest recomputation that fits; the ones that fit first, cheapest first.

    Example: `botec recipes examples/llama3.1-8b-qlora-rtx4090.yaml`
    """
    from botec.explore.recipes import RECIPES, compare_recipes
    from botec.report import explore as view

    inputs = load_inputs(contract, set_)
    chosen = tuple(r.strip() for r in only.split(",") if r.strip()) if only else RECIPES
    results = compare_recipes(inputs, chosen)
    if format is Format.json:
        typer.echo(view.recipes_json(results))
        return
    if format is Format.markdown:
        typer.echo("\n".join(view.recipes_text(results, units.value, markdown=True)))
    else:
        emit_drawn(lambda console: view.recipes_draw(results, console, units.value))
