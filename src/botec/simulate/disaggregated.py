"""Disaggregated serving, simulated: each replica is one decode instance fed by n prefill instances.

Prefill and decode run on separate instances (DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024; NVIDIA
Dynamo and vLLM / SGLang disaggregated serving): prompts are computed on prefill instances, whose KV cache then
crosses to a decode instance that only decodes. The simulation follows the analytic model of
:mod:`botec.serving.load` (its "Disaggregated" paragraph), request by request:

- **routing**: the fleet's balancer (:mod:`botec.simulate.fleet`) picks a replica from the requests each has
  outstanding (sent, not finished); inside it, the k-th request goes to prefill instance k mod n (round robin, as
  vLLM's disaggregated proxy does), which queues it first come first served. Each instance sees λ/n of the
  replica's arrivals, as the analytic model's n prefill queues do (its M/G/1 queue takes them Poisson; round robin
  spaces them more evenly, so the simulated wait is the shorter, the more so the more instances).
- **prefill**: a prefill instance is a :class:`~botec.simulate.replica.Replica` (the same scheduler, nothing
  duplicated) whose requests need one token: its steps carry prompt tokens only, several prompts a step, up to
  ``max_batched_tokens`` per micro-batch (chunked; whole prompts without chunked prefill, as the engine preset
  says), prefix-cache hits excluded, with the same KV-block admission. A step costs p × the engine step on its
  1/p of the tokens (:func:`botec.serving.step.engine_step_seconds`) at the prefill instance's own costs:
  :attr:`botec.serving.load.Replica.prefill_instance` when it has one (``strategy.disaggregation.prefill``, or
  ``simulate(prefill_instance=...)``), else the decode instance's. The step that computes a prompt's last token
  samples its first token.
- **the KV transfer**: X seconds later the KV is on the decode instance: X = ``kv_transfer_seconds`` × P / P̄ for a
  prompt of P tokens (the estimate's X is the mean prompt P̄'s: KV bytes per token × P / the link's bandwidth;
  DistServe §4). The first token reaches the user then: TTFT = queueing W + prefill S + X, as the analytic model
  counts it (:func:`botec.serving.load.at_load`: ``prefill_seconds`` is S + X; the front-end's time per request,
  when the engine preset states one, is added as for a colocated replica).
- **decode**: the decode instance is a :class:`~botec.simulate.replica.Replica` too; the requests arrive there
  with their prompt computed (its state ``_PREFILLED``) in the order their KV lands, and join the decoders at
  the next step, first come first served, when its KV blocks fit and fewer than ``max_batch_size`` run. Its steps
  carry decode tokens only; the block accounting, preemption (a victim is recomputed on the decode instance, as a
  colocated engine would) and speculative decoding are the replica's. TPOT = (finish − first token) / (O − 1)
  includes the wait for the decode step in progress when the KV lands.

What is measured is what :mod:`botec.simulate` measures of any fleet; a replica's statistics are its decode
instance's (batch, admissions, finishes) with every instance's steps and prompt tokens added. Memory stays flat
in the request count: a request holds one slot of the :class:`~botec.simulate.ledger.StreamLedger` from its
dispatch to its last token, the prefill and decode instances read the same slots, and a request between them
waits in a heap of at most the KV transfers in flight.

Left out: the prefill instance holds a prompt's KV blocks until its last chunk, not through the transfer; the
transfers do not contend for the link (each takes X whatever else crosses); a prefill instance of its own layout
keeps the decode instance's KV capacity and batch limit; closed loops (``--concurrency``) are not simulated
disaggregated.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

import numpy as np

from botec.errors import UserError
from botec.serving.step import STEP_INPUTS, StepModel
from botec.simulate.engine import Engine
from botec.simulate.ledger import _PREFILLED, ReplicaStats
from botec.simulate.replica import Replica

__all__ = ["DisaggregatedReplica", "DisaggregatedStats", "prefill_engine", "run_disaggregated",
           "analytic_replica"]


def analytic_replica(result, prefill_instance=None):
    """The estimate's :class:`botec.serving.load.Replica` (:func:`botec.serving.instances.replica_of_quantities`:
    with the contract's own prefill layout's instance, if it states one), its prefill instance replaced by
    ``prefill_instance`` when given."""
    from botec.serving.instances import replica_of_quantities

    replica = replica_of_quantities(result.quantities)
    return replica if prefill_instance is None else dataclasses.replace(replica, prefill_instance=prefill_instance)


def prefill_engine(engine: Engine, prefill_instance=None) -> Engine:
    """The :class:`Engine` of a prefill instance: ``engine`` (the decode instance's) when ``prefill_instance`` is
    None, else with the step costs, pipeline stages, token budget and drafts of ``prefill_instance`` (a
    :class:`botec.serving.load.Replica`)."""
    if prefill_instance is None:
        return engine
    try:
        costs = StepModel(*(float(getattr(prefill_instance, name)) for name in STEP_INPUTS))
        stages, budget = int(prefill_instance.pipeline_parallel), int(prefill_instance.max_batched_tokens)
        drafts, draft_cost = int(prefill_instance.draft_tokens), float(prefill_instance.draft_step_cost)
    except (AttributeError, TypeError, ValueError) as error:
        raise UserError(f"prefill_instance: expected a botec.serving.load.Replica of plain numbers ({error})") from None
    if stages < 1 or budget < 1 or not all(math.isfinite(getattr(costs, name)) and getattr(costs, name) >= 0
                                           for name in STEP_INPUTS):
        raise UserError("prefill_instance: expected finite step costs of at least 0, at least 1 pipeline stage and a "
                        "token budget (max_batched_tokens) of at least 1")
    return dataclasses.replace(engine, step_model=costs, pipeline_parallel=stages, max_batched_tokens=budget,
                               draft_tokens=drafts, draft_step_cost=draft_cost)


@dataclasses.dataclass
class DisaggregatedStats(ReplicaStats):
    """A disaggregated replica's :class:`ReplicaStats`: its decode instance's, with the prefill instances' steps,
    prompt tokens and busy time added (``prefill_instance_steps`` of them on the prefill instances), and its first
    arrival that of the replica."""

    prefill_instance_steps: int = 0


class _Ones:
    """The output column a prefill instance reads: every request needs one token there (its first)."""

    __slots__ = ()

    def __getitem__(self, slot):
        return 1


class _Handoff:
    """A prefill instance's ``finish_s[slot] = t``: the prompt's last chunk ended at t; its KV lands on the decode
    instance at t + X, when its first token counts as out (the request waits in ``pending`` till then)."""

    __slots__ = ("prompt", "first_token_s", "generated", "state", "pending", "seconds_per_token")

    def __init__(self, ledger, pending: list, seconds_per_token: float):
        self.prompt, self.first_token_s = ledger.prompt, ledger.first_token_s
        self.generated, self.state = ledger.generated, ledger.state
        self.pending, self.seconds_per_token = pending, seconds_per_token

    def __setitem__(self, slot, seconds):
        landed = seconds + self.seconds_per_token * self.prompt[slot]
        self.first_token_s[slot] = landed
        self.generated[slot] = 0                  # the decode instance admits its prompt's blocks, then its token
        self.state[slot] = _PREFILLED
        heapq.heappush(self.pending, (landed, slot))


def _view(ledger, **replaced):
    """An object with ``ledger``'s columns (the same lists: a streaming ledger grows them in place) but ``replaced``."""
    view = type("LedgerView", (), {})()
    view.__dict__.update({name: value for name, value in vars(ledger).items()})
    view.__dict__.update(replaced)
    return view


class DisaggregatedReplica:
    """One replica of ``instances`` prefill instances and one decode instance, with the interface the fleet drives
    (:class:`~botec.simulate.replica.Replica`'s ``arrive``, ``advance``, ``outstanding``, ``stats``, ``assigned``,
    ``index``); see the module docstring."""

    def __init__(self, engine: Engine, prefill: Engine, ledger, index: int, rng: np.random.Generator,
                 instances: int, transfer_seconds_per_token: float):
        self.ledger, self.index, self.assigned = ledger, index, 0
        self.first_arrival_s = math.nan
        self.pending: list = []                   # (time the KV lands, slot) of the prompts crossing to decode
        prefill_view = _view(ledger, output=_Ones(),
                             finish_s=_Handoff(ledger, self.pending, transfer_seconds_per_token))
        self.prefills = [Replica(prefill, prefill_view, index, rng) for _ in range(instances)]
        self.prefilling = [0] * instances         # per prefill instance: prompts sent and not yet computed
        self.decode = Replica(engine, _view(ledger, arrival=ledger.first_token_s), index, rng)
        self.finish_times = self.decode.finish_times

    def arrive(self, request: int) -> None:
        """Send ``request`` to the next prefill instance in turn."""
        if not self.assigned:
            self.first_arrival_s = self.ledger.arrival[request]
        turn = self.assigned % len(self.prefills)
        self.prefills[turn].arrive(request)
        self.prefilling[turn] += 1
        self.assigned += 1

    def advance(self, until: float) -> None:
        """Run every prefill step that starts before ``until``, then hand the decode instance each request whose KV
        has landed by ``until`` (a prefill step starting at or after ``until`` lands nothing before it). The decode
        instance runs up to each landing only: its steps beyond are run at the next landing, or when
        :meth:`outstanding` needs its finishes (a decode run cut at every arrival would cost more events, and
        change nothing)."""
        prefilling = self.prefilling
        for k, instance in enumerate(self.prefills):
            if prefilling[k]:                     # an idle prefill instance has nothing to run
                instance.advance(until)
                prefilling[k] -= len(instance.finish_times)
                instance.finish_times.clear()     # the prefill instances' own finishes are not the replica's
        pending, decode = self.pending, self.decode
        while pending and pending[0][0] <= until:
            landed, slot = heapq.heappop(pending)
            decode.advance(landed)
            decode.arrive(slot)
        if until == math.inf:
            decode.advance(until)

    def outstanding(self, at: float) -> int:
        """Requests sent here and not finished by ``at``: in prefill, crossing, or on the decode instance (run up to
        ``at`` first)."""
        self.decode.advance(at)
        return self.decode.outstanding(at) + self.assigned - self.decode.assigned

    @property
    def stats(self) -> DisaggregatedStats:
        decode = self.decode.stats
        out = DisaggregatedStats(**{f.name: getattr(decode, f.name) for f in dataclasses.fields(ReplicaStats)})
        for instance in self.prefills:
            s = instance.stats
            out.steps += s.steps
            out.prefill_instance_steps += s.steps
            out.prefill_steps += s.prefill_steps
            out.prefill_tokens += s.prefill_tokens
            out.busy_seconds += s.busy_seconds
            out.preemptions += s.preemptions
        out.first_arrival_s = self.first_arrival_s
        return out


def run_disaggregated(result, engine: Engine, ledger, replicas: int, balancer: str = "round-robin",
                      seed: int = 0, progress=None, prefill_instance=None) -> list[DisaggregatedReplica]:
    """Serve the requests of ``ledger`` on ``replicas`` disaggregated replicas of the estimate ``result`` (its
    ``prefill_instances`` and ``kv_transfer_seconds``) behind ``balancer`` (:func:`botec.simulate.fleet.run_fleet`,
    each replica a :class:`DisaggregatedReplica`); ``prefill_instance``: see :func:`prefill_engine`."""
    from botec.simulate.fleet import run_fleet

    q = result.quantities
    instances = int(round(float(q["prefill_instances"].value)))
    if instances < 1:
        raise UserError(f"strategy.disaggregation.prefill_instances: expected at least 1, got {instances}")
    per_token = float(q["kv_transfer_seconds"].value) / max(float(q["prompt_tokens"].value), 1.0)
    if not (math.isfinite(per_token) and per_token >= 0):
        raise UserError("strategy.disaggregation.kv_transfer_bandwidth: the KV transfer time is not a finite "
                        f"number of seconds ({float(q['kv_transfer_seconds'].value):g})")
    prefill = prefill_engine(engine, prefill_instance)

    def make(engine_, ledger_, index, rng):
        return DisaggregatedReplica(engine_, prefill, ledger_, index, rng, instances, per_token)

    return run_fleet(engine, ledger, replicas, balancer, seed, None, progress, replica_type=make)
