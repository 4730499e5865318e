"""What an engine step costs on one accelerator of a serving replica's fullest stage, per unit: seconds per token
of GEMMs, per step of weight reads, per sampled token of the LM head, per token of memory-bound ops, the fixed
time of every step; and what a request brings to a step (its prefill tokens, the tokens a decode step gains, the
batch at saturation). The inputs of the serving latency model are declared here too.

These are the rooflines of :mod:`botec.serving.step` (the function the simulator calls) written as per-unit
costs; :mod:`botec.serving.latency` puts them together into a replica at saturation and under load.
"""

from botec.formulas.transformer import memory_bound_elements_per_token
from botec.graph import Formulas, where
from botec.serving import load as model
from botec.serving.experts import MOE_COMBINE_BYTES, MOE_DISPATCH_BYTES
from botec.serving.step import speculative_tokens_per_step

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
