"""Network, the totals: the bytes each accelerator sends per step, the bandwidth floor, and what is exposed.

The model-parallel share ``1 − model_parallel_overlap`` is exposed (TP's after its own GEMM overlap). The data-parallel
share hidden is derived from the stack's schedule (``data_parallel_overlap`` is an output): bucketed reductions hide
behind the last micro-batch's backward except the last bucket, Megatron-Core's weight all-gathers behind the next
first forward, FSDP / ZeRO-3 gathers and reduce-scatters layer by layer behind one layer's compute; a stated
``assumptions.data_parallel_overlap`` overrides it, still bounded by that compute.
"""

from botec.graph import Formulas, maximum, minimum, where

formulas = Formulas(account="network")


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
                  expression="(exposed_tp_communication_seconds + pp_communication_seconds + cp_communication_seconds"
                             " + ep_communication_seconds) × (1 − model_parallel_overlap)")
def exposed_model_parallel_seconds(exposed_tp_communication_seconds, pp_communication_seconds,
                                   cp_communication_seconds, ep_communication_seconds, model_parallel_overlap):
    """TP's part after its own GEMM overlap (strategy.tp_comm_overlap); a stated model_parallel_overlap hides a share
    of the rest."""
    return (exposed_tp_communication_seconds + pp_communication_seconds + cp_communication_seconds
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


@formulas.formula(unit="fraction", meaning="share of a replicated step's gradients and gathered weights in the one "
                                           "bucket the schedule cannot hide (the last reduced, the first gathered)",
                  expression="min(1, max(gradient_bucket_parameters, gradient_bucket_bytes / "
                             "gradient_bytes_per_parameter) / trainable_parameters_per_device)",
                  source="the stack's bucket, as its collectives are split (network/granularity.py GRANULARITY): "
                         "Megatron-Core max(40M, 1M × DP) parameters, PyTorch DDP 25 MiB of gradients, DeepSpeed 5e8 "
                         "elements", detail=True)
def exposed_bucket_share(gradient_bucket_parameters, gradient_bucket_bytes, gradient_bytes_per_parameter,
                         trainable_parameters_per_device):
    bucket = maximum(gradient_bucket_parameters, gradient_bucket_bytes / maximum(gradient_bytes_per_parameter, 1e-9))
    return minimum(bucket / maximum(trainable_parameters_per_device, 1.0), 1.0)


@formulas.formula(unit="s", meaning="data-parallel communication per step that compute does not hide",
                  expression="D − hidden; hidden: a stated share o (o ≥ 0): min(o × D, window + q × F); else, "
                             "weights gathered per micro-batch (G > 0, ZeRO-3 / FSDP): s × min(D, window); else "
                             "(replicated, G = 0): s × (min((1 − k) × R, window) + q × min((1 − k) × W, F))",
                  source="Megatron-Core and PyTorch DDP launch each gradient bucket's reduction as its gradients are "
                         "ready in the last micro-batch's backward, so all but the last bucket (k) hide behind it; "
                         "Megatron-Core's --overlap-param-gather all-gathers the updated weights bucket by bucket under "
                         "the next step's first forward (q); FSDP and ZeRO-3 prefetch one layer ahead (the window); a "
                         "stack that reduces after the backward (s = 0) hides nothing",
                  prose=True,
                  symbols={"D": "data_parallel_communication_seconds",
                           "o": "data_parallel_overlap_stated (−1: none stated)",
                           "s": "data_parallel_schedule ≥ 1", "q": "data_parallel_schedule = 2",
                           "k": "exposed_bucket_share", "G": "parameter_gathers_per_microbatch",
                           "window": "data_parallel_overlap_window_seconds", "R": "gradient_sync_seconds",
                           "W": "parameter_gather_seconds",
                           "F": "microbatch_compute_seconds − microbatch_backward_seconds (the forward)"})
def exposed_data_parallel_seconds(data_parallel_communication_seconds, gradient_sync_seconds, parameter_gather_seconds,
                                  data_parallel_overlap_window_seconds, microbatch_compute_seconds,
                                  microbatch_backward_seconds, parameter_gathers_per_microbatch, exposed_bucket_share,
                                  data_parallel_schedule, data_parallel_overlap_stated):
    overlapped = where(data_parallel_schedule >= 1, 1.0, 0.0)
    gathers_under_forward = where(data_parallel_schedule >= 2, 1.0, 0.0)
    forward = maximum(microbatch_compute_seconds - microbatch_backward_seconds, 0.0)
    kept = 1 - exposed_bucket_share
    replicated = (minimum(kept * gradient_sync_seconds, data_parallel_overlap_window_seconds)
                  + gathers_under_forward * minimum(kept * parameter_gather_seconds, forward))
    sharded = minimum(data_parallel_communication_seconds, data_parallel_overlap_window_seconds)
    derived = overlapped * where(parameter_gathers_per_microbatch > 0, sharded, replicated)
    stated = minimum(maximum(data_parallel_overlap_stated, 0.0) * data_parallel_communication_seconds,
                     data_parallel_overlap_window_seconds + gathers_under_forward * forward)
    return data_parallel_communication_seconds - where(data_parallel_overlap_stated >= 0, stated, derived)


@formulas.formula(unit="fraction", meaning="data-parallel share hidden behind compute",
                  expression="1 − exposed_data_parallel_seconds / data_parallel_communication_seconds",
                  zero_when="data_parallel_communication_seconds == 0")
def data_parallel_overlap(exposed_data_parallel_seconds, data_parallel_communication_seconds):
    """An output: what the stack's schedule hides (exposed_data_parallel_seconds shows how); a stated
    ``assumptions.data_parallel_overlap`` overrides the derivation, as far as compute hides it. 0 where there is no
    data-parallel communication."""
    communication = maximum(data_parallel_communication_seconds, 1e-30)
    return (communication - exposed_data_parallel_seconds) / communication - where(
        data_parallel_communication_seconds > 0, 0.0, 1.0)


@formulas.formula(unit="s", meaning="communication per step that compute does not hide",
                  expression="exposed_model_parallel_seconds + exposed_data_parallel_seconds")
def exposed_communication_seconds(exposed_model_parallel_seconds, exposed_data_parallel_seconds):
    return exposed_model_parallel_seconds + exposed_data_parallel_seconds


@formulas.formula(unit="fraction", meaning="the communication compute does not hide, as a share of the step",
                  expression="exposed_communication_seconds / step_seconds", detail=True)
def exposed_communication_share(exposed_communication_seconds, step_seconds):
    return exposed_communication_seconds / step_seconds
