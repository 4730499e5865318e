"""The books of a simulation: the requests' state and records, and what each replica did (:class:`ReplicaStats`).

:class:`Ledger` holds every request's state in lists as long as the run (about 460 bytes a request), for a closed
loop and for tests. A simulation that streams keeps a request's state only while it is queued or running:
:class:`StreamLedger` offers the replicas the same columns by the same names — plain
lists, which the scheduler indexes as fast — but indexed by *slot*: a request takes a free slot when it is
dispatched to a replica (the replica knows it by its slot) and gives it back when it finishes, so the
lists are as long as the most requests in the system at once, not the run.

- ``finish_s[slot] = t`` (the scheduler's last word on a request) hands the request to the
  :class:`~botec.simulate.tally.Tally` (buffered, a block at a time) and resets the slot's state to the
  columns' initial values — all but those the scheduler writes before it reads them or leaves at their
  initial value when a request ends (``_LEFT_AS_THEY_START``; a test runs the streamed simulation against
  the whole-array one to hold this);
- a slot reused while the replica's heaps still hold a stale (step, slot) entry of its last request is
  harmless: an entry counts only when the column holds the same step, and then it is the current
  request's own entry (the duplicate is skipped once handled), as for a preempted request's old entries.

The columns are those of a one-request :class:`Ledger`, whatever it holds, with
its initial values: a column added there is mirrored here.

Before a block queues, :func:`screen` applies what the engine does with a request it cannot serve: a prompt
longer than the model's context is refused (vLLM: "The decoder prompt (length P) is longer than the maximum
model length of L"; TensorRT-LLM and SGLang refuse too), an output the context cannot hold is cut where the
request reaches it (vLLM stops a sequence at max_model_len: O' = min(O, max(L − P, 1))), and a request whose
last step would need more KV blocks than the whole cache holds is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from botec.simulate.tally import Tally

__all__ = ["Ledger", "ReplicaStats", "StreamLedger", "screen"]

_WAITING, _PREFILLING, _DECODING, _DONE, _PREFILLED = 0, 1, 2, 3, 4
"""A request's states; _PREFILLED: its prompt computed elsewhere, its KV here (botec.simulate.disaggregated)."""


class Ledger:
    """Per-request state and records, shared by the replicas of a fleet (a request is served by one).

    Records: ``first_token_s`` (the end of the step that sampled its first token), ``finish_s``, ``replica``,
    ``preemptions``; NaN / −1 until set. The rest is the scheduler's working state."""

    def __init__(self, arrival_seconds, prompt_tokens, output_tokens, cached_tokens):
        count = len(arrival_seconds)
        self.arrival = np.asarray(arrival_seconds, dtype=float).tolist()
        self.prompt = np.asarray(prompt_tokens).tolist()
        self.output = np.asarray(output_tokens).tolist()
        self.cached = np.asarray(cached_tokens).tolist()
        self.first_token_s = [math.nan] * count
        self.finish_s = [math.nan] * count
        self.replica = [-1] * count
        self.preemptions = [0] * count
        self.prefill_computed = [0] * count        # prompt tokens computed, recomputation included
        # working state of the scheduler
        self.state = [_WAITING] * count
        self.generated = [0] * count               # tokens generated when it last started decoding (or was evicted)
        self.decode_start = [0] * count            # the replica's decode-step counter then
        self.finish_at = [-1] * count              # the counter after its last step (−1: no live heap entry)
        self.window_at = [-1] * count              # the counter after the step its context reaches the window
        self.phase = [0] * count                   # counter mod 16 of the steps that need a new block
        self.growing = [False] * count             # context below the window: it grows and takes blocks
        self.prefill_left = [0] * count
        self.prefill_position = [0] * count


@dataclass
class ReplicaStats:
    """What a replica did: steps, batch sizes (per step and over time), preemptions, admissions."""

    steps: int = 0
    prefill_steps: int = 0                 # steps carrying prompt tokens
    decode_request_steps: int = 0          # Σ over steps of the decoding requests (Σ batch size)
    busy_seconds: float = 0.0
    decode_batch_seconds: float = 0.0      # ∫ decoding requests dt
    running_seconds: float = 0.0           # ∫ running requests (decoding + prefilling) dt
    max_running: int = 0
    max_decoding: int = 0
    preemptions: int = 0
    prefill_tokens: int = 0                # prompt tokens computed, recomputation included
    first_arrival_s: float = math.nan
    last_admission_s: float = math.nan     # the start of the step that admitted the last request
    last_finish_s: float = math.nan
    speculative_steps: int = 0             # verification steps of a request not capped by its output's end
    speculative_tokens: int = 0            # tokens those steps gained
    idle_state: dict = field(default_factory=dict)   # the books when last idle: all zero (a check for tests)

FLUSH_REQUESTS = 8_192
"""Finished requests handed to the tally at a time."""

_RECORD = 8
"""Figures buffered per finished request (``_Finish``): request, arrival, first token, finish, output, replica,
preemptions, prompt tokens computed — one flat list, read back as rows of eight."""

GROW_SLOTS = 4_096
"""Slots added at a time, once the list has that many."""

_BASE = ("arrival", "prompt", "output", "cached")
_LEFT_AS_THEY_START = ("state", "decode_start", "finish_at", "window_at", "phase", "growing", "prefill_left",
                       "prefill_position", "replica")
"""Columns a slot needs no reset of: written at admission (or dispatch) before any read, or back at their
initial value (−1, False) whenever a request finishes or is evicted (botec.simulate.replica's scheduler)."""


def screen(engine, context_tokens, prompt, output):
    """(served output tokens, accepted, refused for the context, output cut) of a block (see the module
    docstring); ``context_tokens``: the model's context L (None: no limit)."""
    prompt, output = np.asarray(prompt), np.asarray(output)
    if context_tokens:
        over = prompt > context_tokens
        served = np.where(over, output, np.minimum(output, np.maximum(context_tokens - prompt, 1)))
    else:
        over = np.zeros(len(prompt), dtype=bool)
        served = output
    accepted = ~over & (engine.footprint_blocks(prompt, served) <= engine.kv_capacity_blocks)
    return served, accepted, over, served < output


class _Finish:
    """``finish_s[slot] = t``: the request in ``slot`` finished at t; its record is buffered, its slot freed."""

    __slots__ = ("ledger", "done", "columns", "resets", "free")

    def __init__(self, ledger: "StreamLedger"):
        self.ledger, self.done, self.free = ledger, ledger._done, ledger._free
        self.columns = (ledger.request, ledger.arrival, ledger.first_token_s, ledger.output, ledger.replica,
                        ledger.preemptions, ledger.prefill_computed)
        self.resets = ledger._resets

    def __setitem__(self, slot, seconds):
        request, arrival, first, output, replica, preemptions, prefill = self.columns
        self.done.extend((request[slot], arrival[slot], first[slot], seconds, output[slot], replica[slot],
                          preemptions[slot], prefill[slot]))
        for column, initial in self.resets:
            column[slot] = initial
        self.free.append(slot)
        if len(self.done) >= FLUSH_REQUESTS * _RECORD:
            self.ledger.flush()


class StreamLedger:
    """The requests of ``stream`` (a :class:`~botec.simulate.workload.RequestStream`) while they are in the
    system, screened for ``engine`` and a ``context_tokens`` context; finished ones go to ``tally``."""

    def __init__(self, stream, engine, context_tokens, tally: Tally):
        self.stream, self.engine, self.context_tokens, self.tally = stream, engine, context_tokens, tally
        self.request: list[int] = []                # slot -> request number
        self._free: list[int] = []
        self._resets: list[tuple[list, object]] = []
        self._done: list = []                       # finished requests' figures, _RECORD a request, flat
        self.finished_by: dict[int, int] = {}       # replica -> requests finished there
        template = Ledger([0.0], [1], [1], [0])
        self._columns = []
        for name, column in vars(template).items():
            if not isinstance(column, list) or name == "finish_s":
                continue
            setattr(self, name, [])
            self._columns.append((getattr(self, name), column[0]))
            if name not in _BASE and name not in _LEFT_AS_THEY_START:
                self._resets.append((getattr(self, name), column[0]))
        self.finish_s = _Finish(self)

    def __len__(self) -> int:
        return self.stream.count

    @property
    def slots(self) -> int:
        """Slots made so far: the most requests in the system at once."""
        return len(self.request)

    def in_system(self) -> int:
        """Requests holding a slot (0 once every request has finished)."""
        return len(self.request) - len(self._free)

    def blocks(self):
        """(first request, arrival times, accepted, prompt, served output, cached tokens) per block, screened and
        as lists, for the fleet to dispatch (:meth:`dispatch`)."""
        first = 0
        for arrival, prompt, output in self.stream.blocks():
            served, accepted, over, cut = screen(self.engine, self.context_tokens, prompt, output)
            self.tally.screened(first, arrival, prompt, served, accepted, over, cut)
            yield (first, arrival.tolist(), accepted.tolist(), prompt.tolist(), served.tolist(),
                   self.engine.cached_tokens(prompt).tolist())
            first += len(arrival)

    def dispatch(self, request: int, arrival: float, prompt: int, output: int, cached: int) -> int:
        """A slot for ``request``, its figures set: what the replica knows it by."""
        if not self._free:                          # a few more slots (not twice as many: a queue may hold millions)
            grow = min(max(len(self.request), 64), GROW_SLOTS)
            for column, initial in self._columns:
                column.extend([initial] * grow)
            self._free.extend(range(len(self.request) + grow - 1, len(self.request) - 1, -1))
            self.request.extend([-1] * grow)
        slot = self._free.pop()
        self.request[slot] = request
        self.arrival[slot] = arrival
        self.prompt[slot] = prompt
        self.output[slot] = output
        self.cached[slot] = cached
        return slot

    def flush(self) -> None:
        """Hand the finished requests to the tally."""
        if not self._done:
            return
        done = np.fromiter(self._done, dtype=float, count=len(self._done)).reshape(-1, _RECORD)
        self._done.clear()
        ids, replicas = done[:, 0].astype(np.int64), done[:, 5].astype(np.int64)
        for replica, count in enumerate(np.bincount(replicas).tolist()):
            if count:
                self.finished_by[replica] = self.finished_by.get(replica, 0) + count
        self.tally.add_finished(ids, done[:, 1], done[:, 2], done[:, 3], done[:, 4].astype(np.int64), replicas,
                                done[:, 6].astype(np.int64), done[:, 7].astype(np.int64))

    def settle(self, at: float, fleet) -> None:
        """Flush, then settle the tally's window up to the watermark: the least, over the replicas, of the time
        before which each can finish nothing more — ``at`` (the latest arrival dispatched, or one about to be)
        for a replica with nothing outstanding, else its last finish (each replica's clock only moves on). Each
        replica's finish times up to ``at`` are counted, so that its list of them stays short."""
        self.flush()
        watermark, end = math.inf, math.inf
        for replica in fleet:
            replica.outstanding(at)               # counts (and forgets) its finish times up to ``at``
            if replica.assigned == self.finished_by.get(replica.index, 0):
                bound = at
            else:
                last = replica.stats.last_finish_s
                bound = last if last == last else -math.inf
            watermark = min(watermark, bound)
            if replica.assigned:
                admitted = replica.stats.last_admission_s
                end = min(end, admitted if admitted == admitted else -math.inf)
        self.tally.settle(watermark, end if end < math.inf else -math.inf)
