"""How ``botec validate`` shows botec beside the published figures: text, Markdown or JSON.

Prediction rows, calibration rows and consistency checks are reported in separate sections, each with its own
statistics; no headline averages across kinds (see ``botec.validate``).
"""

from __future__ import annotations

import json
import math

from botec.units import format_quantity

__all__ = ["validation_json", "validation_markdown", "validation_text", "TARGET_TEXT"]

TARGET_TEXT = {
    "mean_abs_error": "mean |error| ≤ {:.0%}",
    "max_abs_error": "max |error| ≤ {:.0%}",
    "each_within": "every row within ±{:.0%}",
    "exact": "exact to the printed digits",
    "trend": "rising with the rows, as published",
    "fits_device": "every layout fits the device (these runs ran; botec's headroom aside)",
}


def _target(name: str, value) -> str:
    text = TARGET_TEXT[name]
    return text.format(value) if "{" in text else text


def _value(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return format_quantity(value, unit) if unit else f"{value:.4g}"


def _error(error: float | None) -> str:
    return "—" if error is None else f"{error * 100:+.1f} %"


def _fits(fits: bool | None, result) -> str:
    if fits is None or not result.case.target.get("fits_device"):
        return ""
    return "fits the device" if fits else "does not fit the device"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _rows(result) -> list[list[str]]:
    mixed = result.kind == "mixed"
    return [[row.label, _value(row.published, row.unit), _value(row.botec, row.unit), _error(row.error),
             (f"{row.kind}; " if mixed else "") + (_fits(row.fits_device, result) or (row.problem or ""))
             + (f"not graded: {row.outside_target}" if row.outside_target else "")] for row in result.rows]


SECTIONS = {
    "prediction": ("Prediction rows", "no figure in force was fitted to them"),
    "calibration": ("Calibration rows", "the efficiency set in force was fitted to them: the fit's training error, "
                                        "not validation"),
    "consistency": ("Consistency checks", "a formula against the published formula's own number, or a catalog "
                                          "figure against its source: they cannot miss"),
}
SUMMARY_COLUMNS = ["case", "metric", "rows", "mean |error|", "median |error|", "max |error|", "targets"]


def _kind_title(result) -> str:
    kind = result.kind
    if kind == "calibration":
        return f"calibration: {', '.join(sorted({r.efficiency_set for r in result.rows if r.kind == kind}))}"
    return kind


def _summary(results, kind: str) -> list[list[str]]:
    """One line per case with rows of ``kind``: the statistics over those rows and the case's targets."""
    import statistics

    lines = []
    for result in results:
        if kind not in result.kinds:
            continue
        errors = [abs(r.error) for r in result.graded if r.kind == kind and r.error is not None]
        if result.kind == kind:
            checks = "; ".join(f"{'met' if met else 'MISSED'}: {_target(name, result.target[name])}"
                               for name, met in result.checks.items())
        else:
            checks = "its targets judge all its rows (mixed kinds): see the case"
        lines.append([result.case.id, result.case.metric, str(sum(r.kind == kind for r in result.rows)),
                      _percent(sum(errors) / len(errors) if errors else None),
                      _percent(statistics.median(errors) if errors else None),
                      _percent(max(errors) if errors else None), checks])
    return lines


def _headline(kind: str, summary: dict) -> str:
    """One kind's statistics in a line (never an average across kinds)."""
    part = summary[kind]
    if not part["rows"]:
        return f"{kind}: no rows"
    text = (f"{kind}: {part['rows']} rows in {len(part['cases'])} cases, "
            f"mean |error| {_percent(part['mean_abs_error'])}, median {_percent(part['median_abs_error'])}")
    if kind == "prediction":
        time_like = part["time_like"]
        text += (f"; time-like (times, FLOP/s, tokens/s): median |error| {_percent(time_like['median_abs_error'])} "
                 f"over {time_like['rows']} rows")
    return text + f"; targets met {part['targets_met']} of {part['targets']}"


def _efficiency_set_line(results) -> str:
    chosen = {r.efficiency_set for r in results}
    if chosen == {None} or not chosen:
        in_force = sorted({row.efficiency_set or "defaults" for r in results for row in r.rows})
        if in_force in ([], ["defaults"]):
            return "efficiency set: the measured defaults"
        return f"efficiency sets: each contract's own ({', '.join(in_force)})"
    return f"efficiency set: {', '.join(sorted(c for c in chosen if c))} (every case, --efficiency-set)"


def _no_rows(kind: str, results) -> str:
    if kind != "calibration":
        return "none"
    fits = sorted({name for r in results for name in r.case.fitted_by})
    if not fits:
        return "none"
    return "none (" + "; ".join(f"--efficiency-set {name} shows the fit on the rows it was fitted to"
                                for name in fits) + ")"


def validation_text(results, console) -> None:
    from rich.text import Text

    from botec.report.tables import rich_table
    from botec.report.width import print_table, say

    from rich.markup import escape

    from botec.validate import KINDS, summarize

    for result in results:
        case = result.case
        table = rich_table(escape(f"{case.id} [{_kind_title(result)}]: {case.title}"))
        for column, justify in (("row", "left"), ("published", "right"), ("botec", "right"), ("error", "right"),
                                ("", "left")):
            table.add_column(column, justify=justify, overflow="fold")
        for cells in _rows(result):
            table.add_row(*(Text(c) for c in cells))
        print_table(console, table)
        say(console, Text(f"{case.metric}: {case.published_as}", style="dim"), indent=2)
        if case.flop_convention != "not needed" and not case.flop_convention.startswith("not needed"):
            say(console, Text(f"FLOP convention: {case.flop_convention}", style="dim"), indent=2)
        for assumption in case.assumes:
            say(console, Text(f"assumes: {assumption}", style="dim"), indent=2)
        if case.stack:
            say(console, Text(f"stack: {case.stack}", style="dim"), indent=2)
        if case.fitted_by:
            say(console, Text(f"fitted to these rows: {', '.join(case.fitted_by)}", style="dim"), indent=2)
        say(console, Text(f"source: {'; '.join(case.source)}", style="dim"), indent=2)
        console.print()
    summary = summarize(results)
    say(console, Text(f"Summary (error = botec / published − 1; {_efficiency_set_line(results)})", style="bold"))
    for kind in KINDS:
        title, meaning = SECTIONS[kind]
        lines = _summary(results, kind)
        if not lines:
            say(console, Text(f"{title}: {_no_rows(kind, results)}"))
            continue
        table = rich_table(escape(f"{title}: {meaning}"))
        for column in ["case, metric"] + SUMMARY_COLUMNS[2:]:   # the metric under the case: room for the rest
            table.add_column(column, overflow="fold", no_wrap=column == "rows")
        for case_id, metric, *cells in lines:
            table.add_row(Text.assemble(case_id, ("\n" + metric, "dim")), *(Text(c) for c in cells))
        print_table(console, table)
    console.print()
    for kind in KINDS:
        say(console, Text(_headline(kind, summary), style="bold" if kind == "prediction" else ""))


def validation_markdown(results) -> str:
    from botec.report.tables import markdown_table

    from botec.validate import KINDS, summarize

    lines = ["# botec validate", ""]
    for result in results:
        case = result.case
        lines += [f"## {case.id} [{_kind_title(result)}]: {case.title}", "",
                  f"Metric: `{case.metric}`: {case.published_as}.", ""]
        lines += markdown_table(["row", "published", "botec", "error", ""], _rows(result))
        lines += [""] + [f"- assumes: {a}" for a in case.assumes]
        lines += [f"- stack: {case.stack}"] if case.stack else []
        lines += [f"- fitted to these rows: {', '.join(case.fitted_by)}"] if case.fitted_by else []
        lines += [f"- source: {s}" for s in case.source] + [""]
    summary = summarize(results)
    lines += ["## Summary", "", f"Error = botec / published − 1; {_efficiency_set_line(results)}.", ""]
    for kind in KINDS:
        title, meaning = SECTIONS[kind]
        rows = _summary(results, kind)
        lines += [f"### {title}", ""]
        lines += ([meaning[0].upper() + meaning[1:] + ".", ""] + markdown_table(SUMMARY_COLUMNS, rows) if rows
                  else [_no_rows(kind, results)[0].upper() + _no_rows(kind, results)[1:] + "."])
        lines += ["", _headline(kind, summary)[0].upper() + _headline(kind, summary)[1:] + ".", ""] if rows else [""]
    return "\n".join(lines).rstrip() + "\n"


def _finite(value):
    return value if value is not None and math.isfinite(value) else None


def _finite_summary(part: dict) -> dict:
    return {key: _finite_summary(value) if isinstance(value, dict)
            else _finite(value) if isinstance(value, float) else value for key, value in part.items()}


def validation_json(results) -> str:
    """The cases (each row with its kind and the efficiency set in force) and a summary per kind: prediction,
    calibration and consistency, each with its own statistics (never one across kinds)."""
    from botec.validate import KINDS, summarize

    summary = summarize(results)
    chosen = sorted({r.efficiency_set for r in results if r.efficiency_set})
    return json.dumps({
        "cases": [{
            "id": r.case.id, "title": r.case.title, "metric": r.case.metric, "published_as": r.case.published_as,
            "flop_convention": r.case.flop_convention, "source": list(r.case.source),
            "verification": r.case.verification, "assumes": list(r.case.assumes), "stack": r.case.stack,
            "role": r.case.role, "fitted_by": list(r.case.fitted_by), "kind": r.kind, "target": r.target,
            "calibration_target": r.case.calibration_target,
            "rows": [{"id": row.id, "label": row.label, "metric": row.metric, "unit": row.unit,
                      "published": _finite(row.published), "botec": _finite(row.botec), "error": _finite(row.error),
                      "fits_device": row.fits_device, "note": row.note, "problem": row.problem,
                      "outside_target": row.outside_target, "kind": row.kind,
                      "efficiency_set": row.efficiency_set} for row in r.rows],
            "summary": {"mean_abs_error": _finite(r.mean_abs_error), "max_abs_error": _finite(r.max_abs_error),
                        "targets": r.checks},
        } for r in results],
        "summary": {"efficiency_set": chosen[0] if len(chosen) == 1 else None,
                    **{kind: _finite_summary(summary[kind]) for kind in KINDS}},
    }, indent=1)
