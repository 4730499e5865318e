"""Network: every recurring collective, its bytes per step, the link it crosses, its time.

Source: lesson 000 ("Network: count traffic at each synchronization boundary"): the ring
all-reduce sends 2(N−1)/N · M per participant. Beyond replicated data parallelism:

- data parallel: plain data parallelism all-reduces the gradients over the DP ranks once per
  step. ZeRO/FSDP reduce-scatters them over the shard group (and, with hybrid sharding,
  all-reduces the shards across the replicas): once per step for ZeRO-1 (Megatron's distributed
  optimizer), every micro-batch for ZeRO-2/3 and FSDP (DeepSpeed engine.allreduce_gradients). The
  weights are all-gathered once per step after the optimizer (ZeRO-1/2), before the forward and
  the backward of every micro-batch (ZeRO-3, FSDP full shard; Rajbhandari et al. 2020 §7), or once
  per micro-batch (FSDP shard_grad_op). Gradients travel in the optimizer preset's gradient bytes
  (FP32 for Megatron's). Expert gradients and weights do the same over the expert data-parallel
  group instead: the ranks that hold the same expert, EP apart (shard / EP of them under ZeRO, DP / EP
  without), at that group's own link (Megatron-Core's expert_data_parallel_group).
- tensor parallel: 2 all-reduces of the layer's output in the forward pass and 2 in the
  backward, per layer per micro-batch (Shoeybi et al. 2019); with sequence parallelism each is
  a reduce-scatter + all-gather of the same total size (Korthikanti et al. 2022), and the
  backward all-gathers the saved input again (one more all-reduce's bytes); full recomputation
  repeats the forward's 2.
- pipeline parallel: each stage sends a micro-batch's activations forward and their gradients
  backward (× v chunks when interleaved), 1/t of the hidden state per TP rank (scatter-gather).
- context parallel (ring attention): each layer all-gathers the K and V chunks of the sequence
  in the forward and again in the backward, and reduce-scatters their gradients.
- expert parallel: dispatch and combine all-to-alls per MoE layer, forward and backward.

Each collective is written once as *how many per step* × *one collective* (bytes, or time with
the α–β model of :mod:`botec.formulas.collectives`) over the link of the group it runs in
(:mod:`botec.formulas.links`; across nodes a group's ranks in one node pool their NICs,
:func:`botec.formulas.collectives.hierarchical_bytes_per_s`). A group of one rank sends nothing and
needs no link (``zero_when``). The stage with the most layers sets the per-layer counts. What compute
does not hide is exposed: the model-parallel share ``1 − model_parallel_overlap``; the data-parallel
share ``1 − data_parallel_overlap``, but never more hidden than the backward it overlaps, or, for
weights gathered per micro-batch (ZeRO-3, FSDP), than each layer's compute hides of the next layer's
gather and reduce-scatter (prefetch one layer ahead).
"""

from botec.formulas.collectives import (all_reduce_bytes_sent, all_reduce_latency_steps, gather_bytes_sent,
                                        ring_collectives_seconds)
from botec.formulas.transformer import TP_ALL_REDUCES_PER_LAYER_FORWARD
from botec.graph import Formulas, maximum, minimum, where

formulas = Formulas(account="network")

formulas.input("collective_algorithm_tree", unit="1",
               meaning="all-reduce algorithm: 0 ring, 1 tree (fewer latency steps, same bytes)")
formulas.input("data_parallel_overlap", unit="1",
               meaning="share of data-parallel communication hidden behind the backward pass")
formulas.input("model_parallel_overlap", unit="1", meaning="share of TP, CP, EP and PP communication hidden behind "
                                                           "compute")
formulas.input("replica_groups", unit="1", meaning="replicas of each ZeRO/FSDP shard group (hybrid sharding: > 1)")
formulas.input("expert_data_parallel_degree", unit="1", meaning="data-parallel replicas of each expert: DP / EP")
formulas.input("parameter_gathers_per_microbatch", unit="1", detail=True,
               meaning="weight all-gathers per micro-batch: 2 for ZeRO-3 / FSDP full shard (forward and backward), "
                       "1 for FSDP shard_grad_op, 0 otherwise")
formulas.input("post_step_parameter_gathers", unit="1", detail=True,
               meaning="weight all-gathers after the optimizer step: 1 for ZeRO-1/2 (the updated shards), 0 otherwise")


# --- data parallel: the gradients ---------------------------------------------------------------

@formulas.formula(unit="B", meaning="one full gradient message of the trainable parameters one accelerator holds",
                  expression="trainable_parameters_per_device × gradient_bytes_per_parameter",
                  source="lesson 000: 10⁹ × 2 B = 2 GB; under LoRA only the adapters have gradients")
def gradient_bytes(trainable_parameters_per_device, gradient_bytes_per_parameter):
    """M = trainable parameters held × bytes per gradient element."""
    return trainable_parameters_per_device * gradient_bytes_per_parameter


@formulas.formula(unit="B", meaning="the expert part of that gradient message",
                  expression="trainable_expert_parameters_per_device × gradient_bytes_per_parameter", detail=True)
def expert_gradient_bytes(trainable_expert_parameters_per_device, gradient_bytes_per_parameter):
    return trainable_expert_parameters_per_device * gradient_bytes_per_parameter


@formulas.formula(unit="B", meaning="the non-expert part of that gradient message",
                  expression="gradient_bytes − expert_gradient_bytes", detail=True)
def dense_gradient_bytes(gradient_bytes, expert_gradient_bytes):
    return gradient_bytes - expert_gradient_bytes


@formulas.formula(unit="1", meaning="gradient reductions per step: every micro-batch under ZeRO-2/3 and FSDP, once "
                                    "per step otherwise",
                  expression="gradient_accumulation_steps if zero_stage ≥ 2 else 1",
                  source="DeepSpeed runtime/engine.py allreduce_gradients: 'ZeRO stage >= 2 communicates during non "
                         "gradient accumulation boundaries as well'; FSDP reduce-scatters in every backward",
                  detail=True)
def gradient_reduce_rounds(gradient_accumulation_steps, zero_stage):
    return where(zero_stage >= 2, gradient_accumulation_steps, 1)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step reduce-scattering the dense gradients "
                                    "over the ZeRO / FSDP shard group",
                  expression="gradient_reduce_rounds × (sharding_degree − 1) / sharding_degree × dense_gradient_bytes",
                  source="ZeRO (Rajbhandari et al. 2020 §7): each rank keeps the reduced gradients of its shard",
                  zero_when="zero_stage < 1 or sharding_degree == 1", detail=True)
def gradient_reduce_scatter_bytes_sent_per_step(gradient_reduce_rounds, sharding_degree, dense_gradient_bytes):
    return gradient_reduce_rounds * gather_bytes_sent(dense_gradient_bytes, sharding_degree)


@formulas.formula(unit="s", meaning="time per step of that reduce-scatter (α–β)",
                  expression="gradient_reduce_rounds × (sharding_degree − 1) × shard_link_latency_seconds"
                             " + gradient_reduce_scatter_bytes_sent_per_step / shard_link_bytes_per_s",
                  zero_when="zero_stage < 1 or sharding_degree == 1", detail=True)
def gradient_reduce_scatter_seconds(gradient_reduce_rounds, sharding_degree, shard_link_latency_seconds,
                                    gradient_reduce_scatter_bytes_sent_per_step, shard_link_bytes_per_s):
    return ring_collectives_seconds(gradient_reduce_rounds, sharding_degree, shard_link_latency_seconds, gradient_reduce_scatter_bytes_sent_per_step, shard_link_bytes_per_s)


@formulas.formula(unit="B", meaning="the dense gradients each all-reduce carries (ZeRO: one shard)",
                  expression="dense_gradient_bytes / sharding_degree if zero_stage ≥ 1 else dense_gradient_bytes",
                  detail=True)
def gradient_all_reduce_message_bytes(dense_gradient_bytes, sharding_degree, zero_stage):
    return dense_gradient_bytes / where(zero_stage >= 1, sharding_degree, 1)


@formulas.formula(unit="1", meaning="ranks the dense gradients are all-reduced over (ZeRO: the replicas of each shard "
                                    "group, 1 unless hybrid)",
                  expression="replica_groups if zero_stage ≥ 1 else data_parallel_degree", detail=True)
def gradient_all_reduce_ranks(replica_groups, data_parallel_degree, zero_stage):
    return where(zero_stage >= 1, replica_groups, data_parallel_degree)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step all-reducing the dense gradients (ring)",
                  expression="gradient_reduce_rounds × 2 × (gradient_all_reduce_ranks − 1) / gradient_all_reduce_ranks"
                             " × gradient_all_reduce_message_bytes",
                  source="lesson 000: 2(4 − 1)/4 × 2 GB = 3 GB", zero_when="gradient_all_reduce_ranks == 1",
                  detail=True)
def gradient_all_reduce_bytes_sent_per_step(gradient_reduce_rounds, gradient_all_reduce_message_bytes,
                                            gradient_all_reduce_ranks):
    """Ring all-reduce: 2(N−1)/N · M sent (and as much received) per participant per reduction."""
    return gradient_reduce_rounds * all_reduce_bytes_sent(gradient_all_reduce_message_bytes, gradient_all_reduce_ranks)


@formulas.formula(unit="s", meaning="time per step of that all-reduce (α–β)",
                  expression="gradient_reduce_rounds × steps(gradient_all_reduce_ranks) × dp_link_latency_seconds"
                             " + gradient_all_reduce_bytes_sent_per_step / dp_link_bytes_per_s;"
                             " steps = 2(n − 1) for a ring, 2⌈log₂ n⌉ for a tree",
                  zero_when="gradient_all_reduce_ranks == 1", detail=True, prose=True,
                  symbols={"n": "gradient_all_reduce_ranks", "tree": "collective_algorithm_tree"})
def gradient_all_reduce_seconds(gradient_reduce_rounds, gradient_all_reduce_ranks, collective_algorithm_tree,
                                dp_link_latency_seconds, gradient_all_reduce_bytes_sent_per_step, dp_link_bytes_per_s):
    return (gradient_reduce_rounds * all_reduce_latency_steps(gradient_all_reduce_ranks, collective_algorithm_tree)
            * dp_link_latency_seconds + gradient_all_reduce_bytes_sent_per_step / dp_link_bytes_per_s)


# --- data parallel: the expert gradients, over the expert data-parallel group ------------------------
#
# The ranks that hold the same expert sit EP apart in Megatron's order (TP, CP, DP ⊃ EP): DP / EP of them, or,
# under ZeRO/FSDP, shard / EP of them in each shard group (memory shards the expert state over these:
# :func:`botec.training.memory.expert_sharding_degree`). Their collectives run at that group's own link
# (``edp_link_*``, placed by :mod:`botec.inputs.cluster`): with EP filling a node, one rank per node, one NIC.

@formulas.formula(unit="B", meaning="bytes each accelerator sends per step reduce-scattering the expert gradients "
                                    "over the expert data-parallel ranks of its shard group",
                  expression="gradient_reduce_rounds × (expert_sharding_degree − 1) / expert_sharding_degree"
                             " × expert_gradient_bytes",
                  source="Megatron-Core distributed optimizer (expert_data_parallel_group) and DeepSpeed MoE "
                         "(expert_data_parallel_group): each rank keeps the reduced gradients of its shard of its "
                         "experts, the shard memory holds (gradient_memory_bytes)",
                  zero_when="zero_stage < 1 or expert_sharding_degree == 1 or expert_parameters == 0", detail=True)
def expert_gradient_reduce_scatter_bytes_sent_per_step(gradient_reduce_rounds, expert_sharding_degree,
                                                       expert_gradient_bytes):
    """(e − 1)/e · M_expert per reduction, e = sharding degree / EP: each rank sends e − 1 shards of the 1/e it
    keeps, every micro-batch under ZeRO-2/3 (as the dense gradients), once per step under ZeRO-1."""
    return gradient_reduce_rounds * gather_bytes_sent(expert_gradient_bytes, expert_sharding_degree)


@formulas.formula(unit="s", meaning="time per step of that reduce-scatter (α–β)",
                  expression="gradient_reduce_rounds × (expert_sharding_degree − 1) × edp_link_latency_seconds"
                             " + expert_gradient_reduce_scatter_bytes_sent_per_step / edp_link_bytes_per_s",
                  zero_when="zero_stage < 1 or expert_sharding_degree == 1 or expert_parameters == 0", detail=True)
def expert_gradient_reduce_scatter_seconds(gradient_reduce_rounds, expert_sharding_degree, edp_link_latency_seconds,
                                           expert_gradient_reduce_scatter_bytes_sent_per_step, edp_link_bytes_per_s):
    return ring_collectives_seconds(gradient_reduce_rounds, expert_sharding_degree, edp_link_latency_seconds, expert_gradient_reduce_scatter_bytes_sent_per_step, edp_link_bytes_per_s)


@formulas.formula(unit="B", meaning="the expert gradients each all-reduce carries (ZeRO: one shard)",
                  expression="expert_gradient_bytes / expert_sharding_degree if zero_stage ≥ 1"
                             " else expert_gradient_bytes", detail=True)
def expert_gradient_all_reduce_message_bytes(expert_gradient_bytes, expert_sharding_degree, zero_stage):
    return expert_gradient_bytes / where(zero_stage >= 1, expert_sharding_degree, 1)


@formulas.formula(unit="1", meaning="ranks the expert gradients are all-reduced over: the DP / EP replicas of each "
                                    "expert (ZeRO: the replicas of each shard group, 1 unless hybrid)",
                  expression="replica_groups if zero_stage ≥ 1 else expert_data_parallel_degree", detail=True)
def expert_gradient_all_reduce_ranks(replica_groups, expert_data_parallel_degree, zero_stage):
    return where(zero_stage >= 1, replica_groups, expert_data_parallel_degree)


@formulas.formula(unit="B/s", meaning="bandwidth of the link the expert gradient all-reduce crosses: the expert "
                                      "data-parallel group's (no ZeRO), the dense replicas' (hybrid sharding: the "
                                      "same ranks, one of each shard group)",
                  expression="dp_link_bytes_per_s if zero_stage ≥ 1 else edp_link_bytes_per_s", detail=True)
def expert_gradient_all_reduce_link_bytes_per_s(dp_link_bytes_per_s, edp_link_bytes_per_s, zero_stage):
    return where(zero_stage >= 1, dp_link_bytes_per_s, edp_link_bytes_per_s)


@formulas.formula(unit="s", meaning="latency per step of that link",
                  expression="dp_link_latency_seconds if zero_stage ≥ 1 else edp_link_latency_seconds", detail=True)
def expert_gradient_all_reduce_link_latency_seconds(dp_link_latency_seconds, edp_link_latency_seconds, zero_stage):
    return where(zero_stage >= 1, dp_link_latency_seconds, edp_link_latency_seconds)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step all-reducing the expert gradients (ring)",
                  expression="gradient_reduce_rounds × 2 × (expert_gradient_all_reduce_ranks − 1)"
                             " / expert_gradient_all_reduce_ranks × expert_gradient_all_reduce_message_bytes",
                  zero_when="expert_parameters == 0 or expert_gradient_all_reduce_ranks == 1", detail=True)
def expert_gradient_all_reduce_bytes_sent_per_step(gradient_reduce_rounds, expert_gradient_all_reduce_message_bytes,
                                                   expert_gradient_all_reduce_ranks):
    return gradient_reduce_rounds * all_reduce_bytes_sent(expert_gradient_all_reduce_message_bytes,
                                                          expert_gradient_all_reduce_ranks)


@formulas.formula(unit="s", meaning="time per step of that all-reduce (α–β)",
                  expression="gradient_reduce_rounds × steps(expert_gradient_all_reduce_ranks)"
                             " × expert_gradient_all_reduce_link_latency_seconds"
                             " + expert_gradient_all_reduce_bytes_sent_per_step"
                             " / expert_gradient_all_reduce_link_bytes_per_s;"
                             " steps = 2(n − 1) for a ring, 2⌈log₂ n⌉ for a tree",
                  zero_when="expert_parameters == 0 or expert_gradient_all_reduce_ranks == 1", detail=True, prose=True,
                  symbols={"n": "expert_gradient_all_reduce_ranks", "tree": "collective_algorithm_tree"})
def expert_gradient_all_reduce_seconds(gradient_reduce_rounds, expert_gradient_all_reduce_ranks,
                                       collective_algorithm_tree, expert_gradient_all_reduce_link_latency_seconds,
                                       expert_gradient_all_reduce_bytes_sent_per_step,
                                       expert_gradient_all_reduce_link_bytes_per_s):
    return (gradient_reduce_rounds
            * all_reduce_latency_steps(expert_gradient_all_reduce_ranks, collective_algorithm_tree)
            * expert_gradient_all_reduce_link_latency_seconds
            + expert_gradient_all_reduce_bytes_sent_per_step / expert_gradient_all_reduce_link_bytes_per_s)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step to synchronize the gradients",
                  expression="gradient_reduce_scatter_bytes_sent_per_step + gradient_all_reduce_bytes_sent_per_step"
                             " + expert_gradient_reduce_scatter_bytes_sent_per_step"
                             " + expert_gradient_all_reduce_bytes_sent_per_step")
def gradient_sync_bytes_sent_per_step(gradient_reduce_scatter_bytes_sent_per_step,
                                      gradient_all_reduce_bytes_sent_per_step,
                                      expert_gradient_reduce_scatter_bytes_sent_per_step,
                                      expert_gradient_all_reduce_bytes_sent_per_step):
    return (gradient_reduce_scatter_bytes_sent_per_step + gradient_all_reduce_bytes_sent_per_step
            + expert_gradient_reduce_scatter_bytes_sent_per_step + expert_gradient_all_reduce_bytes_sent_per_step)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step to synchronize gradients (the lesson's "
                                    "name for the ring all-reduce's bytes)",
                  expression="gradient_sync_bytes_sent_per_step", source="lesson 000: 2(4 − 1)/4 × 2 GB = 3 GB")
def ring_bytes_sent_per_step(gradient_sync_bytes_sent_per_step):
    return gradient_sync_bytes_sent_per_step


@formulas.formula(unit="s", meaning="time per step of the gradient synchronization (α–β)",
                  expression="gradient_reduce_scatter_seconds + gradient_all_reduce_seconds"
                             " + expert_gradient_reduce_scatter_seconds + expert_gradient_all_reduce_seconds")
def gradient_sync_seconds(gradient_reduce_scatter_seconds, gradient_all_reduce_seconds,
                          expert_gradient_reduce_scatter_seconds, expert_gradient_all_reduce_seconds):
    return (gradient_reduce_scatter_seconds + gradient_all_reduce_seconds + expert_gradient_reduce_scatter_seconds
            + expert_gradient_all_reduce_seconds)


# --- ZeRO-3 / FSDP: the weights -------------------------------------------------------------------

@formulas.formula(unit="1", meaning="weight all-gathers per step: per micro-batch (ZeRO-3 / FSDP) and after the "
                                    "optimizer step (ZeRO-1/2)",
                  expression="parameter_gathers_per_microbatch × gradient_accumulation_steps"
                             " + post_step_parameter_gathers",
                  source="Rajbhandari et al. 2020 §7: ZeRO-3 gathers before the forward and before the backward; "
                         "ZeRO-1/2 and Megatron's distributed optimizer gather the updated shards once per step",
                  detail=True)
def parameter_gathers_per_step(parameter_gathers_per_microbatch, gradient_accumulation_steps,
                               post_step_parameter_gathers):
    return parameter_gathers_per_microbatch * gradient_accumulation_steps + post_step_parameter_gathers


@formulas.formula(unit="B", meaning="the weights one accelerator works with, gathered from their shards",
                  expression="trainable_parameters_per_device × weight_bytes_per_parameter + (frozen_dense_weight_bytes"
                             " + frozen_expert_weight_bytes if parameter_gathers_per_microbatch > 0 else 0)",
                  source="a frozen LoRA base is gathered at its stored bytes (4-bit: packed) before each use under "
                         "ZeRO-3 / FSDP, and never after the optimizer step (it does not change)", detail=True)
def parameter_gather_message_bytes(trainable_parameters_per_device, weight_bytes_per_parameter,
                                   frozen_dense_weight_bytes, frozen_expert_weight_bytes,
                                   parameter_gathers_per_microbatch):
    frozen = where(parameter_gathers_per_microbatch > 0, frozen_dense_weight_bytes + frozen_expert_weight_bytes, 0.0)
    return trainable_parameters_per_device * weight_bytes_per_parameter + frozen


@formulas.formula(unit="B", meaning="the expert part of that weight message",
                  expression="trainable_expert_parameters_per_device × weight_bytes_per_parameter"
                             " + (frozen_expert_weight_bytes if parameter_gathers_per_microbatch > 0 else 0)",
                  detail=True)
def expert_parameter_gather_message_bytes(trainable_expert_parameters_per_device, weight_bytes_per_parameter,
                                          frozen_expert_weight_bytes, parameter_gathers_per_microbatch):
    frozen = where(parameter_gathers_per_microbatch > 0, frozen_expert_weight_bytes, 0.0)
    return trainable_expert_parameters_per_device * weight_bytes_per_parameter + frozen


@formulas.formula(unit="B", meaning="the non-expert part of that weight message",
                  expression="parameter_gather_message_bytes − expert_parameter_gather_message_bytes", detail=True)
def dense_parameter_gather_message_bytes(parameter_gather_message_bytes, expert_parameter_gather_message_bytes):
    return parameter_gather_message_bytes - expert_parameter_gather_message_bytes


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step all-gathering the sharded non-expert "
                                    "weights over the shard group",
                  expression="parameter_gathers_per_step × (sharding_degree − 1) / sharding_degree"
                             " × dense_parameter_gather_message_bytes",
                  zero_when="zero_stage < 1 or sharding_degree == 1", detail=True)
def dense_parameter_gather_bytes_sent_per_step(parameter_gathers_per_step, sharding_degree,
                                               dense_parameter_gather_message_bytes):
    return parameter_gathers_per_step * gather_bytes_sent(dense_parameter_gather_message_bytes, sharding_degree)


@formulas.formula(unit="s", meaning="time per step of those all-gathers (α–β)",
                  expression="parameter_gathers_per_step × (sharding_degree − 1) × shard_link_latency_seconds"
                             " + dense_parameter_gather_bytes_sent_per_step / shard_link_bytes_per_s",
                  zero_when="zero_stage < 1 or sharding_degree == 1", detail=True)
def dense_parameter_gather_seconds(parameter_gathers_per_step, sharding_degree, shard_link_latency_seconds,
                                   dense_parameter_gather_bytes_sent_per_step, shard_link_bytes_per_s):
    return ring_collectives_seconds(parameter_gathers_per_step, sharding_degree, shard_link_latency_seconds, dense_parameter_gather_bytes_sent_per_step, shard_link_bytes_per_s)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step all-gathering the sharded expert weights "
                                    "over the expert data-parallel ranks of its shard group",
                  expression="parameter_gathers_per_step × (expert_sharding_degree − 1) / expert_sharding_degree"
                             " × expert_parameter_gather_message_bytes",
                  source="Megatron-Core's distributed optimizer gathers the expert parameters over the expert "
                         "data-parallel group (the ranks memory shards them over), not the whole DP group",
                  zero_when="zero_stage < 1 or expert_sharding_degree == 1 or expert_parameters == 0", detail=True)
def expert_parameter_gather_bytes_sent_per_step(parameter_gathers_per_step, expert_sharding_degree,
                                                expert_parameter_gather_message_bytes):
    """(e − 1)/e · W_expert per gather, e = sharding degree / EP (ZeRO-1/2: once after the step)."""
    return parameter_gathers_per_step * gather_bytes_sent(expert_parameter_gather_message_bytes,
                                                          expert_sharding_degree)


@formulas.formula(unit="s", meaning="time per step of those all-gathers (α–β)",
                  expression="parameter_gathers_per_step × (expert_sharding_degree − 1) × edp_link_latency_seconds"
                             " + expert_parameter_gather_bytes_sent_per_step / edp_link_bytes_per_s",
                  zero_when="zero_stage < 1 or expert_sharding_degree == 1 or expert_parameters == 0", detail=True)
def expert_parameter_gather_seconds(parameter_gathers_per_step, expert_sharding_degree, edp_link_latency_seconds,
                                    expert_parameter_gather_bytes_sent_per_step, edp_link_bytes_per_s):
    return ring_collectives_seconds(parameter_gathers_per_step, expert_sharding_degree, edp_link_latency_seconds, expert_parameter_gather_bytes_sent_per_step, edp_link_bytes_per_s)


@formulas.formula(unit="B", meaning="bytes each accelerator sends per step to all-gather sharded weights",
                  expression="dense_parameter_gather_bytes_sent_per_step + expert_parameter_gather_bytes_sent_per_step")
def parameter_gather_bytes_sent_per_step(dense_parameter_gather_bytes_sent_per_step,
                                         expert_parameter_gather_bytes_sent_per_step):
    return dense_parameter_gather_bytes_sent_per_step + expert_parameter_gather_bytes_sent_per_step


@formulas.formula(unit="s", meaning="time per step of the weight all-gathers (α–β): the non-expert weights over the "
                                    "shard group, the experts over the expert data-parallel group",
                  expression="dense_parameter_gather_seconds + expert_parameter_gather_seconds")
def parameter_gather_seconds(dense_parameter_gather_seconds, expert_parameter_gather_seconds):
    return dense_parameter_gather_seconds + expert_parameter_gather_seconds


@formulas.formula(unit="s", meaning="the expert data-parallel group's communication per step: the expert gradients' "
                                    "reductions and the expert weights' gathers",
                  expression="expert_gradient_reduce_scatter_seconds + expert_gradient_all_reduce_seconds"
                             " + expert_parameter_gather_seconds",
                  zero_when="expert_parameters == 0", detail=True)
def expert_data_parallel_seconds(expert_gradient_reduce_scatter_seconds, expert_gradient_all_reduce_seconds,
                                 expert_parameter_gather_seconds):
    return expert_gradient_reduce_scatter_seconds + expert_gradient_all_reduce_seconds + expert_parameter_gather_seconds


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


@formulas.formula(unit="s", meaning="time per step of the tensor-parallel collectives (α–β)",
                  expression="tp_collectives_per_step × steps(tensor_parallel) × tp_link_latency_seconds"
                             " + tp_bytes_sent_per_step / tp_link_bytes_per_s;"
                             " steps = 2(n − 1) for a ring, 2⌈log₂ n⌉ for a tree",
                  zero_when="tensor_parallel == 1", prose=True,
                  symbols={"n": "tensor_parallel", "tree": "collective_algorithm_tree"})
def tp_communication_seconds(tp_collectives_per_step, tensor_parallel, collective_algorithm_tree,
                             tp_link_latency_seconds, tp_bytes_sent_per_step, tp_link_bytes_per_s):
    return (tp_collectives_per_step * all_reduce_latency_steps(tensor_parallel, collective_algorithm_tree)
            * tp_link_latency_seconds + tp_bytes_sent_per_step / tp_link_bytes_per_s)


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
    return ring_collectives_seconds(cp_collectives_per_step, context_parallel, cp_link_latency_seconds, cp_bytes_sent_per_step, cp_link_bytes_per_s)


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
    return ring_collectives_seconds(ep_collectives_per_step, expert_parallel, ep_link_latency_seconds, ep_bytes_sent_per_step, ep_link_bytes_per_s)


# --- the host link (PCIe): what offloading copies between device and host memory ------------------------
#
# Each accelerator has its own host link, host_link_bytes_per_s per direction. What of these copies compute hides
# is :func:`botec.training.compute.exposed_offload_seconds`.

@formulas.formula(unit="B", meaning="gradients each accelerator copies to host memory per step (optimizer offloaded)",
                  expression="gradient_reduce_rounds × gradient_bytes_per_parameter × updated_parameters_per_device",
                  source="ZeRO-Offload (Ren et al. 2021 §4): the reduced 16-bit gradients of the shard the rank "
                         "updates go down to the CPU as the backward produces them, at every reduction",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_gradient_bytes_per_step(gradient_reduce_rounds, gradient_bytes_per_parameter, updated_parameters_per_device):
    return gradient_reduce_rounds * gradient_bytes_per_parameter * updated_parameters_per_device


@formulas.formula(unit="B", meaning="weights each accelerator copies up from host memory per step: the updated 16-bit "
                                    "weights (optimizer offloaded), or the weight shard before every gather (parameters "
                                    "offloaded)",
                  expression="parameter_gathers_per_microbatch × gradient_accumulation_steps × weight_memory_bytes if "
                             "parameter_offload else weight_bytes_per_parameter × updated_parameters_per_device",
                  source="ZeRO-Offload §4: the CPU's updated FP16 parameters are copied back to the GPU; ZeRO-3 "
                         "offload_param / FSDP CPUOffload: each all-gather first moves the host-resident shard up",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_weight_bytes_per_step(parameter_gathers_per_microbatch, gradient_accumulation_steps, weight_memory_bytes,
                               parameter_offload, weight_bytes_per_parameter, updated_parameters_per_device):
    gathered = parameter_gathers_per_microbatch * gradient_accumulation_steps * weight_memory_bytes
    return where(parameter_offload, gathered, weight_bytes_per_parameter * updated_parameters_per_device)


@formulas.formula(unit="B", meaning="activations each accelerator copies to host memory and back per step",
                  expression="2 × gradient_accumulation_steps × offloaded_activation_bytes_per_microbatch",
                  source="torchtune's activation offloading: down in the forward, up for the backward, per "
                         "micro-batch (the blocks' saved tensors only: the output layer and the recomputation stay "
                         "on the device)",
                  zero_when="activation_offload == 0", detail=True)
def host_activation_bytes_per_step(gradient_accumulation_steps, offloaded_activation_bytes_per_microbatch):
    return 2 * gradient_accumulation_steps * offloaded_activation_bytes_per_microbatch


@formulas.formula(unit="B", meaning="optimizer pages a paged optimizer moves per step: out at the activation peak, "
                                    "back for the update",
                  expression="2 × paged_optimizer_spill_bytes",
                  source="QLoRA §3 (Paged Optimizers): pages are evicted to CPU RAM and paged back when the "
                         "optimizer update needs them", zero_when="optimizer_offload_paged == 0", detail=True)
def paged_optimizer_bytes_per_step(paged_optimizer_spill_bytes):
    return 2 * paged_optimizer_spill_bytes


@formulas.formula(unit="B", meaning="bytes crossing each accelerator's host link per step, both directions",
                  expression="host_gradient_bytes_per_step + host_weight_bytes_per_step"
                             " + host_activation_bytes_per_step + paged_optimizer_bytes_per_step")
def host_link_bytes_per_step(host_gradient_bytes_per_step, host_weight_bytes_per_step, host_activation_bytes_per_step,
                             paged_optimizer_bytes_per_step):
    return (host_gradient_bytes_per_step + host_weight_bytes_per_step + host_activation_bytes_per_step
            + paged_optimizer_bytes_per_step)


@formulas.formula(unit="s", meaning="time per step of the gradients' copy to the host",
                  expression="host_gradient_bytes_per_step / host_link_bytes_per_s",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_gradient_seconds(host_gradient_bytes_per_step, host_link_bytes_per_s):
    return host_gradient_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of the weights' copy from the host",
                  expression="host_weight_bytes_per_step / host_link_bytes_per_s",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_weight_seconds(host_weight_bytes_per_step, host_link_bytes_per_s):
    return host_weight_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of the activations' copies (one direction at a time)",
                  expression="host_activation_bytes_per_step / host_link_bytes_per_s",
                  zero_when="activation_offload == 0", detail=True)
def host_activation_seconds(host_activation_bytes_per_step, host_link_bytes_per_s):
    return host_activation_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of a paged optimizer's page migrations",
                  expression="paged_optimizer_bytes_per_step / host_link_bytes_per_s",
                  zero_when="optimizer_offload_paged == 0", detail=True)
def paged_optimizer_seconds(paged_optimizer_bytes_per_step, host_link_bytes_per_s):
    return paged_optimizer_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of all host-link copies, before overlap",
                  expression="host_gradient_seconds + host_weight_seconds + host_activation_seconds"
                             " + paged_optimizer_seconds")
def host_link_seconds(host_gradient_seconds, host_weight_seconds, host_activation_seconds, paged_optimizer_seconds):
    return host_gradient_seconds + host_weight_seconds + host_activation_seconds + paged_optimizer_seconds


# --- totals ---------------------------------------------------------------------------------------

@formulas.formula(unit="B", meaning="all collective bytes each accelerator sends per step",
                  expression="gradient_sync_bytes_sent_per_step + parameter_gather_bytes_sent_per_step"
                             " + tp_bytes_sent_per_step + pp_bytes_sent_per_step + cp_bytes_sent_per_step"
                             " + ep_bytes_sent_per_step")
def collective_bytes_sent_per_step(gradient_sync_bytes_sent_per_step, parameter_gather_bytes_sent_per_step,
                                   tp_bytes_sent_per_step, pp_bytes_sent_per_step, cp_bytes_sent_per_step,
                                   ep_bytes_sent_per_step):
    return (gradient_sync_bytes_sent_per_step + parameter_gather_bytes_sent_per_step + tp_bytes_sent_per_step
            + pp_bytes_sent_per_step + cp_bytes_sent_per_step + ep_bytes_sent_per_step)


@formulas.formula(unit="B/s", meaning="average outgoing collective rate per accelerator over a step",
                  expression="collective_bytes_sent_per_step / step_seconds",
                  source="lesson 000: 3 GB / 0.51 s ≈ 5.9 GB/s")
def average_collective_bytes_per_s(collective_bytes_sent_per_step, step_seconds):
    """Step-averaged rate; bursts during the collective run far above it."""
    return collective_bytes_sent_per_step / step_seconds


@formulas.formula(unit="s", meaning="bandwidth-only lower bound on the collective time per step",
                  expression="(gradient_reduce_scatter_bytes_sent_per_step"
                             " + dense_parameter_gather_bytes_sent_per_step) / shard_link_bytes_per_s"
                             " + gradient_all_reduce_bytes_sent_per_step / dp_link_bytes_per_s"
                             " + (expert_gradient_reduce_scatter_bytes_sent_per_step"
                             " + expert_parameter_gather_bytes_sent_per_step) / edp_link_bytes_per_s"
                             " + expert_gradient_all_reduce_bytes_sent_per_step"
                             " / expert_gradient_all_reduce_link_bytes_per_s"
                             " + tp_bytes_sent_per_step / tp_link_bytes_per_s + pp_bytes_sent_per_step"
                             " / pp_link_bytes_per_s + cp_bytes_sent_per_step / cp_link_bytes_per_s"
                             " + ep_bytes_sent_per_step / ep_link_bytes_per_s",
                  source="lesson 000: 3 GB / 25 GB/s = 0.12 s", zero_when="collective_bytes_sent_per_step == 0")
def collective_floor_seconds(gradient_reduce_scatter_bytes_sent_per_step, dense_parameter_gather_bytes_sent_per_step,
                             shard_link_bytes_per_s, gradient_all_reduce_bytes_sent_per_step, dp_link_bytes_per_s,
                             expert_gradient_reduce_scatter_bytes_sent_per_step,
                             expert_parameter_gather_bytes_sent_per_step, edp_link_bytes_per_s,
                             expert_gradient_all_reduce_bytes_sent_per_step,
                             expert_gradient_all_reduce_link_bytes_per_s,
                             tp_bytes_sent_per_step, tp_link_bytes_per_s, pp_bytes_sent_per_step, pp_link_bytes_per_s,
                             cp_bytes_sent_per_step, cp_link_bytes_per_s, ep_bytes_sent_per_step, ep_link_bytes_per_s):
    """Each group's bytes at its link's bandwidth; ignores latency, contention and topology."""
    return ((gradient_reduce_scatter_bytes_sent_per_step + dense_parameter_gather_bytes_sent_per_step)
            / shard_link_bytes_per_s
            + gradient_all_reduce_bytes_sent_per_step / dp_link_bytes_per_s
            + (expert_gradient_reduce_scatter_bytes_sent_per_step + expert_parameter_gather_bytes_sent_per_step)
            / edp_link_bytes_per_s
            + expert_gradient_all_reduce_bytes_sent_per_step / expert_gradient_all_reduce_link_bytes_per_s
            + tp_bytes_sent_per_step / tp_link_bytes_per_s + pp_bytes_sent_per_step / pp_link_bytes_per_s
            + cp_bytes_sent_per_step / cp_link_bytes_per_s + ep_bytes_sent_per_step / ep_link_bytes_per_s)


@formulas.formula(unit="fraction", meaning="the collectives' bandwidth floor as a share of the step",
                  expression="collective_floor_seconds / step_seconds",
                  source="lesson 000: 0.12 s beside a 0.51 s step")
def collective_floor_share(collective_floor_seconds, step_seconds):
    """Above ~10 % the step estimate holds only if communication overlaps the backward pass."""
    return collective_floor_seconds / step_seconds


@formulas.formula(unit="s", meaning="all communication time per step (α–β), before overlap",
                  expression="gradient_sync_seconds + parameter_gather_seconds + tp_communication_seconds"
                             " + pp_communication_seconds + cp_communication_seconds + ep_communication_seconds")
def communication_seconds(gradient_sync_seconds, parameter_gather_seconds, tp_communication_seconds,
                          pp_communication_seconds, cp_communication_seconds, ep_communication_seconds):
    return (gradient_sync_seconds + parameter_gather_seconds + tp_communication_seconds + pp_communication_seconds
            + cp_communication_seconds + ep_communication_seconds)


@formulas.formula(unit="s", meaning="tensor, pipeline, context and expert communication per step that compute does "
                                    "not hide",
                  expression="(tp_communication_seconds + pp_communication_seconds + cp_communication_seconds"
                             " + ep_communication_seconds) × (1 − model_parallel_overlap)")
def exposed_model_parallel_seconds(tp_communication_seconds, pp_communication_seconds, cp_communication_seconds,
                                   ep_communication_seconds, model_parallel_overlap):
    return (tp_communication_seconds + pp_communication_seconds + cp_communication_seconds
            + ep_communication_seconds) * (1 - model_parallel_overlap)


@formulas.formula(unit="s", meaning="data-parallel communication per step: gradient reductions and weight gathers",
                  expression="gradient_sync_seconds + parameter_gather_seconds", detail=True)
def data_parallel_communication_seconds(gradient_sync_seconds, parameter_gather_seconds):
    return gradient_sync_seconds + parameter_gather_seconds


@formulas.formula(unit="s", meaning="one layer's weight all-gather (ZeRO-3 / FSDP: before its forward, and again "
                                    "before its backward under full shard)",
                  expression="parameter_gather_seconds / (parameter_gathers_per_step × pipeline_stage_layers)",
                  source="FSDP and ZeRO-3 gather one layer (one FSDP unit) at a time", detail=True,
                  zero_when="parameter_gathers_per_microbatch == 0")
def layer_parameter_gather_seconds(parameter_gather_seconds, parameter_gathers_per_step, pipeline_stage_layers):
    # a sweep evaluates every row: where no weights are gathered, 0 s / 1 (not 0 / 0) before zero_when applies
    return parameter_gather_seconds / (maximum(parameter_gathers_per_step, 1.0) * pipeline_stage_layers)


@formulas.formula(unit="s", meaning="one layer's share of one gradient reduction (its reduce-scatter, and the "
                                    "all-reduce across replicas under hybrid sharding)",
                  expression="gradient_sync_seconds / (gradient_reduce_rounds × pipeline_stage_layers)", detail=True)
def layer_gradient_reduce_seconds(gradient_sync_seconds, gradient_reduce_rounds, pipeline_stage_layers):
    return gradient_sync_seconds / (gradient_reduce_rounds * pipeline_stage_layers)


@formulas.formula(unit="s", meaning="compute the data-parallel communication can hide behind: the backward of each "
                                    "micro-batch whose gradients are reduced; under ZeRO-3 / FSDP, layer by layer, "
                                    "what each layer's compute hides of the next layer's gather (and reduce-scatter)",
                  expression="gradient_accumulation_steps × (L − 1) × (min(g, F / L) + min((G − 1) × g + r, B / L))"
                             " if G > 0 else B × gradient_reduce_rounds; F = microbatch_compute_seconds − B",
                  source="Megatron-LM and PyTorch DDP overlap the reduction of gradient buckets with the rest of the "
                         "backward of the last micro-batch only; FSDP (Zhao et al. 2023 §3.3, forward and backward "
                         "prefetch) and ZeRO-3 issue the next layer's all-gather while this layer computes, one "
                         "layer ahead: a layer's communication hides behind one layer's compute, the first gather "
                         "and the last reduce-scatter of each pass behind none", detail=True, prose=True,
                  symbols={"B": "microbatch_backward_seconds", "L": "pipeline_stage_layers",
                           "g": "layer_parameter_gather_seconds", "r": "layer_gradient_reduce_seconds",
                           "G": "parameter_gathers_per_microbatch"})
def data_parallel_overlap_window_seconds(microbatch_backward_seconds, gradient_reduce_rounds,
                                         gradient_accumulation_steps, microbatch_compute_seconds,
                                         parameter_gathers_per_microbatch, pipeline_stage_layers,
                                         layer_parameter_gather_seconds, layer_gradient_reduce_seconds):
    """Replicated weights (ZeRO ≤ 2): the backward of each micro-batch whose gradients are reduced, B × rounds.

    Weights gathered per micro-batch (ZeRO-3, FSDP): with prefetch depth one, layer l + 1's gather runs during
    layer l's compute, so per micro-batch and layer at most min(communication, compute) hides:

        window = m × (L − 1) × (min(g, F / L) + min((G − 1)·g + r, B / L))

    m: micro-batches, L: layers of the stage, g: one layer's gather, r: one layer's gradient reduction,
    G: gathers per micro-batch (2 full shard: the backward gathers again; 1 shard_grad_op), F, B: one micro-batch's
    forward (with recomputation) and backward. What exceeds a layer's compute is exposed, layer by layer, rather
    than hidden by a share of the total."""
    forward = microbatch_compute_seconds - microbatch_backward_seconds
    layers = maximum(pipeline_stage_layers, 1.0)
    backward_comm = (parameter_gathers_per_microbatch - 1) * layer_parameter_gather_seconds \
        + layer_gradient_reduce_seconds
    prefetched = gradient_accumulation_steps * (layers - 1) * (
        minimum(layer_parameter_gather_seconds, forward / layers)
        + minimum(maximum(backward_comm, 0.0), microbatch_backward_seconds / layers))
    return where(parameter_gathers_per_microbatch > 0, prefetched,
                 microbatch_backward_seconds * gradient_reduce_rounds)


@formulas.formula(unit="s", meaning="data-parallel communication per step that compute does not hide",
                  expression="data_parallel_communication_seconds − min(data_parallel_overlap"
                             " × data_parallel_communication_seconds, data_parallel_overlap_window_seconds)",
                  source="the share stated as data_parallel_overlap, bounded by the compute it can hide behind")
def exposed_data_parallel_seconds(data_parallel_communication_seconds, data_parallel_overlap,
                                  data_parallel_overlap_window_seconds):
    hidden = minimum(data_parallel_overlap * data_parallel_communication_seconds, data_parallel_overlap_window_seconds)
    return data_parallel_communication_seconds - hidden


@formulas.formula(unit="s", meaning="communication per step that compute does not hide",
                  expression="exposed_model_parallel_seconds + exposed_data_parallel_seconds")
def exposed_communication_seconds(exposed_model_parallel_seconds, exposed_data_parallel_seconds):
    return exposed_model_parallel_seconds + exposed_data_parallel_seconds


@formulas.formula(unit="fraction", meaning="the communication compute does not hide, as a share of the step",
                  expression="exposed_communication_seconds / step_seconds", detail=True)
def exposed_communication_share(exposed_communication_seconds, step_seconds):
    return exposed_communication_seconds / step_seconds
