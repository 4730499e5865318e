"""The estimate as a readable terminal report (rich): the findings first, then the assumptions and each account.

The report is at most :data:`REPORT_WIDTH` (100) columns wide, on a wider terminal and into a pipe or a file alike
(a narrower terminal gets its own width): sentences wrap with a hanging indent, and table cells fold. The summary
shows each input's value, range and provenance; ``--details`` adds the contract field and the source note of each
input, the formula under each quantity's meaning, and the intermediate quantities (`botec explain`, the Markdown
and JSON reports carry them too). The parallel layout is summarized on one line rather than as a dozen table rows.
"""

from __future__ import annotations

from botec.estimation import Estimate
from botec.report import (ACCOUNT_TITLES, account_rows, assumption_rows, described, headline, layout_line, methods,
                          provenance, state_table_rows)
from botec.report.tables import rich_table
from botec.units import format_number

_STYLES = {"ok": ("✔", "green"), "warn": ("!", "yellow"), "fail": ("✘", "bold red"), "info": ("·", "cyan")}
REPORT_WIDTH = 100   # columns: the report's widest line, whatever the terminal's width or a pipe's
_HANG = 4            # the indent of a wrapped sentence's further lines
_NAME_COLUMNS = 40   # a quantity's name is kept whole up to this many characters (the longest are some 45)
_VALUE_COLUMNS, _RANGE_COLUMNS = 20, 24   # the inputs' value and range columns at most (a longer unit folds)


def _say(console, text, indent: int = 0) -> None:
    """``text`` (a rich Text) wrapped to the console's width: its first line at ``indent`` columns, the rest
    :data:`_HANG` columns further in (textwrap's breaks, the text's styles kept); a word longer than a line is
    folded."""
    import textwrap

    from rich.text import Text

    if "\t" in text.plain:
        text = text.copy()
        text.expand_tabs()
    if "\n" in text.plain:   # a paragraph at a time (textwrap would make a newline a space)
        for paragraph in text.split("\n"):
            _say(console, paragraph, indent)
        return
    plain = text.plain
    width = max(console.width, indent + _HANG + 20)
    lines = textwrap.wrap(plain, width=width, initial_indent=" " * indent, subsequent_indent=" " * (indent + _HANG),
                          break_on_hyphens=False) or [""]
    start = 0
    for line in lines:
        words = line.lstrip(" ")
        start = plain.index(words, start)
        piece = text[start: start + len(words)]
        console.print(Text(line[: len(line) - len(words)]) + piece, soft_wrap=True)
        start += len(words)


def render(result: Estimate, console, system: str = "decimal", details: bool = False) -> None:
    """Print the report on a rich ``console`` (the contract fields, sources, formulas and intermediate quantities
    only with ``details``), at most :data:`REPORT_WIDTH` columns wide."""
    from rich.text import Text

    console.width = min(console.width, REPORT_WIDTH)
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
    narrow = max((console.width - 16) // 4, 8)
    table.add_column("quantity" + (" (contract field; source)" if details else ""), overflow="fold", ratio=1)
    table.add_column("value", justify="right", overflow="fold",
                     width=min(max((len(row.value) for row in rows), default=5), _VALUE_COLUMNS, narrow))
    table.add_column("range", overflow="fold",
                     width=min(max((len(row.range) for row in rows), default=5), _RANGE_COLUMNS, narrow))
    table.add_column("provenance", width=10, overflow="fold")
    for row in rows:
        name = Text.assemble(row.name, ("\n  " + row.source, "dim")) if details and row.source else Text(row.name)
        table.add_row(name, Text(row.value), Text(row.range), Text(row.provenance))
    console.print(table)

    for account, rows in account_rows(result, system, details).items():
        table = rich_table(ACCOUNT_TITLES[account])
        table.expand = True   # the meaning takes what the name and the value leave of the width
        narrow = max((console.width - 4) // 3, 8)     # the name up to half the width: kept whole in 100 columns
        table.add_column("quantity", overflow="fold", width=min(max(len(row.name) for row in rows), _NAME_COLUMNS,
                                                                max((console.width - 4) // 2, 8)))
        table.add_column("value", justify="right", overflow="fold",
                         width=min(max(len(row.value) for row in rows), _VALUE_COLUMNS, narrow))
        table.add_column("meaning" + (" (formula)" if details else ""), overflow="fold", ratio=1)
        for row in rows:
            meaning = (Text.assemble(row.meaning, ("\n" + row.formula, "dim")) if details and row.formula
                       else Text(row.meaning))
            table.add_row(Text(row.name), Text(row.value), meaning)
        console.print(table)
        if account == "memory" and state_table_rows(result):
            state = rich_table("Training state, bytes per parameter")
            state.add_column("state", overflow="fold")
            state.add_column("bytes/parameter", justify="right")
            state.add_column("in a checkpoint")
            for cells in state_table_rows(result):
                state.add_row(*(Text(c) for c in cells))
            console.print(state)
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
        console.print(table)
        for line in unable:
            _say(console, Text(line.strip(), style="dim"), indent=2)
