"""The largest load a replica carries within a latency target: a bracketed root search on the arrival rate.

The latency a target names (TTFT or TPOT at its percentile) rises with the load per replica λ
(:mod:`botec.serving.load`), so the load a fleet is sized to is the root of latency(λ) = target in [0, cap ×
capacity]. The ITP method (interpolate, truncate, project; Oliveira and Takahashi 2021, ACM TOMS 47(1):5) finds it
in about a dozen steady states where a bisection takes 40, and never in more than a bisection's count plus one (it
bisects where the latency jumps: a prompt one chunk longer); elementwise, as everything the estimate evaluates (a
Monte Carlo's samples narrow every sample's bracket at once).
"""

from __future__ import annotations

from botec.graph.elementwise import all_true, maximum, minimum, where
from botec.serving import load as model

__all__ = ["largest_rate_within", "RATE_TOLERANCE", "HALVINGS", "TRUNCATION"]

HALVINGS = 40                  # the bracket is narrowed to 2⁻⁴⁰ × cap × capacity, as 40 bisections leave it
RATE_TOLERANCE = 2.0 ** -HALVINGS
TRUNCATION = 0.2               # κ₁·(b − a)₀: the ITP step's truncation δ = κ₁·(b − a)² (the paper's default)
SLACK_STEPS = 1                # n₀: steps beyond a bisection's count the projection may spend


def largest_rate_within(replica: model.Replica, capacity, cap, latency, target, idle: model.Load | None = None):
    """The largest rate λ in [0, cap · capacity] at which ``latency(at_load(λ)) ≤ target`` (``latency`` non-decreasing
    in λ), to within RATE_TOLERANCE · cap · capacity below it; cap · capacity when that meets it, 0 when even an idle
    replica (``idle``: its load at 10⁻⁹ · capacity) fails.

    A bracket [a, b], f(a) ≤ 0 < f(b), f = latency − target, narrowed by ITP: the regula falsi point
    x_f = a − f(a)·(b − a)/(f(b) − f(a)) moved δ = κ₁·(b − a)² towards the midpoint x_½ (so that both ends move and the
    chord does not stall beside a curved end), then kept within r = ε·2^(n_max − j) − (b − a)/2 of x_½ (so that after
    j steps the bracket is no wider than n_max bisections would leave it; n_max = HALVINGS + n₀, ε half the final
    width), and at least ε inside either end (where f(a) is already 0 to rounding, the next rate lands past the root
    and closes the bracket). Each rate's fixed point starts from the low end's steady step, below its own
    (:func:`botec.serving.load.steady_state` rises from there)."""
    capacity, cap, target = model.plain(capacity), model.plain(cap), model.plain(target)
    top = capacity * cap
    tolerance = RATE_TOLERANCE * top   # 2ε
    stages = replica.pipeline_parallel
    idle = model.at_load(replica, capacity * 1e-9) if idle is None else idle
    f_low = latency(idle) - target
    f_high = latency(model.at_load(replica, top, near=idle)) - target
    ok_idle, ok_top = f_low <= 0, f_high <= 0
    low, high = capacity * 0.0, top
    low_seconds = idle.round_seconds / stages   # the low end's steady stage step, where each fixed point starts
    for step in range(HALVINGS + SLACK_STEPS):
        width = high - low
        if all_true(where(ok_top, True, where(ok_idle, width <= tolerance, True))):
            break
        middle = low + width / 2
        chord = low - f_low * width / where(f_high > f_low, f_high - f_low, 1.0)   # x_f
        toward = where(middle >= chord, 1.0, -1.0)                                  # σ
        truncation = TRUNCATION * width * width / where(top > 0, top, 1.0)          # δ
        truncated = where(truncation <= abs(middle - chord), chord + toward * truncation, middle)
        reach = tolerance / 2 * 2.0 ** (HALVINGS + SLACK_STEPS - step) - width / 2  # r
        rate = where(abs(truncated - middle) <= reach, truncated, middle - toward * reach)
        rate = minimum(maximum(rate, low + tolerance / 2), high - tolerance / 2)   # ε inside either end
        load = model.steady_state(replica, rate, low_seconds)
        f = latency(load) - target
        ok = f <= 0
        low, f_low = where(ok, rate, low), where(ok, f, f_low)
        high, f_high = where(ok, high, rate), where(ok, f_high, f)
        low_seconds = where(ok, load.round_seconds / stages, low_seconds)
    return where(ok_top, top, where(ok_idle, low, 0.0))
