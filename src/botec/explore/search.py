"""The layout search: every TP × PP × CP × DP (EP) × ZeRO × micro-batch × recomputation × SP ×
interleaving layout of a training contract, pruned by divisibility, evaluated in one vectorized
pass, ranked by step time (or cost), best first.

Calculon's `llm-optimal-execution` builds a model object per candidate (100–200 candidates/s on
two cores, research note §3.4); here each formula runs once per chunk of a million candidates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from botec.contract import Contract
from botec.errors import ContractError
from botec.explore.space import Axis, Space, evaluate_space

LAYOUT_FIELDS = ("strategy.tensor_parallel", "strategy.pipeline_parallel", "strategy.virtual_pipeline_stages",
                 "strategy.context_parallel", "strategy.expert_parallel", "strategy.zero_stage",
                 "strategy.micro_batch_size", "strategy.recompute", "strategy.sequence_parallel")
_RECOMPUTE = {0: "none", 1: "selective", 2: "full"}


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def default_axes(contract: Contract) -> list[Axis]:
    """Every value each layout field can take for this model and accelerator count."""
    from botec.estimate import resolve_architecture

    arch = resolve_architecture(contract.workload.model)
    if arch is None:
        raise ContractError("the layout search needs the model's shape (heads, layers): give a catalog name, a "
                            "config.json or an architecture", field="workload.model")
    count = int(contract.supply.count.value)
    sequence = int(contract.workload.sequence_length.value)
    experts = arch.moe.experts if arch.moe else 1
    values = {
        "strategy.tensor_parallel": _divisors(arch.attention_heads, count),
        "strategy.pipeline_parallel": _divisors(arch.layers, count),
        "strategy.virtual_pipeline_stages": [1, 2, 3, 4, 6, 8],
        "strategy.context_parallel": [c for c in (1, 2, 4, 8) if sequence % c == 0 and c <= count],
        "strategy.expert_parallel": _divisors(experts, count),
        "strategy.zero_stage": [0, 1, 2, 3],
        "strategy.micro_batch_size": [1, 2, 4, 8],
        "strategy.recompute": [0, 1, 2],
        "strategy.sequence_parallel": [0, 1],
    }
    return [Axis(path, np.array(v, dtype=float)) for path, v in values.items()]


@dataclass
class SearchResult:
    candidates: int          # the cross product
    evaluated: int           # after divisibility pruning
    feasible: int            # that fit in memory
    seconds: float
    best: list[dict]         # the top layouts: their fields and headline figures

    @property
    def per_second(self) -> float:
        return self.candidates / self.seconds if self.seconds else float("inf")


def search(contract: Contract, objective: str = "step_seconds", top: int = 10, axes: list[Axis] | None = None,
           progress=None) -> SearchResult:
    """Rank the layouts of ``contract`` by ``objective`` (lower is better) among those that fit."""
    if contract.workload.kind != "training":
        raise ContractError("the layout search ranks training layouts", field="workload.kind")
    started = time.perf_counter()
    space = Space(contract, axes or default_axes(contract))
    wanted = [objective, "memory_spare_bytes", "planned_device_bytes", "step_seconds", "run_seconds",
              "end_to_end_mfu", "accelerator_hours", "pipeline_bubble_seconds", "exposed_communication_seconds"]
    wanted = list(dict.fromkeys(wanted))
    columns, valid, counts = evaluate_space(space, wanted=wanted, progress=progress)
    if not valid.size:
        return SearchResult(counts["candidates"], 0, 0, time.perf_counter() - started, [])
    fits = valid & (columns["memory_spare_bytes"] >= 0) & np.isfinite(columns[objective])
    order = np.argsort(np.where(fits, columns[objective], np.inf), kind="stable")[:top]
    best = []
    for row in order:
        if not fits[row]:
            break
        layout = {path: int(columns[path][row]) for path in LAYOUT_FIELDS if path in columns}
        layout["strategy.recompute"] = _RECOMPUTE[layout.get("strategy.recompute", 0)]
        layout["strategy.sequence_parallel"] = bool(layout.get("strategy.sequence_parallel", 0))
        figures = {name: float(columns[name][row]) for name in wanted}
        best.append({"layout": layout, "figures": figures})
    return SearchResult(counts["candidates"], counts["evaluated"], int(fits.sum()), time.perf_counter() - started,
                        best)


def as_overrides(layout: dict) -> list[str]:
    """The layout as `--set` overrides, to recompute it with `botec estimate`."""
    overrides = []
    for path, value in layout.items():
        if path == "strategy.virtual_pipeline_stages" and value > 1:
            overrides.append("strategy.pipeline_schedule=interleaved")
        if path == "strategy.sequence_parallel":
            value = "true" if value else "false"
        overrides.append(f"{path}={value}")
    return overrides


def search_serving(contract: Contract, top: int = 10) -> list[dict]:
    """Serving: each accelerator (the contract's and its candidates) × each tensor-parallel degree that
    divides the heads within a node, ranked by cost per day (accelerators when no price is stated);
    only replicas that hold a request and meet the latency targets are kept."""
    from botec.estimate import estimate, resolve_architecture, unreachable_target

    arch = resolve_architecture(contract.workload.model)
    supply = contract.supply
    options = [(supply.accelerator, supply.price_per_accelerator_hour)] if isinstance(supply.accelerator, str) else []
    options += [(c.accelerator, c.price_per_accelerator_hour) for c in supply.candidates or []
                if c.accelerator != supply.accelerator]
    if not options:
        options = [(supply.accelerator, supply.price_per_accelerator_hour)]
    found = []
    for accelerator, price in options:
        for tp in (1, 2, 4, 8):
            if arch.attention_heads % tp or (arch.moe and contract.strategy.expert_parallel > tp):
                continue
            changed = contract.model_copy(update={
                "supply": supply.model_copy(update={"accelerator": accelerator, "price_per_accelerator_hour": price,
                                                    "candidates": None}),
                "strategy": contract.strategy.model_copy(update={"tensor_parallel": tp})})
            try:
                q = estimate(changed, compare=False).quantities
            except ContractError:
                continue
            if unreachable_target(q):
                continue
            cost = q["serving_cost_per_day_usd"].value if "serving_cost_per_day_usd" in q else None
            found.append({"accelerator": accelerator if isinstance(accelerator, str) else accelerator.name,
                          "tensor_parallel": tp, "replicas": q["replicas"].value,
                          "accelerators": q["serving_accelerators"].value, "batch": q["decode_batch_size"].value,
                          "tpot_seconds": q["time_per_output_token_seconds"].value,
                          "ttft_seconds": q["time_to_first_token_seconds"].value, "cost_per_day_usd": cost})
    found.sort(key=lambda r: (r["cost_per_day_usd"] if r["cost_per_day_usd"] is not None else float("inf"),
                              r["accelerators"]))
    return found[:top]
