"""From a contract to the graph's inputs, once: the layout, the given values, the methods chosen.

This is the only place that reads a contract's fields into quantities. :func:`build_inputs`
resolves the model (a ``config.json`` relative to the contract), checks the layout against its
rules, places each parallel group on a network tier and records which contract field states
which input. Everything downstream starts from the :class:`Inputs` it returns: the estimate
evaluates them; sweeps, the layout search, solvers, Monte Carlo, sensitivity, figures and the
web app vary them (:meth:`Inputs.vary`) and never read the contract again.

Absence is absence: an input the contract does not state (a link, a price, a latency target) is
not given, and :attr:`Inputs.missing` says which field would state it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from botec.errors import ContractError
from botec.graph import Given, Graph
from botec.graph.elementwise import is_scalar
from botec.inputs.cluster import Placement, Tiers
from botec.inputs.missing import Missing
from botec.layout import Layout, ModelFacts

__all__ = ["Inputs", "Varied", "Missing", "Placement", "accelerator_options", "build_inputs", "checked"]


@dataclass(frozen=True)
class Varied:
    """Inputs with some contract fields varied: the given values, and which rows respect the layout rules.

    For array changes ``valid`` is a numpy bool array and ``unplaced`` maps a link input to the rows
    that need a network tier the contract does not state (and the field that would state it).
    """

    given: dict[str, Given]
    layout: Layout
    valid: Any = True
    unplaced: dict[str, tuple[Any, Missing]] = field(default_factory=dict)
    missing: dict[str, Missing] = field(default_factory=dict)
    placement: dict[str, Placement] = field(default_factory=dict)


@dataclass(frozen=True)
class Inputs:
    """Everything an estimate of one contract is computed from."""

    kind: str                       # "training" | "serving"
    contract: Any                   # TrainingContract | ServingContract, for its labels and layout fields
    base_dir: Path | None           # where a config.json path is resolved from
    architecture: Any               # Architecture, or None for a bare parameter count
    model: ModelFacts
    graph: Graph
    choices: dict[str, str]
    accelerator_label: str          # what runs: "NVIDIA H100 SXM5 80 GB (h100-sxm)"
    formats_label: str              # how: the optimizer preset, or the serving formats
    spec: dict[str, Any]            # the layout numbers, by contract field (what vary() may replace)
    spec_given: dict[str, Given]    # provenance, source and range of each stated layout number
    fixed: dict[str, Given]         # inputs that do not follow from the layout
    tiers: Tiers
    stated_fields: dict[str, tuple[str, ...]]  # contract field -> the inputs it states
    absent: dict[str, Missing]      # optional inputs the contract does not state (a price, a target)
    derive: Callable[..., Varied] = field(repr=False, compare=False)
    base: Varied = field(default=None, repr=False, compare=False)
    # resolved once here, so nothing downstream re-reads the contract for them (issue 31: data flows one way)
    stack: Any = None               # training: the Stack the op-level step assumes (botec.inputs.stack.stack_of)
    engine: Any = None              # serving: the engine preset (botec.catalog.engines) the engine step assumes
    traffic: Any = None             # serving: the traffic as stated (arrivals, rate, lengths), what a simulation replays
    peft: Any = None                # training: the LoRA / QLoRA policy as stated, None when every parameter trains
    calibration: str | None = None  # training: the named efficiency calibration (assumptions.efficiency_set), if any
    options: tuple = ()             # the accelerators to compare: ((key, price per hour), ...), the contract's first

    @property
    def layout(self) -> Layout:
        return self.base.layout

    @property
    def given(self) -> dict[str, Given]:
        return self.base.given

    @property
    def name(self) -> str | None:
        """The contract's name as written (``name:``), None when it has none."""
        return self.contract.name

    @property
    def accelerator(self) -> Any:
        """The contract's accelerator as stated: a catalog key (str), or the inline description (its ``name``)."""
        return self.contract.supply.accelerator

    @property
    def names_candidates(self) -> bool:
        """Whether a serving contract names ``supply.candidates`` (then the estimate compares each of
        :attr:`options`)."""
        return bool(getattr(self.contract.supply, "candidates", None))

    @property
    def notes(self) -> tuple[str, ...]:
        """What the loader ignored or changed in the contract as written (``contract.notes``), in order."""
        return tuple(self.contract.notes)

    @property
    def missing(self) -> dict[str, Missing]:
        """Inputs not stated, by name, with the field that would state each."""
        return self.absent | self.base.missing

    def absence(self, name: str, resolved: dict, given: dict | None = None) -> tuple[list[Missing], list[str]]:
        """Why quantity ``name`` is not among ``resolved``: the missing inputs the contract could state (with their
        fields), and every absent input it blocks on."""
        blocking = self.graph.blocking_inputs(given or self.given, resolved, name, self.choices)
        return [self.missing[b] for b in blocking if b in self.missing], blocking

    def needed_fields(self, name: str, resolved: dict) -> list[str]:
        """The contract fields that would let quantity ``name`` be resolved (empty when it is, or unknown)."""
        return sorted({missing.field for missing in self.absence(name, resolved)[0]})

    def why_absent(self, name: str, resolved: dict, given: dict | None = None) -> str:
        """Why quantity ``name`` is not among ``resolved``: the field to state, in one line."""
        known, blocking = self.absence(name, resolved, given)
        if known:
            return f"{name} needs {known[0].field}: {known[0].reason}"
        return f"{name} needs {', '.join(blocking) or 'inputs'}, which the contract does not state"

    @property
    def placement(self) -> dict[str, Placement]:
        return self.base.placement

    def variable_fields(self) -> list[str]:
        """The contract fields :meth:`vary` accepts: layout numbers and every stated number."""
        return list(self.spec) + [path for path in self.stated_fields if path not in self.spec]

    def ranged(self, read: set[str] | None = None) -> dict[str, Given]:
        """The stated numbers with a range (low/high), by contract field; layout counts are swept, not sampled.

        ``read``: the inputs an estimate's formulas read; a ranged number none of them reads (a placeholder of
        a method not in force, an MoE figure of a dense model) is left out.
        """
        found = {}
        for path, names in self.stated_fields.items():
            given = self._stated_given(names[0])
            if given is None or (given.low is None and given.high is None):
                continue
            if read is None or any(name in read for name in names):
                found[path] = given
        return found

    def _stated_given(self, name: str) -> Given | None:
        tiers = self.tiers.given()
        return self.fixed.get(name) or tiers.get(name)

    def vary(self, changes: dict[str, Any]) -> Varied:
        """The inputs with contract fields set to other values: numbers (one estimate, its layout checked,
        a broken rule raised) or numpy arrays of one length (rows, the broken ones masked)."""
        rows = None
        for values in changes.values():
            if not is_scalar(values):
                rows = len(values)
        spec, fixed, tiers = dict(self.spec), dict(self.fixed), self.tiers
        tier_changes: dict[str, Given] = {}
        for path, values in changes.items():
            if rows is not None:
                import numpy as np

                values = np.broadcast_to(np.asarray(values, dtype=float), (rows,))
            if path in spec:
                spec[path] = values
                continue
            names = self.stated_fields.get(path)
            if names is None:
                from botec.catalog import did_you_mean

                known = self.variable_fields()
                raise ContractError(f"not a number this contract states{did_you_mean(path, known)} (variable: "
                                    f"{', '.join(known)})", field=path)
            for name in names:
                if name in fixed:
                    fixed[name] = fixed[name].with_value(values)
                else:
                    tier_changes[name] = self.tiers.given()[name].with_value(values)
        if tier_changes:
            tiers = tiers.replaced(tier_changes)
        return self.derive(self, spec, fixed, tiers, rows)

    def rebuild(self, **section_changes: dict[str, Any]) -> "Inputs":
        """Inputs of the same contract with some fields of its sections changed, for what cannot be varied as a
        number: another accelerator (``supply={"accelerator": "h200"}``), another TP degree of a serving replica,
        a fine-tuning recipe's adapters and offloading (``strategy={"lora": {"rank": 16}, "offload": None}``).

        A field given None takes its default again. The changed contract is validated as a contract file is (a
        :class:`ContractError` naming the field when the change breaks a rule), never read from its file again.
        """
        from botec.contract import parse_contract, remove_field, set_field

        data = self.contract.model_dump(mode="json", exclude_unset=True)
        for section, fields in section_changes.items():
            for name, value in fields.items():
                if value is None:
                    remove_field(data, f"{section}.{name}")
                else:
                    set_field(data, f"{section}.{name}", value)
        return build_inputs(parse_contract(data), self.base_dir)


def checked(layout: Layout, rows: int | None):
    """A scalar layout checked (its first broken rule raised), or an array layout's mask of valid rows."""
    if rows is None:
        layout.check()
        return True
    return layout.mask(rows)


def build_inputs(contract, base_dir: Path | None = None) -> Inputs:
    """The inputs of a contract's estimate: its kind's graph, layout, given values and methods."""
    if contract.workload.kind == "serving":
        from botec.inputs.serving import build
    else:
        from botec.inputs.training import build
    inputs = build(contract, base_dir)
    return replace(inputs, base=inputs.derive(inputs, inputs.spec, inputs.fixed, inputs.tiers, None))


def accelerator_options(supply) -> tuple[tuple[str, Any], ...]:
    """(catalog key, price per hour) of a serving supply's accelerator and of each candidate it names."""
    options = [(supply.accelerator, supply.price_per_accelerator_hour)] if isinstance(supply.accelerator, str) else []
    options += [(c.accelerator, c.price_per_accelerator_hour) for c in supply.candidates or []
                if c.accelerator != supply.accelerator]
    return tuple(options)
