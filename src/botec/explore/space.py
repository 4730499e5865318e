"""Evaluating an estimate over many configurations at once, through the same quantity definitions.

A *space* is an estimate's inputs plus axes: contract fields (``supply.count``,
``strategy.tensor_parallel``, ``assumptions.single_accelerator_mfu``, ...) each with a list of
values. The cross product is handed to :meth:`botec.inputs.Inputs.vary` as numpy arrays: the same
layout rules that ``botec estimate`` checks one by one become a mask, the network tier of each
group is placed row by row, and one evaluation of the graph covers a whole chunk of
configurations, with no Python loop per configuration. Rows that break a rule, or that need a
network tier the contract does not state, are left out, not estimated.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from botec.errors import ContractError
from botec.findings.fit import DEVICE_SPARE, FITS, FITS_DEVICE, HOST_SPARE, plan_fits
from botec.inputs import Inputs
from botec.layout import Recompute

__all__ = ["Axis", "Space", "parse_axis", "parse_axes", "evaluate_space", "evaluate_rows", "chunk_tasks",
           "space_counts", "add_counts", "shipped_inputs", "fit_quantities", "fits_mask", "SWEEP_CHUNK_ROWS", "IN_PROCESS_BELOW_ROWS"]

SWEEP_CHUNK_ROWS = 262_144
"""Rows evaluated at once by a sweep, each chunk one task for the workers (the graph's intermediates over one
chunk are a worker's peak memory: about 1.3 kB a row, 350 MB). Fixed, not derived from the worker count."""
IN_PROCESS_BELOW_ROWS = 1_000_000
"""A sweep of fewer rows runs in this process unless workers are asked for: at about a microsecond a row, under a
second of work, which two workers' start-up (about 1 s) would eat."""

# The most values one axis may have, whatever the cap: its array alone is 800 MB.
MOST_AXIS_VALUES = 100_000_000

# Words a user may write for the values of some fields.
_WORDS = {"strategy.recompute": {r.label: float(r) for r in Recompute},
          "strategy.sequence_parallel": {"false": 0.0, "true": 1.0, "no": 0.0, "yes": 1.0}}


@dataclass(frozen=True)
class Axis:
    path: str
    values: np.ndarray


def _dimension(inputs: Inputs, path: str) -> str:
    """The dimension a field's values are written in (counts for the layout's numbers)."""
    from botec.units import dimension_of_unit

    names = inputs.stated_fields.get(path)
    if not names:
        return "count"
    return dimension_of_unit(inputs.graph.definitions(inputs.choices)[names[0]].unit)


def parse_axis(text: str, inputs: Inputs) -> Axis:
    """``path=1,2,4`` or ``path=1..8`` (integers, inclusive), ``path=128..8192/128`` (every 128th) or
    ``path=0.2:0.5:4`` (4 evenly spaced values)."""
    return _AxisPlan.read(text, inputs).build()


def parse_axes(texts: list[str], inputs: Inputs, cap: int | None = None, field: str = "--set",
               cap_words: str = "the cap of {cap:,}", advice: str = "") -> list[Axis]:
    """Every axis of a sweep, refusing a space of more than ``cap`` configurations BEFORE any values
    are built: its size is the product of the axes' lengths, computed from their texts
    (``1..100000000000`` is refused in microseconds, without allocating 800 GB)."""
    plans = [_AxisPlan.read(text, inputs) for text in texts]
    size = math.prod(plan.length for plan in plans)
    if cap is not None and size > cap:
        widest = max(plans, key=lambda plan: plan.length)
        raise ContractError(f"the space has {size:,} configurations, more than {cap_words.format(cap=cap)} "
                            f"({widest.path} alone has {widest.length:,} values){advice}", field=field)
    return [plan.build() for plan in plans]


@dataclass(frozen=True)
class _AxisPlan:
    """An axis read from its text, with its length known and its values not yet built."""

    path: str
    spec: str
    kind: str  # "range" (low..high/step), "even" (low:high:count) or "list"
    numbers: tuple
    length: int

    @classmethod
    def read(cls, text: str, inputs: Inputs) -> "_AxisPlan":
        from botec.units import UnitError, parse_quantity

        path, sep, spec = text.partition("=")
        path = path.strip()
        if not sep or not spec.strip():
            raise ContractError(f"expected FIELD=VALUES such as supply.count=4,8,16 or strategy.micro_batch_size=1..8, "
                                f"got {text!r}", field="--set")
        known = inputs.variable_fields()
        if path not in known:
            from botec.catalog import did_you_mean

            raise ContractError(f"cannot sweep {path!r}{did_you_mean(path, known)} (sweepable: {', '.join(known)})",
                                field="--set")
        words = _WORDS.get(path, {})
        spec = spec.strip()
        try:
            if ".." in spec:
                bounds, _, step = spec.partition("/")
                low, high = (int(float(part)) for part in bounds.split(".."))
                stride = int(float(step)) if step else 1
                if stride < 1:
                    raise ValueError("the step after / must be a whole number of at least 1")
                return cls(path, spec, "range", (low, high, stride), max(0, (high - low) // stride + 1))
            if spec.count(":") == 2:
                low, high, count = spec.split(":")
                count = int(count)
                if count < 0:
                    raise ValueError(f"the count after the second : must be at least 1, got {count}")
                return cls(path, spec, "even", (float(low), float(high), count), count)
            items = [item.strip() for item in spec.split(",") if item.strip()]
            dimension = _dimension(inputs, path)
            values = tuple(words[item.lower()] if item.lower() in words else parse_quantity(item, dimension)
                           for item in items)
            return cls(path, spec, "list", values, len(values))
        except (ValueError, OverflowError, UnitError) as error:
            raise ContractError(f"cannot read the values {spec!r}: {error}", field=path) from None

    def build(self) -> Axis:
        if self.length == 0:
            raise ContractError(f"the range {self.spec!r} is empty", field=self.path)
        if self.length > MOST_AXIS_VALUES:  # even past a cap (--force): refused, not a MemoryError
            raise ContractError(f"the axis has {self.length:,} values, more than the {MOST_AXIS_VALUES:,} one axis "
                                "may have", field=self.path)
        if self.kind == "range":
            low, high, stride = self.numbers
            values = np.arange(low, high + 1, stride, dtype=float)
        elif self.kind == "even":
            values = np.linspace(*self.numbers)
        else:
            values = np.array(self.numbers, dtype=float)
        if not np.all(np.isfinite(values)):
            raise ContractError(f"the values {self.spec!r} are not all finite numbers", field=self.path)
        return Axis(self.path, values)


@dataclass
class Space:
    """The cross product of the axes over an estimate's inputs."""

    inputs: Inputs
    axes: list[Axis]

    @property
    def size(self) -> int:
        return math.prod(axis.values.size for axis in self.axes)


def _grid(axes: list[Axis], start: int, stop: int) -> dict[str, np.ndarray]:
    """Rows ``start:stop`` of the cross product, without building the whole grid."""
    index = np.arange(start, stop)
    columns = {}
    for axis in reversed(axes):
        index, position = np.divmod(index, axis.values.size)
        columns[axis.path] = axis.values[position]
    return columns


def evaluate_space(space: Space, chunk: int = SWEEP_CHUNK_ROWS, wanted: list[str] | None = None,
                   progress=None, *, workers: int | None = 1, ray_address: str | None = ""
                   ) -> tuple[dict[str, np.ndarray], np.ndarray, dict]:
    """Evaluate every valid configuration of ``space``; returns (columns, valid mask, counts).

    ``columns`` holds the axes and every wanted quantity (arrays over all rows, NaN where a row is
    not valid); ``valid`` marks the rows that respect the layout rules and whose network tiers
    the contract states; ``counts`` has the candidates, the valid rows, and the rows left out for
    want of a tier, by the field that would state it. Every row is kept: a caller that needs only the best
    few (the layout search) keeps them chunk by chunk instead (:mod:`botec.explore.search`).

    The chunks of ``chunk`` rows are independent tasks for :func:`botec.fanout.run_tasks` (``workers``,
    ``ray_address``; the default: one after another, here); a row's figures do not depend on who evaluates it.
    Interrupted (Ctrl-C), the rows of the chunks finished before the first unfinished one are returned and
    ``counts["interrupted"]`` is 1."""
    from botec.fanout import Interrupted, run_tasks

    counts = space_counts(space)
    targets = checked_targets(space.inputs, wanted)
    tasks = chunk_tasks(space, chunk, (targets, wanted is not None))
    try:
        parts = run_tasks(evaluate_rows, tasks, workers=workers, ray_address=ray_address,
                          progress=rows_progress(progress, tasks, space.size))
    except Interrupted as stopped:
        counts["interrupted"] = 1
        parts = list(itertools.takewhile(lambda part: part is not None, stopped.results))
    for _, _, chunk_counts in parts:
        add_counts(counts, chunk_counts)
    if not parts:
        return {}, np.zeros(0, bool), counts
    merged = {name: np.concatenate([columns[name] for columns, _, _ in parts]) for name in parts[0][0]}
    return merged, np.concatenate([valid for _, valid, _ in parts]), counts


def space_counts(space: Space) -> dict:
    """What the evaluation counts as it goes: the candidates, the valid rows, the rows left out for want of a
    network tier (by the field that would state it)."""
    return {"candidates": space.size, "evaluated": 0, "unplaced": {}}


def add_counts(counts: dict, chunk_counts: dict) -> None:
    """Add one chunk's valid rows and unplaced rows (by field) to ``counts``."""
    counts["evaluated"] += chunk_counts["evaluated"]
    for field, rows in chunk_counts["unplaced"].items():
        counts["unplaced"][field] = counts["unplaced"].get(field, 0) + rows


def checked_targets(inputs: Inputs, wanted: list[str] | None) -> list[str]:
    """The quantities to evaluate: ``wanted`` (each checked to be a quantity), else every one."""
    registry = inputs.graph.definitions(inputs.choices)
    if wanted is not None:
        unknown = [name for name in wanted if name not in registry]
        if unknown:
            from botec.catalog import did_you_mean_quantity

            raise ContractError(f"unknown quantity {unknown[0]!r}{did_you_mean_quantity(unknown[0], registry)}",
                                field="--quantity")
    return list(wanted or registry)


def chunk_tasks(space: Space, chunk: int, job: tuple) -> list[tuple]:
    """One task per ``chunk`` rows: (the inputs as a :class:`botec.fanout.Rebuilt`, the axes, first row, end row,
    ``job``: what the chunk's function needs besides)."""
    inputs = shipped_inputs(space.inputs)
    return [(inputs, space.axes, start, min(start + chunk, space.size), job) for start in range(0, space.size, chunk)]


def rows_progress(progress, tasks: list[tuple], size: int):
    """``progress(rows done, rows)`` from run_tasks' (tasks done, tasks): every chunk but the last is full."""
    if progress is None:
        return None
    rows = tasks[0][3] - tasks[0][2] if tasks else 0
    return lambda done, total: progress(min(done * rows, size), size)


def shipped_inputs(inputs: Inputs):
    """``inputs`` as workers receive them (:class:`botec.fanout.Rebuilt`): their contract, rebuilt once per worker
    process (the graph holds the formulas' functions, which do not pickle); here, ``inputs`` themselves."""
    from botec.fanout import Rebuilt
    from botec.inputs import build_inputs

    return Rebuilt(build_inputs, inputs.contract, inputs.base_dir, made=inputs)


def evaluate_rows(task: tuple) -> tuple[dict[str, np.ndarray], np.ndarray, dict]:
    """Rows ``start:stop`` of a space (a :func:`chunk_tasks` task whose job starts with (targets, strict)):
    (columns, valid mask, counts), the columns as :func:`evaluate_space` has them over the chunk's rows."""
    inputs, axes, start, stop, (targets, strict, *_) = task
    inputs = inputs.value
    counts = {"evaluated": 0, "unplaced": {}}
    columns = _grid(axes, start, stop)
    valid, quantities = _evaluate_rows(inputs, columns, targets, strict, counts)
    for name in targets:
        value = np.full(valid.shape, np.nan)
        if name in quantities:
            value[valid] = quantities[name].value   # an array over the valid rows, or one number for all
        columns[name] = value
    return columns, valid, counts


def _evaluate_rows(inputs: Inputs, columns: dict[str, np.ndarray], targets: list[str], strict: bool,
                   counts: dict) -> tuple[np.ndarray, dict]:
    """One chunk: vary, mask, prune, evaluate (only the valid rows are evaluated)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        varied = inputs.vary(columns)
        valid = np.array(varied.valid, dtype=bool)
        for name, (rows, missing) in varied.unplaced.items():
            if any(inputs.graph.depends_on(target, {name}, inputs.choices) for target in targets):
                lost = valid & rows
                if lost.any():
                    counts["unplaced"][missing.text()] = counts["unplaced"].get(missing.text(), 0) + int(lost.sum())
                valid &= ~rows
        counts["evaluated"] += int(valid.sum())
        if not valid.any():
            return valid, {}
        kept = {name: g.with_value(np.asarray(g.value)[valid]) if not np.isscalar(g.value) else g
                for name, g in varied.given.items()}
        quantities = inputs.graph.evaluate(kept, wanted=targets, choices=inputs.choices)
    if strict:
        for name in targets:
            if name not in quantities:
                raise ContractError(inputs.why_absent(name, quantities, kept), field="--output")
    return valid, quantities


def fit_quantities(inputs: Inputs) -> list[str]:
    """What a plan's verdicts read (:mod:`botec.findings.fit`): the device's spare memory with the headroom kept
    (``fits``) and before it (``fits_device``), and the host's where the contract states its host memory
    (offloading and asynchronous checkpoints keep state there)."""
    if inputs.kind != "training":
        return ["memory_spare_bytes"]
    resolved = inputs.graph.evaluate(dict(inputs.given), wanted=[HOST_SPARE], choices=inputs.choices)
    return [DEVICE_SPARE[FITS], DEVICE_SPARE[FITS_DEVICE]] + ([HOST_SPARE] if HOST_SPARE in resolved else [])


def fits_mask(columns: dict[str, np.ndarray], valid: np.ndarray, verdict: str = FITS) -> np.ndarray:
    """Valid rows whose plan meets ``verdict`` (``fits``: the headroom kept; ``fits_device``: the device's memory
    without it), by the rule :attr:`botec.estimation.Estimate.fits` reads, :func:`botec.findings.fit.plan_fits`
    (NaN never fits)."""
    return valid & plan_fits(columns, verdict)
