"""How wide every command's text output is, and how its lines wrap: one rule for all of them.

The rule: a text output is at most :data:`REPORT_WIDTH` (100) columns wide, on a terminal, into a pipe or into a
file alike; a narrower terminal, or ``COLUMNS``, gives its own width (never below :data:`MIN_WIDTH`). Lines break
at spaces only, never inside a word or a number nor between a number and its unit, and a line's further lines
hang :data:`HANG` columns deeper than its first (textwrap's rule, ``break_on_hyphens`` off); only a word longer
than a whole line, a URL, is cut. A table's columns are given widths no narrower than their longest word
(:func:`print_table`); a table whose longest words alone overflow the width is printed as one wrapped line per
row instead: its first cell as a heading, the others after their columns' names.

- :func:`report_width`: the width a stream gets;
- :func:`wrap`: plain text (``botec explain``, ``solve``, ``search``, ``calibrate`` ...) wrapped to a width;
- :func:`say`: a rich ``Text`` printed on a console, wrapped the same way, its styles kept;
- :func:`print_table`: a rich table fitted to the console, or its rows as wrapped lines;
- :func:`shell_lines`: a command line to copy, broken between its arguments with `` \\`` continuations.
"""

from __future__ import annotations

import os
import re
import textwrap

__all__ = ["REPORT_WIDTH", "MIN_WIDTH", "HANG", "report_width", "wrap", "wrap_line", "say", "print_table",
           "shell_lines"]

REPORT_WIDTH = 100   # columns: the widest line of any text output, whatever the terminal's width or a pipe's
MIN_WIDTH = 40       # columns: a terminal narrower than this still gets 40 (a sentence needs room to wrap)
HANG = 4             # columns: how much deeper a wrapped line's further lines start than its first


def report_width(stream=None) -> int:
    """The width of text written to ``stream``: ``COLUMNS`` when it is set, else the terminal's width when
    ``stream`` is a terminal, else :data:`REPORT_WIDTH`; at most :data:`REPORT_WIDTH`, at least
    :data:`MIN_WIDTH`."""
    width = 0
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit():
        width = int(columns)
    elif stream is not None:
        try:
            if stream.isatty():
                width = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            width = 0
    return max(MIN_WIDTH, min(width or REPORT_WIDTH, REPORT_WIDTH))


# The space between a number and the unit after it (``2.15 GB``, ``16 layers``, ``23.4 %``): never a break.
_NUMBER_AND_UNIT = re.compile(r"(?<=\d) (?=(?:[^\W\d_]|[%$µ°])\S{0,15}(?: |$))")
_KEPT = "\x00"   # stands for such a space while textwrap breaks the line (textwrap breaks only at ASCII whitespace)
_GLUED = re.compile(r"\S*\x00\S*")


def wrap_line(line: str, width: int, hang: int = HANG) -> list[str]:
    """``line`` as lines of at most ``width`` characters, broken at spaces (not the one between a number and its
    unit): the first keeps the line's indent, the rest start ``hang`` columns deeper. A word longer than a whole
    line (a URL) is the one thing cut, at the width."""
    if len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip(" "))
    further = min(indent + hang, width // 2)
    text = _SCIENTIFIC.sub(_KEPT, _NUMBER_AND_UNIT.sub(_KEPT, line.lstrip(" ").replace(_KEPT, " ")))
    text = _GLUED.sub(lambda glued: glued.group() if len(glued.group()) <= width - further
                      else glued.group().replace(_KEPT, " "), text)   # a number and unit too long for a line: apart
    lines = textwrap.wrap(text, width=width, initial_indent=" " * indent, subsequent_indent=" " * further,
                          break_long_words=True, break_on_hyphens=False) or [text]
    return [piece.replace(_KEPT, " ") for piece in lines]


def wrap(text: str, width: int | None = None, hang: int = HANG) -> str:
    """Every line of ``text`` wrapped to ``width`` (default :func:`report_width` of a pipe) by :func:`wrap_line`."""
    width = width or report_width()
    return "\n".join(piece for line in text.split("\n") for piece in wrap_line(line, width, hang))


def say(console, text, indent: int = 0) -> None:
    """``text`` (a rich Text, or a str taken as plain text) printed on ``console`` wrapped to its width: its first
    line at ``indent`` columns, the rest :data:`HANG` columns further in, the text's styles kept."""
    from rich.text import Text

    if isinstance(text, str):
        text = Text(text)
    if "\t" in text.plain:
        text = text.copy()
        text.expand_tabs()
    if "\n" in text.plain:   # a paragraph at a time (textwrap would make a newline a space)
        for paragraph in text.split("\n"):
            say(console, paragraph, indent)
        return
    plain = text.plain
    width = max(console.width, indent + HANG + 20)
    lines = wrap_line(" " * indent + plain, width) if plain.strip() else [""]
    start = 0
    for line in lines:
        words = line.lstrip(" ")
        start = plain.index(words, start)
        piece = text[start: start + len(words)]
        console.print(Text(line[: len(line) - len(words)]) + piece, soft_wrap=True)
        start += len(words)


def _cell_text(cell) -> str:
    return cell.plain if hasattr(cell, "plain") else str(cell)


# Inside a number written ``6 × 10⁻⁵``: spaces that never break, in a sentence or a table's cell.
_SCIENTIFIC = re.compile(r"(?<=\d) (?=× 10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻])|(?<=\d ×) (?=10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻])")


def _cell_lines(plain: str, width: int) -> list[str]:
    """A table cell's text as lines of at most ``width`` characters, broken at spaces but never inside a number
    (``6 × 10⁻⁵``), a line at a time; a word longer than the width cut."""
    lines = []
    for paragraph in plain.split("\n"):
        glued = _SCIENTIFIC.sub(_KEPT, paragraph)
        pieces = textwrap.wrap(glued, width=max(width, 1), break_long_words=True, break_on_hyphens=False,
                               drop_whitespace=True) if len(paragraph) > width else [glued]
        lines += [piece.replace(_KEPT, " ") for piece in pieces] or [""]
    return lines


def _as_text(console, cell):
    """A cell as the rich Text it renders to (a str is markup, as rich reads it), or None for another renderable."""
    from rich.text import Text

    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return console.render_str(cell)
    return None


def _rewrapped(text, width: int):
    """``text`` (a rich Text) broken into lines of at most ``width`` by :func:`_cell_lines`, its styles kept."""
    from rich.text import Text

    plain = text.plain
    if all(len(line) <= width for line in plain.split("\n")):
        return text
    if not text.spans:   # one style for the whole cell: its lines as they are
        out = Text("\n".join(line.strip() for line in _cell_lines(plain, width)), style=text.style)
        out.justify, out.no_wrap = text.justify, text.no_wrap
        return out
    pieces, start = [], 0
    for line in _cell_lines(plain, width):
        words = line.strip()
        if words:
            start = plain.index(words, start)
            pieces.append(text[start: start + len(words)])
            start += len(words)
        else:
            pieces.append(Text(""))
    out = Text("\n").join(pieces)
    out.justify, out.no_wrap = text.justify, text.no_wrap
    return out


def print_table(console, table) -> None:
    """Print a rich ``table`` at most the console's width with no word or number split: its title as a wrapped
    line, then the table with each column at least as wide as its longest word (headers wrapped first, then the
    widest column narrowed first, as rich collapses a table, but never below that word), each cell broken into
    lines here (at spaces, never inside ``6 × 10⁻⁵``), or, when those words alone overflow the width, each row as
    one wrapped line of ``column: cell`` pairs."""
    from rich.cells import cell_len
    from rich.measure import Measurement
    from rich.text import Text

    if table.title:
        title = table.title
        say(console, Text.from_markup(title, style=table.title_style or "") if isinstance(title, str) else title)
        table.title = None
    columns = table.columns
    options = console.options
    shortest, bodies, longest = [], [], []   # each column: its longest word, its cells' widest line, its widest

    def size(cell, text) -> tuple[int, int]:   # (longest unbroken piece, longest line) of a cell (its Text or None)
        if text is None:
            measured = Measurement.get(console, options, cell)
            return measured.minimum, measured.maximum
        plain = text.plain
        if plain.isascii():   # one column a character, no number to glue: the words' and the lines' lengths
            return max(map(len, plain.split()), default=0), max(map(len, plain.split("\n")), default=0)
        glued = _SCIENTIFIC.sub(_KEPT, plain)
        return (max((cell_len(word.replace(_KEPT, " ")) for word in glued.split()), default=0),
                max((cell_len(line) for line in plain.split("\n")), default=0))

    texts = [[_as_text(console, cell) for cell in column._cells] for column in columns]   # each cell rendered once
    for index, column in enumerate(columns):
        padding = table._get_padding_width(index)   # rich's own padding and border arithmetic (private, stable)
        header = size(column.header, _as_text(console, column.header)) if table.show_header else (0, 0)
        cells = [size(cell, text) for cell, text in zip(column._cells, texts[index])] or [(1, 1)]
        least = max(header[0], *(cell[0] for cell in cells))
        body = max(header[0], *(cell[1] for cell in cells))
        most = max(header[1], body)
        if column.max_width is not None:   # a column asked to wrap beyond this many characters, but not in a word
            body, most = min(body, max(column.max_width, least)), min(most, max(column.max_width, least))
            column.max_width = None
        if column.width is not None:
            least = body = most = max(column.width, least)
        elif column.no_wrap:
            least = body = most
        shortest.append(least + padding)
        bodies.append(body + padding)
        longest.append(most + padding)
    room = console.width - table._extra_width
    if sum(shortest) > room:
        _print_rows(console, table)
        return
    widths = list(longest)
    total = sum(widths)
    for floor in (bodies, shortest):   # wrap the headers first, then the cells: the widest column gives first
        while total > room:
            above = [i for i, (width, least) in enumerate(zip(widths, floor)) if width > least]
            if not above:
                break
            widths[max(above, key=widths.__getitem__)] -= 1   # the first of the widest
            total -= 1
    collapsed = widths != longest
    for index, (column, width) in enumerate(zip(columns, widths)):
        content = width - table._get_padding_width(index)
        if collapsed or column.ratio is None:   # an expanding table's ratio column takes what is left, unbroken
            column.width = content
        column.no_wrap = False
        column._cells = [cell if text is None else _rewrapped(text, content)
                         for cell, text in zip(column._cells, texts[index])]
        if isinstance(column.header, (str, Text)):
            column.header = _rewrapped(_as_text(console, column.header), content)
    if collapsed:
        table.expand = False
    console.print(table)


def _print_rows(console, table) -> None:
    """A table too narrow for its words, a row at a time: its first cell as the row's heading (``column: cell``
    when it is one line; a cell of several lines, a name and its source, as they are), then the other cells as one
    wrapped line of ``column: cell; column: cell`` under it (a nameless column's cell alone), by :func:`say`."""
    names = [" ".join(_cell_text(column.header).split()) for column in table.columns]
    rows = zip(*(list(column.cells) for column in table.columns))
    for row in rows:
        heading = [line.strip() for line in _cell_text(row[0]).split("\n") if line.strip()] or [""]
        if len(heading) == 1 and names[0]:
            heading = [f"{names[0]}: {heading[0]}"]
        say(console, heading[0], indent=2)
        for line in heading[1:]:
            say(console, line, indent=2 + HANG)
        parts = [" ".join(_cell_text(cell).split()) for cell in row[1:]]
        pairs = [f"{name}: {part}" if name else part for name, part in zip(names[1:], parts) if part]
        if pairs:
            say(console, "; ".join(pairs), indent=2 + HANG)


def shell_lines(groups: list[str], width: int, indent: int = 0) -> list[str]:
    """A shell command as lines of at most ``width`` characters to copy as they are: ``groups`` (``botec estimate
    job.yaml``, ``--set strategy.tensor_parallel=4``, ...) kept whole, each line but the last ending in `` \\``,
    the further lines :data:`HANG` columns deeper."""
    lines = [" " * indent + groups[0]]
    for group in groups[1:]:
        if len(lines[-1]) + 1 + len(group) + 2 <= width:
            lines[-1] += " " + group
        else:
            lines[-1] += " \\"
            lines.append(" " * (indent + HANG) + group)
    return lines
