"""Network, model parallel: tensor, pipeline, context and expert parallelism's exchanges, bytes and time.

Per layer and micro-batch on the busiest stage: TP's all-reduces (Shoeybi et al. 2019; reduce-scatter + all-gather
under sequence parallelism), the pipeline's sends of activations and gradients (× v chunks), ring attention's K, V
gathers (context parallel) and the experts' dispatch and combine all-to-alls (expert parallel).
"""

from botec.formulas.collectives import (all_reduce_bytes_sent, all_reduce_latency_steps, gather_bytes_sent,
                                        ring_collectives_seconds)
from botec.formulas.transformer import TP_ALL_REDUCES_PER_LAYER_FORWARD
from botec.graph import Formulas, maximum, minimum, where
from botec.training.network.data_parallel import MEASURED, measured_seconds

formulas = Formulas(account="network")


# --- tensor, pipeline, context and expert parallel -------------------------------------------------

@formulas.formula(unit="1", meaning="tensor-parallel all-reduces (or their equivalent in bytes) per layer per "
                                    "micro-batch",
                  expression="2 × (2 + full_recompute_share) + (1 if sequence_parallel else 0)",
                  source="Shoeybi et al. 2019: 2 in the forward, 2 in the backward; full recomputation repeats the "
                         "forward's 2 (on the share of the layers that recompute); with sequence parallelism Megatron "
                         "all-gathers the saved input again in the backward (2 all-gathers: one all-reduce's bytes; "
                         "Megatron-LM tensor_parallel/layers.py)",
                  detail=True)
def tp_collectives_per_layer(full_recompute_share, sequence_parallel):
    passes = 2 + full_recompute_share  # forward, backward (and the forward again where layers recompute)
    regather = where(sequence_parallel, 1, 0)
    return TP_ALL_REDUCES_PER_LAYER_FORWARD * passes + regather


@formulas.formula(unit="1", meaning="tensor-parallel all-reduces per step on the busiest stage",
                  expression="pipeline_stage_layers × gradient_accumulation_steps × tp_collectives_per_layer",
                  detail=True)
def tp_collectives_per_step(pipeline_stage_layers, gradient_accumulation_steps, tp_collectives_per_layer):
    return pipeline_stage_layers * gradient_accumulation_steps * tp_collectives_per_layer


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step for tensor parallelism",
                  expression="tp_collectives_per_step × 2 × (tensor_parallel − 1) / tensor_parallel"
                             " × layer_activation_bytes", zero_when="tensor_parallel == 1")
def tp_bytes_sent_per_step(tp_collectives_per_step, tensor_parallel, layer_activation_bytes):
    """With sequence parallelism each all-reduce is a reduce-scatter + all-gather: the same bytes."""
    return tp_collectives_per_step * all_reduce_bytes_sent(layer_activation_bytes, tensor_parallel)


@formulas.formula(unit="s", meaning="time per step of the tensor-parallel collectives (measured inside a node, else "
                                    "α–β)",
                  expression="tp_collectives_per_step × (L_rs(S, t) + L_ag(S, t) with sequence parallelism, else "
                             "L_ar(S, t)) from the measured tables if tp_collective_table_index ≥ 0, S = "
                             "layer_activation_bytes, t = tensor_parallel; else tp_collectives_per_step × "
                             "(steps(t) × tp_link_latency_seconds + 2(t − 1)/t × S / tp_link_bytes_per_s);"
                             " steps = 2(n − 1) for a ring, 2⌈log₂ n⌉ for a tree",
                  zero_when="tensor_parallel == 1", prose=True, source=MEASURED,
                  symbols={"n": "tensor_parallel", "tree": "collective_algorithm_tree"})
def tp_communication_seconds(tp_collectives_per_step, tensor_parallel, collective_algorithm_tree,
                             tp_link_latency_seconds, tp_link_bytes_per_s, tp_collective_table_index, layer_activation_bytes, sequence_parallel):
    """One all-reduce's worth each: an all-reduce, or under sequence parallelism a reduce-scatter and an all-gather
    of the same tensor (the backward's re-gather counted as one more such pair)."""
    modelled = (all_reduce_latency_steps(tensor_parallel, collective_algorithm_tree) * tp_link_latency_seconds
                + all_reduce_bytes_sent(layer_activation_bytes, tensor_parallel) / tp_link_bytes_per_s)
    pair = (measured_seconds("reducescatter", tp_collective_table_index, tensor_parallel, layer_activation_bytes,
                             modelled / 2)
            + measured_seconds("allgather", tp_collective_table_index, tensor_parallel, layer_activation_bytes,
                               modelled / 2))
    single = measured_seconds("allreduce", tp_collective_table_index, tensor_parallel, layer_activation_bytes,
                              modelled)
    return tp_collectives_per_step * where(sequence_parallel, pair, single)


# --- tensor-parallel communication overlapped with the GEMMs (Megatron-Core --tp-comm-overlap) -------------------
# Transformer Engine's userbuffers (transformer_engine/pytorch/module/base.py, initialize_ub) pair every collective of
# a sequence-parallel block with a GEMM of the same block: forward, the all-gather before QKV (FC1) with the QKV (FC1)
# GEMM (ring exchange) and the reduce-scatter after the output projection (FC2) with that GEMM (pipelined, 16 SMs);
# backward, the all-gather of the output gradient with the projection's (FC2's) data-gradient GEMM (ring exchange),
# the re-gather of the saved input with the QKV (FC1) data-gradient GEMM and the reduce-scatter of its result with the
# weight-gradient GEMM (bulk, 16 SMs). A block's collectives hide behind its own GEMMs and no others: what exceeds
# them is exposed, and where they overlap the SM-based ones slow the GEMM by σ / (1 − σ) of the overlapped time.
# The ring-exchange GEMMs run in t chunks and the pipelined ones in 4 (TE's num_splits defaults): each chunk one more
# kernel, (t − 1) or 3 more launches and last waves (the family's t0) per split GEMM.

TP_PIPELINE_SPLITS = 4   # Transformer Engine's num_splits for the pipelined reduce-scatter overlap (initialize_ub)


def _tp_block_exposed(collective, gemm, forward_passes, sm_share, tensor_parallel=1, kernel_overhead=0.0):
    """One block (attention or MLP) of one layer and micro-batch: forward 2 collectives beside the block's forward
    GEMMs g (one of them on SMs), backward 3 beside 2·g (two on SMs), the forward repeated where layers recompute;
    plus the split GEMMs' extra kernels: forward a ring-exchange GEMM in t chunks and a pipelined one in 4, backward
    one ring-exchange GEMM in t chunks."""
    slowdown = sm_share / (1 - sm_share)
    forward = (maximum(2 * collective - gemm, 0.0) + slowdown * minimum(collective, gemm)
               + (tensor_parallel - 1 + TP_PIPELINE_SPLITS - 1) * kernel_overhead)
    backward = (maximum(3 * collective - 2 * gemm, 0.0) + slowdown * minimum(2 * collective, 2 * gemm)
                + (tensor_parallel - 1) * kernel_overhead)
    return forward_passes * forward + backward


_TP_OVERLAP_SOURCE = ("Transformer Engine userbuffers (transformer_engine/pytorch/module/base.py initialize_ub: ring "
                      "exchange for qkv/fc1 fprop and proj/fc2 dgrad, pipeline for proj/fc2 fprop, bulk for qkv/fc1 "
                      "dgrad and wgrad; 16 SMs for pipeline and bulk by default); Megatron-Core --tp-comm-overlap")


@formulas.formula(unit="s", meaning="tensor-parallel communication per step that the GEMMs do not hide",
                  expression="tp_communication_seconds unless tp_comm_overlap; else L × m × Σ over the attention "
                             "(g = attention_projection_seconds) and MLP (g = the layers' mean MLP seconds) blocks of "
                             "(1 + φ) × (max(0, 2c − g) + σ/(1 − σ) × min(c, g)) + max(0, 3c − 2g) + σ/(1 − σ) × "
                             "min(2c, 2g) + the split GEMMs' extra kernels, (1 + φ) × (t + 2) × t0 + (t − 1) × t0; "
                             "c = tp_communication_seconds / (2 × tp_collectives_per_step), one "
                             "reduce-scatter or all-gather", source=_TP_OVERLAP_SOURCE, prose=True,
                  choice=("compute", "op_level"),
                  symbols={"L": "pipeline_stage_layers", "m": "gradient_accumulation_steps",
                           "φ": "full_recompute_share", "σ": "tp_overlap_sm_share", "t": "tensor_parallel",
                           "t0": "kernel_overhead_seconds"})
def exposed_tp_communication_seconds(tp_communication_seconds, tp_collectives_per_step, tp_comm_overlap,
                                     tp_overlap_sm_share, attention_projection_seconds, dense_mlp_seconds,
                                     expert_mlp_seconds, moe_layers, layers, full_recompute_share,
                                     pipeline_stage_layers, gradient_accumulation_steps, tensor_parallel,
                                     kernel_overhead_seconds):
    """Sequential (Megatron's default) the whole TP time; overlapped, block by block as _tp_block_exposed."""
    collective = tp_communication_seconds / maximum(2 * tp_collectives_per_step, 1.0)
    mlp = (dense_mlp_seconds * (layers - moe_layers) + expert_mlp_seconds * moe_layers) / layers
    passes = 1 + full_recompute_share
    per_layer = (_tp_block_exposed(collective, attention_projection_seconds, passes, tp_overlap_sm_share,
                                   tensor_parallel, kernel_overhead_seconds)
                 + _tp_block_exposed(collective, mlp, passes, tp_overlap_sm_share, tensor_parallel,
                                     kernel_overhead_seconds))
    overlapped = pipeline_stage_layers * gradient_accumulation_steps * per_layer
    return where(tp_comm_overlap > 0, minimum(overlapped, tp_communication_seconds), tp_communication_seconds)


@formulas.formula(unit="s", meaning="tensor-parallel communication per step that the GEMMs do not hide",
                  expression="tp_communication_seconds unless tp_comm_overlap; else L × m × the one-block form of the "
                             "op-level formula with g = microbatch_compute_seconds / (3 × L) and twice the "
                             "collectives (a flat compute model does not split a layer's GEMMs)",
                  source=_TP_OVERLAP_SOURCE, prose=True, choice=("compute", "model_flops"),
                  symbols={"L": "pipeline_stage_layers", "m": "gradient_accumulation_steps"})
@formulas.formula(unit="s", meaning="tensor-parallel communication per step that the GEMMs do not hide",
                  expression="as with model_flops: the one-block form with g = microbatch_compute_seconds / (3 × L)",
                  source=_TP_OVERLAP_SOURCE, prose=True, choice=("compute", "hardware_flops"))
def exposed_tp_communication_seconds(tp_communication_seconds, tp_collectives_per_step, tp_comm_overlap,  # noqa: F811
                                     tp_overlap_sm_share, microbatch_compute_seconds, full_recompute_share,
                                     pipeline_stage_layers, gradient_accumulation_steps):
    layers = maximum(pipeline_stage_layers, 1.0)
    collective = tp_communication_seconds / maximum(2 * tp_collectives_per_step, 1.0)
    gemm = microbatch_compute_seconds / (3 * layers) / 2   # each of two blocks' share of a layer's forward
    per_layer = 2 * _tp_block_exposed(collective, gemm, 1 + full_recompute_share, tp_overlap_sm_share)
    overlapped = pipeline_stage_layers * gradient_accumulation_steps * per_layer
    return where(tp_comm_overlap > 0, minimum(overlapped, tp_communication_seconds), tp_communication_seconds)


@formulas.formula(unit="1", meaning="pipeline sends per step: activations forward, gradients backward, per "
                                    "micro-batch and model chunk",
                  expression="2 × gradient_accumulation_steps × virtual_pipeline_stages", detail=True)
def pp_sends_per_step(gradient_accumulation_steps, virtual_pipeline_stages):
    return 2 * gradient_accumulation_steps * virtual_pipeline_stages


@formulas.formula(unit="B", meaning="bytes each stage sends per step to the next (activations, and gradients back)",
                  expression="pp_sends_per_step × layer_activation_bytes / tensor_parallel",
                  source="Narayanan et al. 2021 §4.1: each TP rank sends its 1/t of the hidden state (scatter) and the "
                         "receiving stage all-gathers it over NVLink; with sequence parallelism it is already split",
                  zero_when="pipeline_parallel == 1")
def pp_bytes_sent_per_step(pp_sends_per_step, layer_activation_bytes, tensor_parallel):
    """One micro-batch's hidden state, 1/t of it per TP rank."""
    return pp_sends_per_step * layer_activation_bytes / tensor_parallel


@formulas.formula(unit="s", meaning="time per step of the pipeline sends and receives (α–β)",
                  expression="pp_sends_per_step × pp_link_latency_seconds + pp_bytes_sent_per_step / pp_link_bytes_per_s",
                  zero_when="pipeline_parallel == 1")
def pp_communication_seconds(pp_sends_per_step, pp_link_latency_seconds, pp_bytes_sent_per_step, pp_link_bytes_per_s):
    return pp_sends_per_step * pp_link_latency_seconds + pp_bytes_sent_per_step / pp_link_bytes_per_s


@formulas.formula(unit="B", meaning="keys and values of the whole sequence, as one TP rank holds them",
                  expression="micro_batch_size × sequence_length × kv_heads × (qk_head_dim + v_head_dim)"
                             " × activation_bytes_per_element / tensor_parallel", detail=True)
def kv_sequence_bytes(micro_batch_size, sequence_length, kv_heads, qk_head_dim, v_head_dim,
                      activation_bytes_per_element, tensor_parallel):
    return (micro_batch_size * sequence_length * kv_heads * (qk_head_dim + v_head_dim)
            * activation_bytes_per_element / tensor_parallel)


@formulas.formula(unit="1", meaning="context-parallel exchanges per step: all-gather K, V forward and backward, "
                                    "reduce-scatter their gradients, per layer and micro-batch",
                  expression="pipeline_stage_layers × gradient_accumulation_steps × 3",
                  source="ring attention (Liu et al. 2023); Megatron's context parallelism", detail=True)
def cp_collectives_per_step(pipeline_stage_layers, gradient_accumulation_steps):
    return pipeline_stage_layers * gradient_accumulation_steps * 3


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step for context parallelism",
                  expression="cp_collectives_per_step × (context_parallel − 1) / context_parallel × kv_sequence_bytes",
                  zero_when="context_parallel == 1")
def cp_bytes_sent_per_step(cp_collectives_per_step, context_parallel, kv_sequence_bytes):
    return cp_collectives_per_step * gather_bytes_sent(kv_sequence_bytes, context_parallel)


@formulas.formula(unit="s", meaning="time per step of the context-parallel exchanges (α–β)",
                  expression="cp_collectives_per_step × (context_parallel − 1) × cp_link_latency_seconds"
                             " + cp_bytes_sent_per_step / cp_link_bytes_per_s",
                  zero_when="context_parallel == 1")
def cp_communication_seconds(cp_collectives_per_step, context_parallel, cp_link_latency_seconds,
                             cp_bytes_sent_per_step, cp_link_bytes_per_s):
    return ring_collectives_seconds(cp_collectives_per_step, context_parallel, cp_link_latency_seconds,
                                    cp_bytes_sent_per_step, cp_link_bytes_per_s)


@formulas.formula(unit="B", meaning="tokens' hidden states one accelerator routes to experts per MoE layer",
                  expression="layer_activation_bytes × experts_per_token / (tensor_parallel if sequence_parallel"
                             " else 1)",
                  source="with sequence parallelism each TP rank dispatches its own s/t tokens (Megatron-Core MoE "
                         "token dispatcher)", detail=True, prose=True)
def expert_dispatch_bytes(layer_activation_bytes, experts_per_token, tensor_parallel, sequence_parallel):
    return layer_activation_bytes * experts_per_token / where(sequence_parallel, tensor_parallel, 1)


@formulas.formula(unit="1", meaning="expert all-to-alls per step on the busiest stage: dispatch and combine, forward "
                                    "and backward, per MoE layer and micro-batch",
                  expression="moe_layers × pipeline_stage_layers / layers × gradient_accumulation_steps × 4",
                  source="GShard (Lepikhin et al. 2020)", detail=True)
def ep_collectives_per_step(moe_layers, pipeline_stage_layers, layers, gradient_accumulation_steps):
    return moe_layers * pipeline_stage_layers / layers * gradient_accumulation_steps * 4


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step in expert all-to-alls",
                  expression="ep_collectives_per_step × (expert_parallel − 1) / expert_parallel × expert_dispatch_bytes",
                  zero_when="expert_parallel == 1")
def ep_bytes_sent_per_step(ep_collectives_per_step, expert_parallel, expert_dispatch_bytes):
    return ep_collectives_per_step * gather_bytes_sent(expert_dispatch_bytes, expert_parallel)


@formulas.formula(unit="s", meaning="time per step of the expert all-to-alls (α–β)",
                  expression="ep_collectives_per_step × (expert_parallel − 1) × ep_link_latency_seconds"
                             " + ep_bytes_sent_per_step / ep_link_bytes_per_s",
                  zero_when="expert_parallel == 1")
def ep_communication_seconds(ep_collectives_per_step, expert_parallel, ep_link_latency_seconds,
                             ep_bytes_sent_per_step, ep_link_bytes_per_s):
    return ring_collectives_seconds(ep_collectives_per_step, expert_parallel, ep_link_latency_seconds,
                                    ep_bytes_sent_per_step, ep_link_bytes_per_s)
