"""Solvers: the best value of one field under constraints, and one assumption back-solved from an
observed figure. Both run through the same quantity definitions as the estimate."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from botec.contract import Contract
from botec.errors import ContractError
from botec.explore.space import Axis, Space, evaluate_space, parse_axis
from botec.quantities import Given, definitions, evaluate
from botec.units import UnitError, format_quantity, parse_quantity

_DIMENSION_OF_UNIT = {"s": "seconds", "B": "bytes", "B/s": "byte_rate", "FLOP/s": "flop_rate", "FLOP": "flop",
                      "USD": "usd", "USD/h": "usd_per_hour", "W": "watts", "fraction": "ratio", "1": "ratio"}
_CONSTRAINT = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(<=|>=|<|>|==)\s*(.+?)\s*$")
_OPERATORS = {"<=": np.less_equal, ">=": np.greater_equal, "<": np.less, ">": np.greater, "==": np.equal}


@dataclass(frozen=True)
class Constraint:
    quantity: str
    operator: str
    value: float
    text: str

    def holds(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return _OPERATORS[self.operator](columns[self.quantity], self.value)


def parse_constraint(text: str) -> Constraint | None:
    """``run_seconds <= 7 d`` (the value in the quantity's unit) or ``fits`` (None: the memory check)."""
    if text.strip() == "fits":
        return None
    match = _CONSTRAINT.match(text)
    if not match:
        raise ContractError(f"expected QUANTITY OP VALUE such as 'run_seconds <= 7 d', or 'fits'; got {text!r}",
                            field="--subject-to")
    name, operator, raw = match.groups()
    registry = definitions()
    if name not in registry:
        from botec.catalog import did_you_mean

        raise ContractError(f"unknown quantity {name!r}{did_you_mean(name, registry)}", field="--subject-to")
    dimension = _DIMENSION_OF_UNIT.get(registry[name].unit, "count")
    try:
        value = parse_quantity(raw, dimension)
    except UnitError as error:
        raise ContractError(f"{name}: {error}", field="--subject-to") from None
    return Constraint(name, operator, value, text.strip())


@dataclass
class Solution:
    value: float | None
    row: dict[str, float] | None
    feasible: int
    evaluated: int
    closest: str | None  # when infeasible: the constraint that fails and how close the best came


def optimize(contract: Contract, variable: str, direction: str, constraints: list[str], over: str | None = None,
             require_fit: bool = True) -> Solution:
    """The smallest (``min``) or largest (``max``) value of ``variable`` meeting the constraints."""
    from botec.estimate import given_quantities

    if contract.workload.kind != "training":
        raise ContractError("--minimize/--maximize search training layouts; for serving, `botec search` finds the "
                            "cheapest accelerator and TP degree", field="workload.kind")
    base, _, _ = given_quantities(contract)
    axis = parse_axis(over or f"{variable}={_default_range(contract, variable)}", base)
    if axis.path != variable:
        raise ContractError(f"--over must range over {variable}, not {axis.path}", field="--over")
    parsed = [parse_constraint(c) for c in constraints]
    checks = [c for c in parsed if c is not None]
    wanted = list(dict.fromkeys([c.quantity for c in checks] + ["memory_spare_bytes"]))
    columns, valid, counts = evaluate_space(Space(contract, [axis]), wanted=wanted)
    ok = valid.copy()
    if require_fit or any(c is None for c in parsed):
        ok &= columns["memory_spare_bytes"] >= 0
    for constraint in checks:
        ok &= constraint.holds(columns)
    values = columns[variable]
    if not ok.any():
        return Solution(None, None, 0, counts["evaluated"], _closest(columns, valid, checks, variable))
    index = np.flatnonzero(ok)
    pick = index[np.argmin(values[index])] if direction == "min" else index[np.argmax(values[index])]
    row = {name: float(column[pick]) for name, column in columns.items()}
    return Solution(float(values[pick]), row, int(ok.sum()), counts["evaluated"], None)


def _default_range(contract: Contract, variable: str) -> str:
    if variable == "supply.count":
        return f"1..{max(1024, 8 * int(contract.supply.count.value))}"
    if variable == "strategy.micro_batch_size":
        return "1..256"
    if variable == "strategy.gradient_accumulation_steps":
        return "1..256"
    raise ContractError(f"give the values to try with --over {variable}=...", field="--over")


def _closest(columns, valid, checks: list[Constraint], variable: str) -> str:
    fits = valid & (columns["memory_spare_bytes"] >= 0)
    if not fits.any():
        return "nothing fits in memory at any value tried"
    for constraint in checks:
        held = constraint.holds(columns) & fits
        if not held.any():
            values = columns[constraint.quantity][fits]
            best = values.min() if constraint.operator in ("<=", "<") else values.max()
            unit = definitions()[constraint.quantity].unit
            return (f"'{constraint.text}' cannot be met: the best value tried gives "
                    f"{format_quantity(float(best), unit)}")
    return "the constraints cannot all be met at once"


def back_solve(contract: Contract, input_field: str, target: str) -> tuple[float, float]:
    """The value of one assumption that makes a quantity equal an observed figure (bisection).

    Returns (assumption value, the quantity's value there)."""
    from botec.estimate import choices_of, given_quantities, serving_given

    base = (serving_given if contract.workload.kind == "serving" else given_quantities)(contract)[0]
    inputs = {g.field: name for name, g in base.items() if g.field}
    if input_field not in inputs:
        raise ContractError(f"cannot solve for {input_field!r}: not an input of this contract", field="--find")
    name = inputs[input_field]
    quantity, sep, raw = target.partition("=")
    quantity = quantity.strip()
    constraint = parse_constraint(f"{quantity} == {raw}") if sep else None
    if constraint is None:
        raise ContractError("expected --given QUANTITY=VALUE such as accelerator_hours=1.72M", field="--given")
    choices = choices_of(contract)

    def output(x: float) -> float:
        changed = dict(base)
        changed[name] = Given(x, "assumed")
        return evaluate(changed, wanted=[quantity], choices=choices)[quantity].value

    current = float(base[name].value)
    low, high = current / 1e3, current * 1e3
    if input_field.startswith("assumptions.") and definitions()[name].unit in ("1", "fraction"):
        low, high = 1e-6, 1.0
    f_low, f_high = output(low) - constraint.value, output(high) - constraint.value
    if f_low * f_high > 0:
        raise ContractError(f"no value of {input_field} between {low:g} and {high:g} gives {quantity} = {raw.strip()}",
                            field="--given")
    for _ in range(200):
        middle = (low + high) / 2
        f_middle = output(middle) - constraint.value
        if f_low * f_middle <= 0:
            high, f_high = middle, f_middle
        else:
            low, f_low = middle, f_middle
        if abs(high - low) <= 1e-12 * max(abs(high), 1e-300):
            break
    value = (low + high) / 2
    return value, output(value)


def best_accelerator(contract: Contract, objective: str, direction: str, constraints: list[str],
                     accelerators: list[str]) -> list[tuple[str, float | None, str]]:
    """The contract on each catalog accelerator: (key, objective or None, why not), best first."""
    from botec.catalog import accelerators as catalog
    from botec.catalog import did_you_mean
    from botec.estimate import estimate

    checks = [c for c in (parse_constraint(text) for text in constraints) if c is not None]
    if objective not in definitions():
        raise ContractError(f"unknown quantity {objective!r}{did_you_mean(objective, definitions())}",
                            field="--minimize" if direction == "min" else "--maximize")
    rows = []
    for key in accelerators:
        if key not in catalog():
            raise ContractError(f"unknown accelerator {key!r}{did_you_mean(key, catalog())}", field="--over")
        changed = contract.model_copy(update={"supply": contract.supply.model_copy(update={"accelerator": key})})
        try:
            result = estimate(changed, compare=False)
        except ContractError as error:
            rows.append((key, None, error.detail))
            continue
        q = result.quantities
        if not result.fits:
            rows.append((key, None, "does not fit in memory"))
            continue
        failed = [c.text for c in checks if not bool(_OPERATORS[c.operator](q[c.quantity].value, c.value))]
        if failed:
            rows.append((key, None, f"fails {failed[0]!r}"))
        elif objective not in q:
            rows.append((key, None, f"{objective} is not resolved (a price or power missing?)"))
        else:
            rows.append((key, float(q[objective].value), ""))
    sign = 1 if direction == "min" else -1
    return sorted(rows, key=lambda r: (r[1] is None, sign * (r[1] or 0)))
