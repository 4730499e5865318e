"""What an engine step costs on one accelerator of a serving replica's fullest stage, per unit: seconds per token
of GEMMs, per step of weight reads, per sampled token of the LM head, per token of memory-bound ops, the fixed
time of every step; and what a request brings to a step (its prefill tokens, the tokens a decode step gains, the
batch at saturation). The inputs of the serving latency model are declared here too.

These are the rooflines of :mod:`botec.serving.step` (the function the simulator calls) written as per-unit
costs; :mod:`botec.serving.latency` puts them together into a replica at saturation and under load.
"""

from botec.catalog.root import catalog_cache
from botec.formulas.transformer import memory_bound_elements_per_token
from botec.graph import Formulas, maximum, where
from botec.serving import load as model
from botec.serving.step import speculative_tokens_per_step

formulas = Formulas(account="serving")

formulas.input("time_to_first_token_target_seconds", unit="s", meaning="target time to first token (TTFT)")
formulas.input("time_per_output_token_target_seconds", unit="s", meaning="target time per output token (TPOT)")
formulas.input("latency_percentile", unit="fraction", meaning="the percentile the latency targets hold at (0.9: P90)")
formulas.input("latency_margin", unit="fraction",
               meaning="share of each latency target the fleet keeps free (sized to target × (1 − margin))")
formulas.input("max_batch_size", unit="requests", meaning="cap on running sequences (max_num_seqs)")
formulas.input("max_batched_tokens", unit="tokens", meaning="tokens one engine step may carry (its token budget)")
formulas.input("decode_tokens_in_budget", unit="1", detail=True,
               meaning="d: 1 when the token budget bounds every token of a step (vLLM, TensorRT-LLM), 0 when it bounds "
                       "the prefill chunk only (SGLang's chunked_prefill_size): the engine preset's token_budget_counts")
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

formulas.input("gemm_table_index", unit="1", account="compute", detail=True,
               meaning="the measured GEMM table that prices the weight GEMMs (botec.serving.operators.table_names "
                       "position; −1: none, the roofline with the family's e_mm and e_mem)")

KERNELS_PER_LAYER = 9  # QKV, attention, output, two norms, two residual adds, MLP up (with the activation), down
GEMM_KERNELS_PER_LAYER = 4   # of those, the weight GEMMs: a table's latency holds their kernel time whole
ATTENTION_KERNELS_PER_LAYER = 1   # and attention: a measured decode-attention table's latency holds its kernel time
TABLE_SLOPE_TOKENS = 8192    # the m whose table latency gives the compute-bound side's seconds per token


def _table_layer(*shape_tokens_roofline):
    """:func:`botec.serving.operators.layer_table_seconds` (imported when a table is in force)."""
    from botec.serving.operators import layer_table_seconds

    return layer_table_seconds(*shape_tokens_roofline)


def _roofline(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s,
              weight_bytes_per_parameter):
    """:func:`botec.serving.operators.roofline_fallback`: max(2·m·n·k / (e_mm · peak), n·k·b / (e_mem · BW))."""
    from botec.serving.operators import roofline_fallback

    return roofline_fallback(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
                             memory_bandwidth_bytes_per_s, weight_bytes_per_parameter)


TABLE_SHAPE = ("gemm_table_index", "hidden_size", "attention_heads", "kv_heads", "qk_head_dim", "v_head_dim",
               "table_mlp_ffn_size", "mlp_gated", "tensor_parallel")


@formulas.formula(unit="s", meaning="measured table: one layer's weight GEMMs (QKV, O, gate/up, down; n or k over "
                                    "TP) at m = 1, the weight-read floor of a step (0 without a table)",
                  expression="Σ_GEMMs L_table(1, n/t, k) (log-space interpolation; outside the grid the roofline "
                             "max(2mnk/(e_mm·peak), n·k·b/(e_mem·BW)))", zero_when="gemm_table_index < 0",
                  prose=True, symbols={"L_table": "a GEMM's latency in the accelerator's measured table, at (m, n, k)",
                                       "n": "the GEMM's output width", "k": "its inner width",
                                       "t": "tensor_parallel", "m": "the tokens of the step"},
                  source="AIConfigurator's measured GEMM tables (Apache-2.0; catalog/measurements/operators, "
                         "botec.serving.operators)", detail=True)
def table_gemm_floor_seconds_per_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim,
                                       v_head_dim, table_mlp_ffn_size, mlp_gated, tensor_parallel, matmul_efficiency,
                                       peak_flops_per_s, memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s,
                                       weight_bytes_per_parameter):
    roofline = _roofline(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
                         memory_bandwidth_bytes_per_s, weight_bytes_per_parameter)
    return _table_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
                        mlp_gated, tensor_parallel, 1.0, roofline)


@formulas.formula(unit="s", meaning="measured table: one layer's weight GEMMs per token in the compute-bound region "
                                    "(0 without a table)",
                  expression="Σ_GEMMs L_table(8192, n/t, k) / 8192", zero_when="gemm_table_index < 0",
                  prose=True, symbols={"L_table": "a GEMM's latency in the accelerator's measured table, at (m, n, k)",
                                       "n": "the GEMM's output width", "k": "its inner width",
                                       "t": "tensor_parallel"},
                  source="AIConfigurator's measured GEMM tables (botec.serving.operators)", detail=True)
def table_gemm_seconds_per_token_per_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim,
                                           v_head_dim, table_mlp_ffn_size, mlp_gated, tensor_parallel, matmul_efficiency,
                                           peak_flops_per_s, memory_bandwidth_efficiency,
                                           memory_bandwidth_bytes_per_s, weight_bytes_per_parameter):
    roofline = _roofline(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
                         memory_bandwidth_bytes_per_s, weight_bytes_per_parameter)
    return _table_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
                        mlp_gated, tensor_parallel, float(TABLE_SLOPE_TOKENS), roofline) / TABLE_SLOPE_TOKENS


@catalog_cache(maxsize=256)
def _knee_of(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size, mlp_gated,
             tensor_parallel, matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
             memory_bandwidth_bytes_per_s, weight_bytes_per_parameter):
    """:func:`gemm_knee_exponent` of one layout: fitted once per process and shape (plain numbers, no numpy), or
    elementwise over numpy arrays (``_knee_of.__wrapped__``, a sweep's)."""
    from botec.serving import operators

    roofline = _roofline(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
                         memory_bandwidth_bytes_per_s, weight_bytes_per_parameter)
    shape = getattr(tensor_parallel, "ndim", 0)
    if not shape:
        curve = [_table_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim,
                              table_mlp_ffn_size, mlp_gated, tensor_parallel, m, roofline) for m in operators.KNEE_TOKENS]
        return operators.knee_exponent(curve)
    import numpy as np

    tokens = np.asarray(operators.KNEE_TOKENS).reshape((-1,) + (1,) * shape)
    curve = _table_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
                         mlp_gated, tensor_parallel, tokens, roofline)
    return operators.knee_exponent(curve)


def _knee_exponent(*values):
    """gemm_knee_exponent for plain numbers: the MoE layer's fit where a fused-MoE table covers it, else the dense
    GEMM table's (0 without either)."""
    if values[14] >= 0:
        from botec.serving.expert_gemms import moe_knee_exponent

        p = moe_knee_exponent(*values)
        if p is not None:
            return p
    if values[0] < 0:
        return 0.0
    return _knee_of(*values[:14])


@formulas.formula(unit="1", meaning="measured table: the exponent p of the weight GEMMs' knee, fitted to the table's "
                                    "own points for the layer's shapes on one TP rank (0 without a table: the "
                                    "roofline's max form)",
                  expression="p minimising Σ_m (log (W(m)^p + (g·m)^p)^(1/p) − log Σ_GEMMs L_table(m))² over m "
                             "= 1, 2, 4 … 8,192, 1 ≤ p ≤ 32. Dense: W = Σ_GEMMs L_table(1, n/t, k), g = Σ_GEMMs "
                             "L_table(8192, n/t, k) / 8192 (outside the grid the roofline prices a GEMM). MoE layer "
                             "a fused-MoE table covers: the layer's GEMMs are its expert op L_moe plus any attention "
                             "projections a GEMM table prices (D), W(m) = D(1) + F_e + x·(1 − (1 − q)^m), g = "
                             "D(8192)/8192 + g_e",
                  detail=True, prose=True,
                  symbols={"p": "gemm_knee_exponent", "m": "the tokens of a step", "W": "the layer's weight side",
                           "g": "the layer's GEMMs per token at m = 8,192",
                           "L_table": "a GEMM's latency in the accelerator's measured table, at (m, n, k)",
                           "n": "the GEMM's output width", "k": "its inner width", "t": "tensor_parallel",
                           "F_e": "expert_table_floor_seconds_per_layer", "x": "expert_table_read_seconds_per_layer",
                           "g_e": "expert_table_seconds_per_token_per_layer", "q": "k/(E + N)"},
                  source="a least-squares fit in log space to AIConfigurator's measured GEMM and fused-MoE tables "
                         "(kernels timed one at a time; botec.serving.operators.fit_knee_exponent), never to "
                         "end-to-end rows: on Hopper the dense closed form follows the measured layer within −9 … +5 % "
                         "over m (8B and 70B shapes, TP 1-8, BF16 and FP8), where max(F, g·m) undercuts the knee by "
                         "12-32 %")
def gemm_knee_exponent(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim,
                       table_mlp_ffn_size, mlp_gated, tensor_parallel, matmul_efficiency, peak_flops_per_s,
                       memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s, weight_bytes_per_parameter,
                       moe_table_index, expert_ffn_size, experts, experts_per_token, redundant_experts,
                       expert_tensor_parallel, expert_parallel):
    from botec.serving import operators

    values = (gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
              mlp_gated, tensor_parallel, matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
              memory_bandwidth_bytes_per_s, weight_bytes_per_parameter, moe_table_index, expert_ffn_size, experts,
              experts_per_token, redundant_experts, expert_tensor_parallel, expert_parallel)
    if not operators.has_table(gemm_table_index) and not operators.has_table(moe_table_index):
        return 0.0 * tensor_parallel
    if not any(getattr(v, "ndim", 0) for v in values):
        return _knee_exponent(*(float(v) for v in values))
    import numpy as np

    arrays = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in values))
    if not operators.has_table(moe_table_index):   # dense tables only: the vectorised fit
        return where(arrays[0] >= 0, _knee_of.__wrapped__(*arrays[:14]), 0.0)
    return np.vectorize(lambda *v: _knee_exponent(*v), otypes=[float])(*arrays)


@formulas.formula(unit="B", meaning="measured table: the weight bytes of one layer's table-priced GEMMs on one "
                                    "accelerator (0 without a table)",
                  expression="Σ_GEMMs n/t · k × weight_bytes_per_parameter", zero_when="gemm_table_index < 0",
                  prose=True, symbols={"n": "a GEMM's output width", "k": "its inner width", "t": "tensor_parallel"},
                  detail=True)
def table_gemm_weight_bytes_per_layer(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim,
                                      v_head_dim, table_mlp_ffn_size, mlp_gated, tensor_parallel, weight_bytes_per_parameter):
    from botec.serving.operators import layer_gemm_shapes

    shapes = layer_gemm_shapes(hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size, mlp_gated,
                               tensor_parallel)
    total = sum(n * k for _, n, k in shapes) * weight_bytes_per_parameter
    return where(gemm_table_index >= 0, total, 0.0)


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
                  expression="kv_bytes_per_token_per_device × D × prompt_tokens / kv_transfer_bytes_per_s, D = "
                             "tensor_parallel / attention_tensor_parallel under data-parallel attention (else 1)",
                  zero_when="prefill_instances == 0", prose=True,
                  source="DistServe (Zhong et al. 2024) §4: the KV transfer. Under data-parallel attention one "
                         "request's KV sits whole on its own attention group (D groups share the replica's "
                         "kv_tensor_split), so it leaves through that group's links, not all of the replica's: "
                         "DeepSeek-V3 4,400 tokens × 70,272 B / 46 GB/s = 6.72 ms (launch-audit-3 P3)",
                  detail=True)
def kv_transfer_seconds(kv_bytes_per_token_per_device, prompt_tokens, kv_transfer_bytes_per_s, data_parallel_attention,
                        tensor_parallel, attention_tensor_parallel):
    groups = where(data_parallel_attention > 0, tensor_parallel / attention_tensor_parallel, 1.0)
    return kv_bytes_per_token_per_device * groups * prompt_tokens / kv_transfer_bytes_per_s


@formulas.formula(unit="s", meaning="GEMM time per token a step carries (compute-bound side)",
                  expression="dense + experts. dense: with a measured GEMM table table_gemm_seconds_per_token_per_layer "
                             "× pipeline_stage_layers, else 2 × (matmul_parameters − lm_head_matmul_parameters − "
                             "active_expert_parameters) × pipeline_stage_layers / (layers × tensor_parallel) / "
                             "(matmul_efficiency × peak_flops_per_s). experts: where a fused-MoE table covers them "
                             "expert_table_seconds_per_token_per_layer × moe_layers × pipeline_stage_layers / layers, "
                             "else 2 × active_expert_parameters × pipeline_stage_layers / (layers × tensor_parallel) / "
                             "(matmul_efficiency × peak_flops_per_s)", detail=True, prose=True)
def gemm_seconds_per_token(matmul_parameters, lm_head_matmul_parameters, pipeline_stage_layers, layers,
                           tensor_parallel, matmul_efficiency, peak_flops_per_s, gemm_table_index,
                           table_gemm_seconds_per_token_per_layer, active_expert_parameters, moe_layers,
                           expert_table_covers, expert_table_seconds_per_token_per_layer):
    flops = 2 * (matmul_parameters - lm_head_matmul_parameters - active_expert_parameters) * pipeline_stage_layers / (
        layers * tensor_parallel)
    expert_flops = 2 * active_expert_parameters * pipeline_stage_layers / (layers * tensor_parallel)
    dense = where(gemm_table_index >= 0, table_gemm_seconds_per_token_per_layer * pipeline_stage_layers,
                  flops / (matmul_efficiency * peak_flops_per_s))
    return dense + where(expert_table_covers > 0,
                         expert_table_seconds_per_token_per_layer * moe_layers * pipeline_stage_layers / layers,
                         expert_flops / (matmul_efficiency * peak_flops_per_s))


@formulas.formula(unit="s", meaning="time to read the weights every step needs once (all but the routed experts, "
                                    "the speculative draft's, which its own steps read, and the input embedding table, "
                                    "of which a step reads only its tokens' rows)",
                  expression="(weight_memory_bytes − expert_weight_bytes − draft_weight_bytes − G·L_s − E)"
                             " / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s) + F·L_s, with a measured "
                             "GEMM table F = table_gemm_floor_seconds_per_layer (the layers' weight GEMMs at m = 1, "
                             "as timed) and G = table_gemm_weight_bytes_per_layer (their bytes), else F = G = 0; E = "
                             "embedding_parameters / tensor_parallel × weight_bytes_per_parameter when the embeddings "
                             "are untied (lm_head_parameters > 0) and one stage holds them all (pipeline_parallel = 1), "
                             "else 0",
                  symbols={"F": "table_gemm_floor_seconds_per_layer", "G": "table_gemm_weight_bytes_per_layer",
                           "L_s": "pipeline_stage_layers", "E": "the input embedding table's bytes on one accelerator"},
                  source="an embedding is a gather (torch.nn.functional.embedding; vLLM's VocabParallelEmbedding splits "
                         "the V rows over TP): a step of T tokens reads T·h of its V·h values, not the table (Llama "
                         "3.1 8B: 128,256 × 4,096 = 525 M parameters, 6.5 % of the model, were read every step). "
                         "Tied embeddings are the LM head's matrix, which every step reads whole (kept). With pipeline "
                         "stages the fullest stage may or may not be the first; the table is kept there (conservative)",
                  prose=True)
def weight_read_seconds(weight_memory_bytes, expert_weight_bytes, draft_weight_bytes, memory_bandwidth_efficiency,
                        memory_bandwidth_bytes_per_s, table_gemm_floor_seconds_per_layer,
                        table_gemm_weight_bytes_per_layer, pipeline_stage_layers, embedding_parameters,
                        lm_head_parameters, pipeline_parallel, tensor_parallel, weight_bytes_per_parameter):
    gathered = where((lm_head_parameters > 0) & (pipeline_parallel == 1),
                     embedding_parameters / tensor_parallel * weight_bytes_per_parameter, 0.0)
    rest = maximum(weight_memory_bytes - expert_weight_bytes - draft_weight_bytes
                   - table_gemm_weight_bytes_per_layer * pipeline_stage_layers - gathered, 0.0)
    return (rest / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s)
            + table_gemm_floor_seconds_per_layer * pipeline_stage_layers)


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
                             "moe_exchange_seconds_per_token]; the instance that prefills: the replica, or "
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
                           "L_s": "pipeline_stage_layers", "e_mm": "matmul_efficiency",
                           "peak": "peak_flops_per_s"}, detail=True)
def instance_prompt_excess_seconds(data_parallel_attention, pipeline_parallel, prefill_tokens_per_request,
                               tensor_parallel, attention_tensor_parallel, attention_parameters_per_layer,
                               pipeline_stage_layers, matmul_efficiency, peak_flops_per_s, prefill_attention_tokens,
                               prefill_attention_seconds_per_context_token, moe_exchange_seconds_per_token):
    projections = 2 * attention_parameters_per_layer * pipeline_stage_layers / (
        tensor_parallel * matmul_efficiency * peak_flops_per_s)
    attention = prefill_attention_tokens * prefill_attention_seconds_per_context_token
    sends = moe_exchange_seconds_per_token   # the prompt's dispatch and combine (botec.serving.experts)
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
                             "residuals and permutation run on its own group's ranks only), else 1; where a fused-MoE "
                             "table covers the routed experts, their permutation and activation are its latency's, not "
                             "counted here (less (4·k·h·s + (3 if gated else 2)·k·f_e / t) × moe_layers / layers)",
                  source="the memory-bound ops of the training op-level model (botec.training.ops), forward only; "
                         "data-parallel attention spreads the tokens over the groups (formula audit 2, §4 N5)",
                  prose=True, detail=True)
def elementwise_seconds_per_token(activation_bytes_per_element, pipeline_stage_layers, hidden_size,
                                  activation_function_elements, tensor_parallel, experts_per_token, moe_layers, layers,
                                  memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s, data_parallel_attention,
                                  attention_tensor_parallel, expert_table_covers, mlp_gated, expert_ffn_size):
    spread = where(data_parallel_attention > 0, attention_tensor_parallel / tensor_parallel, 1.0)
    permutation = 4 * experts_per_token * hidden_size * moe_layers / layers
    elements = memory_bound_elements_per_token(hidden_size, activation_function_elements, tensor_parallel,
                                               experts_per_token, moe_layers, layers, norm_share=spread)
    elements = elements - permutation * (1 - spread)
    fused = permutation * spread + where(mlp_gated, 3, 2) * experts_per_token * expert_ffn_size * moe_layers / (
        layers * tensor_parallel)   # the fused MoE op's own: its table latency holds them
    elements = elements - where(expert_table_covers > 0, fused, 0.0)
    return (activation_bytes_per_element * pipeline_stage_layers * elements
            / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s))


@formulas.formula(unit="s", meaning="fixed time of every step: kernels and the engine's CPU share (the all-reduces' "
                                    "latency is allreduce_seconds_per_step)",
                  expression="((9 − n_table) × pipeline_stage_layers + 2) × kernel_overhead_seconds + "
                             "step_overhead_seconds",
                  symbols={"n_table": "the kernels per layer a measured table's latencies hold whole: a GEMM table 4 "
                                      "for a dense model (QKV, O, gate/up, down), 2 for an MoE model (QKV, O); a "
                                      "fused-MoE table 2 more per MoE layer (its grouped gate/up and down: 2 × "
                                      "moe_layers / layers); a decode-attention table 1 more (its kernel)"},
                  prose=True)
def fixed_seconds_per_step(pipeline_stage_layers, kernel_overhead_seconds, step_overhead_seconds, gemm_table_index,
                           moe_layers, layers, expert_table_covers, attention_knee_exponent):
    table_kernels = where(moe_layers > 0, GEMM_KERNELS_PER_LAYER // 2, GEMM_KERNELS_PER_LAYER)
    per_layer = (KERNELS_PER_LAYER - where(gemm_table_index >= 0, table_kernels, 0)
                 - where(expert_table_covers > 0, 2 * moe_layers / layers, 0)
                 - where(attention_knee_exponent > 0, ATTENTION_KERNELS_PER_LAYER, 0))
    kernels = (per_layer * pipeline_stage_layers + 2) * kernel_overhead_seconds
    return kernels + step_overhead_seconds


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
                  expression="max(1, min(max_concurrent_requests, max_batch_size, ⌊max_batched_tokens / (d × "
                             "(draft_tokens + 1) + tokens_per_step × prefill_tokens_per_request / output_tokens)⌋)), "
                             "d = decode_tokens_in_budget",
                  source="a step carries each running request's decode tokens and the prompts replacing those that "
                         "finish (disaggregated: decode tokens only); the decode tokens count against the budget only "
                         "where the engine's budget bounds them (d = 1: vLLM, TensorRT-LLM; SGLang's "
                         "chunked_prefill_size bounds prefill only, schedule_policy.py PrefillAdder, sglang 0.5.23)",
                  prose=True)
def saturation_batch_size(max_concurrent_requests, max_batch_size, max_batched_tokens, draft_tokens, tokens_per_step,
                          prefill_tokens_per_request, output_tokens, prefill_instances, decode_tokens_in_budget):
    colocated = where(prefill_instances > 0, 0.0, 1.0)
    return model.batch_limit(max_concurrent_requests, max_batch_size, max_batched_tokens,
                             decode_tokens_in_budget * (draft_tokens + 1),
                             colocated * tokens_per_step * prefill_tokens_per_request / output_tokens)
