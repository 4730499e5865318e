"""Evaluating a contract over many configurations at once, through the same quantity definitions.

A *space* is the contract plus axes: contract fields (``supply.count``, ``strategy.tensor_parallel``,
``assumptions.single_accelerator_mfu``, ...) each with a list of values. The cross product becomes
numpy arrays handed to :func:`botec.quantities.evaluate` in place of the scalar inputs: one
evaluation for a whole chunk of configurations, no Python loop per configuration. The contract
rules that :mod:`botec.estimate` checks one by one (divisibility of the layout, the global batch)
become masks; configurations that break them are left out, not estimated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from botec.contract import Contract
from botec.errors import ContractError
from botec.estimate import choices_of, given_quantities
from botec.quantities import Given, definitions, evaluate

__all__ = ["Axis", "Space", "parse_axis", "evaluate_space", "SWEEPABLE"]

# Contract fields a space can vary, and the graph input each one sets.
SWEEPABLE = {
    "supply.count": "accelerators",
    "strategy.micro_batch_size": "micro_batch_size",
    "strategy.gradient_accumulation_steps": "gradient_accumulation_steps",
    "strategy.global_batch_size": None,          # sets the accumulation: global / (micro × DP)
    "strategy.tensor_parallel": "tensor_parallel",
    "strategy.pipeline_parallel": "pipeline_parallel",
    "strategy.virtual_pipeline_stages": "virtual_pipeline_stages",
    "strategy.context_parallel": "context_parallel",
    "strategy.expert_parallel": "expert_parallel",
    "strategy.sequence_parallel": "sequence_parallel",
    "strategy.zero_stage": "zero_stage",
    "strategy.recompute": "recompute",
}
_WORDS = {"strategy.recompute": {"none": 0, "selective": 1, "full": 2},
          "strategy.sequence_parallel": {"false": 0, "true": 1, "no": 0, "yes": 1}}


@dataclass(frozen=True)
class Axis:
    path: str
    values: np.ndarray


def parse_axis(text: str, given: dict[str, Given]) -> Axis:
    """``path=1,2,4`` or ``path=1..8`` (integers, inclusive) or ``path=0.2:0.5:4`` (4 evenly spaced values)."""
    from botec.units import UnitError, parse_quantity

    path, sep, spec = text.partition("=")
    path = path.strip()
    if not sep or not spec.strip():
        raise ContractError(f"expected FIELD=VALUES such as supply.count=4,8,16 or strategy.micro_batch_size=1..8, "
                            f"got {text!r}", field="--set")
    assumption_inputs = {g.field: name for name, g in given.items() if g.field and g.field.startswith("assumptions.")}
    if path not in SWEEPABLE and path not in assumption_inputs:
        from botec.catalog import did_you_mean

        known = list(SWEEPABLE) + sorted(assumption_inputs)
        raise ContractError(f"cannot sweep {path!r}{did_you_mean(path, known)} (sweepable: {', '.join(known)})",
                            field="--set")
    words = _WORDS.get(path, {})
    spec = spec.strip()
    try:
        if ".." in spec:
            low, high = (int(float(part)) for part in spec.split(".."))
            values = np.arange(low, high + 1, dtype=float)
        elif spec.count(":") == 2:
            low, high, count = spec.split(":")
            values = np.linspace(float(low), float(high), int(count))
        else:
            items = [item.strip() for item in spec.split(",") if item.strip()]
            dimension = "ratio" if path.startswith("assumptions.") else "count"
            values = np.array([words[item.lower()] if item.lower() in words else parse_quantity(item, dimension)
                               for item in items], dtype=float)
    except (ValueError, UnitError) as error:
        raise ContractError(f"cannot read the values {spec!r}: {error}", field=path) from None
    if values.size == 0:
        raise ContractError(f"the range {spec!r} is empty", field=path)
    return Axis(path, values)


@dataclass
class Space:
    """The cross product of the axes, with the rows that break a contract rule masked out."""

    contract: Contract
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


def evaluate_space(space: Space, chunk: int = 1_000_000, wanted: list[str] | None = None,
                   progress=None) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, int]]:
    """Evaluate every valid configuration of ``space``; returns (columns, valid mask, counts).

    ``columns`` holds the axes and every resolved quantity (arrays over all rows); ``valid`` marks
    the rows that respect the contract's layout rules.
    """
    contract = space.contract
    base, _, _ = given_quantities(contract)
    choices = choices_of(contract)
    registry = definitions(choices)
    if wanted is not None:
        unknown = [name for name in wanted if name not in registry]
        if unknown:
            from botec.catalog import did_you_mean

            raise ContractError(f"unknown quantity {unknown[0]!r}{did_you_mean(unknown[0], registry)}",
                                field="--output")
    other_kind = {"serving", "capacity"}
    targets = wanted or [n for n, d in registry.items() if d.account not in other_kind]
    arch = _architecture(contract)
    keep = set(targets)
    results: dict[str, list[np.ndarray]] = {}
    valid_parts = []
    counts = {"candidates": space.size, "evaluated": 0}
    try:
        _evaluate_chunks(space, chunk, contract, base, arch, targets, choices, keep, results, valid_parts, counts,
                         progress)
    except KeyboardInterrupt:  # a clean stop: what was evaluated so far is returned
        counts["interrupted"] = 1
    merged = {name: np.concatenate(parts) for name, parts in results.items()
              if len(parts) == len(valid_parts)}
    return merged, np.concatenate(valid_parts) if valid_parts else np.zeros(0, bool), counts


def _evaluate_chunks(space, chunk, contract, base, arch, targets, choices, keep, results, valid_parts, counts,
                     progress):
    for start in range(0, space.size, chunk):
        stop = min(start + chunk, space.size)
        columns = _grid(space.axes, start, stop)
        given, valid = _vector_given(contract, base, columns, arch)
        counts["evaluated"] += int(valid.sum())
        valid_parts.append(valid)
        # Prune first: only the rows that respect the layout rules are evaluated.
        kept = {name: Given(g.value[valid], g.provenance, g.source, g.field, g.low, g.high)
                if isinstance(g.value, np.ndarray) else g for name, g in given.items()}
        with np.errstate(divide="ignore", invalid="ignore"):
            quantities = evaluate(kept, wanted=targets, choices=choices) if valid.any() else {}
        for path, values in columns.items():
            results.setdefault(path, []).append(values)
        for name, quantity in quantities.items():
            if name not in keep:
                continue
            value = np.full(valid.shape, np.nan)
            value[valid] = np.broadcast_to(np.asarray(quantity.value, dtype=float), (int(valid.sum()),))
            results.setdefault(name, []).append(value)
        if progress is not None:
            progress(stop, space.size)


def _architecture(contract: Contract):
    from botec.estimate import resolve_architecture

    return resolve_architecture(contract.workload.model)


def _vector_given(contract: Contract, base: dict[str, Given], columns: dict[str, np.ndarray], arch
                  ) -> tuple[dict[str, Given], np.ndarray]:
    """The base inputs with the swept ones replaced by arrays, the dependent ones recomputed, and the
    mask of rows that respect the layout rules of :func:`botec.estimate._layout`."""
    n = next(iter(columns.values())).size
    given = dict(base)
    assumption_inputs = {g.field: name for name, g in base.items() if g.field and g.field.startswith("assumptions.")}

    def column(path: str, name: str) -> np.ndarray:
        if path in columns:
            return columns[path]
        return np.full(n, float(base[name].value))

    for path, values in columns.items():
        name = SWEEPABLE.get(path) or assumption_inputs.get(path)
        if name:
            given[name] = Given(values, "assumed", "swept", path)
    strategy = contract.strategy
    count = column("supply.count", "accelerators")
    tp = column("strategy.tensor_parallel", "tensor_parallel")
    pp = column("strategy.pipeline_parallel", "pipeline_parallel")
    cp = column("strategy.context_parallel", "context_parallel")
    ep = column("strategy.expert_parallel", "expert_parallel")
    v = column("strategy.virtual_pipeline_stages", "virtual_pipeline_stages")
    micro = column("strategy.micro_batch_size", "micro_batch_size")
    sp = column("strategy.sequence_parallel", "sequence_parallel")
    zero = column("strategy.zero_stage", "zero_stage")
    given["expert_tensor_parallel"] = Given(tp, "assumed", "expert tensor parallelism = TP", None)
    model_parallel = tp * pp * cp
    dp = count / model_parallel
    valid = (np.mod(count, model_parallel) == 0) & (count >= 1) & (micro >= 1)
    layers = float(base["layers"].value)
    sequence = float(base["sequence_length"].value)
    valid &= np.mod(layers, pp * v) == 0
    valid &= (v == 1) | (pp > 1)
    valid &= np.mod(sequence, cp) == 0
    valid &= (sp == 0) | ((tp > 1) & (np.mod(sequence / cp, tp) == 0))
    if arch is not None:
        valid &= np.mod(arch.attention_heads, tp) == 0
        valid &= (np.mod(arch.kv_heads, tp) == 0) | (np.mod(tp, arch.kv_heads) == 0)
        experts = arch.moe.experts if arch.moe else 1
        valid &= (ep == 1) | ((np.mod(experts, ep) == 0) & (np.mod(dp, ep) == 0) & (arch.moe is not None))
    else:
        valid &= (tp == 1) & (cp == 1) & (ep == 1)
    if "strategy.global_batch_size" in columns or strategy.global_batch_size is not None:
        global_batch = columns.get("strategy.global_batch_size",
                                   np.full(n, float(strategy.global_batch_size.value) if strategy.global_batch_size
                                           else 0.0))
        accumulation = global_batch / (micro * dp)
        valid &= np.mod(global_batch, micro * dp) == 0
        given["gradient_accumulation_steps"] = Given(np.maximum(accumulation, 1.0), "assumed",
                                                     "global_batch_size / (micro-batch × DP)", None)
    if strategy.sharding_group is None:
        if strategy.fsdp == "hybrid_shard":
            per_node = float(base["accelerators_per_node"].value)
            sharding = np.maximum(1.0, np.minimum(dp, np.floor(per_node / (tp * cp))))
        else:
            sharding = dp
        given["sharding_degree"] = Given(sharding, "assumed", "all data-parallel ranks", None)
    valid &= np.mod(dp, given["sharding_degree"].value) == 0
    valid &= (zero == 0) | (ep == 1) | (np.mod(given["sharding_degree"].value, ep) == 0)
    if contract.supply.cluster is None and "supply.count" in columns:
        given["accelerators_per_node"] = Given(count, "assumed", "no cluster: one tier", None)
    return given, valid
