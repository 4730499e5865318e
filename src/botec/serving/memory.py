"""Serving memory: resident weights, a KV cache that grows with context and concurrency.

Lesson 000: "in autoregressive LLM inference, weights stay resident, but each concurrent request
also needs a growing key-value (KV) cache ... fits the model weights does not mean serves the
target traffic." KV bytes per token (all layers): 2·L·k·d·b for MHA/GQA/MQA; L·(r_kv + d_rope)·b
for multi-head latent attention, whose latent is shared by all heads and so not split by TP
(research note inference-anchors.md §B: Llama-2-7B 524,288 B; Llama-2-70B 327,680 B; Llama-3-8B
131,072 B; DeepSeek-V3 70,272 B in BF16). Weights: the parameters each accelerator holds
(:mod:`botec.formulas.weights`: split over TP, PP and EP), resident at the weight precision, and a
speculative draft's weights and cache beside them (:mod:`botec.serving.speculation`).

Prefix caching: engines keep a cached prefix's blocks once and reference-count them (vLLM's automatic
prefix caching, hashed full blocks; SGLang's RadixAttention; TensorRT-LLM's KV-cache block reuse), so
the requests that share a prefix share its memory. botec reads the contract's hit rate h as one
prefix of h·P tokens every request shares (a system prompt, few-shot examples, a shared document):
the replica holds it once (on every rank that attends, under data-parallel attention), each running
request only the rest of its cache. Prefixes that are not shared (a conversation's own history
returning turn after turn) are held per request: state a lower hit rate for those. The cache is not
modelled as evicting the prefix; a sequence whose context outgrows a sliding window shares nothing.
"""

from botec.graph import Formulas, floor, maximum, minimum, where

formulas = Formulas(account="serving")

formulas.input("kv_elements_per_token_per_layer", unit="1",
               meaning="K and V elements one token adds to one layer's cache (2·k·d, or r_kv + d_rope for MLA)")
formulas.input("kv_bytes_per_element", unit="B",
               meaning="bytes per cached K/V element (2 for BF16, 1 for FP8 or INT8)")
formulas.input("kv_tensor_split", unit="1",
               meaning="ways TP splits each token's KV (min(TP, KV heads); 1 for MLA's shared latent)")
formulas.input("prompt_tokens", unit="tokens", meaning="prompt tokens per request (mean)")
formulas.input("output_tokens", unit="tokens", meaning="generated tokens per request (mean)")
formulas.input("attention_window_tokens", unit="tokens",
               meaning="tokens each layer attends to at most (the sliding window, or the model's context)")
formulas.input("memory_fraction", unit="1",
               meaning="share of memory the serving engine may use (vLLM's gpu_memory_utilization; TensorRT-LLM's "
                       "kv_cache_free_gpu_mem_fraction of the free memory)")
formulas.input("activation_reserve_bytes", unit="B",
               meaning="memory per accelerator kept for activations, CUDA graphs and runtime buffers")
formulas.input("shared_prefix_copies", unit="1", detail=True,
               meaning="copies of a shared prefix's cache one accelerator's share holds: data-parallel attention, "
                       "TP (each rank caches it for its own requests); else 1")
formulas.input("replicated_attention_parameters", unit="parameters",
               meaning="attention weights a data-parallel attention rank holds beyond its TP share: the stage's "
                       "attention × (1 − 1/TP); 0 when attention is tensor-parallel")


@formulas.formula(unit="B", meaning="KV-cache bytes one token adds, all layers",
                  expression="layers × kv_elements_per_token_per_layer × kv_bytes_per_element",
                  source="2·L·k·d·b (MHA/GQA/MQA); L·(r_kv + d_rope)·b (MLA)")
def kv_bytes_per_token(layers, kv_elements_per_token_per_layer, kv_bytes_per_element):
    return layers * kv_elements_per_token_per_layer * kv_bytes_per_element


@formulas.formula(unit="B", meaning="KV-cache bytes one token adds on one accelerator (the fullest stage)",
                  expression="kv_bytes_per_token × pipeline_stage_layers / (layers × kv_tensor_split)")
def kv_bytes_per_token_per_device(kv_bytes_per_token, pipeline_stage_layers, layers, kv_tensor_split):
    """TP splits the KV heads (replicating them when TP exceeds the KV heads); the stages split the layers."""
    return kv_bytes_per_token * pipeline_stage_layers / (layers * kv_tensor_split)


@formulas.formula(unit="tokens", meaning="tokens a request holds in the cache at its longest",
                  expression="min(prompt_tokens + output_tokens, attention_window_tokens)")
def kv_tokens_per_request(prompt_tokens, output_tokens, attention_window_tokens):
    """A sliding window caps what each layer keeps."""
    context = prompt_tokens + output_tokens
    return context - maximum(context - attention_window_tokens, 0)


@formulas.formula(unit="B", meaning="KV cache of one request at its full context, on one accelerator (a "
                                    "speculative draft's included)",
                  expression="cache_bytes_per_token_per_device × kv_tokens_per_request")
def kv_bytes_per_request(cache_bytes_per_token_per_device, kv_tokens_per_request):
    return cache_bytes_per_token_per_device * kv_tokens_per_request


@formulas.formula(unit="B", meaning="weights resident on one accelerator (a speculative draft's included)",
                  expression="(parameters_per_device + replicated_attention_parameters) × weight_bytes_per_parameter"
                             " + draft_weight_bytes")
def weight_memory_bytes(parameters_per_device, replicated_attention_parameters, weight_bytes_per_parameter,
                        draft_weight_bytes):
    """Serving keeps every weight of its share resident: no sharding over replicas. Data-parallel attention
    keeps whole attention weights on every rank (SGLang DP attention; the MLP and experts stay split). A
    speculative draft's weights sit beside the target's (botec.serving.speculation)."""
    return (parameters_per_device + replicated_attention_parameters) * weight_bytes_per_parameter + draft_weight_bytes


@formulas.formula(unit="B", meaning="memory the serving engine may use on one accelerator",
                  expression="device_memory_bytes × memory_fraction")
def usable_memory_bytes(device_memory_bytes, memory_fraction):
    return device_memory_bytes * memory_fraction


@formulas.formula(unit="B", meaning="usable memory the weights leave (negative: they do not fit)",
                  expression="usable_memory_bytes − weight_memory_bytes", detail=True)
def weight_spare_bytes(usable_memory_bytes, weight_memory_bytes):
    return usable_memory_bytes - weight_memory_bytes


@formulas.formula(unit="B", meaning="memory left for the KV cache on one accelerator",
                  expression="usable_memory_bytes − weight_memory_bytes − activation_reserve_bytes",
                  source="vLLM and SGLang: a share of the device's memory, less the weights and the non-KV reserve",
                  choice=("kv_budget", "of_total"))
def kv_budget_bytes(usable_memory_bytes, weight_memory_bytes, activation_reserve_bytes):
    """Negative: the weights alone do not fit."""
    return usable_memory_bytes - weight_memory_bytes - activation_reserve_bytes


@formulas.formula(unit="B", meaning="memory left for the KV cache on one accelerator",
                  expression="memory_fraction × (device_memory_bytes − weight_memory_bytes − activation_reserve_bytes)",
                  source="TensorRT-LLM: kv_cache_free_gpu_mem_fraction of the memory the weights and activations "
                         "leave free", choice=("kv_budget", "of_free"))
def kv_budget_bytes(memory_fraction, device_memory_bytes, weight_memory_bytes,  # noqa: F811
                    activation_reserve_bytes):
    return memory_fraction * (device_memory_bytes - weight_memory_bytes - activation_reserve_bytes)


@formulas.formula(unit="tokens", meaning="mean tokens a running request holds in the cache (paged: blocks as it grows)",
                  expression="min(prompt_tokens + output_tokens / 2, attention_window_tokens)",
                  source="vLLM's PagedAttention allocates blocks as a sequence grows: the running requests hold "
                         "their prompt and half their output on average (formula audit row 33)")
def mean_kv_tokens_per_request(prompt_tokens, output_tokens, attention_window_tokens):
    return minimum(prompt_tokens + output_tokens / 2, attention_window_tokens)


@formulas.formula(unit="tokens", meaning="KV-cache tokens the engine holds for a running request",
                  expression="mean_kv_tokens_per_request",
                  source="vLLM, SGLang: paged blocks allocated as the sequence grows, preempting when they run out",
                  choice=("kv_reservation", "incremental"), detail=True)
def reserved_kv_tokens_per_request(mean_kv_tokens_per_request):
    return mean_kv_tokens_per_request


@formulas.formula(unit="tokens", meaning="KV-cache tokens the engine holds for a running request",
                  expression="kv_tokens_per_request",
                  source="TensorRT-LLM GUARANTEED_NO_EVICT: the whole prompt + output reserved when the request is "
                         "admitted, so it is never evicted",
                  choice=("kv_reservation", "full"), detail=True)
def reserved_kv_tokens_per_request(kv_tokens_per_request):  # noqa: F811
    return kv_tokens_per_request


@formulas.formula(unit="tokens", meaning="prompt tokens every request shares, cached once per replica (the prefix "
                                         "cache's hits read as one shared prefix)",
                  expression="prefix_cache_hit_rate × prompt_tokens (0 when prompt_tokens + output_tokens exceeds "
                             "attention_window_tokens: the window slides past the prefix)",
                  source="vLLM automatic prefix caching, SGLang RadixAttention: shared blocks reference-counted, held "
                         "once (formula audit 2, §4 N12)", prose=True)
def shared_prefix_tokens(prefix_cache_hit_rate, prompt_tokens, output_tokens, attention_window_tokens):
    return where(prompt_tokens + output_tokens > attention_window_tokens, 0.0, prefix_cache_hit_rate * prompt_tokens)


@formulas.formula(unit="requests", meaning="largest number of concurrent requests whose KV cache fits, on average",
                  expression="max(⌊(kv_budget_bytes − cache_bytes_per_token_per_device × shared_prefix_tokens × "
                             "shared_prefix_copies) / (cache_bytes_per_token_per_device × "
                             "(reserved_kv_tokens_per_request − shared_prefix_tokens))⌋, 0)")
def max_concurrent_requests(kv_budget_bytes, cache_bytes_per_token_per_device, shared_prefix_tokens,
                            shared_prefix_copies, reserved_kv_tokens_per_request):
    """The shared prefix S is held once (n copies under data-parallel attention), each request its other R − S
    tokens: ⌊(K − m·S·n) / (m·(R − S))⌋, m the bytes per token (the target's and a draft's)."""
    shared = cache_bytes_per_token_per_device * shared_prefix_tokens * shared_prefix_copies
    own = cache_bytes_per_token_per_device * maximum(reserved_kv_tokens_per_request - shared_prefix_tokens, 1.0)
    return maximum(floor((kv_budget_bytes - shared) / own), 0)


@formulas.formula(unit="B", meaning="KV cache of the running requests at the fleet's load, on one accelerator",
                  expression="cache_bytes_per_token_per_device × ((mean_kv_tokens_per_request − shared_prefix_tokens) "
                             "× decode_batch_size + shared_prefix_tokens × shared_prefix_copies)",
                  detail=True)
def kv_cache_bytes(cache_bytes_per_token_per_device, mean_kv_tokens_per_request, shared_prefix_tokens,
                   decode_batch_size, shared_prefix_copies):
    return cache_bytes_per_token_per_device * ((mean_kv_tokens_per_request - shared_prefix_tokens) * decode_batch_size
                                               + shared_prefix_tokens * shared_prefix_copies)
