"""The model of a contract, from one of four sources: a catalog name, a Hugging Face config.json,
an architecture written out, or a bare parameter count (the lesson's way)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, model_validator

from botec.architecture.bounds import (EXPERTS, HEADS, LAYERS, POSITIONS, VOCABULARY, WIDTH, Bound, shape_problem,
                                       whole_number)
from botec.contract.sections import Section as _Section
from botec.contract.stated import quantity
from botec.errors import ContractError
from botec.units import excerpt

__all__ = ["MoESpec", "MLASpec", "ModelSpec", "ModelField"]


def _count_of(bound: Bound):
    """The type of a contract field that counts what ``bound`` bounds (:mod:`botec.architecture.bounds`: the range
    the ``config.json`` key for the same thing has, so that the two ways of writing a shape accept the same shapes).

    Refused in the bound's words, whatever form the value takes: ``expected a whole number from 1 to 100,000, got
    1000000``. A string of digits is read as its number, as a count field reads YAML's quoted ``'32'``, its length
    judged before it is converted; a bool, a fraction or any other text is refused.
    """
    def within(raw: Any) -> int:
        value = raw
        if isinstance(raw, str) and raw.strip().isascii() and raw.strip().isdigit() and len(raw.strip()) <= 20:
            value = int(raw.strip())
        number = whole_number(value, bound)
        if number is None:
            raise ValueError(f"expected {bound.expected}, got {excerpt(raw)}")
        return number

    return Annotated[int, Field(ge=bound.least, le=bound.most), BeforeValidator(within)]


class MoESpec(_Section):
    """Mixture of experts: routed experts, experts per token, shared experts, which layers."""

    experts: _count_of(EXPERTS) = Field(description="routed experts E")
    experts_per_token: _count_of(EXPERTS) = Field(description="experts each token is routed to (top-k)")
    expert_ffn_size: _count_of(WIDTH) = Field(description="FFN width of one expert")
    shared_experts: _count_of(EXPERTS.from_zero) = Field(0, description="always-active shared experts")
    first_dense_layers: _count_of(LAYERS.from_zero) = Field(0, description="leading layers with a dense MLP")
    layer_frequency: _count_of(LAYERS) = Field(1, description="every n-th layer after those is MoE")
    router_bias: bool = Field(False, description="a bias per expert in the router (DeepSeek-V3)")


class MLASpec(_Section):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    q_lora_rank: Optional[_count_of(WIDTH)] = Field(None, description="rank of the query down-projection (none: full "
                                                                  "query projection, as DeepSeek-V2-Lite)")
    kv_lora_rank: _count_of(WIDTH) = Field(description="rank of the compressed key/value latent (the KV cache per "
                                                       "token)")
    qk_nope_head_dim: _count_of(WIDTH) = Field(description="per-head query/key width without rotary embedding")
    qk_rope_head_dim: _count_of(WIDTH) = Field(description="per-head query/key width carrying the rotary embedding")
    v_head_dim: _count_of(WIDTH) = Field(description="per-head value width")


# the field of each role :func:`~botec.architecture.bounds.shape_problem` blames
_RELATION_FIELDS = {"kv_heads": "workload.model.kv_heads", "attention_heads": "workload.model.attention_heads",
                    "experts_per_token": "workload.model.moe.experts_per_token",
                    "first_dense_layers": "workload.model.moe.first_dense_layers"}
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
    layers: Optional[quantity("count", "Transformer layers L", minimum=LAYERS.least, maximum=LAYERS.most,
                              integer=True)] = None
    hidden_size: Optional[quantity("count", "Hidden width H", minimum=WIDTH.least, maximum=WIDTH.most,
                                   integer=True)] = None
    attention_heads: Optional[_count_of(HEADS)] = Field(None, description="attention heads a")
    kv_heads: Optional[_count_of(HEADS)] = Field(None, description="key/value heads (MHA: a, GQA: fewer, MQA: 1)")
    head_dim: Optional[_count_of(WIDTH)] = Field(None, description="width of one head (default hidden / heads)")
    ffn_size: Optional[_count_of(WIDTH)] = Field(None, description="FFN (intermediate) width of the dense MLP")
    mlp: Literal["gated", "plain"] = Field("gated", description="gated (SwiGLU, 3 matrices) or plain (2)")
    vocab_size: Optional[_count_of(VOCABULARY)] = Field(None, description="vocabulary size V (embedding and output "
                                                                          "rows)")
    tied_embeddings: bool = Field(False, description="the output layer shares the input embedding's weights")
    position_embeddings: _count_of(POSITIONS.from_zero) = Field(0, description="learned absolute positions (0 for "
                                                                               "RoPE)")
    norm: Literal["rmsnorm", "layernorm"] = Field("rmsnorm", description="rmsnorm (a scale) or layernorm (scale "
                                                                       "and bias)")
    embedding_norm: bool = Field(False, description="a norm right after the token embeddings (BLOOM)")
    attention_bias: Literal["none", "qkv", "all"] = Field(
        "none", description="biases in attention: none (Llama), qkv (Qwen2: the q, k, v projections) or all")
    mlp_bias: bool = Field(False, description="biases in the MLP's linear layers (GPT-2, BLOOM)")
    moe: Optional[MoESpec] = Field(None, description="mixture of experts: routed experts in the MLP (Mixtral, "
                                                     "DeepSeek)")
    mla: Optional[MLASpec] = Field(None, description="multi-head latent attention in place of GQA (DeepSeek-V2/V3)")
    mtp_layers: _count_of(LAYERS.from_zero) = Field(0, description="multi-token-prediction layers beside the main "
                                                                   "stack (DeepSeek-V3: 1)")

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
            self._check_relations()
        elif not sources:
            missing = [f for f in ("parameters", "layers", "hidden_size") if getattr(self, f) is None]
            if missing:
                raise ContractError(
                    "required field is missing (a model is a catalog name, a config.json, an architecture, "
                    "or parameters with layers and hidden_size)", field=f"workload.model.{missing[0]}")
        return self

    def _check_relations(self) -> None:
        """Refuse the first relation of :func:`~botec.architecture.bounds.shape_problem` the architecture breaks
        (the one list a ``config.json`` is held to as well), naming the field of the role it blames."""
        moe = self.moe
        problem = shape_problem(
            hidden_size=int(self.hidden_size.value), attention_heads=self.attention_heads,
            kv_heads=self.kv_heads or self.attention_heads, head_dim=self.head_dim, layers=int(self.layers.value),
            experts=moe and moe.experts, experts_per_token=moe and moe.experts_per_token,
            first_dense_layers=moe.first_dense_layers if moe else 0, latent_attention=self.mla is not None)
        if problem is not None:
            role, expected = problem
            raise ContractError(f"expected {expected}", field=_RELATION_FIELDS[role])

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
