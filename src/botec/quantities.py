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
    "log2",
    "minimum",
    "maximum",
    "where",
]

ACCOUNTS = ("workload", "compute", "memory", "network", "storage", "serving", "capacity", "cost", "findings")
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
    choice: tuple[str, str] | None = None  # (choice, option) for one of several methods of one quantity
    detail: bool = False  # an intermediate step: in explain, JSON and Markdown, not in the terminal summary


@dataclass(frozen=True)
class Given:
    """A value handed to the graph from outside: the contract, the catalog or a measurement."""

    value: Any
    provenance: str = "assumed"
    source: str | None = None
    field: str | None = None  # the contract path it was read from, e.g. "supply.count"
    low: float | None = None
    high: float | None = None
    distribution: str = "triangular"  # how Monte Carlo samples the range


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
_VARIANTS: dict[str, dict[str, Definition]] = {}  # quantity -> {option: definition} for chosen methods
CHOICES: dict[str, list[str]] = {}  # choice -> its options, the first being the default


def _register(definition: Definition) -> None:
    if definition.account not in ACCOUNTS:
        raise ValueError(f"unknown account {definition.account!r} for {definition.name!r}")
    if definition.choice is not None:
        choice, option = definition.choice
        options = CHOICES.setdefault(choice, [])
        if option not in options:
            options.append(option)
        variants = _VARIANTS.setdefault(definition.name, {})
        if option in variants:
            raise ValueError(f"quantity {definition.name!r} has two {choice}={option} methods")
        variants[option] = definition
        _DEFINITIONS.setdefault(definition.name, definition)
        return
    if definition.name in _DEFINITIONS:
        raise ValueError(f"quantity {definition.name!r} is defined twice")
    _DEFINITIONS[definition.name] = definition


def formula(*, account: str, unit: str, meaning: str, expression: str, source: str | None = None,
            choice: tuple[str, str] | None = None, detail: bool = False, name: str | None = None,
            inputs: tuple[str, ...] | None = None):
    """Register the decorated function as the definition of the quantity it is named after.

    ``choice=("step_time", "components")`` marks one of several methods for the same quantity;
    :func:`evaluate` uses the option its ``choices`` name (the first registered by default).
    ``name`` and ``inputs`` register one function for several quantities (its parameters then
    receive the named inputs in order).
    """

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        code = function.__code__
        arguments = inputs if inputs is not None else tuple(code.co_varnames[: code.co_argcount])
        _register(
            Definition(
                name=name or function.__name__,
                account=account,
                unit=unit,
                meaning=meaning,
                expression=expression,
                inputs=arguments,
                function=function,
                source=source,
                choice=choice,
                detail=detail,
            )
        )
        return function

    return register


def declare_input(name: str, *, account: str, unit: str, meaning: str) -> None:
    """Declare a quantity that only ever comes from outside the graph (contract, catalog, measurement)."""
    _register(Definition(name=name, account=account, unit=unit, meaning=meaning))


def definitions(choices: dict[str, str] | None = None) -> dict[str, Definition]:
    """All registered quantities, inputs and formulas, in registration order, with the chosen methods."""
    _load_accounts()
    resolved = dict(_DEFINITIONS)
    for choice, option in (choices or {}).items():
        if choice not in CHOICES:
            raise KeyError(f"unknown choice {choice!r} (choices: {', '.join(CHOICES)})")
        if option not in CHOICES[choice]:
            raise KeyError(f"unknown option {option!r} for {choice} (options: {', '.join(CHOICES[choice])})")
    for name, variants in _VARIANTS.items():
        choice = next(iter(variants.values())).choice[0]
        option = (choices or {}).get(choice)
        if option in variants:
            resolved[name] = variants[option]
    return resolved


def _load_accounts() -> None:
    # The accounts register their formulas on import.
    import botec.training  # noqa: F401
    import botec.serving  # noqa: F401
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


def log2(x):
    """log₂ x, elementwise."""
    if _is_scalar(x):
        return math.log2(x)
    import numpy as np

    return np.log2(x)


def minimum(a, b):
    """min(a, b), elementwise."""
    if _is_scalar(a, b):
        return min(a, b)
    import numpy as np

    return np.minimum(a, b)


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


def evaluate(given: dict[str, Given], wanted: Iterable[str] | None = None,
             choices: dict[str, str] | None = None) -> dict[str, Quantity]:
    """Resolve every quantity that can be computed from ``given`` (or only ``wanted`` and their inputs).

    A given value wins over the formula of the same name. A formula whose inputs cannot all be
    resolved is left out (cost needs a price; energy needs a power figure). The result keeps the
    registration order of the definitions.
    """
    registry = definitions(choices)
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
                           "checkpoints", "copies", "accelerator-hours", "requests", "replicas"}


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


_BRANCH = re.compile(r"^(?P<then>.+?) if (?P<left>[a-z_][a-z0-9_]*)(?: (?P<op>≥|≤|>|<|=) (?P<right>[a-z0-9_.]+))?"
                     r" else (?P<otherwise>.+)$")
_INNER_BRANCH = re.compile(r"\(([^()]*? if [^()]*? else [^()]*)\)")
_TIMES_OR_BY_ONE = re.compile(r" [×/] 1(?![0-9.,])")
_COMPARE = {"≥": lambda a, b: a >= b, "≤": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
            "=": lambda a, b: a == b}


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def taken_branch(expression: str, quantities: dict[str, Quantity], conditions: list[str] | None = None) -> str:
    """For ``A if x ≥ 3 else B`` the branch the values select (nested ``else ... if`` too); else the expression.

    The names the decision read are appended to ``conditions`` (as ``name = value``).
    """
    match = _BRANCH.match(expression)
    if not match or not (_balanced(match["then"]) and _balanced(match["otherwise"])):
        return expression

    def value(token: str):
        if token in quantities:
            return quantities[token].value
        try:
            return float(token)
        except ValueError:
            return None

    left = value(match["left"])
    right = value(match["right"]) if match["op"] else None
    if not isinstance(left, (int, float)) or (match["op"] and not isinstance(right, (int, float))):
        return expression
    if conditions is not None:
        for token in (match["left"], match["right"]):
            if token in quantities:
                note = f"{token} = {format_number(quantities[token].value)}"
                if note not in conditions:
                    conditions.append(note)
    holds = _COMPARE[match["op"]](left, right) if match["op"] else bool(left)
    if holds:
        return match["then"]
    return taken_branch(match["otherwise"], quantities, conditions)


def taken_branches(expression: str, quantities: dict[str, Quantity],
                   conditions: list[str] | None = None) -> str:
    """Resolve every conditional of ``expression`` (parenthesized ones first) to the branch taken;
    a factor that comes out as 1 is dropped."""

    def inner(match: re.Match[str]) -> str:
        branch = taken_branch(match.group(1), quantities, conditions)
        if branch == match.group(1):
            return match.group(0)
        return branch if _IDENTIFIER.fullmatch(branch) or branch.replace(".", "").isdigit() else f"({branch})"

    previous = None
    while previous != expression:
        previous, expression = expression, _INNER_BRANCH.sub(inner, expression)
    return _TIMES_OR_BY_ONE.sub("", taken_branch(expression, quantities, conditions))


def substitute(quantity: Quantity, quantities: dict[str, Quantity], system: str = "decimal",
               expression: str | None = None) -> str:
    """The quantity's formula with each input's value written in place of its name."""
    expression = expression if expression is not None else (quantity.definition.expression or "")
    text = _IDENTIFIER.sub(
        lambda m: _substituted(quantities[m.group(0)], system) if m.group(0) in quantities else m.group(0),
        expression,
    )
    return _GROUP.sub(_tidy_group, text)


def explain_line(quantity: Quantity, quantities: dict[str, Quantity], system: str = "decimal") -> str:
    """One line: ``name = formula = substituted values = result`` (or the input and its origin).

    A conditional formula shows the branch its values take.
    """
    conditions: list[str] = []
    expression = taken_branches(quantity.definition.expression or "", quantities, conditions)
    because = f"  [as {', '.join(conditions)}]" if conditions else ""
    if quantity.provenance != "derived":
        origin = quantity.provenance
        if quantity.field:
            origin += f", {quantity.field}"
        if quantity.source:
            origin += f": {quantity.source}"
        return f"{quantity.name} = {quantity.formatted(system)}  [{origin}]"
    if expression in quantities:  # a plain alias: nothing to substitute
        return f"{quantity.name} = {expression} = {quantity.formatted(system)}{because}"
    if not _IDENTIFIER.search(expression):  # a constant branch
        return f"{quantity.name} = {quantity.formatted(system)}{because}"
    return (f"{quantity.name} = {expression} = {substitute(quantity, quantities, system, expression)}"
            f" = {quantity.formatted(system)}{because}")


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
