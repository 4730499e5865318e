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
    """A rich console that prints plain text (no highlighting) at the width every text output has
    (:func:`botec.report.width.report_width`: at most 100 columns; a narrower terminal or ``COLUMNS``, its own);
    into a pipe or a file each line without the spaces rich pads it with."""
    from rich.console import Console

    from botec.report.width import report_width

    console = Console(file=output_file, highlight=False, soft_wrap=False)
    console.width = report_width(console.file)
    if not console.is_terminal:
        console.file = _LinesWithoutTrailingSpaces(console.file)
    return console


class _LinesWithoutTrailingSpaces:
    """A text stream that drops the spaces rich pads each line with to the table's (wide) width: a pipe gets each
    line as long as its text."""

    def __init__(self, stream):
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._pending.rstrip(" "))
            self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self._stream, name)
