"""The layout search: every TP × PP × CP × DP (EP) × ZeRO × micro-batch × recomputation × SP ×
interleaving layout of a training contract, pruned by the layout rules, evaluated in one vectorized
pass, ranked by step time (or cost), best first; and for serving, each accelerator × TP degree.

The values tried come from :func:`botec.layout.candidates` (every value the rules allow for the
model and the accelerator count, within :data:`botec.layout.SEARCH_BOUNDS`), and the rules that
prune them are the ones ``botec estimate`` checks: a layout the search ranks is one the estimate
accepts. Calculon's `llm-optimal-execution` builds a model object per candidate (100–200
candidates/s on two cores); here each formula runs once per chunk of 65,536 candidates, and only the
best rows of each chunk are kept, then merged. The chunks are independent tasks
(:func:`botec.fanout.run_tasks`: local processes or a Ray cluster); the merge orders rows by (objective,
candidate number), a total order, so the best rows are the same whoever evaluated which chunk.

Only layouts that fit are ranked, by the estimate's verdict (:mod:`botec.findings.fit`: the headroom kept).
Candidates that are the same plan are one row: two candidates are the same plan when they have the same parallel
degrees and micro-batch (:data:`PLAN_DEGREES`) and every figure the search resolves for them is equal to the bit
(the objective, step, run, MFU, accelerator-hours, planned memory and the memory spares): they differ only in
choices the estimate resolves to the same thing (:data:`MERGED_CHOICES`: selective recomputation under flash
attention is no recomputation; a ZeRO stage over one data-parallel rank shards nothing). The row keeps the first
candidate's fields (its ``--set`` line) and names every merged choice (``merged``), so the top 5 are 5 plans.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from botec.errors import ContractError
from botec.explore.space import (Axis, Space, add_counts, checked_targets, chunk_tasks, evaluate_rows, fit_quantities,
                                  fits_mask, rows_progress, space_counts)
from botec.inputs import Inputs
from botec.layout import SEARCH_BOUNDS, Recompute, candidates

__all__ = ["LAYOUT_FIELDS", "SearchResult", "default_axes", "search", "as_overrides", "search_serving"]

LAYOUT_FIELDS = ("strategy.tensor_parallel", "strategy.pipeline_parallel", "strategy.virtual_pipeline_stages",
                 "strategy.context_parallel", "strategy.expert_parallel", "strategy.zero_stage",
                 "strategy.micro_batch_size", "strategy.recompute", "strategy.sequence_parallel")
# The fields that give a plan its shape: candidates that differ in one of them are never the same plan.
PLAN_DEGREES = ("strategy.tensor_parallel", "strategy.pipeline_parallel", "strategy.virtual_pipeline_stages",
                "strategy.context_parallel", "strategy.expert_parallel", "strategy.micro_batch_size")
# The choices two candidates of the same degrees may differ in and still be the same plan, when every figure agrees.
MERGED_CHOICES = ("strategy.zero_stage", "strategy.recompute", "strategy.sequence_parallel")


def default_axes(inputs: Inputs) -> list[Axis]:
    """Every value each layout field can take for this model and accelerator count."""
    values = candidates(inputs.model, int(inputs.layout.accelerators))
    return [Axis(path, np.array(values[path], dtype=float)) for path in LAYOUT_FIELDS]


@dataclass
class SearchResult:
    candidates: int          # the cross product
    evaluated: int           # after the layout rules
    feasible: int            # candidates that fit in memory, the headroom kept
    seconds: float
    best: list[dict]         # the top plans: their fields, headline figures and merged choices
    examined: int = -1       # the candidates looked at: all of them (-1: as many as candidates) unless interrupted

    @property
    def per_second(self) -> float:
        return self.candidates / self.seconds if self.seconds else float("inf")


# Rows evaluated at once by the search: the graph's intermediate arrays over one chunk are its peak memory
# (10^7 candidates: 143 MB peak at 65,536 rows, 235 MB at 131,072, 401 MB at 250,000; no slower than larger chunks).
# Fixed, not derived from the worker count: each chunk is one task.
SEARCH_CHUNK_ROWS = 65_536

IN_PROCESS_BELOW_CANDIDATES = 2_000_000
"""A search of fewer candidates runs in this process unless workers are asked for: GPT-3's 161,280 take 0.2 s
here, two workers' start-up about 1 s (``benchmarks/fanout.py``)."""


def search(inputs: Inputs, objective: str = "step_seconds", top: int = 10, axes: list[Axis] | None = None,
           progress=None, chunk: int = SEARCH_CHUNK_ROWS, *, workers: int | None = 1,
           ray_address: str | None = "") -> SearchResult:
    """Rank the layouts of a training contract that fit (the headroom kept) by ``objective`` (lower is better; ties:
    the earlier candidate first), the candidates that are the same plan merged into one row.

    The space is evaluated ``chunk`` rows at a time and only each chunk's best ``top`` rows are kept
    (:class:`_BestRows`), so the memory is one chunk's, whatever the number of candidates (10^7 candidates kept
    every column of every row: 4.2 GB peak; now 143 MB, ``benchmarks/layout_search.py --memory``). The chunks
    run as :func:`botec.fanout.run_tasks` runs them (``workers``, ``ray_address``; the default: here, one after
    another). Interrupted (Ctrl-C), the best of the chunks finished so far."""
    from botec.fanout import Interrupted, run_tasks

    if inputs.kind != "training":
        raise ContractError("the layout search ranks training layouts", field="workload.kind")
    started = time.perf_counter()
    space = Space(inputs, axes or default_axes(inputs))
    wanted = [objective, *fit_quantities(inputs), "planned_device_bytes", "step_seconds", "run_seconds",
              "end_to_end_mfu", "accelerator_hours"]
    wanted = checked_targets(inputs, list(dict.fromkeys(wanted)))
    kept = [path for path in LAYOUT_FIELDS if path in {axis.path for axis in space.axes}] + wanted
    tasks = chunk_tasks(space, chunk, (wanted, True, kept, objective, top))
    try:
        parts = run_tasks(_best_of_chunk, tasks, workers=workers, ray_address=ray_address,
                          progress=rows_progress(progress, tasks, space.size))
    except Interrupted as stopped:   # a clean stop: the best of what was evaluated so far
        parts = stopped.results
    best, feasible, counts, examined = _BestRows(objective, top), 0, space_counts(space), 0
    for task, part in zip(tasks, parts):
        if part is not None:
            columns, candidate, bits, chunk_feasible, chunk_counts = part
            best.add(columns, candidate, bits)
            feasible += chunk_feasible
            add_counts(counts, chunk_counts)
            examined += task[3] - task[2]
    return SearchResult(counts["candidates"], counts["evaluated"], feasible, time.perf_counter() - started,
                        [_described(inputs, row, merged, wanted) for row, merged in best.rows()], examined)


def _best_of_chunk(task: tuple) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray], int, dict]:
    """One chunk of the search (a :func:`botec.explore.space.chunk_tasks` task): its best plans' kept columns, their
    candidate numbers and merged choices (as bits), how many rows fit, and the chunk's counts."""
    first_row = task[2]
    _, _, kept, objective, top = task[4]
    columns, valid, counts = evaluate_rows(task)
    fits = fits_mask(columns, valid) & np.isfinite(columns[objective])
    best = _BestRows(objective, top)
    best.add({name: columns[name][fits] for name in kept}, first_row + np.flatnonzero(fits))
    return best.columns, best.candidate, best.bits, int(fits.sum()), counts


class _BestRows:
    """The best ``top`` plans seen so far: their kept columns, candidate numbers (the first candidate of each plan)
    and, per choice of :data:`MERGED_CHOICES`, the values its candidates take as bits (value v: 1 << v), in the order
    one ranking of every row at once gives: the lower ``objective``, then the earlier candidate.

    Candidates of one plan share its objective, so every plan tied with the ``top``-th is kept too (:meth:`rows`
    gives the first ``top``): no candidate of a plan kept is lost whichever chunk evaluated it, and the merged
    choices are the same however the rows were chunked. Vectorized: the plans are the unique rows of the degrees and
    figures (``numpy.unique``) among the first rows in order (a run of equal objectives never cut), their choices
    OR-ed together (``numpy.bitwise_or.at``)."""

    def __init__(self, objective: str, top: int):
        self.objective, self.top = objective, top
        self.columns: dict[str, np.ndarray] = {}
        self.candidate = np.zeros(0, dtype=np.int64)
        self.bits: dict[str, np.ndarray] = {}   # per merged choice: the values each plan kept takes, as bits

    def add(self, columns: dict[str, np.ndarray], candidate: np.ndarray,
            bits: dict[str, np.ndarray] | None = None) -> None:
        """Merge rows that fit (``candidate``: their numbers in the space; ``bits``: the choices each row already
        stands for, else its own) and keep the best ``top`` plans."""
        choices = [name for name in MERGED_CHOICES if name in columns]
        if bits is None:
            bits = {name: np.left_shift(1, columns[name].astype(np.int64)) for name in choices}
        if self.columns:
            columns = {name: np.concatenate((self.columns[name], values)) for name, values in columns.items()}
            candidate = np.concatenate((self.candidate, candidate))
            bits = {name: np.concatenate((self.bits[name], bits[name])) for name in choices}
        if not candidate.size:
            self.columns, self.candidate, self.bits = columns, candidate, bits
            return
        order = np.lexsort((candidate, columns[self.objective]))
        ordered = columns[self.objective][order]
        identity = [name for name in columns if name not in MERGED_CHOICES]
        size = min(order.size, 4 * self.top)
        while True:   # the first rows, to the end of a run of equal objectives, until they hold `top` plans
            size = int(np.searchsorted(ordered, ordered[size - 1], side="right"))
            _, first, plan = np.unique(np.column_stack([columns[name][order[:size]] for name in identity]), axis=0,
                                       return_index=True, return_inverse=True)
            if first.size >= self.top or size == order.size:
                break
            size = min(order.size, 2 * size)
        order, plan = order[:size], plan.reshape(-1)
        ranked = np.argsort(first)                       # plan numbers, best first (by their first row)
        objective = ordered[first[ranked]]
        keep = ranked[(np.arange(ranked.size) < self.top) | (objective == objective[min(self.top, ranked.size) - 1])]
        rows = order[first[keep]]
        merged = {}
        for name in choices:
            taken = np.zeros(first.size, dtype=np.int64)
            np.bitwise_or.at(taken, plan, bits[name][order])
            merged[name] = taken[keep]
        self.columns = {name: column[rows] for name, column in columns.items()}
        self.candidate, self.bits = candidate[rows], merged

    def rows(self) -> list[tuple[dict[str, float], dict[str, tuple[int, ...]]]]:
        """The best ``top`` plans: each one's kept values, and the values each merged choice takes."""
        return [({name: float(values[row]) for name, values in self.columns.items()},
                 {name: tuple(v for v in range(int(bits[row]).bit_length()) if int(bits[row]) >> v & 1)
                  for name, bits in self.bits.items()})
                for row in range(min(self.top, self.candidate.size))]


def _described(inputs: Inputs, row: dict[str, float], merged: dict[str, tuple[int, ...]], wanted: list[str]) -> dict:
    """One ranked plan as the report shows it: its layout (its first candidate's; recomputation by name), its
    headline figures, and ``merged``: each choice its candidates differ in, with every value they take (as the
    layout writes it: ``{"strategy.recompute": ["none", "selective"]}``)."""
    layout = {path: int(row[path]) for path in LAYOUT_FIELDS if path in row}
    layout["strategy.recompute"] = Recompute(layout.get("strategy.recompute", 0)).label
    layout["strategy.sequence_parallel"] = bool(layout.get("strategy.sequence_parallel", 0))
    if inputs.layout.pipeline_schedule not in ("1f1b", "interleaved"):   # zero bubble, DualPipe: kept as stated
        layout["strategy.pipeline_schedule"] = inputs.layout.pipeline_schedule
    words = {"strategy.recompute": lambda v: Recompute(int(v)).label, "strategy.sequence_parallel": bool}
    same = {path: [words.get(path, int)(v) for v in taken] for path, taken in merged.items() if len(taken) > 1}
    return {"layout": layout, "figures": {name: row[name] for name in wanted}, "merged": same}


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
    from botec.estimation import evaluate_inputs, unreachable_target

    options = inputs.options or ((None, None),)
    per_node = inputs.tiers.accelerators_per_node
    largest = int(per_node.value) if per_node is not None else SEARCH_BOUNDS.max_serving_tensor_parallel
    degrees = [t for t in range(1, largest + 1) if inputs.model.attention_heads % t == 0]
    stated = int(inputs.spec["strategy.tensor_parallel"])   # the starting point: a replica across nodes included
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
