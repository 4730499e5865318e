"""The estimate as a readable terminal report (rich): the findings first, then the assumptions and each account.

Formulas are shown when the terminal is wide enough (140 columns); `botec explain` and the
Markdown and JSON reports always carry them, and the intermediate steps (``--details``).
The parallel layout is summarized on one line rather than as a dozen table rows.
"""

from __future__ import annotations

from botec.estimate import Estimate
from botec.report import (ACCOUNT_TITLES, account_rows, assumption_rows, headline, layout_line, methods, provenance,
                          state_table_rows)
from botec.report.tables import PIPED_WIDTH, rich_table
from botec.units import format_number

_STYLES = {"ok": ("✔", "green"), "warn": ("!", "yellow"), "fail": ("✘", "bold red"), "info": ("·", "cyan")}
_WIDE = 140
def render(result: Estimate, console, system: str = "decimal", details: bool = False) -> None:
    """Print the report on a rich ``console`` (intermediate quantities only with ``details``)."""
    from rich.text import Text

    contract = result.contract
    # Sentences are never broken by botec when the output is piped or written to a file (the reader wraps them).
    soft = not console.is_terminal
    console.print(Text.assemble(("botec estimate", "bold"), f": {contract.name or 'unnamed contract'}"), soft_wrap=soft)
    if contract.description:
        console.print(Text(contract.description, style="dim"), soft_wrap=soft)
    console.print(Text(headline(result)), soft_wrap=soft)
    for line in methods(result) + [layout_line(result), provenance()]:
        console.print(Text(f"  {line}", style="dim"), soft_wrap=soft)
    for note in contract.notes:
        console.print(Text(f"  note: {note}", style="yellow"), soft_wrap=soft)
    console.print()

    console.print(Text("Findings", style="bold"))
    for finding in result.findings_in(system):
        mark, style = _STYLES[finding.level]
        console.print(Text.assemble("  ", (f"{mark} {finding.account}", style), f": {finding.message}"), soft_wrap=soft)
    console.print()

    table = rich_table("Inputs and assumptions")
    table.add_column("quantity (provenance · contract field; source)", overflow="fold", ratio=1)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("range", no_wrap=True)
    for row in assumption_rows(result, system, details):
        cell = Text.assemble(row.name, ("\n  " + f"{row.provenance} · {row.source}", "dim"))
        table.add_row(cell, Text(row.value), Text(row.range))
    console.print(table)

    wide = _WIDE <= console.width < PIPED_WIDTH  # a wide terminal shows the formulas; a pipe keeps its columns
    for account, rows in account_rows(result, system, details).items():
        table = rich_table(ACCOUNT_TITLES[account])
        table.add_column("quantity", overflow="fold")
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("meaning", overflow="fold", min_width=24)
        if wide:
            table.add_column("formula", style="dim", overflow="fold")
        for row in rows:
            cells = [Text(row.name), Text(row.value), Text(row.meaning)] + ([Text(row.formula)] if wide else [])
            table.add_row(*cells)
        console.print(table)
        if account == "memory" and state_table_rows(result):
            state = rich_table("Training state, bytes per parameter")
            state.add_column("state")
            state.add_column("bytes/parameter", justify="right")
            state.add_column("in a checkpoint")
            for cells in state_table_rows(result):
                state.add_row(*(Text(c) for c in cells))
            console.print(state)
    if not details:
        console.print(Text("Zero-valued and intermediate quantities: --details, -f markdown / json, or "
                           "`botec explain CONTRACT QUANTITY`.", style="dim"), soft_wrap=soft)

    if result.candidates:
        table = rich_table("Candidate accelerators (same contract; their own prices)")
        for column in ("accelerator", "replicas", "GPUs", "TPOT", "TTFT", "$/day", "$/M out"):
            table.add_column(column, justify="left" if column == "accelerator" else "right", no_wrap=True)
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
            console.print(Text(line, style="dim"), soft_wrap=soft)
