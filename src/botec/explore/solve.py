"""Solvers: the best value of one field under constraints, and one assumption back-solved from an
observed figure. Both vary an estimate's inputs through the same quantity definitions."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from botec.errors import ContractError
from botec.explore.space import Space, evaluate_space, fit_quantities, fits_mask, parse_axes
from botec.findings.fit import FITS, FITS_DEVICE, VERDICTS
from botec.graph import Given, Graph
from botec.inputs import Inputs
from botec.units import UnitError, dimension_of_unit, format_quantity, parse_quantity

__all__ = ["Constraint", "parse_constraint", "Solution", "fit_verdict", "optimize", "back_solve", "best_accelerator"]

_CONSTRAINT = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(<=|>=|<|>|==)\s*(.+?)\s*$")
SEQUENCE_STEP = 128  # the default grid of the longest-sequence solver
MOST_SOLVE_VALUES = 10_000_000
"""The most values ``solve --over`` tries, refused from the range's text before any array is built: a solve keeps
a column per quantity it reads, about 0.4 GB per million values (1..1,000,000 for supply.count on the Llama 2-70B
example: 1.1 s, 415 MB), so 10 million is some 4 GB, and the 100 million one axis may otherwise have would
exhaust the memory. As ``sweep``'s default ``--cap``."""
_OPERATORS = {"<=": np.less_equal, ">=": np.greater_equal, "<": np.less, ">": np.greater, "==": np.equal}


@dataclass(frozen=True)
class Constraint:
    quantity: str
    operator: str
    value: float
    text: str

    def holds(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        return _OPERATORS[self.operator](columns[self.quantity], self.value)


def parse_constraint(text: str, graph: Graph, field: str = "--subject-to") -> Constraint | str:
    """``run_seconds <= 7 d`` (the value in the quantity's unit), or a memory verdict by name (returned as such):
    ``fits`` (the headroom kept, as the estimate) or ``fits_device`` (the device's memory, the headroom eaten)."""
    if text.strip() in VERDICTS:
        return text.strip()
    match = _CONSTRAINT.match(text)
    if not match:
        raise ContractError(f"expected QUANTITY OP VALUE such as 'run_seconds <= 7 d', 'fits' (the headroom kept) "
                            f"or 'fits_device' (the device's memory, the headroom eaten); got {text!r}", field=field)
    name, operator, raw = match.groups()
    registry = graph.definitions()
    if name not in registry:
        from botec.catalog import did_you_mean_quantity

        raise ContractError(f"unknown quantity {name!r}{did_you_mean_quantity(name, registry)}", field=field)
    try:
        value = parse_quantity(raw, dimension_of_unit(registry[name].unit))
    except UnitError as error:
        raise ContractError(f"{name}: {error}", field=field) from None
    return Constraint(name, operator, value, text.strip())


@dataclass
class Solution:
    value: float | None
    row: dict[str, float] | None
    feasible: int
    evaluated: int
    closest: str | None  # when infeasible: the constraint that fails and how close the best came
    verdict: str = FITS  # the memory verdict the solution meets (fits_device: only when asked for)
    value_keeping_headroom: float | None = None  # under fits_device: the best value that also keeps the headroom


def fit_verdict(named: list[str]) -> str:
    """The memory verdict a solve applies: ``fits`` (the headroom kept) unless only ``fits_device`` is named."""
    return FITS_DEVICE if named and FITS not in named else FITS


def optimize(inputs: Inputs, variable: str, direction: str, constraints: list[str], over: str | None = None,
             require_fit: bool = True) -> Solution:
    """The smallest (``min``) or largest (``max``) value of ``variable`` meeting the constraints, and a memory
    verdict: ``fits`` (the headroom kept) whether named or not (``require_fit``), ``fits_device`` when that alone is
    named (then ``value_keeping_headroom`` is the best value under ``fits``, for comparison)."""
    if inputs.kind != "training":
        raise ContractError("--minimize/--maximize search training layouts; for serving, `botec search` finds the "
                            "cheapest accelerator and TP degree", field="workload.kind")
    axis, = parse_axes([over or f"{variable}={_default_range(inputs, variable)}"], inputs, cap=MOST_SOLVE_VALUES,
                       field="--over", cap_words="the {cap:,} a solve tries",
                       advice="; narrow the range or give it a step, a..b/step")
    if axis.path != variable:
        raise ContractError(f"--over must range over {variable}, not {axis.path}", field="--over")
    parsed = [parse_constraint(c, inputs.graph) for c in constraints]
    checks = [c for c in parsed if isinstance(c, Constraint)]
    named = [c for c in parsed if isinstance(c, str)]
    verdict = fit_verdict(named)
    wanted = list(dict.fromkeys([c.quantity for c in checks] + fit_quantities(inputs)))
    columns, valid, counts = evaluate_space(Space(inputs, [axis]), wanted=wanted)
    ok = valid.copy()
    for constraint in checks:
        ok &= constraint.holds(columns)
    fitting = require_fit or bool(named)
    values = columns[variable]

    def best(mask: np.ndarray) -> int | None:
        index = np.flatnonzero(mask)
        if not index.size:
            return None
        return int(index[np.argmin(values[index])] if direction == "min" else index[np.argmax(values[index])])

    met = fits_mask(columns, ok, verdict) if fitting else ok
    pick = best(met)
    if pick is None:
        return Solution(None, None, 0, counts["evaluated"],
                        _closest(inputs, columns, valid, checks, counts, verdict if fitting else None), verdict)
    kept = best(fits_mask(columns, ok, FITS)) if verdict == FITS_DEVICE else None
    row = {name: float(column[pick]) for name, column in columns.items()}
    return Solution(float(values[pick]), row, int(met.sum()), counts["evaluated"], None, verdict,
                    None if kept is None else float(values[kept]))


def _default_range(inputs: Inputs, variable: str) -> str:
    if variable == "supply.count":
        return f"1..{max(1024, 8 * int(inputs.layout.accelerators))}"
    if variable in ("strategy.micro_batch_size", "strategy.gradient_accumulation_steps"):
        return "1..256"
    if variable == "workload.sequence_length":
        # Multiples of 128 (what attention kernels and packers use) up to 1M tokens, or 8 × the stated length.
        longest = max(1 << 20, 8 * int(inputs.fixed["sequence_length"].value))
        return f"{SEQUENCE_STEP}..{longest}/{SEQUENCE_STEP}"
    raise ContractError(f"give the values to try with --over {variable}=...", field="--over")


def _closest(inputs: Inputs, columns, valid, checks: list[Constraint], counts: dict, verdict: str | None) -> str:
    if not valid.any():
        unplaced = "; ".join(counts.get("unplaced", {})) or "no value tried gives a valid layout"
        return unplaced
    fits = fits_mask(columns, valid, verdict) if verdict is not None else valid
    if not fits.any():
        return ("nothing fits in memory with the headroom kept at any value tried" if verdict == FITS else
                "nothing fits the device's memory at any value tried, even with the headroom eaten")
    for constraint in checks:
        held = constraint.holds(columns) & fits
        if not held.any():
            values = columns[constraint.quantity][fits]
            best = values.min() if constraint.operator in ("<=", "<") else values.max()
            unit = inputs.graph.definitions()[constraint.quantity].unit
            return (f"'{constraint.text}' cannot be met: the best value tried gives "
                    f"{format_quantity(float(best), unit)}")
    return "the constraints cannot all be met at once"


def back_solve(inputs: Inputs, input_field: str, target: str) -> tuple[float, float]:
    """The value of one stated number (or an ``assumptions.`` quantity the graph derives, such as the
    end-to-end MFU, given in its place) that makes a quantity equal an observed figure, ``QUANTITY=VALUE``.

    Returns (value, the quantity's value there).
    """
    quantity, sep, raw = target.partition("=")
    constraint = parse_constraint(f"{quantity.strip()} == {raw}", inputs.graph, field="--given") if sep else None
    if constraint is None:
        raise ContractError("expected --given QUANTITY=VALUE such as accelerator_hours=1.72M", field="--given")
    from botec.inputs.serving import TABLE_ASIDE

    return solve_for(inputs, constraint.quantity, constraint.value, input_field,
                     TABLE_ASIDE if sets_table_aside(inputs, input_field) else None)


def sets_table_aside(inputs: Inputs, input_field: str) -> bool:
    """Whether solving ``input_field`` prices the weight GEMMs and decode attention on the roofline instead of the
    measured tables in force: a serving efficiency (botec.inputs.serving.ROOFLINE_EFFICIENCIES,
    ATTENTION_EFFICIENCIES) does not move a tabled GEMM or attention, and a
    contract that states one runs the roofline, so the value solved is the one that, stated, gives the figure."""
    from botec.inputs.serving import ATTENTION_EFFICIENCIES, ROOFLINE_EFFICIENCIES

    in_force = [inputs.given.get(name) for name in ("gemm_table_index", "attention_table_index")]
    return (input_field in ROOFLINE_EFFICIENCIES + ATTENTION_EFFICIENCIES[len(ROOFLINE_EFFICIENCIES):]
            and any(table is not None and float(table.value) >= 0 for table in in_force))


def solve_for(inputs: Inputs, quantity: str, value: float, input_field: str,
              overrides: dict[str, float] | None = None) -> tuple[float, float]:
    """Bisection: the value of ``input_field`` (a number the contract states, or ``assumptions.NAME`` /
    ``NAME`` for a quantity of the graph given in place of its formula) at which ``quantity`` equals
    ``value``; ``overrides`` pin other quantities meanwhile (a measured size, say).

    Returns (the input's value, the quantity's value there).
    """
    graph = inputs.graph
    registry = graph.definitions(inputs.choices)
    pinned = {name: Given(float(v), "measured") for name, v in (overrides or {}).items()}
    name = input_field.removeprefix("assumptions.")
    if input_field in inputs.variable_fields():
        def given_at(x: float) -> dict:
            return inputs.vary({input_field: x}).given | pinned

        if input_field in inputs.stated_fields:
            first = inputs.stated_fields[input_field][0]
            current, unit = float(inputs.given[first].value), registry[first].unit
        else:
            current, unit = float(inputs.spec[input_field]), "1"
    elif name in registry:
        def given_at(x: float) -> dict:
            return dict(inputs.given) | pinned | {name: Given(x, "assumed")}

        resolved = graph.evaluate(dict(inputs.given) | pinned, wanted=[name], choices=inputs.choices)
        current, unit = (float(resolved[name].value), registry[name].unit) if name in resolved \
            else (None, registry[name].unit)
    else:
        raise ContractError(f"cannot solve for {input_field!r}: not a number of this contract (variable: "
                            f"{', '.join(inputs.variable_fields())})", field="--find")

    def output(x: float) -> float:
        resolved = graph.evaluate(given_at(x), wanted=[quantity], choices=inputs.choices)
        if quantity not in resolved:
            raise ContractError(inputs.why_absent(quantity, resolved, given_at(x)), field="--given")
        return resolved[quantity].value

    if unit in ("1", "fraction") and input_field.startswith("assumptions."):
        low, high = 1e-6, 1.0
    elif current:
        low, high = current / 1e3, current * 1e3
    else:
        low, high = 1.0, 1e18  # no value to start from: a bracket wide enough for any rate or size, searched in log
    geometric = high / low > 1e4
    f_low, f_high = output(low) - value, output(high) - value
    if f_low * f_high <= 0:
        brackets = [(low, high, f_low)]
    else:   # not monotone (a serving fleet re-sized in whole replicas): crossings inside, on a grid
        brackets = _crossings(output, value, low, high, geometric)
    roots, jumps = [], []
    for bracket in brackets:
        found = _bisect(output, value, *bracket, geometric)
        reached = output(found)
        (roots if abs(reached - value) <= REACHED_TOLERANCE * max(abs(value), 1e-300) else jumps).append(found)
    if not roots:
        where = f" (it jumps past it at {input_field} = {jumps[0]:.6g})" if jumps else ""
        raise ContractError(f"no value of {input_field} between {low:g} and {high:g} gives {quantity} = {value:g}"
                            + where, field="--given")
    if current is not None and current > 0 and len(roots) > 1:   # the crossing nearest the current value
        roots.sort(key=lambda x: abs(math.log(x / current)) if geometric and x > 0 else abs(x - current))
    return roots[0], output(roots[0])


REACHED_TOLERANCE = 1e-6   # a crossing reaches the figure to this share; a bracket that does not holds a jump
SCAN_POINTS = 64   # the grid that looks for crossings when the bracket's ends lie on one side of the figure


def _bisect(output, value: float, low: float, high: float, f_low: float, geometric: bool) -> float:
    """Bisection of ``output(x) − value`` over [low, high], f(low) = ``f_low`` and f(high) on opposite sides (or
    zero): in log space where the bracket spans over 10⁴, to 10⁻¹² of the upper end."""
    for _ in range(400):
        middle = (low * high) ** 0.5 if geometric else (low + high) / 2
        f_middle = output(middle) - value
        if f_low * f_middle <= 0:
            high = middle
        else:
            low, f_low = middle, f_middle
        if abs(high - low) <= 1e-12 * max(abs(high), 1e-300):
            break
    return (low + high) / 2


def _crossings(output, value: float, low: float, high: float, geometric: bool) -> list[tuple[float, float, float]]:
    """The brackets (low, high, f(low)) on a grid of :data:`SCAN_POINTS` over [low, high] (geometric where it
    spans over 10⁴) where ``output(x) − value`` changes sign, for a quantity not monotone in the input: a lower
    efficiency sizes a serving fleet of more replicas, each with a smaller decode batch, so its TPOT can fall.
    A sign change is a crossing or a jump (a replica more); :func:`solve_for` tells them apart."""
    ratio = (high / low) ** (1 / (SCAN_POINTS - 1)) if geometric else None
    grid = [low * ratio ** i if geometric else low + (high - low) * i / (SCAN_POINTS - 1) for i in range(SCAN_POINTS)]
    grid[-1] = high
    f = [output(x) - value for x in grid]
    return [(grid[i], grid[i + 1], f[i]) for i in range(SCAN_POINTS - 1) if f[i] * f[i + 1] <= 0]


def best_accelerator(inputs: Inputs, objective: str, direction: str, constraints: list[str],
                     keys: list[str]) -> list[tuple[str, float | None, str]]:
    """The contract on each catalog accelerator: (key, objective or None, why not), best first."""
    from botec.catalog import accelerators, did_you_mean
    from botec.estimation import estimate_inputs

    registry = inputs.graph.definitions()
    parsed = [parse_constraint(text, inputs.graph) for text in constraints]
    checks = [c for c in parsed if isinstance(c, Constraint)]
    verdict = fit_verdict([c for c in parsed if isinstance(c, str)])
    if objective not in registry:
        raise ContractError(f"unknown quantity {objective!r}{did_you_mean(objective, registry)}",
                            field="--minimize" if direction == "min" else "--maximize")
    rows = []
    for key in keys:
        if key not in accelerators():
            raise ContractError(f"unknown accelerator {key!r}{did_you_mean(key, accelerators())}", field="--over")
        try:
            result = estimate_inputs(inputs.rebuild(supply={"accelerator": key}), compare=False)
        except ContractError as error:
            rows.append((key, None, error.detail))
            continue
        q = result.quantities
        if not result.meets(verdict):
            rows.append((key, None, "does not fit in memory" + (" with the headroom kept" if verdict == FITS
                                                                  else ", even with the headroom eaten")))
            continue
        failed = [c.text for c in checks if not bool(_OPERATORS[c.operator](q[c.quantity].value, c.value))]
        if failed:
            rows.append((key, None, f"fails {failed[0]!r}"))
        elif objective not in q:
            rows.append((key, None, result.inputs.why_absent(objective, q)))
        else:
            rows.append((key, float(q[objective].value), ""))
    sign = 1 if direction == "min" else -1
    return sorted(rows, key=lambda r: (r[1] is None, sign * (r[1] or 0)))
