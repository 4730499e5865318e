"""LoRA and QLoRA: what trains, what the frozen base keeps, and the adapters' own work.

LoRA (Hu et al. 2021) freezes the base and learns, beside each adapted matrix W (d_in → d_out), a
low-rank update B·A: A is d_in × r, B is r × d_out, r·(d_in + d_out) parameters
(:func:`botec.architecture.lora_parameters` counts them). QLoRA (Dettmers et al. 2023) stores the
frozen linear weights in 4 bits (NF4, blocks of 64 with one absmax each, double-quantized) and
dequantizes each to 16 bits right before its matmul.

Symbols: P the base's parameters, P_A the adapters', r the rank, q the bytes of one frozen linear
weight in the base format (2 for a 16-bit base, 0.5 + 1/64 + 4/16,384 for NF4 with double
quantization), T the tokens of a micro-batch on one rank.

- **Memory.** The frozen base holds only its weights: the blocks' linear weights at q bytes, the
  embeddings, LM head, norms and routers at 2 bytes; no gradients, no master copy, no moments. The
  adapters hold weights, gradients and optimizer state at the bytes of
  :func:`botec.inputs.lora.adapter_state_given`. ZeRO/FSDP shards both as it shards any parameter
  (ZeRO-3 shards the frozen base too). Activations: what the frozen base keeps for its input
  gradients (Korthikanti et al.'s formulas, unchanged), plus the r-wide x·A of every adapted matrix;
  a 4- or 8-bit base adds the 16-bit copy of the matrix being dequantized.
- **Compute.** A frozen matrix needs no weight gradient: 2·P forward and 2·P backward (its input
  gradient) per token instead of 6·P; the adapters 6·P_A. The op-level model skips the frozen
  matrices' weight-gradient GEMMs, adds the adapters' thin GEMMs (memory-bound at small r: they read
  the whole input for r outputs, and pay a kernel launch each) and the dequantization (read q bytes,
  write 2, per weight, in every forward, backward and recomputation).
- **Network, storage.** The data-parallel gradient sync carries the adapters' gradients; ZeRO-3
  gathers the frozen base at its stored bytes; a checkpoint holds the adapters and their optimizer
  state (the base is already on disk).

Without LoRA ``frozen_base`` is 0, every trainable quantity is the model's own, and each term here is 0.
An approximation: the frozen base's 16-bit share (embeddings, head) is spread evenly over the pipeline
stages and the adapters over the layers, exact on one stage.
"""

from botec.graph import Formulas, where
from botec.training.ops import gemm_seconds

formulas = Formulas(account="memory")

formulas.input("frozen_base", unit="1", meaning="1 when the base model is frozen and only low-rank adapters train "
                                                "(LoRA, QLoRA); 0 when every parameter trains")
formulas.input("adapter_parameters", unit="parameters",
               meaning="trainable adapter parameters P_A: Σ r·(d_in + d_out) over the adapted matrices (0 without LoRA)")
formulas.input("expert_adapter_parameters", unit="parameters", detail=True,
               meaning="the adapters of routed experts (part of P_A)")
formulas.input("adapter_matmul_parameters", unit="parameters", detail=True,
               meaning="adapter parameters one token passes through (routed experts: the k_e it visits)")
formulas.input("adapter_rank", unit="1", detail=True, meaning="the adapters' rank r")
formulas.input("adapter_input_width", unit="1", detail=True,
               meaning="Σ d_in of one layer's adapted matrices outside the routed experts, averaged over the layers")
formulas.input("adapter_output_width", unit="1", detail=True,
               meaning="Σ d_out of one layer's adapted matrices outside the routed experts, averaged over the layers")
formulas.input("adapter_matrices_per_layer", unit="1", detail=True,
               meaning="adapted matrices of one layer outside the routed experts, averaged over the layers")
formulas.input("expert_adapter_input_width", unit="1", detail=True, meaning="Σ d_in of one routed expert's adapted "
                                                                            "matrices")
formulas.input("expert_adapter_output_width", unit="1", detail=True, meaning="Σ d_out of one routed expert's adapted "
                                                                             "matrices")
formulas.input("expert_adapter_matrices", unit="1", detail=True, meaning="adapted matrices of one routed expert")
formulas.input("quantized_parameters", unit="parameters", detail=True,
               meaning="the blocks' linear weights (attention, MLPs, experts): what the frozen base stores in its own "
                       "format; the rest (embeddings, LM head, norms, routers) stays 16-bit")
formulas.input("quantized_weight_bytes_per_parameter", unit="B/parameter",
               meaning="bytes of one frozen linear weight in the base format, its quantization constants included "
                       "(q: 2 for BF16, 0.516 for NF4 with double quantization)")
formulas.input("frozen_unquantized_bytes_per_parameter", unit="B/parameter", detail=True,
               meaning="bytes of one frozen weight outside the blocks' linear layers (embeddings, LM head, norms): 2, "
                       "or 4 for a base loaded in FP32")
formulas.input("largest_quantized_matrix_parameters", unit="parameters", detail=True,
               meaning="the largest linear matrix d_in × d_out: what a dequantizing kernel holds in 16 bits at once")
formulas.input("dense_quantized_matrices_per_layer", unit="1", detail=True,
               meaning="linear matrices of one layer outside the routed experts, averaged over the layers")
formulas.input("expert_quantized_matrices", unit="1", detail=True, meaning="linear matrices of one routed expert")

# PEFT's LoRA forward scales B·A·x and adds it to the base output: two elementwise kernels on T × d_out, reading
# 1 + 2 and writing 1 + 1 elements (peft/tuners/lora/layer.py: result + lora_B(lora_A(x)) * scaling).
ADAPTER_SCALE_ADD_ELEMENTS = 5
# Kernels per adapted matrix in the forward: the two GEMMs (x·A, then ·B), the scale and the add.
ADAPTER_KERNELS = 4
# Bytes of the 16-bit copy a dequantizing kernel writes per weight (and every 16-bit weight's size).
SIXTEEN_BIT_BYTES = 2


# --- parameters ---------------------------------------------------------------------------------

@formulas.formula(unit="parameters", meaning="parameters the optimizer updates: the adapters under LoRA, all of "
                                             "them otherwise",
                  expression="adapter_parameters if frozen_base else parameters",
                  source="Hu et al. 2021 (LoRA) §4: r·(d_in + d_out) per adapted matrix; PEFT prints it as "
                         "'trainable params'", account="workload")
def trainable_parameters(frozen_base, adapter_parameters, parameters):
    return where(frozen_base, adapter_parameters, parameters)


@formulas.formula(unit="parameters", meaning="parameters of the frozen base (LoRA): no gradients, no optimizer state",
                  expression="parameters", zero_when="frozen_base == 0", account="workload")
def frozen_parameters(parameters):
    return parameters


@formulas.formula(unit="parameters", meaning="trainable non-expert parameters one accelerator holds (the fullest "
                                             "stage, split over TP)",
                  expression="(adapter_parameters − expert_adapter_parameters) × pipeline_stage_layers / (layers × "
                             "tensor_parallel) if frozen_base else dense_parameters_per_device",
                  source="the adapters live in the layers, split as their matrices are", detail=True)
def trainable_dense_parameters_per_device(frozen_base, adapter_parameters, expert_adapter_parameters,
                                          pipeline_stage_layers, layers, tensor_parallel, dense_parameters_per_device):
    adapters = (adapter_parameters - expert_adapter_parameters) * pipeline_stage_layers / (layers * tensor_parallel)
    return where(frozen_base, adapters, dense_parameters_per_device)


@formulas.formula(unit="parameters", meaning="trainable expert parameters one accelerator holds (the fullest stage)",
                  expression="expert_adapter_parameters × pipeline_stage_layers / (layers × expert_parallel × "
                             "expert_tensor_parallel) if frozen_base else expert_parameters_per_device", detail=True)
def trainable_expert_parameters_per_device(frozen_base, expert_adapter_parameters, pipeline_stage_layers, layers,
                                           expert_parallel, expert_tensor_parallel, expert_parameters_per_device):
    adapters = expert_adapter_parameters * pipeline_stage_layers / (layers * expert_parallel * expert_tensor_parallel)
    return where(frozen_base, adapters, expert_parameters_per_device)


@formulas.formula(unit="parameters", meaning="trainable parameters one accelerator holds before any sharding",
                  expression="trainable_dense_parameters_per_device + trainable_expert_parameters_per_device",
                  detail=True)
def trainable_parameters_per_device(trainable_dense_parameters_per_device, trainable_expert_parameters_per_device):
    return trainable_dense_parameters_per_device + trainable_expert_parameters_per_device


# --- the frozen base's weights ------------------------------------------------------------------

@formulas.formula(unit="B/parameter", meaning="bytes per non-expert parameter of the frozen base: linear weights in "
                                              "the base format, embeddings, head and norms in 16 bits",
                  expression="(quantized_weight_bytes_per_parameter × (quantized_parameters − expert_parameters) + "
                             "frozen_unquantized_bytes_per_parameter × (parameters − quantized_parameters)) / "
                             "(parameters − expert_parameters)",
                  source="QLoRA (Dettmers et al. 2023) quantizes the linear layers; bitsandbytes/transformers keep the "
                         "LM head (llm_int8_skip_modules), embeddings and norms in 16 bits; a base loaded in FP32 "
                         "keeps all of them at 4 B",
                  zero_when="frozen_base == 0", detail=True)
def frozen_dense_weight_bytes_per_parameter(quantized_weight_bytes_per_parameter, quantized_parameters,
                                            expert_parameters, parameters, frozen_unquantized_bytes_per_parameter):
    linear = quantized_weight_bytes_per_parameter * (quantized_parameters - expert_parameters)
    return ((linear + frozen_unquantized_bytes_per_parameter * (parameters - quantized_parameters))
            / (parameters - expert_parameters))


@formulas.formula(unit="B", meaning="the frozen base's non-expert weights one accelerator works with, before "
                                    "ZeRO-3 sharding (what a ZeRO-3 gather carries)",
                  expression="frozen_dense_weight_bytes_per_parameter × dense_parameters_per_device",
                  zero_when="frozen_base == 0", detail=True)
def frozen_dense_weight_bytes(frozen_dense_weight_bytes_per_parameter, dense_parameters_per_device):
    return frozen_dense_weight_bytes_per_parameter * dense_parameters_per_device


@formulas.formula(unit="B", meaning="the frozen base's expert weights one accelerator works with, before ZeRO-3 "
                                    "sharding",
                  expression="quantized_weight_bytes_per_parameter × expert_parameters_per_device",
                  zero_when="frozen_base == 0 or expert_parameters == 0", detail=True)
def frozen_expert_weight_bytes(quantized_weight_bytes_per_parameter, expert_parameters_per_device):
    return quantized_weight_bytes_per_parameter * expert_parameters_per_device


@formulas.formula(unit="B", meaning="the 16-bit copy of the matrix being dequantized (a 4- or 8-bit base)",
                  expression="2 × largest_quantized_matrix_parameters / tensor_parallel",
                  source="bitsandbytes MatMul4Bit / MatMul8bitLt dequantize the weight to the compute dtype before "
                         "the matmul, forward and backward; one matrix at a time",
                  zero_when="frozen_base == 0 or quantized_weight_bytes_per_parameter >= 2", detail=True)
def dequantization_buffer_bytes(largest_quantized_matrix_parameters, tensor_parallel):
    return SIXTEEN_BIT_BYTES * largest_quantized_matrix_parameters / tensor_parallel


@formulas.formula(unit="B", meaning="the frozen base's weights held by one accelerator (ZeRO-3 shards them too), "
                                    "and the dequantization buffer",
                  expression="frozen_dense_weight_bytes / weight_shards + frozen_expert_weight_bytes / "
                             "(expert_sharding_degree if zero_stage ≥ 3 else 1) + dequantization_buffer_bytes",
                  source="QLoRA §3: LLaMA-65B's linear weights in NF4 with double quantization take 0.5 + 0.127/8 B "
                         "each; a frozen weight has no gradient and no optimizer state",
                  zero_when="frozen_base == 0")
def frozen_weight_memory_bytes(frozen_dense_weight_bytes, weight_shards, frozen_expert_weight_bytes,
                               expert_sharding_degree, zero_stage, dequantization_buffer_bytes):
    experts = frozen_expert_weight_bytes / where(zero_stage >= 3, expert_sharding_degree, 1)
    return frozen_dense_weight_bytes / weight_shards + experts + dequantization_buffer_bytes


# --- activations --------------------------------------------------------------------------------

@formulas.formula(unit="1", meaning="elements per token one layer keeps for its adapters: the r-wide x·A of each "
                                    "adapted matrix (a token's k_e experts' in an MoE layer)",
                  expression="adapter_rank × (adapter_matrices_per_layer + experts_per_token × expert_adapter_matrices "
                             "× moe_layers / layers)",
                  zero_when="frozen_base == 0", detail=True)
def adapter_activation_width(adapter_rank, adapter_matrices_per_layer, experts_per_token, expert_adapter_matrices,
                             moe_layers, layers):
    experts = experts_per_token * expert_adapter_matrices * moe_layers / layers
    return adapter_rank * (adapter_matrices_per_layer + experts)


@formulas.formula(unit="B", meaning="what one layer's adapters keep for the backward pass, per micro-batch",
                  expression="activation_bytes_per_element × local_sequence_length × micro_batch_size × "
                             "adapter_activation_width",
                  source="B's weight gradient needs x·A (T × r per adapted matrix); A's needs x, the base layer's "
                         "input, already kept (Korthikanti et al. 2022); LoRA dropout (not modelled) would keep a "
                         "copy of x per matrix", zero_when="frozen_base == 0", detail=True)
def adapter_activation_bytes_per_layer(activation_bytes_per_element, local_sequence_length, micro_batch_size,
                                       adapter_activation_width):
    return activation_bytes_per_element * local_sequence_length * micro_batch_size * adapter_activation_width


# --- the adapters' ops and the dequantization (the op-level compute model) ------------------------

def _adapter_seconds(tokens, input_width, output_width, matrices, rank, element_bytes, peak_flops_per_s,
                     matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                     kernel_overhead_seconds):
    """The adapted matrices of one group, forward: x·A (T × Σd_in by Σd_in × r) and (x·A)·B (T × r by
    r × Σd_out) on the roofline as if concatenated, the scale-and-add on T × Σd_out, a launch per kernel per
    matrix."""
    machine = (peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
               kernel_overhead_seconds)
    gemms = gemm_seconds(tokens, input_width, rank, element_bytes, *machine) \
        + gemm_seconds(tokens, rank, output_width, element_bytes, *machine)
    elementwise = (ADAPTER_SCALE_ADD_ELEMENTS * element_bytes * tokens * output_width
                   / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s))
    launches = (ADAPTER_KERNELS * matrices - 2) * kernel_overhead_seconds   # the two GEMMs above paid one each
    return where(matrices > 0, gemms + elementwise + launches, 0.0)


@formulas.formula(unit="s", meaning="forward time of one layer's adapters for one micro-batch",
                  expression="adapters(T, adapter_input_width / t, adapter_output_width / t, adapter_matrices_per_layer)"
                             " + (E / EP) × moe_layers / layers × adapters(expert_tokens, expert widths / t_e, "
                             "expert_adapter_matrices); adapters(T, Σd_in, Σd_out, n) = gemm(T, Σd_in, r) + gemm(T, r, "
                             "Σd_out) + 5 × b × T × Σd_out / (e_mem·BW) + (4n − 2) × t0",
                  source="PEFT LoRA forward: lora_B(lora_A(x)) × scaling added to the base output; at small r the "
                         "GEMMs are memory-bound (they read all of x for r outputs)",
                  zero_when="frozen_base == 0", account="compute", prose=True, detail=True,
                  symbols={"T": "microbatch_tokens", "t": "tensor_parallel", "E": "experts", "EP": "expert_parallel",
                           "t_e": "expert_tensor_parallel", "r": "adapter_rank", "b": "activation_bytes_per_element",
                           "n": "the adapter matrices per layer",
                           "Σd_in, Σd_out": "their summed input and output widths",
                           "e_mem": "memory_bandwidth_efficiency",
                           "BW": "memory_bandwidth_bytes_per_s", "t0": "kernel_overhead_seconds"})
def adapter_forward_seconds(microbatch_tokens, expert_tokens, adapter_input_width, adapter_output_width,
                            adapter_matrices_per_layer, expert_adapter_input_width, expert_adapter_output_width,
                            expert_adapter_matrices, adapter_rank, experts, expert_parallel, moe_layers, layers,
                            tensor_parallel, expert_tensor_parallel, activation_bytes_per_element, peak_flops_per_s,
                            matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                            kernel_overhead_seconds):
    machine = (activation_bytes_per_element, peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s,
               memory_bandwidth_efficiency, kernel_overhead_seconds)
    dense = _adapter_seconds(microbatch_tokens, adapter_input_width / tensor_parallel,
                             adapter_output_width / tensor_parallel, adapter_matrices_per_layer, adapter_rank, *machine)
    local_experts = experts / expert_parallel * moe_layers / layers
    routed = _adapter_seconds(expert_tokens, expert_adapter_input_width / expert_tensor_parallel,
                              expert_adapter_output_width / expert_tensor_parallel, expert_adapter_matrices,
                              adapter_rank, *machine)
    return dense + local_experts * routed


@formulas.formula(unit="s", meaning="backward time of one layer's adapters for one micro-batch",
                  expression="2 × adapter_forward_seconds",
                  source="four thin GEMMs per adapted matrix (the weight gradients of B and A, the input gradients "
                         "through B and A), the forward's two transposed, and the elementwise ops again",
                  zero_when="frozen_base == 0", account="compute", detail=True)
def adapter_backward_seconds(adapter_forward_seconds):
    return 2 * adapter_forward_seconds


@formulas.formula(unit="s", meaning="one layer's dequantization of its 4- or 8-bit weights to 16 bits, per forward "
                                    "(and again per backward and recomputation)",
                  expression="(quantized_weight_bytes_per_parameter + 2) × ((quantized_parameters − expert_parameters)"
                             " / (layers × tensor_parallel) + expert_parameters / (layers × expert_parallel × "
                             "expert_tensor_parallel)) / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s) + "
                             "(dense_quantized_matrices_per_layer + expert_quantized_matrices × experts / "
                             "expert_parallel × moe_layers / layers) × kernel_overhead_seconds",
                  source="bitsandbytes dequantizes each weight before its matmul (read q bytes, write 2), in the "
                         "forward and again for the input gradient of the backward; memory-bound, one kernel per matrix",
                  zero_when="frozen_base == 0 or quantized_weight_bytes_per_parameter >= 2", account="compute",
                  detail=True)
def dequantization_seconds(quantized_weight_bytes_per_parameter, quantized_parameters, expert_parameters, layers,
                           tensor_parallel, expert_parallel, expert_tensor_parallel, memory_bandwidth_efficiency,
                           memory_bandwidth_bytes_per_s, dense_quantized_matrices_per_layer, expert_quantized_matrices,
                           experts, moe_layers, kernel_overhead_seconds):
    local = ((quantized_parameters - expert_parameters) / (layers * tensor_parallel)
             + expert_parameters / (layers * expert_parallel * expert_tensor_parallel))
    kernels = dense_quantized_matrices_per_layer + expert_quantized_matrices * experts / expert_parallel \
        * moe_layers / layers
    return ((quantized_weight_bytes_per_parameter + SIXTEEN_BIT_BYTES) * local
            / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s) + kernels * kernel_overhead_seconds)

