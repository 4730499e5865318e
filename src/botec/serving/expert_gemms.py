"""The routed experts' GEMMs of one MoE layer from a measured fused-MoE table (:mod:`botec.serving.moe_operators`):
the floor, the expert read and the seconds per token the step's closed form takes, per layer on the busiest rank.

Where no table covers the model, format, accelerator and layout, every term here is 0 and ``expert_table_covers`` is
0: the step keeps the roofline (the routed experts' bytes over e_mem·BW, their FLOPs over e_mm·peak).
"""

from botec.catalog.root import catalog_cache
from botec.graph import Formulas, where

formulas = Formulas(account="serving")

formulas.input("moe_table_index", unit="1", account="compute", detail=True,
               meaning="the measured fused-MoE table that prices the routed experts' GEMMs "
                       "(botec.serving.moe_operators.moe_table_names position; −1: none, the roofline)")

FIT_INPUTS = ("moe_table_index", "hidden_size", "expert_ffn_size", "experts", "experts_per_token", "redundant_experts",
              "expert_tensor_parallel", "expert_parallel")
FIT_SYMBOLS = {"L_moe": "the table's latency of one layer's fused MoE op on one rank at T tokens (the layout with "
                        "the busiest rank's experts, at T·E/(E + N))",
               "q": "k/(E + N), expert_pick_probability", "T₉₉": "⌈ln 0.01 / ln(1 − q)⌉"}


def _fit_term(values, term: str):
    """``term`` of :func:`botec.serving.moe_operators.expert_fit` for the layout ``values`` (FIT_INPUTS' order),
    0 where no table covers it; elementwise over numpy arrays (a sweep's), pure Python for plain numbers."""
    from botec.serving.moe_operators import expert_fit

    def one(*layout):
        fit = expert_fit(*(float(v) for v in layout)) if layout[0] >= 0 else None
        return 0.0 if fit is None else (1.0 if term == "covers" else getattr(fit, term))

    if not any(getattr(v, "ndim", 0) for v in values):
        return one(*values)
    import numpy as np

    return np.vectorize(one, otypes=[float])(*np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in values)))


@formulas.formula(unit="1", meaning="1 where a measured fused-MoE table covers the model's routed experts in this "
                                    "format, on this accelerator and layout, else 0 (the roofline)",
                  expression="1 if the table holds (h, f_e, E, k) at moe_tp = expert_tensor_parallel and moe_ep = E / "
                             "⌈(E + N)/EP⌉, else 0", zero_when="moe_table_index < 0", detail=True, prose=True,
                  source="AIConfigurator's measured MoE tables (Apache-2.0; catalog/measurements/operators/moe-*.yaml, "
                         "botec.serving.moe_operators)")
def expert_table_covers(moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token, redundant_experts,
                        expert_tensor_parallel, expert_parallel):
    return _fit_term((moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token, redundant_experts,
                      expert_tensor_parallel, expert_parallel), "covers")


@formulas.formula(unit="s", meaning="measured MoE table: one MoE layer's fixed cost on the busiest rank, the part of "
                                    "its floor no expert read explains (0 without a table)",
                  expression="F_e = L_moe(1) − x·q (x: expert_table_read_seconds_per_layer)", prose=True, detail=True,
                  symbols=FIT_SYMBOLS, zero_when="expert_table_covers == 0",
                  source="a two-point fit to AIConfigurator's fused-MoE kernels (botec.serving.moe_operators."
                         "expert_fit), never to end-to-end rows")
def expert_table_floor_seconds_per_layer(moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token,
                                         redundant_experts, expert_tensor_parallel, expert_parallel):
    return _fit_term((moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token, redundant_experts,
                      expert_tensor_parallel, expert_parallel), "floor_seconds")


@formulas.formula(unit="s", meaning="measured MoE table: one MoE layer's read of every routed expert resident on the "
                                    "busiest rank, as its fused MoE op times it (0 without a table)",
                  expression="x = (L_moe(T₉₉) − L_moe(1)) / ((1 − (1 − q)^T₉₉) − q)", prose=True, detail=True,
                  symbols=FIT_SYMBOLS, zero_when="expert_table_covers == 0",
                  source="a two-point fit to AIConfigurator's fused-MoE kernels (botec.serving.moe_operators."
                         "expert_fit): the op's growth from one token's k experts to 99 % of them touched")
def expert_table_read_seconds_per_layer(moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token,
                                        redundant_experts, expert_tensor_parallel, expert_parallel):
    return _fit_term((moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token, redundant_experts,
                      expert_tensor_parallel, expert_parallel), "read_seconds")


@formulas.formula(unit="s", meaning="measured MoE table: one MoE layer's expert GEMMs per token in the compute-bound "
                                    "region (0 without a table)",
                  expression="g_e = (L_moe(16,384) − L_moe(8,192)) / 8,192", prose=True, detail=True,
                  symbols=FIT_SYMBOLS, zero_when="expert_table_covers == 0",
                  source="the marginal cost per token at the top of AIConfigurator's fused-MoE grid "
                         "(botec.serving.moe_operators.expert_fit)")
def expert_table_seconds_per_token_per_layer(moe_table_index, hidden_size, expert_ffn_size, experts,
                                             experts_per_token, redundant_experts, expert_tensor_parallel,
                                             expert_parallel):
    return _fit_term((moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token, redundant_experts,
                      expert_tensor_parallel, expert_parallel), "seconds_per_token")


@formulas.formula(unit="1", meaning="the MLP width a measured GEMM table prices with a layer's attention projections: "
                                    "the dense MLP's, 0 for an MoE model (its experts are the MoE table's or the "
                                    "roofline's)",
                  expression="ffn_size if moe_layers = 0 else 0", detail=True, prose=True)
def table_mlp_ffn_size(ffn_size, moe_layers):
    return where(moe_layers > 0, 0.0, ffn_size)


@formulas.formula(unit="parameters", meaning="routed-expert parameters one token passes through, all layers",
                  expression="expert_parameters × experts_per_token / experts", zero_when="experts == 0", detail=True)
def active_expert_parameters(expert_parameters, experts_per_token, experts):
    return where(experts > 0, expert_parameters * experts_per_token / where(experts > 0, experts, 1.0), 0.0)


@catalog_cache(maxsize=256)
def moe_knee_exponent(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
                 mlp_gated, tensor_parallel, matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
                 memory_bandwidth_bytes_per_s, weight_bytes_per_parameter, moe_table_index, expert_ffn_size, experts,
                 experts_per_token, redundant_experts, expert_tensor_parallel, expert_parallel):
    """:func:`gemm_knee_exponent` of an MoE layer the fused-MoE table covers (plain numbers; None where it does not):
    p fitted to the layer's table-priced GEMMs, the expert op and any attention projections a GEMM table prices."""
    from botec.serving import operators
    from botec.serving.moe_operators import expert_fit

    fit = expert_fit(moe_table_index, hidden_size, expert_ffn_size, experts, experts_per_token, redundant_experts,
                     expert_tensor_parallel, expert_parallel)
    if fit is None:
        return None
    dense = [0.0] * len(operators.KNEE_TOKENS)
    if gemm_table_index >= 0:
        roofline = operators.roofline_fallback(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency,
                             memory_bandwidth_bytes_per_s, weight_bytes_per_parameter)
        dense = [operators.layer_table_seconds(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim,
                              table_mlp_ffn_size, mlp_gated, tensor_parallel, m, roofline) for m in operators.KNEE_TOKENS]
    kept = 1 - experts_per_token / (experts + redundant_experts)
    weights = [dense[0] + fit.floor_seconds + fit.read_seconds * (1 - kept ** m) for m in operators.KNEE_TOKENS]
    slope = dense[-1] / operators.KNEE_TOKENS[-1] + fit.seconds_per_token
    return operators.fit_knee_exponent([d + e for d, e in zip(dense, fit.curve)], weights, slope)
