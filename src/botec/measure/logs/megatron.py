"""Megatron-LM's training log, line by line, into the iterations it printed (:func:`parse_megatron`).

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
"""

from __future__ import annotations

import re
from typing import Optional

from botec.measure.logs.records import (GIBIBYTE, MEBIBYTE, LoggedStep, Parsed, clean, fields, first_number,
                                        positive)

# Megatron-LM
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|(.*)$")
_TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2})[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]\s*$")
# Every pattern is linear in the length of a line (a log may hold a 1 MB line; quadratic patterns made
# 100,000 characters cost 42.5 CPU s): a repetition either starts where a word starts (``(?<!\S)``), is bounded
# (MEMORY_LABEL_CHARACTERS), or is followed by nothing that can make it backtrack over itself.
# ``benchmarks/calibrate_long_line.py`` measures it.
MEMORY_LABEL_CHARACTERS = 200
"""The most characters between ``[Rank R]`` and ``memory (MB)`` (Megatron prints `` (after N iterations) ``)."""
_MEMORY = re.compile(r"\[Rank (\d+)\](.{0,%d}?)memory \((MB|GB|MiB|GiB)\)\s*((?:\|[^|]*)+)$"
                     % MEMORY_LABEL_CHARACTERS)
_TIMER_HEADER = re.compile(r"(?:\(min, max\) |max )?time across ranks \(ms\):(.*)$")
_TIMER_ENTRY = re.compile(r"(?<!\S)(\S+) \.{2,}: \(?(\d+(?:\.\d+)?)(?:, (\d+(?:\.\d+)?))?\)?")
_TIMER_LINE = re.compile(r"\btime \(ms\)((?:\s*\|\s*[\w./-]+:\s*[\d.]+)+)")
_ARGUMENT = re.compile(r"^\s*([a-z_][a-z0-9_]*) \.{2,} (\S.*)$")   # the value: group 2, stripped
_TOKENS_WORD = re.compile(r"\btok(?:en)?s?\b")
_PER_SECOND = re.compile(r"per second|per sec|/s\b")
_TOKENS_PER_SECOND = re.compile(r"\btgs\b|tokens/s")
_MEGATRON_ARGUMENTS = {"seq_length": "sequence_length", "micro_batch_size": "micro_batch_size",
                       "global_batch_size": "global_batch_size", "world_size": "accelerators",
                       "tensor_model_parallel_size": "tensor_parallel",
                       "pipeline_model_parallel_size": "pipeline_parallel"}
_ELAPSED = "elapsed time per iteration (ms)"
EXAMPLE_LINE = "' iteration N/ M | ... | elapsed time per iteration (ms): T |'"
START_HINTS = ("------------------------ arguments ------------------------", "[before the start of training step]",
               "> building train, validation, and test datasets")   # a run that stopped before its first iteration


def is_iteration_line(raw: str) -> bool:
    """Whether a raw line is a Megatron-LM iteration line (for detecting the format)."""
    return "iteration" in raw and _ELAPSED in raw and _ITERATION.search(raw) is not None


def _is_tokens_rate(key: str) -> bool:
    """Whether a lower-case iteration-line key is a tokens/s figure: a word ``tok``/``tokens`` followed by a rate
    (``per second``, ``/s``), or ``tgs`` or ``tokens/s``. The rate is looked for after the first tokens word only
    (a later word ends later, so the first is where a rate can follow): one pass, where ``tok.*per second`` in
    one pattern backtracked from every ``tok`` (quadratic in a key of many)."""
    word = _TOKENS_WORD.search(key)
    return bool(word and _PER_SECOND.search(key, word.end())) or _TOKENS_PER_SECOND.search(key) is not None


def _megatron_step(number: int, line_number: int, prefix: str, rest: str) -> Optional[LoggedStep]:
    """One iteration line's fields; a time or rate that is not positive is refused, naming its key and the line."""
    pairs = fields(rest)
    if _ELAPSED not in pairs:
        return None
    values: dict = {"seconds": None, "tokens_per_s": None, "tokens_per_s_per_device": None,
                    "flops_per_s_per_device": None, "global_batch_size": None}
    elapsed = first_number(pairs[_ELAPSED])
    values["seconds"] = positive(-1.0 if elapsed is None else elapsed, line_number, pairs[_ELAPSED], _ELAPSED,
                                 "time in ms") / 1000.0
    for key, raw in pairs.items():
        lower = key.lower()
        value = first_number(raw)
        if value is None:
            continue
        if "tflop/s/gpu" in lower:
            values["flops_per_s_per_device"] = positive(value, line_number, raw, key, "rate in TFLOP/s") * 1e12
        elif lower == "global batch size":
            values["global_batch_size"] = int(value)
        elif _is_tokens_rate(lower):
            target = "tokens_per_s_per_device" if "gpu" in lower else "tokens_per_s"
            values[target] = positive(value, line_number, raw, key, "rate in tokens/s")
    stamp = _TIMESTAMP.search(prefix)
    return LoggedStep(number, line_number, date=stamp.group(1) if stamp else None, **values)


def parse_megatron(lines: list[str]) -> Parsed:
    """The iterations, memory reports, timers and arguments of a Megatron-LM log's lines (the first line of a
    repeated iteration kept)."""
    steps: list[LoggedStep] = []
    seen: set[int] = set()
    stated: dict = {}
    memory: dict = {}
    duplicates = 0
    in_timers = False
    last: Optional[LoggedStep] = None
    for number, raw in enumerate(lines, start=1):
        line = clean(raw)
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
            pairs = {key.lower(): first_number(value) for key, value in fields(rest).items()}
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
                if name and first_number(value) is not None:
                    last.phases[name.strip()] = first_number(value) / 1000.0
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
            written = match.group(2).strip()
            value = first_number(written)
            if value is not None and written != "None":
                stated[_MEGATRON_ARGUMENTS[match.group(1)]] = value
    return Parsed("megatron", steps, stated, memory=memory, duplicates=duplicates)

