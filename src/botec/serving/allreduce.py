"""The tensor-parallel all-reduces of a serving step: a measured collective table's knee, or the engine's α and the link.

A step's n_ar all-reduces each reduce a T·h·b-byte tensor. Where a measured all-reduce table covers the accelerator,
the engine and the TP degree inside a node (:mod:`botec.formulas.collective_tables`: AIConfigurator's, Apache-2.0),
the step prices them by the closed form :func:`botec.serving.step.allreduce_term` of the table's fitted knee; elsewhere
by the engine preset's latency α and the TP link, their sum, as before. Data-parallel attention runs no all-reduce
around attention (unless its group spans t_a > 1 ranks): only the latency of the dense layers' gathers and scatters.
"""

from botec.graph import Formulas, Given, where

formulas = Formulas(account="serving")

formulas.input("allreduce_table_index", unit="1", account="network", detail=True,
               meaning="the measured all-reduce table that prices the TP all-reduces (botec.formulas.collective_tables"
                       ".table_names position; −1: none, the engine's α and the TP link)")

ALLREDUCE_FIT = ("allreduce_table_index", "tensor_parallel", "accelerators_per_node", "hidden_size",
                 "activation_bytes_per_element", "max_batched_tokens")


def _allreduce_knee(allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                    activation_bytes_per_element, max_batched_tokens):
    """The fitted knee (botec.formulas.collective_tables.allreduce_knee) of one layout, plain numbers; None where no
    table covers it: none for the accelerator and engine, a TP degree the table lacks, or TP across nodes."""
    if allreduce_table_index < 0 or tensor_parallel < 2 or tensor_parallel > accelerators_per_node:
        return None
    from botec.formulas import collective_tables

    table = collective_tables.table_by_index(allreduce_table_index)
    ranks = int(round(tensor_parallel))
    if ranks != tensor_parallel or ranks not in table.ranks:
        return None
    return collective_tables.allreduce_knee(table.name, ranks, float(hidden_size), float(activation_bytes_per_element),
                                            float(max_batched_tokens))


def _from_knee(values, pick, fallback):
    """``pick(knee, tensor_parallel)`` of the fitted knee where a table covers the layout, else ``fallback``;
    elementwise (a sweep's arrays: one cached fit per distinct layout)."""
    if not any(getattr(v, "ndim", 0) for v in values):
        knee = _allreduce_knee(*(float(v) for v in values))
        return fallback if knee is None else pick(knee, float(values[1]))
    import numpy as np

    arrays = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in values), np.asarray(fallback, dtype=float))
    out = np.array(arrays[-1], dtype=float)
    for at in np.ndindex(out.shape):
        knee = _allreduce_knee(*(float(a[at]) for a in arrays[:-1]))
        if knee is not None:
            out[at] = pick(knee, float(arrays[1][at]))
    return out


ALLREDUCE_SOURCE = ("a least-squares fit to AIConfigurator's measured all-reduce tables (Apache-2.0; the engine's own "
                    "kernel, else NCCL's; catalog/measurements/operators/allreduce-*, botec.formulas."
                    "collective_tables.allreduce_knee): (α^q + (β·S)^q)^(1/q) at S = T·h·b, T = 1, 2, 4 … the token "
                    "budget, never fitted to end-to-end rows. On Hopper it follows the table within about ±10-30 % "
                    "(A100 TensorRT-LLM 1.0.0 and vLLM on B200, whose curves jump between algorithms: up to ±55 %); "
                    "the worst point of the contract's fit is in allreduce_table_index's reason")
ALLREDUCE_SYMBOLS = {"α": "the fitted latency side", "β": "the fitted seconds per byte", "q": "the fitted exponent",
                     "S": "the bytes one all-reduce reduces", "T": "the step's tokens", "h": "hidden_size",
                     "b": "activation_bytes_per_element"}


@formulas.formula(unit="s", meaning="latency side α of one tensor-parallel all-reduce: the measured table's fit, else "
                                    "the engine preset's small-message latency",
                  expression="α of the fit to the measured all-reduce table at TP ranks if a table covers the "
                             "accelerator, engine and TP (inside a node), else allreduce_latency_seconds",
                  prose=True, source=ALLREDUCE_SOURCE, symbols=ALLREDUCE_SYMBOLS, detail=True)
def tp_allreduce_latency_seconds(allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                                 activation_bytes_per_element, max_batched_tokens, allreduce_latency_seconds):
    return _from_knee((allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                       activation_bytes_per_element, max_batched_tokens),
                      lambda knee, t: knee.latency_seconds, allreduce_latency_seconds)


@formulas.formula(unit="B/s", meaning="bus bandwidth B_ar of one tensor-parallel all-reduce (nccl-tests' convention: "
                                      "2(t − 1)/t · S / its bandwidth-side time): the measured table's fit, else the "
                                      "TP group's link",
                  expression="2(t − 1)/t / β of the fit to the measured all-reduce table if a table covers the "
                             "accelerator, engine and TP (inside a node), else tp_link_bytes_per_s",
                  prose=True, source=ALLREDUCE_SOURCE, symbols=ALLREDUCE_SYMBOLS | {"t": "tensor_parallel"},
                  detail=True)
def tp_allreduce_bus_bytes_per_s(allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                                 activation_bytes_per_element, max_batched_tokens, tp_link_bytes_per_s):
    return _from_knee((allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                       activation_bytes_per_element, max_batched_tokens),
                      lambda knee, t: 2 * (t - 1) / t / knee.seconds_per_byte, tp_link_bytes_per_s)


@formulas.formula(unit="1", meaning="exponent q of the tensor-parallel all-reduces' knee (0 without a table: the "
                                    "step joins the two sides as their sum, q = 1)",
                  expression="q of the fit to the measured all-reduce table if a table covers the accelerator, "
                             "engine and TP (inside a node), else 0",
                  prose=True, source=ALLREDUCE_SOURCE, symbols=ALLREDUCE_SYMBOLS, detail=True)
def allreduce_knee_exponent(allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                            activation_bytes_per_element, max_batched_tokens):
    return _from_knee((allreduce_table_index, tensor_parallel, accelerators_per_node, hidden_size,
                       activation_bytes_per_element, max_batched_tokens), lambda knee, t: knee.exponent,
                      0.0 * tensor_parallel)


@formulas.formula(unit="s", meaning="latency side of a step's tensor-parallel collectives: their count × α",
                  expression="TP: 2·L_s·α (t > 1). Data-parallel attention: (L_s/L)·(2·(L − L_moe) + L·[t_a > 1])·α: "
                             "no all-reduce around attention unless its group spans t_a > 1 ranks, the dense layers' "
                             "gather before and scatter after their TP FFN, the MoE layers' exchange the all-to-all's",
                  prose=True, zero_when="tensor_parallel == 1",
                  source="Megatron-LM's two all-reduces per layer (Shoeybi et al. 2019); SGLang's DP-attention docs "
                         "and DeepSeek-V3 report §3.4: attention data-parallel (each request's attention on one DP "
                         "rank, all-reduced only within an attention-TP group), the dense FFN layers gathered and "
                         "scattered over the TP ranks, the MoE layers dispatched and combined by the all-to-all "
                         "(its latency: the expert exchange's, not here). Before: 2·L_s·α was charged under DP "
                         "attention too",
                  symbols={"L_s": "pipeline_stage_layers", "L": "layers", "L_moe": "moe_layers",
                           "t": "tensor_parallel", "t_a": "attention_tensor_parallel",
                           "α": "tp_allreduce_latency_seconds"})
def allreduce_seconds_per_step(pipeline_stage_layers, tensor_parallel, data_parallel_attention,
                               attention_tensor_parallel, layers, moe_layers, tp_allreduce_latency_seconds):
    spread = pipeline_stage_layers / layers * (2 * (layers - moe_layers)
                                               + layers * where(attention_tensor_parallel > 1, 1.0, 0.0))
    count = where(data_parallel_attention > 0, spread, 2 * pipeline_stage_layers)
    return where(tensor_parallel > 1, count * tp_allreduce_latency_seconds, 0.0)


@formulas.formula(unit="s", meaning="bandwidth side of a step's tensor-parallel all-reduces, per token the step "
                                    "carries (data-parallel attention: 0, its gathers are in "
                                    "communication_seconds_per_token)",
                  expression="2·L_s · 2(t − 1)/t · h·b / B_ar (0 under data-parallel attention)",
                  prose=True, zero_when="tensor_parallel == 1", detail=True,
                  source="all-reduce: Megatron-LM's two per layer (Shoeybi et al. 2019), ring bytes 2(t − 1)/t",
                  symbols={"L_s": "pipeline_stage_layers", "t": "tensor_parallel", "h": "hidden_size",
                           "b": "activation_bytes_per_element", "B_ar": "tp_allreduce_bus_bytes_per_s"})
def allreduce_seconds_per_token(pipeline_stage_layers, tensor_parallel, hidden_size, activation_bytes_per_element,
                                tp_allreduce_bus_bytes_per_s, data_parallel_attention):
    ring = 2 * (tensor_parallel - 1) / tensor_parallel * hidden_size * activation_bytes_per_element
    return where(data_parallel_attention > 0, 0.0, 2 * pipeline_stage_layers * ring / tp_allreduce_bus_bytes_per_s)


def allreduce_table_given(device, engine: str, latency_stated: bool) -> dict:
    """The graph input ``allreduce_table_index``: the measured all-reduce table of ``engine``'s kernel on ``device``
    (else NCCL's there), or −1 (the engine's α and the TP link); a stated all-reduce latency sets the table aside."""
    from botec.formulas import collective_tables

    key = getattr(device, "key", None)
    if latency_stated:
        return {"allreduce_table_index": Given(-1.0, "assumed", "the contract states its own all-reduce latency: α "
                                               "+ 2(t−1)/t · S / B_link with it and the TP link",
                                               "assumptions.allreduce_latency")}
    table = collective_tables.allreduce_table(key, engine)
    if table is None:
        return {"allreduce_table_index": Given(-1.0, "assumed", f"no measured all-reduce table for "
                                               f"{key or 'this accelerator'}: the engine's α + 2(t−1)/t · S / B_link "
                                               "(the TP link)", "supply.accelerator")}
    own = "" if table.name.startswith(f"allreduce-{engine}-") else f" (no table of {engine}'s own kernel: NCCL's)"
    return {"allreduce_table_index": Given(collective_tables.table_index(table), "measured",
                                           f"TP all-reduces priced from {table.describe()}{own}", "supply.accelerator")}


def allreduce_fit_said(given: dict) -> Given:
    """``allreduce_table_index`` with its reason completed for one layout of plain numbers: the fit's α, bus
    bandwidth, q and worst error on the table, or why the layout falls back to the engine's α and the TP link."""
    index = given["allreduce_table_index"]
    values = [given[name].value if name in given else None for name in ALLREDUCE_FIT[1:]]
    if index.value < 0 or any(v is None or getattr(v, "ndim", 0) for v in values):
        return index
    tp, per_node, hidden, width, budget = (float(v) for v in values)
    if tp < 2:
        return index
    knee = _allreduce_knee(index.value, tp, per_node, hidden, width, budget)
    if knee is None:
        why = (f"TP {tp:g} spans nodes ({per_node:g} accelerators per node)" if tp > per_node
               else f"TP {tp:g} is not among the table's ranks")
        return Given(index.value, index.provenance, f"{index.source}; {why}: the engine's α + 2(t−1)/t · S / B_link "
                     "(the TP link) instead", index.field)
    bus = 2 * (tp - 1) / tp / knee.seconds_per_byte
    return Given(index.value, index.provenance,
                 f"{index.source}; at TP {tp:g}, S = T × {hidden:,.0f} × {width:g} B for T = 1 … {budget:,.0f}: "
                 f"(α^q + (β·S)^q)^(1/q) with α = {knee.latency_seconds * 1e6:.2f} µs, bus bandwidth "
                 f"{bus / 1e9:,.0f} GB/s, q = {knee.exponent:.2f}, within {knee.worst_error:.0%} of the table at "
                 f"those {len(knee.tokens)} sizes", index.field)
