"""Accelerator memory: persistent training state, activations, buffers, headroom.

Sources: lesson 000 ("Accelerator memory: separate persistent state from the batch-dependent
peak"); ZeRO sharding of the state: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models" (section 5: 7.5B parameters on 64 ranks need 120 GB,
31.4 GB, 16.6 GB, 1.9 GB for DP, ZeRO-1, -2, -3); activations per layer: Korthikanti et al.
2022, "Reducing Activation Recomputation in Large Transformer Models" (table 2).

Parameters are split over tensor (t) and pipeline (p) ranks, experts also over expert-parallel
ranks (e) (:mod:`botec.formulas.weights`); ZeRO then shards the state of each over its sharding
group (the data-parallel ranks, or a smaller group for hybrid sharding; experts over that group / e).
"""

from botec.graph import Formulas, floor, maximum, minimum, where
from botec.layout import Recompute

formulas = Formulas(account="memory")

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


@formulas.formula(unit="B", meaning="working weights held by one accelerator",
                  expression="weight_bytes_per_parameter × (dense_parameters_per_device / weight_shards"
                             " + expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 3 else 1))")
def weight_memory_bytes(weight_bytes_per_parameter, dense_parameters_per_device, weight_shards,
                        expert_parameters_per_device, expert_sharding_degree, zero_stage):
    return _held(weight_bytes_per_parameter, dense_parameters_per_device, weight_shards,
                 expert_parameters_per_device, _shards(zero_stage, 3, expert_sharding_degree))


@formulas.formula(unit="B", meaning="gradients held by one accelerator",
                  expression="gradient_bytes_per_parameter × (dense_parameters_per_device / gradient_shards"
                             " + expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 2 else 1))")
def gradient_memory_bytes(gradient_bytes_per_parameter, dense_parameters_per_device, gradient_shards,
                          expert_parameters_per_device, expert_sharding_degree, zero_stage):
    return _held(gradient_bytes_per_parameter, dense_parameters_per_device, gradient_shards,
                 expert_parameters_per_device, _shards(zero_stage, 2, expert_sharding_degree))


@formulas.formula(unit="B", meaning="master weights and optimizer moments held by one accelerator",
                  expression="(master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter)"
                             " × (dense_parameters_per_device / optimizer_shards"
                             " + expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 1 else 1))")
def optimizer_memory_bytes(master_weight_bytes_per_parameter, optimizer_state_bytes_per_parameter,
                           dense_parameters_per_device, optimizer_shards, expert_parameters_per_device,
                           expert_sharding_degree, zero_stage):
    return _held(master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter,
                 dense_parameters_per_device, optimizer_shards, expert_parameters_per_device,
                 _shards(zero_stage, 1, expert_sharding_degree))


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
                             "virtual_pipeline_stages > 1 else 1) × min(1, gradient_accumulation_steps / "
                             "pipeline_parallel)",
                  source="Korthikanti et al. 2022 §4.2 (interleaved 1F1B); Megatron-LM theoretical_memory_usage.py: "
                         "× min(1, m/p) when fewer micro-batches than stages are in flight", detail=True, prose=True)
def pipeline_activation_factor(pipeline_parallel, virtual_pipeline_stages, gradient_accumulation_steps):
    interleaved = 1 + (pipeline_parallel - 1) / (pipeline_parallel * virtual_pipeline_stages)
    in_flight = minimum(1.0, gradient_accumulation_steps / pipeline_parallel)
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
                  expression="activation_bytes_per_element / 2 × local_sequence_length × micro_batch_size × (10 × "
                             "hidden_size / (tensor_parallel if sequence_parallel else 1) + 2 × "
                             "(attention_activation_width + mlp_activation_width) / tensor_parallel)",
                  source="Korthikanti et al. 2022 §4.1 (16-bit activations): norms 4sbh, the inputs of QKV and MLP "
                         "4sbh and two dropout masks 2sbh stay whole without sequence parallelism (10sbh); Q, K, V, the "
                         "attention output and the MLP's hidden layer are split over TP (24sbh/t for a GPT layer: "
                         "widths 4h and 2 × 4h); GQA, gated and MoE MLPs by their own widths",
                  detail=True, prose=True)
def layer_linear_activation_bytes(activation_bytes_per_element, local_sequence_length, micro_batch_size, hidden_size,
                                  tensor_parallel, sequence_parallel, attention_activation_width,
                                  mlp_activation_width):
    whole = 10 * hidden_size / where(sequence_parallel, tensor_parallel, 1)
    split = 2 * (attention_activation_width + mlp_activation_width) / tensor_parallel
    return activation_bytes_per_element / 2 * local_sequence_length * micro_batch_size * (whole + split)


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


@formulas.formula(unit="B", meaning="activations one transformer layer keeps for one micro-batch",
                  expression="2·s·b·h / (t if SP else 1) × (activation_bytes_per_element / 2) with full recompute; "
                             "otherwise layer_linear_activation_bytes + attention_score_activation_bytes unless "
                             "selective recompute",
                  source="Korthikanti et al. 2022, table 2 (16-bit activations, 4h MLP): s·b·h·(10 + 24/t + 5as/ht); "
                         "with SP 34/t; selective drops the scores; full keeps the layer's input 2sbh",
                  prose=True)
def activation_bytes_per_layer(local_sequence_length, micro_batch_size, hidden_size, tensor_parallel,
                               sequence_parallel, recompute, activation_bytes_per_element,
                               layer_linear_activation_bytes, attention_score_activation_bytes):
    """Korthikanti et al. 2022 per-layer activations (bytes), GPT layer shown:

    ====================  =====================================
    no recompute          s·b·h·(10 + 24/t + 5·a·s/(h·t))
    + sequence parallel   s·b·h·(34/t + 5·a·s/(h·t))
    selective recompute   s·b·h·(10 + 24/t)
    + sequence parallel   s·b·h·34/t
    full recompute        2·s·b·h  (÷ t with sequence parallel)
    ====================  =====================================

    A fused attention kernel (the default) keeps no scores: the selective row. The constants assume
    16-bit activations; other widths scale them by b_act / 2.
    """
    sbh = local_sequence_length * micro_batch_size * hidden_size
    full = activation_bytes_per_element / 2 * 2 * sbh / where(sequence_parallel, tensor_parallel, 1)
    kept = layer_linear_activation_bytes + where(recompute >= Recompute.SELECTIVE, 0.0,
                                                 attention_score_activation_bytes)
    return where(recompute >= Recompute.FULL, full, kept)


@formulas.formula(unit="B", meaning="the one layer full recomputation rematerializes at a time, during its backward",
                  expression="layer_linear_activation_bytes + attention_score_activation_bytes",
                  source="Korthikanti et al. 2022 §5: recomputing a layer rebuilds all its activations",
                  zero_when="recompute < 2", detail=True)
def rematerialized_layer_bytes(layer_linear_activation_bytes, attention_score_activation_bytes):
    return layer_linear_activation_bytes + attention_score_activation_bytes


@formulas.formula(unit="B", meaning="the output layer's activations on the last stage: its input and the FP32 logits of "
                                    "the cross entropy",
                  expression="4 × local_sequence_length × micro_batch_size × (hidden_size + vocab_size)"
                             " / tensor_parallel",
                  source="Korthikanti et al. 2022 §4.3: 4·s·b·h·(1 + V/h)/t (vocabulary-parallel cross entropy)",
                  detail=True)
def output_layer_activation_bytes(local_sequence_length, micro_batch_size, hidden_size, vocab_size, tensor_parallel):
    return 4 * local_sequence_length * micro_batch_size * (hidden_size + vocab_size) / tensor_parallel


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


@formulas.formula(unit="B", meaning="planned memory per accelerator, headroom included",
                  expression="(state_bytes + activation_bytes + runtime_buffer_bytes) × (1 + headroom)",
                  source="lesson 000: (16 + 2.15 + 2) × 1.25 ≈ 25.2 GB")
def planned_device_bytes(state_bytes, activation_bytes, runtime_buffer_bytes, headroom):
    """M_planned = (M_state + M_act + M_buffers) × (1 + headroom)."""
    return (state_bytes + activation_bytes + runtime_buffer_bytes) * (1 + headroom)


@formulas.formula(unit="B", meaning="the headroom part of the planned memory", detail=True,
                  expression="planned_device_bytes × headroom / (1 + headroom)")
def memory_headroom_bytes(planned_device_bytes, headroom):
    return planned_device_bytes * headroom / (1 + headroom)


@formulas.formula(unit="B", meaning="device memory left after the plan (negative: does not fit)",
                  expression="device_memory_bytes − planned_device_bytes")
def memory_spare_bytes(device_memory_bytes, planned_device_bytes):
    return device_memory_bytes - planned_device_bytes


@formulas.formula(unit="fraction", meaning="planned memory as a share of the device's memory",
                  expression="planned_device_bytes / device_memory_bytes", detail=True)
def memory_utilization(planned_device_bytes, device_memory_bytes):
    return planned_device_bytes / device_memory_bytes


@formulas.formula(unit="B", meaning="retained activations per sequence of the micro-batch",
                  expression="activation_bytes / micro_batch_size", detail=True)
def activation_bytes_per_sequence(activation_bytes, micro_batch_size):
    return activation_bytes / micro_batch_size


@formulas.formula(unit="sequences", meaning="largest micro-batch per accelerator that fits the plan",
                  expression="⌊(device_memory_bytes / (1 + headroom) − state_bytes − runtime_buffer_bytes)"
                             " / activation_bytes_per_sequence⌋")
def max_micro_batch_size(device_memory_bytes, headroom, state_bytes, runtime_buffer_bytes,
                         activation_bytes_per_sequence):
    """The planned-memory equation solved for B_local, rounded down (0 when even the state does not fit)."""
    room = device_memory_bytes / (1 + headroom) - state_bytes - runtime_buffer_bytes
    return maximum(floor(room / activation_bytes_per_sequence), 0)
