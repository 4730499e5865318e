"""Serving latency and throughput: in-flight batching, step by step, at saturation and under load.

An engine step carries one token of each running request that decodes and a chunk of prompt
tokens; its time comes from the rooflines of :mod:`botec.serving.step` (the function the simulator
calls too), written as per-unit costs in :mod:`botec.serving.step_costs`: seconds per token of GEMMs,
per step of weight reads, per cached token of attention, ... The replica's regimes (:mod:`botec.serving.load`):

- **saturation** (offline): as many requests run as memory, the engine's batch cap and its token
  budget allow; its throughput is the offline figure;
- **under a load**: the decoding requests follow from the arrivals by Little's law; a share of the
  steps carries a prefill chunk; prompts queue for that chunk (M/G/1); TTFT and TPOT at the mean and
  at the percentile the targets name.

Pipeline stages keep p micro-batches in flight (vLLM's virtual engines): a token passes the p stages
in turn. Sources: Orca (Yu et al. 2022) iteration-level scheduling; Sarathi-Serve (Agrawal et al.
2024) chunked prefill; Kleinrock, Queueing Systems vol. 1 (M/G/1); Leviathan et al. 2023
(speculative decoding).
"""

from botec.graph import Formulas, maximum, minimum, where
from botec.serving import instances, load as model, percentiles
from botec.serving.sizing import largest_rate_within
from botec.serving.step import critical_step_tokens

formulas = Formulas(account="serving")

_NORMAL = {0.5: 0.0, 0.9: 1.2815516, 0.95: 1.6448536, 0.99: 2.3263479}   # standard normal quantiles z_q


def _z(q):
    """The standard normal quantile of ``q`` (the percentiles a target may name: 50, 90, 95, 99)."""
    return sum(where(abs(q - level) < 1e-9, z, 0.0) for level, z in _NORMAL.items())


# Every formula that runs the replica model reads these inputs (the fields of botec.serving.load.Replica).
REPLICA = model.REPLICA_FIELDS
READS = REPLICA + instances.INSTANCE_READS
"""What a formula that runs the replica model reads: the replica's fields and its prefill instance's own."""


def _replica(values: dict) -> model.Replica:
    return instances.replica_of(values)


_STEADY_STATES: dict = {}
"""(the replica model's inputs, rate) -> its :func:`botec.serving.load.at_load`, for plain numbers: the formulas at the
fleet's load and both latency limits' idle replica share one solve (a few dozen kept: one estimate's)."""
_KEPT_STATES = 32


def _at(values: dict, rate) -> model.Load:
    """The replica's steady state at ``rate`` (:func:`botec.serving.load.at_load`), solved once per inputs and rate."""
    key = tuple(values.get(name) for name in READS) + (rate,)
    if not all(isinstance(value, (int, float)) or value is None for value in key):
        return model.at_load(_replica(values), rate)   # arrays (a Monte Carlo): not kept
    state = _STEADY_STATES.get(key)
    if state is None:
        if len(_STEADY_STATES) >= _KEPT_STATES:
            _STEADY_STATES.clear()
        state = _STEADY_STATES[key] = model.at_load(_replica(values), rate)
    return state


@formulas.formula(unit="s", meaning="fastest time per output token: one request alone (the TPOT floor)",
                  expression="pipeline_parallel × engine step(1 decoding request, no prefill) / tokens_per_step",
                  source="botec.serving.step.engine_step_seconds", reads=READS)
def time_per_output_token_floor_seconds(**values):
    replica = _replica(values)
    return replica.pipeline_parallel * replica.stage_step(1.0, 0.0) / replica.tokens_per_step


@formulas.formula(unit="s", meaning="fastest time to first token: one prompt on an idle replica",
                  expression="⌈prefill_tokens_per_request / max_batched_tokens⌉ chunks, each an engine step through "
                             "the pipeline_parallel stages, + lone_prompt_excess_seconds (data-parallel attention: "
                             "the prompt's attention on its own group)", reads=READS + ("lone_prompt_excess_seconds",))
def time_to_first_token_floor_seconds(**values):
    return _at(values, 0.0).prefill_seconds + values["lone_prompt_excess_seconds"]


@formulas.formula(unit="s", meaning="time for every request of a saturated replica to take one step",
                  expression="pipeline_parallel × engine step(saturation_batch_size / pipeline_parallel decoding, "
                             "the prompts that replace finished requests)", reads=READS, detail=True)
def saturation_round_seconds(**values):
    return model.saturation(_replica(values))[0]


@formulas.formula(unit="requests/s", meaning="disaggregated: prompts the prefill instances finish per second at "
                                             "saturation",
                  expression="prefill_instances × max_batched_tokens / (prefill_tokens_per_request × engine step(a "
                             "full token budget of prompts))", zero_when="prefill_instances == 0", reads=READS,
                  detail=True)
def prefill_pool_requests_per_s(**values):
    replica = _replica(values)
    return replica.prefill_instances / replica.prefill_pool(0.0)[1]


@formulas.formula(unit="requests/s", meaning="requests the decoding side of a replica completes per second at "
                                             "saturation",
                  expression="saturation_batch_size × tokens_per_step / (output_tokens × saturation_round_seconds)",
                  detail=True)
def decode_requests_per_s_per_replica(saturation_batch_size, tokens_per_step, output_tokens,
                                      saturation_round_seconds):
    return saturation_batch_size * tokens_per_step / (output_tokens * saturation_round_seconds)


@formulas.formula(unit="requests/s", meaning="requests one replica completes per second at saturation (offline)",
                  expression="decode_requests_per_s_per_replica (disaggregated: the smaller of it and "
                             "prefill_pool_requests_per_s)", prose=True)
def offline_requests_per_s_per_replica(decode_requests_per_s_per_replica, prefill_pool_requests_per_s,
                                       prefill_instances):
    return where(prefill_instances > 0, minimum(decode_requests_per_s_per_replica, prefill_pool_requests_per_s),
                 decode_requests_per_s_per_replica)


@formulas.formula(unit="tokens/s", meaning="output tokens per second of one replica at saturation (offline: the "
                                           "figure a max-throughput table reports for a TP group)",
                  expression="offline_requests_per_s_per_replica × output_tokens", detail=True)
def offline_output_tokens_per_s_per_replica(offline_requests_per_s_per_replica, output_tokens):
    return offline_requests_per_s_per_replica * output_tokens


@formulas.formula(unit="tokens/s", meaning="output tokens per second per accelerator at saturation (offline: the "
                                           "figure MLPerf's Offline scenario and max-throughput tables report)",
                  expression="offline_requests_per_s_per_replica × output_tokens / replica_accelerators")
def offline_output_tokens_per_s_per_accelerator(offline_requests_per_s_per_replica, output_tokens,
                                                replica_accelerators):
    return offline_requests_per_s_per_replica * output_tokens / replica_accelerators


@formulas.formula(unit="requests/s", meaning="the largest load per replica whose TTFT meets its target at the stated "
                                             "percentile (within the utilization cap)",
                  expression="the largest load λ ≤ utilization_cap × offline capacity with TTFT_q(λ) ≤ target × "
                             "(1 − latency_margin) (the target itself where an idle replica cannot keep the margin), "
                             "by a bracketed root search",
                  reads=READS + ("offline_requests_per_s_per_replica", "utilization_cap", "latency_percentile",
                                   "time_to_first_token_target_seconds", "latency_margin",
                                   "lone_prompt_excess_seconds"),
                  choice=("ttft_target", "stated"), detail=True,
                  symbols={"λ": "requests/s on one replica", "q": "latency_percentile",
                           "target": "time_to_first_token_target_seconds"})
def ttft_limited_requests_per_s(**values):
    replica, q = _replica(values), values["latency_percentile"]
    excess = values["lone_prompt_excess_seconds"]   # data-parallel attention: the prompt on its own group
    return _largest_rate_within(values, replica, values["time_to_first_token_target_seconds"],
                                lambda load: percentiles.ttft_quantile(load, q) + excess)


def _largest_rate_within(values: dict, replica: model.Replica, target, latency):
    """The largest load per replica (within the utilization cap) whose ``latency`` is at most the latency the fleet is
    sized to: target × (1 − latency_margin), or the target itself where even an idle replica's latency is above that
    (the margin cannot be kept; the findings call the plan marginal)."""
    capacity = values["offline_requests_per_s_per_replica"]
    idle = _at(values, capacity * 1e-9)
    kept = target * (1 - values["latency_margin"])
    sized = where(latency(idle) <= kept, kept, target)
    return largest_rate_within(replica, capacity, values["utilization_cap"], latency, sized, idle=idle)


@formulas.formula(unit="requests/s", meaning="the load per replica the TTFT allows (no target: the utilization cap)",
                  expression="utilization_cap × offline_requests_per_s_per_replica", choice=("ttft_target", "none"),
                  detail=True)
def ttft_limited_requests_per_s(utilization_cap, offline_requests_per_s_per_replica):  # noqa: F811
    return utilization_cap * offline_requests_per_s_per_replica


@formulas.formula(unit="requests/s", meaning="the largest load per replica whose TPOT meets its target at the stated "
                                             "percentile (within the utilization cap)",
                  expression="the largest load λ ≤ utilization_cap × offline capacity with TPOT_q(λ) ≤ target × "
                             "(1 − latency_margin) (the target itself where an idle replica cannot keep the margin), "
                             "by a bracketed root search",
                  reads=READS + ("offline_requests_per_s_per_replica", "utilization_cap", "latency_percentile",
                                   "time_per_output_token_target_seconds", "latency_margin"),
                  choice=("tpot_target", "stated"), detail=True,
                  symbols={"λ": "requests/s on one replica", "q": "latency_percentile",
                           "target": "time_per_output_token_target_seconds"})
def tpot_limited_requests_per_s(**values):
    replica, z = _replica(values), _z(values["latency_percentile"])
    return _largest_rate_within(values, replica, values["time_per_output_token_target_seconds"],
                                lambda load: percentiles.tpot_quantile(replica, load, z))


@formulas.formula(unit="requests/s", meaning="the load per replica the TPOT allows (no target: the utilization cap)",
                  expression="utilization_cap × offline_requests_per_s_per_replica", choice=("tpot_target", "none"),
                  detail=True)
def tpot_limited_requests_per_s(utilization_cap, offline_requests_per_s_per_replica):  # noqa: F811
    return utilization_cap * offline_requests_per_s_per_replica


@formulas.formula(unit="requests/s", meaning="the load one replica carries meeting every target (0: none can be met)",
                  expression="min(ttft_limited_requests_per_s, tpot_limited_requests_per_s)")
def requests_per_s_per_replica(ttft_limited_requests_per_s, tpot_limited_requests_per_s):
    return minimum(ttft_limited_requests_per_s, tpot_limited_requests_per_s)


# --- at the fleet's load ----------------------------------------------------------------------

@formulas.formula(unit="requests/s", meaning="arrivals each replica of the fleet receives",
                  expression="requests_per_s / replicas")
def requests_per_s_on_a_replica(requests_per_s, replicas):
    return requests_per_s / replicas


@formulas.formula(unit="requests", meaning="requests decoding together on a replica at the fleet's load",
                  expression="requests_per_s_on_a_replica × (output_tokens − 1) / tokens_per_step × round time "
                             "(Little's law), at most saturation_batch_size", reads=READS + ("requests_per_s_on_a_replica",))
def decode_batch_size(**values):
    return _at(values, values["requests_per_s_on_a_replica"]).batch


@formulas.formula(unit="s", meaning="mean time per output token at the fleet's load (TPOT)",
                  expression="pipeline_parallel × ((1 − ρ) × step without a prefill chunk + ρ × step with one)"
                             " / tokens_per_step, ρ the share of steps carrying a chunk",
                  reads=READS + ("requests_per_s_on_a_replica",))
def time_per_output_token_seconds(**values):
    return _at(values, values["requests_per_s_on_a_replica"]).tpot_mean


@formulas.formula(unit="s", meaning="time per output token at the targets' percentile, at the fleet's load",
                  expression="mean TPOT + z_q × the spread of a request's steps with and without a chunk over its"
                             " output_tokens / tokens_per_step steps",
                  reads=READS + ("requests_per_s_on_a_replica", "latency_percentile"),
                  symbols={"mean TPOT": "the mean, as time_per_output_token_seconds",
                           "z_q": "the standard normal quantile of latency_percentile"})
def time_per_output_token_percentile_seconds(**values):
    load = _at(values, values["requests_per_s_on_a_replica"])
    return percentiles.tpot_quantile(_replica(values), load, _z(values["latency_percentile"]))


@formulas.formula(unit="s", meaning="mean time to first token at the fleet's load (TTFT): the prompt's wait and "
                                    "its prefill",
                  expression="ρ·S·(1 + c²) / (2(1 − ρ)) + (1 − e^(−B))·t₀/2 + S + o: the M/G/1 wait for the "
                             "prefill chunk (bursty: the M^X/G/1 wait and the rest of the burst), the step in "
                             "progress, S the prompt's chunks through the stages (disaggregated: the prefill "
                             "instance's queue, its prefill and the KV transfer), o the front-end's time",
                  source="Pollaczek–Khinchine (Kleinrock 1975); botec.serving.load.queue_wait",
                  reads=READS + ("requests_per_s_on_a_replica", "lone_prompt_excess_seconds"),
                  symbols={"ρ": "the prompt queue's utilization (requests_per_s_on_a_replica × S)",
                           "S": "a prompt's prefill, its chunks through the pipeline_parallel stages",
                           "c²": "prompt_length_variation", "B": "decode_batch_size",
                           "t₀": "the decode step in progress (B requests, no chunk)",
                           "o": "request_overhead_seconds"})
def time_to_first_token_seconds(**values):   # + the prompt's attention on its own group (data-parallel attention)
    return model.ttft_mean(_at(values, values["requests_per_s_on_a_replica"])) + values["lone_prompt_excess_seconds"]


@formulas.formula(unit="s", meaning="time to first token at the targets' percentile, at the fleet's load",
                  expression="θ·ln(ρ·M / (1 − q)), θ = W̄ / ρ, the quantile of the wait's exponential tail and the "
                             "step in progress together (M their moment factor; their quantiles added when it falls "
                             "inside the step) + the rest of a burst + S",
                  reads=READS + ("requests_per_s_on_a_replica", "latency_percentile", "lone_prompt_excess_seconds"),
                  source="botec.serving.percentiles.ttft_quantile",
                  symbols={"W̄": "the mean wait for the prefill chunk (as in time_to_first_token_seconds)",
                           "ρ": "the prompt queue's utilization", "q": "latency_percentile",
                           "M": "(1 − s) + s·θ·(e^(L/θ) − 1)/L for a step of L found in progress with chance s",
                           "S": "a prompt's prefill through the stages (+ lone_prompt_excess_seconds, "
                                "request_overhead_seconds)"})
def time_to_first_token_percentile_seconds(**values):
    load = _at(values, values["requests_per_s_on_a_replica"])
    return percentiles.ttft_quantile(load, values["latency_percentile"]) + values["lone_prompt_excess_seconds"]


@formulas.formula(unit="fraction", meaning="share of a replica's time spent on prompts at the fleet's load",
                  expression="ρ × (step with a chunk − step without) / mean step (disaggregated: the prefill "
                             "instances' share of the accelerators, n / (1 + n))",
                  reads=READS + ("requests_per_s_on_a_replica",),
                  symbols={"ρ": "the share of steps carrying a prefill chunk", "n": "prefill_instances"})
def prefill_time_share(**values):
    load = _at(values, values["requests_per_s_on_a_replica"])
    instances = values["prefill_instances"]
    colocated = load.busy_share * (load.tpot_high - load.tpot_low) / maximum(load.tpot_mean, 1e-30)
    return where(instances > 0, instances / (1 + instances), colocated)


@formulas.formula(unit="s", meaning="mean latency of a whole request at the fleet's load",
                  expression="time_to_first_token_seconds + (output_tokens − 1) × time_per_output_token_seconds")
def end_to_end_latency_seconds(time_to_first_token_seconds, output_tokens, time_per_output_token_seconds):
    return time_to_first_token_seconds + (output_tokens - 1) * time_per_output_token_seconds


@formulas.formula(unit="tokens/s", meaning="tokens generated per second by one replica at the fleet's load",
                  expression="requests_per_s_on_a_replica × output_tokens")
def decode_tokens_per_s_per_replica(requests_per_s_on_a_replica, output_tokens):
    return requests_per_s_on_a_replica * output_tokens


@formulas.formula(unit="tokens/s", meaning="output tokens per second per accelerator at the fleet's load",
                  expression="decode_tokens_per_s_per_replica / replica_accelerators")
def output_tokens_per_s_per_accelerator(decode_tokens_per_s_per_replica, replica_accelerators):
    return decode_tokens_per_s_per_replica / replica_accelerators


@formulas.formula(unit="requests", meaning="decode tokens per step above which the weight GEMMs turn compute-bound",
                  expression="T* solving gemm_seconds_per_token × T = weight_read_seconds + expert_read_seconds × (1 − "
                             "(1 − expert_pick_probability)^T) (dense: weight_read_seconds / gemm_seconds_per_token)",
                  source="the roofline crossover (Databricks' MBU; the scaling book's B*), the routed experts' reads "
                         "included (formula audit 2, §4 N4)", prose=True)
def critical_batch_size(gemm_seconds_per_token, weight_read_seconds, expert_read_seconds, expert_pick_probability):
    """g·T = w + x·(1 − (1 − k/E)^T): below T* a step's time is the weight read, the experts its tokens touch
    included (:func:`botec.serving.step.critical_step_tokens`)."""
    return critical_step_tokens(gemm_seconds_per_token, weight_read_seconds, expert_read_seconds,
                                expert_pick_probability)
