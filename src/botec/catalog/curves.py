"""The efficiency-curve file (``botec.efficiency-curve/1``): what ``botec measure --efficiency-curve`` writes and
``assumptions.efficiency_curve`` reads.

YAML, written atomically (:func:`write`), one mapping:

=========================  ==========================================================================
``schema``                 ``botec.efficiency-curve/1``
``device``                 ``name`` (torch's device name, or the CPU model), ``accelerator`` (the catalog
                           key when the name matched one, else null), ``backend`` (cpu, cuda), ``torch``
``precision``              bf16, fp16 (fp8, fp32 read too)
``created``                ISO 8601 time of the measurement
``peak_flops_per_s``       the matmul efficiencies' denominator, and ``peak_source`` where it comes from
``memory_bytes_per_s``     the memory efficiencies' denominator, and ``memory_bandwidth_source``
``matmul``                 points sorted by size, one per size: ``gflop`` (2·M·K·N / 10⁹), ``efficiency``,
                           ``m``, ``k``, ``n``, ``seconds`` (median of one call), ``op``, ``shapes``
``memory``                 points sorted by size: ``megabytes`` (moved), ``efficiency``, ``seconds``, ``op``,
                           ``shapes``
=========================  ==========================================================================

    matmul efficiency = (2·M·K·N / seconds) / peak_flops_per_s
    memory efficiency = (bytes moved / seconds) / memory_bytes_per_s

each in (0, 1.5] (above 1.5 the stated peak is wrong, not the device fast). A source of ``best measured rate``
says that no rated figure was known: the efficiencies are relative to the best point, which is exactly 1.

:func:`read` parses the YAML as it parses a contract (no anchors or aliases, at most 32 levels, no integer
longer than 100 digits: a file cannot bomb the reader) and validates it: a corrupt, truncated or empty file,
a missing field or an efficiency outside (0, 1.5] is refused with one line naming the field. The measuring
lives in :mod:`botec.measure.gemm_curve`; reading a curve needs no PyTorch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from botec.errors import ContractError, read_text_file, write_text_atomically
from botec.units import excerpt

__all__ = ["SCHEMA", "MAX_EFFICIENCY", "BEST_MEASURED", "CurveDevice", "MatmulPoint", "MemoryPoint", "CurveFile",
           "EfficiencyCurve", "read", "to_text", "write"]

SCHEMA = "botec.efficiency-curve/1"
MAX_EFFICIENCY = 1.5        # above this a stated peak is wrong, not the device fast
BEST_MEASURED = "best measured rate"   # the denominator when no peak is known: the best point is exactly 1
MAX_CURVE_BYTES = 16 * 1024 * 1024     # a curve holds a few hundred points (a few KB): larger is not one


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _positive(description: str):
    return Field(gt=0, allow_inf_nan=False, description=description)


def _efficiency():
    return Field(gt=0, le=MAX_EFFICIENCY, allow_inf_nan=False,
                 description=f"achieved rate / the stated peak, in (0, {MAX_EFFICIENCY}]")


class CurveDevice(_Strict):
    name: str = Field(min_length=1, description="torch's device name, or the CPU model")
    accelerator: Optional[str] = Field(None, description="the catalog key of the device, when it matched one")
    backend: Literal["cpu", "cuda"]
    torch: str


class MatmulPoint(_Strict):
    gflop: float = _positive("2·M·K·N / 10⁹")
    efficiency: float = _efficiency()
    m: int = Field(ge=1)
    k: int = Field(ge=1)
    n: int = Field(ge=1)
    seconds: float = _positive("median seconds of one call")
    op: Optional[str] = Field(None, description="which GEMM of the layer (qkv, mlp_up, square, ...)")
    shapes: int = Field(1, ge=1, description="shapes of about this size the point is the median of")


class MemoryPoint(_Strict):
    megabytes: float = _positive("bytes read and written / 10⁶")
    efficiency: float = _efficiency()
    seconds: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    op: Optional[str] = Field(None, description="add (reads 2, writes 1) or copy (reads 1, writes 1)")
    shapes: int = Field(1, ge=1)


def _increasing(points: list, size: str) -> list:
    if not points:
        raise ValueError("no points: a curve needs at least one")
    sizes = [getattr(p, size) for p in points]
    for i, (before, after) in enumerate(zip(sizes, sizes[1:]), start=1):
        if after <= before:
            raise ValueError(f"points must be sorted by {size}, one per size: point {i} ({after:g}) follows "
                             f"{before:g}")
    return points


class CurveFile(_Strict):
    """The file's content, validated."""

    schema_: Literal["botec.efficiency-curve/1"] = Field(SCHEMA, alias="schema")
    device: CurveDevice
    precision: Literal["bf16", "fp16", "fp8", "fp32"]
    created: str = Field(min_length=1)
    peak_flops_per_s: float = _positive("the matmul efficiencies' denominator")
    peak_source: str = Field(min_length=1)
    memory_bytes_per_s: float = _positive("the memory efficiencies' denominator")
    memory_bandwidth_source: str = Field(min_length=1)
    matmul: list[MatmulPoint]
    memory: list[MemoryPoint]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("created", mode="before")
    @classmethod
    def _timestamp(cls, value):
        return value.isoformat() if isinstance(value, datetime) else value   # an unquoted YAML timestamp

    @field_validator("matmul")
    @classmethod
    def _matmul_sorted(cls, points):
        return _increasing(points, "gflop")

    @field_validator("memory")
    @classmethod
    def _memory_sorted(cls, points):
        return _increasing(points, "megabytes")


@dataclass(frozen=True)
class EfficiencyCurve:
    """A measured curve, ready to stand in for the catalog's curve of the same accelerator.

    ``matmul_points`` are (GFLOP, efficiency) and ``memory_points`` (MB moved, efficiency), each sorted by
    size; the efficiencies are relative to ``peak_flops_per_s`` and ``memory_bytes_per_s`` (whose origin
    ``peak_source`` and ``memory_bandwidth_source`` state: a catalog figure, a given one, or the best rate
    measured). A contract may use the curve in place of its catalog curve when :meth:`matches` its
    accelerator.
    """

    device_name: str
    accelerator: str | None
    backend: str
    precision: str
    peak_flops_per_s: float
    memory_bytes_per_s: float
    matmul_points: tuple[tuple[float, float], ...]
    memory_points: tuple[tuple[float, float], ...]
    created: str
    source: str
    peak_source: str = ""
    memory_bandwidth_source: str = ""
    torch_version: str = ""

    def matches(self, accelerator_key: str) -> bool:
        """Whether this curve was measured on the catalog accelerator ``accelerator_key`` (``h200``)."""
        return self.accelerator is not None and self.accelerator == accelerator_key


def _curve(data: CurveFile, origin: str) -> EfficiencyCurve:
    device = data.device
    where = f"{device.backend}, torch {device.torch}"
    return EfficiencyCurve(
        device_name=device.name, accelerator=device.accelerator, backend=device.backend, precision=data.precision,
        peak_flops_per_s=data.peak_flops_per_s, memory_bytes_per_s=data.memory_bytes_per_s,
        matmul_points=tuple((p.gflop, p.efficiency) for p in data.matmul),
        memory_points=tuple((p.megabytes, p.efficiency) for p in data.memory),
        created=data.created,
        source=f"{Path(origin).name}: measured on {device.name} ({where}) {data.created[:10]}; peak: "
               f"{data.peak_source}; memory bandwidth: {data.memory_bandwidth_source}",
        peak_source=data.peak_source, memory_bandwidth_source=data.memory_bandwidth_source,
        torch_version=device.torch)


def _field(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _validate(data: dict, origin: str) -> CurveFile:
    try:
        return CurveFile.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            message = "missing: an efficiency curve states it (a truncated file?)"
        elif first["loc"] and first["loc"][-1] == "efficiency" and first["type"] != "float_parsing":
            message = f"an efficiency is in (0, {MAX_EFFICIENCY}] of the stated peak (found {excerpt(first['input'])})"
        elif "input" in first and not isinstance(first["input"], (dict, list)):
            message = f"{message} (found {excerpt(first['input'])})"
        raise ContractError(message, field=_field(first["loc"]), origin=origin) from None


def read(path: str | Path) -> EfficiencyCurve:
    """Load and validate a curve file, or raise a one-line :class:`ContractError` naming the field."""
    import yaml

    from botec.yamlfile import load_user_yaml

    origin = str(path)
    text = read_text_file(path, "efficiency-curve file", max_bytes=MAX_CURVE_BYTES)
    if not text.strip():
        raise ContractError("not an efficiency curve: the file is empty", origin=origin)
    try:
        data = load_user_yaml(text)   # bomb-proof: no aliases, bounded depth and integer length
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or error.__class__.__name__
        raise ContractError(f"not an efficiency curve: corrupt or truncated YAML{where} ({problem})",
                            origin=origin) from None
    if not isinstance(data, dict):
        raise ContractError(f"not an efficiency curve: expected a mapping, found {type(data).__name__}",
                            origin=origin)
    if data.get("schema") != SCHEMA:
        raise ContractError(f"not an efficiency curve: expected {SCHEMA!r}, found {data.get('schema')!r}",
                            field="schema", origin=origin)
    return _curve(_validate(data, origin), origin)


def to_text(curve: CurveFile) -> str:
    """The file's YAML: the header block style, each point one flow-style line."""
    import yaml

    data = curve.model_dump(by_alias=True)
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=10_000, allow_unicode=True)
    header = ("# botec efficiency curve (`botec measure --efficiency-curve`): matmul efficiency = achieved FLOP/s / "
              "peak_flops_per_s,\n# memory efficiency = achieved B/s / memory_bytes_per_s; sizes in GFLOP "
              "(2·M·K·N) and MB moved.\n")
    return header + body


def write(curve: CurveFile, path: str | Path) -> None:
    """Write atomically: the file appears whole or not at all."""
    write_text_atomically(path, to_text(curve))
