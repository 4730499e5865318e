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


formulas.input("prefill_attention_table_index", unit="1", account="compute", detail=True,
               meaning="the measured context-attention section that prices prefill attention (botec.serving."
                       "prefill_attention: 16 × the file's position + the section's; −1: none, the roofline)")


def _pair_seconds(prefill_attention_table_index, attention_heads, kv_heads, attention_tensor_parallel,
                  prompt_tokens, max_batched_tokens):
    """Seconds per attended pair per layer from the measured section (0 without one); elementwise over numpy arrays
    (a sweep's), plain numbers otherwise (no numpy)."""
    from botec.serving import prefill_attention

    values = (prefill_attention_table_index, attention_heads, kv_heads, attention_tensor_parallel, prompt_tokens,
              max_batched_tokens)
    if not any(getattr(v, "ndim", 0) for v in values):
        return 0.0 if float(prefill_attention_table_index) < 0 else prefill_attention.pair_seconds(*values)
    import numpy as np

    return np.vectorize(lambda *v: _pair_seconds(*v), otypes=[float])(*values)


@formulas.formula(unit="s", meaning="attention compute per token a prefill query attends (compute-bound side)",
                  expression="with a measured context-attention table pipeline_stage_layers × L(b, P) / (b·P²/2), b = "
                             "min(max(⌊max_batched_tokens / P⌋, 1), 256), P = prompt_tokens, else 2 × "
                             "pipeline_stage_layers × prefill_attention_width_per_context_token / tensor_parallel"
                             " / (attention_efficiency × attention_peak_flops_per_s)",
                  symbols={"L": "the table's latency of one layer's causal attention over b prompts of P tokens on "
                                "the rank's layout"},
                  source="measured: AIConfigurator's context-attention tables per engine and format (Apache-2.0; "
                         "botec.serving.prefill_attention); the roofline: MLA: vLLM and SGLang prefill in the "
                         "decompressed MHA form, a·(d_qk + d_v) (DeepSeek-V3: a·320), and decode absorbed, "
                         "a·(2·r_kv + d_rope) (a·1,088) (formula audit 2, §4 N6); other attention: the decode width",
                  detail=True, prose=True)
def prefill_attention_seconds_per_context_token(pipeline_stage_layers, prefill_attention_width_per_context_token,
                                                tensor_parallel, attention_efficiency, attention_peak_flops_per_s,
                                                prefill_attention_table_index, attention_heads, kv_heads,
                                                attention_tensor_parallel, prompt_tokens, max_batched_tokens):
    from botec.graph.elementwise import where

    measured = _pair_seconds(prefill_attention_table_index, attention_heads, kv_heads, attention_tensor_parallel,
                             prompt_tokens, max_batched_tokens)
    roofline = (2 * pipeline_stage_layers * prefill_attention_width_per_context_token / tensor_parallel
                / (attention_efficiency * attention_peak_flops_per_s))
    return where(measured > 0, pipeline_stage_layers * measured, roofline)


@formulas.formula(unit="s", meaning="time to read one cached token's K and V (memory-bound side)",
                  expression="kv_bytes_per_token_per_device / (memory_bandwidth_efficiency"
                             " × memory_bandwidth_bytes_per_s)", detail=True)
def kv_read_seconds_per_context_token(kv_bytes_per_token_per_device, memory_bandwidth_efficiency,
                                      memory_bandwidth_bytes_per_s):
    return kv_bytes_per_token_per_device / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s)


# --- decode attention from a measured table (botec.serving.attention_tables) ----------------------------------

formulas.input("attention_table_index", unit="1", account="compute", detail=True,
               meaning="the measured decode-attention table that prices decode attention (botec.serving."
                       "attention_tables.table_names position; −1: none, the roofline max(F_attn / (e_attn·peak₁₆), "
                       "KV / (e_mem·BW)))")

FIT_FIELDS = {"floor": "floor", "sequence": "per_sequence", "context": "per_context_token", "exponent": "exponent"}


def _fit_value(field, attention_table_index, attention_heads, kv_heads, attention_tensor_parallel):
    """One field of the rank's layout fit (seconds, or the exponent), 0 without a table or layout; elementwise over
    numpy arrays (a sweep's), plain numbers otherwise (no numpy)."""
    from botec.serving import attention_tables

    values = (attention_table_index, attention_heads, kv_heads, attention_tensor_parallel)
    if not any(getattr(v, "ndim", 0) for v in values):
        if float(attention_table_index) < 0:
            return 0.0
        fit = attention_tables.layout_fit(*values)
        return 0.0 if fit is None else getattr(fit, FIT_FIELDS[field])
    import numpy as np

    return np.vectorize(lambda *v: _fit_value(field, *v), otypes=[float])(*values)


@formulas.formula(unit="s", meaning="measured table: decode attention's floor per step, the layers' kernel at one "
                                    "sequence (0 without a table)",
                  expression="pipeline_stage_layers × F, F the table's point at b = 1, s = 2 for the rank's layout "
                             "(attention_heads / t_a query heads, max(kv_heads / t_a, 1) KV heads)",
                  zero_when="attention_knee_exponent == 0", detail=True, prose=True,
                  symbols={"F": "the layout's floor", "t_a": "attention_tensor_parallel"},
                  source="AIConfigurator's measured generation-attention tables (Apache-2.0; catalog/measurements/"
                         "operators, botec.serving.attention_tables)")
def attention_table_floor_seconds(attention_table_index, attention_heads, kv_heads, attention_tensor_parallel,
                                  pipeline_stage_layers):
    return pipeline_stage_layers * _fit_value("floor", attention_table_index, attention_heads, kv_heads,
                                              attention_tensor_parallel)


@formulas.formula(unit="s", meaning="measured table: decode attention per sequence in a step (the flat region s ≤ "
                                    "64: each sequence reads at least one KV block; 0 without a table)",
                  expression="pipeline_stage_layers × σ, σ fitted to the rank's layout's points",
                  zero_when="attention_knee_exponent == 0", detail=True, prose=True,
                  symbols={"σ": "the layout's cost per sequence"},
                  source="a least-squares fit in log space to AIConfigurator's measured generation-attention table "
                         "(benchmarks/extract_operator_tables.py), never to end-to-end rows")
def attention_table_seconds_per_sequence(attention_table_index, attention_heads, kv_heads, attention_tensor_parallel,
                                         pipeline_stage_layers):
    return pipeline_stage_layers * _fit_value("sequence", attention_table_index, attention_heads, kv_heads,
                                              attention_tensor_parallel)


@formulas.formula(unit="s", meaning="measured table: decode attention per context token a step reads (the "
                                    "bandwidth-bound region; 0 without a table)",
                  expression="pipeline_stage_layers × κ, κ fitted to the rank's layout's points",
                  zero_when="attention_knee_exponent == 0", detail=True, prose=True,
                  symbols={"κ": "the layout's cost per context token"},
                  source="a least-squares fit in log space to AIConfigurator's measured generation-attention table "
                         "(benchmarks/extract_operator_tables.py), never to end-to-end rows")
def attention_table_seconds_per_context_token(attention_table_index, attention_heads, kv_heads,
                                              attention_tensor_parallel, pipeline_stage_layers):
    return pipeline_stage_layers * _fit_value("context", attention_table_index, attention_heads, kv_heads,
                                              attention_tensor_parallel)


@formulas.formula(unit="1", meaning="measured table: the exponent p of decode attention's knee between its cost per "
                                    "sequence and per context token (0 without a table or layout: the roofline)",
                  expression="p of L(b, s) = F + ((σ·b)^p + (κ·b·s)^p)^(1/p), 1 ≤ p ≤ 32, fitted to the rank's "
                             "layout's points", detail=True, prose=True,
                  symbols={"p": "attention_knee_exponent", "b": "sequences", "s": "KV tokens per sequence"},
                  source="a least-squares fit in log space to AIConfigurator's measured generation-attention table "
                         "(benchmarks/extract_operator_tables.py; each file states the fit's extreme residuals per "
                         "layout), never to end-to-end rows")
def attention_knee_exponent(attention_table_index, attention_heads, kv_heads, attention_tensor_parallel):
    return _fit_value("exponent", attention_table_index, attention_heads, kv_heads, attention_tensor_parallel)
