"""Training logs as measurements: a Megatron-LM or torchtitan log read into a partial measurement.

A log gives what the training loop printed: the time (or the tokens/s) of each logged interval, the
per-accelerator FLOP/s in the tool's own FLOP count, the peak memory, and sometimes the batch it ran.
It gives no model shape, no per-phase times of botec's own (input wait, synchronization) and no
activations apart, so it becomes a :class:`LogMeasurement`, a partial measurement that
:func:`botec.measure.calibrate.calibrate` compares on what it has: step time, tokens/s, FLOP/s per
accelerator and peak memory. The workload itself comes from the contract, checked against what the
log states.

Formats, as the tools print them (checked against their sources):

Megatron-LM (``megatron/training/training.py`` ``training_log``, ``megatron/core/timers.py``,
``report_memory`` in ``megatron/training/utils``):

- every version: `` iteration N/ M | consumed samples: S | elapsed time per iteration (ms): T |
  learning rate: ... | global batch size: G | lm loss: ... | loss scale: ... | grad norm: ... |
  number of skipped iterations: 0 | number of nan iterations: 0 |`` (v2.x and core_v0.4: nothing
  more, no timestamp);
- core_v0.5: `` throughput per GPU (TFLOP/s/GPU): X |`` after the time (with ``--log-throughput``);
- core_v0.6 to v0.15: a `` [YYYY-MM-DD HH:MM:SS]`` timestamp before ``iteration``; core_v0.16 and
  later: the timestamp with microseconds, and optional ``energy per GPU``/``power per GPU`` fields;
- forks add tokens/s: ``tokens per GPU (tokens/s/GPU): X``, ``Tokens per second per GPU (Tok/s/GPU):
  X`` (AMD Primus), ``tokens per gpu per second(tgs): X`` (Megatron-DeepSpeed), ``tokens per second``;
  a key with ``TFLOP/s/GPU`` in it (``compute per GPU (TFLOP/s/GPU): X (avg Y)``) is read as the
  FLOP rate;
- memory: ``[Rank R] (after N iterations) memory (MB) | allocated: A | max allocated: B |
  reserved: C | max reserved: D`` (Megatron's "MB" is 2^20 bytes; Megatron-Bridge prints ``(GB)``,
  2^30), printed by each data-parallel rank 0;
- timers (per iteration, normalized by the log interval): ``(min, max) time across ranks (ms):`` or
  ``max time across ranks (ms):`` then ``    forward-backward .......: (min, max)`` lines (core);
  ``time (ms) | forward-compute: X | backward-compute: Y | optimizer: Z`` on one line (v2.x);
- the arguments block at start: ``  seq_length ......... 2048`` (sequence length, micro-batch,
  global batch, world size, TP, PP).

Megatron's TFLOP/s/GPU is its own FLOP count (``num_floating_point_operations``): 3 × the forward
GEMMs (forward, weight and data gradients), the attention scores and the LM-head logits included,
recomputation not counted; the attention scores counted in full in core_v0.5 to v0.11, causal (half)
from core_v0.12; divided by the step time and the world size.

torchtitan (``torchtitan/components/metrics.py`` ``MetricsProcessor.log``; ``train.py`` before
2025), with ANSI colours and the ``[titan] DATE - root - INFO -`` prefix:

- 2024: ``step: N  loss: L  memory: M GiB(P%)  wps: W  mfu: U%``;
- late 2024: ``tps:`` (tokens per second per accelerator) in place of ``wps:``;
- 2025-02 (PR #847): ``tflops: X`` (with thousands separators, like ``tps``);
- 2025-06 (PR #1339, v0.1.0 on): ``grad_norm: G`` after the loss;
- main (2026): ``mfu: N/A`` when training quantized;
- ``validate step: N  loss: ...  tps: ...`` lines are evaluation, not training steps;
- configuration where printed: ``Trainer is initialized with local batch size B, global batch size
  G, gradient accumulation steps A, sequence length S, ...`` (v0.1.0 to v0.2.2) or ``... with T
  tokens per DP rank, U tokens per train step, gradient accumulation steps A, maximum context length
  S, ...`` (main); ``Building device mesh with parallelism: pp=.., dp_replicate=.., dp_shard=..,
  cp=.., tp=..`` or ``Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]``; ``CUDA capacity:
  NAME with X GiB memory``.

torchtitan's ``memory`` is the allocator's max reserved in GiB since the previous logged step, its
``tps`` the tokens per second per accelerator, its ``tflops`` the model FLOPs per accelerator
(6 × the non-embedding parameters + attention 12·L·H·d·S per token up to v0.2.0, 6·L·H·d·S from
PR #1923, recomputation not counted) and its ``mfu`` those FLOPs over its own peak table.

Warm-up: the logged iterations before the third (``warmup=2``) are dropped, and so is any whose time
is more than twice the median of the others (a checkpoint save, a recompilation). The median of the
rest is the measured step; its spread (p90, min, max) is kept. Each logged line of Megatron-LM and
torchtitan is already an average over its log interval.

Example (``botec calibrate examples/gpt3-175b-search.yaml examples/logs/megatron-gpt3-175b.log`` does
this, then compares)::

    >>> from botec.measure.logs import parse
    >>> lines = [f" iteration {n:8d}/     100 | elapsed time per iteration (ms): {ms:.1f} | global batch size:    64 |"
    ...          for n, ms in [(10, 3000), (20, 1250), (30, 1200), (40, 1210), (50, 4000), (60, 1190)]]
    >>> log = parse("\\n".join(lines), "run.log")
    >>> log.format, log.step_seconds.median, log.used, log.stated["global_batch_size"]
    ('megatron', 1.2, (30, 40, 60), 64.0)
    >>> log.dropped
    ((10, 'warm-up'), (20, 'warm-up'), (50, 'slower than 2× the median of the rest'))
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional, Union

from botec.errors import ContractError

if TYPE_CHECKING:
    from botec.measure.measurement import Measurement
    from botec.measure.serving_bench import ServingBenchmark

__all__ = ["Spread", "LoggedStep", "LogMeasurement", "FORMATS", "TOOL_NAMES", "detect", "parse", "read",
           "read_measurement"]

FORMATS = ("megatron", "torchtitan")
TOOL_NAMES = {"megatron": "Megatron-LM", "torchtitan": "torchtitan"}
MEBIBYTE, GIBIBYTE = 2.0**20, 2.0**30
WARMUP = 2
OUTLIER_FACTOR = 2.0

EXPECTED = ("a botec measurement (JSON, schema botec.measurement/1), a Megatron-LM training log "
            "(' iteration N/ M | ... | elapsed time per iteration (ms): T |') or a torchtitan log "
            "('step: N  loss: L  memory: M GiB(P%)  tps: T ...')")

FLOP_CONVENTIONS = {
    "megatron": "Megatron-LM's count (num_floating_point_operations): 3 × forward GEMMs incl. attention scores "
                "(full before core 0.12, causal after) and LM-head logits, no recomputation, per GPU",
    "torchtitan": "torchtitan's count: 6 × non-embedding parameters + attention (12·L·H·d·S to v0.2.0, "
                  "6·L·H·d·S after), no recomputation, per accelerator",
}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+|(?i:nan|inf)")

# Megatron-LM
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
_TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2})[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]\s*$")
_MEMORY = re.compile(r"\[Rank (\d+)\]\s*(.*?)\s*memory \((MB|GB|MiB|GiB)\)\s*((?:\|[^|]*)+)$")
_TIMER_HEADER = re.compile(r"(?:\(min, max\) |max )?time across ranks \(ms\):(.*)$")
_TIMER_ENTRY = re.compile(r"(\S+) \.{2,}: \(?(\d+(?:\.\d+)?)(?:, (\d+(?:\.\d+)?))?\)?")
_TIMER_LINE = re.compile(r"\btime \(ms\)((?:\s*\|\s*[\w./-]+:\s*[\d.]+)+)")
_ARGUMENT = re.compile(r"^\s*([a-z_][a-z0-9_]*) \.{2,} (\S.*?)\s*$")
_MEGATRON_ARGUMENTS = {"seq_length": "sequence_length", "micro_batch_size": "micro_batch_size",
                       "global_batch_size": "global_batch_size", "world_size": "accelerators",
                       "tensor_model_parallel_size": "tensor_parallel",
                       "pipeline_model_parallel_size": "pipeline_parallel"}
_ELAPSED = "elapsed time per iteration (ms)"

# torchtitan
_STEP = re.compile(r"(?<!validate )(?<![\w-])step:\s*(\d+)\s+loss:\s*(\S+)(.*)$")
_TT_MEMORY = re.compile(r"\bmemory:\s*(\d+(?:\.\d+)?)\s*GiB\s*\(\s*(\d+(?:\.\d+)?)\s*%\s*\)")
_TT_TPS = re.compile(r"\b([tw]ps):\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)")
_TT_TFLOPS = re.compile(r"\btflops:\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)")
_TT_MFU = re.compile(r"\bmfu:\s*(\d+(?:\.\d+)?)\s*%")
_TT_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})[ T]\d{2}:\d{2}:\d{2}")
_TT_MESH = re.compile(r"Building device mesh with parallelism:\s*(.*)$")
_TT_MESH_OLD = re.compile(r"Building \d+-D device mesh with \[([^\]]*)\],\s*\[([^\]]*)\]")
_TT_CAPACITY = re.compile(r"\b(?:CUDA|GPU|ROCM|XPU|NPU) capacity:\s*(.+?) with (\d+(?:\.\d+)?)\s*GiB memory")
_TT_CONFIG = {
    "local_batch_size": re.compile(r"local batch size (\d+)"),
    "global_batch_size": re.compile(r"global batch size (\d+)"),
    "gradient_accumulation_steps": re.compile(r"gradient accumulation steps (\d+)"),
    "sequence_length": re.compile(r"(?:sequence length|maximum context length) (\d+)"),
    "tokens_per_step": re.compile(r"(\d+) tokens per train step"),
}


@dataclass(frozen=True)
class Spread:
    """Median, 90th percentile, least and greatest of the kept steps' values."""

    median: float
    p90: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, values: list[float]) -> "Spread":
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
        return cls(statistics.median(ordered), p90, ordered[0], ordered[-1], len(ordered))


@dataclass(frozen=True)
class LoggedStep:
    """One logged iteration (an average over its log interval), as printed; absent fields are None."""

    step: int
    line: int
    seconds: Optional[float] = None                   # Megatron: elapsed time per iteration
    tokens_per_s: Optional[float] = None              # a fork's total tokens/s
    tokens_per_s_per_device: Optional[float] = None   # torchtitan tps/wps; a fork's tokens/s/GPU
    flops_per_s_per_device: Optional[float] = None    # Megatron TFLOP/s/GPU, torchtitan tflops (in FLOP/s)
    mfu: Optional[float] = None                       # torchtitan, a fraction
    memory_reserved_bytes: Optional[float] = None     # torchtitan: max reserved since the last logged step
    global_batch_size: Optional[int] = None           # Megatron, sequences
    date: Optional[str] = None
    phases: dict = field(default_factory=dict)        # Megatron timers after this line, seconds (max over ranks)

    @property
    def pace(self) -> Optional[float]:
        """Something proportional to the step time, for the warm-up and outlier rules."""
        if self.seconds is not None:
            return self.seconds
        rate = self.tokens_per_s_per_device or self.tokens_per_s
        return 1.0 / rate if rate else None


@dataclass(frozen=True)
class LogMeasurement:
    """A partial measurement from a training log: what the log gives, ``None`` where it gives nothing.

    ``step_seconds`` is present when the log prints the iteration time (Megatron-LM); torchtitan prints
    tokens/s per accelerator instead (``tokens_per_s_per_device``), from which the step follows with the
    tokens per step and the accelerators (the log's own where it states them, else the contract's).
    ``stated`` holds the workload the log states: ``global_batch_size`` (sequences), ``sequence_length``,
    ``micro_batch_size``, ``local_batch_size``, ``gradient_accumulation_steps``, ``tokens_per_step``,
    ``accelerators``, ``tensor_parallel``, ``pipeline_parallel``.
    """

    path: str
    format: Literal["megatron", "torchtitan"]
    logged: int                                    # iteration lines read
    used: tuple[int, ...]                          # the step numbers kept
    dropped: tuple[tuple[int, str], ...]           # (step number, why)
    step_seconds: Optional[Spread]
    tokens_per_s: Optional[Spread]                 # total, when the log prints it
    tokens_per_s_per_device: Optional[Spread]
    flops_per_s_per_device: Optional[Spread]       # as logged, in the tool's FLOP count
    mfu: Optional[float]
    peak_reserved_bytes: Optional[float]
    peak_allocated_bytes: Optional[float]
    memory_ranks: int                              # ranks whose memory reports were read (Megatron)
    phases: dict                                   # timer name -> median seconds over the kept steps
    stated: dict                                   # name -> value the log states (see above)
    device_name: Optional[str] = None
    date: Optional[str] = None
    notes: tuple[str, ...] = ()

    @property
    def tool(self) -> str:
        return TOOL_NAMES[self.format]

    @property
    def flop_convention(self) -> str:
        return FLOP_CONVENTIONS[self.format]


@dataclass
class _Parsed:
    format: str
    steps: list[LoggedStep]
    stated: dict
    memory: dict = field(default_factory=dict)     # rank -> (max allocated, max reserved) in bytes
    device_name: Optional[str] = None
    duplicates: int = 0


def _clean(line: str) -> str:
    return _ANSI.sub("", line).rstrip("\r\n")


def _number(text: str) -> Optional[float]:
    match = _NUMBER.search(text)
    if not match:
        return None
    value = float(match.group(0).replace(",", ""))
    return value if math.isfinite(value) else None


def _fields(rest: str) -> dict[str, str]:
    """``key: value |`` pairs of a Megatron iteration line (the key as printed, stripped)."""
    pairs = {}
    for part in rest.split("|"):
        key, sep, value = part.rpartition(":")
        if sep and key.strip():
            pairs[key.strip()] = value.strip()
    return pairs


def _megatron_step(number: int, line_number: int, prefix: str, rest: str) -> Optional[LoggedStep]:
    pairs = _fields(rest)
    if _ELAPSED not in pairs:
        return None
    values: dict = {"seconds": None, "tokens_per_s": None, "tokens_per_s_per_device": None,
                    "flops_per_s_per_device": None, "global_batch_size": None}
    elapsed = _number(pairs[_ELAPSED])
    values["seconds"] = elapsed / 1000.0 if elapsed else None
    for key, raw in pairs.items():
        lower = key.lower()
        value = _number(raw)
        if value is None:
            continue
        if "tflop/s/gpu" in lower:
            values["flops_per_s_per_device"] = value * 1e12
        elif lower == "global batch size":
            values["global_batch_size"] = int(value)
        elif re.search(r"\btok(?:en)?s?\b.*(?:per second|per sec|/s\b)|\btgs\b|tokens/s", lower):
            target = "tokens_per_s_per_device" if "gpu" in lower else "tokens_per_s"
            values[target] = value
    stamp = _TIMESTAMP.search(prefix)
    return LoggedStep(number, line_number, date=stamp.group(1) if stamp else None, **values)


def _parse_megatron(lines: list[str]) -> _Parsed:
    steps: list[LoggedStep] = []
    seen: set[int] = set()
    stated: dict = {}
    memory: dict = {}
    duplicates = 0
    in_timers = False
    last: Optional[LoggedStep] = None
    for number, raw in enumerate(lines, start=1):
        line = _clean(raw)
        match = _ITERATION.search(line)
        if match:
            in_timers = False
            step = _megatron_step(int(match.group(1)), number, line[:match.start()], match.group(3))
            if step is None:
                continue
            if step.step in seen:
                duplicates += 1
                last = None
                continue
            seen.add(step.step)
            steps.append(step)
            last = step
            continue
        match = _MEMORY.search(line)
        if match:
            in_timers = False
            rank, unit, rest = int(match.group(1)), match.group(3), match.group(4)
            scale = GIBIBYTE if unit.startswith("G") else MEBIBYTE
            pairs = {key.lower(): _number(value) for key, value in _fields(rest).items()}
            allocated = pairs.get("max allocated") or pairs.get("allocated")
            reserved = pairs.get("max reserved") or pairs.get("reserved")
            old = memory.get(rank, (0.0, 0.0))
            memory[rank] = (max(old[0], (allocated or 0.0) * scale), max(old[1], (reserved or 0.0) * scale))
            continue
        match = _TIMER_HEADER.search(line)
        if match:
            in_timers = True
            line = match.group(1)  # a one-line block: the entry follows the header
            if not line.strip():
                continue
        match = _TIMER_LINE.search(line)
        if match and last is not None:
            for entry in match.group(1).split("|"):
                name, _, value = entry.strip().partition(":")
                if name and _number(value) is not None:
                    last.phases[name.strip()] = _number(value) / 1000.0
            continue
        match = _TIMER_ENTRY.search(line)
        if match and in_timers:
            if last is not None:
                maximum = match.group(3) or match.group(2)
                last.phases[match.group(1)] = float(maximum) / 1000.0
            continue
        in_timers = False
        match = _ARGUMENT.match(line)
        if match and match.group(1) in _MEGATRON_ARGUMENTS:
            value = _number(match.group(2))
            if value is not None and match.group(2).strip() != "None":
                stated[_MEGATRON_ARGUMENTS[match.group(1)]] = value
    return _Parsed("megatron", steps, stated, memory=memory, duplicates=duplicates)


def _parse_torchtitan(lines: list[str]) -> _Parsed:
    steps: list[LoggedStep] = []
    seen: set[int] = set()
    stated: dict = {}
    duplicates = 0
    device_name = None
    for number, raw in enumerate(lines, start=1):
        line = _clean(raw)
        match = _STEP.search(line)
        if match:
            rest = match.group(3)
            rate = _TT_TPS.search(rest)
            if rate is None:
                continue
            step_number = int(match.group(1))
            if step_number in seen:
                duplicates += 1
                continue
            seen.add(step_number)
            memory, tflops, mfu = _TT_MEMORY.search(rest), _TT_TFLOPS.search(rest), _TT_MFU.search(rest)
            date = _TT_DATE.search(line[:match.start()])
            steps.append(LoggedStep(
                step_number, number,
                tokens_per_s_per_device=float(rate.group(2).replace(",", "")),
                flops_per_s_per_device=float(tflops.group(1).replace(",", "")) * 1e12 if tflops else None,
                mfu=float(mfu.group(1)) / 100.0 if mfu else None,
                memory_reserved_bytes=float(memory.group(1)) * GIBIBYTE if memory else None,
                date=date.group(1) if date else None))
            continue
        if "Trainer is initialized with" in line:
            for name, pattern in _TT_CONFIG.items():
                found = pattern.search(line)
                if found:
                    stated[name] = float(found.group(1))
            continue
        match = _TT_MESH.search(line)
        if match:
            degrees = {key: _number(value) for key, _, value in
                       (part.strip().partition("=") for part in match.group(1).split(","))}
            world = [degrees.get(k) for k in ("pp", "dp_replicate", "dp_shard", "cp", "tp")]
            if all(d is not None and d >= 1 for d in world):
                stated["accelerators"] = float(math.prod(world))
            for key, name in (("tp", "tensor_parallel"), ("pp", "pipeline_parallel")):
                if degrees.get(key) is not None and degrees[key] >= 1:
                    stated[name] = degrees[key]
            continue
        match = _TT_MESH_OLD.search(line)
        if match:
            names = [n.strip().strip("'\"") for n in match.group(1).split(",") if n.strip()]
            sizes = [_number(s) for s in match.group(2).split(",") if s.strip()]
            if sizes and all(s is not None and s >= 1 for s in sizes) and len(names) == len(sizes):
                stated["accelerators"] = float(math.prod(sizes))
                for key, name in (("tp", "tensor_parallel"), ("pp", "pipeline_parallel")):
                    if key in names:
                        stated[name] = sizes[names.index(key)]
            continue
        match = _TT_CAPACITY.search(line)
        if match:
            device_name = match.group(1).strip()
    return _Parsed("torchtitan", steps, stated, device_name=device_name, duplicates=duplicates)


_PARSERS = {"megatron": _parse_megatron, "torchtitan": _parse_torchtitan}
_HINTS = {"megatron": ("------------------------ arguments ------------------------",
                       "[before the start of training step]", "> building train, validation, and test datasets"),
          "torchtitan": ("[titan] ", "Trainer is initialized with", "Training starts at step")}


def detect(text: str, path: str | Path = "") -> Optional[str]:
    """``botec``, ``megatron``, ``torchtitan``, or None when the text is none of them."""
    stripped = text.lstrip()
    if Path(str(path)).suffix.lower() == ".json" or stripped.startswith("{"):
        return "botec"
    if stripped.startswith("["):  # a JSON array, or a log whose lines start with a "[titan]"/"[default0]:" prefix
        try:
            json.loads(stripped)
            return "botec"
        except ValueError:
            pass
    megatron = torchtitan = 0
    for raw in text.splitlines():
        if "iteration" in raw and _ELAPSED in raw and _ITERATION.search(raw):
            megatron += 1
        elif "step:" in raw:
            line = _clean(raw)
            match = _STEP.search(line)
            if match and _TT_TPS.search(match.group(3)):
                torchtitan += 1
    if megatron == torchtitan == 0:
        # no iteration line, but the start of a run (it stopped early): say which lines are missing
        for format, hints in _HINTS.items():
            if any(hint in text for hint in hints):
                return format
        return None
    return "megatron" if megatron >= torchtitan else "torchtitan"


def _summarize(parsed: _Parsed, path: str, warmup: int, outlier_factor: float) -> LogMeasurement:
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
        candidates = [s for s in candidates if s not in ramp]
    warm, candidates = candidates[:warmup], candidates[warmup:]
    dropped += [(s.step, "warm-up") for s in warm]
    if not candidates and warm:
        candidates = [warm[-1]]
        dropped = [d for d in dropped if d[0] != warm[-1].step]
        notes.append(f"only {len(steps)} logged iteration(s): the warm-up could not be dropped, the last one is used")
    paces = [s.pace for s in candidates]
    kept = []
    for index, step in enumerate(candidates):
        others = [p for i, p in enumerate(paces) if i != index and p is not None]
        if step.pace is not None and others and step.pace > outlier_factor * statistics.median(others):
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
    parsed = _PARSERS[format](text.splitlines())
    if not parsed.steps:
        expected = ("' iteration N/ M | ... | elapsed time per iteration (ms): T |'" if format == "megatron"
                    else "'step: N  loss: L  memory: M GiB(P%)  tps: T ...'")
        raise ContractError(f"no {TOOL_NAMES[format]} iteration lines: expected lines like {expected}",
                            origin=origin)
    return _summarize(parsed, origin, warmup, outlier_factor)


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
