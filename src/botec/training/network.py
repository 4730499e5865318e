"""Network: every recurring collective, its bytes per step, the tier it crosses, its time.

Source: lesson 000 ("Network: count traffic at each synchronization boundary"): the ring
all-reduce sends 2(N−1)/N · M per participant. Beyond replicated data parallelism:

- data parallel: gradients are all-reduced over the DP ranks once per step (ZeRO-1/2: a
  reduce-scatter plus an all-gather of the same total size). ZeRO-3 / FSDP reduce-scatters the
  gradients over the shard group, all-gathers the weights before the forward and again before
  the backward of every micro-batch (Rajbhandari et al. 2020 §7: 1.5× plain DP), and with
  hybrid sharding all-reduces the gradient shards across the replicas. Expert gradients are
  all-reduced over the DP / EP ranks that hold the same expert.
- tensor parallel: 2 all-reduces of the layer's output in the forward pass and 2 in the
  backward, per layer per micro-batch (Shoeybi et al. 2019); with sequence parallelism each is
  a reduce-scatter + all-gather of the same total size (Korthikanti et al. 2022); full
  recomputation repeats the forward's 2.
- pipeline parallel: each stage sends a micro-batch's activations forward and their gradients
  backward (× v chunks when interleaved).
- context parallel (ring attention): each layer all-gathers the K and V chunks of the sequence
  in the forward and again in the backward, and reduce-scatters their gradients.
- expert parallel: dispatch and combine all-to-alls per MoE layer, forward and backward.

Ranks are laid out as Megatron does, TP fastest, then CP, then DP (EP inside DP), then PP: a
group stays inside a node while the ranks it spans fit in one; otherwise it runs at the
inter-node bandwidth per accelerator. Times use the α–β model of :mod:`collectives`.
"""

from botec.quantities import declare_input, formula, where
from botec.training.collectives import (all_gather_seconds, all_reduce_bytes_sent, all_reduce_seconds,
                                        all_to_all_seconds, gather_bytes_sent, reduce_scatter_seconds,
                                        send_receive_seconds)

declare_input("accelerators_per_node", account="network", unit="accelerators",
              meaning="accelerators sharing the fast intra-node links")
declare_input("intra_node_bytes_per_s", account="network", unit="B/s",
              meaning="usable bandwidth per accelerator per direction inside a node (NVLink-class)")
declare_input("inter_node_bytes_per_s", account="network", unit="B/s",
              meaning="usable bandwidth per accelerator per direction across nodes (its NIC share)")
declare_input("intra_node_latency_seconds", account="network", unit="s",
              meaning="latency per collective step inside a node (α)")
declare_input("inter_node_latency_seconds", account="network", unit="s",
              meaning="latency per collective step across nodes (α)")
declare_input("collective_algorithm_tree", account="network", unit="1",
              meaning="all-reduce algorithm: 0 ring, 1 tree (fewer latency steps, same bytes)")
declare_input("data_parallel_overlap", account="network", unit="1",
              meaning="share of data-parallel communication hidden behind the backward pass")
declare_input("model_parallel_overlap", account="network", unit="1",
              meaning="share of TP, CP, EP and PP communication hidden behind compute")


def _tier(span, accelerators_per_node, intra, inter):
    """The intra-node figure while a group's ranks fit in one node, else the inter-node one."""
    return where(span <= accelerators_per_node, intra, inter)


# --- the accelerators each group spans in Megatron's rank order (TP, CP, DP ⊃ EP, PP) --------

@formula(account="network", unit="accelerators", meaning="accelerators a data-parallel group spans",
         expression="tensor_parallel × context_parallel × data_parallel_degree", detail=True)
def data_parallel_span(tensor_parallel, context_parallel, data_parallel_degree):
    return tensor_parallel * context_parallel * data_parallel_degree


@formula(account="network", unit="accelerators", meaning="accelerators a ZeRO/FSDP shard group spans",
         expression="tensor_parallel × context_parallel × sharding_degree", detail=True)
def sharding_span(tensor_parallel, context_parallel, sharding_degree):
    return tensor_parallel * context_parallel * sharding_degree


@formula(account="network", unit="accelerators", meaning="accelerators an expert-parallel group spans",
         expression="tensor_parallel × context_parallel × expert_parallel", detail=True)
def expert_parallel_span(tensor_parallel, context_parallel, expert_parallel):
    return tensor_parallel * context_parallel * expert_parallel


@formula(account="network", unit="accelerators", meaning="accelerators a context-parallel group spans",
         expression="tensor_parallel × context_parallel", detail=True)
def context_parallel_span(tensor_parallel, context_parallel):
    return tensor_parallel * context_parallel


# --- bandwidth and latency of the tier each group crosses ---------------------------------------

_GROUPS = {  # group -> (the quantity holding the accelerators it spans, what it carries)
    "dp": ("data_parallel_span", "the data-parallel collectives"),
    "shard": ("sharding_span", "the ZeRO/FSDP shard group's collectives"),
    "tp": ("tensor_parallel", "the tensor-parallel collectives"),
    "cp": ("context_parallel_span", "the context-parallel exchanges"),
    "ep": ("expert_parallel_span", "the expert all-to-alls"),
    "pp": ("accelerators", "the pipeline sends (stages are outermost: they share a node only when the job does)"),
}
for _group, (_span, _carried) in _GROUPS.items():
    for _what, _unit, _intra, _inter in (("bytes_per_s", "B/s", "intra_node_bytes_per_s", "inter_node_bytes_per_s"),
                                         ("latency_seconds", "s", "intra_node_latency_seconds",
                                          "inter_node_latency_seconds")):
        formula(account="network", unit=_unit, detail=True, name=f"{_group}_link_{_what}",
                inputs=(_span, "accelerators_per_node", _intra, _inter),
                meaning=f"{'bandwidth' if _unit == 'B/s' else 'latency per step'} of the tier {_carried} cross",
                expression=f"{_intra} if {_span} ≤ accelerators_per_node else {_inter}")(_tier)


# --- data parallel ------------------------------------------------------------------------------

@formula(account="network", unit="B", meaning="one full gradient message of the parameters one accelerator holds",
         expression="parameters_per_device × gradient_bytes_per_parameter",
         source="lesson 000: 10⁹ × 2 B = 2 GB")
def gradient_bytes(parameters_per_device, gradient_bytes_per_parameter):
    """M = parameters held × bytes per gradient element."""
    return parameters_per_device * gradient_bytes_per_parameter


@formula(account="network", unit="B", meaning="the expert part of that gradient message",
         expression="expert_parameters_per_device × gradient_bytes_per_parameter", detail=True)
def expert_gradient_bytes(expert_parameters_per_device, gradient_bytes_per_parameter):
    return expert_parameters_per_device * gradient_bytes_per_parameter


@formula(account="network", unit="1", meaning="data-parallel replicas of each expert",
         expression="data_parallel_degree / expert_parallel", detail=True)
def expert_data_parallel_degree(data_parallel_degree, expert_parallel):
    return data_parallel_degree / expert_parallel


@formula(account="network", unit="B", meaning="the non-expert part of that gradient message",
         expression="gradient_bytes − expert_gradient_bytes", detail=True)
def dense_gradient_bytes(gradient_bytes, expert_gradient_bytes):
    return gradient_bytes - expert_gradient_bytes


@formula(account="network", unit="1", meaning="replicas of each ZeRO/FSDP shard group (hybrid sharding: > 1)",
         expression="data_parallel_degree / sharding_degree", detail=True)
def replica_groups(data_parallel_degree, sharding_degree):
    return data_parallel_degree / sharding_degree


@formula(account="network", unit="B",
         meaning="bytes each accelerator sends per step to synchronize gradients (ring)",
         expression="(sharding_degree − 1) / sharding_degree × dense_gradient_bytes"
                    " + 2 × (replica_groups − 1) / replica_groups × dense_gradient_bytes / sharding_degree"
                    " + 2 × (expert_data_parallel_degree − 1) / expert_data_parallel_degree × expert_gradient_bytes"
                    " if zero_stage ≥ 3 else"
                    " 2 × (data_parallel_degree − 1) / data_parallel_degree × dense_gradient_bytes"
                    " + 2 × (expert_data_parallel_degree − 1) / expert_data_parallel_degree × expert_gradient_bytes",
         source="lesson 000: 2(4 − 1)/4 × 2 GB = 3 GB")
def ring_bytes_sent_per_step(dense_gradient_bytes, expert_gradient_bytes, data_parallel_degree, sharding_degree,
                             replica_groups, zero_stage, expert_data_parallel_degree):
    """Ring all-reduce: 2(N−1)/N · M sent (and as much received) per participant per step.

    ZeRO-3 / FSDP: a reduce-scatter over the shard group, (G − 1)/G · M, then (hybrid sharding) an
    all-reduce of the 1/G shard across the R replicas.
    """
    sharded = (gather_bytes_sent(dense_gradient_bytes, sharding_degree)
               + all_reduce_bytes_sent(dense_gradient_bytes / sharding_degree, replica_groups))
    dense = where(zero_stage >= 3, sharded, all_reduce_bytes_sent(dense_gradient_bytes, data_parallel_degree))
    return dense + all_reduce_bytes_sent(expert_gradient_bytes, expert_data_parallel_degree)


@formula(account="network", unit="s", meaning="time per step of the gradient synchronization (α–β)",
         expression="ring all-reduce of the dense gradients over DP (ZeRO-3: reduce-scatter over the shard group,"
                    " all-reduce of the shards across replicas) + all-reduce of expert gradients over DP/EP")
def dp_sync_seconds(dense_gradient_bytes, expert_gradient_bytes, data_parallel_degree, sharding_degree,
                    replica_groups, zero_stage, expert_data_parallel_degree, dp_link_bytes_per_s,
                    dp_link_latency_seconds, shard_link_bytes_per_s, shard_link_latency_seconds,
                    collective_algorithm_tree):
    dense = dense_gradient_bytes
    sharded = (reduce_scatter_seconds(dense, sharding_degree, shard_link_bytes_per_s, shard_link_latency_seconds)
               + all_reduce_seconds(dense / sharding_degree, replica_groups, dp_link_bytes_per_s,
                                    dp_link_latency_seconds, collective_algorithm_tree))
    plain = all_reduce_seconds(dense, data_parallel_degree, dp_link_bytes_per_s, dp_link_latency_seconds,
                               collective_algorithm_tree)
    experts = all_reduce_seconds(expert_gradient_bytes, expert_data_parallel_degree, dp_link_bytes_per_s,
                                 dp_link_latency_seconds, collective_algorithm_tree)
    return where(zero_stage >= 3, sharded, plain) + experts


@formula(account="network", unit="B",
         meaning="bytes each accelerator sends per step to all-gather sharded weights (ZeRO-3 / FSDP only)",
         expression="2 × gradient_accumulation_steps × (sharding_degree − 1) / sharding_degree"
                    " × parameters_per_device × weight_bytes_per_parameter if zero_stage ≥ 3 else 0",
         source="Rajbhandari et al. 2020: one all-gather before the forward and one before the backward")
def parameter_gather_bytes_sent_per_step(zero_stage, gradient_accumulation_steps, sharding_degree,
                                         parameters_per_device, weight_bytes_per_parameter):
    gathered = 2 * gradient_accumulation_steps * gather_bytes_sent(
        parameters_per_device * weight_bytes_per_parameter, sharding_degree)
    return where(zero_stage >= 3, gathered, 0.0)


@formula(account="network", unit="s", meaning="time per step of the ZeRO-3 / FSDP weight all-gathers (α–β)",
         expression="2 × gradient_accumulation_steps × all-gather(parameters_per_device × weight_bytes_per_parameter"
                    " over sharding_degree) if zero_stage ≥ 3 else 0")
def parameter_gather_seconds(zero_stage, gradient_accumulation_steps, sharding_degree, parameters_per_device,
                             weight_bytes_per_parameter, shard_link_bytes_per_s, shard_link_latency_seconds):
    gather = all_gather_seconds(parameters_per_device * weight_bytes_per_parameter, sharding_degree,
                                shard_link_bytes_per_s, shard_link_latency_seconds)
    return where(zero_stage >= 3, 2 * gradient_accumulation_steps * gather, 0.0)


# --- tensor, pipeline, context and expert parallel ---------------------------------------------

@formula(account="network", unit="B", meaning="one micro-batch's activation tensor at a layer boundary",
         expression="micro_batch_size × local_sequence_length × hidden_size × activation_bytes_per_element", detail=True)
def layer_activation_bytes(micro_batch_size, local_sequence_length, hidden_size, activation_bytes_per_element):
    return micro_batch_size * local_sequence_length * hidden_size * activation_bytes_per_element


@formula(account="network", unit="1", meaning="tensor-parallel all-reduces per layer per micro-batch",
         expression="6 if recompute = full else 4",
         source="Shoeybi et al. 2019: 2 forward + 2 backward; full recomputation repeats the forward's 2", detail=True)
def tp_collectives_per_layer(recompute):
    return where(recompute >= 2, 6.0, 4.0)


@formula(account="network", unit="B", meaning="bytes each accelerator sends per step for tensor parallelism",
         expression="layers / pipeline_parallel × gradient_accumulation_steps × tp_collectives_per_layer"
                    " × 2(t − 1)/t × layer_activation_bytes")
def tp_bytes_sent_per_step(layers, pipeline_parallel, gradient_accumulation_steps, tp_collectives_per_layer,
                           tensor_parallel, layer_activation_bytes):
    per_collective = all_reduce_bytes_sent(layer_activation_bytes, tensor_parallel)
    return layers / pipeline_parallel * gradient_accumulation_steps * tp_collectives_per_layer * per_collective


@formula(account="network", unit="s", meaning="time per step of the tensor-parallel collectives (α–β)",
         expression="layers / pipeline_parallel × gradient_accumulation_steps × tp_collectives_per_layer"
                    " × all-reduce(layer_activation_bytes over tensor_parallel)")
def tp_communication_seconds(layers, pipeline_parallel, gradient_accumulation_steps, tp_collectives_per_layer,
                             layer_activation_bytes, tensor_parallel, tp_link_bytes_per_s, tp_link_latency_seconds,
                             collective_algorithm_tree):
    """With sequence parallelism each all-reduce becomes a reduce-scatter + all-gather: same bytes and steps."""
    one = all_reduce_seconds(layer_activation_bytes, tensor_parallel, tp_link_bytes_per_s, tp_link_latency_seconds,
                             collective_algorithm_tree)
    return layers / pipeline_parallel * gradient_accumulation_steps * tp_collectives_per_layer * one


@formula(account="network", unit="B", meaning="bytes each accelerator sends per step between pipeline stages",
         expression="2 × gradient_accumulation_steps × virtual_pipeline_stages × layer_activation_bytes"
                    " / (tensor_parallel if sequence_parallel else 1) if pipeline_parallel > 1 else 0")
def pp_bytes_sent_per_step(pipeline_parallel, gradient_accumulation_steps, virtual_pipeline_stages,
                           layer_activation_bytes, tensor_parallel, sequence_parallel):
    """Activations forward and their gradients backward, once per micro-batch and model chunk."""
    message = layer_activation_bytes / where(sequence_parallel, tensor_parallel, 1)
    return where(pipeline_parallel > 1, 2 * gradient_accumulation_steps * virtual_pipeline_stages * message, 0.0)


@formula(account="network", unit="s", meaning="time per step of the pipeline sends and receives (α–β)",
         expression="2 × gradient_accumulation_steps × virtual_pipeline_stages × (pp_link_latency_seconds"
                    " + layer_activation_bytes / (tensor_parallel if sequence_parallel else 1) / pp_link_bytes_per_s)"
                    " if pipeline_parallel > 1 else 0")
def pp_communication_seconds(pipeline_parallel, gradient_accumulation_steps, virtual_pipeline_stages,
                             layer_activation_bytes, tensor_parallel, sequence_parallel, pp_link_bytes_per_s,
                             pp_link_latency_seconds):
    message = layer_activation_bytes / where(sequence_parallel, tensor_parallel, 1)
    one = send_receive_seconds(message, pp_link_bytes_per_s, pp_link_latency_seconds)
    return where(pipeline_parallel > 1, 2 * gradient_accumulation_steps * virtual_pipeline_stages * one, 0.0)


@formula(account="network", unit="B", meaning="keys and values of the whole sequence, as one TP rank holds them",
         expression="micro_batch_size × sequence_length × kv_heads × (qk_head_dim + v_head_dim)"
                    " × activation_bytes_per_element / tensor_parallel", detail=True)
def kv_sequence_bytes(micro_batch_size, sequence_length, kv_heads, qk_head_dim, v_head_dim,
                      activation_bytes_per_element, tensor_parallel):
    return (micro_batch_size * sequence_length * kv_heads * (qk_head_dim + v_head_dim)
            * activation_bytes_per_element / tensor_parallel)


@formula(account="network", unit="B", meaning="bytes each accelerator sends per step for context parallelism",
         expression="layers / pipeline_parallel × gradient_accumulation_steps × 3 × (cp − 1)/cp × kv_sequence_bytes",
         source="ring attention: all-gather K, V forward and backward, reduce-scatter their gradients")
def cp_bytes_sent_per_step(layers, pipeline_parallel, gradient_accumulation_steps, context_parallel,
                           kv_sequence_bytes):
    return (layers / pipeline_parallel * gradient_accumulation_steps * 3
            * gather_bytes_sent(kv_sequence_bytes, context_parallel))


@formula(account="network", unit="s", meaning="time per step of the context-parallel exchanges (α–β)",
         expression="layers / pipeline_parallel × gradient_accumulation_steps × 3"
                    " × all-gather(kv_sequence_bytes over context_parallel)")
def cp_communication_seconds(layers, pipeline_parallel, gradient_accumulation_steps, context_parallel,
                             kv_sequence_bytes, cp_link_bytes_per_s, cp_link_latency_seconds):
    one = all_gather_seconds(kv_sequence_bytes, context_parallel, cp_link_bytes_per_s, cp_link_latency_seconds)
    return layers / pipeline_parallel * gradient_accumulation_steps * 3 * one


@formula(account="network", unit="B", meaning="tokens' hidden states one accelerator routes to experts per MoE layer",
         expression="layer_activation_bytes × experts_per_token", detail=True)
def expert_dispatch_bytes(layer_activation_bytes, experts_per_token):
    return layer_activation_bytes * experts_per_token


@formula(account="network", unit="B", meaning="bytes each accelerator sends per step in expert all-to-alls",
         expression="moe_layers / pipeline_parallel × gradient_accumulation_steps × 4 × (ep − 1)/ep"
                    " × expert_dispatch_bytes",
         source="dispatch and combine, forward and backward (GShard, Lepikhin et al. 2020)")
def ep_bytes_sent_per_step(moe_layers, pipeline_parallel, gradient_accumulation_steps, expert_parallel,
                           expert_dispatch_bytes):
    return (moe_layers / pipeline_parallel * gradient_accumulation_steps * 4
            * gather_bytes_sent(expert_dispatch_bytes, expert_parallel))


@formula(account="network", unit="s", meaning="time per step of the expert all-to-alls (α–β)",
         expression="moe_layers / pipeline_parallel × gradient_accumulation_steps × 4"
                    " × all-to-all(expert_dispatch_bytes over expert_parallel)")
def ep_communication_seconds(moe_layers, pipeline_parallel, gradient_accumulation_steps, expert_parallel,
                             expert_dispatch_bytes, ep_link_bytes_per_s, ep_link_latency_seconds):
    one = all_to_all_seconds(expert_dispatch_bytes, expert_parallel, ep_link_bytes_per_s, ep_link_latency_seconds)
    return moe_layers / pipeline_parallel * gradient_accumulation_steps * 4 * one


# --- totals ---------------------------------------------------------------------------------------

@formula(account="network", unit="B", meaning="all collective bytes each accelerator sends per step",
         expression="ring_bytes_sent_per_step + parameter_gather_bytes_sent_per_step + tp_bytes_sent_per_step"
                    " + pp_bytes_sent_per_step + cp_bytes_sent_per_step + ep_bytes_sent_per_step")
def collective_bytes_sent_per_step(ring_bytes_sent_per_step, parameter_gather_bytes_sent_per_step,
                                   tp_bytes_sent_per_step, pp_bytes_sent_per_step, cp_bytes_sent_per_step,
                                   ep_bytes_sent_per_step):
    return (ring_bytes_sent_per_step + parameter_gather_bytes_sent_per_step + tp_bytes_sent_per_step
            + pp_bytes_sent_per_step + cp_bytes_sent_per_step + ep_bytes_sent_per_step)


@formula(account="network", unit="B/s", meaning="average outgoing collective rate per accelerator over a step",
         expression="collective_bytes_sent_per_step / step_seconds",
         source="lesson 000: 3 GB / 0.51 s ≈ 5.9 GB/s")
def average_collective_bytes_per_s(collective_bytes_sent_per_step, step_seconds):
    """Step-averaged rate; bursts during the collective run far above it."""
    return collective_bytes_sent_per_step / step_seconds


@formula(account="network", unit="s", meaning="bandwidth-only lower bound on the collective time per step",
         expression="ring_bytes_sent_per_step / dp_link_bytes_per_s + parameter_gather_bytes_sent_per_step"
                    " / shard_link_bytes_per_s + tp_bytes_sent_per_step / tp_link_bytes_per_s"
                    " + pp_bytes_sent_per_step / pp_link_bytes_per_s + cp_bytes_sent_per_step / cp_link_bytes_per_s"
                    " + ep_bytes_sent_per_step / ep_link_bytes_per_s",
         source="lesson 000: 3 GB / 25 GB/s = 0.12 s")
def collective_floor_seconds(ring_bytes_sent_per_step, dp_link_bytes_per_s, parameter_gather_bytes_sent_per_step,
                             shard_link_bytes_per_s, tp_bytes_sent_per_step, tp_link_bytes_per_s,
                             pp_bytes_sent_per_step, pp_link_bytes_per_s, cp_bytes_sent_per_step,
                             cp_link_bytes_per_s, ep_bytes_sent_per_step, ep_link_bytes_per_s):
    """Ignores latency, contention and topology: the real collectives are slower."""
    return (ring_bytes_sent_per_step / dp_link_bytes_per_s
            + parameter_gather_bytes_sent_per_step / shard_link_bytes_per_s
            + tp_bytes_sent_per_step / tp_link_bytes_per_s + pp_bytes_sent_per_step / pp_link_bytes_per_s
            + cp_bytes_sent_per_step / cp_link_bytes_per_s + ep_bytes_sent_per_step / ep_link_bytes_per_s)


@formula(account="network", unit="fraction", meaning="the collectives' bandwidth floor as a share of the step",
         expression="collective_floor_seconds / step_seconds",
         source="lesson 000: 0.12 s beside a 0.51 s step")
def collective_floor_share(collective_floor_seconds, step_seconds):
    """Above ~10 % the step estimate holds only if communication overlaps the backward pass."""
    return collective_floor_seconds / step_seconds


@formula(account="network", unit="s", meaning="all communication time per step (α–β), before overlap",
         expression="dp_sync_seconds + parameter_gather_seconds + tp_communication_seconds"
                    " + pp_communication_seconds + cp_communication_seconds + ep_communication_seconds")
def communication_seconds(dp_sync_seconds, parameter_gather_seconds, tp_communication_seconds,
                          pp_communication_seconds, cp_communication_seconds, ep_communication_seconds):
    return (dp_sync_seconds + parameter_gather_seconds + tp_communication_seconds + pp_communication_seconds
            + cp_communication_seconds + ep_communication_seconds)


@formula(account="network", unit="s", meaning="communication per step that compute does not hide",
         expression="(dp_sync_seconds + parameter_gather_seconds) × (1 − data_parallel_overlap)"
                    " + (tp_communication_seconds + pp_communication_seconds + cp_communication_seconds"
                    " + ep_communication_seconds) × (1 − model_parallel_overlap)")
def exposed_communication_seconds(dp_sync_seconds, parameter_gather_seconds, data_parallel_overlap,
                                  tp_communication_seconds, pp_communication_seconds, cp_communication_seconds,
                                  ep_communication_seconds, model_parallel_overlap):
    data_parallel = (dp_sync_seconds + parameter_gather_seconds) * (1 - data_parallel_overlap)
    model_parallel = (tp_communication_seconds + pp_communication_seconds + cp_communication_seconds
                      + ep_communication_seconds) * (1 - model_parallel_overlap)
    return data_parallel + model_parallel
