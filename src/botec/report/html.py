"""The estimate as one self-contained HTML file: works offline (plotly's JavaScript is inlined once),
the contract's assumptions, each account with its formulas, the findings and the figures."""

from __future__ import annotations

from functools import lru_cache
from html import escape

from typing import TYPE_CHECKING

from botec.report import (ACCOUNT_TITLES, account_rows, assumption_rows, described, headline, layout_line, methods,
                          provenance)

if TYPE_CHECKING:   # types only: report/ draws what it is handed and imports no estimate
    from botec.estimation import Estimate
    from botec.explore.figure_data import FigureData

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2rem auto;padding:0 1rem;
color:#1b1f24}h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%;font-size:.88rem}td,th{border-bottom:1px solid #eee;padding:.3rem .4rem;
text-align:left;vertical-align:top}td.value{text-align:right;white-space:nowrap}code{font-size:.8rem;color:#555}
.finding{margin:.25rem 0}.ok{color:#17803d}.warn{color:#a15c00}.fail{color:#b4232a;font-weight:600}.info{color:#245}
.meta{color:#555;font-size:.9rem}.figure{margin:1rem 0}
"""
_MARKS = {"ok": "✔", "warn": "!", "fail": "✘", "info": "·"}


def figure_divs(result: Estimate, data: FigureData, include_plotlyjs: bool = True) -> list[str]:
    """Each figure (drawn from ``data``: :func:`botec.explore.figure_data.figure_data`) as an HTML <div>; the
    first carries plotly's JavaScript when ``include_plotlyjs``."""
    import plotly.io

    from botec.report.figures import figures

    divs = []
    for index, spec in enumerate(figures(result, data)):   # plotly checks each spec against its schema here
        divs.append(plotly.io.to_html(spec, full_html=False, include_plotlyjs=include_plotlyjs and index == 0,
                                      config={"displaylogo": False, "responsive": True},
                                      div_id=f"figure-{index}"))
    return divs


def findings_html(result: Estimate, system: str = "decimal") -> str:
    return "\n".join(f'<p class="finding {f.level}">{_MARKS[f.level]} <b>{escape(f.account)}</b>: '
                     f"{escape(f.message)}</p>" for f in result.findings_in(system))


@lru_cache(maxsize=4096)
def _escaped_definition(text: str) -> str:
    """A definition's name, meaning or formula, HTML-escaped once (the same few hundred texts in every table; a
    user's text, a value or a source note, is escaped each time and never kept)."""
    return escape(text)


def tables_html(result: Estimate, system: str = "decimal") -> str:
    parts = ["<h2>Inputs and assumptions</h2><table><tr><th>quantity</th><th>value</th><th>range</th>"
             "<th>provenance</th><th>source</th></tr>"]
    for row in assumption_rows(result, system):
        parts.append(f"<tr><td><code>{_escaped_definition(row.name)}</code></td><td class=value>"
                     f"{escape(row.value)}</td><td>{escape(row.range)}</td><td>{escape(row.provenance)}</td><td>{escape(row.source)}</td></tr>")
    parts.append("</table>")
    for account, rows in account_rows(result, system).items():
        parts.append(f"<h2>{escape(ACCOUNT_TITLES[account])}</h2><table><tr><th>quantity</th><th>value</th>"
                     "<th>meaning</th><th>formula</th></tr>")
        for row in rows:
            parts.append(f"<tr><td><code>{_escaped_definition(row.name)}</code></td><td class=value>"
                         f"{escape(row.value)}</td><td>{_escaped_definition(row.meaning)}</td><td><code>"
                         f"{_escaped_definition(row.formula)}</code></td></tr>")
        parts.append("</table>")
    return "\n".join(parts)


def tables_data(result: Estimate, system: str = "decimal", details: bool = True) -> dict:
    """The rows of the report's tables as data, for a page that draws them itself (``botec serve``): ``{inputs:
    [[name, value, range, provenance, source], ...], accounts: [{title, rows: [[name, value, meaning, formula],
    ...]}, ...]}``, every cell plain text (building the same tables as escaped HTML costs twice as much CPU);
    ``details=False``: the summary rows the terminal report shows."""
    return {"inputs": [[row.name, row.value, row.range, row.provenance, row.source]
                       for row in assumption_rows(result, system, details)],
            "accounts": [{"title": ACCOUNT_TITLES[account],
                          "rows": [[row.name, row.value, row.meaning, row.formula] for row in rows]}
                         for account, rows in account_rows(result, system, details).items()]}


def render(result: Estimate, figure_data: FigureData, system: str = "decimal") -> str:
    """The whole page; ``figure_data`` (:func:`botec.explore.figure_data.figure_data`) holds what the figures
    sweep."""
    contract = result.contract
    title = escape(contract.name or "unnamed contract")
    method_lines = "".join(f"<li>{escape(m)}</li>" for m in methods(result) + [layout_line(result)])
    method_lines += "".join(f"<li>note: {escape(note)}</li>" for note in contract.notes)
    figures = "\n".join(f'<div class="figure">{div}</div>' for div in figure_divs(result, figure_data))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>botec estimate: {title}</title>
<style>{_STYLE}</style></head><body>
<h1>botec estimate: {title}</h1>
<p class="meta">{escape(described(contract))}</p>
<p class="meta">{escape(headline(result))}</p><ul class="meta">{method_lines}</ul>
<h2>Findings</h2>{findings_html(result, system)}
<h2>Figures</h2>{figures}
{tables_html(result, system)}
<p class="meta">Generated by {escape(provenance())}. Units: {'binary (GiB)' if system == 'binary' else 'decimal (GB = 10⁹ B)'}.
`botec explain CONTRACT QUANTITY` shows any derivation.</p>
</body></html>
"""


def notebook_html(result: Estimate, system: str = "decimal") -> str:
    """The estimate as a Jupyter cell shows it: the headline, the findings first, then the accounts' tables
    (no figures, no page style: ``botec report`` writes the whole page)."""
    title = escape(result.contract.name or "unnamed contract")
    marks = "".join(f".botec-estimate .{level}{{color:{color}}}" for level, color in
                    (("ok", "#17803d"), ("warn", "#a15c00"), ("fail", "#b4232a"), ("info", "#245")))
    return (f'<div class="botec-estimate"><style>{marks}</style><h3>botec estimate: {title}</h3>'
            f"<p>{escape(headline(result))}</p><h4>Findings</h4>{findings_html(result, system)}"
            f"{tables_html(result, system)}</div>")
