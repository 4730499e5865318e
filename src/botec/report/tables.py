"""Tables in the two written forms every command shares: Markdown lines and a rich table."""

from __future__ import annotations

__all__ = ["markdown_table", "rich_table", "console"]


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: list[str], rows: list[list]) -> list[str]:
    """A Markdown table as lines (cells escaped)."""
    lines = ["| " + " | ".join(_cell(c) for c in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def rich_table(title: str | None = None):
    """An empty rich table in the reports' style."""
    from rich import box
    from rich.table import Table

    return Table(title=title, title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)


def console(output_file=None):
    """A rich console that prints plain text (no highlighting) and keeps long lines whole."""
    from rich.console import Console

    return Console(file=output_file, highlight=False, soft_wrap=False)
