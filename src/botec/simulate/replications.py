"""Independent replications of one simulation: a confidence interval for every percentile.

A percentile of one run is one draw of a random quantity; with ``seeds`` runs (seeds s, s + 1, ...; the same
contract, load and request count) the percentile's mean over the runs x̄ and its 95 % confidence interval

    x̄ ± t(0.975, n − 1) · s / √n

follow from the runs' sample standard deviation s (the method of independent replications; Law, "Simulation
Modeling and Analysis", 5th ed., §9.4.1). The tail of each run is also counted: a P99 rests on the
(1 − 0.99)·N measured requests beyond it, and with fewer than :data:`FEW_BEYOND` of them the report says the
tail rests on too few requests.

The runs are independent, so they fan out (:func:`botec.fanout.run_tasks`): over local processes, or a Ray
cluster. Run k's seed is seed + k whoever runs it, so the figures are the same whatever the worker count.
Below :data:`IN_PROCESS_BELOW_REQUESTS` requests in all, the runs share this process (a worker's start-up,
0.3–1 s plus 0.2 s to rebuild a serving estimate, would cost more than it saves) unless workers are asked for.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional

__all__ = ["Interval", "Replications", "replicate", "FEW_BEYOND", "requests_beyond", "IN_PROCESS_BELOW_REQUESTS"]

# Student's t(0.975, df) for df = 1..30 (two-sided 95 %); 1.96 (the normal quantile) beyond.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
FEW_BEYOND = 100   # measured requests beyond a percentile below which its tail is called thin
METRICS = (("time_to_first_token", "ttft"), ("time_per_output_token", "tpot"), ("end_to_end", "end_to_end"))
LEVELS = (50, 90, 99)
IN_PROCESS_BELOW_REQUESTS = 100_000
"""Runs of fewer requests than this in all (seeds × requests) share this process unless workers are asked for:
at about 14 µs a request, 1.4 s of work, which two workers' start-up (about 1 s) would mostly eat."""


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
    planned: int = 0   # the runs asked for; more than len(runs) when interrupted (0: as many as ran)

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


def replicate(result, seeds: int, seed: int = 0, *, workers: Optional[int] = 1, ray_address: Optional[str] = "",
              progress=None, **options) -> Replications:
    """``seeds`` runs of :func:`botec.simulate.simulate` on ``result`` (a serving estimate) with seeds seed,
    seed + 1, …, and the 95 % interval of every percentile over them.

    ``workers``/``ray_address`` as :func:`botec.fanout.run_tasks` (the default: one after another, here). In this
    process ``progress(done, total)`` follows the requests of all the runs; run elsewhere, it moves as each run
    finishes. Interrupted (Ctrl-C), the runs that finished are kept (``planned`` says how many were asked for);
    with none finished, KeyboardInterrupt is raised."""
    from botec.fanout import Interrupted, Rebuilt, run_tasks, runs_here

    if runs_here(workers, ray_address):   # no pickling, and a progress bar that follows every request
        tasks = [(Rebuilt(_estimate, made=result), seed + k, options) for k in range(seeds)]
        function, finished = _run_here(progress, seeds), None
    else:   # each worker rebuilds the estimate from its contract once
        estimate = Rebuilt(_estimate, result.inputs.contract, result.inputs.base_dir)
        tasks = [(estimate, seed + k, options) for k in range(seeds)]
        requests = options.get("requests", 0) if options.get("trace") is None else 0
        function = _run
        finished = None if progress is None or not requests else \
            (lambda done, total: progress(done * requests, total * requests))
    try:
        runs = run_tasks(function, tasks, workers=workers, ray_address=ray_address, progress=finished)
    except Interrupted as stopped:
        runs = [run for run in stopped.results if run is not None]
        if not runs:
            raise KeyboardInterrupt from None
    return _replications(tuple(runs), seeds)


def _estimate(contract=None, base_dir=None):
    """The serving estimate of a contract, rebuilt in a worker (the candidates' comparison left out)."""
    from botec.estimation import estimate

    return estimate(contract, base_dir, compare=False)


def _run(task):
    """One run in a worker: (the estimate, its seed, simulate's options)."""
    from botec.simulate import simulate

    estimate, seed, options = task
    return simulate(estimate.value, seed=seed, **options)


def _run_here(progress, seeds: int):
    """One run in this process, its requests reported to ``progress`` after those of the runs before it."""
    from botec.simulate import simulate

    runs_done = 0

    def run(task):
        nonlocal runs_done
        estimate, seed, options = task

        def each(done: int, total: int) -> None:
            progress(runs_done * total + done, seeds * total)

        simulation = simulate(estimate.value, seed=seed, progress=each if progress is not None else None, **options)
        runs_done += 1
        return simulation

    return run


def _replications(runs: tuple, planned: int) -> Replications:
    intervals = {}
    for _, short in METRICS:
        for level in LEVELS:
            intervals[(short, level)] = interval([getattr(r, short).percentile(level) for r in runs])
    return Replications(runs, intervals, planned)
