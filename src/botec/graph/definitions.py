"""What the quantity graph is made of: a :class:`Definition` (a formula or an input, with its unit, meaning
and source), the values :class:`Given` by name, each resolved :class:`Quantity` (its value and where it came from),
the ``zero_when`` :class:`Condition` of a formula, and :class:`Formulas`, the collection a module registers its
formulas in. How they are evaluated is :mod:`botec.graph.engine`'s."""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, NamedTuple

from botec.units import format_quantity

__all__ = ["ACCOUNTS", "PROVENANCES", "Condition", "Definition", "Formulas", "Given", "Quantity"]

ACCOUNTS = ("workload", "compute", "memory", "network", "storage", "serving", "capacity", "cost", "findings")
PROVENANCES = ("assumed", "catalog", "measured", "derived")


@dataclass(frozen=True)
class Condition:
    """``name op value``: part of a formula's ``zero_when``."""

    name: str
    operator: str
    value: float

    _OPERATORS = {"==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}

    def holds(self, value: Any):
        return self._OPERATORS[self.operator](value, self.value)

    @cached_property   # read by every estimate in which the condition holds
    def text(self) -> str:
        shown = {"==": "=", "<=": "≤", ">=": "≥"}.get(self.operator, self.operator)
        return f"{self.name} {shown} {self.value:g}"


_CONDITION = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(==|<=|>=|<|>)\s*([0-9.]+)\s*$")


def _conditions(text: str | None) -> tuple[Condition, ...]:
    """``"zero_stage < 3 or sharding_degree == 1"`` -> its conditions (any one holding suffices)."""
    if not text:
        return ()
    conditions = []
    for part in text.split(" or "):
        match = _CONDITION.match(part)
        if not match:
            raise ValueError(f"cannot read the condition {part!r} (expected NAME OP NUMBER)")
        conditions.append(Condition(match[1], match[2], float(match[3])))
    return tuple(conditions)


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
    choice: tuple[str, str] | None = None  # (choice, option) for one of several methods of one quantity
    detail: bool = False  # an intermediate step: in explain, JSON and Markdown, not in the terminal summary
    zero_when: tuple[Condition, ...] = ()  # any of these holding makes the quantity 0 without its other inputs
    prose: bool = False  # the expression is words, not a checkable formula
    symbols: tuple[tuple[str, str], ...] = ()  # a worded formula's symbols -> what they stand for, in order
    labels: tuple[str, ...] = ()  # a choice encoded as a number: labels[i] is the word for the value i

    @property
    def is_input(self) -> bool:
        return self.function is None


class Given(NamedTuple):
    """A value handed to the graph from outside: the contract, the catalog or a measurement (an immutable record,
    a named tuple for the same reason as :class:`Quantity`)."""

    value: Any
    provenance: str = "assumed"
    source: str | None = None
    field: str | None = None  # the contract path it was read from, e.g. "supply.count"
    low: float | None = None
    high: float | None = None
    distribution: str = "triangular"  # how Monte Carlo samples the range

    def with_value(self, value: Any, provenance: str | None = None, source: str | None = None) -> "Given":
        """The same input with another value (a swept or sampled one)."""
        return Given(value, provenance or self.provenance, source if source is not None else self.source,
                     self.field, self.low, self.high, self.distribution)


class Quantity(NamedTuple):
    """A resolved quantity: value in base units plus everything needed to explain it.

    An immutable record; a named tuple rather than a frozen dataclass because an estimate makes some 300 of them,
    and a frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field) took half of the evaluation."""

    definition: Definition
    value: Any
    provenance: str
    source: str | None = None
    field: str | None = None
    low: float | None = None
    high: float | None = None
    inputs: tuple[str, ...] = ()
    condition: str | None = None  # the zero_when condition that held, if the quantity is 0 by it

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


class Formulas:
    """The inputs and formulas one module defines, in the order it defines them."""

    def __init__(self, account: str):
        if account not in ACCOUNTS:
            raise ValueError(f"unknown account {account!r}")
        self.account = account
        self.definitions: list[Definition] = []

    def input(self, name: str, *, unit: str, meaning: str, account: str | None = None, detail: bool = False,
              labels: Iterable[str] = ()) -> None:
        """Declare a quantity that only ever comes from outside the graph (contract, catalog, measurement).

        ``detail=True``: a fact the report's summary need not list (a shape the model's name already says).
        ``labels``: for a choice the graph reads as a number, the contract's word for each value 0, 1, 2, ...
        (``botec explain`` writes ``recompute = full``, not 2).
        """
        self.definitions.append(Definition(name=name, account=account or self.account, unit=unit, meaning=meaning,
                                           detail=detail, labels=tuple(labels)))

    def formula(self, *, unit: str, meaning: str, expression: str, source: str | None = None,
                choice: tuple[str, str] | None = None, detail: bool = False, account: str | None = None,
                zero_when: str | None = None, prose: bool = False, reads: tuple[str, ...] | None = None,
                symbols: dict[str, str] | None = None):
        """Define the quantity the decorated function is named after.

        ``choice=("step_time", "components")`` marks one of several methods for one quantity; a
        graph uses the option its ``choices`` name (the first defined by default). ``zero_when``
        names conditions on inputs under which the quantity is 0 and its other inputs are not read.
        ``prose=True`` says the expression is words (it cannot be checked against the function).
        ``reads``: the inputs of a function written ``def name(**values)`` (a model over many inputs, as
        the serving replica's): it is called with them as keywords, and its expression is words (prose).
        ``symbols``: what each single-letter symbol of a worded expression stands for (a quantity's or
        input's name, or a few words when it is no quantity of the graph), ``{"ρ": "...", "S": "..."}``;
        ``botec explain`` prints them as a legend under the formula.
        """

        def define(function: Callable[..., Any]) -> Callable[..., Any]:
            code = function.__code__
            inputs = tuple(reads) if reads is not None else tuple(code.co_varnames[: code.co_argcount])
            called = function
            if reads is not None:
                def called(*values, _function=function, _names=inputs):
                    return _function(**dict(zip(_names, values)))
            self.definitions.append(Definition(
                name=function.__name__, account=account or self.account, unit=unit, meaning=meaning,
                expression=expression, inputs=inputs, function=called,
                source=source, choice=choice, detail=detail, zero_when=_conditions(zero_when),
                prose=prose or reads is not None, symbols=tuple((symbols or {}).items())))
            return function

        return define
