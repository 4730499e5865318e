"""Attention's per-unit costs in an engine step: compute per attended token (decode and prefill apart) and the
KV read per cached token, on one accelerator of the fullest stage.

A query attends each token of its context with a multiply-add per element of the query-key product and
of the value sum: a·(d_qk + d_v) per layer. Multi-head latent attention (DeepSeek-V2/V3) runs in two
forms: decode absorbs the up-projections into the query and the output and attends in the latent,
a·(2·r_kv + d_rope) per token (FlashMLA; vLLM and SGLang's decode kernels); prefill decompresses the
latent to per-head keys and values and attends in the MHA form, a·(d_qk + d_v) (vLLM's and SGLang's MLA
prefill paths), 320 against 1,088 per head for DeepSeek-V3 (formula audit 2, §4 N6). The KV read is the
cache bytes a token holds on the device through the bandwidth (:mod:`botec.serving.step` reads it once
per sequence per step).
"""

from botec.graph import Formulas

formulas = Formulas(account="serving")

formulas.input("attention_peak_flops_per_s", unit="FLOP/s", account="compute", detail=True,
               meaning="the 16-bit dense peak attention runs at")
formulas.input("attention_width_per_context_token", unit="1", detail=True,
               meaning="per layer, a·(d_qk + d_v): multiply-adds one query makes per cached token (absorbed MLA: "
                       "a·(2·r_kv + d_rope))")
formulas.input("prefill_attention_width_per_context_token", unit="1", detail=True,
               meaning="per layer, a·(d_qk + d_v): multiply-adds one prefill query makes per token it attends (MLA "
                       "prefills in the decompressed MHA form, as vLLM and SGLang do)")


@formulas.formula(unit="s", meaning="attention compute per cached token a decode query reads (compute-bound side)",
                  expression="2 × pipeline_stage_layers × attention_width_per_context_token / tensor_parallel"
                             " / (attention_efficiency × attention_peak_flops_per_s)", detail=True)
def attention_seconds_per_context_token(pipeline_stage_layers, attention_width_per_context_token, tensor_parallel,
                                        attention_efficiency, attention_peak_flops_per_s):
    return (2 * pipeline_stage_layers * attention_width_per_context_token / tensor_parallel
            / (attention_efficiency * attention_peak_flops_per_s))


@formulas.formula(unit="s", meaning="attention compute per token a prefill query attends (compute-bound side)",
                  expression="2 × pipeline_stage_layers × prefill_attention_width_per_context_token / tensor_parallel"
                             " / (attention_efficiency × attention_peak_flops_per_s)",
                  source="MLA: vLLM and SGLang prefill in the decompressed MHA form, a·(d_qk + d_v) (DeepSeek-V3: "
                         "a·320), and decode absorbed, a·(2·r_kv + d_rope) (a·1,088) (formula audit 2, §4 N6); other "
                         "attention: the decode width", detail=True)
def prefill_attention_seconds_per_context_token(pipeline_stage_layers, prefill_attention_width_per_context_token,
                                                tensor_parallel, attention_efficiency, attention_peak_flops_per_s):
    return (2 * pipeline_stage_layers * prefill_attention_width_per_context_token / tensor_parallel
            / (attention_efficiency * attention_peak_flops_per_s))


@formulas.formula(unit="s", meaning="time to read one cached token's K and V (memory-bound side)",
                  expression="kv_bytes_per_token_per_device / (memory_bandwidth_efficiency"
                             " × memory_bandwidth_bytes_per_s)", detail=True)
def kv_read_seconds_per_context_token(kv_bytes_per_token_per_device, memory_bandwidth_efficiency,
                                      memory_bandwidth_bytes_per_s):
    return kv_bytes_per_token_per_device / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s)
