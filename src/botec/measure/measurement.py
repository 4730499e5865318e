"""The measurement file: what was measured, on what, the raw per-step samples and their summary.

JSON with a versioned schema (``schema: botec.measurement/1``), validated on load: a corrupt,
truncated or empty file is refused with one line naming what is wrong. Written atomically (a
temporary file renamed into place), so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from botec.errors import ContractError, read_text_file, write_text_atomically
from botec.jsonfile import load_json_text
from botec.units import excerpt

SCHEMA = "botec.measurement/1"
PHASES = ("input_wait_seconds", "forward_backward_seconds", "sync_seconds", "optimizer_seconds", "step_seconds")
MAX_MEASUREMENT_BYTES = 256 * 1024 * 1024  # a measurement file larger than this is refused before it is read whole

# What a measured number may be: finite always (JSON's NaN and Infinity are refused); times, bytes and rates not
# negative; a step, a rate, a FLOP count positive (each is divided by); a count positive and below 10^18.
Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(gt=0, lt=10**18)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MeasuredModel(_Strict):
    name: str
    layers: Count
    hidden_size: Count
    attention_heads: Count
    kv_heads: Count
    ffn_size: Count
    vocab_size: Count
    parameters: Count
    trainable_parameters: Optional[Count] = Field(None, description="parameters that got a gradient: the LoRA "
                                                                  "adapters' on a frozen base (absent: all)")
    model_flops_per_token: Positive = Field(description="6·N(matmul) + attention, as the estimate counts it (the "
                                                     "workload's attention_flops convention); under LoRA 4·N + "
                                                     "6·N(adapters) + attention")


class MeasuredLora(_Strict):
    """The adapters the measured run trained on its frozen base (the contract's strategy.lora)."""

    rank: Count
    target_modules: list[str]
    alpha: Optional[Finite] = None
    base_weights: str = Field(description="the contract's base precision (strategy.lora.base_weights)")
    measured_base_weights: str = Field(description="how the run held the frozen base: BF16 in place of a quantized "
                                                   "base (NF4, FP4, INT8 need bitsandbytes' kernels)")
    adapter_precision: str


class MeasuredWorkload(_Strict):
    model: MeasuredModel
    micro_batch_size: Count
    sequence_length: Count
    data_parallel_degree: Count
    tokens_per_step: Count
    precision: str
    optimizer: str
    proxy_of: Optional[str] = Field(None, description="the contract's model, when a scaled-down proxy was measured")
    gradient_bytes: Optional[NonNegative] = Field(None, description="bytes of the gradients all-reduced per step (one "
                                                              "flat buffer)")
    attention_flops: str = Field("full", description="the attention-FLOPs convention the FLOPs were counted with")
    proxy_scale: Optional[dict] = None
    lora: Optional[MeasuredLora] = Field(None, description="LoRA adapters on a frozen base (absent: full training)")


class Environment(_Strict):
    device: Literal["cpu", "cuda"]
    device_name: str
    world_size: Count
    backend: Optional[str]
    torch_version: str
    threads: Count
    peak_flops_per_s: Optional[Positive] = Field(None, description="the device's rated peak, when known")


class Sample(_Strict):
    step: Annotated[int, Field(ge=0, lt=10**18)]
    input_wait_seconds: NonNegative
    forward_backward_seconds: NonNegative
    sync_seconds: NonNegative
    optimizer_seconds: NonNegative
    step_seconds: Positive


class Memory(_Strict):
    method: str
    parameters_bytes: NonNegative
    gradients_bytes: NonNegative
    optimizer_bytes: NonNegative
    activations_bytes: Finite
    temporary_bytes: Finite
    peak_bytes: NonNegative
    activation_bytes_per_element: Finite
    saved_tensor_factor: Finite


class Checkpoint(_Strict):
    seconds: NonNegative
    bytes: NonNegative


class Summary(_Strict):
    median: dict[str, NonNegative]
    p90: dict[str, NonNegative]
    tokens_per_s: Positive
    achieved_flops_per_s: Positive
    mfu: Optional[NonNegative]

    @field_validator("median", "p90")
    @classmethod
    def _every_phase(cls, times: dict[str, float]) -> dict[str, float]:
        missing = [phase for phase in PHASES if phase not in times]
        if missing:
            raise ValueError(f"lacks {', '.join(missing)}")
        if not times["step_seconds"] > 0:
            raise ValueError(f"step_seconds must be positive, got {times['step_seconds']!r}")
        return times


class Measurement(_Strict):
    """One short real run, summarized."""

    schema_: Literal["botec.measurement/1"] = Field(SCHEMA, alias="schema")
    created: str
    contract: Optional[str] = None
    workload: MeasuredWorkload
    environment: Environment
    samples: list[Sample]
    summary: Summary
    memory: Optional[Memory] = None
    checkpoint: Optional[Checkpoint] = None
    notes: list[str] = Field(default_factory=list, description="what the run did differently from the contract")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("samples")
    @classmethod
    def _some_steps(cls, samples: list[Sample]) -> list[Sample]:
        if not samples:
            raise ValueError("the measurement has zero steps")
        return samples


def summarize(samples: list[Sample], tokens_per_step: int, flops_per_token: float, world_size: int,
              peak_flops_per_s: float | None) -> Summary:
    """Median and 90th percentile of each phase; throughput and MFU from the median step."""
    median, p90 = {}, {}
    for phase in PHASES:
        values = sorted(getattr(s, phase) for s in samples)
        median[phase] = statistics.median(values)
        p90[phase] = values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]
    step = median["step_seconds"]
    tokens_per_s = tokens_per_step / step
    achieved = flops_per_token * tokens_per_s
    mfu = achieved / (world_size * peak_flops_per_s) if peak_flops_per_s else None
    return Summary(median=median, p90=p90, tokens_per_s=tokens_per_s, achieved_flops_per_s=achieved, mfu=mfu)


def write(measurement: Measurement, path: Path) -> None:
    """Write atomically: the file appears whole or not at all."""
    write_text_atomically(path, measurement.model_dump_json(by_alias=True, indent=2))


def read(path: str | Path) -> Measurement:
    """Load and validate a measurement file, or raise a one-line :class:`ContractError`."""
    origin = str(path)
    text = read_text_file(path, "measurement file", max_bytes=MAX_MEASUREMENT_BYTES)
    try:
        data = load_json_text(text, origin)   # too deep: refused; a 5,000-digit integer: inf, refused by its field
    except json.JSONDecodeError as error:
        raise ContractError(f"not a measurement: corrupt or truncated JSON at line {error.lineno}, column "
                            f"{error.colno} ({error.msg})", origin=origin) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ContractError(f"not a measurement: expected schema {SCHEMA!r}, found {excerpt(found)}", origin=origin)
    try:
        return Measurement.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        if "input" in first and not isinstance(first["input"], (dict, list)):
            message = f"{message} (found {excerpt(first['input'])})"
        raise ContractError(message, field=field, origin=origin) from None
