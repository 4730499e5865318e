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


def monte_carlo(result: Estimate, samples: int = 10_000, seed: int = 0, deadline_seconds: float | None = None
                ) -> MonteCarlo:
    """P10/P50/P90 of every derived quantity under the stated ranges; reproducible for a seed."""
    inputs = result.inputs
    generator = np.random.default_rng(seed)
    changes, varied = {}, []
    for field, given in inputs.ranged(_read(result)).items():
        low, high = _ends(given)
        if high > low:
            changes[field] = draw(generator, given.distribution, low, float(given.value), high, samples)
            varied.append(field)
    given = inputs.vary(changes).given if changes else inputs.given
    with np.errstate(divide="ignore", invalid="ignore"):
        quantities = inputs.graph.evaluate(given, wanted=list(result.quantities), choices=inputs.choices)
    percentiles = {}
    for name, quantity in quantities.items():
        if quantity.provenance != "derived":
            continue
        values = np.broadcast_to(np.asarray(quantity.value, dtype=float), (samples,))
        p10, p50, p90 = np.percentile(values, [10, 50, 90])
        percentiles[name] = (float(p10), float(p50), float(p90))

    def share(name: str, holds) -> float | None:
        if name not in quantities:
            return None
        return float(np.mean(holds(np.broadcast_to(np.asarray(quantities[name].value, dtype=float), (samples,)))))

    fits = _fit_share(quantities, samples) if result.kind == "training" else \
        share("max_concurrent_requests", lambda v: v >= 1)
    deadline = share("run_seconds", lambda v: v <= deadline_seconds) if deadline_seconds is not None else None
    return MonteCarlo(samples, seed, percentiles, fits, deadline, varied)


def _fit_share(quantities: dict, samples: int) -> float | None:
    """The share of samples whose plan fits: the device's memory, and the host's where the contract states it."""
    from botec.explore.space import fits_mask

    if "memory_spare_bytes" not in quantities:
        return None
    columns = {name: np.broadcast_to(np.asarray(quantities[name].value, dtype=float), (samples,))
               for name in ("memory_spare_bytes", "memory_spare_before_headroom_bytes", "host_memory_spare_bytes")
               if name in quantities}
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
