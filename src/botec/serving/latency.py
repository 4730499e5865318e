"""Serving latency and throughput by roofline.

Prefill is compute-bound: its FLOPs, 2·N per prompt token plus the attention scores, at the
replica's peak times a prefill efficiency. A decode step at batch B reads the weights once and
each sequence's KV cache, and computes 2·N FLOPs per sequence (plus attention):

    t_step(B) = max(B · a, w + B · k) + c₀ + B · c₁

with a the compute time per sequence, w the weight read, k one sequence's KV read (bytes over
memory bandwidth × efficiency), c₀ + B·c₁ the tensor-parallel all-reduces (two per layer). The
step is memory-bound below the critical batch w / (a − k) (Databricks' MBU; the scaling book's
B* = FLOPs / bandwidth). Every request in the batch gets one token per step, so TPOT = t_step(B).
Queueing is not modelled here (capacity.py adds a utilization margin for the TTFT target).
"""

from botec.formulas.collectives import all_reduce_seconds
from botec.formulas.transformer import TP_ALL_REDUCES_PER_LAYER_FORWARD
from botec.graph import Formulas, floor, maximum, minimum

formulas = Formulas(account="serving")

formulas.input("prefill_mfu", unit="1",
               meaning="share of peak sustained by prefill (large matrix multiplies)")
formulas.input("decode_mfu", unit="1",
               meaning="share of peak sustained by decode once it is compute-bound")
formulas.input("decode_bandwidth_efficiency", unit="1",
               meaning="share of memory bandwidth decode achieves reading weights and KV cache")
formulas.input("time_to_first_token_target_seconds", unit="s",
               meaning="target time to first token (TTFT)")
formulas.input("time_per_output_token_target_seconds", unit="s",
               meaning="target time per output token (TPOT)")
formulas.input("max_batch_size", unit="requests",
               meaning="cap on concurrent sequences the engine batches (max_num_seqs)")


@formulas.formula(unit="accelerators", meaning="accelerators of one serving replica",
                  expression="tensor_parallel × pipeline_parallel")
def replica_accelerators(tensor_parallel, pipeline_parallel):
    return tensor_parallel * pipeline_parallel


@formulas.formula(unit="FLOP", meaning="prefill work for one prompt",
                  expression="2 × matmul_parameters × prompt_tokens + attention_forward_flops_per_context_token"
                             " × prompt_tokens² × attention_flops_factor",
                  source="forward only: 2 FLOPs per parameter per token; QKᵀ and attention × V over the prompt",
                  prose=True)
def prefill_flops_per_request(matmul_parameters, prompt_tokens, attention_forward_flops_per_context_token,
                              attention_flops_factor):
    attention = attention_forward_flops_per_context_token * prompt_tokens ** 2 * attention_flops_factor
    return 2 * matmul_parameters * prompt_tokens + attention


@formulas.formula(unit="s", meaning="compute time of one prefill on a replica",
                  expression="prefill_flops_per_request / (tensor_parallel × peak_flops_per_s × prefill_mfu)")
def prefill_compute_seconds(prefill_flops_per_request, tensor_parallel, peak_flops_per_s, prefill_mfu):
    """Pipeline stages run one after the other for a single prompt: only TP divides the work."""
    return prefill_flops_per_request / (tensor_parallel * peak_flops_per_s * prefill_mfu)


@formulas.formula(unit="s", meaning="time to read the replica's weights once",
                  expression="weight_memory_bytes × pipeline_parallel / (memory_bandwidth_bytes_per_s"
                             " × decode_bandwidth_efficiency)")
def weight_read_seconds(weight_memory_bytes, pipeline_parallel, memory_bandwidth_bytes_per_s,
                        decode_bandwidth_efficiency):
    """Each stage reads its accelerator's weights; stages run in turn."""
    return weight_memory_bytes * pipeline_parallel / (memory_bandwidth_bytes_per_s * decode_bandwidth_efficiency)


@formulas.formula(unit="s", meaning="tensor-parallel all-reduces of one prefill",
                  expression="2 × layers × all-reduce(prompt_tokens × hidden_size × activation_bytes_per_element"
                             " over tensor_parallel)", zero_when="tensor_parallel == 1", prose=True)
def prefill_communication_seconds(layers, prompt_tokens, hidden_size, activation_bytes_per_element, tensor_parallel,
                                  tp_link_bytes_per_s, tp_link_latency_seconds):
    message = prompt_tokens * hidden_size * activation_bytes_per_element
    return (TP_ALL_REDUCES_PER_LAYER_FORWARD * layers
            * all_reduce_seconds(message, tensor_parallel, tp_link_bytes_per_s, tp_link_latency_seconds))


@formulas.formula(unit="s", meaning="time to first token with no queue (prefill of one prompt)",
                  expression="max(prefill_compute_seconds, weight_read_seconds) + prefill_communication_seconds")
def time_to_first_token_seconds(prefill_compute_seconds, weight_read_seconds, prefill_communication_seconds):
    return maximum(prefill_compute_seconds, weight_read_seconds) + prefill_communication_seconds


@formulas.formula(unit="tokens", meaning="mean tokens in a request's cache while it decodes",
                  expression="min(prompt_tokens + output_tokens / 2, attention_window_tokens)")
def mean_context_tokens(prompt_tokens, output_tokens, attention_window_tokens):
    return minimum(prompt_tokens + output_tokens / 2, attention_window_tokens)


@formulas.formula(unit="FLOP", meaning="decode work for one new token of one sequence",
                  expression="2 × matmul_parameters + attention_forward_flops_per_context_token × mean_context_tokens")
def decode_flops_per_token(matmul_parameters, attention_forward_flops_per_context_token, mean_context_tokens):
    """The new token attends every token of its context: no causal halving."""
    return 2 * matmul_parameters + attention_forward_flops_per_context_token * mean_context_tokens


@formulas.formula(unit="s", meaning="decode compute time per sequence per step (a)",
                  expression="decode_flops_per_token / (tensor_parallel × peak_flops_per_s × decode_mfu)")
def decode_compute_seconds_per_sequence(decode_flops_per_token, tensor_parallel, peak_flops_per_s, decode_mfu):
    return decode_flops_per_token / (tensor_parallel * peak_flops_per_s * decode_mfu)


@formulas.formula(unit="s", meaning="time to read one sequence's KV cache per step (k)",
                  expression="kv_bytes_per_token_per_device × mean_context_tokens × pipeline_parallel"
                             " / (memory_bandwidth_bytes_per_s × decode_bandwidth_efficiency)")
def kv_read_seconds_per_sequence(kv_bytes_per_token_per_device, mean_context_tokens, pipeline_parallel,
                                 memory_bandwidth_bytes_per_s, decode_bandwidth_efficiency):
    return (kv_bytes_per_token_per_device * mean_context_tokens * pipeline_parallel
            / (memory_bandwidth_bytes_per_s * decode_bandwidth_efficiency))


@formulas.formula(unit="s", meaning="latency part of a decode step's TP all-reduces (c₀)",
                  expression="2 × layers × all-reduce(0 B over tensor_parallel)", zero_when="tensor_parallel == 1",
                  prose=True)
def decode_communication_fixed_seconds(layers, tensor_parallel, tp_link_bytes_per_s, tp_link_latency_seconds):
    return TP_ALL_REDUCES_PER_LAYER_FORWARD * layers * all_reduce_seconds(0.0, tensor_parallel, tp_link_bytes_per_s,
                                                                          tp_link_latency_seconds)


@formulas.formula(unit="s", meaning="bandwidth part of a decode step's TP all-reduces per sequence (c₁)",
                  expression="2 × layers × all-reduce(hidden_size × activation_bytes_per_element over tensor_parallel,"
                             " α = 0)", zero_when="tensor_parallel == 1", prose=True)
def decode_communication_seconds_per_sequence(layers, hidden_size, activation_bytes_per_element, tensor_parallel,
                                              tp_link_bytes_per_s):
    return TP_ALL_REDUCES_PER_LAYER_FORWARD * layers * all_reduce_seconds(
        hidden_size * activation_bytes_per_element, tensor_parallel, tp_link_bytes_per_s, 0.0)


@formulas.formula(unit="s", meaning="fastest possible decode step: batch 1 (the TPOT floor)",
                  expression="max(decode_compute_seconds_per_sequence, weight_read_seconds + kv_read_seconds_per_sequence)"
                             " + decode_communication_fixed_seconds + decode_communication_seconds_per_sequence")
def time_per_output_token_floor_seconds(decode_compute_seconds_per_sequence, weight_read_seconds,
                                        kv_read_seconds_per_sequence, decode_communication_fixed_seconds,
                                        decode_communication_seconds_per_sequence):
    return (maximum(decode_compute_seconds_per_sequence, weight_read_seconds + kv_read_seconds_per_sequence)
            + decode_communication_fixed_seconds + decode_communication_seconds_per_sequence)


@formulas.formula(unit="requests", meaning="batch above which decode is compute-bound (0: never)",
                  expression="weight_read_seconds / (decode_compute_seconds_per_sequence − kv_read_seconds_per_sequence)"
                             " if decode_compute_seconds_per_sequence > kv_read_seconds_per_sequence else 0")
def critical_batch_size(weight_read_seconds, decode_compute_seconds_per_sequence, kv_read_seconds_per_sequence):
    """B · a = w + B · k  ⇒  B* = w / (a − k); when reading a sequence's KV costs more than computing on it, never."""
    gap = decode_compute_seconds_per_sequence - kv_read_seconds_per_sequence
    return maximum(weight_read_seconds / maximum(gap, 1e-30), 0) * (gap > 0)


@formulas.formula(unit="requests", meaning="largest batch whose decode step meets the TPOT target",
                  expression="⌊min((T − c₀) / (a + c₁), (T − c₀ − w) / (k + c₁))⌋,"
                             " T = time_per_output_token_target_seconds", prose=True)
def tpot_batch_limit(time_per_output_token_target_seconds, decode_communication_fixed_seconds,
                     decode_communication_seconds_per_sequence, decode_compute_seconds_per_sequence,
                     weight_read_seconds, kv_read_seconds_per_sequence):
    room = time_per_output_token_target_seconds - decode_communication_fixed_seconds
    compute_bound = room / (decode_compute_seconds_per_sequence + decode_communication_seconds_per_sequence)
    memory_bound = (room - weight_read_seconds) / (kv_read_seconds_per_sequence
                                                   + decode_communication_seconds_per_sequence)
    return maximum(floor(minimum(compute_bound, memory_bound)), 0)


@formulas.formula(unit="requests", meaning="sequences decoded together on a replica",
                  expression="max(min(max_concurrent_requests, tpot_batch_limit, max_batch_size), 1)",
                  choice=("tpot_target", "stated"))
def decode_batch_size(max_concurrent_requests, tpot_batch_limit, max_batch_size):
    """The throughput-maximizing batch: as large as memory, the TPOT target and the engine allow."""
    return maximum(minimum(minimum(max_concurrent_requests, tpot_batch_limit), max_batch_size), 1)


@formulas.formula(unit="requests", meaning="sequences decoded together on a replica",
                  expression="max(min(max_concurrent_requests, max_batch_size), 1)", choice=("tpot_target", "none"))
def decode_batch_size(max_concurrent_requests, max_batch_size):  # noqa: F811
    """No TPOT target: as large as memory and the engine allow."""
    return maximum(minimum(max_concurrent_requests, max_batch_size), 1)


@formulas.formula(unit="s", meaning="time per output token at the chosen batch (TPOT)",
                  expression="max(B × a, w + B × k) + c₀ + B × c₁, B = decode_batch_size", prose=True)
def time_per_output_token_seconds(decode_batch_size, decode_compute_seconds_per_sequence, weight_read_seconds,
                                  kv_read_seconds_per_sequence, decode_communication_fixed_seconds,
                                  decode_communication_seconds_per_sequence):
    batch = decode_batch_size
    return (maximum(batch * decode_compute_seconds_per_sequence,
                    weight_read_seconds + batch * kv_read_seconds_per_sequence)
            + decode_communication_fixed_seconds + batch * decode_communication_seconds_per_sequence)


@formulas.formula(unit="s", meaning="latency of a whole request with no queue",
                  expression="time_to_first_token_seconds + output_tokens × time_per_output_token_seconds")
def end_to_end_latency_seconds(time_to_first_token_seconds, output_tokens, time_per_output_token_seconds):
    return time_to_first_token_seconds + output_tokens * time_per_output_token_seconds


@formulas.formula(unit="tokens/s", meaning="tokens generated per second by one replica while decoding",
                  expression="decode_batch_size / time_per_output_token_seconds")
def decode_tokens_per_s_per_replica(decode_batch_size, time_per_output_token_seconds):
    return decode_batch_size / time_per_output_token_seconds


@formulas.formula(unit="requests/s", meaning="requests one replica completes per second",
                  expression="1 / (time_to_first_token_seconds + output_tokens × time_per_output_token_seconds"
                             " / decode_batch_size)")
def requests_per_s_per_replica(time_to_first_token_seconds, output_tokens, time_per_output_token_seconds,
                               decode_batch_size):
    """Each prefill holds the replica alone; decode steps are shared by the batch (continuous batching)."""
    return 1 / (time_to_first_token_seconds + output_tokens * time_per_output_token_seconds / decode_batch_size)


@formulas.formula(unit="fraction", meaning="share of a replica's busy time spent on prefill",
                  expression="time_to_first_token_seconds × requests_per_s_per_replica")
def prefill_time_share(time_to_first_token_seconds, requests_per_s_per_replica):
    return time_to_first_token_seconds * requests_per_s_per_replica


@formulas.formula(unit="tokens/s", meaning="output tokens per second per accelerator at full load",
                  expression="output_tokens × requests_per_s_per_replica / replica_accelerators")
def output_tokens_per_s_per_accelerator(output_tokens, requests_per_s_per_replica, replica_accelerators):
    return output_tokens * requests_per_s_per_replica / replica_accelerators
