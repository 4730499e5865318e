"""``botec validate``: botec's estimates beside published, measured figures.

The validation set ships as package data (``validate/cases/*.yaml``). Each case is a readable botec
contract, the published figures of one source with their sources, what the published figure
measures and in which FLOP convention, and what the case itself assumes where the source is silent
(a micro-batch, a TP/PP split marked unverified). One contract per case, rows varying it with
dotted overrides (``set:``); one set of defaults per accelerator family for every case, nothing
tuned per case.

For each row: the published figure, botec's, the signed error (botec / published − 1), and whether
the layout fits the device. Per case: mean and max |error| against the case's target.

Targets a case may state:

- ``mean_abs_error`` / ``max_abs_error``: the mean and largest |error| over its rows;
- ``each_within``: every row's |error| at most this;
- ``exact``: every row equal to the published figure to the digits it is printed with (``printed_digits``);
- ``trend: rising``: botec's figures rise with the rows as the published ones do (the mean of the
  larger half above the mean of the smaller half, and the last row above the first);
- ``fits``: no row's layout reported as not fitting (these runs really ran).

A row may be shown but not graded (``outside_target``: the reason, printed with it), for a published
figure that contradicts its own source.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["Case", "Row", "RowResult", "CaseResult", "cases", "run_case", "run_all"]


@dataclass(frozen=True)
class Row:
    id: str
    label: str
    published_text: str
    changes: dict[str, Any]
    metric: str | None = None
    printed_digits: int | None = None
    note: str | None = None
    outside_target: str | None = None   # why this row is shown but not graded (a published inconsistency)


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    metric: str
    published_as: str
    flop_convention: str
    source: tuple[str, ...]
    verification: str
    target: dict[str, Any]
    assumes: tuple[str, ...]
    contract: dict[str, Any]
    rows: tuple[Row, ...]


@dataclass
class RowResult:
    id: str
    label: str
    metric: str
    unit: str
    published: float | None
    botec: float | None
    fits: bool | None
    note: str | None = None
    problem: str | None = None   # why there is no botec figure (a contract botec refuses)
    printed_digits: int | None = None
    outside_target: str | None = None

    @property
    def error(self) -> float | None:
        """botec / published − 1 (signed)."""
        if self.botec is None or not self.published:
            return None
        return self.botec / self.published - 1

    @property
    def exact(self) -> bool | None:
        """Equal to the published figure to the digits it is printed with."""
        if self.botec is None or self.published is None:
            return None
        digits = self.printed_digits or 3
        return float(f"{self.botec:.{digits}g}") == float(f"{self.published:.{digits}g}")


@dataclass
class CaseResult:
    case: Case
    rows: list[RowResult]
    checks: dict[str, bool] = field(default_factory=dict)   # target -> met

    @property
    def graded(self) -> list[RowResult]:
        """The rows the targets judge (all but those marked outside_target, which are shown with the reason)."""
        return [r for r in self.rows if r.outside_target is None]

    @property
    def errors(self) -> list[float]:
        return [abs(r.error) for r in self.graded if r.error is not None]

    @property
    def mean_abs_error(self) -> float | None:
        errors = self.errors
        return sum(errors) / len(errors) if errors else None

    @property
    def max_abs_error(self) -> float | None:
        errors = self.errors
        return max(errors) if errors else None


def _set(data: dict, dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested mapping (None removes it)."""
    keys = dotted.split(".")
    node = data
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = copy.deepcopy(value)


def _load(text: str, name: str) -> Case:
    from botec.catalog import load_yaml_text

    data = load_yaml_text(text)
    for key in ("source", "assumes"):
        items = data.get(key) or []
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, str):
                raise ValueError(f"validation case {name}: every {key} entry must be text (quote it): {item!r}")
    rows = tuple(Row(id=str(r["id"]), label=str(r["label"]), published_text=str(r["published"]),
                     changes=dict(r.get("set") or {}), metric=r.get("metric"), printed_digits=r.get("printed_digits"),
                     note=r.get("note"), outside_target=r.get("outside_target"))
                 for r in data["rows"])
    source = data["source"]
    return Case(id=str(data["id"]), title=str(data["title"]), metric=str(data["metric"]),
                published_as=str(data["published_as"]), flop_convention=str(data["flop_convention"]).strip(),
                source=tuple(source if isinstance(source, list) else [source]),
                verification=str(data["verification"]), target=dict(data.get("target") or {}),
                assumes=tuple(data.get("assumes") or ()), contract=data["contract"], rows=rows)


@lru_cache(maxsize=None)
def cases() -> tuple[Case, ...]:
    """The shipped validation cases, in file-name order."""
    folder = resources.files("botec.validate").joinpath("cases")
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            found.append(_load(entry.read_text(encoding="utf-8"), entry.name))
    return tuple(found)


def _row_contract(case: Case, row: Row) -> dict:
    data = copy.deepcopy(case.contract)
    data.setdefault("name", f"{case.id}/{row.id}")
    for dotted, value in row.changes.items():
        _set(data, dotted, value)
    return data


def run_row(case: Case, row: Row) -> RowResult:
    from botec.contract import parse_contract
    from botec.errors import UserError
    from botec.estimate import estimate
    from botec.units import dimension_of_unit, parse_quantity

    metric = row.metric or case.metric
    try:
        result = estimate(parse_contract(_row_contract(case, row), origin=f"validation case {case.id}/{row.id}"))
    except UserError as error:
        return RowResult(row.id, row.label, metric, "", None, None, None, row.note, str(error), row.printed_digits,
                         row.outside_target)
    quantity = result.quantities.get(metric)
    unit = quantity.unit if quantity is not None else ""
    published = parse_quantity(row.published_text, dimension_of_unit(unit)) if quantity is not None else None
    botec = float(quantity.value) if quantity is not None else None
    problem = None if quantity is not None else f"botec does not resolve {metric} for this contract"
    fits = bool(result.fits) if result.kind == "training" and "memory_spare_bytes" in result.quantities else None
    return RowResult(row.id, row.label, metric, unit, published, botec, fits, row.note, problem, row.printed_digits,
                     row.outside_target)


def _rising(values: list[float]) -> bool:
    half = len(values) // 2
    if half == 0:
        return True
    return sum(values[-half:]) / half > sum(values[:half]) / half and values[-1] > values[0]


def run_case(case: Case) -> CaseResult:
    result = CaseResult(case, [run_row(case, row) for row in case.rows])
    target, errors, rows = case.target, result.errors, result.graded
    complete = all(r.error is not None for r in rows)
    if "mean_abs_error" in target:
        result.checks["mean_abs_error"] = complete and (result.mean_abs_error or 0) <= target["mean_abs_error"]
    if "max_abs_error" in target:
        result.checks["max_abs_error"] = complete and (result.max_abs_error or 0) <= target["max_abs_error"]
    if "each_within" in target:
        result.checks["each_within"] = complete and all(e <= target["each_within"] for e in errors)
    if target.get("exact"):
        result.checks["exact"] = all(r.exact for r in rows)
    if target.get("trend") == "rising":
        result.checks["trend"] = complete and _rising([r.botec for r in rows])
    if target.get("fits"):
        result.checks["fits"] = all(r.fits for r in rows)
    return result


def run_all(selected: list[str] | None = None, progress=None) -> list[CaseResult]:
    """Every shipped case (or those whose id starts with one of ``selected``)."""
    chosen = [c for c in cases() if not selected or any(c.id.startswith(s) for s in selected)]
    results = []
    for index, case in enumerate(chosen):
        if progress is not None:
            progress(index, len(chosen), case.id)
        results.append(run_case(case))
    return results


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
