"""The bounds of a simulation, each refused before any work in one line naming the flag or field.

A run's cost grows with its requests and its replicas, and its clock must stay a float that tells one engine step
from the next. So:

- ``MAX_REQUESTS`` requests (at ``SIMULATED_CPU_SECONDS_PER_REQUEST``, 20 µs of CPU a request, 33 minutes); a
  study's runs together at most ``MAX_STUDY_REQUESTS`` unless ``botec study --max-requests`` raises it;
- ``MAX_REPLICAS`` replicas: a replica costs about 0.4 ms to set up and 15 kB, and the least-outstanding
  balancer looks at every replica at every arrival (10,000 replicas serving 10,000 requests: over two minutes);
  replicas beyond the requests are allowed (they serve nothing: a short run of a large fleet);
- arrivals within ``MAX_SPAN_SECONDS`` of the first (a billion seconds, 31.7 years): at that clock a float64
  still resolves 0.12 µs, well under any engine step; a rate so low that the requests would take longer to
  arrive (n / λ beyond it), or a trace whose arrivals lie further apart, is not a serving workload (before this
  bound, a gap of 1e300 s hung the scheduler and one of 1e308 s overflowed);
- seeds from 0 to ``MAX_SEED`` (2³² − 1, the range numpy's legacy seeding and most benchmarks' ``--seed`` take;
  numpy's Generators refuse a negative one).

Plain Python (no numpy): the command line checks its flags with these before it reads the contract.
"""

from __future__ import annotations

import math

from botec.errors import UserError

__all__ = ["MAX_REQUESTS", "MAX_REPLICAS", "MAX_SPAN_SECONDS", "MAX_SEED", "MAX_STUDY_REQUESTS",
           "SIMULATED_CPU_SECONDS_PER_REQUEST", "check_seed", "check_replicas", "check_arrival_span",
           "check_think_time"]

SIMULATED_CPU_SECONDS_PER_REQUEST = 20e-6
"""CPU seconds a simulation spends per request, t_req: 20 µs a request in flight, measured by
``benchmarks/simulate_100k.py`` (100,000 requests, Llama 3.1-8B on one H100 at 80 % of its capacity; CHANGELOG,
issue 20's "Benchmarks"; 12 µs on a quiet core at this load, 26–38 µs for disaggregated replicas). A work
estimate is n × t_req: a floor for a heavier workload, not a promise."""
MAX_REQUESTS = 100_000_000
"""The most requests a simulation serves, drawn or from a trace (10⁸ × t_req = 2,000 CPU s, 33 CPU-minutes)."""
MAX_STUDY_REQUESTS = MAX_REQUESTS
"""The most simulated requests (runs × requests per run) ``botec study`` starts unless ``--max-requests`` raises
it: as many as one simulation may serve, 33 CPU-minutes (17 minutes on two cores). 80,000 runs × 100,000 requests
(8·10⁹, 44 CPU-hours) was accepted and started before this bound."""
MAX_REPLICAS = 10_000
"""The most replicas a simulation runs (see the module docstring)."""
MAX_SPAN_SECONDS = 1e9
"""The longest a run's arrivals may last, first to last (31.7 years; see the module docstring)."""
MAX_SEED = 2 ** 32 - 1
"""The largest seed (the last of ``--seeds`` runs included)."""


def check_seed(seed: int, runs: int = 1) -> None:
    """A one-line error unless ``seed`` … ``seed + runs − 1`` are all whole numbers from 0 to ``MAX_SEED``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED - (runs - 1):
        last = f" (the last of {runs} runs is --seed + {runs - 1})" if runs > 1 else ""
        raise UserError(f"--seed: expected a whole number from 0 to {MAX_SEED:,}{last}, got {seed!r}")


def check_replicas(replicas: int, given: bool = True) -> None:
    """A one-line error unless 1 ≤ ``replicas`` ≤ ``MAX_REPLICAS``. ``given``: the count came from
    ``--replicas`` (else from the estimate, and the message says so)."""
    where = "--replicas" if given else f"the estimate's {replicas:,} replicas (give --replicas)"
    if replicas < 1:
        raise UserError(f"--replicas: expected at least 1 replica, got {replicas}")
    if replicas > MAX_REPLICAS:
        raise UserError(f"{where}: expected at most {MAX_REPLICAS:,} replicas (each is simulated step by step), got "
                        f"{replicas:,}")


def check_think_time(requests: int, users: int, think_seconds: float, where: str) -> None:
    """A one-line error naming ``where`` when ``users`` users pausing ``think_seconds`` between requests would take
    longer than ``MAX_SPAN_SECONDS`` to send ``requests`` (at least (n / N)·Z, whatever the replies take)."""
    if requests / users * think_seconds > MAX_SPAN_SECONDS:
        raise UserError(f"{where}: {users:,} users pausing {think_seconds:.4g} s between requests would take at least "
                        f"{requests / users * think_seconds:.3g} s to send {requests:,}; expected at most "
                        f"{MAX_SPAN_SECONDS:,.0f} s (31.7 years)")


def check_arrival_span(requests: int, rate_per_s: float, where: str) -> None:
    """A one-line error naming ``where`` when ``requests`` arrivals at ``rate_per_s`` would last longer than
    ``MAX_SPAN_SECONDS`` (n / λ; an infinite rate puts them all at t = 0)."""
    if not math.isinf(rate_per_s) and requests / rate_per_s > MAX_SPAN_SECONDS:
        raise UserError(f"{where}: {requests:,} requests at {rate_per_s:.4g} requests/s would take "
                        f"{requests / rate_per_s:.3g} s to arrive; expected at most {MAX_SPAN_SECONDS:,.0f} s (31.7 "
                        f"years): give a higher rate or fewer requests")
