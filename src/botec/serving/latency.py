"""Serving latency and throughput: in-flight batching, step by step, at saturation and under load.

An engine step carries one token of each running request that decodes and a chunk of prompt
tokens; its time comes from the rooflines of :mod:`botec.serving.step` (the function the simulator
calls too), written here as per-unit costs: seconds per token of GEMMs, per step of weight reads,
per cached token of attention, ... The replica's regimes (:mod:`botec.serving.load`):

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

from botec.formulas.transformer import memory_bound_elements_per_token
from botec.graph import Formulas, maximum, minimum, where
from botec.serving import instances, load as model
from botec.serving.experts import MOE_COMBINE_BYTES, MOE_DISPATCH_BYTES
from botec.serving.step import critical_step_tokens, speculative_tokens_per_step

formulas = Formulas(account="serving")

formulas.input("time_to_first_token_target_seconds", unit="s", meaning="target time to first token (TTFT)")
formulas.input("time_per_output_token_target_seconds", unit="s", meaning="target time per output token (TPOT)")
formulas.input("latency_percentile", unit="fraction", meaning="the percentile the latency targets hold at (0.9: P90)")
formulas.input("latency_margin", unit="fraction",
               meaning="share of each latency target the fleet keeps free (sized to target × (1 − margin))")
formulas.input("max_batch_size", unit="requests", meaning="cap on running sequences (max_num_seqs)")
formulas.input("max_batched_tokens", unit="tokens", meaning="tokens one engine step may carry (its token budget)")
formulas.input("step_overhead_seconds", unit="s", meaning="engine CPU time per step not hidden behind the GPU")
formulas.input("request_overhead_seconds", unit="s",
               meaning="a request's time outside the engine's steps before its first token reaches the client (HTTP, "
                       "tokenization, the first token's detokenization): added once to its TTFT")
formulas.input("allreduce_latency_seconds", unit="s", meaning="latency of one small tensor-parallel all-reduce")
formulas.input("matmul_efficiency", unit="1", account="compute",
               meaning="share of the dense peak a large GEMM sustains (e_mm; the family's curve)")
formulas.input("memory_bandwidth_efficiency", unit="1", account="compute",
               meaning="share of the memory bandwidth memory-bound ops sustain (e_mem)")
formulas.input("attention_efficiency", unit="1", account="compute",
               meaning="share of the 16-bit peak a fused attention kernel sustains (e_attn)")
formulas.input("kernel_overhead_seconds", unit="s", account="compute",
               meaning="fixed time of every kernel (the engine's, the decode step in CUDA graphs)")
formulas.input("prefix_cache_hit_rate", unit="fraction", meaning="share of prompt tokens found in the prefix cache")
formulas.input("draft_tokens", unit="tokens", meaning="speculative decoding: draft tokens proposed per step (0: off)")
formulas.input("draft_acceptance_rate", unit="fraction", meaning="speculative decoding: chance a draft token is accepted")
formulas.input("prompt_length_variation", unit="1", detail=True,
               meaning="squared coefficient of variation of prompt lengths (0 for fixed lengths)")
formulas.input("arrival_variation", unit="1", detail=True,
               meaning="squared coefficient of variation of the gaps between arrival epochs (c_a²: Poisson 1, evenly "
                       "spaced 0)")
formulas.input("burst_size", unit="requests", detail=True,
               meaning="requests arriving together at each epoch (1 unless arrivals are bursty)")


@formulas.formula(unit="epochs/s", detail=True, meaning="the fleet's burst epochs per second (a balancer deals each "
                  "burst out over the replicas)", expression="requests_per_s / burst_size")
def burst_epochs_per_s(requests_per_s, burst_size):
    return requests_per_s / burst_size


formulas.input("utilization_cap", unit="fraction", meaning="the largest share of a replica's capacity it is loaded to")
formulas.input("prefill_instances", unit="1",
               meaning="disaggregated serving: prefill instances per decode instance (0: prefill and decode share "
                       "every step)")
formulas.input("kv_transfer_bytes_per_s", unit="B/s", detail=True,
               meaning="disaggregated serving: bytes per second one accelerator sends its KV shard at")
formulas.input("data_parallel_attention", unit="1", detail=True,
               meaning="1 when attention runs data-parallel over the TP ranks (each request on one attention group), "
                       "else 0")
formulas.input("attention_tensor_parallel", unit="1", detail=True,
               meaning="t_a: ranks one request's attention heads are split over (TP; data-parallel attention: the "
                       "attention group's, default 1)")
formulas.input("attention_parameters_per_layer", unit="parameters", detail=True,
               meaning="one layer's attention projections (QKV and output; MLA's down- and up-projections)")

KERNELS_PER_LAYER = 9  # QKV, attention, output, two norms, two residual adds, MLP up (with the activation), down
_NORMAL = {0.5: 0.0, 0.9: 1.2815516, 0.95: 1.6448536, 0.99: 2.3263479}   # standard normal quantiles z_q


def _z(q):
    """The standard normal quantile of ``q`` (the percentiles a target may name: 50, 90, 95, 99)."""
    return sum(where(abs(q - level) < 1e-9, z, 0.0) for level, z in _NORMAL.items())


# --- the per-unit costs of a step on one accelerator of the fullest stage -----------------------

@formulas.formula(unit="accelerators", meaning="accelerators of one serving replica (disaggregated: one decode "
                                               "instance and its prefill instances, each at its own size)",
                  expression="instance_accelerators + prefill_instances × (prefill_instance_accelerators if "
                             "prefill_instance_layout = 1 else instance_accelerators)", prose=True)
def replica_accelerators(instance_accelerators, prefill_instance_accelerators, prefill_instances,
                         prefill_instance_layout):
    prefill = where(prefill_instance_layout > 0, prefill_instance_accelerators, instance_accelerators)
    return instance_accelerators + prefill_instances * prefill


@formulas.formula(unit="s", meaning="disaggregated: time to send a prompt's KV cache from its prefill instance to the "
                                    "decode instance (each accelerator its shard, in parallel)",
                  expression="kv_bytes_per_token_per_device × prompt_tokens / kv_transfer_bytes_per_s",
                  zero_when="prefill_instances == 0", source="DistServe (Zhong et al. 2024) §4: the KV transfer",
                  detail=True)
def kv_transfer_seconds(kv_bytes_per_token_per_device, prompt_tokens, kv_transfer_bytes_per_s):
    return kv_bytes_per_token_per_device * prompt_tokens / kv_transfer_bytes_per_s


@formulas.formula(unit="s", meaning="GEMM time per token a step carries (compute-bound side)",
                  expression="2 × (matmul_parameters − lm_head_matmul_parameters) × pipeline_stage_layers"
                             " / (layers × tensor_parallel) / (matmul_efficiency × peak_flops_per_s)", detail=True)
def gemm_seconds_per_token(matmul_parameters, lm_head_matmul_parameters, pipeline_stage_layers, layers,
                           tensor_parallel, matmul_efficiency, peak_flops_per_s):
    flops = 2 * (matmul_parameters - lm_head_matmul_parameters) * pipeline_stage_layers / (layers * tensor_parallel)
    return flops / (matmul_efficiency * peak_flops_per_s)


@formulas.formula(unit="s", meaning="time to read the weights every step needs once (all but the routed experts and "
                                    "the speculative draft's, which its own steps read)",
                  expression="(weight_memory_bytes − expert_weight_bytes − draft_weight_bytes)"
                             " / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s)")
def weight_read_seconds(weight_memory_bytes, expert_weight_bytes, draft_weight_bytes, memory_bandwidth_efficiency,
                        memory_bandwidth_bytes_per_s):
    return ((weight_memory_bytes - expert_weight_bytes - draft_weight_bytes)
            / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s))


@formulas.formula(unit="s", meaning="LM-head time per sampled token (the prompt's last position, each decode token)",
                  expression="2 × lm_head_matmul_parameters / tensor_parallel / (matmul_efficiency"
                             " × peak_flops_per_s)", detail=True)
def logit_seconds_per_token(lm_head_matmul_parameters, tensor_parallel, matmul_efficiency, peak_flops_per_s):
    return 2 * lm_head_matmul_parameters / tensor_parallel / (matmul_efficiency * peak_flops_per_s)


@formulas.formula(unit="s", meaning="data-parallel attention: the time a prompt's prefill takes beyond its balanced "
                                    "share, its attention and attention projections running on its own group of t_a "
                                    "ranks (the others wait at the MoE layer)",
                  expression="pipeline_parallel × P × (t/t_a − 1) × [2·N_attn·L_s / (t·e_mm·peak) + "
                             "prefill_attention_tokens × prefill_attention_seconds_per_context_token + "
                             "(L_s/L)·L_moe·R·h·(b₈ + b₁₆) / (t·B)]; the instance that prefills: the replica, or "
                             "disaggregated, a prefill instance",
                  prose=True, zero_when="data_parallel_attention == 0",
                  source="SGLang DP attention docs (each request's attention, with its QKV and output projections, on "
                         "one DP rank); DeepSeek-V3 report §3.4 (attention DP, experts EP, the MoE all-to-all); DeepEP "
                         "README (dispatch FP8, combine BF16). The step's per-unit costs divide attention by t (the "
                         "ranks balanced: right for the aggregate); one prompt cannot use the other groups, so its "
                         "prefill exceeds the step's by (t/t_a − 1) × its share of those terms. Added on the "
                         "compute-bound side: a prompt's prefill is compute-bound",
                  symbols={"P": "prefill_tokens_per_request", "t": "tensor_parallel",
                           "t_a": "attention_tensor_parallel", "N_attn": "attention_parameters_per_layer",
                           "L_s": "pipeline_stage_layers", "L": "layers", "L_moe": "moe_layers",
                           "R": "expert_destination_ranks", "h": "hidden_size", "B": "ep_link_bytes_per_s",
                           "e_mm": "matmul_efficiency", "peak": "peak_flops_per_s"}, detail=True)
def instance_prompt_excess_seconds(data_parallel_attention, pipeline_parallel, prefill_tokens_per_request,
                               tensor_parallel, attention_tensor_parallel, attention_parameters_per_layer,
                               pipeline_stage_layers, matmul_efficiency, peak_flops_per_s, prefill_attention_tokens,
                               prefill_attention_seconds_per_context_token, layers, moe_layers,
                               expert_destination_ranks, hidden_size, ep_link_bytes_per_s):
    projections = 2 * attention_parameters_per_layer * pipeline_stage_layers / (
        tensor_parallel * matmul_efficiency * peak_flops_per_s)
    attention = prefill_attention_tokens * prefill_attention_seconds_per_context_token
    sends = pipeline_stage_layers / layers * moe_layers * expert_destination_ranks * hidden_size * (
        MOE_DISPATCH_BYTES + MOE_COMBINE_BYTES) / (tensor_parallel * ep_link_bytes_per_s)
    excess = pipeline_parallel * prefill_tokens_per_request * (tensor_parallel / attention_tensor_parallel - 1) * (
        projections + attention + sends)
    return where(data_parallel_attention > 0, excess, 0.0)


@formulas.formula(unit="s", meaning="data-parallel attention: the time a lone prompt's prefill takes beyond its "
                                    "balanced share on the instance that prefills it",
                  expression="prefill_instance_prompt_excess_seconds if prefill_instance_layout = 1 else "
                             "instance_prompt_excess_seconds", prose=True)
def lone_prompt_excess_seconds(instance_prompt_excess_seconds, prefill_instance_prompt_excess_seconds,
                               prefill_instance_layout):
    return where(prefill_instance_layout > 0, prefill_instance_prompt_excess_seconds, instance_prompt_excess_seconds)


@formulas.formula(unit="s", meaning="memory-bound ops per token a step carries: norms, residual adds, the activation "
                                    "function, the MoE token permutation",
                  expression="activation_bytes_per_element × pipeline_stage_layers × ((10 × hidden_size + 4 × "
                             "experts_per_token × hidden_size × moe_layers / layers) × s + activation_function_elements "
                             "/ tensor_parallel) / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s), s = "
                             "attention_tensor_parallel / tensor_parallel under data-parallel attention (a token's norms, "
                             "residuals and permutation run on its own group's ranks only), else 1",
                  source="the memory-bound ops of the training op-level model (botec.training.ops), forward only; "
                         "data-parallel attention spreads the tokens over the groups (formula audit 2, §4 N5)",
                  prose=True, detail=True)
def elementwise_seconds_per_token(activation_bytes_per_element, pipeline_stage_layers, hidden_size,
                                  activation_function_elements, tensor_parallel, experts_per_token, moe_layers, layers,
                                  memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s, data_parallel_attention,
                                  attention_tensor_parallel):
    spread = where(data_parallel_attention > 0, attention_tensor_parallel / tensor_parallel, 1.0)
    permutation = 4 * experts_per_token * hidden_size * moe_layers / layers
    elements = memory_bound_elements_per_token(hidden_size, activation_function_elements, tensor_parallel,
                                               experts_per_token, moe_layers, layers, norm_share=spread)
    elements = elements - permutation * (1 - spread)
    return (activation_bytes_per_element * pipeline_stage_layers * elements
            / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s))


@formulas.formula(unit="s", meaning="fixed time of every step: kernels, the engine's CPU share, all-reduce latencies",
                  expression="(9 × pipeline_stage_layers + 2) × kernel_overhead_seconds + step_overhead_seconds"
                             " + (2 × pipeline_stage_layers × allreduce_latency_seconds if tensor_parallel > 1 else 0)",
                  prose=True)
def fixed_seconds_per_step(pipeline_stage_layers, kernel_overhead_seconds, step_overhead_seconds,
                           allreduce_latency_seconds, tensor_parallel):
    kernels = (KERNELS_PER_LAYER * pipeline_stage_layers + 2) * kernel_overhead_seconds
    all_reduces = where(tensor_parallel > 1, 2 * pipeline_stage_layers * allreduce_latency_seconds, 0.0)
    return kernels + step_overhead_seconds + all_reduces


# --- requests ---------------------------------------------------------------------------------

@formulas.formula(unit="tokens", meaning="prompt tokens a request's prefill computes (those not in the prefix cache)",
                  expression="prompt_tokens × (1 − prefix_cache_hit_rate)")
def prefill_tokens_per_request(prompt_tokens, prefix_cache_hit_rate):
    return prompt_tokens * (1 - prefix_cache_hit_rate)


@formulas.formula(unit="tokens", meaning="mean tokens a prefill token attends (the cached prefix and the causal "
                                         "part of its own prompt)",
                  expression="prompt_tokens × prefix_cache_hit_rate + prefill_tokens_per_request / 2", detail=True)
def prefill_attention_tokens(prompt_tokens, prefix_cache_hit_rate, prefill_tokens_per_request):
    return prompt_tokens * prefix_cache_hit_rate + prefill_tokens_per_request / 2


@formulas.formula(unit="tokens", meaning="tokens a decoding request gains per step (E; 1 without speculation)",
                  expression="(1 − α^(k+1)) / (1 − α), k = draft_tokens, α = draft_acceptance_rate",
                  source="Leviathan et al. 2023, eq. 1", prose=True)
def tokens_per_step(draft_tokens, draft_acceptance_rate):
    return speculative_tokens_per_step(draft_tokens, draft_acceptance_rate)


@formulas.formula(unit="requests", meaning="requests a replica runs at saturation",
                  expression="max(1, min(max_concurrent_requests, max_batch_size, ⌊max_batched_tokens / (draft_tokens"
                             " + 1 + tokens_per_step × prefill_tokens_per_request / output_tokens)⌋))",
                  source="a step carries each running request's decode tokens and the prompts replacing those that "
                         "finish (disaggregated: decode tokens only)", prose=True)
def saturation_batch_size(max_concurrent_requests, max_batch_size, max_batched_tokens, draft_tokens, tokens_per_step,
                          prefill_tokens_per_request, output_tokens, prefill_instances):
    colocated = where(prefill_instances > 0, 0.0, 1.0)
    return model.batch_limit(max_concurrent_requests, max_batch_size, max_batched_tokens, draft_tokens + 1,
                             colocated * tokens_per_step * prefill_tokens_per_request / output_tokens)


# Every formula that runs the replica model reads these inputs (the fields of botec.serving.load.Replica).
REPLICA = model.REPLICA_FIELDS
READS = REPLICA + instances.INSTANCE_READS
"""What a formula that runs the replica model reads: the replica's fields and its prefill instance's own."""


def _replica(values: dict) -> model.Replica:
    return instances.replica_of(values)


def _at(values: dict, rate) -> model.Load:
    return model.at_load(_replica(values), rate)


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


@formulas.formula(unit="tokens/s", meaning="output tokens per second per accelerator at saturation (offline: the "
                                           "figure MLPerf's Offline scenario and max-throughput tables report)",
                  expression="offline_requests_per_s_per_replica × output_tokens / replica_accelerators")
def offline_output_tokens_per_s_per_accelerator(offline_requests_per_s_per_replica, output_tokens,
                                                replica_accelerators):
    return offline_requests_per_s_per_replica * output_tokens / replica_accelerators


@formulas.formula(unit="requests/s", meaning="the largest load per replica whose TTFT meets its target at the stated "
                                             "percentile (within the utilization cap)",
                  expression="bisection on the load λ ≤ utilization_cap × offline capacity: TTFT_q(λ) ≤ target × "
                             "(1 − latency_margin) (the target itself where an idle replica cannot keep the margin)",
                  reads=READS + ("offline_requests_per_s_per_replica", "utilization_cap", "latency_percentile",
                                   "time_to_first_token_target_seconds", "latency_margin",
                                   "lone_prompt_excess_seconds"),
                  choice=("ttft_target", "stated"), detail=True,
                  symbols={"λ": "requests/s on one replica", "q": "latency_percentile",
                           "target": "time_to_first_token_target_seconds"})
def ttft_limited_requests_per_s(**values):
    replica, q = _replica(values), values["latency_percentile"]
    excess = values["lone_prompt_excess_seconds"]   # data-parallel attention: the prompt on its own group
    target = _sizing_target(values, replica, values["time_to_first_token_target_seconds"],
                            lambda load: model.ttft_quantile(load, q) + excess)
    return model.largest_rate_within(replica, values["offline_requests_per_s_per_replica"], values["utilization_cap"],
                                     lambda load: model.ttft_quantile(load, q) + excess <= target)


def _sizing_target(values: dict, replica: model.Replica, target, latency):
    """The latency the fleet is sized to: target × (1 − latency_margin), or the target itself where even an idle
    replica's latency is above that (the margin cannot be kept; the findings call the plan marginal)."""
    kept = target * (1 - values["latency_margin"])
    idle = latency(model.at_load(replica, values["offline_requests_per_s_per_replica"] * 1e-9))
    return where(idle <= kept, kept, target)


@formulas.formula(unit="requests/s", meaning="the load per replica the TTFT allows (no target: the utilization cap)",
                  expression="utilization_cap × offline_requests_per_s_per_replica", choice=("ttft_target", "none"),
                  detail=True)
def ttft_limited_requests_per_s(utilization_cap, offline_requests_per_s_per_replica):  # noqa: F811
    return utilization_cap * offline_requests_per_s_per_replica


@formulas.formula(unit="requests/s", meaning="the largest load per replica whose TPOT meets its target at the stated "
                                             "percentile (within the utilization cap)",
                  expression="bisection on the load λ ≤ utilization_cap × offline capacity: TPOT_q(λ) ≤ target × "
                             "(1 − latency_margin) (the target itself where an idle replica cannot keep the margin)",
                  reads=READS + ("offline_requests_per_s_per_replica", "utilization_cap", "latency_percentile",
                                   "time_per_output_token_target_seconds", "latency_margin"),
                  choice=("tpot_target", "stated"), detail=True,
                  symbols={"λ": "requests/s on one replica", "q": "latency_percentile",
                           "target": "time_per_output_token_target_seconds"})
def tpot_limited_requests_per_s(**values):
    replica, z = _replica(values), _z(values["latency_percentile"])
    target = _sizing_target(values, replica, values["time_per_output_token_target_seconds"],
                            lambda load: model.tpot_quantile(replica, load, z))
    return model.largest_rate_within(replica, values["offline_requests_per_s_per_replica"], values["utilization_cap"],
                                     lambda load: model.tpot_quantile(replica, load, z) <= target)


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
    replica = _replica(values)
    load = model.at_load(replica, values["requests_per_s_on_a_replica"])
    return model.tpot_quantile(replica, load, _z(values["latency_percentile"]))


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
                  source="botec.serving.load.ttft_quantile",
                  symbols={"W̄": "the mean wait for the prefill chunk (as in time_to_first_token_seconds)",
                           "ρ": "the prompt queue's utilization", "q": "latency_percentile",
                           "M": "(1 − s) + s·θ·(e^(L/θ) − 1)/L for a step of L found in progress with chance s",
                           "S": "a prompt's prefill through the stages (+ lone_prompt_excess_seconds, "
                                "request_overhead_seconds)"})
def time_to_first_token_percentile_seconds(**values):
    load = _at(values, values["requests_per_s_on_a_replica"])
    return model.ttft_quantile(load, values["latency_percentile"]) + values["lone_prompt_excess_seconds"]


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
