"""`botec explain`: a quantity's derivation chain, with the values written into each formula.

The expressions of the formulas use a small written notation (×, /, −, ⌈ ⌉, ``A if x ≥ 3 else
B``); this module substitutes values for names, shows which branch of a conditional the values
take, and factors a shared unit out of a sum, so that a chain reads like the lesson's own
derivations::

    planned_device_bytes = (state_bytes + activation_bytes + runtime_buffer_bytes) × (1 + headroom)
                         = (16 + 2.15 + 2) GB × 1.25 = 25.2 GB
"""

from __future__ import annotations

import math
import re

from botec.graph.engine import Quantity
from botec.units import format_number

__all__ = ["explain", "explain_line", "legend", "substitute", "taken_branch", "taken_branches", "worded"]

_IDENTIFIER = re.compile(r"\b[a-z_][a-z0-9_]*\b")
_GROUP = re.compile(r"\(([^()]*)\)")
_TERM = re.compile(r"^\s*([0-9][0-9,.]*(?: × 10[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)?)\s+(\S+)\s*$")
_PLAIN_SUM = re.compile(r"^\s*[0-9.,]+(?:\s*[+−-]\s*[0-9.,]+)+\s*$")
_COUNT_UNITS_SHOWN_BARE = {"1", "", "tokens", "steps", "sequences", "parameters", "accelerators", "layers",
                           "checkpoints", "copies", "accelerator-hours", "requests", "replicas"}


def worded(quantity: Quantity) -> str | None:
    """The word for a choice's encoded value, from its definition's labels (``recompute`` 2 -> ``full``); None for
    a quantity without labels or a value that has none."""
    labels, value = quantity.definition.labels, quantity.value
    if not labels or not isinstance(value, (int, float)) or value != int(value) or not 0 <= value < len(labels):
        return None
    return labels[int(value)]


def _substituted(quantity: Quantity, system: str) -> str:
    """The value as it appears inside a substituted formula: counts bare, others with their unit."""
    word = worded(quantity)
    if word is not None:
        return word
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
    # a zero term shares any unit: (20.1 GB + 0 B) -> (20.1 + 0) GB
    units = {m.group(2) for m in parsed if m and m.group(1) != "0"}
    if len(values) > 1 and all(parsed) and len(units) == 1:
        unit = units.pop()
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


def _substituted_bare(quantity: Quantity) -> str:
    """A condition's value: a choice's word, else the bare number."""
    word = worded(quantity)
    return word if word is not None else format_number(quantity.value)


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
                note = f"{token} = {_substituted_bare(quantities[token])}"
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


_NOT_PROSE = {"if", "else", "max", "min", "ln", "log", "exp", "sqrt", "and", "or", "gemm"}


def _mostly_words(expression: str, quantities: dict[str, Quantity]) -> bool:
    """A worded formula (``... step without a prefill chunk ...``) with four words or more to each name of a
    quantity: writing values into its few names would only print the words twice."""
    tokens = _IDENTIFIER.findall(expression)
    names = sum(token in quantities for token in tokens)
    words = sum(token not in quantities and len(token) > 1 and token not in _NOT_PROSE for token in tokens)
    return words >= 4 * max(names, 1)


def legend(quantity: Quantity) -> str | None:
    """``where ρ = ..., S = ...``: what the symbols of a worded formula stand for (None without symbols)."""
    if quantity.condition is not None or not quantity.inputs or not quantity.definition.symbols:
        return None
    return "where " + ", ".join(f"{symbol} = {meaning}" for symbol, meaning in quantity.definition.symbols)


def explain_line(quantity: Quantity, quantities: dict[str, Quantity], system: str = "decimal") -> str:
    """One line: ``name = formula = substituted values = result`` (or the input and its origin).

    A conditional formula shows the branch its values take.
    """
    if quantity.condition is not None:  # zero by its zero_when condition: nothing else was read
        condition = quantity.condition
        deciding = quantities.get(quantity.inputs[0]) if quantity.inputs else None
        if deciding is not None and worded(deciding) is not None:  # recompute < 2 -> = none
            condition = f"{deciding.name} = {worded(deciding)}"
        return f"{quantity.name} = {quantity.formatted(system)}  [as {condition}]"
    conditions: list[str] = []
    expression = taken_branches(quantity.definition.expression or "", quantities, conditions)
    because = f"  [as {', '.join(conditions)}]" if conditions else ""
    if not quantity.inputs:  # given from outside the graph: say where it came from
        word = worded(quantity)
        origin = quantity.provenance
        if quantity.field:
            origin += f", {quantity.field}"
        if quantity.source and quantity.source != word:
            origin += f": {quantity.source}"
        return f"{quantity.name} = {word if word is not None else quantity.formatted(system)}  [{origin}]"
    if expression in quantities:  # a plain alias: nothing to substitute
        return f"{quantity.name} = {expression} = {quantity.formatted(system)}{because}"
    if not _IDENTIFIER.search(expression):  # a constant branch
        return f"{quantity.name} = {quantity.formatted(system)}{because}"
    substituted = substitute(quantity, quantities, system, expression)
    if substituted == expression or _mostly_words(expression, quantities):
        # words with no value of their own to show, or whose values would only repeat the words: say it once
        return f"{quantity.name} = {expression} = {quantity.formatted(system)}{because}"
    return f"{quantity.name} = {expression} = {substituted} = {quantity.formatted(system)}{because}"


def explain(name: str, quantities: dict[str, Quantity], system: str = "decimal",
            max_depth: int | None = None) -> list[tuple[int, str]]:
    """The derivation chain of ``name``: (depth, line) pairs, the quantity first (depth 0), each input once.

    With ``max_depth`` the chain stops at that depth: a quantity there whose inputs are left out is followed by
    one ``...`` line a level deeper."""
    lines: list[tuple[int, str]] = []
    seen: set[str] = set()

    def walk(current: str, depth: int) -> None:
        if current in seen:
            return
        seen.add(current)
        quantity = quantities[current]
        lines.append((depth, explain_line(quantity, quantities, system)))
        symbols = legend(quantity)
        if symbols:  # under its formula, indented as a continuation of it
            lines.append((depth, "    " + symbols))
        if max_depth is not None and depth >= max_depth:
            if any(input_name not in seen for input_name in quantity.inputs):
                lines.append((depth + 1, "..."))
            return
        for input_name in quantity.inputs:
            walk(input_name, depth + 1)

    walk(name, 0)
    return lines
