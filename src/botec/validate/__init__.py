"""``botec validate``: botec's estimates beside published, measured figures.

The validation set ships as package data (``validate/cases/*.yaml``). Each case is a readable botec
contract, the published figures of one source with their sources, what the published figure
measures and in which FLOP convention, and what the case itself assumes where the source is silent
(a micro-batch, a TP/PP split marked unverified). One contract per case, rows varying it with
dotted overrides (``set:``); one set of defaults per accelerator family for every case, nothing
tuned per case.

For each row: the published figure, botec's, the signed error (botec / published − 1), and whether
the layout fits the device (``fits_device``: its allocations, botec's planning headroom aside). Per case: mean and max |error| against the case's target.

Targets a case may state:

- ``mean_abs_error`` / ``max_abs_error``: the mean and largest |error| over its rows;
- ``each_within``: every row's |error| at most this;
- ``exact``: every row equal to the published figure to the digits it is printed with (``printed_digits``);
- ``trend: rising``: botec's figures rise with the rows as the published ones do (the mean of the
  larger half above the mean of the smaller half, and the last row above the first);
- ``fits_device``: every row's layout fits the device (:mod:`botec.findings.fit`: the allocations, the headroom
  eaten). These runs really ran, so botec's memory model must not refuse them; the headroom is botec's planning
  margin, not something a published run kept, so the check is not ``fits`` (the estimate's verdict, headroom kept).

A row may be shown but not graded (``outside_target``: the reason, printed with it), for a published
figure that contradicts its own source.

What kind of evidence a row is (``RowResult.kind``), reported apart and never averaged together:

- ``consistency`` (``role: consistency`` on the case or the row): botec's formula against the number the published
  formula itself gives, or a catalog figure against the measurement it was copied from. It cannot miss unless a
  formula or a transcription is wrong; it is no evidence that botec predicts anything.
- ``calibration``: the efficiency set in force for the row (the contract's or the row's
  ``assumptions.efficiency_set``, or ``botec validate --efficiency-set``) is one the case declares in
  ``fitted_by``, the catalog calibration sets fitted to its rows. Its error is the fit's training error.
- ``prediction``: every other row: no figure in force was fitted to it.

The case schema's fields for this: ``role`` (prediction, the default, or consistency; a row may override it),
``fitted_by`` (a list of efficiency set names; a row may override it), ``calibration_target`` and ``stack`` (the
software stack of the published run, which a prediction from operator measurements should name).

A case states ``target`` for its prediction rows; ``calibration_target`` (default: ``target``) judges it when its
rows are calibration rows.
"""

from __future__ import annotations

import copy
import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["Case", "Row", "RowResult", "CaseResult", "KINDS", "TIME_LIKE_UNITS", "cases", "row_kind", "run_case",
           "run_all", "summarize"]

# The kinds of row, in the order they are reported (see the module's docstring).
KINDS = ("prediction", "calibration", "consistency")
ROLES = ("prediction", "consistency")   # what a case or a row may declare (calibration follows from fitted_by)
# Time-like figures (a time, a FLOP rate, a token or request rate): the prediction headline of issue 19.
TIME_LIKE_UNITS = ("s", "FLOP/s", "tokens/s", "requests/s")


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
    role: str | None = None              # overrides the case's role (a case mixing kinds)
    fitted_by: tuple[str, ...] | None = None   # overrides the case's fitted_by


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
    fitted_by: tuple[str, ...] = ()      # catalog calibration (efficiency) sets fitted to this case's rows
    role: str = "prediction"             # or consistency: the case cannot miss (see the module's docstring)
    calibration_target: dict[str, Any] | None = None   # the targets when its rows are calibration rows
    stack: str | None = None             # the software stack the published run used (a prediction names it)


@dataclass
class RowResult:
    id: str
    label: str
    metric: str
    unit: str
    published: float | None
    botec: float | None
    fits_device: bool | None   # training: the layout's allocations fit the device (the headroom aside)
    note: str | None = None
    problem: str | None = None   # why there is no botec figure (a contract botec refuses)
    printed_digits: int | None = None
    outside_target: str | None = None
    kind: str = "prediction"             # prediction, calibration or consistency
    efficiency_set: str | None = None    # the efficiency set in force (None: the measured defaults)

    @property
    def time_like(self) -> bool:
        return self.unit in TIME_LIKE_UNITS

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
    efficiency_set: str | None = None   # the set botec validate ran every row under (None: each contract's own)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of its rows, in report order."""
        return tuple(k for k in KINDS if any(r.kind == k for r in self.rows))

    @property
    def kind(self) -> str:
        """The kind of its graded rows when they share one (else of all its rows); ``mixed`` otherwise."""
        kinds = {r.kind for r in self.graded} or {r.kind for r in self.rows}
        return kinds.pop() if len(kinds) == 1 else "mixed"

    @property
    def target(self) -> dict[str, Any]:
        """The targets that judge this run: the calibration targets when its rows are calibration rows."""
        if self.kind == "calibration" and self.case.calibration_target is not None:
            return self.case.calibration_target
        return self.case.target

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
    """Set ``a.b.c`` in a nested mapping (None removes it): the contract's one setter."""
    from botec.contract.overrides import remove_field, set_field

    if value is None:
        remove_field(data, dotted)
    else:
        set_field(data, dotted, copy.deepcopy(value))


def _load(text: str, name: str) -> Case:
    from botec.yamlfile import load_yaml_text

    data = load_yaml_text(text)
    for key in ("source", "assumes"):
        items = data.get(key) or []
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, str):
                raise ValueError(f"validation case {name}: every {key} entry must be text (quote it): {item!r}")
    rows = tuple(Row(id=str(r["id"]), label=str(r["label"]), published_text=str(r["published"]),
                     changes=dict(r.get("set") or {}), metric=r.get("metric"), printed_digits=r.get("printed_digits"),
                     note=r.get("note"), outside_target=r.get("outside_target"),
                     role=_role(r.get("role"), f"{name}, row {r['id']}"),
                     fitted_by=_fitted_by(r["fitted_by"], f"{name}, row {r['id']}") if "fitted_by" in r else None)
                 for r in data["rows"])
    source = data["source"]
    return Case(id=str(data["id"]), title=str(data["title"]), metric=str(data["metric"]),
                published_as=str(data["published_as"]), flop_convention=str(data["flop_convention"]).strip(),
                source=tuple(source if isinstance(source, list) else [source]),
                verification=str(data["verification"]), target=dict(data.get("target") or {}),
                assumes=tuple(data.get("assumes") or ()), contract=data["contract"], rows=rows,
                fitted_by=_fitted_by(data.get("fitted_by"), name), role=_role(data.get("role"), name) or "prediction",
                calibration_target=dict(data["calibration_target"]) if data.get("calibration_target") else None,
                stack=str(data["stack"]).strip() if data.get("stack") else None)


def _role(value, where: str) -> str | None:
    if value is not None and value not in ROLES:
        raise ValueError(f"validation case {where}: role must be one of {', '.join(ROLES)}, not {value!r} "
                         "(a calibration row follows from fitted_by and the efficiency set in force)")
    return value


def _fitted_by(value, where: str) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    if not all(isinstance(item, str) and item for item in items):
        raise ValueError(f"validation case {where}: fitted_by lists efficiency set names (text): {value!r}")
    return tuple(items)


@lru_cache(maxsize=None)
def cases() -> tuple[Case, ...]:
    """The shipped validation cases, in file-name order."""
    folder = resources.files("botec.validate").joinpath("cases")
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            found.append(_load(entry.read_text(encoding="utf-8"), entry.name))
    return tuple(found)


def _row_contract(case: Case, row: Row, efficiency_set: str | None = None) -> dict:
    data = copy.deepcopy(case.contract)
    data.setdefault("name", f"{case.id}/{row.id}")
    for dotted, value in row.changes.items():
        _set(data, dotted, value)
    if efficiency_set is not None:
        _set(data, "assumptions.efficiency_set", efficiency_set)
    return data


def efficiency_set_of(data: dict) -> str | None:
    """The efficiency set a contract's mapping states (None: the measured defaults)."""
    stated = (data.get("assumptions") or {}).get("efficiency_set")
    if isinstance(stated, dict):   # {value: ..., source: ...}
        stated = stated.get("value")
    return None if stated is None else str(stated)


def row_kind(case: Case, row: Row, efficiency_set: str | None) -> str:
    """consistency (declared), calibration (the set in force was fitted to this case) or prediction."""
    if (row.role or case.role) == "consistency":
        return "consistency"
    fitted_by = row.fitted_by if row.fitted_by is not None else case.fitted_by
    return "calibration" if efficiency_set is not None and efficiency_set in fitted_by else "prediction"


def run_row(case: Case, row: Row, efficiency_set: str | None = None) -> RowResult:
    from botec.contract import parse_contract
    from botec.errors import UserError
    from botec.estimation import estimate
    from botec.units import dimension_of_unit, parse_quantity

    metric = row.metric or case.metric
    data = _row_contract(case, row, efficiency_set)
    in_force = efficiency_set_of(data)
    kind = row_kind(case, row, in_force)
    try:
        result = estimate(parse_contract(data, origin=f"validation case {case.id}/{row.id}"))
    except UserError as error:
        return RowResult(row.id, row.label, metric, "", None, None, None, row.note, str(error), row.printed_digits,
                         row.outside_target, kind, in_force)
    quantity = result.quantities.get(metric)
    unit = quantity.unit if quantity is not None else ""
    published = parse_quantity(row.published_text, dimension_of_unit(unit)) if quantity is not None else None
    botec = float(quantity.value) if quantity is not None else None
    problem = None if quantity is not None else f"botec does not resolve {metric} for this contract"
    fits = result.fits_device if result.kind == "training" and "memory_spare_bytes" in result.quantities else None
    return RowResult(row.id, row.label, metric, unit, published, botec, fits, row.note, problem, row.printed_digits,
                     row.outside_target, kind, in_force)


def _rising(values: list[float]) -> bool:
    half = len(values) // 2
    if half == 0:
        return True
    return sum(values[-half:]) / half > sum(values[:half]) / half and values[-1] > values[0]


def run_case(case: Case, efficiency_set: str | None = None) -> CaseResult:
    """Every row of ``case`` (under ``efficiency_set`` when given, else each contract's own), judged against the
    targets of its kind (``calibration_target`` when its rows are calibration rows)."""
    result = CaseResult(case, [run_row(case, row, efficiency_set) for row in case.rows], efficiency_set=efficiency_set)
    target, errors, rows = result.target, result.errors, result.graded
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
    if target.get("fits_device"):
        result.checks["fits_device"] = all(r.fits_device for r in rows)
    return result


def run_all(selected: list[str] | None = None, progress=None, efficiency_set: str | None = None) -> list[CaseResult]:
    """Every shipped case (or those whose id starts with one of ``selected``), each row under ``efficiency_set``
    when given (``assumptions.efficiency_set`` set in every contract)."""
    chosen = [c for c in cases() if not selected or any(c.id.startswith(s) for s in selected)]
    results = []
    for index, case in enumerate(chosen):
        if progress is not None:
            progress(index, len(chosen), case.id)
        results.append(run_case(case, efficiency_set))
    return results


def _statistics(errors: list[float]) -> dict[str, Any]:
    return {"rows": len(errors), "mean_abs_error": sum(errors) / len(errors) if errors else None,
            "median_abs_error": statistics.median(errors) if errors else None,
            "max_abs_error": max(errors) if errors else None}


def summarize(results: list[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per kind (prediction, calibration, consistency): the graded rows' |error| statistics, those of its
    time-like rows (a time, a FLOP rate, a token rate: the prediction headline), its cases and the targets of the
    cases whose graded rows are all of that kind. Never an average across kinds."""
    summary = {}
    for kind in KINDS:
        rows = [r for result in results for r in result.graded if r.kind == kind and r.error is not None]
        checks = [met for result in results if result.kind == kind for met in result.checks.values()]
        summary[kind] = {
            **_statistics([abs(r.error) for r in rows]),
            "time_like": _statistics([abs(r.error) for r in rows if r.time_like]),
            "cases": [result.case.id for result in results if kind in result.kinds],
            "targets_met": sum(checks), "targets": len(checks)}
    return summary


def is_finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
