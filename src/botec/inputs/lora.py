"""LoRA and QLoRA as inputs of the training graph: the adapters' shapes, the frozen base's storage format,
and the bytes per trainable parameter (:mod:`botec.training.adapters` holds the formulas).

Without ``strategy.lora`` every input says "no adapters, nothing frozen" (``frozen_base`` 0), and the
training graph computes exactly what it computed before: trainable parameters = parameters.
"""

from __future__ import annotations

from botec.architecture import Architecture, lora_parameters
from botec.contract.training import LoraPolicy
from botec.errors import ContractError
from botec.graph import Given

__all__ = ["lora_given", "adapter_state_given", "quantized_weight_bytes_per_parameter",
           "DOUBLE_QUANTIZATION_BLOCK_SIZE", "ADAPTER_BYTES"]

# bitsandbytes quantizes the FP32 absmax of the 4-bit blocks again in blocks of 256 (8-bit constants, one FP32
# constant per 256 blocks): Dettmers et al. 2023, "QLoRA", §3 "Double Quantization".
DOUBLE_QUANTIZATION_BLOCK_SIZE = 256
# Bytes of one adapter weight in each precision.
ADAPTER_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
# Bytes of one frozen weight outside the blocks' linear layers (embeddings, LM head, norms): 16-bit, as bitsandbytes
# and transformers leave them, or 32-bit when the whole base is loaded in FP32 (torch_dtype=torch.float32).
UNQUANTIZED_BYTES = {"fp32": 4.0}

_NAMES = ("frozen_base", "adapter_parameters", "expert_adapter_parameters", "adapter_matmul_parameters",
          "adapter_rank", "adapter_input_width", "adapter_output_width", "adapter_matrices_per_layer",
          "expert_adapter_input_width", "expert_adapter_output_width", "expert_adapter_matrices",
          "quantized_parameters", "quantized_weight_bytes_per_parameter", "largest_quantized_matrix_parameters",
          "dense_quantized_matrices_per_layer", "expert_quantized_matrices", "frozen_unquantized_bytes_per_parameter")


def quantized_weight_bytes_per_parameter(base_weights: str, double_quantization: bool = True, block_size: int = 64,
                                         rows_per_parameter: float = 0.0) -> float:
    """Bytes one frozen linear weight takes in the base's format, its quantization constants included:

    ===========  ================================================================================
    fp32         4  (a base loaded in full precision)
    bf16, fp16   2
    int8         1 + 4 × rows / weights  (LLM.int8(): one FP32 absmax per output row; Dettmers et al. 2022)
    nf4, fp4     0.5 + 4 / B  (one FP32 absmax per block of B = 64 weights)
    + double q.  0.5 + 1 / B + 4 / (B × 256)  (8-bit absmax, one FP32 constant per 256 blocks)
    ===========  ================================================================================

    QLoRA §3: double quantization takes the constants from 32/64 = 0.5 bits to 8/64 + 32/(64·256) = 0.127
    bits per parameter (NF4 + DQ: 0.5 + 1/64 + 4/16,384 = 0.51587 B)."""
    if base_weights == "fp32":
        return 4.0
    if base_weights in ("bf16", "fp16"):
        return 2.0
    if base_weights == "int8":
        return 1.0 + 4.0 * rows_per_parameter
    if double_quantization:
        return 0.5 + 1.0 / block_size + 4.0 / (block_size * DOUBLE_QUANTIZATION_BLOCK_SIZE)
    return 0.5 + 4.0 / block_size


def lora_given(policy: LoraPolicy | None, arch: Architecture | None) -> dict[str, Given]:
    """The adapters and the frozen base as inputs (zeros, and ``frozen_base`` 0, without LoRA)."""
    field = "strategy.lora"
    if policy is None:
        return {name: Given(0.0, "assumed", "no LoRA: every parameter trains", field) for name in _NAMES}
    if arch is None:
        raise ContractError("LoRA needs the model's shapes (each adapted matrix's d_in and d_out): name it from the "
                            "catalog, a config.json or an architecture, not a bare parameter count",
                            field="workload.model")
    count = lora_parameters(arch, policy.rank, policy.target_modules)
    targets = ", ".join(count.modules)
    label = f"LoRA r = {policy.rank} on {targets} of {arch.name}"

    def derived(value: float, what: str, path: str = field) -> Given:
        return Given(float(value), "derived", f"{label}: {what}", path)

    base = policy.base_weights
    bytes_per_weight = quantized_weight_bytes_per_parameter(base, policy.double_quantization,
                                                            policy.quantization_block_size,
                                                            count.linear_rows / count.linear_parameters)
    if base == "fp32":
        format_text = "fp32 base: 4 B per weight"
    elif base in ("bf16", "fp16"):
        format_text = f"{base} base: 2 B per weight"
    elif base == "int8":
        format_text = "LLM.int8() base: 1 B per weight + one FP32 scale per output row"
    elif policy.double_quantization:
        format_text = (f"{base} base with double quantization: 0.5 + 1/{policy.quantization_block_size} + 4/("
                       f"{policy.quantization_block_size} × {DOUBLE_QUANTIZATION_BLOCK_SIZE}) B per weight "
                       "(QLoRA §3)")
    else:
        format_text = f"{base} base: 0.5 + 4/{policy.quantization_block_size} B per weight (one FP32 absmax a block)"
    return {
        "frozen_base": Given(1.0, "assumed", f"{label}: the base is frozen, only the adapters train", field),
        "adapter_parameters": derived(count.parameters, "Σ r × (d_in + d_out) over the adapted matrices "
                                                        "(Hu et al. 2021)", f"{field}.rank"),
        "expert_adapter_parameters": derived(count.expert_parameters, "the adapters of routed experts"),
        "adapter_matmul_parameters": derived(count.active_parameters, "adapter parameters one token passes (k_e of "
                                                                      "the E experts' adapters)"),
        "adapter_rank": Given(float(policy.rank), "assumed", label, f"{field}.rank"),
        "adapter_input_width": derived(count.width("input", False), "Σ d_in of a layer's adapted matrices"),
        "adapter_output_width": derived(count.width("output", False), "Σ d_out of a layer's adapted matrices"),
        "adapter_matrices_per_layer": derived(count.count(False), "adapted matrices per layer"),
        "expert_adapter_input_width": derived(count.width("input", True), "Σ d_in of one expert's adapted matrices"),
        "expert_adapter_output_width": derived(count.width("output", True),
                                               "Σ d_out of one expert's adapted matrices"),
        "expert_adapter_matrices": derived(count.count(True), "adapted matrices per routed expert"),
        "quantized_parameters": Given(float(count.linear_parameters), "derived",
                                      f"{arch.name}: the blocks' linear weights (attention, MLP, experts), stored in "
                                      f"the base format; embeddings, LM head, norms and routers stay 16-bit "
                                      "(bitsandbytes and transformers leave the head unquantized)",
                                      f"{field}.base_weights"),
        "quantized_weight_bytes_per_parameter": Given(bytes_per_weight, "derived", format_text,
                                                      f"{field}.base_weights"),
        "largest_quantized_matrix_parameters": Given(float(count.largest_matrix), "derived",
                                                     f"{arch.name}: the largest linear matrix d_in × d_out",
                                                     f"{field}.base_weights"),
        "dense_quantized_matrices_per_layer": Given(count.count(False, count.matrices), "derived",
                                                    f"{arch.name}: linear matrices of a layer outside the routed "
                                                    "experts (one dequantizing kernel each)", f"{field}.base_weights"),
        "expert_quantized_matrices": Given(count.count(True, count.matrices), "derived",
                                           f"{arch.name}: linear matrices of one routed expert",
                                           f"{field}.base_weights"),
        "frozen_unquantized_bytes_per_parameter": Given(
            UNQUANTIZED_BYTES.get(base, 2.0), "derived",
            "fp32 base: embeddings, LM head and norms in FP32 too" if base == "fp32" else
            f"{base} base: embeddings, LM head and norms in 16 bits", f"{field}.base_weights"),
    }


def adapter_state_given(policy: LoraPolicy | None) -> dict[str, Given]:
    """Bytes per trainable parameter under LoRA: the adapters' weights at ``adapter_precision``; with FP32 adapters
    their gradients are FP32 (a gradient has its parameter's dtype) and there is no separate master copy (the
    FP32 weights are the master: the optimizer updates them in place); with 16-bit adapters the optimizer
    preset's gradient and master bytes hold. The moments are the preset's. Nothing for the frozen base: it has
    no gradients and no optimizer state (:mod:`botec.training.adapters`)."""
    if policy is None:
        return {}
    path = "strategy.lora.adapter_precision"
    precision = policy.adapter_precision
    given = {"weight_bytes_per_parameter": Given(ADAPTER_BYTES[precision], "assumed",
                                                 f"LoRA: {precision} adapters (the trainable weights)", path)}
    if precision == "fp32":
        given["gradient_bytes_per_parameter"] = Given(4.0, "assumed", "LoRA: FP32 adapters have FP32 gradients", path)
        given["master_weight_bytes_per_parameter"] = Given(
            0.0, "assumed", "LoRA: FP32 adapters are their own master copy (the optimizer updates them in place)",
            path)
    return given
