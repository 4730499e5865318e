"""What a training log becomes: each logged iteration (:class:`LoggedStep`), the spread of the kept ones
(:class:`Spread`) and the partial measurement (:class:`LogMeasurement`); the constants and the small line
helpers the Megatron-LM and torchtitan readers share."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Literal, Optional

from botec.errors import ContractError
from botec.units import excerpt

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

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?|[-+]?\.\d+|(?i:nan|inf)")


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
class Parsed:
    """What a format's reader found, before the warm-up and outlier rules."""

    format: str
    steps: list[LoggedStep]
    stated: dict
    memory: dict = field(default_factory=dict)     # rank -> (max allocated, max reserved) in bytes
    device_name: Optional[str] = None
    duplicates: int = 0



def clean(line: str) -> str:
    return ANSI.sub("", line).rstrip("\r\n")


def first_number(text: str) -> Optional[float]:
    match = NUMBER.search(text)
    if not match:
        return None
    value = float(match.group(0).replace(",", ""))
    return value if math.isfinite(value) else None


def positive(value: float, line_number: int, written: str, key: str, expected: str) -> float:
    """``value`` when above 0, else a one-line ContractError naming ``key`` and the line: a logged rate, time or
    MFU that is zero or negative is no measurement (each is divided by, or compared as a ratio: −5,000 TFLOP/s/GPU
    read as "× −38.1"). ``key`` is the log's own name for the figure; ``written`` the text it was read from."""
    if not value > 0:
        raise ContractError(f"line {line_number} gives {excerpt(written)}: expected a positive {expected}", field=key)
    return value


def fields(rest: str) -> dict[str, str]:
    """``key: value |`` pairs of a Megatron iteration line (the key as printed, stripped)."""
    pairs = {}
    for part in rest.split("|"):
        key, sep, value = part.rpartition(":")
        if sep and key.strip():
            pairs[key.strip()] = value.strip()
    return pairs
