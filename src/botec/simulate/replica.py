"""One serving replica, simulated event by event: iteration-level scheduling of in-flight batching, as the policy
of :mod:`botec.simulate.engine` says (admission, chunked prefill, paged KV blocks, prefix caching, decode,
preemption, speculative decoding, disaggregated arrivals, pipeline rounds), run by one generator whose state lives
in its locals (:meth:`Replica._run`, kept whole for speed).

**Speed.** Between events (an admission, a chunk, a request finishing, a context reaching the window, a
preemption) a decode-only batch is constant but for its contexts, each growing by one token a step. With no prefill
tokens every term of the roofline's step time is affine in the decode context (the attention term is max(a·C, c·C) =
C·max(a, c)), so the step time is exactly linear in the step index: t_j = t₀ + j·Δ, with t₀ and Δ from two calls
of the step function. A run of n such steps takes n·t₀ + Δ·n(n − 1)/2 seconds, and the step in progress at a given
time solves a quadratic: no error, no per-step loop. A measured decode-attention table's knee ‖σ·d, κ·C‖_p is
curved in C: such a run's steps are summed one at a time (:func:`botec.simulate.engine.decode_run`, plain floats,
about 0.7 µs a step), a step-by-step scheduler's sum to a few roundings. The KV blocks the run adds are counted by
each request's phase modulo 16 (a request needs a new block every 16 steps), so they too cost O(16), not O(batch).
Speculating, a step's gains are random: those runs go step by step, each request drawn (numpy) — slower, and exact.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from botec.simulate.engine import BLOCK_TOKENS, Engine, attended_tokens, decode_run, steps_to_reach
from botec.simulate.ledger import _DECODING, _DONE, _PREFILLED, _PREFILLING, _WAITING, Ledger, ReplicaStats

__all__ = ["Replica"]


class Replica:
    """One engine replica: ``arrive(request)`` queues a request of the :class:`Ledger`, ``advance(until)``
    runs the steps that start before ``until`` (a step starting at t takes the requests arrived by t).

    The scheduler is one generator (its state in locals, resumed by ``advance``): see the module docstring and
    :mod:`botec.simulate.engine`'s, its policy."""

    def __init__(self, engine: Engine, ledger: Ledger, index: int = 0, rng: np.random.Generator | None = None):
        self.engine = engine
        self.ledger = ledger
        self.index = index
        self.rng = rng if rng is not None else np.random.default_rng(index)
        self.queue: deque = deque()
        self.assigned = 0
        self.finish_times: deque = deque()   # finish times not yet counted by outstanding() (memory: those only)
        self._finished_by = 0                # finishes counted by outstanding()
        self.pause_at_finish = False   # a closed loop (botec.simulate.closed): advance() returns after each step in
        self.stats = ReplicaStats()    # which a request finished, so that its user sends the next one in time
        self._loop = self._run()
        next(self._loop)

    def arrive(self, request: int) -> None:
        """Queue ``request`` (its arrival time no later than the replica's last ``advance``)."""
        if not self.assigned:
            self.stats.first_arrival_s = self.ledger.arrival[request]
        self.ledger.replica[request] = self.index
        self.queue.append(request)
        self.assigned += 1

    def advance(self, until: float) -> None:
        """Run every step that starts before ``until`` (all of them: ``math.inf``)."""
        self._loop.send(until)

    def outstanding(self, at: float) -> int:
        """Requests sent here and not finished by ``at`` (``at`` never decreasing between calls)."""
        times = self.finish_times
        while times and times[0] <= at:
            times.popleft()
            self._finished_by += 1
        return self.assigned - self._finished_by

    # --- the scheduler ------------------------------------------------------------------------

    def _run(self):  # noqa: C901 (one loop, kept whole for speed: its state lives in locals)
        engine, ledger, stats = self.engine, self.ledger, self.stats
        round_seconds = engine.round_function()
        window, capacity = engine.attention_window_tokens, engine.kv_capacity_blocks
        max_batch, budget, stages = engine.max_batch_size, engine.max_batched_tokens, engine.pipeline_parallel
        drafts, acceptance = engine.draft_tokens, engine.draft_acceptance_rate
        verified, speculating, chunked = drafts + 1, drafts > 0, engine.chunked_prefill
        curved = engine.step_model.attention_knee_exponent > 0   # the step not affine in the context: sum its steps
        in_budget = engine.decode_tokens_in_budget   # the decode tokens take their share of the budget (not SGLang's)
        arrival, prompt, output, cached = ledger.arrival, ledger.prompt, ledger.output, ledger.cached
        first_token_s, finish_s, preemptions = ledger.first_token_s, ledger.finish_s, ledger.preemptions
        state, generated, decode_start = ledger.state, ledger.generated, ledger.decode_start
        finish_at, window_at, phase, growing = ledger.finish_at, ledger.window_at, ledger.phase, ledger.growing
        prefill_left, prefill_position, prefill_computed = (ledger.prefill_left, ledger.prefill_position,
                                                            ledger.prefill_computed)
        queue, finish_times, rng = self.queue, self.finish_times, self.rng
        heappush, heappop, inf = heapq.heappush, heapq.heappop, math.inf

        t = 0.0                  # the clock: the end of the last step
        counter = 0              # decode steps taken (the clock of every decoding request's progress)
        decoding = 0             # decoding requests
        context = 0              # Σ min(P + generated, W) over them: the decode context of the next step
        growers = 0              # decoding requests whose context still grows
        used = 0                 # KV blocks held (the shared prefix's included)
        committed = 0            # KV blocks the running requests hold at their last step (used ≤ committed)
        full = engine.full_kv_reservation   # admit against committed, never evict
        prefix = 0               # blocks of the shared prefix held (once, × copies)
        copies = engine.shared_prefix_copies
        phases = [0] * 16        # growers by the counter mod 16 at which they need a new block
        running: dict = {}       # admitted requests in admission order (popitem(): the most recent)
        decoders: dict = {}      # decoding requests
        prefilling: deque = deque()
        finishing: list = []     # heap of (counter after the last step, request)
        windows: list = []       # heap of (counter after the step reaching the window, request)
        joining: list = []       # requests whose prompt is computed, to join the decoders before the next step

        def blocks(tokens):
            return (min(tokens, window) + BLOCK_TOKENS - 1) // BLOCK_TOKENS

        def shared(i):
            """Full blocks of request i's cached prefix: shared, held by the replica once (0 past the window)."""
            return cached[i] // BLOCK_TOKENS if prompt[i] + output[i] <= window else 0

        def admitted(i):
            """Blocks admitting request i takes: its own, and the shared prefix's growth if its prefix is longer."""
            own = shared(i)
            growth = (own - prefix) * copies if own > prefix else 0
            return blocks(prompt[i] + generated[i]) - own + growth

        def final(i):
            """Blocks request i holds of its own at its last step: its footprint less its shared prefix."""
            return blocks(prompt[i] + output[i] - 1) - shared(i)

        def fits(i, held, need=0):
            """Whether admitting request i (``held`` blocks now) keeps the cache within capacity: now and ``need``
            more this step (paged), or at every request's last step (full reservation; a lone request always)."""
            if full:
                return not running or committed + held - blocks(prompt[i] + generated[i]) + blocks(
                    prompt[i] + output[i] - 1) <= capacity
            return used + need + held <= capacity

        until = yield
        while True:
            if not running:
                if not queue:
                    stats.idle_state = {"blocks": used - prefix * copies, "decoding": decoding, "context": context,
                                        "growers": growers, "committed": committed - prefix * copies}
                    until = yield
                    continue
                if t < arrival[queue[0]]:
                    t = arrival[queue[0]]          # idle until the head arrived
            if t >= until:
                until = yield
                continue

            # --- 0. requests whose prompt is computed join the decoders: last step's, then (disaggregated) those
            #        whose KV came from a prefill instance, first come first served, as their blocks fit
            while queue and state[queue[0]] == _PREFILLED and len(running) < max_batch:
                i = queue[0]
                own = shared(i)                        # admitted(i), written out
                held = blocks(prompt[i]) - own + ((own - prefix) * copies if own > prefix else 0)
                if not fits(i, held):
                    break
                prefix = own if own > prefix else prefix
                queue.popleft()
                running[i] = None
                used += held
                committed += held - blocks(prompt[i]) + blocks(prompt[i] + output[i] - 1)
                generated[i] = 1                       # the first token, sampled by the prefill instance
                stats.last_admission_s = t
                if len(running) > stats.max_running:
                    stats.max_running = len(running)
                if output[i] > 1:
                    joining.append(i)
                else:                                  # its one token came with its KV: done
                    used -= blocks(prompt[i]) - own
                    committed -= final(i)
                    del running[i]
                    state[i] = _DONE
                    finish_s[i] = t
                    finish_times.append(t)
            for i in joining:
                made = generated[i]
                x = prompt[i] + made
                state[i] = _DECODING
                decoders[i] = None
                decoding += 1
                decode_start[i] = counter
                context += x if x < window else window
                if speculating:
                    continue
                end = counter + output[i] - made
                finish_at[i] = end
                heappush(finishing, (end, i))
                if x <= window:
                    growing[i] = True
                    growers += 1
                    phase[i] = (counter + 1 - x) & 15
                    phases[phase[i]] += 1
                    reached = counter + window - x + 1
                    if reached < end:
                        window_at[i] = reached
                        heappush(windows, (reached, i))
            joining.clear()

            # --- 1. the decoders' new blocks this step; evict the most recently admitted until they fit
            if speculating:
                need = 0
                for i in decoders:
                    seen = prompt[i] + generated[i] - 1
                    need += blocks(seen + verified) - blocks(seen)
            else:
                need = phases[counter & 15] if growers else 0
            prefill_step = False
            if not chunked and queue and len(running) < max_batch and fits(queue[0], admitted(queue[0])):
                prefill_step = True                # whole prompts first; decodes wait for them
                need = 0
            while used + need > capacity and len(running) > 1 and not full:
                victim = running.popitem()[0]
                committed -= final(victim)
                stats.preemptions += 1
                preemptions[victim] += 1
                if state[victim] == _DECODING:
                    made = generated[victim] + counter - decode_start[victim]
                    x = prompt[victim] + made
                    decoding -= 1
                    del decoders[victim]
                    context -= x if x < window else window
                    if growing[victim]:
                        growers -= 1
                        phases[phase[victim]] -= 1
                        growing[victim] = False
                        if not speculating and phase[victim] == counter & 15:
                            need -= 1
                    if speculating:
                        need -= blocks(x - 1 + verified) - blocks(x - 1)
                    finish_at[victim] = window_at[victim] = -1
                    generated[victim] = made
                    used -= blocks(x - 1) - shared(victim)
                else:
                    prefilling.remove(victim)
                    used -= blocks(prompt[victim] + generated[victim]) - shared(victim)
                state[victim] = _WAITING
                queue.appendleft(victim)

            # --- 2. the prefill this step carries: chunks of the admitted prompts, then new admissions
            prefill_tokens = prefill_context = 0
            chunks = []
            if chunked or prefill_step:
                if chunked:
                    room = budget - -(-decoding * verified // stages) if in_budget else budget
                    room = room if room > 1 else 1
                    left = room * stages
                else:
                    room = left = budget
                for i in prefilling:
                    take = prefill_left[i]
                    take = take if take < room else room
                    take = take if take < left else left
                    chunks.append((i, take))
                    left -= take
                    if not left:
                        break
                while (queue and len(running) < max_batch and (left > 0 or not chunks)
                       and state[queue[0]] != _PREFILLED):
                    i = queue[0]
                    own = shared(i)                # admitted(i), written out: its shared prefix computed once
                    held = (blocks(prompt[i] + generated[i]) - own
                            + ((own - prefix) * copies if own > prefix else 0))
                    if not fits(i, held, need):
                        break
                    before = prefix
                    prefix = own if own > prefix else prefix
                    queue.popleft()
                    running[i] = None
                    state[i] = _PREFILLING
                    used += held
                    reserved = held - blocks(prompt[i] + generated[i]) + blocks(prompt[i] + output[i] - 1)
                    committed += reserved
                    start = cached[i] if cached[i] < prompt[i] else prompt[i] - 1
                    prefill_left[i] = prompt[i] + generated[i] - start
                    prefill_position[i] = start
                    prefilling.append(i)
                    take = prefill_left[i]
                    if chunked:
                        take = take if take < room else room
                        take = take if take < left else left
                    elif chunks and take > left:       # whole prompts only: the next waits for its own step
                        prefilling.pop()
                        running.pop(i)
                        used -= held
                        committed -= reserved
                        prefix = before
                        state[i] = _WAITING
                        queue.appendleft(i)
                        break
                    stats.last_admission_s = t
                    chunks.append((i, take))
                    left -= take
                for i, take in chunks:
                    prefill_tokens += take
                    prefill_context += attended_tokens(prefill_position[i], take, window)
                if len(running) > stats.max_running:
                    stats.max_running = len(running)

            if prefill_tokens:
                # --- 3a. one step with prompt chunks (decoders too, unless prefills run alone)
                stepping = decoding if chunked else 0
                completing = [i for i, take in chunks if take == prefill_left[i]]
                seconds = round_seconds(stepping, context if stepping else 0, prefill_tokens, prefill_context,
                                        stepping + len(completing))
                runs = 1
            elif decoding:
                # --- 3b. decode-only steps until the next event (speculating: one step)
                stepping, completing = decoding, ()
                first = round_seconds(decoding, context, 0, 0, decoding)
                if speculating:
                    runs, seconds = 1, first
                else:
                    slope = (round_seconds(decoding, context + growers, 0, 0, decoding) - first
                             if growers and not curved else 0.0)
                    while finish_at[finishing[0][1]] != finishing[0][0]:
                        heappop(finishing)
                    runs = finishing[0][0] - counter
                    while windows and window_at[windows[0][1]] != windows[0][0]:
                        heappop(windows)
                    if windows and windows[0][0] - counter < runs:
                        runs = windows[0][0] - counter
                    reaching = until - t if until < inf and not queue and len(running) < max_batch else inf
                    if curved and growers:   # a curved step: the run summed step by step, to the step reaching `until`
                        runs, seconds = decode_run(round_seconds, decoding, context, growers, first, runs, reaching)
                    elif reaching < inf:     # an arrival (at `until`) may join after the step that reaches it
                        reach = steps_to_reach(reaching, first, slope)
                        runs = reach if reach < runs else runs
                    if growers and used + growers * ((runs + 15) >> 4) > capacity:
                        taken, grown = 0, 0                   # the cache may fill: stop before the step it would
                        while taken < runs and used + grown + phases[(counter + taken) & 15] <= capacity:
                            grown += phases[(counter + taken) & 15]
                            taken += 1
                        if curved and taken < runs:           # the run summed, and cut shorter
                            seconds = decode_run(round_seconds, decoding, context, growers, first, taken)[1]
                        runs, need = taken, grown
                    elif growers:
                        need = (runs >> 4) * growers      # whole turns of the 16 phases, then the rest's
                        start, rest = counter & 15, runs & 15
                        if start + rest <= 16:
                            need += sum(phases[start:start + rest])
                        else:
                            need += sum(phases[start:]) + sum(phases[:start + rest - 16])
                    if not curved or not growers:
                        seconds = runs * first + slope * runs * (runs - 1) / 2
            else:
                until = yield                          # nothing can run: wait for arrivals
                continue

            # --- 4. the clock and the records
            t += seconds
            stats.steps += runs
            stats.busy_seconds += seconds
            stats.decode_request_steps += stepping * runs
            stats.decode_batch_seconds += stepping * seconds
            stats.running_seconds += len(running) * seconds
            if stepping > stats.max_decoding:
                stats.max_decoding = stepping
            if prefill_tokens:
                stats.prefill_steps += 1
                stats.prefill_tokens += prefill_tokens
                for i, take in chunks:
                    prefill_left[i] -= take
                    prefill_position[i] += take
                    prefill_computed[i] += take

            # --- 5. the decoders advance
            if stepping and speculating:
                gains = 1 + np.minimum(rng.geometric(1 - acceptance, size=stepping) - 1, drafts) \
                    if acceptance < 1 else np.full(stepping, verified)
                counter += 1
                for i, gain in zip(list(decoders), gains.tolist()):
                    made = generated[i]
                    wanted = output[i] - made
                    if wanted >= verified:
                        stats.speculative_steps += 1
                        stats.speculative_tokens += gain
                    gain = gain if gain < wanted else wanted
                    x = prompt[i] + made
                    context += min(x + gain, window) - min(x, window)
                    used += blocks(x - 1 + gain) - blocks(x - 1)
                    generated[i] = made + gain
                    decode_start[i] = counter
                    if made + gain >= output[i]:
                        decoding -= 1
                        del decoders[i]
                        context -= min(x + gain, window)
                        used -= blocks(x - 1 + gain) - shared(i)
                        committed -= final(i)
                        del running[i]
                        state[i] = _DONE
                        finish_s[i] = t
                        finish_times.append(t)
            elif stepping:
                used += need
                counter += runs
                context += growers * (runs - 1)
                while windows and windows[0][0] <= counter:
                    _, i = heappop(windows)
                    if window_at[i] == counter and growing[i]:
                        window_at[i] = -1
                        growers -= 1
                        phases[phase[i]] -= 1
                        growing[i] = False
                context += growers
                while finishing and finishing[0][0] <= counter:
                    end, i = heappop(finishing)
                    if finish_at[i] != end:
                        continue
                    finish_at[i] = window_at[i] = -1
                    x = prompt[i] + output[i]
                    decoding -= 1
                    del decoders[i]
                    if growing[i]:
                        context -= x
                        growers -= 1
                        phases[phase[i]] -= 1
                        growing[i] = False
                    else:
                        context -= window
                    x -= 1                                 # blocks(x − 1) − shared(i), written out
                    held = ((x if x < window else window) + BLOCK_TOKENS - 1) // BLOCK_TOKENS - (
                        cached[i] // BLOCK_TOKENS if prompt[i] + output[i] <= window else 0)
                    used -= held                       # = final(i): a request finishing holds its footprint
                    committed -= held
                    del running[i]
                    state[i] = _DONE
                    finish_s[i] = t
                    finish_times.append(t)

            # --- 6. prompts whose last token this step computed: their first token; they decode from the next step (0.)
            for i in completing:
                prefilling.remove(i)
                made = generated[i] + 1
                generated[i] = made
                if first_token_s[i] != first_token_s[i]:           # NaN: the first time
                    first_token_s[i] = t
                if made >= output[i]:
                    used -= blocks(prompt[i] + made - 1) - shared(i)
                    committed -= final(i)
                    del running[i]
                    state[i] = _DONE
                    finish_s[i] = t
                    finish_times.append(t)
                    continue
                joining.append(i)
            if finish_times:
                stats.last_finish_s = finish_times[-1]
                if finish_times[-1] == t and self.pause_at_finish:
                    until = t                          # back to the caller before the next step
