"""A study's outputs: its tidy table (CSV, or Parquet with pyarrow) and a one-page HTML summary.

The table has one row per run (a contract, a vary point, a rate and a seed) and the columns of
:func:`botec.study.columns_of`; an empty cell is a figure the run did not measure (NaN or infinity never reach a
file). The summary aggregates each cell's runs over its seeds, every figure's mean and its 95 % confidence interval

    x̄ ± t(0.975, n − 1) · s / √n          (:func:`botec.simulate.replications.interval`)

and draws one figure: the headline latency against the offered rate, one line per configuration (a contract at a
vary point), the interval as error bars, the contract's latency targets as dashed lines. The figure is a plotly
spec built as a plain dict (:mod:`botec.report.figures`); plotly (``botec[report]``) writes it, its JavaScript
inlined so that the page works offline.
"""

from __future__ import annotations

import json
import math
from html import escape
from botec.report.figures import Spec, _finite, _line_across, _spec
from botec.simulate.replications import interval
from botec.study import MEASURES, Study
from botec.units import format_quantity

__all__ = ["aggregate", "csv_text", "parquet_needed", "study_figure", "study_html", "summary_needed", "write_parquet"]

PLOTTED = ("ttft_p99", "ttft_p90", "ttft_p50", "ttft_mean", "tpot_p99", "tpot_p90", "tpot_p50", "tpot_mean",
           "e2e_p99", "e2e_p90", "e2e_p50", "e2e_mean")
"""The measure the figure draws: the first of these the study measures (else its first measure)."""


def _cell(value) -> str:
    """A value as a CSV cell: a float at full precision (repr), a list or mapping as JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return repr(value) if isinstance(value, float) else str(value)


def csv_text(study: Study, rows: list[dict]) -> str:
    """The table as CSV text (RFC 4180 quoting, a header row first)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(study.columns)
    for row in rows:
        writer.writerow([_cell(row[column]) for column in study.columns])
    return buffer.getvalue()


def parquet_needed(option: str = "-o/--output") -> None:
    """A one-line error unless pyarrow is importable (Parquet is optional; CSV needs nothing)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        from botec.errors import UserError

        raise UserError(f"{option}: writing Parquet needs pyarrow: pip install 'botec[parquet]' (or name a .csv "
                        "file)") from None


def write_parquet(study: Study, rows: list[dict], path, option: str = "-o/--output", force: bool = False) -> None:
    """The table as a Parquet file, written as every output is (:func:`botec.errors.write_text_atomically`)."""
    import io

    import pyarrow
    import pyarrow.parquet

    from botec.errors import write_text_atomically

    columns = {column: _parquet_column([row[column] for row in rows]) for column in study.columns}
    buffer = io.BytesIO()
    pyarrow.parquet.write_table(pyarrow.table(columns), buffer)
    write_text_atomically(path, buffer.getvalue(), option, force)


def _parquet_column(values: list) -> list:
    """A column Arrow can type: a vary field mixing kinds (``[8, auto]``) or holding lists or mappings as text."""
    kinds = {type(value) for value in values if value is not None}
    if kinds <= {int, float} or len(kinds) == 1 and not kinds & {list, dict}:
        return values
    return [None if value is None else _cell(value) for value in values]


def _configuration(study: Study, row: dict) -> str:
    """A configuration's label: the contract's name and its vary point (``serve-llama · supply.accelerator=h200``)."""
    point = [f"{field}={_cell(row[field])}" for field in study.spec.vary]
    return " · ".join([row["contract_name"] or row["contract"]] + point)


def aggregate(study: Study, rows: list[dict]) -> list[dict]:
    """One entry per cell (a configuration at a rate), in the grid's order: ``configuration``, ``rate`` (the study's,
    else the mean offered), ``runs`` measured, ``failed`` (their statuses), and per measure column its
    :class:`~botec.simulate.replications.Interval` over the seeds; the targets of its runs."""
    cells: dict = {}
    for row in rows:
        key = (row["contract"], *(_cell(row[field]) for field in study.spec.vary), row["rate_requests_per_s"])
        cell = cells.setdefault(key, {"configuration": _configuration(study, row), "rows": []})
        cell["rows"].append(row)
    out = []
    for cell in cells.values():
        ok = [row for row in cell["rows"] if row["status"] == "ok"]
        rate = cell["rows"][0]["rate_requests_per_s"]
        if rate is None and ok:
            rate = sum(row["offered_requests_per_s"] for row in ok) / len(ok)
        entry = {"configuration": cell["configuration"], "rate": rate, "runs": len(ok),
                 "failed": sorted({row["status"] for row in cell["rows"] if row["status"] != "ok"}),
                 "ttft_target_s": ok[0]["ttft_target_s"] if ok else None,
                 "tpot_target_s": ok[0]["tpot_target_s"] if ok else None}
        for name in study.measures:
            column = MEASURES[name][0]
            entry[column] = interval([row[column] if row[column] is not None else math.nan for row in ok])
        out.append(entry)
    return out


def _plotted(study: Study) -> str:
    return next((name for name in PLOTTED if name in study.measures), study.measures[0])


def _rate_unit(column: str) -> str:
    """``throughput_requests_per_s``: "requests/s"."""
    return column.removesuffix("_per_s").split("_")[-1] + "/s"


def _shown(column: str, value: float) -> str:
    """A figure in the house's units: seconds as ``49.2 ms``, rates with their unit, a share as a percentage."""
    if not math.isfinite(value):
        return "—"
    if column.endswith("_per_s"):
        return format_quantity(value, _rate_unit(column))
    if column.endswith("_s"):
        return format_quantity(value, "s")
    if column == "share_meeting_targets":
        return f"{value:.1%}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def study_figure(study: Study, cells: list[dict]) -> Spec:
    """The plotted measure's mean against the rate, one line per configuration, the 95 % interval as error bars
    (seconds shown in ms); the latency targets as dashed lines when the measure is TTFT or TPOT."""
    name = _plotted(study)
    column = MEASURES[name][0]
    latency = column.endswith("_s") and not column.endswith("_per_s")
    scale = 1e3 if latency else 1.0
    lines: dict[str, list[dict]] = {}
    for cell in cells:
        lines.setdefault(cell["configuration"], []).append(cell)
    data = []
    for configuration, points in lines.items():
        points = sorted((p for p in points if p["rate"] is not None), key=lambda p: p["rate"])
        data.append({"type": "scatter", "mode": "lines+markers", "name": configuration,
                     "x": [_finite(p["rate"]) for p in points],
                     "y": [_finite(p[column].mean_seconds * scale) for p in points],
                     "error_y": {"type": "data", "visible": True,
                                 "array": [_finite(p[column].half_width_seconds * scale) if
                                           math.isfinite(p[column].half_width_seconds) else 0.0 for p in points]}})
    layout: dict = {}
    metric = name.split("_")[0]
    if metric in ("ttft", "tpot"):
        for target in sorted({c[f"{metric}_target_s"] for c in cells if c[f"{metric}_target_s"] is not None}):
            _line_across(layout, _finite(target * scale), "dash", "crimson",
                         f"{metric.upper()} target {format_quantity(target, 's')}")
    label = _label(name)
    unit = " (ms)" if latency else (f" ({_rate_unit(column)})" if column.endswith("_per_s") else "")
    return _spec(data, layout, f"{label} against the offered rate (mean over seeds, 95 % CI)", f"{label}{unit}",
                 "offered rate (requests/s, whole fleet)")


def _label(name: str) -> str:
    """A measure's name for a reader: ``ttft_p99`` is "TTFT P99", ``throughput`` stays as it is."""
    words = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "end-to-end", "mean": "mean"}
    return " ".join(words.get(word, word.upper() if word[0] == "p" and word[1:].isdigit() else word)
                    for word in name.split("_"))


def _table_html(study: Study, cells: list[dict]) -> str:
    columns = [MEASURES[name][0] for name in study.measures]
    head = "".join(f"<th>{escape(c)}</th>" for c in ["configuration", "rate (requests/s)", "runs", *columns])
    body = []
    for cell in cells:
        figures = "".join(
            f"<td class=value>{escape(_shown(c, cell[c].mean_seconds))}"
            + (f" ± {escape(_shown(c, cell[c].half_width_seconds))}" if math.isfinite(cell[c].half_width_seconds)
               else "") + "</td>" for c in columns)
        failed = f'<br><span class="fail">{escape("; ".join(cell["failed"]))}</span>' if cell["failed"] else ""
        rate = "contract's" if cell["rate"] is None else f"{cell['rate']:g}"
        body.append(f"<tr><td>{escape(cell['configuration'])}{failed}</td><td class=value>{rate}</td>"
                    f"<td class=value>{cell['runs']}</td>{figures}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def study_html(study: Study, rows: list[dict], missing: int = 0) -> str:
    """The summary page: what ran, the cells' table (mean ± 95 % CI over the seeds) and the figure."""
    import plotly.io

    from botec.report import provenance
    from botec.report.html import _STYLE

    cells = aggregate(study, rows)
    figure = plotly.io.to_html(study_figure(study, cells), full_html=False, include_plotlyjs=True,
                               config={"displaylogo": False, "responsive": True}, div_id="study-figure")
    title = escape(study.name)
    spec = study.spec
    points = math.prod(len(values) for values in spec.vary.values())
    grid = (f"{len(spec.contracts)} contract(s) × {points} vary point(s) × {len(spec.rates or [None])} rate(s) × "
            f"{_seed_count(study)} seed(s), {spec.requests:,} requests per run: {len(study.runs):,} runs")
    status = (f'<p class="warn">Interrupted: {len(rows):,} of {len(study.runs):,} runs finished; {missing:,} '
              "missing.</p>" if missing else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>botec study: {title}</title>
<style>{_STYLE}</style></head><body>
<h1>botec study: {title}</h1>
<p class="meta">{escape(spec.description)}</p>
<p class="meta">{escape(grid)}. Each run is <code>botec simulate</code> of one contract at one vary point, rate and
seed; each cell below is its runs' mean ± the 95 % confidence interval over the seeds (x̄ ± t·s/√n).</p>{status}
<h2>Figure</h2><div class="figure">{figure}</div>
<h2>Cells</h2>{_table_html(study, cells)}
<p class="meta">Generated by {escape(provenance())}.</p>
</body></html>
"""


def _seed_count(study: Study) -> int:
    seeds = study.spec.seeds
    return len(seeds) if isinstance(seeds, list) else int(seeds)


def summary_needed(option: str = "--html") -> None:
    """A one-line error unless plotly is importable (the summary's figure)."""
    try:
        import plotly  # noqa: F401
    except ImportError:
        from botec.errors import UserError

        raise UserError(f"{option}: the summary draws with plotly: pip install 'botec[report]'") from None
