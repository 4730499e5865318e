"""Statistics kept while a simulation streams: percentiles from a relative-error quantile sketch, exact sums.

``botec simulate`` keeps no per-request record (a run of 10⁷ requests would hold gigabytes); each finished
request's latencies go into these, block by block (numpy arrays), and are dropped.

**Percentiles** (:class:`QuantileSketch`): the values themselves while there are at most ``exact_up_to``
(100,000 by default: a 100,000-request run's percentiles are numpy's, exactly); past that, DDSketch
(C. Masson, J. E. Rim, H. K. Lee, "DDSketch: a fast and fully-mergeable quantile sketch with
relative-error guarantees", PVLDB 12(12), 2019). With a relative accuracy α (1 % here):

    γ = (1 + α) / (1 − α)                       (γ ≈ 1.0202 for α = 1 %)
    bucket key of x > 0:  k = ⌈log_γ x⌉,        so γ^(k−1) < x ≤ γ^k
    the bucket's value:   x̂_k = 2·γ^k / (γ + 1), |x̂_k − x| ≤ α·x for every x in the bucket

Zero is counted apart (x̂ = 0, exact); a value is never negative (latencies). The order statistic x₍ᵢ₎
(0-based) is the value of the bucket holding the i-th count, clamped to the exact [min, max] seen. A
percentile p is numpy's default (linear interpolation): h = (n − 1)·p/100, x₍⌊h⌋₎ + (h − ⌊h⌋)·(x₍⌊h⌋+1₎ −
x₍⌊h⌋₎). Each order statistic is within α of the true one and interpolation is a positive combination, so
**the sketched percentile is within α (relative) of ``numpy.percentile`` of the same values**. The buckets
are one dense array over the keys seen: float64's whole range is about 72,000 keys at α = 1 % (576 kB),
latencies between 1 µs and 10⁴ s about 1,400.

Why not the ``ddsketch`` package (Datadog's, pure Python, which installs here): it adds values one at a time,
0.9 µs each (measured, α = 1 %), three per request; keyed with numpy a block costs about 0.05 µs a value.

**Sums** (:class:`RunningSum`): each block's sum s = ``math.fsum`` (correctly rounded) is kept with its
residual r = fsum(block − s) (what the rounding left, itself rounded: off by about 10⁻³² of the sum), and
the parts are folded the same way when they pile up, so the total is the exact sum's correct rounding
but for about 10⁻³² relative — independent of the order and the blocking of the values.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["QuantileSketch", "RunningSum", "RELATIVE_ACCURACY", "EXACT_UP_TO"]

RELATIVE_ACCURACY = 0.01
"""α: a sketched percentile is within 1 % of the exact one."""

EXACT_UP_TO = 100_000
"""Values kept as they are (exact percentiles) before the sketch takes over: 800 kB a metric."""


class QuantileSketch:
    """Percentiles of a stream of non-negative values: exact up to ``exact_up_to`` values, then DDSketch with
    relative accuracy ``relative_accuracy`` (see the module docstring). ``add`` takes an array; NaN is refused."""

    def __init__(self, relative_accuracy: float = RELATIVE_ACCURACY, exact_up_to: int = EXACT_UP_TO):
        if not 0 < relative_accuracy < 1:
            raise ValueError(f"relative accuracy: expected a share in (0, 1), got {relative_accuracy!r}")
        self.alpha = float(relative_accuracy)
        self.gamma = (1 + self.alpha) / (1 - self.alpha)
        self._log_gamma = math.log(self.gamma)
        self.exact_up_to = int(exact_up_to)
        self.count = 0
        self.min = math.inf
        self.max = -math.inf
        self._exact: list[np.ndarray] | None = []      # None once the sketch has taken over
        self._zeros = 0
        self._counts = np.zeros(0, dtype=np.int64)      # counts[j]: bucket key offset + j
        self._offset = 0

    @property
    def exact(self) -> bool:
        """Whether every value is still kept (percentiles exact)."""
        return self._exact is not None

    @property
    def relative_accuracy(self) -> float:
        """0 while exact, else α."""
        return 0.0 if self.exact else self.alpha

    def add(self, values) -> None:
        values = np.asarray(values, dtype=float).ravel()
        if not len(values):
            return
        low, high = float(values.min()), float(values.max())
        if not (low >= 0 and math.isfinite(high)):
            raise ValueError(f"a quantile sketch takes finite values of at least 0, got {low!r} … {high!r}")
        self.count += len(values)
        self.min, self.max = min(self.min, low), max(self.max, high)
        if self._exact is not None:
            if self.count <= self.exact_up_to:
                self._exact.append(values.copy())
                return
            values = np.concatenate(self._exact + [values])
            self._exact = None
        self._bucket(values)

    def _bucket(self, values: np.ndarray) -> None:
        positive = values[values > 0]
        self._zeros += len(values) - len(positive)
        if not len(positive):
            return
        keys = np.ceil(np.log(positive) / self._log_gamma).astype(np.int64)
        low, high = int(keys.min()), int(keys.max())
        if not len(self._counts):
            self._offset = low
            self._counts = np.zeros(high - low + 1, dtype=np.int64)
        elif low < self._offset or high >= self._offset + len(self._counts):
            start, end = min(low, self._offset), max(high + 1, self._offset + len(self._counts))
            grown = np.zeros(end - start, dtype=np.int64)
            grown[self._offset - start:self._offset - start + len(self._counts)] = self._counts
            self._counts, self._offset = grown, start
        self._counts += np.bincount(keys - self._offset, minlength=len(self._counts))

    def _order_statistics(self, ranks: np.ndarray) -> np.ndarray:
        """x̂₍ᵢ₎ for 0-based ranks i: the value of the bucket holding the i-th count, within [min, max]."""
        cumulative = np.cumsum(self._counts)
        above_zero = ranks - self._zeros
        index = np.searchsorted(cumulative, above_zero, side="right")
        keys = self._offset + np.minimum(index, len(self._counts) - 1)
        values = 2 * self.gamma ** keys.astype(float) / (self.gamma + 1)
        values = np.clip(values, self.min, self.max)
        return np.where(above_zero < 0, 0.0, values)

    def percentiles(self, levels) -> list[float]:
        """The values at ``levels`` (percent, 0–100) as ``numpy.percentile`` (linear) gives them; NaN when empty."""
        levels = np.asarray(levels, dtype=float)
        if not self.count:
            return [math.nan] * len(levels)
        if self._exact is not None:
            return [float(v) for v in np.percentile(np.concatenate(self._exact), levels)]
        h = (self.count - 1) * levels / 100
        below = np.floor(h)
        low = self._order_statistics(below.astype(np.int64))
        high = self._order_statistics(np.minimum(below + 1, self.count - 1).astype(np.int64))
        return [float(v) for v in low + (h - below) * (high - low)]


class RunningSum:
    """Σ of the values added, block by block, exact to about 10⁻³² relative (see the module docstring)."""

    def __init__(self):
        self._parts: list[float] = []

    def add(self, values) -> None:
        values = np.asarray(values, dtype=float).ravel()
        if len(values):
            values = values.tolist()
            rounded = math.fsum(values)
            self._parts += [rounded, math.fsum(values + [-rounded])]   # the block's sum, and what rounding left
            if len(self._parts) > 64:
                total = math.fsum(self._parts)
                self._parts = [total, math.fsum(self._parts + [-total])]

    @property
    def value(self) -> float:
        return math.fsum(self._parts)
