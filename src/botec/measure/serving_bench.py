"""Serving-benchmark results as measurements: a vLLM or SGLang benchmark file read into one measured run.

A serving benchmark sends requests to one server and records, per run, the requests completed, the
tokens in and out, the achieved rates and the latencies each request saw. ``botec calibrate`` puts
botec's estimate of that server at that load beside it (:func:`botec.measure.calibrate.calibrate_serving`).

Formats, as the tools write them (checked against their sources):

vLLM, ``benchmarks/benchmark_serving.py --save-result`` (vllm-project/vllm @0049e29c41fd383bda519a3f250e3227713081ef)
and its successor ``vllm bench serve --save-result`` (``vllm/benchmarks/serve.py``
@009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): one JSON object (``--append-result`` appends one per line),

- setup: ``date`` (``YYYYMMDD-HHMMSS``), ``backend`` (and ``endpoint_type``, ``label`` in serve.py),
  ``model_id``, ``tokenizer_id``, ``num_prompts``, any ``--metadata KEY=VALUE`` pairs as top-level keys;
- traffic: ``request_rate`` (a number, or the string ``"inf"``: every prompt sent at once),
  ``burstiness`` (1: Poisson arrivals, else gamma), ``max_concurrency`` (null: unlimited);
- results: ``duration`` (s), ``completed``, ``failed`` (serve.py), ``total_input_tokens``,
  ``total_output_tokens``, ``request_throughput`` (completed / duration, requests/s),
  ``request_goodput`` (``request_goodput:`` with a stray colon in older benchmark_serving.py),
  ``output_throughput``, ``total_token_throughput`` (tokens/s);
- latencies, for each metric of ``--percentile-metrics`` (default ``ttft,tpot,itl``; ``e2el`` on
  request): ``mean_``, ``median_``, ``std_`` and ``pNN_`` + ``ttft_ms``, ``tpot_ms``, ``itl_ms``,
  ``e2el_ms``, one ``pNN`` per ``--metric-percentiles`` (default ``99``; ``p99.9`` for a fraction);
- with ``--save-detailed``: ``input_lens``, ``output_lens``, ``ttfts``, ``itls``, ``generated_texts``,
  ``errors`` (serve.py keeps ``latencies`` and ``queue_times`` in every file).

SGLang, ``python -m sglang.bench_serving --output-file F`` (sgl-project/sglang ``python/sglang/bench_serving.py``
@0033168f0f58b2bc05aa0273bd475d9c01bafb1c): JSON lines, one object appended per run,

- ``backend``, ``dataset_name``, ``request_rate`` (``Infinity`` when unlimited: Python's json writes the
  float as is), ``max_concurrency``, ``random_input_len``, ``random_output_len``, ...;
- ``duration``, ``completed``, ``total_input_tokens``, ``total_output_tokens``,
  ``total_output_tokens_retokenized``, ``request_throughput``, ``input_throughput``, ``output_throughput``;
- ``mean_``, ``median_``, ``std_``, ``p99_`` + ``e2e_latency_ms``, ``ttft_ms``, ``tpot_ms``, ``itl_ms``
  (and ``p95_itl_ms``), ``concurrency`` (the sum of the requests' latencies over the duration: the mean
  number in flight), ``accept_length``; with ``--output-details`` the per-request lists as in vLLM.

Both compute a request's TPOT as (latency − TTFT) / (output tokens − 1), the first token excluded, and
average it over the requests with more than one output token; ITL is every gap between two streamed
chunks. Times are in milliseconds in the files and in seconds here.

The measured traffic is read from the totals: prompt tokens per request = ``total_input_tokens`` /
``completed``, output tokens per request = ``total_output_tokens`` / ``completed``, and the load is
``request_throughput``, the rate the server achieved (for a run capped by ``max_concurrency`` the load it
saw, whatever ``request_rate`` asked).

Example::

    >>> from botec.measure.serving_bench import parse
    >>> text = ('{"date": "20250301-120000", "backend": "vllm", "model_id": "m", "request_rate": 4.0, '
    ...         '"max_concurrency": null, "duration": 50.0, "completed": 200, "total_input_tokens": 204800, '
    ...         '"total_output_tokens": 51200, "request_throughput": 4.0, "output_throughput": 1024.0, '
    ...         '"mean_ttft_ms": 30.0, "p99_ttft_ms": 60.0, "mean_tpot_ms": 9.0, "p99_tpot_ms": 11.0}')
    >>> run = parse(text, "run.json")
    >>> run.format, run.prompt_tokens, run.output_tokens, run.mean_ttft_seconds, run.percentile
    ('vllm-bench', 1024.0, 256.0, 0.03, 99)
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from botec.errors import ContractError
from botec.jsonfile import load_json_text
from botec.units import excerpt

__all__ = ["FORMATS", "TOOL_NAMES", "ServingBenchmark", "detect", "parse"]

FORMATS = ("vllm-bench", "sglang-bench")
TOOL_NAMES = {"vllm-bench": "vLLM", "sglang-bench": "SGLang"}
MILLISECONDS = 1e-3
MAX_COUNT = 10**18               # requests and tokens: a whole number below this (as a measurement file's counts)
PERCENTILES = (99, 95, 90, 50)   # the percentiles a botec latency target may name, the most telling first

EXPECTED = {
    "vllm-bench": "a vLLM serving benchmark result (`vllm bench serve --save-result` or "
                  "benchmarks/benchmark_serving.py --save-result: one JSON object)",
    "sglang-bench": "an SGLang serving benchmark result (`python -m sglang.bench_serving --output-file`: JSON "
                    "lines, one object per run)",
}
# Keys only one tool writes: how a file is recognised (a truncated file still has its first keys).
_MARKERS = {
    "vllm-bench": ('"mean_e2el_ms"', '"tokenizer_id"', '"burstiness"', '"model_id"', '"num_prompts"',
                   '"total_token_throughput"', '"request_goodput'),
    "sglang-bench": ('"mean_e2e_latency_ms"', '"input_throughput"', '"dataset_name"',
                     '"total_output_tokens_retokenized"', '"accept_length"'),
}
_SHARED = ('"request_throughput"', '"total_output_tokens"', '"mean_tpot_ms"')   # both write these
# What each required figure is, for the message when it is missing.
_MEANING = {"completed": "the requests that succeeded",
            "total_input_tokens": "the prompt tokens of the completed requests",
            "total_output_tokens": "the output tokens of the completed requests",
            "duration": "the run's wall time in seconds",
            "request_throughput": "completed requests per second",
            "mean_ttft_ms": "the mean time to first token in ms",
            "mean_tpot_ms": "the mean time per output token in ms"}
_HINT = {"vllm-bench": {"mean_ttft_ms": "; vLLM writes it for the metrics in --percentile-metrics (keep ttft,tpot) "
                                        "when it has a tokenizer",
                        "mean_tpot_ms": "; vLLM writes it for the metrics in --percentile-metrics (keep ttft,tpot) "
                                        "when it has a tokenizer"}}
_PERCENTILE_KEY = re.compile(r"^p(\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)_ms$")
_METRIC = {"e2el": "e2e", "e2e_latency": "e2e", "ttft": "ttft", "tpot": "tpot", "itl": "itl"}


@dataclass(frozen=True)
class ServingBenchmark:
    """One measured run of a serving benchmark, in base units (seconds, tokens, requests/s)."""

    path: str
    format: str                       # vllm-bench | sglang-bench
    run: int                          # which run of the file (1 = the first)
    runs: int                         # runs the file holds
    completed: int                    # requests that succeeded
    total_input_tokens: int
    total_output_tokens: int
    duration_seconds: float
    requests_per_s: float             # request_throughput: completed / duration, the achieved load
    output_tokens_per_s: float        # output_throughput
    mean_ttft_seconds: float
    mean_tpot_seconds: float          # per request (e2e − TTFT) / (output − 1), averaged over requests
    mean_itl_seconds: Optional[float] = None
    mean_e2e_seconds: Optional[float] = None
    # metric (ttft, tpot, itl, e2e) -> {percentile: seconds}; the median is the 50th
    percentiles: dict = field(default_factory=dict)
    request_rate: Optional[float] = None       # the rate asked for (inf: every prompt sent at once)
    max_concurrency: Optional[int] = None
    burstiness: Optional[float] = None
    failed: Optional[int] = None
    date: Optional[str] = None                 # YYYY-MM-DD
    backend: Optional[str] = None
    model: Optional[str] = None                # model_id as served
    dataset: Optional[str] = None
    concurrency: Optional[float] = None        # SGLang: mean requests in flight (Σ latency / duration)
    notes: tuple = ()

    @property
    def tool(self) -> str:
        return TOOL_NAMES[self.format]

    @property
    def prompt_tokens(self) -> float:
        """Mean prompt tokens per completed request: total_input_tokens / completed."""
        return self.total_input_tokens / self.completed

    @property
    def output_tokens(self) -> float:
        """Mean output tokens per completed request: total_output_tokens / completed."""
        return self.total_output_tokens / self.completed

    @property
    def percentile(self) -> Optional[int]:
        """The percentile to compare at: the first of 99, 95, 90, 50 the file gives for both TTFT and TPOT."""
        for level in PERCENTILES:
            if level in self.percentiles.get("ttft", {}) and level in self.percentiles.get("tpot", {}):
                return level
        return None

    @property
    def closed_loop(self) -> bool:
        """A run capped by max_concurrency: a new request is sent when one finishes (once the rate allows)."""
        return self.max_concurrency is not None

    @property
    def burst(self) -> bool:
        """Every prompt sent at once (request_rate inf) with no concurrency cap: a queue drained, not steady
        arrivals."""
        return self.request_rate is not None and math.isinf(self.request_rate) and self.max_concurrency is None


def detect(text: str) -> Optional[str]:
    """``vllm-bench`` or ``sglang-bench`` when the text is such a result (complete or truncated: the keys each
    tool writes first are enough), else None."""
    if not text.lstrip().startswith("{") or '"botec.measurement/' in text:
        return None
    scores = {format: sum(key in text for key in keys) for format, keys in _MARKERS.items()}
    best = max(scores, key=scores.get)
    if scores[best] > 0:
        return best
    return "vllm-bench" if all(key in text for key in _SHARED) else None


def _objects(text: str, origin: str, format: str) -> list[dict]:
    """The file's result objects: one JSON object (possibly indented), or one per line (JSON lines)."""
    try:
        whole = load_json_text(text, origin)   # nested too deep: refused here, naming the line
    except json.JSONDecodeError as error:
        whole, whole_error = None, error
    if isinstance(whole, dict):
        return [whole]
    if whole is not None:
        raise ContractError(f"expected {EXPECTED[format]}, found a JSON {type(whole).__name__}", origin=origin)
    objects = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = load_json_text(line, origin, line_offset=number - 1)
        except json.JSONDecodeError as error:
            if not objects:  # not JSON lines: say where the one object breaks off
                broken, where = whole_error, f"at line {whole_error.lineno}, column {whole_error.colno}"
            else:
                broken, where = error, f"at line {number}, column {error.colno}"
            raise ContractError(f"corrupt or truncated JSON {where} ({broken.msg}); expected {EXPECTED[format]}",
                                origin=origin) from None
        if not isinstance(value, dict):
            raise ContractError(f"line {number}: expected a JSON object per run, found a JSON "
                                f"{type(value).__name__}", origin=origin)
        objects.append(value)
    return objects


# What a zero means where the tools write one for "nothing recorded".
_ZERO_MEANS = {"completed": "no request completed",
               "mean_ttft_ms": "the benchmark recorded no first-token time (a backend without streaming?)",
               "mean_tpot_ms": "no request produced more than one output token"}


def _is_number(value) -> bool:
    """A JSON number a float holds finitely: not a bool, not NaN or ±Infinity (which 1e400 and 5,000-digit integers
    read as), not an integer beyond 10^308."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _is_count(value, least: int = 1) -> bool:
    """A whole number from ``least`` to below MAX_COUNT (1e3 and 1000.0 count; 2.5, 2^63 and Infinity do not)."""
    return _is_number(value) and least <= value < MAX_COUNT and float(value).is_integer()


def _count(data: dict, key: str, origin: str, run_text: str, what: str, least: int = 0) -> Optional[int]:
    """An optional count at ``key`` (absent or null: None); anything but a whole number from ``least`` to below
    10^18 is refused in one line naming the key."""
    value = data.get(key)
    if value is None:
        return None
    if not _is_count(value, least):
        raise ContractError(f"{excerpt(value)}{run_text}: expected {what}, a whole number from {least} to below "
                            f"10^18", field=key, origin=origin)
    return int(value)


def _number(data: dict, key: str, origin: str, run_text: str, *, required: bool = True, format: str = "",
            whole: bool = False) -> Optional[float]:
    """A finite number above 0 at ``key`` (``whole``: a count, a whole number below 10^18): a one-line error
    naming the key when required and absent or wrong, or when optional and a number that is not above 0 (a zero
    or negative rate, time or latency is no measurement); None when optional and absent or not a number."""
    value = data.get(key)
    if _is_count(value) if whole else (_is_number(value) and value > 0):
        return float(value)
    if not required and not (_is_number(value) and value <= 0):
        return None
    if value is None:
        meaning = f", {_MEANING[key]}" if key in _MEANING else ""
        hint = _HINT.get(format, {}).get(key, "")
        raise ContractError(f"missing{run_text}: expected a number{meaning}{hint}", field=key, origin=origin)
    why = f" ({_ZERO_MEANS[key]})" if value == 0 and key in _ZERO_MEANS else ""
    expected = "a number above 0, whole and below 10^18" if whole else "a number above 0, finite"
    raise ContractError(f"{excerpt(value)}{run_text}{why}: expected {expected}", field=key, origin=origin)


def _rate(value) -> Optional[float]:
    """The request_rate field: a number, vLLM's string "inf", or SGLang's Infinity (already a float)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value) if _is_number(value) else math.inf   # 1e400, a 400-digit integer: unlimited too
    return None


def _date(value) -> Optional[str]:
    """vLLM's ``YYYYMMDD-HHMMSS`` as ``YYYY-MM-DD``."""
    match = re.match(r"^(\d{4})(\d{2})(\d{2})", str(value)) if value is not None else None
    return f"{match.group(1)}-{match.group(2)}-{match.group(3)}" if match else None


def _summary(data: dict, origin: str, format: str, run: int, runs: int) -> ServingBenchmark:
    run_text = f" (run {run} of {runs})" if runs > 1 else ""

    def number(key, **options):
        return _number(data, key, origin, run_text, format=format, **options)

    completed = number("completed", whole=True)
    total_input, total_output = number("total_input_tokens", whole=True), number("total_output_tokens", whole=True)
    duration = number("duration")
    requests_per_s = number("request_throughput")
    output_rate = number("output_throughput", required=False) or total_output / duration
    mean_ttft, mean_tpot = number("mean_ttft_ms"), number("mean_tpot_ms")
    mean_itl = number("mean_itl_ms", required=False)
    e2e_key = "mean_e2el_ms" if format == "vllm-bench" else "mean_e2e_latency_ms"
    mean_e2e = number(e2e_key, required=False)
    notes: list[str] = []
    if mean_e2e is None and format == "vllm-bench":
        latencies = data.get("latencies")  # vllm bench serve keeps every request's latency (s) in the file
        errors = data.get("errors")
        if isinstance(latencies, list) and latencies and all(_is_number(v) for v in latencies):
            kept = [v for i, v in enumerate(latencies)
                    if not (isinstance(errors, list) and i < len(errors) and errors[i])]
            if kept and all(v > 0 for v in kept) and math.isfinite(sum(kept)):
                mean_e2e = sum(kept) / len(kept) * 1e3
                notes.append("mean end-to-end latency: from the file's per-request latencies (no mean_e2el_ms: "
                             "e2el was not in --percentile-metrics)")
    percentiles: dict[str, dict[int, float]] = {}
    for key in data:
        match = _PERCENTILE_KEY.match(key)
        value = number(key, required=False) if match else None
        if value is not None:
            level = float(match.group(1))
            if level == int(level):
                percentiles.setdefault(_METRIC[match.group(2)], {})[int(level)] = value * MILLISECONDS
    for metric, prefix in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"),
                           ("e2e", "e2el" if format == "vllm-bench" else "e2e_latency")):
        median = number(f"median_{prefix}_ms", required=False)
        if median is not None:
            percentiles.setdefault(metric, {}).setdefault(50, median * MILLISECONDS)
    failed = _count(data, "failed", origin, run_text, "the requests that failed")
    if failed:
        notes.append(f"{failed} request(s) failed: the totals and latencies are of the {completed:,.0f} that "
                     "completed")
    concurrency = _count(data, "max_concurrency", origin, run_text,
                         "the cap on requests in flight (null: no cap)", least=1)
    burstiness = data.get("burstiness")
    if burstiness is not None and not (_is_number(burstiness) and burstiness > 0):
        raise ContractError(f"{excerpt(burstiness)}{run_text}: expected a finite number above 0 (1: Poisson arrivals)",
                            field="burstiness", origin=origin)
    mean_concurrency = _number(data, "concurrency", origin, run_text, required=False)
    number("request_rate", required=False)   # vLLM's "inf" passes; a rate of 0 or below is refused
    return ServingBenchmark(
        path=origin, format=format, run=run, runs=runs, completed=int(completed),
        total_input_tokens=int(total_input), total_output_tokens=int(total_output), duration_seconds=duration,
        requests_per_s=requests_per_s, output_tokens_per_s=output_rate,
        mean_ttft_seconds=mean_ttft * MILLISECONDS, mean_tpot_seconds=mean_tpot * MILLISECONDS,
        mean_itl_seconds=mean_itl * MILLISECONDS if mean_itl else None,
        mean_e2e_seconds=mean_e2e * MILLISECONDS if mean_e2e else None, percentiles=percentiles,
        request_rate=_rate(data.get("request_rate")), max_concurrency=concurrency,
        burstiness=float(burstiness) if burstiness is not None else None,
        failed=failed, date=_date(data.get("date")), backend=str(data["backend"]) if data.get("backend") else None,
        model=str(data["model_id"]) if data.get("model_id") else None,
        dataset=str(data["dataset_name"]) if data.get("dataset_name") else None,
        concurrency=mean_concurrency, notes=tuple(notes))


def parse(text: str, path: str | Path = "benchmark.json", format: Optional[str] = None,
          run: Optional[int] = None) -> ServingBenchmark:
    """The run ``run`` (1 = the first; default the last) of a vLLM or SGLang result's text (``format``
    detected when None); a one-line :class:`ContractError` naming the file and the field otherwise."""
    origin = str(path)
    if format is None:
        format = detect(text)
        if format is None:
            raise ContractError(f"not a recognised serving benchmark: expected {EXPECTED['vllm-bench']} or "
                                f"{EXPECTED['sglang-bench']}", origin=origin)
    if format not in FORMATS:
        raise ContractError(f"unknown serving benchmark format {format!r}: expected one of {', '.join(FORMATS)}",
                            field="--log-format")
    if not text.strip():
        raise ContractError(f"empty file: expected {EXPECTED[format]}", origin=origin)
    objects = _objects(text, origin, format)
    if not objects:
        raise ContractError(f"no result in the file: expected {EXPECTED[format]}", origin=origin)
    if run is None:
        index = len(objects)
    elif 1 <= run <= len(objects):
        index = run
    else:
        raise ContractError(f"{run}: the file holds {len(objects)} run(s); expected 1 to {len(objects)}",
                            field="--run")
    return _summary(objects[index - 1], origin, format, index, len(objects))
