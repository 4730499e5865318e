"""The layout search: every TP × PP × CP × DP (EP) × ZeRO × micro-batch × recomputation × SP ×
interleaving layout of a training contract, pruned by the layout rules, evaluated in one vectorized
pass, ranked by step time (or cost), best first; and for serving, each accelerator × TP degree.

The values tried come from :func:`botec.layout.candidates` (every value the rules allow for the
model and the accelerator count, within :data:`botec.layout.SEARCH_BOUNDS`), and the rules that
prune them are the ones ``botec estimate`` checks: a layout the search ranks is one the estimate
accepts. Calculon's `llm-optimal-execution` builds a model object per candidate (100–200
candidates/s on two cores); here each formula runs once per chunk of a million candidates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from botec.errors import ContractError
from botec.explore.space import Axis, Space, evaluate_space, fit_quantities, fits_mask
from botec.inputs import Inputs
from botec.layout import SEARCH_BOUNDS, Recompute, candidates

__all__ = ["LAYOUT_FIELDS", "SearchResult", "default_axes", "search", "as_overrides", "search_serving"]

LAYOUT_FIELDS = ("strategy.tensor_parallel", "strategy.pipeline_parallel", "strategy.virtual_pipeline_stages",
                 "strategy.context_parallel", "strategy.expert_parallel", "strategy.zero_stage",
                 "strategy.micro_batch_size", "strategy.recompute", "strategy.sequence_parallel")


def default_axes(inputs: Inputs) -> list[Axis]:
    """Every value each layout field can take for this model and accelerator count."""
    values = candidates(inputs.model, int(inputs.layout.accelerators))
    return [Axis(path, np.array(values[path], dtype=float)) for path in LAYOUT_FIELDS]


@dataclass
class SearchResult:
    candidates: int          # the cross product
    evaluated: int           # after the layout rules
    feasible: int            # that fit in memory
    seconds: float
    best: list[dict]         # the top layouts: their fields and headline figures

    @property
    def per_second(self) -> float:
        return self.candidates / self.seconds if self.seconds else float("inf")


def search(inputs: Inputs, objective: str = "step_seconds", top: int = 10, axes: list[Axis] | None = None,
           progress=None) -> SearchResult:
    """Rank the layouts of a training contract by ``objective`` (lower is better) among those that fit, those that
    keep the stated headroom first."""
    if inputs.kind != "training":
        raise ContractError("the layout search ranks training layouts", field="workload.kind")
    started = time.perf_counter()
    space = Space(inputs, axes or default_axes(inputs))
    wanted = [objective, *fit_quantities(inputs), "planned_device_bytes", "step_seconds", "run_seconds",
              "end_to_end_mfu", "accelerator_hours"]
    wanted = list(dict.fromkeys(wanted))
    columns, valid, counts = evaluate_space(space, wanted=wanted, progress=progress)
    if not valid.size:
        return SearchResult(counts["candidates"], 0, 0, time.perf_counter() - started, [])
    fits = fits_mask(columns, valid) & np.isfinite(columns[objective])
    # layouts that keep the stated headroom rank first; those that fit only within it follow (they run, with less
    # margin for peaks and fragmentation than asked)
    within_headroom = fits & ~(np.nan_to_num(columns["memory_spare_bytes"], nan=-1.0) >= 0)
    order = np.lexsort((np.where(fits, columns[objective], np.inf), within_headroom))[:top]
    best = []
    for row in order:
        if not fits[row]:
            break
        layout = {path: int(columns[path][row]) for path in LAYOUT_FIELDS if path in columns}
        layout["strategy.recompute"] = Recompute(layout.get("strategy.recompute", 0)).label
        layout["strategy.sequence_parallel"] = bool(layout.get("strategy.sequence_parallel", 0))
        if inputs.layout.pipeline_schedule not in ("1f1b", "interleaved"):   # zero bubble, DualPipe: kept as stated
            layout["strategy.pipeline_schedule"] = inputs.layout.pipeline_schedule
        figures = {name: float(columns[name][row]) for name in wanted}
        best.append({"layout": layout, "figures": figures})
    return SearchResult(counts["candidates"], counts["evaluated"], int(fits.sum()), time.perf_counter() - started,
                        best)


def as_overrides(layout: dict) -> list[str]:
    """The layout as `--set` overrides, to recompute it with `botec estimate`."""
    overrides = []
    stated = layout.get("strategy.pipeline_schedule")   # a schedule other than 1F1B and interleaved, when stated
    for path, value in layout.items():
        if path == "strategy.pipeline_schedule":
            continue
        if path == "strategy.virtual_pipeline_stages":
            overrides.append(f"strategy.pipeline_schedule={'interleaved' if value > 1 else stated or '1f1b'}")
        if path == "strategy.sequence_parallel":
            value = "true" if value else "false"
        overrides.append(f"{path}={value}")
    return overrides


def search_serving(inputs: Inputs, top: int = 10) -> list[dict]:
    """Serving: each accelerator (the contract's and its candidates) × each tensor-parallel degree that
    divides the heads within a node, ranked by cost per day (accelerators when no price is stated);
    only replicas that hold a request and meet the stated latency targets are kept."""
    from botec.estimate import accelerator_options, evaluate_inputs, unreachable_target

    options = accelerator_options(inputs.contract) or [(None, None)]
    per_node = inputs.tiers.accelerators_per_node
    largest = int(per_node.value) if per_node is not None else SEARCH_BOUNDS.max_serving_tensor_parallel
    degrees = [t for t in range(1, largest + 1) if inputs.model.attention_heads % t == 0]
    stated = int(inputs.contract.strategy.tensor_parallel)   # the starting point: a replica across nodes included
    degrees = sorted(set(degrees) | {stated})
    found = []
    for accelerator, price in options:
        for tp in degrees:
            supply = {"candidates": None} | ({"accelerator": accelerator, "price_per_accelerator_hour": price}
                                             if accelerator is not None else {})
            try:
                q = evaluate_inputs(inputs.rebuild(supply=supply, strategy={"tensor_parallel": tp}))
            except ContractError:
                continue  # a layout rule (EP must divide TP) or a model that does not fit this replica
            if unreachable_target(q):
                continue
            cost = q["serving_cost_per_day_usd"].value if "serving_cost_per_day_usd" in q else None
            name = accelerator if accelerator is not None else inputs.accelerator_label
            found.append({"accelerator": name, "tensor_parallel": tp, "replicas": q["replicas"].value,
                          "accelerators": q["serving_accelerators"].value, "batch": q["decode_batch_size"].value,
                          "tpot_seconds": q["time_per_output_token_seconds"].value,
                          "ttft_seconds": q["time_to_first_token_seconds"].value, "cost_per_day_usd": cost})
    found.sort(key=lambda r: (r["cost_per_day_usd"] if r["cost_per_day_usd"] is not None else float("inf"),
                              r["accelerators"]))
    return found[:top]
