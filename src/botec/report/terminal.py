"""The estimate as a readable terminal report (rich): assumptions first, then each account, then findings.

Formulas are shown when the terminal is wide enough (140 columns); `botec explain` and the
Markdown and JSON reports always carry them.
"""

from __future__ import annotations

from botec.estimate import Estimate
from botec.report import ACCOUNT_TITLES, account_rows, assumption_rows, state_table_rows

_STYLES = {"ok": ("✔", "green"), "warn": ("!", "yellow"), "fail": ("✘", "bold red"), "info": ("·", "cyan")}
_WIDE = 140


def _table(title: str):
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)


def render(result: Estimate, console, system: str = "decimal") -> None:
    """Print the report on a rich ``console``."""
    contract = result.contract
    console.print(f"[bold]botec estimate[/bold]: {contract.name or 'unnamed contract'}")
    if contract.description:
        console.print(contract.description, style="dim")
    console.print(f"{result.accelerator_name} × {int(result.value('accelerators')):,}; {result.optimizer_name}")
    console.print()

    table = _table("Inputs and assumptions")
    table.add_column("quantity", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("range", no_wrap=True)
    table.add_column("source", overflow="fold", style="dim")
    for row in assumption_rows(result, system):
        table.add_row(row.name, row.value, row.range, f"{row.provenance} · {row.source}")
    console.print(table)

    wide = console.width >= _WIDE
    for account, rows in account_rows(result, system).items():
        table = _table(ACCOUNT_TITLES[account])
        table.add_column("quantity", no_wrap=True)
        table.add_column("value", justify="right", no_wrap=True)
        table.add_column("meaning", overflow="fold")
        if wide:
            table.add_column("formula", style="dim", overflow="fold")
        for row in rows:
            table.add_row(row.name, row.value, row.meaning, *([row.formula] if wide else []))
        console.print(table)
        if account == "memory":
            state = _table("Training state, bytes per parameter")
            state.add_column("state")
            state.add_column("bytes/parameter", justify="right")
            state.add_column("in a checkpoint")
            for cells in state_table_rows(result):
                state.add_row(*cells)
            console.print(state)

    console.print("[bold]Findings[/bold]")
    for finding in result.findings:
        mark, style = _STYLES[finding.level]
        console.print(f"  [{style}]{mark} {finding.account}[/{style}]: {finding.message}", highlight=False)
