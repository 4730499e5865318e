"""Uncertainty and sensitivity: what the stated ranges (``low``/``high``) do to every output.

Monte Carlo samples each ranged number of the contract with a seeded generator, varies the
estimate's inputs with the samples (:meth:`botec.inputs.Inputs.vary`: a sampled link bandwidth
reaches every group that crosses it) and evaluates the graph once on the sample arrays. The
number's ``distribution`` says how to sample:

- ``triangular`` (default): low, value (the most likely), high;
- ``uniform``: anywhere between low and high;
- ``normal``: mean = value, low and high taken as the 10th and 90th percentiles, clipped to them
  stretched by half the range (so a ratio cannot turn negative);
- ``lognormal``: the same in log space (for factors that scale multiplicatively).

Sensitivity moves one number at a time from its low to its high end, the others at their values,
and ranks the swings (a tornado table). Ranges on the layout's counts (accelerators, batch sizes)
are not sampled: sweep those (``botec sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from botec.estimation import Estimate

__all__ = ["MonteCarlo", "Swing", "draw", "monte_carlo", "sensitivity"]

_Z90 = 1.2815515655446004  # the standard normal's 90th percentile


def draw(generator, distribution: str, low: float, value: float, high: float, samples: int):
    """``samples`` draws of one input from its stated range."""
    if distribution == "uniform":
        return generator.uniform(low, high, samples)
    if distribution in ("normal", "lognormal"):
        to, back = (np.log, np.exp) if distribution == "lognormal" else (lambda x: x, lambda x: x)
        centre, spread = to(value), (to(high) - to(low)) / (2 * _Z90)
        span = (to(high) - to(low)) / 2
        drawn = generator.normal(centre, spread, samples)
        return back(np.clip(drawn, to(low) - span, to(high) + span))
    return generator.triangular(low, value, high, samples)


def _read(result: Estimate) -> set[str]:
    """The inputs the estimate's formulas read (those a zero_when condition spared are not read)."""
    return {name for quantity in result.quantities.values() for name in quantity.inputs}


def _ends(given) -> tuple[float, float]:
    low = given.low if given.low is not None else given.value
    high = given.high if given.high is not None else given.value
    return float(low), float(high)


@dataclass
class MonteCarlo:
    samples: int
    seed: int
    percentiles: dict[str, tuple[float, float, float]]   # quantity -> (P10, P50, P90)
    probability_fits: float | None
    probability_deadline: float | None
    varied: list[str]                                     # the contract fields sampled


MONTE_CARLO_BLOCK_SAMPLES = 50_000
"""Samples drawn and evaluated at once, each block one task for the workers, with a generator seeded by
(seed, block number) (numpy's SeedSequence spawn key): fixed, not derived from the worker count, so the samples
are the same whoever draws them."""
IN_PROCESS_BELOW_SAMPLES = 1_000_000
"""Fewer samples run in this process unless workers are asked for. The lesson's 300,000 samples take 1.9 s here
and 3.4 s on two workers (two busy cores): every varying quantity's samples come back to this process for the
percentiles (150 quantities: 60 MB a block), so a pool pays only for millions of samples, or on a cluster."""


def monte_carlo(result: Estimate, samples: int = 10_000, seed: int = 0, deadline_seconds: float | None = None,
                *, workers: int | None = 1, ray_address: str | None = "") -> MonteCarlo:
    """P10/P50/P90 of every derived quantity under the stated ranges; reproducible for a seed.

    The samples are drawn in blocks of :data:`MONTE_CARLO_BLOCK_SAMPLES`, block b from a generator seeded by
    (seed, b); the blocks run as :func:`botec.fanout.run_tasks` runs them (``workers``, ``ray_address``; the
    default: here, one after another). Interrupted (Ctrl-C), the figures of the blocks finished so far (``samples``
    says how many)."""
    from botec.explore.space import shipped_inputs
    from botec.fanout import Interrupted, run_tasks

    inputs = result.inputs
    draws = []   # (field, distribution, low, value, high) of each number sampled
    for field, given in inputs.ranged(_read(result)).items():
        low, high = _ends(given)
        if high > low:
            draws.append((field, given.distribution, low, float(given.value), high))
    shared = shipped_inputs(inputs)
    tasks = [(shared, list(result.quantities), draws, seed, block, min(MONTE_CARLO_BLOCK_SAMPLES, samples - start))
             for block, start in enumerate(range(0, samples, MONTE_CARLO_BLOCK_SAMPLES))]
    try:
        blocks = run_tasks(_sample_block, tasks, workers=workers, ray_address=ray_address)
    except Interrupted as stopped:
        blocks = [block for block in stopped.results if block is not None]
        if not blocks:
            raise KeyboardInterrupt from None
    samples = sum(size for size, _ in blocks)
    values = {name: _column(blocks, name, samples) for name in blocks[0][1]}
    percentiles = {}
    for name, column in values.items():
        p10, p50, p90 = np.percentile(column, [10, 50, 90])
        percentiles[name] = (float(p10), float(p50), float(p90))

    def share(name: str, holds) -> float | None:
        return float(np.mean(holds(values[name]))) if name in values else None

    fits = _fit_share(values, samples) if result.kind == "training" else \
        share("max_concurrent_requests", lambda v: v >= 1)
    deadline = share("run_seconds", lambda v: v <= deadline_seconds) if deadline_seconds is not None else None
    return MonteCarlo(samples, seed, percentiles, fits, deadline, [field for field, *_ in draws])


def _column(blocks: list, name: str, samples: int) -> np.ndarray:
    """One quantity's values over every sample: the blocks' arrays end to end (a view of one number when the
    quantity does not vary)."""
    parts = [block[name] for _, block in blocks]
    if all(part.ndim == 0 for part in parts) and all(part == parts[0] for part in parts):
        return np.broadcast_to(parts[0], (samples,))
    return np.concatenate([np.broadcast_to(part, (size,)) for part, (size, _) in zip(parts, blocks)])


def _sample_block(task) -> tuple[int, dict[str, np.ndarray]]:
    """One block: (its sample count, each derived quantity's values over it: an array, or one number for all)."""
    shared, wanted, draws, seed, block, size = task
    inputs = shared.value
    generator = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(block,)))
    changes = {field: draw(generator, distribution, low, value, high, size)
               for field, distribution, low, value, high in draws}
    given = inputs.vary(changes).given if changes else inputs.given
    with np.errstate(divide="ignore", invalid="ignore"):
        quantities = inputs.graph.evaluate(given, wanted=wanted, choices=inputs.choices)
    return size, {name: np.asarray(quantity.value, dtype=float) for name, quantity in quantities.items()
                  if quantity.provenance == "derived"}


def _fit_share(values: dict, samples: int) -> float | None:
    """The share of samples whose plan fits, by the estimate's verdict (:func:`botec.findings.fit.plan_fits`: the
    headroom kept, and the host's memory where the contract states it)."""
    from botec.explore.space import fits_mask
    from botec.findings.fit import DEVICE_SPARE, FITS, SPARES

    if DEVICE_SPARE[FITS] not in values:
        return None
    columns = {name: np.broadcast_to(values[name], (samples,)) for name in SPARES if name in values}
    return float(np.mean(fits_mask(columns, np.ones(samples, dtype=bool))))


@dataclass
class Swing:
    input: str          # the contract field
    low: float
    high: float
    unit: str
    output_at_low: float
    output_at_high: float

    @property
    def swing(self) -> float:
        return abs(self.output_at_high - self.output_at_low)


def sensitivity(result: Estimate, output: str) -> list[Swing]:
    """Each ranged number from its low to its high end, one at a time; largest swing first.

    One vectorized evaluation of the graph: row ``2i`` holds the ``i``-th number at its low end and
    row ``2i + 1`` at its high end, every other number at its value."""
    inputs = result.inputs
    registry = inputs.graph.definitions(inputs.choices)
    ranged = inputs.ranged(_read(result))
    if not ranged:
        return []
    rows = 2 * len(ranged)
    changes, ends = {}, []
    for i, (field, given) in enumerate(ranged.items()):
        low, high = _ends(given)
        values = np.full(rows, float(given.value))
        values[2 * i], values[2 * i + 1] = low, high
        changes[field] = values
        ends.append((low, high))
    with np.errstate(divide="ignore", invalid="ignore"):
        evaluated = inputs.graph.evaluate(inputs.vary(changes).given, wanted=[output], choices=inputs.choices)
    values = np.broadcast_to(np.asarray(evaluated[output].value, dtype=float), (rows,))
    swings = [Swing(field, low, high, registry[inputs.stated_fields[field][0]].unit, float(values[2 * i]),
                    float(values[2 * i + 1])) for i, (field, (low, high)) in enumerate(zip(ranged, ends))]
    return sorted(swings, key=lambda s: s.swing, reverse=True)
