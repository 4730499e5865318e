"""Speculative decoding's draft: the weights and KV cache it keeps beside the target's, and the cost of a draft token.

A draft proposes k tokens that the target verifies in one step (Leviathan et al. 2023). What proposes
them (``assumptions.speculative_decoding.method``):

- **draft_model**: a separate small model of the same tokenizer, run with the target's TP (vLLM's
  ``draft_tensor_parallel_size`` defaults to the target's). It keeps all its weights and a KV cache of
  its own layers for every running request.
- **eagle**: an EAGLE head (Li et al. 2024, EAGLE-1/2): one decoder layer of the target's shape (its
  attention, a dense MLP of the target's FFN width, two norms) fed by a 2h → h projection of the
  target's hidden state and the next token's embedding; it shares the target's embeddings and LM head,
  and caches one layer's K and V.
- **mtp**: the model's own multi-token-prediction module (DeepSeek-V3 §2.2: one transformer block — an MoE
  layer for DeepSeek-V3 — a 2h → h projection and three norms, sharing the embeddings and output head;
  SGLang and vLLM run it as the draft), one layer of cache.
- **ngram**: prompt lookup (vLLM's ``[ngram]``): no weights, no cache, no GPU step.

Memory (per accelerator of the replica): the draft's resident parameters P_d at the weight format,
split over TP: P_d·b_w / t; its cache per token: E_d·b_kv / s_d (E_d its K/V elements per token over
its layers, s_d the ways TP splits them). The KV budget holds both caches: a request's token costs
the target's and the draft's bytes (vLLM allocates the draft's layers in the same blocks).

Cost: one draft token as a share of a target decode step, both at batch 1 and the mean context:

    cost = t_d / t(1),   t_d = (R_d·b_w / t + m_d·C̄) / (e_mem·BW) + (9·L_d + 2)·t0 + [t > 1] 2·L_d·α_ar

R_d the parameters one draft step reads (the draft's, plus the target's LM head that a head shares),
m_d its cache bytes per token on the device, C̄ the mean context, L_d its layers, t0 the engine's
fixed time per kernel (CUDA graphs), α_ar the latency of a small all-reduce; t(1) the target's
step of one decoding request (:func:`botec.serving.step.engine_step_seconds`, its engine overhead
included, which the draft's steps, run inside the same engine step, do not pay). A small model's step
is its weight read plus its kernels' fixed times — at batch 1 both, not its size alone, set it
(formula audit 2, §4 N9). The share is applied to the target's step at every batch (load.Replica).
A stated ``draft_cost`` replaces it; a draft model the contract does not name keeps the old default
(0.05) and adds no memory.
"""

from botec.graph import Formulas, where
from botec.serving.step_costs import KERNELS_PER_LAYER
from botec.serving.step import STEP_INPUTS, engine_step_seconds

formulas = Formulas(account="serving")

formulas.input("draft_parameters", unit="parameters", detail=True,
               meaning="speculative draft: parameters it keeps resident beside the target's (a head shares the "
                       "target's embeddings and LM head)")
formulas.input("draft_read_parameters", unit="parameters", detail=True,
               meaning="speculative draft: parameters one draft step reads at batch 1 (a head: its own and the "
                       "target's LM head)")
formulas.input("draft_layers", unit="layers", detail=True, meaning="speculative draft: its transformer layers")
formulas.input("draft_kv_elements_per_token", unit="1", detail=True,
               meaning="speculative draft: K and V elements one token adds to its cache, all its layers")
formulas.input("draft_kv_tensor_split", unit="1", detail=True,
               meaning="ways TP splits each token's draft KV (min(TP, its KV heads); 1 for an MLA latent)")


@formulas.formula(unit="B", meaning="speculative draft's weights resident on one accelerator",
                  expression="draft_parameters × weight_bytes_per_parameter / tensor_parallel",
                  source="the draft runs with the target's TP (vLLM: draft_tensor_parallel_size defaults to it)")
def draft_weight_bytes(draft_parameters, weight_bytes_per_parameter, tensor_parallel):
    return draft_parameters * weight_bytes_per_parameter / tensor_parallel


@formulas.formula(unit="B", meaning="speculative draft's KV-cache bytes one token adds on one accelerator",
                  expression="draft_kv_elements_per_token × kv_bytes_per_element / draft_kv_tensor_split", detail=True)
def draft_kv_bytes_per_token_per_device(draft_kv_elements_per_token, kv_bytes_per_element, draft_kv_tensor_split):
    return draft_kv_elements_per_token * kv_bytes_per_element / draft_kv_tensor_split


@formulas.formula(unit="s", meaning="one draft step of one request at the mean context (batch 1)",
                  expression="(draft_read_parameters × weight_bytes_per_parameter / tensor_parallel + "
                             "draft_kv_bytes_per_token_per_device × mean_kv_tokens_per_request) / "
                             "(memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s) + (9 × draft_layers + 2) × "
                             "kernel_overhead_seconds + (2 × draft_layers × tp_allreduce_latency_seconds if "
                             "tensor_parallel > 1 else 0); 0 without draft layers (ngram)",
                  source="the decode roofline at batch 1: the weight and cache reads, a fixed time per kernel (formula "
                         "audit 2, §4 N9)", prose=True, detail=True)
def draft_step_seconds(draft_read_parameters, weight_bytes_per_parameter, tensor_parallel,
                       draft_kv_bytes_per_token_per_device, mean_kv_tokens_per_request, memory_bandwidth_efficiency,
                       memory_bandwidth_bytes_per_s, draft_layers, kernel_overhead_seconds,
                       tp_allreduce_latency_seconds):
    reads = (draft_read_parameters * weight_bytes_per_parameter / tensor_parallel
             + draft_kv_bytes_per_token_per_device * mean_kv_tokens_per_request)
    fixed = ((KERNELS_PER_LAYER * draft_layers + 2) * kernel_overhead_seconds
             + where(tensor_parallel > 1, 2 * draft_layers * tp_allreduce_latency_seconds, 0.0))
    return reads / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s) + where(draft_layers > 0, fixed, 0.0)


@formulas.formula(unit="fraction", meaning="speculative decoding: one draft token's cost as a share of a target "
                                           "decode step",
                  expression="draft_step_seconds / the target's engine step of 1 decoding request at "
                             "mean_kv_tokens_per_request (no prefill)",
                  source="derived from the draft's shape (botec.serving.speculation); a stated draft_cost replaces it",
                  reads=STEP_INPUTS + ("draft_step_seconds", "mean_kv_tokens_per_request"))
def draft_step_cost(**values):
    costs = {name: values[name] for name in STEP_INPUTS}
    target = engine_step_seconds(1.0, values["mean_kv_tokens_per_request"], 0.0, 0.0, 1.0, **costs)
    return values["draft_step_seconds"] / target


@formulas.formula(unit="B", meaning="KV-cache bytes one token of a request holds on one accelerator: the target's "
                                    "and the speculative draft's",
                  expression="kv_bytes_per_token_per_device + draft_kv_bytes_per_token_per_device", detail=True)
def cache_bytes_per_token_per_device(kv_bytes_per_token_per_device, draft_kv_bytes_per_token_per_device):
    return kv_bytes_per_token_per_device + draft_kv_bytes_per_token_per_device
