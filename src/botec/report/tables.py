"""Tables in the two written forms every command shares: Markdown lines and a rich table."""

from __future__ import annotations

__all__ = ["PIPED_WIDTH", "markdown_table", "rich_table", "console"]


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


# The width a console takes when it writes to a pipe or a file (and COLUMNS does not say one): wide enough that no
# table cell is folded, which a pager or `grep` would show broken; rich tables take only the width they need.
PIPED_WIDTH = 4000


def console(output_file=None):
    """A rich console that prints plain text (no highlighting) and keeps long lines whole: on a terminal its width,
    into a pipe or a file :data:`PIPED_WIDTH` columns unless ``COLUMNS`` is set."""
    import os

    from rich.console import Console

    console = Console(file=output_file, highlight=False, soft_wrap=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console.width = PIPED_WIDTH
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
