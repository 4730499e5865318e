"""Uncertainty and sensitivity: what the stated ranges (``low``/``high``) do to every output.

Monte Carlo samples each ranged input with a seeded generator, evaluates the graph once on the
sample arrays and reports percentiles. The input's ``distribution`` says how:

- ``triangular`` (default): low, value (the most likely), high;
- ``uniform``: anywhere between low and high;
- ``normal``: mean = value, low and high taken as the 10th and 90th percentiles, clipped to them
  stretched by half the range (so a ratio cannot turn negative);
- ``lognormal``: the same in log space (for factors that scale multiplicatively). Sensitivity moves one input at a time from its
low to its high end, the others at their values, and ranks the swings (a tornado table).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from botec.estimate import Estimate, choices_of, given_quantities, serving_given
from botec.quantities import Given, evaluate


def _given(result: Estimate) -> dict[str, Given]:
    contract = result.contract
    if contract.workload.kind == "serving":
        return serving_given(contract)[0]
    return given_quantities(contract)[0]


def ranged_inputs(given: dict[str, Given]) -> dict[str, Given]:
    return {name: g for name, g in given.items() if g.low is not None or g.high is not None}


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


@dataclass
class MonteCarlo:
    samples: int
    seed: int
    percentiles: dict[str, tuple[float, float, float]]   # quantity -> (P10, P50, P90)
    probability_fits: float | None
    probability_deadline: float | None
    varied: list[str]


def monte_carlo(result: Estimate, samples: int = 10_000, seed: int = 0, deadline_seconds: float | None = None
                ) -> MonteCarlo:
    """P10/P50/P90 of every derived quantity under the stated ranges; reproducible for a seed."""
    given = dict(_given(result))
    generator = np.random.default_rng(seed)
    varied = []
    for name, g in ranged_inputs(given).items():
        low = g.low if g.low is not None else g.value
        high = g.high if g.high is not None else g.value
        if high > low:
            values = draw(generator, g.distribution, float(low), float(g.value), float(high), samples)
            varied.append(name)
        else:
            values = np.full(samples, float(g.value))
        given[name] = Given(values, g.provenance, g.source, g.field, g.low, g.high, g.distribution)
    with np.errstate(divide="ignore", invalid="ignore"):
        quantities = evaluate(given, wanted=list(result.quantities), choices=choices_of(result.contract))
    percentiles = {}
    for name, quantity in quantities.items():
        if quantity.provenance != "derived":
            continue
        values = np.broadcast_to(np.asarray(quantity.value, dtype=float), (samples,))
        p10, p50, p90 = np.percentile(values, [10, 50, 90])
        percentiles[name] = (float(p10), float(p50), float(p90))
    fits = None
    if "memory_spare_bytes" in quantities:
        fits = float(np.mean(np.broadcast_to(quantities["memory_spare_bytes"].value, (samples,)) >= 0))
    elif "max_concurrent_requests" in quantities:
        fits = float(np.mean(np.broadcast_to(quantities["max_concurrent_requests"].value, (samples,)) >= 1))
    deadline = None
    if deadline_seconds is not None and "run_seconds" in quantities:
        deadline = float(np.mean(np.broadcast_to(quantities["run_seconds"].value, (samples,)) <= deadline_seconds))
    return MonteCarlo(samples, seed, percentiles, fits, deadline, varied)


@dataclass
class Swing:
    input: str
    field: str | None
    low: float
    high: float
    output_at_low: float
    output_at_high: float

    @property
    def swing(self) -> float:
        return abs(self.output_at_high - self.output_at_low)


def sensitivity(result: Estimate, output: str) -> list[Swing]:
    """Each ranged input from its low to its high end, one at a time; largest swing first."""
    given = _given(result)
    choices = choices_of(result.contract)
    swings = []
    for name, g in ranged_inputs(given).items():
        low = g.low if g.low is not None else g.value
        high = g.high if g.high is not None else g.value
        values = []
        for x in (low, high):
            changed = dict(given)
            changed[name] = Given(x, g.provenance)
            values.append(evaluate(changed, wanted=[output], choices=choices)[output].value)
        swings.append(Swing(name, g.field, low, high, float(values[0]), float(values[1])))
    return sorted(swings, key=lambda s: s.swing, reverse=True)
