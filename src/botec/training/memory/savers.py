"""Memory, the savers: offloading to host memory and FSDP/ZeRO-3's gather buffers.

Offloading moves state to host memory (its own account: :mod:`botec.training.memory.plan`) and costs host-link
time (:mod:`botec.training.network.host_link`) and CPU time (:mod:`botec.training.compute.step`). With none of
the savers stated every term here is 0 and the plan is the lesson's.
"""

from botec.graph import Formulas, maximum, where
from botec.training.memory.activations import _stage_peak

formulas = Formulas(account="memory")

# The CPU optimizer reads FP32 gradients: ZeRO-Offload keeps them in host memory next to the FP32 master weights and
# moments (DeepSpeed's estimate_zero2/zero3_model_states_mem_needs count 16 B per parameter on the host: 4 + 8 + 4).
HOST_GRADIENT_BYTES_PER_PARAMETER = 4.0


@formulas.formula(unit="parameters", meaning="parameters whose optimizer state one accelerator holds and updates (0 "
                                             "for an optimizer without state)",
                  expression="optimizer_memory_bytes / (master_weight_bytes_per_parameter"
                             " + optimizer_state_bytes_per_parameter)",
                  source="ZeRO-1 and up: each rank updates the shard of the optimizer state it holds", detail=True)
def updated_parameters_per_device(optimizer_memory_bytes, master_weight_bytes_per_parameter,
                                  optimizer_state_bytes_per_parameter):
    state_per_parameter = master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter
    return where(state_per_parameter > 0, optimizer_memory_bytes / maximum(state_per_parameter, 1e-30), 0.0)


@formulas.formula(unit="B", meaning="training state offloading takes off the device (it lives in host memory)",
                  expression="(gradient_memory_bytes + optimizer_memory_bytes if optimizer_offload_cpu else 0)"
                             " + (weight_memory_bytes if parameter_offload else 0)",
                  source="ZeRO-Offload (Ren et al. 2021 §4): gradients stream to the host as the backward produces "
                         "them (the device keeps only the reduce buckets, inside the runtime buffer, and under "
                         "ZeRO-3 one layer's gradients in the gather buffer) and the FP32 master weights and moments "
                         "stay there; the device keeps the 16-bit weights. ZeRO-3 offload_param / FSDP "
                         "CPUOffload(offload_params=True): the weight shards live on the host too")
def offloaded_state_bytes(gradient_memory_bytes, optimizer_memory_bytes, optimizer_offload_cpu, weight_memory_bytes,
                          parameter_offload):
    return (where(optimizer_offload_cpu, gradient_memory_bytes + optimizer_memory_bytes, 0.0)
            + where(parameter_offload, weight_memory_bytes, 0.0))


@formulas.formula(unit="B", meaning="training state one accelerator keeps in host memory",
                  expression="(optimizer_memory_bytes + 4 × updated_parameters_per_device if optimizer_offload_cpu"
                             " else 0) + (weight_memory_bytes if parameter_offload else 0)",
                  source="DeepSpeed estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs: "
                         "16 B per parameter on the host with offload_optimizer (FP32 master 4 + moments 8 + FP32 "
                         "gradients 4, the CPU Adam's input), 18 B with offload_param (+ the 16-bit weights)")
def host_state_bytes(optimizer_memory_bytes, updated_parameters_per_device, optimizer_offload_cpu,
                     weight_memory_bytes, parameter_offload):
    gradients = HOST_GRADIENT_BYTES_PER_PARAMETER * updated_parameters_per_device
    return (where(optimizer_offload_cpu, optimizer_memory_bytes + gradients, 0.0)
            + where(parameter_offload, weight_memory_bytes, 0.0))


# Activation offloading (torchtune's OffloadActivations, enable_activation_offloading): each tensor a block saves for
# its backward goes to pinned host memory in the forward, on a side CUDA stream, and comes back for its block's
# backward.
# Two things stay on the device (torchtune/training/_activation_offloading.py, get_act_offloading_ctx_manager): the
# output layer, which runs under a NoOpManager ("disable offloading the last output Linear": its FP32 logits are
# needed at once by the backward), and the layer full recomputation rematerializes in the backward (the saved-tensor
# hooks wrap the forward only, so what the recomputation saves is not offloaded).

@formulas.formula(unit="B", meaning="retained activations held in host memory at the peak: the offloaded share of "
                                    "every layer but the one whose backward runs (copied back)",
                  expression="activation_offload × activation_bytes × (1 − 1 / activation_layers_in_flight)",
                  source="torchtune's activation offloading (enable_activation_offloading): the device keeps (1 − f) "
                         "of every layer plus the layer in flight (the placeholder model has no output layer nor "
                         "rematerialized layer of its own)",
                  zero_when="activation_offload == 0", choice=("activations", "saved_tensor_factor"))
def offloaded_activation_bytes(activation_offload, activation_bytes, activation_layers_in_flight):
    return activation_offload * activation_bytes * (1 - 1 / activation_layers_in_flight)


@formulas.formula(unit="B", meaning="retained activations held in host memory at the peak: the offloaded share of "
                                    "the blocks' saved tensors but the block whose backward runs; the output layer's "
                                    "FP32 logits and the rematerialized layer stay on the device",
                  expression="activation_bytes − max(A₁ − f·max(A₁ − a, 0) + R, A_p − f·max(A_p − a, 0) + max(O, R)), "
                             "A₁ = activation_layers_in_flight × a, A_p = last_stage_layers × a",
                  source="torchtune OffloadActivations: the blocks' saved tensors go to the host, the layer in flight "
                         "comes back; get_act_offloading_ctx_manager runs the output Linear under a NoOpManager (not "
                         "offloaded) and the recomputation of activation checkpointing saves outside the offloading "
                         "hooks (Korthikanti et al. 2022's stage peaks: the first stage's p micro-batches, or the last "
                         "stage's layers and its output layer)",
                  zero_when="activation_offload == 0", choice=("activations", "korthikanti"),
                  symbols={"f": "activation_offload", "a": "activation_bytes_per_layer",
                           "O": "output_layer_activation_bytes", "R": "rematerialized_layer_bytes"})
def offloaded_activation_bytes(activation_offload, activation_layers_in_flight,  # noqa: F811
                               activation_bytes_per_layer, last_stage_layers, output_layer_activation_bytes,
                               rematerialized_layer_bytes, activation_bytes):
    """Offloading at a share f takes f of every retained block but the one whose backward runs (a, copied back) off
    the device; the output layer (O) and the rematerialized layer (R) stay. Per stage of Korthikanti et al.'s peak
    (:func:`botec.training.memory.activations.activation_bytes`):

        first stage  A₁ = L_in_flight × a        → A₁ − f·max(A₁ − a, 0) + R on the device
        last stage   A_p = L_p × a               → A_p − f·max(A_p − a, 0) + max(O, R)

    offloaded = the activation peak − the larger of the two on the device."""
    a = activation_bytes_per_layer
    first_kept = activation_layers_in_flight * a
    first_kept = first_kept - activation_offload * maximum(first_kept - a, 0.0)
    last_kept = last_stage_layers * a
    last_kept = last_kept - activation_offload * maximum(last_kept - a, 0.0)
    return activation_bytes - _stage_peak(first_kept, last_kept, output_layer_activation_bytes,
                                          rematerialized_layer_bytes)


@formulas.formula(unit="B", meaning="activations one micro-batch copies to host memory (and back for the backward)",
                  expression="activation_offload × activation_bytes × pipeline_stage_layers / "
                             "activation_layers_in_flight",
                  source="torchtune's activation offloading: every saved tensor of the stage's layers, f of it",
                  zero_when="activation_offload == 0", choice=("activations", "saved_tensor_factor"), detail=True)
def offloaded_activation_bytes_per_microbatch(activation_offload, activation_bytes, pipeline_stage_layers,
                                              activation_layers_in_flight):
    return activation_offload * activation_bytes * pipeline_stage_layers / activation_layers_in_flight


@formulas.formula(unit="B", meaning="activations one micro-batch copies to host memory (and back for the backward): "
                                    "its blocks' saved tensors, not the output layer's nor the recomputation's",
                  expression="activation_offload × pipeline_stage_layers × activation_bytes_per_layer",
                  source="torchtune OffloadActivations: the blocks' saved tensors, f of them; the output Linear runs "
                         "under a NoOpManager and the recomputation outside the hooks",
                  zero_when="activation_offload == 0", choice=("activations", "korthikanti"), detail=True)
def offloaded_activation_bytes_per_microbatch(activation_offload, pipeline_stage_layers,  # noqa: F811
                                              activation_bytes_per_layer):
    return activation_offload * pipeline_stage_layers * activation_bytes_per_layer


@formulas.formula(unit="parameters", meaning="the largest ZeRO-3/FSDP unit (one transformer block) as one "
                                             "accelerator gathers it",
                  expression="max(dense_block_parameters / tensor_parallel, moe_block_parameters / tensor_parallel"
                             " + expert_parameters / (max(moe_layers, 1) × expert_parallel × expert_tensor_parallel))",
                  source="FSDP wraps each transformer block as one unit (transformer_auto_wrap_policy); its routed "
                         "experts are split over EP", detail=True)
def gathered_layer_parameters(dense_block_parameters, tensor_parallel, moe_block_parameters, expert_parameters,
                              moe_layers, expert_parallel, expert_tensor_parallel):
    routed = expert_parameters / (maximum(moe_layers, 1) * expert_parallel * expert_tensor_parallel)
    return maximum(dense_block_parameters / tensor_parallel, moe_block_parameters / tensor_parallel + routed)


@formulas.formula(unit="parameters", meaning="trainable parameters of the gathered unit: the whole block, or under "
                                             "LoRA its adapters (a layer's share of the accelerator's)",
                  expression="trainable_parameters_per_device / pipeline_stage_layers if frozen_base else "
                             "gathered_layer_parameters", detail=True)
def trainable_layer_parameters(frozen_base, trainable_parameters_per_device, pipeline_stage_layers,
                               gathered_layer_parameters):
    return where(frozen_base, trainable_parameters_per_device / pipeline_stage_layers, gathered_layer_parameters)


@formulas.formula(unit="B", meaning="the gathered unit's weights: the block at the weights' bytes, or under LoRA the "
                                    "frozen block in the base's format and its adapters",
                  expression="(gathered_layer_parameters × quantized_weight_bytes_per_parameter if frozen_base else "
                             "0) + trainable_layer_parameters × weight_bytes_per_parameter",
                  source="a block is its linear weights (QLoRA: in the base's format) and two norms (counted in it)",
                  detail=True)
def gathered_layer_weight_bytes(gathered_layer_parameters, quantized_weight_bytes_per_parameter, frozen_base,
                                trainable_layer_parameters, weight_bytes_per_parameter):
    frozen = where(frozen_base, gathered_layer_parameters * quantized_weight_bytes_per_parameter, 0.0)
    return frozen + trainable_layer_parameters * weight_bytes_per_parameter


@formulas.formula(unit="B", meaning="ZeRO-3/FSDP buffers: the unsharded layers gathered at once, and one layer's "
                                    "unsharded gradients before their reduce-scatter",
                  expression="(1 + fsdp_prefetch) × gathered_layer_weight_bytes"
                             " + trainable_layer_parameters × gradient_bytes_per_parameter",
                  source="Zhao et al. 2023, 'PyTorch FSDP' (VLDB) §3.2-3.3: the unit computing and the one prefetched "
                         "(BACKWARD_PRE, the default) are unsharded at once, and a unit's gradients stay unsharded "
                         "until its reduce-scatter; DeepSpeed ZeRO-3: stage3_prefetch_bucket_size, "
                         "stage3_max_live_parameters, and its estimator's 4 B per parameter of the largest layer",
                  zero_when="zero_stage < 3 or sharding_degree == 1")
def fsdp_gather_buffer_bytes(  # noqa: D401
fsdp_prefetch, gathered_layer_weight_bytes, trainable_layer_parameters,
                             gradient_bytes_per_parameter):
    """ZeRO-3/FSDP never holds the whole model unsharded: it gathers one wrapped unit at a time, a transformer block
    under transformer_auto_wrap_policy (Llama-2-7B: 202,383,360 parameters), and frees it after use:

        M_gather = (1 + n_prefetch) × W_block + P_block × b_grad

    n_prefetch: units gathered ahead (FSDP's backward_prefetch=BACKWARD_PRE and forward_prefetch gather one ahead:
    1, the default; FSDP2's fully_shard the same, one block ahead), W_block the block's weights as gathered (LoRA:
    its frozen base in the stored format and its adapters), P_block its trainable parameters, whose gradients are
    unsharded until their reduce-scatter. Source: torch.distributed.fsdp (FlatParamHandle.unshard/reshard; Zhao et al.
    2023 §3.2-3.3). DeepSpeed ZeRO-3 fetches sub-modules in the order traced at the first step and prefetches up to
    stage3_prefetch_bucket_size parameters ahead (default 5e7; Hugging Face's 'auto' 0.9·h², 15M at h = 4,096),
    capped by stage3_max_live_parameters (1e9): state fsdp_prefetch as that bucket over one block's parameters
    (≈ 0.25 for Llama-2-7B at the default bucket, 0.07 with 'auto')."""
    return (1 + fsdp_prefetch) * gathered_layer_weight_bytes + trainable_layer_parameters * gradient_bytes_per_parameter
