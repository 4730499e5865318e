"""A replica at saturation and under a load: the analytic model of in-flight batching.

Pure, elementwise functions over a replica's per-unit step costs (:mod:`botec.serving.step`) and its requests,
shared by the estimate's formulas (:mod:`botec.serving.latency`); the discrete-event simulator (:mod:`botec.simulate`)
runs the same steps request by request, and its tests hold the two together. Symbols: p pipeline
stages, B decoding requests, E tokens a request gains per step, P prompt tokens computed (prefix
cache hits excluded), O output tokens, λ arrivals per second on the replica, τ the time for every
running request to take one step (p stage steps), b the token budget of a step.

- Prompts per stage step: n = λ·t̄ (t̄ the mean stage step). A step that carries prompt tokens carries a
  chunk of c = min(room, P·max(1, n)) of them, room = b − B/p·k₁ the budget left beside the decode tokens;
  a share ρ = min(1, n·P/c) of the steps carries one (n < 1 and P ≤ room: ρ = n, a whole prompt in one step;
  long prompts: full chunks, ρ = n·P/room). The mean stage step is the mixture t̄ = (1 − ρ)·t₀ + ρ·t₁,
  t₀ = t(B/p, 0) and t₁ = t(B/p, c): a step with a whole prompt in it is compute-bound while the others are bound
  by the weight read, so the mean of the steps is not the step of the mean (the roofline is convex).
- Steady state at λ: B = λ·((O − 1)/E)·τ (Little's law: the prompt's last step samples the first output token,
  so a request decodes the other O − 1), τ = p·t̄; solved by fixed-point iteration from an empty replica,
  secant-accelerated (it converges below saturation; at and above it B is capped). A decoding request steps with
  itself and the B others it finds: the steps a request sees hold min(B + 1, B_sat) decoding requests.
- Saturation: B_sat = min(max concurrent, max batch, ⌊b / (k₁ + E·P/O)⌋); the prompts replacing the finished
  requests, n = (B_sat/p)·E/O per stage step; capacity λ_sat = B_sat·E/(O·τ_sat).
- Prefill queue: an M/G/1 queue with vacations (Kleinrock vol. 1; the decomposition of Fuhrmann and
  Cooper 1985). Prompts are its customers: one needs ⌈P / room⌉ chunk steps t₁ (S, through the p
  stages), so they keep the engine busy a share ρ_q = λ·⌈P/room⌉·t₁ of the time; between them the engine
  takes decode steps t₀ (the vacations), stepping whenever a request decodes (probability 1 − e^(−B),
  B Poisson-distributed). Wait: Pollaczek–Khinchine W̄ = ρ_q·S·(1 + c²)/(2(1 − ρ_q)) for Poisson arrivals,
  with the arrivals' burstiness in general (:func:`queue_wait`: bursts, dealt out over the fleet's replicas
  by the balancer (:func:`burst_on_a_replica`) and packed into shared steps; evenly spaced arrivals; the gaps a
  round-robin balancer leaves a replica, c_a²/max(1, R/m): :func:`arrival_variation_on_a_replica`); plus
  the decode step in progress, t₀/2 on average. TTFT = W + that + S; its q-quantile is that of the sum of an
  exponential tail (P(W > 0) = π = ρ_q) and the uniform step in progress
  (:func:`botec.serving.percentiles.ttft_quantile`). (A burst's fixed service has a lighter tail than the
  exponential: the quantile errs long for whole bursts on one replica.)
- TPOT: a request's steps carry a chunk with probability ρ: per token μ = p·((1 − ρ)·t₀ + ρ·t₁)/E; its
  q-quantile is μ at the rate the replica receives over the request's decode window, Λ_q = λ·(1 + z_q·√v),
  v = m·c_a²/(λ_f·T) the squared variation of a round-robin replica's share of the fleet's arrivals over
  T = (O − 1)·TPOT_q (:func:`botec.serving.percentiles.tpot_quantile`).

Disaggregated (n prefill instances per decode instance, each with the replica's layout; DistServe, Zhong et
al. 2024; Splitwise, Patel et al. 2024): the decode instance's steps carry decode tokens only (ρ = 0 for
TPOT, B_sat without the prompts' share of the budget); each prefill instance fills its steps with prompts,
b tokens per step t_b, so it serves λ/n prompts at utilization ρ_p = (λ/n)·P·t_b/b, an M/G/1 queue whose
mean service is P·t_b/b; a prompt takes S = ⌈P/b⌉·p·t(min(P, b)) and its KV then crosses to the decode
instance (X seconds). TTFT = W + S + X. Capacity = min(n·b/(P·t_b), the decode instance's B_sat·E/(O·τ)).

Front-end: every TTFT above also holds o, the request's time outside the engine's steps (the HTTP round trip, the
prompt's tokenization, the first token's detokenization: the engine preset's ``request_overhead``), added once as a
constant (``Load.prefill_seconds`` includes it; the front-end is taken as never the bottleneck).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, partial

from botec.graph.elementwise import all_true, ceil, exp, floor, is_scalar, maximum, minimum, where
from botec.serving.step import STEP_INPUTS, engine_step_seconds, scalar_engine_step

__all__ = ["Replica", "REPLICA_FIELDS", "Load", "at_load", "burst_on_a_replica", "arrival_variation_on_a_replica",
           "queue_wait", "ttft_mean", "saturation", "steady_state", "plain"]

ITERATIONS = 60     # at most this many evaluations of the mean stage step per fixed point
CONVERGED = 1e-13   # relative change of the step below which the fixed point has converged (to float precision)


def plain(value):
    """``value`` as a plain float where it is a float of another type (numpy's float64 scalar: slower arithmetic,
    numpy's truth values); anything else (an array, an int) unchanged."""
    return float(value) if isinstance(value, float) and type(value) is not float else value


@dataclass
class Replica:
    """A replica's step costs (seconds per unit, see engine_step_seconds) and its requests' shape."""

    gemm_seconds_per_token: object
    weight_read_seconds: object
    expert_read_seconds: object
    expert_pick_probability: object
    attention_seconds_per_context_token: object
    prefill_attention_seconds_per_context_token: object
    kv_read_seconds_per_context_token: object
    logit_seconds_per_token: object
    communication_seconds_per_token: object
    fixed_seconds_per_step: object
    elementwise_seconds_per_token: object
    pipeline_parallel: object
    tokens_per_step: object           # E
    draft_tokens: object              # k (0: no speculation)
    draft_step_cost: object
    prefill_tokens_per_request: object    # P
    prefill_attention_tokens: object
    mean_kv_tokens_per_request: object    # cached tokens a decoding request reads
    output_tokens: object             # O
    max_batched_tokens: object        # b
    saturation_batch_size: object     # B_sat
    prompt_length_variation: object   # c²
    prefill_instances: object = 0.0   # n: prefill instances per decode instance (0: in-flight batching of both)
    kv_transfer_seconds: object = 0.0  # X: a prompt's KV from its prefill instance to the decode instance
    arrival_variation: object = 1.0   # c_a²: of the gaps between arrival epochs (Poisson 1, evenly spaced 0)
    burst_size: object = 1.0          # m: requests arriving together at each epoch (at the fleet)
    burst_epochs_per_s: object = 0.0  # λ/m: the fleet's burst epochs per second (0: whole bursts reach the replica)
    request_overhead_seconds: object = 0.0  # o: the front-end's time per request (HTTP, tokenization), in the TTFT
    decode_tokens_in_budget: object = 1.0  # d: 1 when the budget b bounds the decode tokens too, 0: prefill only
    gemm_knee_exponent: object = 0.0  # p: the measured GEMM table's knee (0: the roofline's max; engine_step_seconds)
    moe_exchange_seconds_per_token: object = 0.0  # m: the MoE all-to-all's share of r (two-batch overlap hides it)
    two_batch_overlap: object = 0.0   # o: 1 when a step runs as two overlapped micro-batches (engine_step_seconds)
    allreduce_seconds_per_step: object = 0.0   # A: the step's TP all-reduces' latency side (engine_step_seconds)
    allreduce_seconds_per_token: object = 0.0  # R: their bandwidth side per token
    allreduce_knee_exponent: object = 0.0      # q: their knee (0: no table, the α–β sum)
    attention_table_floor_seconds: object = 0.0   # F_a: a measured decode-attention table's floor per step
    attention_table_seconds_per_sequence: object = 0.0   # σ: its cost per decoding sequence
    attention_table_seconds_per_context_token: object = 0.0   # κ: its cost per context token read
    attention_knee_exponent: object = 0.0  # p_a: its knee (0: the roofline's attention; engine_step_seconds)
    prefill_instance: "Replica | None" = None  # disaggregated: a prefill instance's own step costs when its layout
                                               # differs from the decode instance's (None: the same layout)

    def __post_init__(self):
        for name in REPLICA_FIELDS:   # numpy's float64 scalars as plain floats: the same values, at float speed
            setattr(self, name, plain(getattr(self, name)))

    def stage_step(self, decoding, prefill):
        """One stage step with ``decoding`` requests (k + 1 tokens each when speculating) and ``prefill`` tokens,
        plus the draft's k steps at their cost. Verifying, each request's k + 1 queries attend its cache in one
        read: the step's decode context is the requests' contexts once, its queries k + 1 per context read
        (engine_step_seconds's q); the LM head scores all k + 1 positions of each request (the target's
        probabilities at every draft are what acceptance compares; Leviathan et al. 2023, Algorithm 1)."""
        verify = self.draft_tokens + 1
        context = decoding * self.mean_kv_tokens_per_request
        finishing = prefill / maximum(self.prefill_tokens_per_request, 1.0)
        engine_step = self._step if self._scalar_step is None or not is_scalar(decoding, prefill) else self._scalar_step
        step = engine_step(decoding * verify, context, prefill, prefill * self.prefill_attention_tokens,
                           decoding * verify + finishing, verify)   # the LM head at k + 1 positions
        if is_scalar(self.draft_tokens) and self.draft_tokens == 0:
            return step   # no speculation: no draft steps (k·cost·draft = 0)
        draft = engine_step(decoding, context, 0.0, 0.0, decoding)
        return step + self.draft_tokens * self.draft_step_cost * draft

    @cached_property
    def _step(self):
        """engine_step_seconds with this replica's per-unit costs bound (the fields named by STEP_INPUTS)."""
        return partial(engine_step_seconds, **{name: getattr(self, name) for name in STEP_INPUTS})

    @cached_property
    def _scalar_step(self):
        """For a replica of plain numbers, scalar_engine_step with its costs bound: engine_step_seconds's formula, bit
        for bit, in a quarter of its time; None where a field is an array (a Monte Carlo's samples)."""
        if not is_scalar(*(getattr(self, name) for name in REPLICA_FIELDS)):
            return None
        return scalar_engine_step(**{name: getattr(self, name) for name in STEP_INPUTS})

    def room(self, decoding):
        """Prefill tokens a stage step may still carry beside ``decoding`` requests (at least one token): b − d·B·k₁
        (d = 0: the budget bounds the prefill chunk only, SGLang)."""
        return maximum(self.max_batched_tokens - self.decode_tokens_in_budget * decoding * (self.draft_tokens + 1), 1.0)

    @property
    def disaggregated(self):
        return self.prefill_instances > 0

    def prefill_pool(self, rate):
        """Disaggregated: (ρ_p, the mean service P·t_b/b, S) of a prefill instance receiving ``rate`` / n prompts,
        at the prefill instance's own layout (:attr:`prefill_instance`) when it has one."""
        service, alone = self._prefill_service
        busy = minimum(rate / maximum(self.prefill_instances, 1.0) * service, 1.0)
        return busy, service, alone

    @cached_property
    def _prefill_service(self):
        """(P·t_b/b, S): a prefill instance's mean service per prompt and a lone prompt's prefill, independent of
        the rate (see :meth:`prefill_pool`)."""
        pool = self if self.prefill_instance is None else self.prefill_instance
        stages, budget, prompt = pool.pipeline_parallel, pool.max_batched_tokens, pool.prefill_tokens_per_request
        full_step = pool.stage_step(0.0, budget)
        service = prompt * full_step / budget
        alone = ceil(prompt / budget) * stages * pool.stage_step(0.0, minimum(prompt, budget))
        return service, alone


REPLICA_FIELDS = tuple(name for name in Replica.__dataclass_fields__ if name != "prefill_instance")
"""The fields of a :class:`Replica` read from quantities of the same names (its prefill instance of its own layout is
built apart: :func:`botec.serving.instances.replica_of`)."""


@dataclass
class Load:
    rate: object            # λ, requests/s on the replica
    batch: object           # B, decoding requests
    round_seconds: object   # τ: every running request one step further
    busy_share: object      # ρ: the share of steps carrying a prefill chunk
    tpot_mean: object
    tpot_low: object        # t₀ (no chunk), per token
    tpot_high: object       # t₁ (a chunk), per token
    prefill_seconds: object  # S: a prompt's prefill, chunk by chunk through the stages (+ X, disaggregated)
    wait_mean: object       # W̄
    queue_busy_share: object = None  # the prompt queue's utilization (ρ; ρ_p when disaggregated)
    stepping_share: object = 0.0     # chance an arriving prompt finds a step in progress (1 − e^(−B))
    step_in_progress: object = 0.0   # the length of that step (uniformly far through it)
    waiting_share: object = None     # π: the share of prompts that wait in the queue (ρ: a burst finds it busy)
    burst_wait: object = 0.0         # x·S: the wait for the rest of its own burst, packed into the same steps


def _chunks(replica: Replica, micro, prompts_per_step):
    """(ρ, c): the share of stage steps carrying prompt tokens and the tokens such a step carries, with ``micro``
    decoding requests per stage step and ``prompts_per_step`` prompts arriving per stage step."""
    room = replica.room(micro)
    prompt = replica.prefill_tokens_per_request
    chunk = minimum(room, prompt * maximum(prompts_per_step, 1.0))
    busy = minimum(prompts_per_step * prompt / maximum(chunk, 1e-30), 1.0)
    return busy, chunk


def _mean_stage_step(replica: Replica, micro, prompts_per_step):
    """(t̄, ρ, t₀, t₁): the mean stage step, the share carrying a chunk, and the steps without and with one."""
    busy, chunk = _chunks(replica, micro, prompts_per_step)
    without, with_chunk = replica.stage_step(micro, 0.0), replica.stage_step(micro, chunk)
    return (1 - busy) * without + busy * with_chunk, busy, without, with_chunk


def _seen(replica: Replica, batch):
    """The batch a decoding request steps in: itself and the others, min(B + 1, B_sat) (with Poisson arrivals the
    others a request finds are distributed as the time average, B; the inspection paradox). It is what makes
    TPOT at a light load the floor t(1), and what an MoE step's expert reads depend on."""
    return minimum(batch + 1.0, maximum(replica.saturation_batch_size, 1.0))


def _steady_stage_seconds(replica: Replica, rate, stage_seconds):
    """(t̄, B): the steady state's mean stage step and decode batch at ``rate``, the fixed point t = G(t) found from
    ``stage_seconds`` (at or below it: an idle replica's step, or a lower rate's steady step).

    G(t) = t̄(min(B(t) + 1, B_sat)/p, λ·t) (:func:`_mean_stage_step`; λ·t prompts per stage step where they share the
    decode steps), B(t) = min(λ·(O − 1)/E·p·t, B_sat) (Little's law). G is continuous and non-decreasing in t, and
    below saturation a contraction (G' < 1), so the iteration t ← G(t) converges to the fixed point, linearly; the
    secant method on h(t) = G(t) − t reaches it in a few steps (exact where G is linear, as the roofline is
    piecewise): t ← t − h(t)·(t − t')/(h(t) − h(t')) through the last two iterates t', t, where that slope is a
    contraction's, else the plain step G(t) (the first step is one). Stops once a step of G moves t by at most CONVERGED
    relative, returning G(t) and B(t) (as the iteration computes them), after at most ITERATIONS evaluations of G."""
    stages, emitted = replica.pipeline_parallel, replica.tokens_per_step
    colocated = where(replica.disaggregated, 0.0, 1.0)   # the prompts share the decode steps
    per_stage_second = rate * (replica.output_tokens - 1) / emitted * stages   # B = this × t below B_sat

    def iterate(seconds):
        batch = minimum(per_stage_second * seconds, replica.saturation_batch_size)
        return batch, _mean_stage_step(replica, _seen(replica, batch) / stages, colocated * rate * seconds)[0]

    previous = previous_rise = None
    for _ in range(ITERATIONS):
        batch, stepped = iterate(stage_seconds)
        rise = stepped - stage_seconds   # h(t) = G(t) − t
        if all_true(abs(rise) <= CONVERGED * abs(stepped)):
            break
        if previous is None:
            following = stepped
        else:   # the secant of h through the last two iterates, where its slope is that of a contraction (−1 ≤ s < 0)
            run = stage_seconds - previous
            slope = (rise - previous_rise) / where(run != 0, run, 1.0)
            contracting = (run != 0) & (slope < 0)
            following = where(contracting, stage_seconds - rise / where(contracting, slope, -1.0), stepped)
        previous, previous_rise, stage_seconds = stage_seconds, rise, following
    return stepped, batch


def at_load(replica: Replica, rate, near: Load | None = None) -> Load:
    """The steady state of a replica at ``rate`` requests/s (capped at its saturation batch). ``near``: the steady
    state at a nearby lower rate, where the fixed-point iteration starts (:func:`_steady_stage_seconds`): the same
    fixed point, reached in fewer iterations than from an idle replica's step."""
    stages = replica.pipeline_parallel
    start = replica.stage_step(1.0 / stages, 0.0) if near is None else near.round_seconds / stages
    return steady_state(replica, rate, start)


def _decode_at(replica: Replica, rate, start_stage_seconds):
    """(t̄, B, ρ, μ₀, μ₁, μ): the steady state's mean stage step, decode batch and share of steps carrying a chunk,
    and the time per output token without a chunk, with one, and on average, μ = (1 − ρ)·μ₀ + ρ·μ₁ (μᵢ = p·tᵢ/E),
    its fixed point started from ``start_stage_seconds``."""
    stages, emitted = replica.pipeline_parallel, replica.tokens_per_step
    colocated = where(replica.disaggregated, 0.0, 1.0)   # the prompts share the decode steps
    stage_seconds, batch = _steady_stage_seconds(replica, rate, start_stage_seconds)
    stage_seconds, busy, without, with_chunk = _mean_stage_step(replica, _seen(replica, batch) / stages,
                                                                colocated * rate * stage_seconds)
    low, high = stages * without / emitted, stages * with_chunk / emitted
    return stage_seconds, batch, busy, low, high, (1 - busy) * low + busy * high


def steady_state(replica: Replica, rate, start_stage_seconds) -> Load:
    """:func:`at_load`, its fixed point started from ``start_stage_seconds`` (a stage step at or below the steady
    one: an idle replica's, or a lower rate's steady ``round_seconds`` / p)."""
    stages, rate = replica.pipeline_parallel, plain(rate)
    colocated = where(replica.disaggregated, 0.0, 1.0)   # the prompts share the decode steps
    stage_seconds, batch, busy, low, high, mean = _decode_at(replica, rate, start_stage_seconds)
    round_seconds = stages * stage_seconds
    # an arriving prompt finds the time-average batch B (Poisson arrivals see time averages)
    room = replica.room(batch / stages)
    alone = replica.stage_step(batch / stages, minimum(room, replica.prefill_tokens_per_request))
    prefill_seconds = ceil(replica.prefill_tokens_per_request / room) * stages * alone
    stepping = colocated * (1 - exp(-batch))
    in_progress = replica.stage_step(batch / stages, 0.0)
    chunks = ceil(replica.prefill_tokens_per_request / room)
    prompt_busy = minimum(rate * chunks * alone, 1.0)   # the prompts' share of the time (M/G/1: ρ = λ·E[S])
    pool_busy, pool_service, pool_prefill = replica.prefill_pool(rate)
    queue_busy = where(replica.disaggregated, pool_busy, prompt_busy)
    service = where(replica.disaggregated, pool_service, prefill_seconds)
    prefill_seconds = where(replica.disaggregated, pool_prefill + replica.kv_transfer_seconds, prefill_seconds)
    wait, waiting, burst_wait = queue_wait(queue_busy, service, replica.prompt_length_variation,
                                           arrival_variation_on_a_replica(rate, replica.arrival_variation,
                                                                          replica.burst_size,
                                                                          replica.burst_epochs_per_s),
                                           burst_on_a_replica(rate, replica.burst_size, replica.burst_epochs_per_s))
    prefill_seconds = prefill_seconds + replica.request_overhead_seconds   # o: outside the engine, once per request
    return Load(rate, batch, round_seconds, busy, mean, low, high, prefill_seconds, wait, queue_busy, stepping,
                in_progress, waiting, burst_wait)


def burst_on_a_replica(rate, burst, epochs_per_s):
    """a: the mean share of a burst of m that one replica receives at ``rate`` requests/s (its share of the fleet's
    λ): a round-robin balancer (botec.simulate.fleet's default; a least-outstanding one as well) deals a burst out
    over the R = λ/rate replicas, so each receives a = m/R = rate/(λ/m) of it, between 1
    (R ≥ m: a request apiece) and m (one replica); ``epochs_per_s`` λ/m, 0 when bursts reach a replica whole."""
    return where(epochs_per_s > 0, minimum(maximum(rate / maximum(epochs_per_s, 1e-300), 1.0), burst), burst)


def arrival_variation_on_a_replica(rate, variation, burst, epochs_per_s):
    """c_a,r²: the squared coefficient of variation of the gaps between the epochs that reach one replica at ``rate``
    requests/s, behind a round-robin balancer (botec.simulate.fleet's default), from the fleet's c_a² (``variation``)
    of epochs at ``epochs_per_s`` = λ_f/m, m requests each (``burst``).

    Round-robin hands the fleet's requests to the R = λ_f/rate replicas in turn. With R ≤ m every epoch reaches every
    replica (⌊m/R⌋ or ⌈m/R⌉ of its requests: :func:`burst_on_a_replica`), so the replica's epochs are the fleet's,
    c_a,r² = c_a². With R > m a replica takes one request every k = R/m epochs, and a gap is the sum of k of the
    fleet's gaps: for a renewal process of epochs its squared coefficient of variation is c_a²/k (the sum of k
    independent gaps has k times a gap's variance and k² times its squared mean; Poisson arrivals, m = 1, give
    Erlang-R gaps, c² = 1/R), which Kingman's G/G/1 approximation takes (:func:`queue_wait`). So
    c_a,r² = c_a² / max(1, R/m) = c_a² · min(1, rate/(λ_f/m)); ``epochs_per_s`` 0 (no fleet: one replica) keeps c_a².

    The pooled M/G/c queue of the fleet is not the queue the replicas run: a request is bound to its replica when it
    arrives and waits there. Measured on the 70B fleet (tests/test_estimate_matches_simulate.py, 5 replicas at ρ = 0.51,
    Poisson arrivals, 10 seeds × 10,000 requests): P99 TTFT simulated 0.213 s on fixed lengths and 0.392 s on uniform
    ones; this per-replica queue gives 0.239 and 0.406 s, Allen–Cunneen's M/G/c about 0.21 and 0.23 s (the pooled
    queue misses the lengths' variation where each replica queues its own prompts)."""
    thinned = where(epochs_per_s > 0, minimum(rate / maximum(epochs_per_s, 1e-300), 1.0), 1.0)
    return variation * thinned


def queue_wait(busy, service, service_variation, arrival_variation=1.0, burst=1.0):
    """(W̄, π, x·S): the prompt queue's mean wait, the share of prompts that wait in it, and the wait for the rest
    of a request's own burst.

    W̄ = ρ·S·(c_a² + c_s² + x) / (2(1 − ρ)), ρ the queue's utilization, S the mean service, c_s² the
    service's squared coefficient of variation, c_a² the arrival epochs', and x = E[X²]/E[X] − 1 the burst's
    excess, X the requests each epoch brings (mean a = ``burst``; a whole burst of m: X = m, x = m − 1; a burst
    dealt out over replicas: X is ⌊a⌋ or ⌈a⌉, a in between). The burst waits as one customer of service
    B = X·S (the M^X/G/1 queue, Chaudhry and Templeton 1983: λ_b·E[B²]/(2(1 − ρ)) = ρ·S·(c_s² + 1 + x)/(2(1 − ρ))
    for Poisson epochs; Kingman's (1961) G/G/1 approximation for others, c_a² = 0 evenly spaced); then the
    engine packs the burst's prompts into the same steps (chunked prefill fills a step's budget with every
    waiting prompt), so they finish together: a request waits for the others of its burst too, x·S
    (size-biased: a request is more likely in a large burst), a wait nearly fixed for a burst's size, apart from
    the queue's exponential tail. Single Poisson arrivals (c_a² = 1, X = 1) give Pollaczek–Khinchine exactly.
    π = ρ: a burst waits in the queue when it finds the server busy (the PASTA property).
    """
    free = maximum(1 - busy, 1e-9)
    whole = floor(burst)
    part = burst - whole   # X = ⌊a⌋ + 1 with probability a − ⌊a⌋, else ⌊a⌋
    excess = (whole * whole * (1 - part) + (whole + 1) * (whole + 1) * part) / maximum(burst, 1.0) - 1
    wait = busy * service * (arrival_variation + service_variation + excess) / (2 * free)
    return wait, busy, excess * service


def ttft_mean(load: Load):
    """Mean time to first token: the queue's wait, the rest of its burst, half the step in progress when there is
    one, the prefill."""
    return load.wait_mean + load.burst_wait + load.stepping_share * load.step_in_progress / 2 + load.prefill_seconds


def saturation(replica: Replica):
    """(round seconds τ_sat, capacity λ_sat in requests/s) with B_sat requests running; disaggregated, the
    smaller of the decode instance's capacity and the prefill instances' n·b/(P·t_b)."""
    stages, batch = replica.pipeline_parallel, replica.saturation_batch_size
    colocated = where(replica.disaggregated, 0.0, 1.0)
    replacing = colocated * batch / stages * replica.tokens_per_step / replica.output_tokens  # prompts per stage step
    round_seconds = stages * _mean_stage_step(replica, batch / stages, replacing)[0]
    decode = batch * replica.tokens_per_step / (replica.output_tokens * round_seconds)
    _, service, _ = replica.prefill_pool(0.0)
    prompts = replica.prefill_instances / service
    return round_seconds, where(replica.disaggregated, minimum(decode, prompts), decode)


def batch_limit(max_concurrent, max_batch, budget, decode_tokens, prefill_per_decode):
    """B_sat = max(1, min(max concurrent, max batch, ⌊b / (d·k₁ + E·P/O)⌋)) (disaggregated: E·P/O = 0; ``decode_tokens``
    = d·k₁, 0 where the budget bounds prefill only: then no budget term when disaggregated)."""
    per_request = decode_tokens + prefill_per_decode
    by_budget = where(per_request > 0, floor(budget / maximum(per_request, 1e-300)), max_batch)
    return maximum(minimum(minimum(max_concurrent, max_batch), by_budget), 1.0)
