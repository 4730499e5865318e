"""How the exploring commands show their results: sweeps, the layout search, solvers, uncertainty and
sensitivity, as text, Markdown or JSON. The commands compute; these functions only render."""

from __future__ import annotations

import csv
import io
import json
import math

from botec.units import format_number, format_quantity

__all__ = ["sweep_rows", "sweep_csv", "sweep_json", "sweep_text", "search_text", "search_json", "serving_search_text",
           "uncertainty_text", "uncertainty_json", "sensitivity_text", "sensitivity_json", "sensitivity_markdown",
           "search_markdown", "serving_search_markdown", "recipes_draw", "SWEEP_ROWS_SHOWN", "SWEEP_VERDICTS"]

SWEEP_ROWS_SHOWN = 200


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


SWEEP_VERDICTS = ("fits", "fits_device")
"""A sweep's verdict columns (:mod:`botec.findings.fit`): fits with the headroom kept; fits the device's memory."""


def sweep_rows(axes: list[str], outputs: list[str], columns: dict, valid, fits, device) -> list[list]:
    """One row per configuration: the axes' values, the outputs, and its verdicts (:data:`SWEEP_VERDICTS`):
    True/False for ``fits`` and ``fits_device``, or None for both (an invalid layout)."""
    return [[float(columns[a][i]) for a in axes] + [float(columns[o][i]) for o in outputs]
            + ([bool(fits[i]), bool(device[i])] if valid[i] else [None, None]) for i in range(len(valid))]


def _csv_cell(value):
    """A sweep's value as CSV writes it: a whole number as an integer (``4``, not ``4.0``), a non-finite one empty,
    a verdict as True / False (empty for an invalid layout)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value


def sweep_csv(header: list[str], rows: list[list]) -> str:
    """Every row of a sweep as CSV: a header line, then a line per configuration, LF line ends."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([[_csv_cell(v) for v in row] for row in rows])
    return buffer.getvalue()


def sweep_json(header: list[str], rows: list[list], counts: dict, fits: int, fits_device: int) -> str:
    return json.dumps({"counts": counts | {"fits": fits, "fits_device": fits_device}, "columns": header,
                       "rows": [[v if v is None or isinstance(v, bool) or _finite(v) else None for v in row]
                                for row in rows]}, indent=1)


def sweep_text(header: list[str], rows: list[list], units: dict[str, str], format: str, system: str = "decimal"):
    """The first rows of a sweep as Markdown lines, or a rich table (``format`` text)."""

    def cell(name: str, value) -> str:
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return "—"
        return format_quantity(float(value), units[name], system) if name in units else format_number(float(value))

    def verdicts(fits, device) -> list[str]:
        if fits is None:
            return ["invalid layout", "—"]
        return ["fits" if fits else "does not fit", "yes" if device else "no"]

    shown = len(header) - len(SWEEP_VERDICTS)
    lines = [[cell(n, v) for n, v in zip(header[:shown], row[:shown])] + verdicts(*row[shown:])
             for row in rows[:SWEEP_ROWS_SHOWN]]
    if format == "markdown":
        from botec.report.tables import markdown_table

        return "\n".join(markdown_table(header, lines))
    from botec.report.tables import rich_table

    table = rich_table()
    for column in header:
        table.add_column(column.split(".")[-1], justify="right")
    for line in lines:
        table.add_row(*line)
    return table


def sweep_summary(counts: dict, fits: int, shown_all: bool, fits_device: int | None = None) -> list[str]:
    device = (f"; {fits_device - fits:,} more fit the device by eating it" if fits_device is not None
              and fits_device > fits else "")
    lines = [f"{counts['candidates']:,} configurations, {counts['evaluated']:,} valid layouts, {fits:,} fit (the "
             f"headroom kept{device})" + ("" if shown_all else f" (first {SWEEP_ROWS_SHOWN} shown; --csv for all)")]
    lines += [f"{rows:,} left out: {reason}" for reason, rows in counts.get("unplaced", {}).items()]
    return lines


def search_json(result) -> str:
    return json.dumps({"candidates": result.candidates, "evaluated": result.evaluated, "feasible": result.feasible,
                       "seconds": result.seconds, "candidates_per_second": result.per_second, "best": result.best},
                      indent=2)


def search_text(result, contract_path, overrides, width: int = 100) -> list[str]:
    """The ranked layouts, a line each, under it the `botec estimate` command that reproduces it, broken between
    its ``--set`` options into lines of at most ``width`` characters to copy as they are."""
    from botec.report.width import shell_lines

    lines = [f"{result.candidates:,} candidate layouts, {result.evaluated:,} valid after the layout rules, "
             f"{result.feasible:,} fit; {result.seconds:.3g} s ({result.per_second:,.0f} candidates/s)"]
    for rank, entry in enumerate(result.best, 1):
        layout, figures = entry["layout"], entry["figures"]
        sequence_parallel = _merged_choice(entry, "strategy.sequence_parallel")
        chunks = layout["strategy.virtual_pipeline_stages"]
        interleaved = f" (v {chunks})" if chunks > 1 else ""
        lines.append(
            f"{rank}. TP {layout['strategy.tensor_parallel']}{sequence_parallel} × CP "
            f"{layout['strategy.context_parallel']} × PP {layout['strategy.pipeline_parallel']}{interleaved}, EP "
            f"{layout['strategy.expert_parallel']}, ZeRO-{_merged_choice(entry, 'strategy.zero_stage')}, micro-batch "
            f"{layout['strategy.micro_batch_size']}, recompute {_merged_choice(entry, 'strategy.recompute')}: step "
            f"{format_quantity(figures['step_seconds'], 's')}, run {format_quantity(figures['run_seconds'], 's')}, "
            f"MFU {figures['end_to_end_mfu']:.3g}, {format_quantity(figures['planned_device_bytes'], 'B')} planned")
        lines += shell_lines([f"botec estimate {contract_path}"] + [f"--set {o}" for o in overrides(layout)], width,
                             indent=3)
    return lines


def _merged_choice(entry: dict, path: str) -> str:
    """A choice of a ranked plan in words, every value its merged candidates take (the search's ``merged``: they are
    the same plan): ``none or selective`` (recompute), ``0, 1 or 2`` (ZeRO), `` + SP`` / `` + SP or not``."""
    values = entry.get("merged", {}).get(path, [entry["layout"][path]])
    if path == "strategy.sequence_parallel":
        return " + SP or not" if len(values) > 1 else (" + SP" if values[0] else "")
    words = [str(value) for value in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _layout_cell(entry: dict) -> str:
    layout = entry["layout"]
    chunks = layout["strategy.virtual_pipeline_stages"]
    return (f"TP {layout['strategy.tensor_parallel']}{_merged_choice(entry, 'strategy.sequence_parallel')} × CP "
            f"{layout['strategy.context_parallel']} × PP {layout['strategy.pipeline_parallel']}"
            f"{f' (v {chunks})' if chunks > 1 else ''}, EP {layout['strategy.expert_parallel']}, "
            f"ZeRO-{_merged_choice(entry, 'strategy.zero_stage')}")


def search_markdown(result, contract_path, overrides, system: str = "decimal") -> list[str]:
    """The layout search as a Markdown table (one row per layout, the command that reproduces it)."""
    from botec.report.tables import markdown_table

    header = ["rank", "layout", "micro-batch", "recompute", "step", "run", "MFU", "planned memory", "command"]
    rows = []
    for rank, entry in enumerate(result.best, 1):
        layout, figures = entry["layout"], entry["figures"]
        command = f"`botec estimate {contract_path} " + " ".join(f"--set {o}" for o in overrides(layout)) + "`"
        rows.append([str(rank), _layout_cell(entry), str(layout["strategy.micro_batch_size"]),
                     _merged_choice(entry, "strategy.recompute"), format_quantity(figures["step_seconds"], "s", system),
                     format_quantity(figures["run_seconds"], "s", system), f"{figures['end_to_end_mfu']:.3g}",
                     format_quantity(figures["planned_device_bytes"], "B", system), command])
    return [f"{result.candidates:,} candidate layouts, {result.evaluated:,} valid after the layout rules, "
            f"{result.feasible:,} fit.", ""] + markdown_table(header, rows)


def _latency_note(percentile: int) -> str:
    """What the serving search's latency columns are: means, where the contract's targets hold at a percentile."""
    return (f"TPOT and TTFT: means at the fleet's load (each row meets the contract's targets, which hold at "
            f"P{percentile})")


def serving_search_markdown(rows: list[dict], system: str = "decimal", percentile: int = 90) -> list[str]:
    """The serving search (accelerator × TP degree, cheapest first) as a Markdown table; its latencies are means
    and say so (the targets hold at the contract's ``percentile``)."""
    from botec.report.tables import markdown_table

    header = ["rank", "accelerator", "TP", "replicas", "accelerators", "batch", "TPOT (mean)", "TTFT (mean)",
              "cost per day"]
    cells = [[str(rank), row["accelerator"], str(row["tensor_parallel"]), format_number(row["replicas"]),
              format_number(row["accelerators"]), f"{row['batch']:.0f}",
              format_quantity(row["tpot_seconds"], "s", system), format_quantity(row["ttft_seconds"], "s", system),
              format_quantity(row["cost_per_day_usd"], "USD", system) if row["cost_per_day_usd"] is not None
              else "no price"] for rank, row in enumerate(rows, 1)]
    return [_latency_note(percentile) + ".", ""] + markdown_table(header, cells)


def serving_search_text(rows: list[dict], percentile: int = 90) -> list[str]:
    """The serving search, a line per accelerator × TP degree, under a line saying the latencies are means."""
    lines = [_latency_note(percentile) + ":"]
    for rank, row in enumerate(rows, 1):
        cost = (format_quantity(row["cost_per_day_usd"], "USD") + " per day" if row["cost_per_day_usd"] is not None
                else "no price")
        lines.append(f"{rank}. {row['accelerator']} TP {row['tensor_parallel']}: "
                     f"{format_quantity(row['replicas'], 'replicas')}, "
                     f"{format_quantity(row['accelerators'], 'accelerators')}, batch {row['batch']:.0f}, mean TPOT "
                     f"{format_quantity(row['tpot_seconds'], 's')}, mean TTFT "
                     f"{format_quantity(row['ttft_seconds'], 's')}, {cost}")
    return lines


def uncertainty_json(mc) -> str:
    return json.dumps({"samples": mc.samples, "seed": mc.seed, "varied": mc.varied,
                       "probability_fits": mc.probability_fits, "probability_deadline": mc.probability_deadline,
                       "percentiles": {k: {"p10": a, "p50": b, "p90": c} for k, (a, b, c) in mc.percentiles.items()}},
                      indent=2)


def uncertainty_text(mc, units: dict[str, str], deadline: str | None, system: str) -> list[str]:
    lines = [f"{mc.samples:,} samples (seed {mc.seed}) of {', '.join(mc.varied) or 'no ranged assumption'}:"]
    constant = 0
    for name, (p10, p50, p90) in mc.percentiles.items():
        if not math.isfinite(p10 - p90) or abs(p90 - p10) <= 1e-9 * max(abs(p10), abs(p90)):
            constant += 1  # the ranges do not reach it: its value is the estimate's (shown by `botec estimate`)
            continue
        unit = units[name]
        lines.append(f"  {name}: P10 {format_quantity(p10, unit, system)}, P50 {format_quantity(p50, unit, system)}, "
                     f"P90 {format_quantity(p90, unit, system)}")
    if constant:
        lines.append(f"  ({constant:,} quantities left out: the same at P10 and P90; -f json lists them)")
    if mc.probability_fits is not None:
        lines.append(f"chance it fits in memory: {mc.probability_fits:.1%}")
    if mc.probability_deadline is not None:
        lines.append(f"chance the run finishes within {deadline}: {mc.probability_deadline:.1%}")
    return lines


def sensitivity_json(output: str, value: float, unit: str, swings) -> str:
    """The tornado as JSON, base units: the output, then each assumption's low/high and the output at each."""
    return json.dumps({"quantity": output, "value": value, "unit": unit,
                       "swings": [{"input": s.input, "low": s.low, "high": s.high, "input_unit": s.unit,
                                   "output_at_low": s.output_at_low, "output_at_high": s.output_at_high,
                                   "swing": s.swing} for s in swings]}, indent=2)


def sensitivity_markdown(output: str, value: float, unit: str, swings, system: str = "decimal") -> list[str]:
    """The tornado as a Markdown table, largest swing first."""
    from botec.report.tables import markdown_table

    rows = [[s.input, format_quantity(s.low, s.unit, system), format_quantity(s.high, s.unit, system),
             format_quantity(s.output_at_low, unit, system), format_quantity(s.output_at_high, unit, system),
             format_quantity(s.swing, unit, system)] for s in swings]
    return [f"`{output}` = {format_quantity(value, unit, system)}; each assumption from its low to its high end:", ""] \
        + markdown_table(["assumption", "low", "high", f"{output} at low", f"{output} at high", "swing"], rows)


def sensitivity_text(output: str, value: float, unit: str, swings) -> list[str]:
    lines = [f"{output} = {format_quantity(value, unit)}; each assumption from its low to its high end:"]
    for s in swings:
        lines.append(f"  {s.input} {format_quantity(s.low, s.unit)} → {format_quantity(s.high, s.unit)}: "
                     f"{format_quantity(s.output_at_low, unit)} → {format_quantity(s.output_at_high, unit)} "
                     f"(swing {format_quantity(s.swing, unit)})")
    return lines


# The columns of the recipe comparison: (quantity, heading).
RECIPE_COLUMNS = (("trainable_parameters", "trainable"), ("planned_device_bytes", "memory"),
                  ("step_seconds", "step"), ("tokens_per_s", "tokens/s"), ("run_seconds", "run"),
                  ("training_cost_usd", "cost"))


def _recipe_cell(result, name: str, system: str) -> str:
    value = result.value(name)
    if value is None:
        return "—"
    return format_quantity(value, result.estimate.quantities[name].unit, system)


def recipes_table(results, system: str = "decimal") -> tuple[list[str], list[list[str]]]:
    """The recipe comparison as a header and rows of text cells (fits first, cheapest first)."""
    header = ["recipe", "recompute", "fits"] + [heading for _, heading in RECIPE_COLUMNS]
    rows = []
    for result in results:
        if result.estimate is None:
            rows.append([result.recipe, "—", "no"] + ["—"] * len(RECIPE_COLUMNS))
            continue
        capacity = result.estimate.quantities["device_memory_bytes"]
        fits = "yes" if result.fits else "no"
        cells = [_recipe_cell(result, name, system) for name, _ in RECIPE_COLUMNS]
        cells[1] = f"{cells[1]} of {capacity.formatted(system)}"
        recipe = result.recipe + (f" + {result.loss} loss" if result.loss else "")
        rows.append([recipe, result.recompute or "—", fits] + cells)
    return header, rows


def recipes_text(results, system: str = "decimal", markdown: bool = False) -> list[str]:
    """The comparison as aligned text (or a Markdown table), then one line per recipe that does not fit."""
    header, rows = recipes_table(results, system)
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(row[i]) for row in [header] + rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header] + rows]
    best = next((r for r in results if r.fits), None)
    lines.append("")
    with_loss = (f", strategy.loss: {best.loss}: a fused linear cross entropy keeps no logits (Liger Kernel, Cut "
                 "Cross-Entropy)" if best is not None and best.loss else "")
    if best is not None and best.value("training_cost_usd") is not None:
        lines.append(f"cheapest that fits: {best.recipe} (recompute {best.recompute}{with_loss})")
    elif best is not None:
        lines.append(f"fastest that fits: {best.recipe} (recompute {best.recompute}{with_loss}); state "
                     "supply.price_per_accelerator_hour to rank by cost")
    else:
        lines.append("no recipe fits: more accelerators, a larger device or a shorter sequence")
    lines += [f"{r.recipe}: {r.why_not}" for r in results if r.why_not]
    return lines


def recipes_draw(results, console, system: str = "decimal") -> None:
    """The comparison as a table on a rich ``console`` (fitted to its width), then the lines under it."""
    from botec.report.tables import rich_table
    from botec.report.width import print_table, say

    header, rows = recipes_table(results, system)
    table = rich_table()
    for index, column in enumerate(header):
        table.add_column(column, justify="left" if index < 3 else "right")
    for row in rows:
        table.add_row(*row)
    print_table(console, table)
    for line in recipes_text(results, system)[len(rows) + 1:]:
        say(console, line)


def recipes_json(results) -> str:
    """The comparison as JSON: every recipe with its figures in base units, or why it does not fit."""
    out = []
    for result in results:
        row = {"recipe": result.recipe, "recompute": result.recompute, "loss": result.loss, "fits": result.fits,
               "why_not": result.why_not or None}
        for name, _ in RECIPE_COLUMNS + (("device_memory_bytes", ""),):
            value = result.value(name)
            row[name] = value if value is None or _finite(value) else None
        out.append(row)
    return json.dumps({"recipes": out}, indent=1)
