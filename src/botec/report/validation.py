"""How ``botec validate`` shows botec beside the published figures: text, Markdown or JSON."""

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
    "fits": "every layout fits (these runs ran)",
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
    if fits is None or not result.case.target.get("fits"):
        return ""
    return "fits" if fits else "does not fit"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _rows(result) -> list[list[str]]:
    return [[row.label, _value(row.published, row.unit), _value(row.botec, row.unit), _error(row.error),
             _fits(row.fits, result) or (row.problem or "")
             + (f"not graded: {row.outside_target}" if row.outside_target else "")] for row in result.rows]


def _summary(results) -> list[list[str]]:
    lines = []
    for result in results:
        checks = "; ".join(f"{'met' if met else 'MISSED'}: {_target(name, result.case.target[name])}"
                           for name, met in result.checks.items())
        lines.append([result.case.id, result.case.metric, _percent(result.mean_abs_error),
                      _percent(result.max_abs_error), checks])
    return lines


def _met(results) -> tuple[int, int]:
    checks = [met for result in results for met in result.checks.values()]
    return sum(checks), len(checks)


def validation_text(results, console) -> None:
    from rich.text import Text

    from botec.report.tables import rich_table

    for result in results:
        case = result.case
        table = rich_table(f"{case.id}: {case.title}")
        for column, justify in (("row", "left"), ("published", "right"), ("botec", "right"), ("error", "right"),
                                ("", "left")):
            table.add_column(column, justify=justify, overflow="fold")
        for cells in _rows(result):
            table.add_row(*(Text(c) for c in cells))
        console.print(table)
        console.print(Text(f"  {case.metric}: {case.published_as}", style="dim"))
        if case.flop_convention != "not needed" and not case.flop_convention.startswith("not needed"):
            console.print(Text(f"  FLOP convention: {case.flop_convention}", style="dim"))
        for assumption in case.assumes:
            console.print(Text(f"  assumes: {assumption}", style="dim"))
        console.print(Text(f"  source: {'; '.join(case.source)}", style="dim"))
        console.print()
    table = rich_table("Summary (error = botec / published − 1)")
    for column in ("case", "metric", "mean |error|", "max |error|", "targets"):
        table.add_column(column, overflow="fold")
    for cells in _summary(results):
        table.add_row(*(Text(c) for c in cells))
    console.print(table)
    met, total = _met(results)
    console.print(Text(f"targets met: {met} of {total}", style="bold"))


def validation_markdown(results) -> str:
    from botec.report.tables import markdown_table

    lines = ["# botec validate", ""]
    for result in results:
        case = result.case
        lines += [f"## {case.id}: {case.title}", "",
                  f"Metric: `{case.metric}`: {case.published_as}.", ""]
        lines += markdown_table(["row", "published", "botec", "error", ""], _rows(result))
        lines += [""] + [f"- assumes: {a}" for a in case.assumes] + [f"- source: {s}" for s in case.source] + [""]
    lines += ["## Summary", ""] + markdown_table(["case", "metric", "mean |error|", "max |error|", "targets"],
                                                 _summary(results))
    met, total = _met(results)
    return "\n".join(lines + ["", f"Targets met: {met} of {total}."])


def _finite(value):
    return value if value is not None and math.isfinite(value) else None


def validation_json(results) -> str:
    met, total = _met(results)
    return json.dumps({
        "cases": [{
            "id": r.case.id, "title": r.case.title, "metric": r.case.metric, "published_as": r.case.published_as,
            "flop_convention": r.case.flop_convention, "source": list(r.case.source),
            "verification": r.case.verification, "assumes": list(r.case.assumes), "target": r.case.target,
            "rows": [{"id": row.id, "label": row.label, "metric": row.metric, "unit": row.unit,
                      "published": _finite(row.published), "botec": _finite(row.botec), "error": _finite(row.error),
                      "fits": row.fits, "note": row.note, "problem": row.problem,
                      "outside_target": row.outside_target} for row in r.rows],
            "summary": {"mean_abs_error": _finite(r.mean_abs_error), "max_abs_error": _finite(r.max_abs_error),
                        "targets": r.checks},
        } for r in results],
        "summary": {"targets_met": met, "targets": total},
    }, indent=1)
