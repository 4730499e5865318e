"""Accelerator memory: persistent training state, activations, buffers, headroom.

Sources: lesson 000 ("Accelerator memory: separate persistent state from the batch-dependent
peak"); ZeRO sharding of the state: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models" (section 5: 7.5B parameters on 64 ranks need 120 GB,
31.4 GB, 16.6 GB, 1.9 GB for DP, ZeRO-1, -2, -3); activations per layer: Korthikanti et al.
2022, "Reducing Activation Recomputation in Large Transformer Models" (table 2).

Parameters are split over tensor (t) and pipeline (p) ranks, experts also over expert-parallel
ranks (e) (:mod:`botec.formulas.weights`); ZeRO then shards the state of each over its sharding
group (the data-parallel ranks, or a smaller group for hybrid sharding; experts over that group / e).

The memory savers (their own section below): the optimizer offloaded to the CPU (ZeRO-Offload, Ren
et al. 2021; FSDP CPUOffload) and the weight shards with it; paged optimizers (Dettmers et al.
2023, "QLoRA" §3); activation offloading (torchtune); full recomputation of a share of the layers
(Megatron's --recompute-num-layers); FSDP/ZeRO-3's gathered layers (Zhao et al. 2023, "PyTorch
FSDP" §3); the caching allocator's reserve. The plan is then

    planned = (state + activations + buffers + gather buffers − offloaded + reserve − paged out) × (1 + headroom)

and host memory is an account of its own (per accelerator and per node, against supply.host_memory).
"""

from botec.graph import Formulas, ceil, floor, maximum, minimum, where
from botec.layout import Recompute

formulas = Formulas(account="memory")

formulas.input("loss_activation_bytes_per_logit", unit="B", detail=True,
               meaning="bytes the cross entropy keeps per logit for the backward (4 fused FP32; 10 for the unfused "
                       "Hugging Face loss; 6 chunked; 0 fused-linear)")
formulas.input("gradient_bytes_per_parameter", unit="B/parameter",
               meaning="bytes of the gradients per parameter")
formulas.input("master_weight_bytes_per_parameter", unit="B/parameter",
               meaning="bytes of the higher-precision master weights per parameter")
formulas.input("optimizer_state_bytes_per_parameter", unit="B/parameter",
               meaning="bytes of the optimizer's moments per parameter")
formulas.input("zero_stage", unit="1",
               meaning="ZeRO stage: 0 replicates the state, 1 shards optimizer state, 2 also gradients, 3 also weights")
formulas.input("sharding_degree", unit="1",
               meaning="ranks a ZeRO/FSDP shard group spans (DP; fewer for hybrid sharding)")
formulas.input("sequence_parallel", unit="1",
               meaning="1 when sequence parallelism splits the TP region's activations over the TP ranks")
formulas.input("saved_tensor_factor", unit="1",
               meaning="hidden-state-sized tensors retained per layer for the backward pass (placeholder)")
formulas.input("runtime_buffer_bytes", unit="B",
               meaning="runtime and temporary buffers per accelerator")
formulas.input("pipeline_activation_layers", unit="layers",
               meaning="layers' worth of activations the busiest stage keeps under 1F1B: max over stages i of (p − i)·L_i")
formulas.input("headroom", unit="1",
               meaning="extra share of planned memory kept free for peaks and fragmentation")
# The memory savers (issue 13): offloading to host memory, paged optimizers, FSDP's gather buffers, the allocator.
formulas.input("optimizer_offload_cpu", unit="1",
               meaning="1 when the master weights, optimizer moments and FP32 gradients live in host memory and the "
                       "CPU steps the optimizer (ZeRO-Offload, FSDP CPUOffload), else 0")
formulas.input("optimizer_offload_paged", unit="1",
               meaning="1 when the optimizer state is paged: in unified memory, evicted to host memory only when the "
                       "device runs short (bitsandbytes paged optimizers), else 0")
formulas.input("parameter_offload", unit="1",
               meaning="1 when the weight shards live in host memory (ZeRO-3 offload_param, FSDP "
                       "CPUOffload(offload_params=True)), else 0")
formulas.input("activation_offload", unit="fraction",
               meaning="share of the retained activations copied to host memory until the backward needs them")
formulas.input("fsdp_prefetch", unit="layers",
               meaning="ZeRO-3/FSDP units gathered ahead of the one computing (each one more unsharded layer)")
formulas.input("allocator_reserve", unit="1",
               meaning="memory the caching allocator reserves beyond the allocated peak, as a share of it")

# The CPU optimizer reads FP32 gradients: ZeRO-Offload keeps them in host memory next to the FP32 master weights and
# moments (DeepSpeed's estimate_zero2/zero3_model_states_mem_needs count 16 B per parameter on the host: 4 + 8 + 4).
HOST_GRADIENT_BYTES_PER_PARAMETER = 4.0
# A paged optimizer's state moves between device and host in whole pages: 2 MiB, the GPU's large page.
UNIFIED_MEMORY_PAGE_BYTES = 2.0**21


def _held(bytes_per_parameter, dense_parameters, dense_shards, expert_parameters, expert_shards):
    """Bytes one accelerator holds of one kind of state: b × (dense / its shards + experts / theirs)."""
    return bytes_per_parameter * (dense_parameters / dense_shards + expert_parameters / expert_shards)


def _shards(zero_stage, stage, degree):
    """Ways a state is split: ``degree`` once the ZeRO stage reaches ``stage``, else 1."""
    return where(zero_stage >= stage, degree, 1)


@formulas.formula(unit="1", meaning="ways the working weights are split (ZeRO-3 / FSDP full shard)",
                  expression="sharding_degree if zero_stage ≥ 3 else 1", detail=True)
def weight_shards(zero_stage, sharding_degree):
    return _shards(zero_stage, 3, sharding_degree)


@formulas.formula(unit="1", meaning="ways the gradients are split (ZeRO-2 and up)",
                  expression="sharding_degree if zero_stage ≥ 2 else 1", detail=True)
def gradient_shards(zero_stage, sharding_degree):
    return _shards(zero_stage, 2, sharding_degree)


@formulas.formula(unit="1", meaning="ways master weights and optimizer moments are split (ZeRO-1 and up)",
                  expression="sharding_degree if zero_stage ≥ 1 else 1", detail=True)
def optimizer_shards(zero_stage, sharding_degree):
    return _shards(zero_stage, 1, sharding_degree)


@formulas.formula(unit="1", meaning="ranks an expert's ZeRO shard group spans",
                  expression="max(sharding_degree / expert_parallel, 1)", detail=True)
def expert_sharding_degree(sharding_degree, expert_parallel):
    """Each expert lives on DP / EP data-parallel ranks; its state is sharded over those."""
    return maximum(sharding_degree / expert_parallel, 1)


@formulas.formula(unit="1", meaning="copies of a stage's parameters one accelerator holds: 2 under DualPipe, else 1",
                  expression="2 if pipeline_schedule ≥ 3 else 1",
                  source="DeepSeek-V3 Table 2: DualPipe keeps 2× the parameters (each rank runs stage i in one "
                         "direction and stage p − 1 − i in the other; deepseek-ai/DualPipe holds two modules per "
                         "rank, each with its gradients and optimizer state)", detail=True)
def pipeline_parameter_copies(pipeline_schedule):
    return where(pipeline_schedule >= 3, 2.0, 1.0)


@formulas.formula(unit="B", meaning="working weights held by one accelerator (under LoRA: the adapters, and the "
                                    "frozen base in its own format)",
                  expression="(weight_bytes_per_parameter × (trainable_dense_parameters_per_device / weight_shards"
                             " + trainable_expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 3"
                             " else 1)) + frozen_weight_memory_bytes) × pipeline_parameter_copies")
def weight_memory_bytes(weight_bytes_per_parameter, trainable_dense_parameters_per_device, weight_shards,
                        trainable_expert_parameters_per_device, expert_sharding_degree, zero_stage,
                        frozen_weight_memory_bytes, pipeline_parameter_copies):
    return (_held(weight_bytes_per_parameter, trainable_dense_parameters_per_device, weight_shards,
                  trainable_expert_parameters_per_device, _shards(zero_stage, 3, expert_sharding_degree))
            + frozen_weight_memory_bytes) * pipeline_parameter_copies


@formulas.formula(unit="B", meaning="gradients held by one accelerator (trainable parameters only)",
                  expression="gradient_bytes_per_parameter × (trainable_dense_parameters_per_device / gradient_shards"
                             " + trainable_expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 2"
                             " else 1)) × pipeline_parameter_copies")
def gradient_memory_bytes(gradient_bytes_per_parameter, trainable_dense_parameters_per_device, gradient_shards,
                          trainable_expert_parameters_per_device, expert_sharding_degree, zero_stage,
                          pipeline_parameter_copies):
    return _held(gradient_bytes_per_parameter, trainable_dense_parameters_per_device, gradient_shards,
                 trainable_expert_parameters_per_device, _shards(zero_stage, 2, expert_sharding_degree)) \
        * pipeline_parameter_copies


@formulas.formula(unit="B", meaning="master weights and optimizer moments held by one accelerator (trainable "
                                    "parameters only)",
                  expression="(master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter)"
                             " × (trainable_dense_parameters_per_device / optimizer_shards"
                             " + trainable_expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 1"
                             " else 1)) × pipeline_parameter_copies")
def optimizer_memory_bytes(master_weight_bytes_per_parameter, optimizer_state_bytes_per_parameter,
                           trainable_dense_parameters_per_device, optimizer_shards,
                           trainable_expert_parameters_per_device, expert_sharding_degree, zero_stage,
                           pipeline_parameter_copies):
    return _held(master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter,
                 trainable_dense_parameters_per_device, optimizer_shards, trainable_expert_parameters_per_device,
                 _shards(zero_stage, 1, expert_sharding_degree)) * pipeline_parameter_copies


@formulas.formula(unit="B", meaning="persistent training state per accelerator",
                  expression="weight_memory_bytes + gradient_memory_bytes + optimizer_memory_bytes",
                  source="lesson 000: 10⁹ × (2 + 2 + 4 + 4 + 4) B = 16 GB")
def state_bytes(weight_memory_bytes, gradient_memory_bytes, optimizer_memory_bytes):
    """M_state = weights + gradients + (master weights + moments), each as sharded."""
    return weight_memory_bytes + gradient_memory_bytes + optimizer_memory_bytes


@formulas.formula(unit="B/parameter", meaning="training state per parameter before any sharding",
                  expression="weight_bytes_per_parameter + gradient_bytes_per_parameter"
                             " + master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter",
                  source="lesson 000 table: 2 + 2 + 4 + 4 + 4 = 16 for Adam in mixed precision", detail=True)
def unsharded_state_bytes_per_parameter(weight_bytes_per_parameter, gradient_bytes_per_parameter,
                                        master_weight_bytes_per_parameter, optimizer_state_bytes_per_parameter):
    return (weight_bytes_per_parameter + gradient_bytes_per_parameter + master_weight_bytes_per_parameter
            + optimizer_state_bytes_per_parameter)


@formulas.formula(unit="B/parameter",
                  meaning="persistent training state per parameter held on one accelerator (after sharding)",
                  expression="state_bytes / parameters_per_device",
                  source="lesson 000 table: 2 + 2 + 4 + 4 + 4 = 16 for Adam in mixed precision")
def state_bytes_per_parameter(state_bytes, parameters_per_device):
    return state_bytes / parameters_per_device


@formulas.formula(unit="tokens", meaning="tokens of one sequence held by one context-parallel rank",
                  expression="sequence_length / context_parallel", detail=True)
def local_sequence_length(sequence_length, context_parallel):
    return sequence_length / context_parallel


@formulas.formula(unit="B", meaning="one micro-batch's activation tensor at a layer boundary, whole",
                  expression="micro_batch_size × local_sequence_length × hidden_size × activation_bytes_per_element",
                  source="lesson 000: 2 × 2,048 × 2,048 × 2 ≈ 16.8 MB", detail=True)
def layer_activation_bytes(micro_batch_size, local_sequence_length, hidden_size, activation_bytes_per_element):
    """B_local × S × H × b (S split by CP): what a TP all-reduce carries and a pipeline stage hands on."""
    return micro_batch_size * local_sequence_length * hidden_size * activation_bytes_per_element


@formulas.formula(unit="B", meaning="one hidden-state tensor at one layer, as one accelerator holds it",
                  expression="layer_activation_bytes / (tensor_parallel if sequence_parallel else 1)",
                  source="lesson 000: 2 × 2,048 × 2,048 × 2 ≈ 16.8 MB")
def hidden_state_bytes(layer_activation_bytes, tensor_parallel, sequence_parallel):
    """M_hidden = B_local × S × H × b, split over the TP ranks when sequence parallel."""
    return layer_activation_bytes / where(sequence_parallel, tensor_parallel, 1)


@formulas.formula(unit="1",
                  meaning="activations the schedule keeps in flight on the first stage, relative to its 1F1B peak",
                  expression="(1 + (pipeline_parallel − 1) / (pipeline_parallel × virtual_pipeline_stages) if "
                             "virtual_pipeline_stages > 1 else 1) × min(k, gradient_accumulation_steps) / "
                             "pipeline_parallel, k = the micro-batches in flight: p (1F1B, ZB-H1), 2p − 1 (ZB-H2), "
                             "p + 1 (DualPipe)",
                  source="Korthikanti et al. 2022 §4.2 (interleaved 1F1B); Megatron-LM theoretical_memory_usage.py: "
                         "× min(1, m/p) when fewer micro-batches than stages are in flight; Qi et al. 2023 Table 1: "
                         "ZB-H1 p·M_B, ZB-H2 (2p − 1)·M_B; DeepSeek-V3 Table 2: DualPipe PP + 1",
                  detail=True, prose=True)
def pipeline_activation_factor(pipeline_parallel, virtual_pipeline_stages, gradient_accumulation_steps,
                               pipeline_schedule):
    interleaved = 1 + (pipeline_parallel - 1) / (pipeline_parallel * virtual_pipeline_stages)
    most = where(pipeline_schedule >= 3, pipeline_parallel + 1,
                 where(pipeline_schedule >= 2, 2 * pipeline_parallel - 1, pipeline_parallel))
    in_flight = minimum(most, gradient_accumulation_steps) / pipeline_parallel
    return where(virtual_pipeline_stages > 1, interleaved, 1.0) * in_flight


@formulas.formula(unit="layers",
                  meaning="layers' worth of activations the busiest pipeline stage holds at its peak",
                  expression="pipeline_activation_layers × pipeline_activation_factor",
                  source="Korthikanti et al. 2022 §4.2: 1F1B keeps p micro-batches of L/p layers on the first stage")
def activation_layers_in_flight(pipeline_activation_layers, pipeline_activation_factor):
    return pipeline_activation_layers * pipeline_activation_factor


@formulas.formula(unit="B", meaning="activations retained for the backward pass",
                  expression="activation_layers_in_flight × saved_tensor_factor × hidden_state_bytes",
                  source="lesson 000: 16 × 8 × 16.8 MB ≈ 2.15 GB (the factor 8 is a placeholder)",
                  choice=("activations", "saved_tensor_factor"))
def activation_bytes(activation_layers_in_flight, saved_tensor_factor, hidden_state_bytes):
    """M_act = L × k × M_hidden, k the saved-tensor factor (replace with a measured peak)."""
    return activation_layers_in_flight * saved_tensor_factor * hidden_state_bytes


@formulas.formula(unit="B", meaning="what one layer keeps of its linear parts for one micro-batch (everything but "
                                    "the attention scores)",
                  expression="activation_bytes_per_element / 2 × local_sequence_length × micro_batch_size × ((10 + "
                             "5 × cross_attention_layers / layers) × hidden_size / (tensor_parallel if "
                             "sequence_parallel else 1) + 2 × (attention_activation_width + mlp_activation_width) / "
                             "tensor_parallel) + adapter_activation_bytes_per_layer",
                  source="Korthikanti et al. 2022 §4.1 (16-bit activations): norms 4sbh, the inputs of QKV and MLP "
                         "4sbh and two dropout masks 2sbh stay whole without sequence parallelism (10sbh, 5sbh per "
                         "sub-block: an encoder-decoder's cross-attention sub-block adds its own 5sbh, averaged over "
                         "the layers); Q, K, V, the attention output and the MLP's hidden layer are split over TP "
                         "(24sbh/t for a GPT layer: widths 4h and 2 × 4h); GQA, gated and MoE MLPs by their own "
                         "widths; LoRA adds its adapters' x·A (botec.training.adapters)",
                  detail=True, prose=True)
def layer_linear_activation_bytes(activation_bytes_per_element, local_sequence_length, micro_batch_size, hidden_size,
                                  tensor_parallel, sequence_parallel, attention_activation_width,
                                  mlp_activation_width, adapter_activation_bytes_per_layer, cross_attention_layers,
                                  layers):
    whole = (10 + 5 * cross_attention_layers / layers) * hidden_size / where(sequence_parallel, tensor_parallel, 1)
    split = 2 * (attention_activation_width + mlp_activation_width) / tensor_parallel
    return (activation_bytes_per_element / 2 * local_sequence_length * micro_batch_size * (whole + split)
            + adapter_activation_bytes_per_layer)


@formulas.formula(unit="B", meaning="what one layer keeps of the attention scores (eager attention only)",
                  expression="activation_bytes_per_element / 2 × 5 × attention_heads × local_sequence_length"
                             " × sequence_length × micro_batch_size / tensor_parallel",
                  source="Korthikanti et al. 2022 §4.1: softmax output 2as²b, its dropout mask as²b and output "
                         "2as²b; a fused (flash) kernel keeps none of them (Dao et al. 2022)",
                  zero_when="fused_attention == 1", detail=True)
def attention_score_activation_bytes(activation_bytes_per_element, attention_heads, local_sequence_length,
                                     sequence_length, micro_batch_size, tensor_parallel):
    return (activation_bytes_per_element / 2 * 5 * attention_heads * local_sequence_length * sequence_length
            * micro_batch_size / tensor_parallel)


@formulas.formula(unit="B", meaning="activations one transformer layer keeps for one micro-batch (averaged over the "
                                    "layers when only some recompute)",
                  expression="with full recompute, full_recompute_share × 2·s·b·h / (t if SP else 1) × "
                             "(activation_bytes_per_element / 2) + (1 − full_recompute_share) × "
                             "(layer_linear_activation_bytes + attention_score_activation_bytes); otherwise "
                             "layer_linear_activation_bytes + attention_score_activation_bytes unless selective "
                             "recompute",
                  source="Korthikanti et al. 2022, table 2 (16-bit activations, 4h MLP): s·b·h·(10 + 24/t + 5as/ht); "
                         "with SP 34/t; selective drops the scores; full keeps the layer's input 2sbh; Megatron's "
                         "--recompute-num-layers: the layers that do not recompute keep everything",
                  prose=True,
                  symbols={"s": "local_sequence_length", "b": "micro_batch_size", "h": "hidden_size",
                           "t": "tensor_parallel", "SP": "sequence_parallel"})
def activation_bytes_per_layer(local_sequence_length, micro_batch_size, hidden_size, tensor_parallel,
                               sequence_parallel, recompute, activation_bytes_per_element,
                               layer_linear_activation_bytes, attention_score_activation_bytes,
                               full_recompute_share):
    """Korthikanti et al. 2022 per-layer activations (bytes), GPT layer shown:

    ====================  =====================================
    no recompute          s·b·h·(10 + 24/t + 5·a·s/(h·t))
    + sequence parallel   s·b·h·(34/t + 5·a·s/(h·t))
    selective recompute   s·b·h·(10 + 24/t)
    + sequence parallel   s·b·h·34/t
    full recompute        2·s·b·h  (÷ t with sequence parallel)
    ====================  =====================================

    A fused attention kernel (the default) keeps no scores: the selective row. The constants assume
    16-bit activations; other widths scale them by b_act / 2. Under full recomputation of a share φ of the
    layers (``recompute_layer_fraction``), φ·L layers keep the full-recompute row and the rest the
    no-recompute row: φ × full + (1 − φ) × none, per layer on average.
    """
    sbh = local_sequence_length * micro_batch_size * hidden_size
    full = activation_bytes_per_element / 2 * 2 * sbh / where(sequence_parallel, tensor_parallel, 1)
    everything = layer_linear_activation_bytes + attention_score_activation_bytes
    kept = layer_linear_activation_bytes + where(recompute >= Recompute.SELECTIVE, 0.0,
                                                 attention_score_activation_bytes)
    partial = full_recompute_share * full + (1 - full_recompute_share) * everything
    return where(recompute >= Recompute.FULL, partial, kept)


@formulas.formula(unit="B", meaning="the one layer full recomputation rematerializes at a time, during its backward",
                  expression="layer_linear_activation_bytes + attention_score_activation_bytes",
                  source="Korthikanti et al. 2022 §5: recomputing a layer rebuilds all its activations",
                  zero_when="recompute < 2", detail=True)
def rematerialized_layer_bytes(layer_linear_activation_bytes, attention_score_activation_bytes):
    return layer_linear_activation_bytes + attention_score_activation_bytes


@formulas.formula(unit="B", meaning="the output layer's activations on the last stage: its input and the logits the "
                                    "cross entropy keeps",
                  expression="local_sequence_length × micro_batch_size × (4 × hidden_size + loss_activation_bytes_per_logit"
                             " × vocab_size) / tensor_parallel",
                  source="Korthikanti et al. 2022 §4.3: 4·s·b·h·(1 + V/h)/t for the vocabulary-parallel cross entropy "
                         "(4 B per FP32 logit); the unfused Hugging Face / torchtitan loss keeps 10 B per logit, torchtune's "
                         "chunked one 6, a fused-linear one none (catalog/stacks.yaml)",
                  detail=True)
def output_layer_activation_bytes(local_sequence_length, micro_batch_size, hidden_size, vocab_size, tensor_parallel,
                                  loss_activation_bytes_per_logit):
    return (local_sequence_length * micro_batch_size
            * (4 * hidden_size + loss_activation_bytes_per_logit * vocab_size) / tensor_parallel)


@formulas.formula(unit="B", meaning="activations retained for the backward pass on the busiest stage",
                  expression="max(activation_layers_in_flight × activation_bytes_per_layer, last_stage_layers"
                             " × activation_bytes_per_layer + output_layer_activation_bytes)"
                             " + rematerialized_layer_bytes",
                  source="Korthikanti et al. 2022: the first stage holds p micro-batches of its layers under 1F1B, "
                         "the last one micro-batch and the output layer", choice=("activations", "korthikanti"))
def activation_bytes(activation_layers_in_flight, activation_bytes_per_layer, last_stage_layers,  # noqa: F811
                     output_layer_activation_bytes, rematerialized_layer_bytes):
    first_stage = activation_layers_in_flight * activation_bytes_per_layer
    last_stage = last_stage_layers * activation_bytes_per_layer + output_layer_activation_bytes
    return maximum(first_stage, last_stage) + rematerialized_layer_bytes


# --- memory savers: offloading, paging, FSDP's gather buffers, the allocator's reserve ---------------------------
#
# Offloading moves state to host memory (its own account below) and costs host-link time (network.py) and CPU time
# (compute.py). With none of the savers stated every term here is 0 and the plan is the lesson's.

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
                  expression="max(A₁, A_p + O) − max(A₁ − f·max(A₁ − a, 0), A_p + O − f·max(A_p − a, 0)), "
                             "A₁ = activation_layers_in_flight × a, A_p = last_stage_layers × a",
                  source="torchtune OffloadActivations: the blocks' saved tensors go to the host, the layer in flight "
                         "comes back; get_act_offloading_ctx_manager runs the output Linear under a NoOpManager (not "
                         "offloaded) and the recomputation of activation checkpointing saves outside the offloading "
                         "hooks (Korthikanti et al. 2022's stage peaks: the first stage's p micro-batches, or the last "
                         "stage's layers and its output layer)",
                  zero_when="activation_offload == 0", choice=("activations", "korthikanti"),
                  symbols={"f": "activation_offload", "a": "activation_bytes_per_layer",
                           "O": "output_layer_activation_bytes"})
def offloaded_activation_bytes(activation_offload, activation_layers_in_flight,  # noqa: F811
                               activation_bytes_per_layer, last_stage_layers, output_layer_activation_bytes):
    """Offloading at a share f takes f of every retained block but the one whose backward runs (a, copied back) off
    the device; the output layer (O) and the rematerialized layer stay. Per stage of Korthikanti et al.'s peak:

        first stage  A₁ = L_in_flight × a        → A₁ − f·max(A₁ − a, 0) on the device
        last stage   A_p + O, A_p = L_p × a      → A_p + O − f·max(A_p − a, 0)

    offloaded = max(A₁, A_p + O) − max(first, last on the device): what the plan's activation peak loses."""
    a = activation_bytes_per_layer
    first = activation_layers_in_flight * a
    last = last_stage_layers * a
    first_kept = first - activation_offload * maximum(first - a, 0.0)
    last_kept = last + output_layer_activation_bytes - activation_offload * maximum(last - a, 0.0)
    return maximum(first, last + output_layer_activation_bytes) - maximum(first_kept, last_kept)


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


@formulas.formula(unit="B", meaning="what the device's tensors occupy at the peak: state, activations and buffers, "
                                    "less what lives in host memory (torch.cuda.max_memory_allocated)",
                  expression="state_bytes + activation_bytes + runtime_buffer_bytes + fsdp_gather_buffer_bytes"
                             " − offloaded_state_bytes − offloaded_activation_bytes",
                  source="lesson 000: 16 + 2.15 + 2 = 20.2 GB")
def allocated_device_bytes(state_bytes, activation_bytes, runtime_buffer_bytes, fsdp_gather_buffer_bytes,
                           offloaded_state_bytes, offloaded_activation_bytes):
    return (state_bytes + activation_bytes + runtime_buffer_bytes + fsdp_gather_buffer_bytes
            - offloaded_state_bytes - offloaded_activation_bytes)


@formulas.formula(unit="B", meaning="memory the caching allocator reserves beyond the allocated peak (fragmentation)",
                  expression="allocator_reserve × allocated_device_bytes",
                  source="PyTorch's caching allocator: torch.cuda.max_memory_reserved − max_memory_allocated",
                  zero_when="allocator_reserve == 0")
def allocator_reserve_bytes(allocator_reserve, allocated_device_bytes):
    return allocator_reserve * allocated_device_bytes


@formulas.formula(unit="B", meaning="optimizer state a paged optimizer may evict to host memory",
                  expression="optimizer_memory_bytes", zero_when="optimizer_offload_paged == 0", detail=True)
def pageable_optimizer_bytes(optimizer_memory_bytes):
    return optimizer_memory_bytes


@formulas.formula(unit="B", meaning="optimizer state paged out to host memory at the peak: what the plan cannot "
                                    "hold on the device, at most the optimizer state",
                  expression="min(pageable_optimizer_bytes, 2,097,152 × ⌈max(0, allocated_device_bytes"
                             " + allocator_reserve_bytes − device_memory_bytes / (1 + headroom)) / 2,097,152⌉)",
                  source="Dettmers et al. 2023, 'QLoRA' §3 (Paged Optimizers): the optimizer state is in NVIDIA "
                         "unified memory, evicted to CPU RAM when the GPU runs short and paged back for the update; "
                         "'fits' then means fits once up to all of it is paged out, the headroom kept. Whole 2 MiB "
                         "pages (the GPU's large page), which also keeps a plan that pages within the device",
                  zero_when="optimizer_offload_paged == 0")
def paged_optimizer_spill_bytes(pageable_optimizer_bytes, allocated_device_bytes, allocator_reserve_bytes,
                                device_memory_bytes, headroom):
    short = allocated_device_bytes + allocator_reserve_bytes - device_memory_bytes / (1 + headroom)
    return minimum(pageable_optimizer_bytes, UNIFIED_MEMORY_PAGE_BYTES * ceil(maximum(short, 0.0)
                                                                               / UNIFIED_MEMORY_PAGE_BYTES))


@formulas.formula(unit="B", meaning="planned memory per accelerator, headroom included",
                  expression="(allocated_device_bytes + allocator_reserve_bytes − paged_optimizer_spill_bytes)"
                             " × (1 + headroom)",
                  source="lesson 000: (16 + 2.15 + 2) × 1.25 ≈ 25.2 GB")
def planned_device_bytes(allocated_device_bytes, allocator_reserve_bytes, paged_optimizer_spill_bytes, headroom):
    """M_planned = (M_state + M_act + M_buffers − offloaded + allocator reserve − paged out) × (1 + headroom)."""
    return (allocated_device_bytes + allocator_reserve_bytes - paged_optimizer_spill_bytes) * (1 + headroom)


@formulas.formula(unit="accelerators", meaning="accelerators of the job on one node: they share its host memory",
                  expression="min(accelerators, accelerators_per_node)", detail=True)
def accelerators_sharing_host(accelerators, accelerators_per_node):
    return minimum(accelerators, accelerators_per_node)


@formulas.formula(unit="B", meaning="host memory one accelerator's offloading takes at the peak",
                  expression="host_state_bytes + offloaded_activation_bytes + paged_optimizer_spill_bytes")
def host_bytes_per_accelerator(host_state_bytes, offloaded_activation_bytes, paged_optimizer_spill_bytes):
    return host_state_bytes + offloaded_activation_bytes + paged_optimizer_spill_bytes


@formulas.formula(unit="B", meaning="host memory one node needs: its accelerators' offloading and any staged "
                                    "asynchronous checkpoint",
                  expression="host_bytes_per_accelerator × accelerators_sharing_host"
                             " + checkpoint_host_memory_bytes_per_node",
                  source="the node's accelerators share its host memory (DeepSpeed's estimators: per CPU node)")
def host_bytes_per_node(host_bytes_per_accelerator, accelerators_sharing_host, checkpoint_host_memory_bytes_per_node):
    return host_bytes_per_accelerator * accelerators_sharing_host + checkpoint_host_memory_bytes_per_node


@formulas.formula(unit="B", meaning="host memory of a node left after offloading (negative: it does not fit)",
                  expression="host_memory_bytes − host_bytes_per_node")
def host_memory_spare_bytes(host_memory_bytes, host_bytes_per_node):
    return host_memory_bytes - host_bytes_per_node


@formulas.formula(unit="B", meaning="the headroom part of the planned memory", detail=True,
                  expression="planned_device_bytes × headroom / (1 + headroom)")
def memory_headroom_bytes(planned_device_bytes, headroom):
    return planned_device_bytes * headroom / (1 + headroom)


@formulas.formula(unit="B", meaning="device memory left after the plan (negative: does not fit)",
                  expression="device_memory_bytes − planned_device_bytes")
def memory_spare_bytes(device_memory_bytes, planned_device_bytes):
    return device_memory_bytes - planned_device_bytes


@formulas.formula(unit="B", meaning="device memory left after the plan without its headroom (negative: it does not "
                                    "fit at all; between 0 and the headroom: it fits, but within the headroom)",
                  expression="device_memory_bytes − planned_device_bytes / (1 + headroom)",
                  source="the headroom is a planning margin (lesson 000: × 1.25 for peaks and fragmentation), not "
                         "memory the job needs: a plan whose allocations fit the device runs, as the published runs "
                         "that fill their devices did; it only lacks the margin asked for")
def memory_spare_before_headroom_bytes(device_memory_bytes, planned_device_bytes, headroom):
    """M_device − M_planned / (1 + headroom): ≥ 0 the plan fits the device; ≥ the headroom's bytes (memory_spare_bytes
    ≥ 0) it fits with the headroom kept too."""
    return device_memory_bytes - planned_device_bytes / (1 + headroom)


@formulas.formula(unit="fraction", meaning="planned memory as a share of the device's memory",
                  expression="planned_device_bytes / device_memory_bytes", detail=True)
def memory_utilization(planned_device_bytes, device_memory_bytes):
    return planned_device_bytes / device_memory_bytes


@formulas.formula(unit="B", meaning="retained activations per sequence of the micro-batch, on the device",
                  expression="(activation_bytes − offloaded_activation_bytes) / micro_batch_size", detail=True)
def activation_bytes_per_sequence(activation_bytes, offloaded_activation_bytes, micro_batch_size):
    return (activation_bytes - offloaded_activation_bytes) / micro_batch_size


@formulas.formula(unit="sequences", meaning="largest micro-batch per accelerator that fits the plan",
                  expression="⌊((device_memory_bytes / (1 + headroom) + pageable_optimizer_bytes)"
                             " / (1 + allocator_reserve) − state_bytes − runtime_buffer_bytes − fsdp_gather_buffer_bytes"
                             " + offloaded_state_bytes) / activation_bytes_per_sequence⌋")
def max_micro_batch_size(device_memory_bytes, headroom, pageable_optimizer_bytes, allocator_reserve, state_bytes,
                         runtime_buffer_bytes, fsdp_gather_buffer_bytes, offloaded_state_bytes,
                         activation_bytes_per_sequence):
    """The planned-memory equation solved for B_local, rounded down (0 when even the state does not fit): the
    activations on the device grow with the micro-batch; a paged optimizer may give up all its state to make room."""
    room = ((device_memory_bytes / (1 + headroom) + pageable_optimizer_bytes) / (1 + allocator_reserve)
            - state_bytes - runtime_buffer_bytes - fsdp_gather_buffer_bytes + offloaded_state_bytes)
    return maximum(floor(room / activation_bytes_per_sequence), 0)
