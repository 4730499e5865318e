"""The requests a simulation serves, as data: a :class:`Workload` (arrays in memory), a :class:`RequestStream`
(blocks as they are served), and the checks of a file's cells that the trace and histogram readers share.

A cell's check raises a one-line :class:`~botec.errors.ContractError` naming the file, the line and the field, and
shows at most ``SHOWN_CHARACTERS`` of a bad cell (a cell may be a megabyte long).

Shared by :mod:`botec.simulate.workload` (drawn requests, length histograms) and :mod:`botec.simulate.trace`
(recorded requests), which import it and not each other.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from botec.errors import ContractError
from botec.simulation_limits import MAX_REQUESTS

__all__ = ["Workload", "RequestStream", "TRACE_FIELDS", "BLOCK_REQUESTS", "MAX_REQUESTS", "SHOWN_CHARACTERS",
           "shown", "number_cell", "token_cell", "csv_header", "skipped_csv_row", "csv_row_error"]

TRACE_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")
BLOCK_REQUESTS = 65_536
"""Requests drawn or read at a time (a block's arrays: about 1.5 MB)."""
SHOWN_CHARACTERS = 40
"""The most characters of a bad cell an error shows."""


@dataclass(frozen=True)
class Workload:
    """Requests in arrival order: ``arrival_seconds`` (float64, non-decreasing), ``prompt_tokens`` and
    ``output_tokens`` (int64, at least 1); ``description`` says where they came from."""

    arrival_seconds: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    description: str

    def __len__(self) -> int:
        return len(self.arrival_seconds)

    @property
    def mean_rate_per_s(self) -> float:
        """Requests per second over the span of the arrivals (infinite when they all arrive at once)."""
        span = float(self.arrival_seconds[-1] - self.arrival_seconds[0]) if len(self) else 0.0
        return (len(self) - 1) / span if span > 0 else math.inf


@dataclass(frozen=True)
class RequestStream:
    """``count`` requests in arrival order, as blocks: ``blocks()`` yields (arrival seconds, prompt tokens, output
    tokens) arrays of ``block`` requests (the last one shorter), afresh each call. ``mean_rate_per_s``: the
    offered rate (a trace's: (n − 1) / the span of its arrivals); ``description`` says where they came from."""

    count: int
    description: str
    mean_rate_per_s: float
    blocks: Callable[[], Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]]
    block: int = BLOCK_REQUESTS

    def materialize(self) -> Workload:
        """The whole stream as one :class:`Workload` (arrays of every request: for tests and small runs)."""
        parts = list(self.blocks())
        arrivals, prompts, outputs = (np.concatenate([p[k] for p in parts]) if parts else np.zeros(0)
                                      for k in range(3))
        return Workload(arrivals, prompts.astype(np.int64), outputs.astype(np.int64), self.description)


def shown(raw) -> str:
    """``repr(raw)``, cut to ``SHOWN_CHARACTERS`` (its length said) when longer."""
    text = repr(raw)
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS]}... ({len(text):,} characters)"


def number_cell(raw, name: str, line: int, origin: str) -> float:
    """A finite number from a cell (text or a JSON number, not a boolean)."""
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = float(raw)
    except (TypeError, ValueError, OverflowError):     # OverflowError: a JSON integer beyond float's range
        value = math.nan
    if not math.isfinite(value):
        raise ContractError(f"expected a finite number, got {shown(raw)}", field=f"line {line}: {name}",
                            origin=origin)
    return value


def token_cell(raw, name: str, line: int, origin: str) -> int:
    """A whole number of tokens from a cell: at least 1 and below 2⁵³ (float64 holds it exactly)."""
    value = number_cell(raw, name, line, origin)
    if value < 1 or value != int(value) or value >= 2 ** 53:
        raise ContractError(f"expected a positive whole number of tokens below 2^53, got {shown(raw)}",
                            field=f"line {line}: {name}", origin=origin)
    return int(value)


def skipped_csv_row(row: list[str]) -> bool:
    """A row a CSV reader passes over: empty, blank or a comment (its first cell starts with #)."""
    return not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#")


def csv_header(row: list[str], fields: tuple[str, ...], line: int, origin: str) -> list[str]:
    """The header's cells, stripped; a one-line error naming the first of ``fields`` it lacks."""
    header = [cell.strip() for cell in row]
    missing = [f for f in fields if f not in header]
    if missing:
        raise ContractError(f"the CSV header must name {','.join(fields)} (missing {missing[0]}; got "
                            f"{shown(','.join(header))})", field=f"line {line}", origin=origin)
    return header


def csv_row_error(error: csv.Error, line: int, origin: str, text: str = "", header=None) -> ContractError:
    """The one-line error for a row the csv module refuses at ``line`` (whose ``text``, when known, names the cell:
    the first longer than the csv module's field limit, by its header's name)."""
    limit = csv.field_size_limit()
    if "field larger than field limit" not in str(error):
        return ContractError(f"not a CSV row ({error})", field=f"line {line}", origin=origin)
    cells = text.split(",")
    column = next((k for k, cell in enumerate(cells) if len(cell) > limit), None)
    name = header[column] if header is not None and column is not None and column < len(header) else None
    where = f"line {line}: {name}" if name else f"line {line}"
    if not name and column is not None:
        where += f", column {column + 1}"
    expected = "a number" if header is not None else "a CSV header"
    return ContractError(f"a cell of more than {limit:,} characters: expected {expected}", field=where, origin=origin)
