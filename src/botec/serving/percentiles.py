"""The estimate's percentiles of a replica's latencies at a load: the q-quantiles of the time to first token and of
the time per output token (:mod:`botec.serving.load` holds the means and the steady state they start from)."""

from __future__ import annotations

from botec.graph.elementwise import all_true, exp, log, maximum, minimum, where
from botec.serving.load import Load, Replica, _decode_at

__all__ = ["ttft_quantile", "tpot_quantile"]

TPOT_WINDOW_ITERATIONS = 8   # the decode window's fixed point T = (O − 1)·TPOT_q: Illinois steps on its bracket
TPOT_WINDOW_CONVERGED = 1e-4   # relative width of the window's bracket at which its fixed point has converged


def tpot_quantile(replica: Replica, load: Load, z):
    """The q-quantile of a request's mean time per output token: the replica's mean TPOT at the rate it receives over
    that request's decode window (z = z_q, the standard normal quantile).

    A request's TPOT is the mean of the steps over its decode window, T = (O − 1)·TPOT seconds, and those steps are
    set by the requests that reach its replica meanwhile: each adds a prompt chunk and joins the decode batch (in the
    simulator the two move together, a request's TPOT and the arrivals at its replica in its window correlating at
    0.96–0.99). The window is long against a step (hundreds of steps), so over it the replica runs near the steady
    state of its rate in the window, Λ = N(T)/T (quasi-static): TPOT_q = TPOT(Λ_q), TPOT(λ) the mean of
    :func:`at_load` (Little's law's batch B = λ·(O − 1)/E·τ and the share of steps carrying a chunk, both growing
    with λ: a burst moves TPOT through the decode batch and the chunks it brings).

    N(T): the fleet's arrivals come in epochs at λ_f/m (gaps of squared coefficient of variation c_a²: Poisson 1,
    evenly spaced 0), m requests each; over a window T their count has variance ≈ (λ_f/m)·T·c_a²·m² = λ_f·T·m·c_a²
    (the renewal-reward central limit theorem; Cox 1962, Renewal Theory, §9.2). A round-robin balancer hands a replica every
    R-th of the fleet's requests (R = λ_f/λ), so its count over a request's window is the fleet's over R: N = N_fleet/R,
    mean λ·T and squared coefficient of variation v = m·c_a²/(λ_f·T) (a least-outstanding balancer, holding the
    replicas' outstanding requests level, gives the same). The window opens after the request's own burst has arrived, and
    Poisson epochs have independent increments, so the count a request's window finds is distributed as any
    window's (no size bias); in the normal approximation Λ_q = λ·(1 + z_q·√v). T is the window of the request at
    the quantile, (O − 1)·TPOT_q: the root of q = G(q), G(q) the mean TPOT at the Λ_q of the window (O − 1)·q.
    λ_f = burst_epochs_per_s × m (0: the bursts reach this replica whole, R = 1).
    A pooled M/G/c queue does not describe it: the simulator's balancer assigns each request to one replica on
    arrival, where it queues and decodes."""
    fleet_rate = where(replica.burst_epochs_per_s > 0, replica.burst_epochs_per_s * replica.burst_size, load.rate)
    spread = replica.burst_size * replica.arrival_variation
    lowest_stage_seconds = load.round_seconds / replica.pipeline_parallel   # the mean's: at or below every Λ_q's

    def window_tpot(quantile, stage_seconds):
        """(G(q), its stage step): the mean TPOT at Λ_q over the window T = (O − 1)·q."""
        window = maximum(replica.output_tokens - 1, 1.0) * quantile
        variation = spread / maximum(fleet_rate * window, 1e-300)
        rate = load.rate * (1 + maximum(z, 0.0) * variation ** 0.5)
        stage_seconds, _, _, _, _, mean = _decode_at(replica, rate, stage_seconds)   # at_load's TPOT at Λ_q
        return maximum(mean, load.tpot_mean), stage_seconds

    # G falls as q grows (a longer window averages the arrivals more), so h(q) = G(q) − q has one root, bracketed by
    # q = TPOT (h ≥ 0: G ≥ TPOT) and G(TPOT) (h ≤ 0: G(G(TPOT)) ≤ G(TPOT)). The plain iteration q ← G(q) oscillates
    # about it, and near saturation (G' < −1) does not settle: 85.6 → 70.4 → 77.6 → … → 75.0 ms on the 70B fleet
    # under bursts. Regula falsi with the Illinois modification (Dowell and Jarratt 1971) keeps the bracket.
    low = load.tpot_mean
    high = window_tpot(low, lowest_stage_seconds)[0]
    rise_low, rise_high = high - low, window_tpot(high, lowest_stage_seconds)[0] - high
    side = 0.0
    for _ in range(TPOT_WINDOW_ITERATIONS):
        if all_true(high - low <= TPOT_WINDOW_CONVERGED * high):
            break
        span = rise_low - rise_high
        quantile = where(span > 0, high + rise_high * (high - low) / where(span > 0, span, 1.0), high)
        quantile = minimum(maximum(quantile, low), high)
        tpot = window_tpot(quantile, lowest_stage_seconds)[0]
        rise = tpot - quantile
        above = rise >= 0   # the root is above q: q is the new low end
        low, rise_low = where(above, quantile, low), where(above, rise, where(side < 0, rise_low / 2, rise_low))
        high, rise_high = where(above, high, quantile), where(above, where(side > 0, rise_high / 2, rise_high), rise)
        side = where(above, 1.0, -1.0)
    return where(abs(rise_low) < abs(rise_high), low, high)


def ttft_quantile(load: Load, q):
    """The q-quantile of the time to first token: the wait W (a share π of the prompts wait, exponentially, θ = W̄/π
    on average), the step in progress U (found with probability s, uniformly far through its length L), the rest
    of its burst (x·S, as fixed) and the prefill S. Beyond L the sum's tail is exact for that model:
    P(W + U > t) = π·e^(−t/θ)·M, M = E[e^(U/θ)] = (1 − s) + s·θ·(e^(L/θ) − 1)/L (U's moment generating function at
    1/θ), so t_q = θ·ln(π·M/(1 − q)) + x·S + S.
    When that falls short of L (a wait shorter than a step) the terms' quantiles are added instead (an upper bound):
    θ·ln(π/(1 − q)) when π > 1 − q, plus (q − (1 − s))/s of the step when q > 1 − s."""
    busy = maximum(load.queue_busy_share if load.waiting_share is None else load.waiting_share, 1e-12)
    mean_wait = maximum(load.wait_mean / busy, 1e-12)   # θ
    tail = where(busy > 1 - q, mean_wait * log(busy / maximum(1 - q, 1e-12)), 0.0)
    stepping = maximum(load.stepping_share, 1e-12)
    step = maximum(load.step_in_progress, 1e-12)
    residual = maximum(q - (1 - stepping), 0.0) / stepping * load.step_in_progress
    ratio = minimum(step / mean_wait, 600.0)   # L/θ, capped where e^(L/θ) would overflow (the sum is then U's)
    moment = (1 - stepping) + stepping * (exp(ratio) - 1) / ratio
    joint = mean_wait * log(maximum(busy * moment / maximum(1 - q, 1e-12), 1.0))
    summed = where(joint >= load.step_in_progress, minimum(joint, tail + residual), tail + residual)
    return summed + load.burst_wait + load.prefill_seconds
