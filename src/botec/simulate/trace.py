"""A recorded trace, read line by line: CSV (header ``arrival_s,prompt_tokens,output_tokens``, extra columns
ignored, ``#`` comments and blank lines skipped) or JSON lines with those keys.

A trace is read twice and never held whole: the first pass checks every line (a bad one is a one-line
:class:`~botec.errors.ContractError` naming the file, the line and the field), counts the requests and finds
the first arrival and whether the lines come in arrival order; the second streams the requests in blocks as
they are served. Arrival times are seconds from any origin; the earliest becomes t = 0. A trace out of
arrival order is sorted (stably) in memory, 24 bytes a request; so is one read from a pipe, which cannot be
read twice.

Limits, checked before any work, each a one-line error naming ``--trace``: at most ``MAX_TRACE_REQUESTS``
requests and ``MAX_TRACE_BYTES`` bytes (a regular file's size is checked before it is opened); a line is
at most ``MAX_LINE_CHARACTERS`` long, and the file is read in blocks of ``READ_BYTES``, so memory stays
bounded whatever the file: a binary file (a NUL byte) or an endless one (``/dev/zero``) is refused at its
first block.
"""

from __future__ import annotations

import csv
import json
import math
import os
import stat
import warnings
from itertools import repeat
from pathlib import Path
from typing import Iterator

import numpy as np

from botec.errors import ContractError, UserError, check_user_path
from botec.simulation_limits import MAX_REQUESTS, MAX_SPAN_SECONDS
from botec.simulate.requests import (BLOCK_REQUESTS, TRACE_FIELDS, RequestStream, csv_header, csv_row_error,
                                     number_cell, shown, skipped_csv_row, token_cell)

__all__ = ["trace_stream", "read_trace", "MAX_TRACE_REQUESTS", "MAX_TRACE_BYTES", "MAX_LINE_CHARACTERS"]

MAX_TRACE_REQUESTS = MAX_REQUESTS
"""The most requests a trace may hold (the most a simulation serves)."""
MAX_TRACE_BYTES = 10_000_000_000
"""The largest trace file read (10 GB: 100 million lines of 100 bytes)."""
MAX_LINE_CHARACTERS = 1 << 20
"""The longest line (1 Mi characters); longer is not a trace line."""
READ_BYTES = 1 << 20
"""Bytes read at a time."""


def read_trace(path):
    """The whole trace as a :class:`~botec.simulate.workload.Workload` (arrays of every request, sorted by
    arrival, the first at t = 0)."""
    return trace_stream(path).materialize()


def trace_stream(path, block: int = BLOCK_REQUESTS, max_requests: int = MAX_TRACE_REQUESTS,
                 max_bytes: int = MAX_TRACE_BYTES) -> RequestStream:
    """Check the trace at ``path`` whole (the first pass: see the module docstring) and return its requests as a
    stream of blocks, the earliest arrival at t = 0."""
    check_user_path(path, field="--trace")
    origin = str(path)
    try:
        mode = os.stat(path)
    except FileNotFoundError:
        raise ContractError("no such trace file", origin=origin) from None
    except OSError as error:
        raise ContractError(f"cannot read the trace file ({error.strerror or error})", origin=origin) from None
    if stat.S_ISDIR(mode.st_mode):
        raise ContractError("cannot read the trace file (it is a directory)", origin=origin)
    regular = stat.S_ISREG(mode.st_mode)
    if regular and mode.st_size > max_bytes:
        raise UserError(f"--trace {origin}: expected a trace of at most {max_bytes:,} bytes, the file has "
                        f"{mode.st_size:,}")
    kept = [] if not regular else None        # a pipe or a device cannot be read twice: keep its requests
    count, low, high, ordered, previous = 0, math.inf, -math.inf, True, -math.inf
    for arrivals, prompts, outputs, lines in _requests(path, origin, max_bytes, block):
        if count + len(arrivals) > max_requests:
            raise UserError(f"--trace {origin}: expected a trace of at most {max_requests:,} requests, line "
                            f"{lines[max_requests - count]} is one more")
        count += len(arrivals)
        ordered = ordered and previous <= arrivals[0] and bool(np.all(arrivals[1:] >= arrivals[:-1]))
        previous = float(arrivals[-1])
        earliest, latest = int(arrivals.argmin()), int(arrivals.argmax())
        if arrivals[earliest] < low:
            low, low_line = float(arrivals[earliest]), int(lines[earliest])
        if arrivals[latest] > high:
            high, high_line = float(arrivals[latest]), int(lines[latest])
        if high - low > MAX_SPAN_SECONDS:
            late, early = (high_line, low_line) if high_line > low_line else (low_line, high_line)
            raise ContractError(f"expected arrivals within {MAX_SPAN_SECONDS:,.0f} s (31.7 years) of each other; "
                                f"line {early}'s and line {late}'s are {high - low:.3g} s apart",
                                field=f"line {late}: arrival_s", origin=origin)
        if kept is not None:
            kept.append((arrivals, prompts, outputs))
    span = high - low
    rate = (count - 1) / span if span > 0 else math.inf

    def blocks() -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        if ordered and kept is None:
            seen = 0
            for arrivals, prompts, outputs, _ in _requests(path, origin, max_bytes, block):
                seen += len(arrivals)
                yield arrivals - low, prompts, outputs
            if seen != count:
                raise UserError(f"--trace {origin}: the file changed while it was read ({count:,} requests, then "
                                f"{seen:,})")
            return
        parts = kept if kept is not None else [part[:3] for part in _requests(path, origin, max_bytes, block)]
        arrivals, prompts, outputs = (np.concatenate([part[k] for part in parts]) for k in range(3))
        if len(arrivals) != count:
            raise UserError(f"--trace {origin}: the file changed while it was read ({count:,} requests, then "
                            f"{len(arrivals):,})")
        order = np.argsort(arrivals, kind="stable")
        arrivals = arrivals[order] - arrivals[order][0]
        prompts, outputs = prompts[order], outputs[order]
        for start in range(0, count, block):
            yield arrivals[start:start + block], prompts[start:start + block], outputs[start:start + block]

    return RequestStream(count, f"{count:,} requests from the trace {Path(path).name}", rate, blocks, block)


# --- lines and rows --------------------------------------------------------------------------------

def _chunks(path, origin: str, max_bytes: int) -> Iterator[tuple[int, str, list[str]]]:
    """(the first line's number, the text, its lines without their ends) of every ``READ_BYTES`` read: UTF-8 text
    with no NUL byte, lines of at most ``MAX_LINE_CHARACTERS``, at most ``max_bytes`` in all."""
    try:
        file = open(path, "rb")
    except OSError as error:
        raise ContractError(f"cannot read the trace file ({error.strerror or error})", origin=origin) from None
    with file:
        line, total, carry = 0, 0, b""
        while True:
            data = file.read(READ_BYTES)
            total += len(data)
            if total > max_bytes:
                raise UserError(f"--trace {origin}: expected a trace of at most {max_bytes:,} bytes, read more")
            nul = data.find(b"\0")
            if nul >= 0:
                at = line + (carry + data[:nul]).count(b"\n") + 1
                raise ContractError("a NUL byte: expected a CSV or JSON-lines text trace, this is a binary file",
                                    field=f"line {at}", origin=origin)
            if not data:
                if carry:
                    text = _text(carry, line + 1, origin)
                    yield line + 1, text, [text]
                return
            data = carry + data
            end = data.rfind(b"\n") + 1
            carry = data[end:]
            if len(carry) > MAX_LINE_CHARACTERS:
                at = line + data[:end].count(b"\n") + 1
                raise ContractError(f"a line of more than {MAX_LINE_CHARACTERS:,} characters: expected a CSV or "
                                    "JSON-lines trace", field=f"line {at}", origin=origin)
            if not end:
                continue
            text = _text(data[:end - 1], line + 1, origin)
            lines = text.split("\n")
            if max(map(len, lines)) > MAX_LINE_CHARACTERS:
                longest = max(range(len(lines)), key=lambda k: len(lines[k]))
                raise ContractError(f"a line of more than {MAX_LINE_CHARACTERS:,} characters: expected a CSV or "
                                    "JSON-lines trace", field=f"line {line + longest + 1}", origin=origin)
            yield line + 1, text, lines
            line += len(lines)


def _text(data: bytes, line: int, origin: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        at = line + data[:error.start].count(b"\n")
        raise ContractError("not UTF-8 text: expected a CSV or JSON-lines trace", field=f"line {at}",
                            origin=origin) from None


def _requests(path, origin: str, max_bytes: int, block: int):
    """Blocks of ``block`` requests (the last shorter): arrival seconds, prompt and output tokens (numpy) and the
    line of each, every line checked (see :func:`_checked`)."""
    chunks = _chunks(path, origin, max_bytes)
    for number, text, lines in chunks:   # noqa: B007 (all three are read after the loop's break)
        start = next((k for k, line in enumerate(lines) if line.strip()), None)
        if start is not None:
            break
    else:
        raise ContractError("the trace is empty: expected a CSV header arrival_s,prompt_tokens,output_tokens or JSON "
                            "lines", origin=origin)
    rest = _chain((number + start, text, lines[start:]), chunks)
    pieces = (_json_pieces if lines[start].lstrip().startswith("{") else _csv_pieces)(rest, origin)
    held, size, count = [], 0, 0
    for piece in pieces:
        held.append(piece)
        size += len(piece[0])
        while size >= block:
            whole = [np.concatenate(column) for column in zip(*held)]
            yield tuple(column[:block] for column in whole)
            held, size = [tuple(column[block:] for column in whole)], size - block
            count += block
    if size:
        yield tuple(np.concatenate(column) for column in zip(*held))
        count += size
    if not count:
        raise ContractError("the trace has a header but no requests", origin=origin)


def _checked(arrivals: list, prompts: list, outputs: list, lines: list, origin: str):
    """Cells as arrays (arrival seconds, prompt and output tokens, lines), checked at once (numpy); at the first
    bad cell, line by line for its message: arrival seconds finite and at least 0, token counts whole and at
    least 1 (below 2⁵³)."""
    try:
        if not set(map(type, arrivals + prompts + outputs)) <= {int, float, str}:
            raise TypeError("not only numbers")           # JSON's booleans and nulls: the careful way
        if bool in map(type, arrivals + prompts + outputs):
            raise TypeError("booleans")
        values = [np.array(column, dtype=float) for column in (arrivals, prompts, outputs)]
        if not _good(*values).all():
            raise ValueError("a bad cell")
    except (ValueError, TypeError, OverflowError):
        values = [np.empty(len(arrivals)), np.empty(len(arrivals)), np.empty(len(arrivals))]
        for k, line in enumerate(lines):
            raw = arrivals[k].strip() if isinstance(arrivals[k], str) else arrivals[k]
            arrival = number_cell(raw, "arrival_s", line, origin)
            if arrival < 0:
                raise ContractError(f"expected seconds of at least 0, got {shown(raw)}",
                                    field=f"line {line}: arrival_s", origin=origin) from None
            values[0][k] = arrival
            for column, name, raw in ((1, "prompt_tokens", prompts[k]), (2, "output_tokens", outputs[k])):
                values[column][k] = token_cell(raw.strip() if isinstance(raw, str) else raw, name, line, origin)
    return values[0], values[1].astype(np.int64), values[2].astype(np.int64), np.asarray(lines, dtype=np.int64)


def _good(arrivals: np.ndarray, prompts: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    good = (arrivals >= 0) & (arrivals < math.inf)
    for tokens in (prompts, outputs):
        good &= (tokens >= 1) & (tokens < 2.0 ** 53) & (tokens == np.floor(tokens))
    return good


def _plain(text: str, lines: list[str], number: int, width: int, columns: tuple[int, int, int]):
    """A chunk of plain CSV rows (numbers only, ``width`` cells each), parsed at once (``numpy.fromstring``,
    correctly rounded as ``float`` is) and checked; None when it is not plain or a cell is bad (then the
    row-by-row path parses it and names the line)."""
    if set(map(str.count, lines, repeat(","))) != {width - 1}:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = np.fromstring(text.replace("\n", ","), sep=",")
    except ValueError:
        return None
    if len(values) != width * len(lines):
        return None
    table = values.reshape(len(lines), width)
    arrivals, prompts, outputs = (table[:, k] for k in columns)
    if not _good(arrivals, prompts, outputs).all():
        return None
    return (np.ascontiguousarray(arrivals), prompts.astype(np.int64), outputs.astype(np.int64),
            np.arange(number, number + len(lines), dtype=np.int64))


def _csv_pieces(chunks, origin: str):
    """Checked pieces (see :func:`_checked`) of a CSV trace, a chunk at a time: a chunk of plain rows at once
    (:func:`_plain`), any other row by row (csv module: a comment, a blank line, a quoted cell; from the first
    quote on, every row, as a quoted cell may hold a line end)."""
    header, width, columns = None, 0, (0, 0, 0)
    cells: tuple[list, list, list, list] = ([], [], [], [])

    def take(line, row):
        nonlocal header, width, columns
        if skipped_csv_row(row):
            return
        if header is None:
            header = csv_header(row, TRACE_FIELDS, line, origin)
            columns, width = tuple(header.index(name) for name in TRACE_FIELDS), len(header)
            return
        if len(row) < width:
            raise ContractError(f"expected {width} columns, got {len(row)}", field=f"line {line}", origin=origin)
        for column, k in zip(cells, columns):
            column.append(row[k])
        cells[3].append(line)

    def flush(at_least: int = 1):
        nonlocal cells
        if len(cells[0]) >= at_least:
            piece, cells = _checked(*cells, origin), ([], [], [], [])
            return [piece]
        return []

    for number, text, lines in chunks:
        if '"' in text:                       # from here on, row by row through one reader
            last = [""]                       # the line the reader read last (for an error's cell)

            def read(first=(number, text, lines), last=last):   # this chunk's, bound now (B023)
                for _, _, chunk in _chain(first, chunks):
                    for last[0] in chunk:
                        yield last[0]

            reader = csv.reader(read())
            try:
                for row in reader:
                    take(reader.line_num + number - 1, row)
                    yield from flush(1 << 16)
            except csv.Error as error:
                raise csv_row_error(error, reader.line_num + number - 1, origin, last[0], header) from None
            break
        piece = _plain(text, lines, number, width, columns) if header is not None and "#" not in text else None
        if piece is not None:
            yield piece
            continue
        reader = csv.reader(lines)
        try:
            for row in reader:
                take(number + reader.line_num - 1, row)
        except csv.Error as error:
            line = reader.line_num
            raise csv_row_error(error, number + line - 1, origin, lines[line - 1], header) from None
        yield from flush()
    if header is None:
        raise ContractError(f"expected a CSV header {','.join(TRACE_FIELDS)}", origin=origin)
    yield from flush()


def _json_pieces(chunks, origin: str):
    """Checked pieces (see :func:`_checked`) of a JSON-lines trace, a chunk at a time."""
    from botec.jsonfile import load_json_rows

    for number, _, lines in chunks:
        rows = load_json_rows(lines)           # the chunk at once, as one JSON array (then line by line if need be)
        if rows is not None and set(map(type, rows)) == {dict}:
            try:
                yield _checked([row["arrival_s"] for row in rows], [row["prompt_tokens"] for row in rows],
                               [row["output_tokens"] for row in rows], range(number, number + len(rows)), origin)
                continue
            except KeyError:
                pass
        arrivals, prompts, outputs, numbers = [], [], [], []
        for line, text in enumerate(lines, start=number):
            try:
                row = _json_line(text, line, origin)
                arrivals.append(row["arrival_s"])
                prompts.append(row["prompt_tokens"])
                outputs.append(row["output_tokens"])
            except (json.JSONDecodeError, KeyError, TypeError, IndexError) as error:
                del arrivals[len(numbers):], prompts[len(numbers):], outputs[len(numbers):]
                if not text.strip():
                    continue
                if isinstance(error, json.JSONDecodeError):
                    raise ContractError(f"not a JSON object ({error.msg})", field=f"line {line}",
                                        origin=origin) from None
                if not isinstance(row, dict):
                    raise ContractError("expected a JSON object with arrival_s, prompt_tokens, output_tokens",
                                        field=f"line {line}", origin=origin) from None
                missing = next(f for f in TRACE_FIELDS if f not in row)
                raise ContractError("missing", field=f"line {line}: {missing}", origin=origin) from None
            numbers.append(line)
        if numbers:
            yield _checked(arrivals, prompts, outputs, numbers, origin)


def _json_line(text: str, line: int, origin: str):
    """One JSON line, parsed (:func:`botec.jsonfile.load_json_text`: too deep a nesting is one line naming it, an
    integer of more than 4,300 digits reads as infinity, which the row check refuses); a ``JSONDecodeError`` is
    left to the caller."""
    from botec.jsonfile import MAX_JSON_DEPTH, load_json_text

    try:
        return load_json_text(text, origin, line_offset=line - 1)
    except ContractError:   # nested too deep
        raise ContractError(f"a JSON value nested more than {MAX_JSON_DEPTH} levels deep: expected a JSON object of "
                            "numbers with arrival_s, prompt_tokens, output_tokens", field=f"line {line}",
                            origin=origin) from None


def _chain(first, rest):
    yield first
    yield from rest
