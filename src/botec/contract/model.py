"""The model of a contract, from one of four sources: a catalog name, a Hugging Face config.json,
an architecture written out, or a bare parameter count (the lesson's way)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, NonNegativeInt, PositiveInt, model_validator

from botec.contract.sections import Section as _Section
from botec.contract.stated import quantity
from botec.errors import ContractError

__all__ = ["MoESpec", "MLASpec", "ModelSpec", "ModelField"]


class MoESpec(_Section):
    """Mixture of experts: routed experts, experts per token, shared experts, which layers."""

    experts: PositiveInt = Field(description="routed experts E")
    experts_per_token: PositiveInt = Field(description="experts each token is routed to (top-k)")
    expert_ffn_size: PositiveInt = Field(description="FFN width of one expert")
    shared_experts: NonNegativeInt = Field(0, description="always-active shared experts")
    first_dense_layers: NonNegativeInt = Field(0, description="leading layers with a dense MLP")
    layer_frequency: PositiveInt = Field(1, description="every n-th layer after those is MoE")
    router_bias: bool = Field(False, description="a bias per expert in the router (DeepSeek-V3)")

    @model_validator(mode="after")
    def _top_k(self) -> "MoESpec":
        if self.experts_per_token > self.experts:
            raise ContractError(f"experts_per_token ({self.experts_per_token}) exceeds experts ({self.experts})",
                                field="workload.model.moe.experts_per_token")
        return self


class MLASpec(_Section):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    q_lora_rank: Optional[PositiveInt] = Field(None, description="rank of the query down-projection (none: full "
                                                                 "query projection, as DeepSeek-V2-Lite)")
    kv_lora_rank: PositiveInt = Field(description="rank of the compressed key/value latent (the KV cache per token)")
    qk_nope_head_dim: PositiveInt = Field(description="per-head query/key width without rotary embedding")
    qk_rope_head_dim: PositiveInt = Field(description="per-head query/key width carrying the rotary embedding")
    v_head_dim: PositiveInt = Field(description="per-head value width")


_ARCHITECTURE_FIELDS = ("attention_heads", "kv_heads", "head_dim", "ffn_size", "vocab_size", "moe", "mla")


def _model_spec(raw: Any) -> Any:
    """``model: llama-3.1-8b`` is short for ``model: {catalog: llama-3.1-8b}``."""
    return {"catalog": raw} if isinstance(raw, str) else raw


class ModelSpec(_Section):
    """The model, from one of four sources: a catalog name, a Hugging Face config.json, an
    architecture, or a bare parameter count (with layers and hidden size for activations)."""

    name: Optional[str] = Field(None, description="a label for the model")
    catalog: Optional[str] = Field(None, description="a model of the shipped catalog (see `botec model --list`)")
    config: Optional[str] = Field(None, description="path of a Hugging Face config.json (relative to the contract)")
    parameters: Optional[quantity("count", "Model parameters P, e.g. '7B' (bare-count models)",
                                  exclusive_minimum=0)] = None
    layers: Optional[quantity("count", "Transformer layers L", minimum=1, integer=True)] = None
    hidden_size: Optional[quantity("count", "Hidden width H", minimum=1, integer=True)] = None
    attention_heads: Optional[PositiveInt] = Field(None, description="attention heads a")
    kv_heads: Optional[PositiveInt] = Field(None, description="key/value heads (MHA: a, GQA: fewer, MQA: 1)")
    head_dim: Optional[PositiveInt] = Field(None, description="width of one head (default hidden / heads)")
    ffn_size: Optional[PositiveInt] = Field(None, description="FFN (intermediate) width of the dense MLP")
    mlp: Literal["gated", "plain"] = Field("gated", description="gated (SwiGLU, 3 matrices) or plain (2)")
    vocab_size: Optional[PositiveInt] = Field(None, description="vocabulary size V (embedding and output rows)")
    tied_embeddings: bool = Field(False, description="the output layer shares the input embedding's weights")
    position_embeddings: NonNegativeInt = Field(0, description="learned absolute positions (0 for RoPE)")
    norm: Literal["rmsnorm", "layernorm"] = Field("rmsnorm", description="rmsnorm (a scale) or layernorm (scale "
                                                                       "and bias)")
    embedding_norm: bool = Field(False, description="a norm right after the token embeddings (BLOOM)")
    attention_bias: Literal["none", "qkv", "all"] = Field(
        "none", description="biases in attention: none (Llama), qkv (Qwen2: the q, k, v projections) or all")
    mlp_bias: bool = Field(False, description="biases in the MLP's linear layers (GPT-2, BLOOM)")
    moe: Optional[MoESpec] = Field(None, description="mixture of experts: routed experts in the MLP (Mixtral, "
                                                     "DeepSeek)")
    mla: Optional[MLASpec] = Field(None, description="multi-head latent attention in place of GQA (DeepSeek-V2/V3)")
    mtp_layers: NonNegativeInt = Field(0, description="multi-token-prediction layers beside the main stack "
                                                      "(DeepSeek-V3: 1)")

    @model_validator(mode="after")
    def _one_source(self) -> "ModelSpec":
        architecture = any(getattr(self, f) is not None for f in _ARCHITECTURE_FIELDS)
        sources = [n for n, present in (("catalog", self.catalog), ("config", self.config),
                                        ("architecture", architecture)) if present]
        if len(sources) > 1:
            raise ContractError(f"name the model one way, not by {' and '.join(sources)}", field="workload.model")
        if self.catalog is not None:
            from botec.architecture import model_catalog
            from botec.catalog import did_you_mean
            from botec.units import excerpt

            catalog = model_catalog()
            if self.catalog not in catalog:
                raise ContractError(f"unknown model {excerpt(self.catalog)}{did_you_mean(self.catalog, catalog)} "
                                    f"(catalog: {', '.join(catalog)})", field="workload.model.catalog")
        if sources and self.parameters is not None:
            raise ContractError(f"parameters are counted from the {sources[0]}; remove workload.model.parameters",
                                field="workload.model.parameters")
        if architecture:
            missing = [f for f in ("layers", "hidden_size", "attention_heads", "ffn_size", "vocab_size")
                       if getattr(self, f) is None]
            if missing:
                raise ContractError(f"an architecture needs {', '.join(missing)}", field=f"workload.model.{missing[0]}")
        elif not sources:
            missing = [f for f in ("parameters", "layers", "hidden_size") if getattr(self, f) is None]
            if missing:
                raise ContractError(
                    "required field is missing (a model is a catalog name, a config.json, an architecture, "
                    "or parameters with layers and hidden_size)", field=f"workload.model.{missing[0]}")
        return self

    @property
    def kind(self) -> str:
        if self.catalog:
            return "catalog"
        if self.config:
            return "config"
        return "architecture" if self.attention_heads is not None else "count"


# ``model: llama-3.1-8b`` or a mapping; the name is read as {catalog: name} before validation, so the value is
# always a ModelSpec, and the schema offers both forms.
ModelField = Annotated[Union[ModelSpec, Annotated[str, Field(description="a catalog model, e.g. llama-3.1-8b")]],
                       BeforeValidator(_model_spec)]
