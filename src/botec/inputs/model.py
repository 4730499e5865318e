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
from botec.units import excerpt

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
        except ContractError as error:   # the key of config.json it blames stays in the line
            raise ContractError(f"{error.field}: {error.detail}" if error.field else error.detail,
                                field="workload.model.config",
                                origin=error.origin if error.origin != str(path) else None) from None
        except OSError as error:  # a path the system cannot even look up (longer than a file name may be)
            raise ContractError(f"cannot read {excerpt(model.config)}: {error.strerror or error}",
                                field="workload.model.config") from None
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
            "encoder_layers": Given(0.0, "assumed", "bare parameter count: a decoder-only model", field),
            "cross_attention_layers": Given(0.0, "assumed", "bare parameter count: a decoder-only model", field),
        } | _bare_shape(model, field)
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
        "encoder_layers": Given(float(arch.encoder_layers), "assumed",
                                f"{origin}: its encoder's blocks" if arch.decoder_layers else
                                f"{origin}: decoder-only", field),
        "cross_attention_layers": Given(float(arch.decoder_layers), "assumed",
                                        f"{origin}: its decoder's blocks, each with cross attention"
                                        if arch.decoder_layers else f"{origin}: decoder-only", field),
    }
    given |= _architecture_shape(arch, parts, origin, field)
    if attention_flops is not None:
        given["attention_flops_factor"] = Given(ATTENTION_FLOPS_FACTOR[attention_flops], "assumed",
                                                f"convention: {attention_flops}", "assumptions.attention_flops")
    return given


def _bare_shape(model: ModelSpec, field: str) -> dict[str, Given]:
    """A bare count's layer, for the activation formulas: a GPT layer (multi-head attention, a plain 4h MLP:
    Korthikanti et al.'s 34·s·b·h), no embeddings or head apart from the blocks, no experts."""
    h = float(model.hidden_size.value)
    gpt = "bare parameter count: a GPT layer assumed (multi-head attention, plain 4h MLP)"
    none = "bare parameter count: every parameter in the transformer blocks"
    return {
        "ffn_size": Given(4 * h, "assumed", gpt, field), "mlp_gated": Given(0.0, "assumed", gpt, field),
        "attention_activation_width": Given(4 * h, "assumed", gpt, field),
        "mlp_activation_width": Given(8 * h, "assumed", gpt, field),
        "vocab_size": Given(0.0, "assumed", none, field), "embedding_parameters": Given(0.0, "assumed", none, field),
        "lm_head_parameters": Given(0.0, "assumed", none, field),
        "lm_head_matmul_parameters": Given(0.0, "assumed", none, field),
        "experts": Given(0.0, "assumed", none, field), "shared_experts": Given(0.0, "assumed", none, field),
        "expert_ffn_size": Given(0.0, "assumed", none, field),
        "mtp_layers": Given(0.0, "assumed", none, field), "mtp_matmul_parameters": Given(0.0, "assumed", none, field),
        "dense_block_parameters": Given(float(model.parameters.value) / float(model.layers.value), "assumed",
                                        f"{none}: parameters / layers", field),
        "moe_block_parameters": Given(0.0, "assumed", none, field),
        # torchtitan's op-level SAC on a GPT layer (Q, K, V, O, up, down): K, O and down recomputed (h² + h² + 4h²);
        # Q, V, the attention output and up (h + h + h + 4h) saved
        "sac_recomputed_matmul_parameters_per_layer": Given(6 * h * h, "assumed", f"{gpt}: K, O, down", field),
        "sac_activation_width": Given(7 * h, "assumed", f"{gpt}: Q, V, attention output, up", field),
    }


def _architecture_shape(arch: Architecture, parts, origin: str, field: str) -> dict[str, Given]:
    """The per-layer matrices and kept widths of an architecture (see :mod:`botec.formulas.transformer`)."""
    h, a, V = arch.hidden_size, arch.attention_heads, arch.vocab_size
    d_qk, d_v = arch.qk_head_dim, arch.v_head_dim
    kv = a if arch.mla else arch.kv_heads  # MLA decompresses K and V per query head
    gated = arch.mlp == "gated"
    up_matrices = 2 if gated else 1
    kept_per_ffn = 3 if gated else 2   # gate and up outputs and their product (gated); input and output (plain)
    moe = arch.moe
    moe_layers = arch.moe_layers
    dense_layers = arch.layers - moe_layers
    expert_ffn = moe.expert_ffn_size if moe else 0
    moe_width = (moe.experts_per_token * (h + kept_per_ffn * expert_ffn)
                 + moe.shared_experts * kept_per_ffn * expert_ffn) if moe else 0
    mlp_width = (dense_layers * kept_per_ffn * arch.ffn_size + moe_layers * moe_width) / arch.layers
    output = a * d_v * h
    block = parts.parts["attention_per_layer"] + parts.parts["norms_per_layer"]   # what every block has
    # encoder-decoder: the decoder's cross attention (self-attention's shapes) counted into the average block, and
    # the decoder block (self + cross attention, three norms, the MLP) as the largest unit ZeRO-3 gathers
    cross = arch.decoder_layers / arch.layers
    cross_block = parts.parts["cross_attention"] / arch.decoder_layers if arch.decoder_layers else 0
    mtp = 0
    if arch.mtp_layers:
        per_expert = parts.parts.get("expert", 0)
        mlp_active = ((moe.shared_experts + moe.experts_per_token) * per_expert + h * moe.experts) if moe \
            else parts.parts["dense_mlp_per_layer"]
        mtp = arch.mtp_layers * (parts.parts["attention_per_layer"] + mlp_active + 2 * h * h + V * h)

    def shape(value, what: str) -> Given:
        return Given(float(value), "derived", f"{origin}: {what}", field)

    return {
        "ffn_size": shape(arch.ffn_size, "intermediate size"), "vocab_size": shape(V, "vocabulary"),
        "mlp_gated": shape(1 if gated else 0, f"{arch.mlp} MLP"),
        "experts": shape(moe.experts if moe else 0, "routed experts"),
        "shared_experts": shape(moe.shared_experts if moe else 0, "shared experts"),
        "expert_ffn_size": shape(expert_ffn, "expert intermediate size"),
        "embedding_parameters": shape(parts.embeddings, "token and position embeddings"),
        "lm_head_parameters": shape(parts.lm_head, "tied embeddings: no head matrix of its own" if not parts.lm_head
                                    else "untied LM head V·h"),
        "lm_head_matmul_parameters": shape(V * h, "the output layer's matmul V·h"),
        "attention_projection_parameters_per_layer": shape((parts.parts["attention_per_layer"] - output) * (1 + cross),
                                                           "Q, K, V projections of a layer" + (
                                                               " and the decoder's cross attention, averaged over "
                                                               "both stacks" if cross else "")),
        "attention_output_parameters_per_layer": shape(output * (1 + cross),
                                                       "a·d_v·h" + (" (× 1 + cross-attention layers / layers)"
                                                                    if cross else "")),
        "mlp_up_parameters_per_layer": shape(up_matrices * h * arch.ffn_size, f"{up_matrices}·h·f"),
        "mlp_down_parameters_per_layer": shape(arch.ffn_size * h, "f·h"),
        "expert_up_parameters": shape(up_matrices * h * expert_ffn, f"{up_matrices}·h·f_e"),
        "expert_down_parameters": shape(expert_ffn * h, "f_e·h"),
        "attention_activation_width": shape((a * d_qk + kv * d_qk + kv * d_v + a * d_v) * (1 + cross),
                                            "a·d_qk + k·d_qk + k·d_v + a·d_v" + (
                                                ", × (1 + cross-attention layers / layers): the decoder's cross "
                                                "attention keeps its own" if cross else "")),
        "mlp_activation_width": shape(mlp_width, f"{kept_per_ffn}·f per dense layer"
                                      + (", k_e·(h + c·f_e) + S·c·f_e per MoE layer, averaged" if moe else "")),
        "mtp_layers": shape(arch.mtp_layers, "multi-token-prediction modules"),
        "mtp_matmul_parameters": shape(mtp, "active matmuls of the MTP modules and their head"),
        "dense_block_parameters": shape(block + cross_block + parts.parts["dense_mlp_per_layer"] if dense_layers
                                        else 0, "attention + norms + MLP of one dense block" + (
                                            " (a decoder block: with its cross attention and its norm)"
                                            if cross else "")),
        "moe_block_parameters": shape(block + (parts.routers + parts.shared_experts) / moe_layers if moe_layers else 0,
                                      "attention + norms + router + shared experts of one MoE block"),
    }


def architecture_quantities(arch: Architecture, attention_flops: str, micro_batch_size: int, sequence_length: int,
                            activation_bytes_per_element: float, wanted: tuple[str, ...],
                            lora=None) -> dict[str, float]:
    """Quantities of the training graph for one architecture on one accelerator (no parallelism), with the
    saved-tensor factor at 1: what the measuring harness counts its run with (FLOPs per token, one
    hidden state, activations per unit of the factor), by the same definitions as the estimate.
    ``lora``: the contract's LoRA policy (adapters on a frozen base: LoRA's FLOPs), or None."""
    from botec.inputs.lora import lora_given
    from botec.training import TRAINING

    given = model_given(None, arch, attention_flops, StatedInputs()) | lora_given(lora, arch)
    one = {"tensor_parallel": 1.0, "pipeline_parallel": 1.0, "context_parallel": 1.0, "sequence_parallel": 0.0,
           "virtual_pipeline_stages": 1.0, "pipeline_schedule": 0.0, "recompute": 0.0, "saved_tensor_factor": 1.0,
           "selective_recompute_policy": 0.0}
    given |= {name: Given(value, "assumed") for name, value in one.items()}
    given |= {"sequence_length": Given(float(sequence_length), "measured"),
              "micro_batch_size": Given(float(micro_batch_size), "measured"),
              "activation_bytes_per_element": Given(float(activation_bytes_per_element), "measured"),
              "pipeline_stage_layers": Given(float(arch.layers), "assumed"),
              "first_stage_layers": Given(float(arch.layers), "assumed"),
              "last_stage_layers": Given(float(arch.layers), "assumed"),
              "gradient_accumulation_steps": Given(1.0, "assumed"),
              "pipeline_activation_layers": Given(float(arch.layers), "assumed")}
    quantities = TRAINING.evaluate(given, wanted=wanted, choices={"activations": "saved_tensor_factor"})
    return {name: float(quantities[name].value) for name in wanted}
