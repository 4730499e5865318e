"""The requests a simulation serves: arrival times and prompt and output lengths, drawn or read from a trace.

A request is (arrival seconds, prompt tokens, output tokens). Synthetic workloads follow the contract's
``workload.traffic``:

- **arrivals** at a mean rate λ: ``poisson`` (exponential gaps of mean 1/λ), ``bursty`` (Poisson bursts at
  λ/n, each of ``burst_size`` n requests arriving together: the same mean rate, a burstier stream) or
  ``uniform`` (evenly spaced, 1/λ apart); an infinite rate puts every request at t = 0 (an offline batch);
- **lengths** around the stated mean m: ``fixed`` (m), ``uniform`` (integers in [1, 2m − 1], mean m),
  ``exponential`` (the geometric distribution on 1, 2, ...: the discrete exponential, mean exactly m, at
  least 1), ``lognormal`` (m·exp(σZ − σ²/2) rounded, at least 1: the lognormal whose mean is m, σ =
  ``length_sigma``), or a histogram file (CSV ``tokens,weight``: lengths drawn with probability ∝ weight).

Every draw comes from a numpy Generator seeded by the caller (the same seed, the same requests). A trace
file replays recorded traffic: CSV with the header ``arrival_s,prompt_tokens,output_tokens`` or JSON
lines with those keys; a bad line is a one-line :class:`~botec.errors.ContractError` naming the file,
the line and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from botec.errors import ContractError, read_text_file
from botec.units import format_number

__all__ = ["Workload", "arrival_seconds", "length_tokens", "read_histogram", "read_trace", "synthetic_workload",
           "ARRIVALS", "LENGTHS", "TRACE_FIELDS"]

ARRIVALS = ("poisson", "bursty", "uniform")
LENGTHS = ("fixed", "uniform", "exponential", "lognormal")
TRACE_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")


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


def arrival_seconds(rng: np.random.Generator, count: int, rate_per_s: float, process: str = "poisson",
                    burst_size: int = 8) -> np.ndarray:
    """``count`` arrival times at a mean ``rate_per_s`` (see the module docstring), starting near 0."""
    if process not in ARRIVALS:
        raise ContractError(f"expected one of {', '.join(ARRIVALS)}, got {process!r}", field="arrivals")
    if math.isinf(rate_per_s):
        return np.zeros(count)
    if process == "uniform":
        return np.arange(count) / rate_per_s
    if process == "poisson":
        return np.cumsum(rng.exponential(1 / rate_per_s, count))
    bursts = -(-count // burst_size)
    starts = np.cumsum(rng.exponential(burst_size / rate_per_s, bursts))
    return np.repeat(starts, burst_size)[:count]


def length_tokens(rng: np.random.Generator, count: int, mean_tokens: float, distribution: str = "fixed",
                  sigma: float = 0.5) -> np.ndarray:
    """``count`` integer lengths (at least 1) with mean ``mean_tokens`` (see the module docstring)."""
    mean = max(float(mean_tokens), 1.0)
    if distribution == "fixed":
        return np.full(count, max(round(mean), 1), dtype=np.int64)
    if distribution == "uniform":
        return rng.integers(1, max(round(2 * mean - 1), 1), endpoint=True, size=count)
    if distribution == "exponential":
        return rng.geometric(1 / mean, size=count).astype(np.int64)
    if distribution == "lognormal":
        drawn = mean * np.exp(sigma * rng.standard_normal(count) - sigma ** 2 / 2)
        return np.maximum(np.rint(drawn), 1).astype(np.int64)
    raise ContractError(f"expected one of {', '.join(LENGTHS)}, got {distribution!r}", field="length_distribution")


def read_histogram(path) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, probabilities) of a CSV histogram with the header ``tokens,weight``."""
    origin = str(path)
    rows = _csv_rows(read_text_file(path, "histogram file"), ("tokens", "weight"), origin)
    tokens, weights = [], []
    for line, row in rows:
        tokens.append(_positive_int(row["tokens"], "tokens", line, origin))
        weight = _number(row["weight"], "weight", line, origin)
        if weight < 0:
            raise ContractError(f"expected a weight of at least 0, got {row['weight']!r}", field=f"line {line}: weight",
                                origin=origin)
        weights.append(weight)
    total = math.fsum(weights)
    if not rows or total <= 0:
        raise ContractError("needs at least one row with a positive weight", origin=origin)
    return np.array(tokens, dtype=np.int64), np.array(weights) / total


def _histogram_tokens(rng: np.random.Generator, count: int, path) -> np.ndarray:
    tokens, probabilities = read_histogram(path)
    return rng.choice(tokens, size=count, p=probabilities)


def synthetic_workload(traffic, count: int, rate_per_s: float, prompt_mean_tokens: float, output_mean_tokens: float,
                       seed: int = 0, prompt_histogram=None, output_histogram=None) -> Workload:
    """``count`` requests following a contract's ``workload.traffic`` (its arrivals, burst size, length
    distribution and σ) at ``rate_per_s``, with the given mean lengths; a histogram file replaces the drawn
    prompt or output lengths. Independent streams for arrivals, prompts and outputs (numpy SeedSequence)."""
    arrivals_rng, prompts_rng, outputs_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    arrivals = arrival_seconds(arrivals_rng, count, rate_per_s, traffic.arrivals, traffic.burst_size)
    distribution, sigma = traffic.length_distribution, traffic.length_sigma
    prompts = (_histogram_tokens(prompts_rng, count, prompt_histogram) if prompt_histogram is not None
               else length_tokens(prompts_rng, count, prompt_mean_tokens, distribution, sigma))
    outputs = (_histogram_tokens(outputs_rng, count, output_histogram) if output_histogram is not None
               else length_tokens(outputs_rng, count, output_mean_tokens, distribution, sigma))
    rate = ("all at t = 0" if math.isinf(rate_per_s)
            else f"{traffic.arrivals} arrivals at {format_number(rate_per_s)} requests/s"
            + (f" in bursts of {traffic.burst_size}" if traffic.arrivals == "bursty" else ""))
    lengths = f"{distribution} lengths" if prompt_histogram is None or output_histogram is None else "lengths"
    if prompt_histogram is not None or output_histogram is not None:
        files = (("prompts", prompt_histogram), ("outputs", output_histogram))
        lengths += " (histogram: " + ", ".join(f"{what} {path}" for what, path in files if path) + ")"
    if distribution == "lognormal":
        lengths += f" (σ = {format_number(sigma)})"
    return Workload(arrivals, prompts.astype(np.int64), outputs.astype(np.int64), f"{count:,} requests, {rate}, "
                    f"{lengths} around {format_number(prompt_mean_tokens)} prompt and "
                    f"{format_number(output_mean_tokens)} output tokens")


# --- traces -----------------------------------------------------------------------------------

def read_trace(path) -> Workload:
    """A recorded workload: CSV (header ``arrival_s,prompt_tokens,output_tokens``) or JSON lines with those
    keys, sorted by arrival (stably). Arrival times are seconds from any origin; the first becomes t = 0."""
    origin = str(path)
    text = read_text_file(path, "trace file")
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not first:
        raise ContractError("the trace is empty: expected a CSV header arrival_s,prompt_tokens,output_tokens or JSON "
                            "lines", origin=origin)
    rows = _json_rows(text, origin) if first.startswith("{") else _csv_rows(text, TRACE_FIELDS, origin)
    if not rows:
        raise ContractError("the trace has a header but no requests", origin=origin)
    arrivals = np.empty(len(rows))
    prompts = np.empty(len(rows), dtype=np.int64)
    outputs = np.empty(len(rows), dtype=np.int64)
    for k, (line, row) in enumerate(rows):
        arrival = _number(row["arrival_s"], "arrival_s", line, origin)
        if arrival < 0:
            raise ContractError(f"expected seconds of at least 0, got {row['arrival_s']!r}",
                                field=f"line {line}: arrival_s", origin=origin)
        arrivals[k] = arrival
        prompts[k] = _positive_int(row["prompt_tokens"], "prompt_tokens", line, origin)
        outputs[k] = _positive_int(row["output_tokens"], "output_tokens", line, origin)
    order = np.argsort(arrivals, kind="stable")
    arrivals = arrivals[order] - arrivals[order][0]
    return Workload(arrivals, prompts[order], outputs[order],
                    f"{len(rows):,} requests from the trace {Path(path).name}")


def _csv_rows(text: str, fields: tuple[str, ...], origin: str) -> list[tuple[int, dict]]:
    """(line number, row) of a CSV whose header names ``fields`` (extra columns are ignored)."""
    reader = csv.reader(io.StringIO(text))
    header, rows = None, []
    for row in reader:
        line = reader.line_num
        if not row or all(not cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            missing = [f for f in fields if f not in header]
            if missing:
                raise ContractError(f"the CSV header must name {','.join(fields)} (missing {missing[0]}; got "
                                    f"{','.join(header)!r})", field=f"line {line}", origin=origin)
            continue
        if len(row) < len(header):
            raise ContractError(f"expected {len(header)} columns, got {len(row)}", field=f"line {line}", origin=origin)
        rows.append((line, {name: row[header.index(name)].strip() for name in fields}))
    if header is None:
        raise ContractError(f"expected a CSV header {','.join(fields)}", origin=origin)
    return rows


def _json_rows(text: str, origin: str) -> list[tuple[int, dict]]:
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ContractError(f"not a JSON object ({error.msg})", field=f"line {line}", origin=origin) from None
        if not isinstance(row, dict):
            raise ContractError("expected a JSON object with arrival_s, prompt_tokens, output_tokens",
                                field=f"line {line}", origin=origin)
        missing = [f for f in TRACE_FIELDS if f not in row]
        if missing:
            raise ContractError("missing", field=f"line {line}: {missing[0]}", origin=origin)
        rows.append((line, row))
    return rows


def _number(raw, name: str, line: int, origin: str) -> float:
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ContractError(f"expected a finite number, got {raw!r}", field=f"line {line}: {name}", origin=origin)
    return value


def _positive_int(raw, name: str, line: int, origin: str) -> int:
    value = _number(raw, name, line, origin)
    if value < 1 or value != int(value):
        raise ContractError(f"expected a positive whole number of tokens, got {raw!r}", field=f"line {line}: {name}",
                            origin=origin)
    return int(value)
