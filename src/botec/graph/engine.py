"""The quantity graph: every result is a named quantity that knows where it came from.

A *formula* is a plain Python function whose parameter names are the quantities it reads and
whose own name is the quantity it makes. A module collects its formulas and inputs in a
:class:`Formulas` object::

    formulas = Formulas(account="compute")

    @formulas.formula(unit="FLOP", meaning="useful model work for the whole run",
                      expression="model_flops_per_token × tokens", source="lesson 000, Compute")
    def training_flops(model_flops_per_token, tokens):
        return model_flops_per_token * tokens

and a kind of estimate composes the modules it needs into a :class:`Graph` (``TRAINING`` in
:mod:`botec.training`, ``SERVING`` in :mod:`botec.serving`). The engine knows no formula and
imports none: a graph is built explicitly, not by import side effects.

Each formula is only arithmetic (or the helpers of :mod:`botec.graph.elementwise`), so the same
definition evaluates a single estimate on floats and a sweep or a Monte Carlo on numpy arrays.
Inputs (the contract, the catalog, a measurement) are given by name; a given value wins over the
formula of the same name, which is how a measured end-to-end MFU replaces the product of the two
assumed factors.

Absence is absence: an input that is not given is not invented. :meth:`Graph.evaluate` resolves
what can be resolved and leaves out the rest; :meth:`Graph.blocking_inputs` names the absent
inputs that keep a quantity out, so whatever needs it can say which contract field to state.
A formula may declare when it is zero whatever its other inputs (``zero_when="tensor_parallel
== 1"``: one rank has no tensor-parallel collectives and needs no link to run them).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from botec.graph.definitions import ACCOUNTS, PROVENANCES, Condition, Definition, Formulas, Given, Quantity
from botec.graph.elementwise import all_true, is_scalar, where

# What a quantity is (botec.graph.definitions) is importable from here too, beside the engine that evaluates it.
__all__ = ["ACCOUNTS", "PROVENANCES", "Condition", "Definition", "Formulas", "Given", "Graph", "Quantity"]


class Graph:
    """The formulas of one kind of estimate, composed from the modules that define them."""

    def __init__(self, name: str, *parts: Formulas):
        self.name = name
        self._base: dict[str, Definition] = {}
        self._variants: dict[str, dict[str, Definition]] = {}
        self.choices: dict[str, list[str]] = {}  # choice -> its options, the first being the default
        for part in parts:
            for definition in part.definitions:
                self._add(definition)
        self._resolved: dict[frozenset, dict[str, Definition]] = {}
        self._plans: dict[tuple, tuple[tuple, tuple[str, ...]]] = {}
        self._rankings: dict[int, tuple[dict, tuple[str, ...]]] = {}  # id of a cached registry -> its names, ranked

    def _add(self, definition: Definition) -> None:
        if definition.choice is not None:
            choice, option = definition.choice
            options = self.choices.setdefault(choice, [])
            if option not in options:
                options.append(option)
            variants = self._variants.setdefault(definition.name, {})
            if option in variants:
                raise ValueError(f"quantity {definition.name!r} has two {choice}={option} methods in {self.name}")
            variants[option] = definition
            self._base.setdefault(definition.name, definition)
            return
        if definition.name in self._base:
            raise ValueError(f"quantity {definition.name!r} is defined twice in the {self.name} graph")
        self._base[definition.name] = definition

    def __contains__(self, name: str) -> bool:
        return name in self._base

    def definitions(self, choices: dict[str, str] | None = None) -> dict[str, Definition]:
        """Every quantity, inputs and formulas, in definition order, with the chosen methods."""
        key = frozenset((choices or {}).items())
        if key in self._resolved:
            return self._resolved[key]
        for choice, option in (choices or {}).items():
            if choice not in self.choices:
                raise KeyError(f"unknown choice {choice!r} (choices: {', '.join(self.choices)})")
            if option not in self.choices[choice]:
                raise KeyError(f"unknown option {option!r} for {choice} (options: {', '.join(self.choices[choice])})")
        resolved = dict(self._base)
        for name, variants in self._variants.items():
            option = (choices or {}).get(next(iter(variants.values())).choice[0])
            if option in variants:
                resolved[name] = variants[option]
        self._resolved[key] = resolved
        return resolved

    def variants(self, name: str) -> dict[str, Definition]:
        """The methods of a quantity that has several (empty when it has one)."""
        return dict(self._variants.get(name, {}))

    def evaluate(self, given: dict[str, Given], wanted: Iterable[str] | None = None,
                 choices: dict[str, str] | None = None) -> dict[str, "Quantity"]:
        """Resolve every quantity that can be computed from ``given`` (or only ``wanted`` and their inputs).

        A given value wins over the formula of the same name. A formula whose inputs cannot all be
        resolved is left out (see :meth:`blocking_inputs`). The result keeps the accounts' order,
        then the definitions'.
        """
        registry = self.definitions(choices)
        unknown = [name for name in given if name not in registry]
        if unknown:
            raise KeyError(f"values given for quantities the {self.name} graph does not declare: "
                           f"{', '.join(sorted(unknown))}")
        if wanted is not None:
            return self._evaluate_wanted(registry, given, wanted)
        steps, ranked = self._plan(choices, registry, given)
        resolved: dict[str, Quantity] = {}
        for name, definition, is_given in steps:
            if is_given:
                g = given[name]
                resolved[name] = Quantity(definition, g.value, g.provenance, g.source, g.field, g.low, g.high)
                continue
            zero_rows = None
            if definition.zero_when:
                held, zero_rows = _held(definition.zero_when, resolved)
                if held is not None:
                    resolved[name] = Quantity(definition, 0.0, "derived", definition.source,
                                              inputs=(held.name,), condition=held.text)
                    continue
            try:
                arguments = [resolved[i].value for i in definition.inputs]
            except KeyError:  # an input that is absent, or that could not be resolved
                continue
            resolved[name] = Quantity(definition, _apply(definition.function, arguments, zero_rows), "derived",
                                      definition.source, inputs=definition.inputs)
        return {name: resolved[name] for name in ranked if name in resolved}

    def _plan(self, choices: dict[str, str] | None, registry: dict[str, Definition],
              given: dict[str, Given]) -> tuple[tuple, tuple[str, ...]]:
        """How to evaluate ``given``: (the steps, each ``(name, definition, whether it is given)``, in an order that
        puts every quantity after what it reads, its inputs and its ``zero_when`` conditions (a given quantity reads
        nothing; an input that is not given is no step); the names in the results' order, the accounts' and then
        the definitions').

        Computed once per set of choices and of given names (a contract's inputs are the same names from one
        estimate to the next) and cached, so that evaluating is one pass. A cycle no given value breaks is a
        ``ValueError``."""
        key = (frozenset((choices or {}).items()), frozenset(given))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        steps: list[tuple[str, Definition, bool]] = []
        done: set[str] = set()

        def visit(name: str, path: tuple[str, ...]) -> None:
            if name in done:
                return
            if name in path:
                raise ValueError(f"circular definition: {' -> '.join(path + (name,))}")
            definition = registry[name]
            if name not in given:
                for condition in definition.zero_when:
                    visit(condition.name, path + (name,))
                for input_name in definition.inputs:
                    visit(input_name, path + (name,))
            done.add(name)
            if name in given or definition.function is not None:
                steps.append((name, definition, name in given))

        for name in registry:
            visit(name, ())
        if len(self._plans) >= 64:  # a long-running server meets few sets of given names; keep the cache bounded
            self._plans.clear()
        self._plans[key] = plan = (tuple(steps), self._ranked(registry))
        return plan

    def _ranked(self, registry: dict[str, Definition]) -> tuple[str, ...]:
        """The names of ``registry`` in the results' order: the accounts', then the definitions' (cached)."""
        ranked = self._rankings.get(id(registry))
        if ranked is None or ranked[0] is not registry:
            rank = {name: (ACCOUNTS.index(d.account), i) for i, (name, d) in enumerate(registry.items())}
            ranked = (registry, tuple(sorted(rank, key=rank.__getitem__)))
            self._rankings[id(registry)] = ranked
        return ranked[1]

    def _evaluate_wanted(self, registry: dict[str, Definition], given: dict[str, Given],
                         wanted: Iterable[str]) -> dict[str, "Quantity"]:
        """:meth:`evaluate` of ``wanted`` only: what they read, resolved on demand (a condition that holds spares
        the formula's other inputs, which are then never computed)."""
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
            if definition.function is None:
                unresolvable.add(name)
                return False
            zero_rows = None
            if definition.zero_when:
                held, zero_rows = _held(definition.zero_when, resolved, resolve, path + (name,))  # noqa: F821 (see del)
                if held is not None:
                    resolved[name] = Quantity(definition, 0.0, "derived", definition.source,
                                              inputs=(held.name,), condition=held.text)
                    return True
            if not all(resolve(i, path + (name,)) for i in definition.inputs):  # noqa: F821 (see del)
                unresolvable.add(name)
                return False
            value = _apply(definition.function, [resolved[i].value for i in definition.inputs], zero_rows)
            resolved[name] = Quantity(definition, value, "derived", definition.source, inputs=definition.inputs)
            return True

        try:
            for name in wanted:
                resolve(name)
        finally:
            # resolve reads itself through its closure: a reference cycle that would hold every intermediate array
            # until the cyclic collector runs (it counts objects, not bytes: a search's chunks piled up, 2 GB)
            del resolve
        return {name: resolved[name] for name in self._ranked(registry) if name in resolved}

    def blocking_inputs(self, given: dict[str, Given], resolved: dict[str, "Quantity"], name: str,
                        choices: dict[str, str] | None = None) -> list[str]:
        """The absent inputs that keep ``name`` from being resolved (empty when it was)."""
        registry = self.definitions(choices)
        missing: list[str] = []
        seen: set[str] = set()

        def walk(current: str) -> None:
            if current in seen or current in resolved or current in given:
                return
            seen.add(current)
            definition = registry[current]
            if definition.function is None:
                missing.append(current)
                return
            for condition in definition.zero_when:
                walk(condition.name)  # noqa: F821 (bound; ruff counts the del below)
            for input_name in definition.inputs:
                walk(input_name)  # noqa: F821 (bound; ruff counts the del below)

        walk(name)
        del walk   # (a closure that reads itself: break the cycle)
        return missing

    def depends_on(self, name: str, inputs: set[str], choices: dict[str, str] | None = None) -> bool:
        """Whether ``name`` reads any of ``inputs``, directly or through other formulas."""
        registry = self.definitions(choices)
        seen: set[str] = set()
        stack = [name]
        while stack:
            current = stack.pop()
            if current in inputs:
                return True
            if current in seen or current not in registry:
                continue
            seen.add(current)
            stack.extend(registry[current].inputs)
            stack.extend(condition.name for condition in registry[current].zero_when)
        return False


def _apply(function: Callable[..., Any], arguments: list, zero_rows: Any) -> Any:
    """A formula's value from its arguments; zero in the rows of an array where a ``zero_when`` condition holds."""
    try:
        value = function(*arguments)
    except (ZeroDivisionError, OverflowError):  # floats past their range (absurd sizes): not a number,
        value = math.nan                         # which the estimate refuses naming the quantity
    if zero_rows is not None:  # an array where the condition holds in some rows only: zero there
        value = where(zero_rows, 0.0, value)
    return value


def _held(conditions: tuple[Condition, ...], resolved: dict, resolve=None, path: tuple = ()):
    """(the first condition that holds everywhere, or None; the rows of an array where any holds, or None).

    ``resolve``: how to resolve a condition's quantity first (on demand); without it, a condition not in
    ``resolved`` is absent (a one-pass evaluation has resolved what it could already)."""
    rows = None
    for condition in conditions:
        if resolve is not None and not resolve(condition.name, path):
            continue
        quantity = resolved.get(condition.name)
        if quantity is None:
            continue
        value = quantity.value
        holds = condition.holds(value)
        if all_true(holds):
            return condition, None
        if not is_scalar(value):
            rows = holds if rows is None else rows | holds
    return None, rows
