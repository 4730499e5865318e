"""The requests a simulation serves: arrival times and prompt and output lengths, drawn or read from a trace.

A request is (arrival seconds, prompt tokens, output tokens). Synthetic workloads follow the contract's
``workload.traffic``:

- **arrivals** at a mean rate λ: ``poisson`` (exponential gaps of mean 1/λ), ``bursty`` (Poisson bursts at
  λ/n, each of ``burst_size`` n requests arriving together: the same mean rate, a burstier stream) or
  ``uniform`` (evenly spaced, 1/λ apart); an infinite rate puts every request at t = 0 (an offline batch);
- **lengths** around the stated mean m: ``fixed`` (m), ``uniform`` (integers in [1, 2m − 1], mean m; with
  ``length_range`` r, integers in [m − ⌊r·m⌉, m + ⌊r·m⌉] for m rounded, the mean ± r of it),
  ``exponential`` (the geometric distribution on 1, 2, ...: the discrete exponential, mean exactly m, at
  least 1), ``lognormal`` (m·exp(σZ − σ²/2) rounded, at least 1: the lognormal whose mean is m, σ =
  ``length_sigma``), or a histogram file (CSV ``tokens,weight``: lengths drawn with probability ∝ weight).

Every draw comes from a numpy Generator seeded by the caller (the same seed, the same requests). A trace
file replays recorded traffic: CSV with the header ``arrival_s,prompt_tokens,output_tokens`` or JSON
lines with those keys; a bad line is a one-line :class:`~botec.errors.ContractError` naming the file,
the line and the field (:mod:`botec.simulate.trace` reads it line by line).

A simulation takes its requests as a :class:`RequestStream`: blocks of ``BLOCK_REQUESTS`` requests drawn
(or read) as they are served, so memory does not grow with the count. Drawn in blocks, the requests are
the very ones drawn at once (numpy's Generators draw element by element; the arrivals' running sum
carries the last block's last time into the next), as a test checks.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Iterator

import numpy as np

from botec.errors import ContractError, read_text_file
from botec.simulate.requests import (BLOCK_REQUESTS, MAX_REQUESTS, TRACE_FIELDS, RequestStream, Workload, csv_header,
                                     csv_row_error, number_cell, skipped_csv_row, token_cell)
from botec.units import format_number

__all__ = ["Workload", "RequestStream", "arrival_seconds", "arrival_blocks", "length_tokens", "read_histogram",
           "read_trace", "synthetic_workload", "synthetic_stream", "ARRIVALS", "LENGTHS", "TRACE_FIELDS",
           "BLOCK_REQUESTS", "MAX_REQUESTS"]

ARRIVALS = ("poisson", "bursty", "uniform")
LENGTHS = ("fixed", "uniform", "exponential", "lognormal")
MAX_HISTOGRAM_BYTES = 64_000_000
"""A histogram file larger than this is refused before it is read (a length histogram is kilobytes)."""


def arrival_seconds(rng: np.random.Generator, count: int, rate_per_s: float, process: str = "poisson",
                    burst_size: int = 8) -> np.ndarray:
    """``count`` arrival times at a mean ``rate_per_s`` (see the module docstring), starting near 0."""
    return np.concatenate(list(arrival_blocks(rng, count, rate_per_s, process, burst_size, max(count, 1))) or
                          [np.zeros(0)])


def arrival_blocks(rng: np.random.Generator, count: int, rate_per_s: float, process: str = "poisson",
                   burst_size: int = 8, block: int = BLOCK_REQUESTS) -> Iterator[np.ndarray]:
    """:func:`arrival_seconds` in blocks of ``block`` times (bursty: whole bursts a block), the same times: a
    Poisson block's first gap is added to the last block's last time before the running sum."""
    if process not in ARRIVALS:
        raise ContractError(f"expected one of {', '.join(ARRIVALS)}, got {process!r}", field="arrivals")
    if process == "bursty":
        block = max(block // burst_size, 1) * burst_size
    done, last = 0, 0.0
    while done < count:
        size = min(block, count - done)
        if math.isinf(rate_per_s):
            times = np.zeros(size)
        elif process == "uniform":
            times = np.arange(done, done + size) / rate_per_s
        elif process == "poisson":
            gaps = rng.exponential(1 / rate_per_s, size)
            gaps[0] += last
            times = np.cumsum(gaps)
            last = float(times[-1])
        else:
            gaps = rng.exponential(burst_size / rate_per_s, -(-size // burst_size))
            gaps[0] += last
            starts = np.cumsum(gaps)
            last = float(starts[-1])
            times = np.repeat(starts, burst_size)[:size]
        done += size
        yield times


def length_tokens(rng: np.random.Generator, count: int, mean_tokens: float, distribution: str = "fixed",
                  sigma: float = 0.5, spread: float | None = None) -> np.ndarray:
    """``count`` integer lengths (at least 1) with mean ``mean_tokens`` (see the module docstring); ``spread``: the
    uniform lengths' half-width as a share of the mean (None: 1 to 2m − 1)."""
    mean = max(float(mean_tokens), 1.0)
    if distribution == "fixed":
        return np.full(count, max(round(mean), 1), dtype=np.int64)
    if distribution == "uniform" and spread is not None:
        middle = max(round(mean), 1)
        half = min(round(spread * middle), middle - 1)
        return rng.integers(middle - half, middle + half, endpoint=True, size=count)
    if distribution == "uniform":
        return rng.integers(1, max(round(2 * mean - 1), 1), endpoint=True, size=count)
    if distribution == "exponential":
        return rng.geometric(1 / mean, size=count).astype(np.int64)
    if distribution == "lognormal":
        drawn = mean * np.exp(sigma * rng.standard_normal(count) - sigma ** 2 / 2)
        return np.maximum(np.rint(drawn), 1).astype(np.int64)
    raise ContractError(f"expected one of {', '.join(LENGTHS)}, got {distribution!r}", field="length_distribution")


def read_histogram(path) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, probabilities) of a CSV histogram with the header ``tokens,weight``: p_i = w_i / Σ w_j.

    Weights are relative, so they are scaled by the largest first, p_i = (w_i / w_max) / Σ (w_j / w_max): the same
    probabilities, and a sum that stays finite for any finite weights (each term at most 1), where Σ w_j of two
    weights of 1e308 overflowed (OverflowError in math.fsum)."""
    origin = str(path)
    rows = _csv_rows(read_text_file(path, "histogram file", max_bytes=MAX_HISTOGRAM_BYTES), ("tokens", "weight"),
                     origin)
    tokens, weights = [], []
    for line, row in rows:
        tokens.append(token_cell(row["tokens"], "tokens", line, origin))
        weight = number_cell(row["weight"], "weight", line, origin)
        if weight < 0:
            raise ContractError(f"expected a weight of at least 0, got {row['weight']!r}", field=f"line {line}: weight",
                                origin=origin)
        weights.append(weight)
    largest = max(weights, default=0.0)
    if largest <= 0:
        raise ContractError("needs at least one row with a positive weight", origin=origin)
    relative = [weight / largest for weight in weights]
    return np.array(tokens, dtype=np.int64), np.array(relative) / math.fsum(relative)


def _histogram_tokens(rng: np.random.Generator, count: int, histogram) -> np.ndarray:
    tokens, probabilities = histogram
    return rng.choice(tokens, size=count, p=probabilities)


def synthetic_workload(traffic, count: int, rate_per_s: float, prompt_mean_tokens: float, output_mean_tokens: float,
                       seed: int = 0, prompt_histogram=None, output_histogram=None) -> Workload:
    """``count`` requests following a contract's ``workload.traffic`` (its arrivals, burst size, length
    distribution and σ) at ``rate_per_s``, with the given mean lengths; a histogram file replaces the drawn
    prompt or output lengths. Independent streams for arrivals, prompts and outputs (numpy SeedSequence).
    The whole of :func:`synthetic_stream`, in memory."""
    return synthetic_stream(traffic, count, rate_per_s, prompt_mean_tokens, output_mean_tokens, seed,
                            prompt_histogram, output_histogram, block=max(count, 1)).materialize()


def synthetic_stream(traffic, count: int, rate_per_s: float, prompt_mean_tokens: float, output_mean_tokens: float,
                     seed: int = 0, prompt_histogram=None, output_histogram=None,
                     block: int = BLOCK_REQUESTS) -> RequestStream:
    """:func:`synthetic_workload`'s requests drawn ``block`` at a time as they are served (the same requests)."""
    distribution, sigma = traffic.length_distribution, traffic.length_sigma
    spread = getattr(traffic, "length_range", None)
    if traffic.arrivals == "bursty":                  # whole bursts a block: every block but the last holds ``block``
        block = max(block // traffic.burst_size, 1) * traffic.burst_size
    histograms = [read_histogram(path) if path is not None else None for path in (prompt_histogram, output_histogram)]

    def draw(rng, size, mean, histogram):
        return (_histogram_tokens(rng, size, histogram) if histogram is not None
                else length_tokens(rng, size, mean, distribution, sigma, spread)).astype(np.int64)

    def blocks():
        arrivals_rng, prompts_rng, outputs_rng = (np.random.default_rng(s)
                                                  for s in np.random.SeedSequence(seed).spawn(3))
        for times in arrival_blocks(arrivals_rng, count, rate_per_s, traffic.arrivals, traffic.burst_size, block):
            yield (times, draw(prompts_rng, len(times), prompt_mean_tokens, histograms[0]),
                   draw(outputs_rng, len(times), output_mean_tokens, histograms[1]))

    rate = ("all at t = 0" if math.isinf(rate_per_s)
            else f"{traffic.arrivals} arrivals at {format_number(rate_per_s)} requests/s"
            + (f" in bursts of {traffic.burst_size}" if traffic.arrivals == "bursty" else ""))
    lengths = f"{distribution} lengths" if prompt_histogram is None or output_histogram is None else "lengths"
    if prompt_histogram is not None or output_histogram is not None:
        files = (("prompts", prompt_histogram), ("outputs", output_histogram))
        lengths += " (histogram: " + ", ".join(f"{what} {path}" for what, path in files if path) + ")"
    if distribution == "lognormal":
        lengths += f" (σ = {format_number(sigma)})"
    if distribution == "uniform" and spread is not None:
        lengths += f" (± {format_number(100 * spread)} %)"
    description = (f"{count:,} requests, {rate}, {lengths} around {format_number(prompt_mean_tokens)} prompt and "
                   f"{format_number(output_mean_tokens)} output tokens")
    return RequestStream(count, description, rate_per_s, blocks, block)


# --- traces -----------------------------------------------------------------------------------

def read_trace(path) -> Workload:
    """A recorded workload, whole: CSV (header ``arrival_s,prompt_tokens,output_tokens``) or JSON lines with those
    keys, sorted by arrival (stably), the first at t = 0 (:func:`botec.simulate.trace.read_trace`; a simulation
    streams it with :func:`botec.simulate.trace.trace_stream`)."""
    from botec.simulate.trace import read_trace as whole

    return whole(path)


def _csv_rows(text: str, fields: tuple[str, ...], origin: str) -> list[tuple[int, dict]]:
    """(line number, row) of a CSV whose header names ``fields`` (extra columns are ignored)."""
    reader = csv.reader(io.StringIO(text))
    header, rows = None, []
    try:
        for row in reader:
            line = reader.line_num
            if skipped_csv_row(row):
                continue
            if header is None:
                header = csv_header(row, fields, line, origin)
                continue
            if len(row) < len(header):
                raise ContractError(f"expected {len(header)} columns, got {len(row)}", field=f"line {line}",
                                    origin=origin)
            rows.append((line, {name: row[header.index(name)].strip() for name in fields}))
    except csv.Error as error:
        line = reader.line_num
        lines = text.splitlines()
        raise csv_row_error(error, line, origin, lines[line - 1] if 0 < line <= len(lines) else "", header) from None
    if header is None:
        raise ContractError(f"expected a CSV header {','.join(fields)}", origin=origin)
    return rows
