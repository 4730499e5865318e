"""The running aggregates of a simulation: what :class:`botec.simulate.Simulation` reports, kept as the
requests finish, in memory that does not grow with their count.

Requests are numbered in arrival order; the first W = ⌈5 % · n⌉ are the warm-up (n > 1). Finished requests
come in blocks (numpy arrays) and are folded in at once:

- per measured request (finished, number ≥ W): TTFT = first token − arrival + o, end to end = finish −
  arrival + o (o the engine preset's ``request_overhead``: a request is sent o before it reaches the engine),
  TPOT = (finish − first token) / (O − 1) when O > 1; their exact sums (means) and percentiles
  (:class:`~botec.simulate.streaming.QuantileSketch`: exact up to 100,000 values, then within 1 %);
- counts: finished, measured, meeting every stated target (TTFT ≤ its target and, when O > 1, TPOT ≤
  its target), output tokens;
- the measurement window (start, end]: start = the W-th finish time in time order (the first when W =
  0), end = the last admission of the replica that stopped admitting first. Both need the finishes in
  time order, which the replicas do not give (each is simulated ahead of the others up to the next
  arrival it is sent), so finish events wait in ``pending`` until a *watermark* passes them: the caller
  (:meth:`settle`) states a time before which no replica can still finish a request. Settled events are
  taken in time order; those after the start are in the window once the end's running candidate (the
  least of the replicas' last admissions so far, which only grows) reaches them. What waits is the
  events between the watermark and the candidate end: a few steps' worth.

When the window holds fewer than two finishes (or start ≥ end) it falls back to the whole run: from the
first arrival to the last finish, every finished request — as before streaming.

Records: the first ``records`` requests by arrival (100,000 by default) keep their per-request times in
arrays, as ``Simulation.records`` (tests and notebooks use them); later requests keep none.
"""

from __future__ import annotations

import math

import numpy as np

from botec.simulate import RECORDS, WARMUP_SHARE
from botec.simulate.streaming import EXACT_UP_TO, RELATIVE_ACCURACY, QuantileSketch, RunningSum

__all__ = ["Tally"]


class _Metric:
    """One latency's exact sum and quantile sketch."""

    def __init__(self, relative_accuracy: float, exact_up_to: int):
        self.sum = RunningSum()
        self.sketch = QuantileSketch(relative_accuracy, exact_up_to)

    def add(self, values: np.ndarray) -> None:
        self.sum.add(values)
        self.sketch.add(values)

    def summary(self, level: int) -> tuple[float, ...]:
        """(mean, P50, P90, P99, P``level``, relative accuracy of the percentiles); NaN when empty."""
        count = self.sketch.count
        mean = self.sum.value / count if count else math.nan
        return (mean, *self.sketch.percentiles([50, 90, 99, level]), self.sketch.relative_accuracy)


class Tally:
    """Running aggregates of ``count`` requests (see the module docstring)."""

    def __init__(self, count: int, level: int, ttft_target: float | None = None, tpot_target: float | None = None,
                 records: int = RECORDS, relative_accuracy: float = RELATIVE_ACCURACY,
                 exact_up_to: int = EXACT_UP_TO, front_seconds: float = 0.0):
        self.count = int(count)
        self.front_seconds = float(front_seconds)   # o: the front-end's time per request, in every TTFT and e2e
        self.warmup = math.ceil(WARMUP_SHARE * count) if count > 1 else 0
        self.level = level
        self.ttft_target, self.tpot_target = ttft_target, tpot_target
        self.ttft, self.tpot, self.end_to_end = (_Metric(relative_accuracy, exact_up_to) for _ in range(3))
        self.finished = self.measured = self.measured_meeting = self.meeting = 0
        self.output_tokens = 0                  # of the finished requests
        self.prompt_tokens = 0                  # of the accepted requests
        self.refused_over_context = self.refused_over_cache = self.outputs_cut = self.accepted = 0
        self.first_arrival = math.nan
        self.last_finish = -math.inf
        # the window
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._after_start = (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
        self.settled = 0
        self.start: float | None = None
        self.window = [0, 0, 0]                 # finishes, output tokens, meeting the targets in (start, end]
        self._confirmed_to = -math.inf
        # the records
        kept = min(int(records), self.count)
        self.records = {"arrival_s": np.full(kept, math.nan), "first_token_s": np.full(kept, math.nan),
                        "finish_s": np.full(kept, math.nan), "prompt_tokens": np.zeros(kept, dtype=np.int64),
                        "output_tokens": np.zeros(kept, dtype=np.int64), "replica": np.full(kept, -1, dtype=np.int64),
                        "preemptions": np.zeros(kept, dtype=np.int64),
                        "prefill_tokens_computed": np.zeros(kept, dtype=np.int64)}

    # --- what comes in ------------------------------------------------------------------------

    def screened(self, first: int, arrival, prompt, served, accepted, over_context, cut) -> None:
        """A block of requests numbered from ``first``, as screened before they queue: ``served`` output tokens,
        ``accepted``, refused for a prompt over the context (``over_context``), outputs ``cut`` at it."""
        if first == 0 and len(arrival):
            self.first_arrival = float(arrival[0])
        self.accepted += int(np.count_nonzero(accepted))
        self.refused_over_context += int(np.count_nonzero(over_context))
        self.refused_over_cache += int(np.count_nonzero(~accepted & ~over_context))
        self.outputs_cut += int(np.count_nonzero(cut & accepted))
        self.prompt_tokens += int(prompt[accepted].sum())
        kept = max(min(len(arrival), len(self.records["arrival_s"]) - first), 0)
        if kept:
            part = slice(first, first + kept)
            self.records["arrival_s"][part] = arrival[:kept]
            self.records["prompt_tokens"][part] = prompt[:kept]
            self.records["output_tokens"][part] = served[:kept]

    def add_finished(self, ids, arrival, first, finish, output, replica=None, preemptions=None, prefill=None) -> None:
        """A block of finished requests: their numbers, arrival, first-token and finish times, output tokens (and,
        for the records, the replica, preemptions and prompt tokens computed)."""
        if not len(ids):
            return
        ttft, e2e = first - arrival + self.front_seconds, finish - arrival + self.front_seconds   # sent o before
        multi = output > 1
        tpot = (finish - first) / np.maximum(output - 1, 1)
        measured = ids >= self.warmup
        meets = np.ones(len(ids), dtype=bool)
        if self.ttft_target is not None:
            meets &= ttft <= self.ttft_target
        if self.tpot_target is not None:
            meets &= ~multi | (tpot <= self.tpot_target)
        self.ttft.add(ttft[measured])
        self.end_to_end.add(e2e[measured])
        self.tpot.add(tpot[measured & multi])
        self.finished += len(ids)
        self.measured += int(np.count_nonzero(measured))
        self.measured_meeting += int(np.count_nonzero(measured & meets))
        self.meeting += int(np.count_nonzero(meets))
        self.output_tokens += int(output.sum())
        self.last_finish = max(self.last_finish, float(finish.max()))
        self._pending.append((finish, output.astype(np.int64), meets))
        recorded = ids < len(self.records["arrival_s"])
        if recorded.any():
            at = ids[recorded]
            for name, values in (("first_token_s", first), ("finish_s", finish), ("replica", replica),
                                 ("preemptions", preemptions), ("prefill_tokens_computed", prefill)):
                if values is not None:
                    self.records[name][at] = values[recorded]

    # --- the window -----------------------------------------------------------------------------

    def settle(self, watermark: float, end: float) -> None:
        """Take the pending finishes before ``watermark`` (no replica can finish a request before it any more) in
        time order; ``end``: the window end's running candidate (−inf when not known yet)."""
        if self._pending:
            times, outputs, meets = (np.concatenate(column) for column in zip(*self._pending))
            ready = times < watermark
            self._pending = [(times[~ready], outputs[~ready], meets[~ready])] if not ready.all() else []
            order = np.argsort(times[ready], kind="stable")
            times, outputs, meets = times[ready][order], outputs[ready][order], meets[ready][order]
            if self.start is None:
                rank = max(self.warmup, 1)
                if self.settled + len(times) >= rank:
                    self.start = float(times[rank - self.settled - 1])
            self.settled += len(times)
            if self.start is not None:
                after = times > self.start
                self._after_start = tuple(np.concatenate([held, new[after]])
                                          for held, new in zip(self._after_start, (times, outputs, meets)))
        if end == end and end > -math.inf and len(self._after_start[0]):
            if end < self._confirmed_to:
                raise RuntimeError(f"the window's end moved back ({end!r} < {self._confirmed_to!r})")
            self._confirmed_to = end
            times, outputs, meets = self._after_start
            inside = times <= end
            self.window[0] += int(np.count_nonzero(inside))
            self.window[1] += int(outputs[inside].sum())
            self.window[2] += int(np.count_nonzero(meets[inside]))
            self._after_start = (times[~inside], outputs[~inside], meets[~inside])

    def measurement_window(self, end: float) -> tuple[float, float, int, int, int]:
        """(start, end, finishes, output tokens, finishes meeting the targets) of the window, once every request
        is settled (``settle(inf, end)``): as the module docstring says, the whole run when it is too short."""
        start = self.start
        if start is None:
            start = self.last_finish if self.finished else 0.0
        count, tokens, meeting = self.window
        if not (end - start > 0) or count < 2:
            last = self.last_finish if self.finished else 0.0
            return self.first_arrival, last, self.finished, self.output_tokens, self.meeting
        return start, end, count, tokens, meeting
