"""The estimate as a readable terminal report (rich): the findings first, then the assumptions and each account.

The report is at most :data:`REPORT_WIDTH` (100) columns wide, on a wider terminal and into a pipe or a file alike
(a narrower terminal gets its own width; the rule of every command, :mod:`botec.report.width`): sentences wrap with a
hanging indent, and table cells fold. The summary
shows each input's value, range and provenance; ``--details`` adds the contract field and the source note of each
input, the formula under each quantity's meaning, and the intermediate quantities (`botec explain`, the Markdown
and JSON reports carry them too). The parallel layout is summarized on one line rather than as a dozen table rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botec.report import (ACCOUNT_TITLES, account_rows, assumption_rows, described, headline, layout_line, methods,
                          provenance, state_table_rows)
from botec.report import width as _width
from botec.report.tables import rich_table
from botec.report.width import REPORT_WIDTH, print_table, say as _say  # noqa: F401   (REPORT_WIDTH: the rule)
from botec.units import format_number

if TYPE_CHECKING:   # a type only: report/ draws the Estimate it is handed (botec.estimation shows itself through it)
    from botec.estimation import Estimate

_STYLES = {"ok": ("✔", "green"), "warn": ("!", "yellow"), "fail": ("✘", "bold red"), "info": ("·", "cyan")}
_NAME_COLUMNS = 40   # a quantity's name is kept whole up to this many characters (the longest are some 45)
_VALUE_COLUMNS, _RANGE_COLUMNS = 20, 24   # the inputs' value and range columns wrap beyond (never inside a word)


def render(result: Estimate, console, system: str = "decimal", details: bool = False) -> None:
    """Print the report on a rich ``console`` (the contract fields, sources, formulas and intermediate quantities
    only with ``details``), at most :data:`REPORT_WIDTH` columns wide."""
    from rich.text import Text

    console.width = min(console.width, _width.REPORT_WIDTH)
    contract = result.contract
    _say(console, Text.assemble(("botec estimate", "bold"), f": {contract.name or 'unnamed contract'}"))
    description = described(contract)
    if description:
        _say(console, Text(description, style="dim"))
    _say(console, Text(headline(result)))
    for line in methods(result) + [layout_line(result), provenance()]:
        _say(console, Text(line, style="dim"), indent=2)
    for note in contract.notes:
        _say(console, Text(f"note: {note}", style="yellow"), indent=2)
    console.print()

    console.print(Text("Findings", style="bold"))
    for finding in result.findings_in(system):
        mark, style = _STYLES[finding.level]
        _say(console, Text.assemble((f"{mark} {finding.account}", style), f": {finding.message}"), indent=2)
    console.print()

    rows = assumption_rows(result, system, details)
    table = rich_table("Inputs and assumptions")
    table.expand = True   # the quantity's name takes what the value, range and provenance leave of the width
    table.add_column("quantity" + (" (contract field; source)" if details else ""), overflow="fold", ratio=1)
    table.add_column("value", justify="right", overflow="fold", max_width=_VALUE_COLUMNS)
    table.add_column("range", overflow="fold", max_width=_RANGE_COLUMNS)
    table.add_column("provenance", overflow="fold")
    for row in rows:
        name = Text.assemble(row.name, ("\n  " + row.source, "dim")) if details and row.source else Text(row.name)
        table.add_row(name, Text(row.value), Text(_without_unit_of(row.range, row.value)), Text(row.provenance))
    print_table(console, table)

    for account, rows in account_rows(result, system, details).items():
        table = rich_table(ACCOUNT_TITLES[account])
        table.expand = True   # the meaning takes what the name and the value leave of the width
        table.add_column("quantity", overflow="fold", max_width=_NAME_COLUMNS)
        table.add_column("value", justify="right", overflow="fold", max_width=_VALUE_COLUMNS)
        table.add_column("meaning" + (" (formula)" if details else ""), overflow="fold", ratio=1)
        for row in rows:
            meaning = (Text.assemble(row.meaning, ("\n" + row.formula, "dim")) if details and row.formula
                       else Text(row.meaning))
            table.add_row(Text(row.name), Text(row.value), meaning)
        print_table(console, table)
        if account == "memory" and state_table_rows(result):
            state = rich_table("Training state, bytes per parameter")
            state.add_column("state", overflow="fold")
            state.add_column("bytes/parameter", justify="right")
            state.add_column("in a checkpoint")
            for cells in state_table_rows(result):
                state.add_row(*(Text(c) for c in cells))
            print_table(console, state)
    if not details:
        _say(console, Text("Contract fields, sources, formulas, zero-valued and intermediate quantities: --details, "
                           "-f markdown / json, or `botec explain CONTRACT QUANTITY`.", style="dim"))

    if result.candidates:
        table = rich_table("Candidate accelerators (same contract; their own prices)")
        for column in ("accelerator", "replicas", "GPUs", "TPOT", "TTFT", "$/day", "$/M out"):
            table.add_column(column, justify="left" if column == "accelerator" else "right", overflow="fold")
        unable = []
        for key, outcome in result.candidates:
            if isinstance(outcome, str):
                unable.append(f"  {key}: {outcome}")
                continue
            cost = outcome.get("serving_cost_per_day_usd")
            per_million = outcome.get("cost_per_million_output_tokens_usd")
            table.add_row(key, format_number(outcome["replicas"].value),
                          format_number(outcome["serving_accelerators"].value),
                          outcome["time_per_output_token_seconds"].formatted(system),
                          outcome["time_to_first_token_seconds"].formatted(system),
                          cost.formatted(system) if cost else "no price",
                          per_million.formatted(system) if per_million else "—")
        print_table(console, table)
        for line in unable:
            _say(console, Text(line.strip(), style="dim"), indent=2)


def _without_unit_of(range_text: str, value: str) -> str:
    """A range as the inputs table shows it beside its value: without the unit when it is the value's
    (``1 × 10⁻⁵ – 6 × 10⁻⁵`` beside ``2 × 10⁻⁵ failures/accelerator-hour``), so that the columns' longest words
    fit 100 columns together; Markdown, JSON and HTML keep the unit."""
    from botec.report import _shared_unit

    unit = _shared_unit(range_text, value)
    return range_text[: -len(unit)] if unit else range_text
