"""Independent replications of one simulation: a confidence interval for every percentile.

A percentile of one run is one draw of a random quantity; with ``seeds`` runs (seeds s, s + 1, ...; the same
contract, load and request count) the percentile's mean over the runs x̄ and its 95 % confidence interval

    x̄ ± t(0.975, n − 1) · s / √n

follow from the runs' sample standard deviation s (the method of independent replications; Law, "Simulation
Modeling and Analysis", 5th ed., §9.4.1). The tail of each run is also counted: a P99 rests on the
(1 − 0.99)·N measured requests beyond it, and with fewer than :data:`FEW_BEYOND` of them the report says the
tail rests on too few requests.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

__all__ = ["Interval", "Replications", "replicate", "FEW_BEYOND", "requests_beyond"]

# Student's t(0.975, df) for df = 1..30 (two-sided 95 %); 1.96 (the normal quantile) beyond.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
FEW_BEYOND = 100   # measured requests beyond a percentile below which its tail is called thin
METRICS = (("time_to_first_token", "ttft"), ("time_per_output_token", "tpot"), ("end_to_end", "end_to_end"))
LEVELS = (50, 90, 99)


def t_975(degrees_of_freedom: int) -> float:
    """Student's t quantile at 0.975 (tabulated to 30 degrees of freedom, the normal's 1.96 beyond)."""
    return T_975[degrees_of_freedom - 1] if degrees_of_freedom <= len(T_975) else 1.96


def requests_beyond(measured_requests: int, level: int) -> float:
    """Measured requests above the ``level`` percentile: (1 − level/100) · N."""
    return (1 - level / 100) * measured_requests


@dataclass(frozen=True)
class Interval:
    """A percentile's mean over the runs and the half-width of its 95 % confidence interval (seconds)."""

    mean_seconds: float
    half_width_seconds: float
    runs: tuple[float, ...]


@dataclass(frozen=True)
class Replications:
    """The runs, and per metric and percentile (``("ttft", 99)``) the interval over them."""

    runs: tuple
    intervals: dict

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(run.seed for run in self.runs)

    def thin_tails(self) -> list[str]:
        """The percentiles whose tail rests on fewer than FEW_BEYOND measured requests per run."""
        measured = min(run.measured_requests for run in self.runs)
        return [f"P{level}" for level in LEVELS if requests_beyond(measured, level) < FEW_BEYOND]


def interval(values: list[float]) -> Interval:
    """x̄ ± t(0.975, n − 1)·s/√n over the finite values (NaN where fewer than two)."""
    finite = [value for value in values if math.isfinite(value)]
    if len(finite) < 2:
        return Interval(finite[0] if finite else math.nan, math.nan, tuple(values))
    spread = statistics.stdev(finite)
    return Interval(statistics.fmean(finite), t_975(len(finite) - 1) * spread / math.sqrt(len(finite)),
                    tuple(values))


def replicate(run, seeds: int, seed: int = 0, **options) -> Replications:
    """``seeds`` runs of ``run(seed=…, **options)`` (``botec.simulate.simulate`` bound to an estimate) with seeds
    seed, seed + 1, …, and the 95 % interval of every percentile over them."""
    runs = tuple(run(seed=seed + k, **options) for k in range(seeds))
    intervals = {}
    for _, short in METRICS:
        for level in LEVELS:
            intervals[(short, level)] = interval([getattr(r, short).percentile(level) for r in runs])
    return Replications(runs, intervals)
