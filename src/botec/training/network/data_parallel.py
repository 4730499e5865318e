"""Network, data parallel: the gradients' reductions and the sharded weights' gathers, bytes and time.

The dense gradients reduce-scatter over the ZeRO/FSDP shard group and all-reduce across its replicas (or, without
ZeRO, all-reduce over the data-parallel ranks); the expert gradients do the same over the expert data-parallel
group, at its own link; ZeRO-3 / FSDP all-gather the weights before each use, ZeRO-1/2 once after the step. Each is
how many per step × one collective (:mod:`botec.formulas.collectives`); :mod:`botec.training.network` says which.
Inside one node the dense ones read NCCL's measured tables; across nodes (the data-parallel all-reduce, the shard
group's reduce-scatter and all-gather) NCCL's own cost model prices them, the algorithm and protocol it would pick
(:mod:`botec.formulas.nccl_tuning`); the expert group's keep the α–β ring.
"""

from botec.formulas.collectives import (all_reduce_bytes_sent, all_reduce_latency_steps, gather_bytes_sent,
                                        ring_collectives_seconds)
from botec.graph import Formulas, where
from botec.graph.elementwise import is_scalar, minimum

MEASURED = ("NCCL's measured tables of the accelerator where the group sits in one node and its link is the "
            "catalog's (catalog/measurements/operators/<op>-nccl-<accelerator>.yaml, AIConfigurator 0.12.0, 2/4/8 "
            "GPUs, 512 B … 512 MiB: log-log between their points, the α–β line through their last two beyond "
            "512 MiB; botec.formulas.collective_tables.measured_or_modelled); else the α–β ring of the group's link")
CROSS_NODE = (MEASURED + "; across nodes NCCL's cost model, the least time over ring, tree, NVLS tree and PAT × LL, "
              "LL128, Simple (NVIDIA/nccl 2.30.7 src/graph/tuning.cc; botec.formulas.nccl_tuning), on the group's "
              "link with the tier's latency per network step; tested against published nccl-tests "
              "(tests/test_cross_node_collectives.py)")
"""The source text of the collective times that cross nodes through NCCL's cost model."""
CROSS_NODE_SYMBOLS = {"NCCL": "NCCL's cost model on the group's link (botec.formulas.nccl_tuning.cross_node_seconds)"}
"""The source text of every collective time that reads a measured table."""


def measured_seconds(op, table_index, ranks, message_bytes, modelled):
    """One collective's seconds from NCCL's table where ``table_index`` names one, else ``modelled`` (lazy import:
    the tables load only for a contract that reads them)."""
    if not getattr(table_index, "ndim", 0) and table_index < 0:
        return modelled
    from botec.formulas.collective_tables import measured_or_modelled

    return measured_or_modelled(op, table_index, ranks, message_bytes, modelled)


def cross_node_or(op, message_bytes, ranks, ranks_per_node, link_bytes_per_s, link_latency_seconds,
                  collective_nvlink_bytes_per_s, collective_node_kind, within):
    """One ``op`` collective's seconds: NCCL's cost model where the group crosses nodes (``ranks_per_node`` <
    ``ranks``: :func:`botec.formulas.nccl_tuning.cross_node_seconds` on the group's link, its latency the network
    step), else ``within`` (the table or α–β price inside a node). A link whose latency is stated 0 ("latency not
    modelled") keeps ``within``, the bandwidth term alone. The model is imported only where a group crosses nodes."""
    crosses = (ranks_per_node < ranks) & (link_latency_seconds > 0)
    if is_scalar(ranks, ranks_per_node, link_latency_seconds) and not crosses:
        return within
    from botec.formulas.nccl_tuning import cross_node_seconds

    across = cross_node_seconds(op, message_bytes, ranks, minimum(ranks_per_node, ranks), link_bytes_per_s,
                                collective_nvlink_bytes_per_s, collective_node_kind >= 2, collective_node_kind >= 1,
                                link_latency_seconds)
    return where(crosses, across, within)


formulas = Formulas(account="network")


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


@formulas.formula(unit="s", meaning="time per step of that reduce-scatter (measured inside a node, NCCL's model "
                                    "across nodes)",
                  expression="gradient_reduce_rounds × k × L_rs(S, sharding_degree) from the measured table if "
                             "shard_collective_table_index ≥ 0; across nodes (l < sharding_degree) "
                             "gradient_reduce_rounds × k × NCCL(reduce-scatter, S, sharding_degree, l); else "
                             "gradient_reduce_rounds × k × ((sharding_degree − 1) × shard_link_latency_seconds + "
                             "(sharding_degree − 1) / sharding_degree × S / shard_link_bytes_per_s); S = "
                             "dense_gradient_bytes / k, k = gradient_collectives_per_reduction",
                  zero_when="zero_stage < 1 or sharding_degree == 1", detail=True, prose=True, source=CROSS_NODE,
                  symbols=CROSS_NODE_SYMBOLS | {"l": "shard_ranks_per_node", "k": "gradient_collectives_per_reduction"})
def gradient_reduce_scatter_seconds(gradient_reduce_rounds, sharding_degree, shard_link_latency_seconds,
                                    shard_link_bytes_per_s, shard_collective_table_index, dense_gradient_bytes,
                                    shard_ranks_per_node, collective_nvlink_bytes_per_s, collective_node_kind,
                                    gradient_collectives_per_reduction):
    return gradient_reduce_rounds * sharded_collective_seconds(
        "reducescatter", dense_gradient_bytes, gradient_collectives_per_reduction, sharding_degree,
        shard_link_latency_seconds, shard_link_bytes_per_s, shard_collective_table_index, shard_ranks_per_node,
        collective_nvlink_bytes_per_s, collective_node_kind)


def sharded_collective_seconds(op, total_bytes, collectives, ranks, link_latency_seconds, link_bytes_per_s,
                               table_index, ranks_per_node, nvlink_bytes_per_s, node_kind):
    """k × L(S, n): a reduce-scatter or all-gather (``op``) of ``total_bytes`` over the n = ``ranks`` of the shard
    group, split into k = ``collectives`` messages of S = total / k each (the stack's granularity), each priced from
    the measured table where one applies, by NCCL's model across nodes, else the α–β ring
    ((n − 1)·α + (n − 1)/n · S / β)."""
    message = total_bytes / collectives
    modelled = ring_collectives_seconds(1, ranks, link_latency_seconds, gather_bytes_sent(message, ranks),
                                        link_bytes_per_s)
    modelled = cross_node_or(op, message, ranks, ranks_per_node, link_bytes_per_s, link_latency_seconds,
                             nvlink_bytes_per_s, node_kind, modelled)
    return collectives * measured_seconds(op, table_index, ranks, message, modelled)


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


@formulas.formula(unit="s", meaning="time per step of that all-reduce (measured inside a node, NCCL's model across "
                                    "nodes)",
                  expression="gradient_reduce_rounds × k × L_ar(S, n) from the measured table if "
                             "dp_collective_table_index ≥ 0 (NCCL picks its own algorithm: tree is not read); across "
                             "nodes (l < n) gradient_reduce_rounds × k × NCCL(all-reduce, S, n, l) (NCCL picks: tree "
                             "is not read either); else gradient_reduce_rounds × k × (steps(n) × "
                             "dp_link_latency_seconds + 2(n − 1)/n × S / dp_link_bytes_per_s); steps = 2(n − 1) for a "
                             "ring, 2⌈log₂ n⌉ for a tree; S = gradient_all_reduce_message_bytes / k, k = "
                             "gradient_collectives_per_reduction",
                  zero_when="gradient_all_reduce_ranks == 1", detail=True, prose=True, source=CROSS_NODE,
                  symbols=CROSS_NODE_SYMBOLS | {"n": "gradient_all_reduce_ranks", "tree": "collective_algorithm_tree",
                                                "l": "dp_ranks_per_node", "k": "gradient_collectives_per_reduction"})
def gradient_all_reduce_seconds(gradient_reduce_rounds, gradient_all_reduce_ranks, collective_algorithm_tree,
                                dp_link_latency_seconds, dp_link_bytes_per_s, dp_collective_table_index,
                                gradient_all_reduce_message_bytes, dp_ranks_per_node, collective_nvlink_bytes_per_s,
                                collective_node_kind, gradient_collectives_per_reduction):
    k = gradient_collectives_per_reduction
    message = gradient_all_reduce_message_bytes / k
    modelled = (all_reduce_latency_steps(gradient_all_reduce_ranks, collective_algorithm_tree) * dp_link_latency_seconds
                + all_reduce_bytes_sent(message, gradient_all_reduce_ranks) / dp_link_bytes_per_s)
    modelled = cross_node_or("allreduce", message, gradient_all_reduce_ranks, dp_ranks_per_node, dp_link_bytes_per_s,
                             dp_link_latency_seconds, collective_nvlink_bytes_per_s, collective_node_kind, modelled)
    return gradient_reduce_rounds * k * measured_seconds("allreduce", dp_collective_table_index,
                                                         gradient_all_reduce_ranks, message, modelled)


# --- data parallel: the expert gradients, over the expert data-parallel group ------------------------
#
# The ranks that hold the same expert sit EP apart in Megatron's order (TP, CP, DP ⊃ EP): DP / EP of them, or,
# under ZeRO/FSDP, shard / EP of them in each shard group (memory shards the expert state over these:
# :func:`botec.training.memory.state.expert_sharding_degree`). Their collectives run at that group's own link
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
    return ring_collectives_seconds(gradient_reduce_rounds, expert_sharding_degree, edp_link_latency_seconds,
                                    expert_gradient_reduce_scatter_bytes_sent_per_step, edp_link_bytes_per_s)


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


@formulas.formula(unit="s", meaning="time per step of those all-gathers (measured inside a node, NCCL's model "
                                    "across nodes)",
                  expression="parameter_gathers_per_step × k × L_ag(S, sharding_degree) from the measured table "
                             "if shard_collective_table_index ≥ 0; across nodes (l < sharding_degree) "
                             "parameter_gathers_per_step × k × NCCL(all-gather, S, sharding_degree, l); else "
                             "parameter_gathers_per_step × k × ((sharding_degree − 1) × shard_link_latency_seconds"
                             " + (sharding_degree − 1) / sharding_degree × S / shard_link_bytes_per_s); S = "
                             "dense_parameter_gather_message_bytes / k, k = parameter_collectives_per_gather",
                  zero_when="zero_stage < 1 or sharding_degree == 1", detail=True, prose=True, source=CROSS_NODE,
                  symbols=CROSS_NODE_SYMBOLS | {"l": "shard_ranks_per_node", "k": "parameter_collectives_per_gather"})
def dense_parameter_gather_seconds(parameter_gathers_per_step, sharding_degree, shard_link_latency_seconds,
                                   shard_link_bytes_per_s, shard_collective_table_index,
                                   dense_parameter_gather_message_bytes, shard_ranks_per_node,
                                   collective_nvlink_bytes_per_s, collective_node_kind,
                                   parameter_collectives_per_gather):
    return parameter_gathers_per_step * sharded_collective_seconds(
        "allgather", dense_parameter_gather_message_bytes, parameter_collectives_per_gather, sharding_degree,
        shard_link_latency_seconds, shard_link_bytes_per_s, shard_collective_table_index, shard_ranks_per_node,
        collective_nvlink_bytes_per_s, collective_node_kind)


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
    return ring_collectives_seconds(parameter_gathers_per_step, expert_sharding_degree, edp_link_latency_seconds,
                                    expert_parameter_gather_bytes_sent_per_step, edp_link_bytes_per_s)


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
