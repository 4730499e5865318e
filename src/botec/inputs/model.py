"""The model a contract names, as the graph's inputs and the layout's facts.

Four sources: a catalog name, a Hugging Face ``config.json`` (a path relative to the contract), an
architecture written out, or a bare parameter count (the lesson's way: every parameter in a
dense matmul, and, by the lesson's convention, no attention term).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from botec.architecture import Architecture
from botec.contract.model import ModelSpec
from botec.errors import ContractError
from botec.graph import Given
from botec.inputs.stated import StatedInputs
from botec.layout import ModelFacts

__all__ = ["resolve_architecture", "model_given", "model_facts", "architecture_quantities", "ATTENTION_FLOPS_FACTOR"]

# The attention-score work each convention counts: all of the s × s matrix, its causal half, or none.
ATTENTION_FLOPS_FACTOR = {"full": 1.0, "causal": 0.5, "none": 0.0}


def resolve_architecture(model: ModelSpec, base_dir: Path | None = None) -> Architecture | None:
    """The architecture a contract's model names (None for a bare parameter count); a config path is
    read relative to ``base_dir`` (the contract's folder)."""
    from botec.architecture import MLA, MoE, model_catalog, read_hf_config

    if model.kind == "count":
        return None
    if model.kind == "catalog":
        arch = model_catalog()[model.catalog]
    elif model.kind == "config":
        path = Path(model.config)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            arch = read_hf_config(path)
        except ContractError as error:
            raise ContractError(error.detail, field="workload.model.config",
                                origin=error.origin if error.origin != str(path) else None) from None
    else:
        arch = Architecture(
            name=model.name or "architecture", family="custom", layers=int(model.layers.value),
            hidden_size=int(model.hidden_size.value), attention_heads=model.attention_heads,
            kv_heads=model.kv_heads or model.attention_heads, head_dim=model.head_dim, ffn_size=model.ffn_size,
            vocab_size=model.vocab_size, mlp=model.mlp, tied_embeddings=model.tied_embeddings,
            position_embeddings=model.position_embeddings, norm=model.norm, embedding_norm=model.embedding_norm,
            attention_bias=model.attention_bias,
            mlp_bias=model.mlp_bias, moe=MoE(**model.moe.model_dump()) if model.moe else None,
            mla=MLA(**model.mla.model_dump()) if model.mla else None, mtp_layers=model.mtp_layers,
            source="workload.model")
    return replace(arch, name=model.name) if model.name else arch


def model_facts(model: ModelSpec, arch: Architecture | None, sequence_length: int | None = None) -> ModelFacts:
    """What the layout rules need of the model."""
    if arch is None:
        return ModelFacts(name=model.name or "the model", layers=int(model.layers.value),
                          sequence_length=sequence_length)
    return ModelFacts(name=arch.name, layers=arch.layers, attention_heads=arch.attention_heads,
                      kv_heads=arch.kv_heads, experts=arch.moe.experts if arch.moe else None,
                      sequence_length=sequence_length)


def model_given(model: ModelSpec, arch: Architecture | None, attention_flops: str | None,
                stated: StatedInputs) -> dict[str, Given]:
    """The model's parameters and shape as inputs of the graph (``attention_flops``: the convention, or
    None to leave the attention term to the kind)."""
    from botec.architecture import breakdown

    field = "workload.model"
    if arch is None:
        bare = "bare parameter count: every parameter in matmuls, dense"
        count = model.parameters
        return {
            "parameters": stated.given("parameters", count, "workload.model.parameters"),
            "active_parameters": stated.given("active_parameters", count, "workload.model.parameters",
                                              source=bare),
            "matmul_parameters": stated.given("matmul_parameters", count, "workload.model.parameters",
                                              source=bare),
            "expert_parameters": Given(0.0, "assumed", bare, field),
            "layers": stated.given("layers", model.layers, "workload.model.layers"),
            "hidden_size": stated.given("hidden_size", model.hidden_size, "workload.model.hidden_size"),
            "moe_layers": Given(0.0, "assumed", bare, field),
            "experts_per_token": Given(0.0, "assumed", bare, field),
            "attention_flops_per_token": Given(0.0, "assumed", "bare parameter count: 6·P only, no attention term "
                                                               "(the lesson's convention)", field),
        }
    parts = breakdown(arch)
    origin = f"{model.kind if model is not None else 'architecture'} {arch.name}"
    counted = (f"{origin}: embeddings {parts.embeddings:,} + LM head {parts.lm_head:,} + attention "
               f"{parts.attention:,} + MLP {parts.mlp:,} + experts {parts.experts + parts.shared_experts:,} + routers "
               f"{parts.routers:,} + norms {parts.norms:,}")
    given = {
        "parameters": Given(float(parts.total), "derived", counted, field),
        "active_parameters": Given(float(parts.active), "derived", f"{origin}: all but the experts a token skips",
                                   field),
        "matmul_parameters": Given(float(parts.matmul_active), "derived",
                                   f"{origin}: active parameters less the embedding lookup", field),
        "expert_parameters": Given(float(parts.experts), "derived", f"{origin}: routed experts", field),
        "layers": Given(float(arch.layers), "assumed", origin, field),
        "hidden_size": Given(float(arch.hidden_size), "assumed", origin, field),
        "attention_heads": Given(float(arch.attention_heads), "assumed", origin, field),
        "kv_heads": Given(float(arch.kv_heads), "assumed", origin, field),
        "qk_head_dim": Given(float(arch.qk_head_dim), "assumed", origin, field),
        "v_head_dim": Given(float(arch.v_head_dim), "assumed", origin, field),
        "moe_layers": Given(float(arch.moe_layers), "assumed", origin, field),
        "experts_per_token": Given(float(arch.moe.experts_per_token if arch.moe else 0), "assumed", origin, field),
    }
    if attention_flops is not None:
        given["attention_flops_factor"] = Given(ATTENTION_FLOPS_FACTOR[attention_flops], "assumed",
                                                f"convention: {attention_flops}", "assumptions.attention_flops")
    return given


def architecture_quantities(arch: Architecture, attention_flops: str, micro_batch_size: int, sequence_length: int,
                            activation_bytes_per_element: float, wanted: tuple[str, ...]) -> dict[str, float]:
    """Quantities of the training graph for one architecture on one accelerator (no parallelism), with the
    saved-tensor factor at 1: what the measuring harness counts its run with (FLOPs per token, one
    hidden state, activations per unit of the factor), by the same definitions as the estimate."""
    from botec.training import TRAINING

    given = model_given(None, arch, attention_flops, StatedInputs())
    one = {"tensor_parallel": 1.0, "pipeline_parallel": 1.0, "context_parallel": 1.0, "sequence_parallel": 0.0,
           "virtual_pipeline_stages": 1.0, "recompute": 0.0, "saved_tensor_factor": 1.0}
    given |= {name: Given(value, "assumed") for name, value in one.items()}
    given |= {"sequence_length": Given(float(sequence_length), "measured"),
              "micro_batch_size": Given(float(micro_batch_size), "measured"),
              "activation_bytes_per_element": Given(float(activation_bytes_per_element), "measured"),
              "pipeline_stage_layers": Given(float(arch.layers), "assumed"),
              "pipeline_activation_layers": Given(float(arch.layers), "assumed")}
    quantities = TRAINING.evaluate(given, wanted=wanted, choices={"activations": "saved_tensor_factor"})
    return {name: float(quantities[name].value) for name in wanted}
