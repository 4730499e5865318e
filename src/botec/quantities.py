"""The quantity graph: every result is a named quantity that knows where it came from.

A *formula* is a plain Python function whose parameter names are the names of the quantities
it reads and whose own name is the quantity it makes::

    @formula(account="compute", unit="FLOP", meaning="useful model work for the whole run",
             expression="6 × parameters × tokens", source="lesson 000, Compute")
    def training_flops(parameters, tokens):
        return 6 * parameters * tokens

Each formula is written once and is only arithmetic (or the elementwise helpers below), so the
same definition evaluates a single float estimate, and elementwise over numpy arrays for sweeps
and Monte Carlo. Inputs (what the contract states, or the catalog, or a measurement) are given
by name; a given value always wins over the formula of the same name, which is how a measured
end-to-end MFU replaces the product of the two assumed factors, and how measurements will
replace assumptions.

:func:`evaluate` resolves everything that can be resolved from what is given; :func:`explain`
prints the derivation chain of one quantity with the values substituted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from botec.units import format_number, format_quantity

__all__ = [
    "ACCOUNTS",
    "PROVENANCES",
    "Definition",
    "Given",
    "Quantity",
    "declare_input",
    "definitions",
    "evaluate",
    "explain",
    "formula",
    "ceil",
    "floor",
    "maximum",
    "where",
]

ACCOUNTS = ("workload", "compute", "memory", "network", "storage", "cost", "findings")
PROVENANCES = ("assumed", "catalog", "measured", "derived")


@dataclass(frozen=True)
class Definition:
    """What a quantity is: its name, account, unit, meaning and (if derived) its formula."""

    name: str
    account: str
    unit: str
    meaning: str
    expression: str | None = None  # None for inputs
    inputs: tuple[str, ...] = ()
    function: Callable[..., Any] | None = None
    source: str | None = None  # where the formula comes from


@dataclass(frozen=True)
class Given:
    """A value handed to the graph from outside: the contract, the catalog or a measurement."""

    value: Any
    provenance: str = "assumed"
    source: str | None = None
    field: str | None = None  # the contract path it was read from, e.g. "supply.count"
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class Quantity:
    """A resolved quantity: value in base units plus everything needed to explain it."""

    definition: Definition
    value: Any
    provenance: str
    source: str | None = None
    field: str | None = None
    low: float | None = None
    high: float | None = None
    inputs: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def unit(self) -> str:
        return self.definition.unit

    @property
    def account(self) -> str:
        return self.definition.account

    @property
    def formula(self) -> str | None:
        return self.definition.expression if self.provenance == "derived" else None

    def formatted(self, system: str = "decimal") -> str:
        return format_quantity(self.value, self.unit, system)


_DEFINITIONS: dict[str, Definition] = {}


def _register(definition: Definition) -> None:
    if definition.name in _DEFINITIONS:
        raise ValueError(f"quantity {definition.name!r} is defined twice")
    if definition.account not in ACCOUNTS:
        raise ValueError(f"unknown account {definition.account!r} for {definition.name!r}")
    _DEFINITIONS[definition.name] = definition


def formula(*, account: str, unit: str, meaning: str, expression: str, source: str | None = None):
    """Register the decorated function as the one definition of the quantity it is named after."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        code = function.__code__
        inputs = tuple(code.co_varnames[: code.co_argcount])
        _register(
            Definition(
                name=function.__name__,
                account=account,
                unit=unit,
                meaning=meaning,
                expression=expression,
                inputs=inputs,
                function=function,
                source=source,
            )
        )
        return function

    return register


def declare_input(name: str, *, account: str, unit: str, meaning: str) -> None:
    """Declare a quantity that only ever comes from outside the graph (contract, catalog, measurement)."""
    _register(Definition(name=name, account=account, unit=unit, meaning=meaning))


def definitions() -> dict[str, Definition]:
    """All registered quantities, inputs and formulas, in registration order."""
    _load_accounts()
    return dict(_DEFINITIONS)


def _load_accounts() -> None:
    # The accounts register their formulas on import.
    import botec.training  # noqa: F401
    import botec.economics  # noqa: F401
    import botec.findings  # noqa: F401


# ---------------------------------------------------------------------------------------------
# Elementwise helpers: plain math on floats, numpy on arrays (numpy is imported only then).
# ---------------------------------------------------------------------------------------------


def _is_scalar(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) for v in values)


def ceil(x):
    """⌈x⌉, elementwise."""
    if _is_scalar(x):
        return float(math.ceil(x)) if math.isfinite(x) else x  # inf/nan pass through to the finite check
    import numpy as np

    return np.ceil(x)


def floor(x):
    """⌊x⌋, elementwise."""
    if _is_scalar(x):
        return float(math.floor(x)) if math.isfinite(x) else x
    import numpy as np

    return np.floor(x)


def maximum(a, b):
    """max(a, b), elementwise."""
    if _is_scalar(a, b):
        return max(a, b)
    import numpy as np

    return np.maximum(a, b)


def where(condition, if_true, if_false):
    """``if_true`` where ``condition`` holds, else ``if_false``, elementwise."""
    if isinstance(condition, bool) or _is_scalar(condition):
        return if_true if condition else if_false
    import numpy as np

    return np.where(condition, if_true, if_false)


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


def evaluate(given: dict[str, Given], wanted: Iterable[str] | None = None) -> dict[str, Quantity]:
    """Resolve every quantity that can be computed from ``given`` (or only ``wanted`` and their inputs).

    A given value wins over the formula of the same name. A formula whose inputs cannot all be
    resolved is left out (cost needs a price; energy needs a power figure). The result keeps the
    registration order of the definitions.
    """
    registry = definitions()
    unknown = [name for name in given if name not in registry]
    if unknown:
        raise KeyError(f"values given for undeclared quantities: {', '.join(sorted(unknown))}")
    resolved: dict[str, Quantity] = {}
    unresolvable: set[str] = set()

    def resolve(name: str, path: tuple[str, ...] = ()) -> bool:
        if name in resolved:
            return True
        if name in unresolvable:
            return False
        if name in path:
            raise ValueError(f"circular definition: {' -> '.join(path + (name,))}")
        definition = registry[name]
        if name in given:
            g = given[name]
            resolved[name] = Quantity(definition, g.value, g.provenance, g.source, g.field, g.low, g.high)
            return True
        if definition.function is None or not all(resolve(i, path + (name,)) for i in definition.inputs):
            unresolvable.add(name)
            return False
        value = definition.function(*(resolved[i].value for i in definition.inputs))
        resolved[name] = Quantity(definition, value, "derived", definition.source, inputs=definition.inputs)
        return True

    for name in wanted if wanted is not None else registry:
        resolve(name)
    order = {name: (ACCOUNTS.index(d.account), i) for i, (name, d) in enumerate(registry.items())}
    return {name: resolved[name] for name in sorted(resolved, key=order.__getitem__)}


# ---------------------------------------------------------------------------------------------
# Explanation
# ---------------------------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"\b[a-z_][a-z0-9_]*\b")
_GROUP = re.compile(r"\(([^()]*)\)")
_TERM = re.compile(r"^\s*([0-9][0-9,.]*(?: × 10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?)\s+(\S+)\s*$")
_PLAIN_SUM = re.compile(r"^\s*[0-9.,]+(?:\s*[+−-]\s*[0-9.,]+)+\s*$")
_COUNT_UNITS_SHOWN_BARE = {"1", "", "tokens", "steps", "sequences", "parameters", "accelerators", "layers",
                           "checkpoints", "copies", "accelerator-hours"}


def _substituted(quantity: Quantity, system: str) -> str:
    """The value as it appears inside a substituted formula: counts bare, others with their unit."""
    if quantity.unit in _COUNT_UNITS_SHOWN_BARE:
        value = quantity.value
        if abs(value) >= 1e7:
            exponent = math.floor(math.log10(abs(value)))
            superscript = str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
            return f"{format_number(value / 10**exponent)} × 10{superscript}"
        return format_number(value)
    return quantity.formatted(system)


def _tidy_group(match: re.Match[str]) -> str:
    """Factor a shared unit out of a sum, ``(16 GB + 2.15 GB + 2 GB)`` -> ``(16 + 2.15 + 2) GB``,
    and fold a sum of plain numbers, ``(1 + 0.25)`` -> ``1.25``."""
    inner = match.group(1)
    if _PLAIN_SUM.match(inner):
        total = 0.0
        for sign, number in re.findall(r"([+−-]?)\s*([0-9.,]+)", inner):
            total += (-1 if sign in "−-" and sign else 1) * float(number.replace(",", ""))
        return format_number(total)
    terms = re.split(r"\s+([+−])\s+", inner)
    values, operators = terms[::2], terms[1::2]
    parsed = [_TERM.match(t) for t in values]
    if len(values) > 1 and all(parsed) and len({m.group(2) for m in parsed}) == 1:
        unit = parsed[0].group(2)
        body = parsed[0].group(1)
        for op, m in zip(operators, parsed[1:]):
            body += f" {op} {m.group(1)}"
        return f"({body}) {unit}"
    return match.group(0)


def substitute(quantity: Quantity, quantities: dict[str, Quantity], system: str = "decimal") -> str:
    """The quantity's formula with each input's value written in place of its name."""
    expression = quantity.definition.expression or ""
    text = _IDENTIFIER.sub(
        lambda m: _substituted(quantities[m.group(0)], system) if m.group(0) in quantities else m.group(0),
        expression,
    )
    return _GROUP.sub(_tidy_group, text)


def explain_line(quantity: Quantity, quantities: dict[str, Quantity], system: str = "decimal") -> str:
    """One line: ``name = formula = substituted values = result`` (or the input and its origin)."""
    expression = quantity.definition.expression or ""
    if quantity.provenance != "derived":
        origin = quantity.provenance
        if quantity.field:
            origin += f", {quantity.field}"
        if quantity.source:
            origin += f": {quantity.source}"
        return f"{quantity.name} = {quantity.formatted(system)}  [{origin}]"
    if expression in quantities:  # a plain alias: nothing to substitute
        return f"{quantity.name} = {expression} = {quantity.formatted(system)}"
    return (
        f"{quantity.name} = {quantity.definition.expression} = "
        f"{substitute(quantity, quantities, system)} = {quantity.formatted(system)}"
    )


def explain(name: str, quantities: dict[str, Quantity], system: str = "decimal") -> list[tuple[int, str]]:
    """The derivation chain of ``name``: (depth, line) pairs, the quantity first, each input once."""
    lines: list[tuple[int, str]] = []
    seen: set[str] = set()

    def walk(current: str, depth: int) -> None:
        if current in seen:
            return
        seen.add(current)
        quantity = quantities[current]
        lines.append((depth, explain_line(quantity, quantities, system)))
        for input_name in quantity.inputs:
            walk(input_name, depth + 1)

    walk(name, 0)
    return lines
