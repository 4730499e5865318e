"""Reading a training log: its format detected, its lines parsed by the format's reader, the warm-up and
outliers dropped (:func:`summarize`), and the file read with a size cap (:func:`read`, :func:`read_measurement`)."""

from __future__ import annotations

import bisect
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from botec.errors import ContractError
from botec.jsonfile import load_json_text
from botec.measure.logs.megatron import EXAMPLE_LINE as MEGATRON_LINE
from botec.measure.logs.megatron import START_HINTS as MEGATRON_HINTS
from botec.measure.logs.megatron import is_iteration_line, parse_megatron
from botec.measure.logs.records import (EXPECTED, FORMATS, OUTLIER_FACTOR, TOOL_NAMES, WARMUP, LogMeasurement,
                                        Parsed, Spread)
from botec.measure.logs.torchtitan import EXAMPLE_LINE as TORCHTITAN_LINE
from botec.measure.logs.torchtitan import START_HINTS as TORCHTITAN_HINTS
from botec.measure.logs.torchtitan import is_step_line, parse_torchtitan

if TYPE_CHECKING:
    from botec.measure.measurement import Measurement
    from botec.measure.serving_bench import ServingBenchmark

_PARSERS = {"megatron": parse_megatron, "torchtitan": parse_torchtitan}
_EXAMPLE_LINES = {"megatron": MEGATRON_LINE, "torchtitan": TORCHTITAN_LINE}


def detect(text: str, path: str | Path = "") -> Optional[str]:
    """``botec``, ``megatron``, ``torchtitan``, or None when the text is none of them."""
    stripped = text.lstrip()
    if Path(str(path)).suffix.lower() == ".json" or stripped.startswith("{"):
        return "botec"
    if stripped.startswith("["):  # a JSON array, or a log whose lines start with a "[titan]"/"[default0]:" prefix
        try:
            load_json_text(stripped)      # ContractError (too deep) is a ValueError: then it is no log either
            return "botec"
        except ValueError:
            pass
    megatron = torchtitan = 0
    for raw in text.splitlines():
        if is_iteration_line(raw):
            megatron += 1
        elif is_step_line(raw):
            torchtitan += 1
    if megatron == torchtitan == 0:
        # no iteration line, but the start of a run (it stopped early): say which lines are missing
        for format, hints in (("megatron", MEGATRON_HINTS), ("torchtitan", TORCHTITAN_HINTS)):
            if any(hint in text for hint in hints):
                return format
        return None
    return "megatron" if megatron >= torchtitan else "torchtitan"


def median_without(ordered: list[float], value: float) -> float:
    """The median of ``ordered`` (sorted, at least two values) with one occurrence of ``value`` left out.

    With n values and ``value`` at index k, the rest are ordered[j] for j < k and ordered[j + 1] for j ≥ k; their
    median is the middle one (n − 1 odd) or the mean of the two middle ones: O(log n) by bisection, where taking
    the median of the n − 1 others afresh for each of n iterations was quadratic (32,000 logged iterations took
    52 s).
    """
    k = bisect.bisect_left(ordered, value)   # any occurrence of a repeated value leaves the same rest

    def rest(j: int) -> float:
        return ordered[j] if j < k else ordered[j + 1]

    m = len(ordered) - 1
    if m % 2:
        return rest(m // 2)
    return (rest(m // 2 - 1) + rest(m // 2)) / 2


def summarize(parsed: Parsed, path: str, warmup: int, outlier_factor: float) -> LogMeasurement:
    """The partial measurement of what a reader found: a batch-size ramp-up dropped (the iterations before the
    final global batch), then the first ``warmup`` iterations, then any slower than ``outlier_factor`` × the
    median of the others; the spread of the rest. Linear in the iterations after one sort."""
    steps = parsed.steps
    notes: list[str] = []
    dropped: list[tuple[int, str]] = []
    if parsed.duplicates:
        notes.append(f"{parsed.duplicates} repeated step line(s) (several ranks logging, or a restart) ignored: "
                     "the first of each step is used")
    candidates = list(steps)
    # a batch-size ramp-up: only the iterations at the final global batch describe the steady run
    batches = [s.global_batch_size for s in steps if s.global_batch_size is not None]
    final_batch = batches[-1] if batches else None
    if final_batch is not None and any(b != final_batch for b in batches):
        ramp = [s for s in candidates if s.global_batch_size is not None and s.global_batch_size != final_batch]
        dropped += [(s.step, f"batch ramp-up (global batch {s.global_batch_size})") for s in ramp]
        candidates = [s for s in candidates if s.global_batch_size in (None, final_batch)]
    warm, candidates = candidates[:warmup], candidates[warmup:]
    dropped += [(s.step, "warm-up") for s in warm]
    if not candidates and warm:
        candidates = [warm[-1]]
        dropped = [d for d in dropped if d[0] != warm[-1].step]
        notes.append(f"only {len(steps)} logged iteration(s): the warm-up could not be dropped, the last one is used")
    paces = sorted(s.pace for s in candidates if s.pace is not None)   # sorted once: each median of the rest
    kept = []                                                          # is then read off it (linear, not n²)
    for step in candidates:
        if step.pace is not None and len(paces) > 1 and step.pace > outlier_factor * median_without(paces, step.pace):
            dropped.append((step.step, f"slower than {outlier_factor:g}× the median of the rest"))
        else:
            kept.append(step)

    def spread(attribute: str) -> Optional[Spread]:
        values = [getattr(s, attribute) for s in kept if getattr(s, attribute) is not None]
        return Spread.of(values) if values else None

    mfus = [s.mfu for s in kept if s.mfu is not None]
    stated = dict(parsed.stated)
    if final_batch is not None:
        stated["global_batch_size"] = float(final_batch)
    reserved = allocated = None
    if parsed.memory:
        allocated = max(a for a, _ in parsed.memory.values()) or None
        reserved = max(r for _, r in parsed.memory.values()) or None
    else:
        memories = [s.memory_reserved_bytes for s in kept if s.memory_reserved_bytes is not None]
        reserved = max(memories) if memories else None
    phases = {}
    for name in dict.fromkeys(name for s in kept for name in s.phases):
        values = [s.phases[name] for s in kept if name in s.phases]
        phases[name] = statistics.median(values)
    dates = [s.date for s in steps if s.date]
    return LogMeasurement(
        path=path, format=parsed.format, logged=len(steps), used=tuple(s.step for s in kept),
        dropped=tuple(sorted(dropped)), step_seconds=spread("seconds"), tokens_per_s=spread("tokens_per_s"),
        tokens_per_s_per_device=spread("tokens_per_s_per_device"),
        flops_per_s_per_device=spread("flops_per_s_per_device"),
        mfu=statistics.median(mfus) if mfus else None, peak_reserved_bytes=reserved,
        peak_allocated_bytes=allocated, memory_ranks=len(parsed.memory), phases=phases, stated=stated,
        device_name=parsed.device_name, date=dates[0] if dates else None, notes=tuple(notes))


def parse(text: str, path: str | Path = "log", format: Optional[str] = None, warmup: int = WARMUP,
          outlier_factor: float = OUTLIER_FACTOR) -> LogMeasurement:
    """The :class:`LogMeasurement` of a log's text (``format`` detected when None); a one-line
    :class:`ContractError` naming the file when it is empty, unrecognised or has no iteration lines."""
    origin = str(path)
    if warmup < 0:
        raise ContractError(f"the warm-up must be 0 or more logged iterations, not {warmup}", field="--warmup")
    if not text.strip():
        raise ContractError(f"empty file: expected {EXPECTED}", origin=origin)
    if format is None:
        format = detect(text, "")
        if format in (None, "botec"):
            raise ContractError(f"not a recognised measurement: expected {EXPECTED}", origin=origin)
    if format not in _PARSERS:
        raise ContractError(f"unknown log format {format!r}: expected one of {', '.join(FORMATS)}",
                            field="--log-format")
    try:
        parsed = _PARSERS[format](text.splitlines())
    except ContractError as error:   # a reader's one line (a step with no time) names the field: add the file
        raise ContractError(error.detail, field=error.field, origin=origin) from None
    if not parsed.steps:
        raise ContractError(f"no {TOOL_NAMES[format]} iteration lines: expected lines like "
                            f"{_EXAMPLE_LINES[format]}", origin=origin)
    return summarize(parsed, origin, warmup, outlier_factor)


MAX_LOG_BYTES = 256 * 1024 * 1024  # a log or measurement file larger than this is refused before it is read whole


def _read_text(path: str | Path) -> str:
    """The file's text; bytes that are not UTF-8 (a progress bar's, a truncated write) replaced."""
    import os

    too_large = f"the measurement file is larger than {MAX_LOG_BYTES:,} bytes; is it the right file?"
    try:
        if os.stat(path).st_size > MAX_LOG_BYTES:
            raise ContractError(too_large, origin=str(path))
        with open(path, "rb") as file:   # at most the cap: /dev/zero or a FIFO has no size to check first
            data = file.read(MAX_LOG_BYTES + 1)
        if len(data) > MAX_LOG_BYTES:
            raise ContractError(too_large, origin=str(path))
    except FileNotFoundError:
        raise ContractError("no such measurement file", origin=str(path)) from None
    except OSError as error:
        raise ContractError(f"cannot read the measurement file ({error.__class__.__name__}: {error})",
                            origin=str(path)) from None
    return data.decode("utf-8", errors="replace")


def read(path: str | Path, format: Optional[str] = None, warmup: int = WARMUP) -> LogMeasurement:
    """Read a Megatron-LM or torchtitan log (``format`` detected when None)."""
    return parse(_read_text(path), path, format, warmup)


def read_measurement(path: str | Path, format: Optional[str] = None, warmup: int = WARMUP,
                     run: Optional[int] = None) -> Union["Measurement", LogMeasurement, "ServingBenchmark"]:
    """What ``botec calibrate`` compares with: a ``botec measure`` file, a training log, or a vLLM or SGLang
    serving-benchmark result, detected from the file (``format``: ``botec``, ``megatron``, ``torchtitan``,
    ``vllm-bench`` or ``sglang-bench`` to force one; ``run``: which run of a serving result, default the last)."""
    from botec.measure import measurement, serving_bench

    if run is not None and format in ("botec",) + FORMATS:
        raise ContractError("picks a run of a serving benchmark result (vllm-bench, sglang-bench), not of a "
                            f"{format} file", field="--run")
    if format == "botec":
        return measurement.read(path)
    text = _read_text(path)
    if format in serving_bench.FORMATS:
        return serving_bench.parse(text, path, format, run)
    if format is None:
        serving = serving_bench.detect(text)
        if serving is not None:
            return serving_bench.parse(text, path, serving, run)
        if run is not None:
            raise ContractError("picks a run of a serving benchmark result (vllm-bench, sglang-bench); this file is "
                                "not one", field="--run", origin=str(path))
        if not text.strip() and Path(str(path)).suffix.lower() != ".json":
            raise ContractError(f"empty file: expected {EXPECTED}", origin=str(path))
        format = detect(text, path)
        if format == "botec":
            return measurement.read(path)
    return parse(text, path, format, warmup)
