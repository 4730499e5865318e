"""The workload contract: what the job is, what it runs on, how, and what is assumed.

A contract has four sections (the application / system / execution split of Calculon, plus
named assumptions):

- ``workload``: the model, the tokens to process, the sequence length (fixed when an
  estimate is compared with a measurement);
- ``supply``: the accelerators (a catalog name or a device described inline), their count,
  the network and storage they can use, prices;
- ``strategy``: parallelism, precision, optimizer, batch, checkpoint and retention policy;
- ``assumptions``: efficiencies and placeholder factors, and the thresholds of the findings.

Every number accepts units (``32 GB``, ``200 TFLOP/s``, ``1 h``, ``7B``) or a plain number in
base units, and may be written as a mapping with an uncertainty range and a source note::

    single_accelerator_mfu: {value: 0.30, low: 0.20, high: 0.45, source: "short run on 1 GPU"}

:func:`load_contract` reads YAML or JSON and raises :class:`ContractError` with one line that
names the field and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, NonNegativeInt, PositiveInt,
                      Tag, ValidationError, WithJsonSchema, model_validator)

from botec.errors import ContractError, read_text_file
from botec.units import DIMENSIONS, UnitError, parse_quantity

__all__ = ["Contract", "ContractError", "Stated", "load_contract", "parse_contract", "apply_overrides"]


class Stated(BaseModel):
    """A stated number in base units, with an optional uncertainty range and a source note."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    low: Optional[float] = None
    high: Optional[float] = None
    source: Optional[str] = None
    provenance: Literal["assumed", "measured"] = "assumed"
    distribution: Literal["triangular", "uniform", "normal", "lognormal"] = "triangular"


_STATED_KEYS = {"value", "low", "high", "source", "provenance", "distribution"}
DISTRIBUTIONS = ("triangular", "uniform", "normal", "lognormal")


def quantity(
    dimension: str,
    description: str,
    *,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    integer: bool = False,
):
    """A contract field holding a :class:`Stated` number of ``dimension``, checked against its bounds."""
    expected = DIMENSIONS[dimension][0]
    bounds = []
    if exclusive_minimum is not None:
        bounds.append(f"greater than {exclusive_minimum:g}")
    if minimum is not None:
        bounds.append(f"at least {minimum:g}")
    if maximum is not None:
        bounds.append(f"at most {maximum:g}")
    kind = "a whole number" if integer else "a number"
    requirement = f"{kind} {' and '.join(bounds)}".strip()

    def check(number: float, raw: object, what: str) -> float:
        if integer and number != int(number):
            raise ValueError(f"{what} must be {requirement}, got {raw!r}")
        if exclusive_minimum is not None and not number > exclusive_minimum:
            raise ValueError(f"{what} must be {requirement}, got {raw!r}")
        if minimum is not None and number < minimum:
            raise ValueError(f"{what} must be {requirement}, got {raw!r}")
        if maximum is not None and number > maximum:
            raise ValueError(f"{what} must be {requirement}, got {raw!r}")
        return number

    def parse(raw: object, what: str = "value") -> float:
        try:
            number = parse_quantity(raw, dimension)
        except UnitError as error:
            raise ValueError(str(error)) from None
        return check(number, raw, what)

    def validate(raw: Any) -> Stated:
        if isinstance(raw, Stated):
            return raw
        if isinstance(raw, dict):
            unknown = set(raw) - _STATED_KEYS
            if unknown:
                raise ValueError(
                    f"unknown key {sorted(unknown)[0]!r}; a ranged value has keys value, low, high, source, provenance, "
                    "distribution"
                )
            if "value" not in raw:
                raise ValueError("a ranged value needs 'value' (and optionally low, high, source)")
            value = parse(raw["value"])
            low = parse(raw["low"], "low") if raw.get("low") is not None else None
            high = parse(raw["high"], "high") if raw.get("high") is not None else None
            if low is not None and low > value:
                raise ValueError(f"low ({raw['low']!r}) must not exceed value ({raw['value']!r})")
            if high is not None and high < value:
                raise ValueError(f"high ({raw['high']!r}) must not be below value ({raw['value']!r})")
            source = raw.get("source")
            provenance = raw.get("provenance", "assumed")
            if provenance not in ("assumed", "measured"):
                raise ValueError(f"provenance must be 'assumed' or 'measured', got {provenance!r}")
            distribution = raw.get("distribution", "triangular")
            if distribution not in DISTRIBUTIONS:
                raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
            if distribution == "lognormal" and (low is not None and low <= 0):
                raise ValueError("a lognormal range needs a positive low")
            return Stated(value=value, low=low, high=high, source=None if source is None else str(source),
                          provenance=provenance, distribution=distribution)
        return Stated(value=parse(raw))

    schema = {
        "description": f"{description}. {requirement[0].upper() + requirement[1:]}: {expected}; "
                       "or a mapping {value, low, high, source, provenance, distribution}.",
        "anyOf": [
            {"type": "number"},
            {"type": "string"},
            {
                "type": "object",
                "properties": {
                    "value": {"type": ["number", "string"]},
                    "low": {"type": ["number", "string"]},
                    "high": {"type": ["number", "string"]},
                    "source": {"type": "string"},
                    "provenance": {"enum": ["assumed", "measured"]},
                    "distribution": {"enum": list(DISTRIBUTIONS)},
                },
                "required": ["value"],
                "additionalProperties": False,
            },
        ],
    }
    return Annotated[Stated, BeforeValidator(validate), WithJsonSchema(schema)]


def _default(value: float, source: str) -> Stated:
    return Stated(value=value, source=f"default: {source}")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------------- workload


class MoESpec(_Section):
    """Mixture of experts: routed experts, experts per token, shared experts, which layers."""

    experts: PositiveInt = Field(description="routed experts E")
    experts_per_token: PositiveInt = Field(description="experts each token is routed to (top-k)")
    expert_ffn_size: PositiveInt = Field(description="FFN width of one expert")
    shared_experts: NonNegativeInt = Field(0, description="always-active shared experts")
    first_dense_layers: NonNegativeInt = Field(0, description="leading layers with a dense MLP")
    layer_frequency: PositiveInt = Field(1, description="every n-th layer after those is MoE")

    @model_validator(mode="after")
    def _top_k(self) -> "MoESpec":
        if self.experts_per_token > self.experts:
            raise ContractError(f"experts_per_token ({self.experts_per_token}) exceeds experts ({self.experts})",
                                field="workload.model.moe.experts_per_token")
        return self


class MLASpec(_Section):
    """Multi-head latent attention (DeepSeek-V2/V3)."""

    q_lora_rank: Optional[PositiveInt] = None
    kv_lora_rank: PositiveInt
    qk_nope_head_dim: PositiveInt
    qk_rope_head_dim: PositiveInt
    v_head_dim: PositiveInt


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
    vocab_size: Optional[PositiveInt] = None
    tied_embeddings: bool = False
    position_embeddings: NonNegativeInt = Field(0, description="learned absolute positions (0 for RoPE)")
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    attention_bias: Literal["none", "qkv", "all"] = "none"
    mlp_bias: bool = False
    moe: Optional[MoESpec] = None
    mla: Optional[MLASpec] = None
    mtp_layers: NonNegativeInt = 0

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
                raise ContractError(f"unknown model {self.catalog!r}{did_you_mean(self.catalog, catalog)} "
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


class Workload(_Section):
    """A training job; fixed when an estimate is compared with a measurement."""

    kind: Literal["training"] = Field("training", description="training (this) or serving")
    model: Annotated[ModelSpec, BeforeValidator(_model_spec)]
    tokens: quantity("count", "Training tokens processed across the run D, e.g. '1B' or '2T'", exclusive_minimum=0)
    sequence_length: quantity("count", "Tokens per sequence S", minimum=1, integer=True)
    token_bytes: quantity("bytes", "Bytes per stored token id in the prepared dataset", exclusive_minimum=0) = \
        _default(4, "four-byte token ids, as in lesson 000")


class Traffic(_Section):
    """Requests and their sizes (means)."""

    requests_per_second: Optional[quantity("count", "Mean arrivals per second, e.g. 5", exclusive_minimum=0)] = None
    requests_per_day: Optional[quantity("count", "Mean arrivals per day, e.g. '10M'", exclusive_minimum=0)] = None
    prompt_tokens: quantity("count", "Prompt tokens per request (mean)", minimum=1, integer=True)
    output_tokens: quantity("count", "Generated tokens per request (mean)", minimum=1, integer=True)

    @model_validator(mode="after")
    def _one_rate(self) -> "Traffic":
        stated = [n for n in ("requests_per_second", "requests_per_day") if getattr(self, n) is not None]
        if len(stated) != 1:
            raise ContractError("state the traffic as requests_per_second or requests_per_day (one of them)",
                                field="workload.traffic.requests_per_second")
        return self

    @property
    def per_second(self) -> Stated:
        if self.requests_per_second is not None:
            return self.requests_per_second
        day = self.requests_per_day
        scale = 1 / 86400
        return Stated(value=day.value * scale, low=day.low and day.low * scale, high=day.high and day.high * scale,
                      source=day.source, provenance=day.provenance)


class LatencyTargets(_Section):
    time_to_first_token: Optional[quantity("seconds", "Target time to first token, e.g. '500 ms'",
                                           exclusive_minimum=0)] = None
    time_per_output_token: Optional[quantity("seconds", "Target time per output token, e.g. '50 ms'",
                                             exclusive_minimum=0)] = None


class ServingWorkload(_Section):
    """A serving fleet: a model, its traffic and its latency targets."""

    kind: Literal["serving"]
    model: Annotated[ModelSpec, BeforeValidator(_model_spec)]
    traffic: Traffic
    latency: LatencyTargets = Field(default_factory=LatencyTargets)

    @model_validator(mode="after")
    def _needs_attention_shape(self) -> "ServingWorkload":
        if self.model.kind == "count":
            raise ContractError("serving needs the model's attention shape for its KV cache: give a catalog name, a "
                                "config.json or an architecture", field="workload.model")
        return self


def _workload_kind(raw: Any) -> str:
    if isinstance(raw, dict):
        return raw.get("kind", "training")
    return getattr(raw, "kind", "training")


# --------------------------------------------------------------------------------------------- supply


class Accelerator(_Section):
    """A device described inline (a hypothetical one, as the lesson's), instead of a catalog name."""

    name: str = Field(description="a label for the device")
    peak_flops_per_s: quantity("flop_rate", "Theoretical dense peak at the training precision, e.g. '200 TFLOP/s'",
                               exclusive_minimum=0)
    memory: quantity("bytes", "Device memory, e.g. '32 GB'", exclusive_minimum=0)
    memory_bandwidth: Optional[quantity("byte_rate", "Device memory bandwidth", exclusive_minimum=0)] = None
    link_bandwidth: Optional[quantity("byte_rate", "Accelerator-to-accelerator bandwidth per direction",
                                      exclusive_minimum=0)] = None
    tdp: Optional[quantity("watts", "Rated power of one device", exclusive_minimum=0)] = None


_BY_NAME, _INLINE = "by name", "inline"


def _by_name_or_inline(raw: Any) -> str:
    """Catalog entries are named by a string; anything else is validated as an inline description."""
    return _BY_NAME if isinstance(raw, str) else _INLINE


def _accelerator(raw: Any) -> Any:
    if isinstance(raw, str):
        from botec.catalog import accelerators, did_you_mean

        catalog = accelerators()
        if raw not in catalog:
            raise ValueError(
                f"unknown accelerator {raw!r}{did_you_mean(raw, catalog)} "
                f"(catalog: {', '.join(catalog)}; or describe one inline with name, peak_flops_per_s, memory)"
            )
    return raw


class Network(_Section):
    """One network tier for every collective (the lesson's way); supply.cluster describes two."""

    bandwidth: quantity("byte_rate", "Usable bandwidth per accelerator per direction during the collective, "
                        "e.g. '25 GB/s' (default: the catalog's link bandwidth)", exclusive_minimum=0)
    latency: quantity("seconds", "Latency per collective step (α)", minimum=0) = _default(0, "latency not modelled")


class Storage(_Section):
    write_bandwidth: quantity("byte_rate", "Aggregate write bandwidth genuinely available for checkpoints, "
                              "e.g. '1 GB/s'", exclusive_minimum=0)


class Link(_Section):
    bandwidth: quantity("byte_rate", "Usable bandwidth per accelerator per direction", exclusive_minimum=0)
    latency: quantity("seconds", "Latency per collective step (α), e.g. '5 us'", minimum=0) = \
        _default(0, "latency not modelled")


class Cluster(_Section):
    """Accelerators per node and the two network tiers; a node preset fills what is not stated."""

    node: Optional[str] = Field(None, description="a node preset (see `botec catalog`): dgx-h100, dgx-a100, ...")
    accelerators_per_node: Optional[PositiveInt] = None
    intra_node: Optional[Link] = Field(None, description="NVLink-class links inside a node")
    inter_node: Optional[Link] = Field(None, description="the network between nodes, per accelerator (NIC share)")

    @model_validator(mode="after")
    def _known_node(self) -> "Cluster":
        if self.node is not None:
            from botec.catalog import did_you_mean, node_presets

            presets = node_presets()
            if self.node not in presets:
                raise ContractError(f"unknown node preset {self.node!r}{did_you_mean(self.node, presets)} "
                                    f"(presets: {', '.join(presets)})", field="supply.cluster.node")
        return self


class Candidate(_Section):
    """Another accelerator to compare, with its own price."""

    accelerator: str = Field(description="a catalog accelerator")
    price_per_accelerator_hour: Optional[quantity("usd_per_hour", "Its price per accelerator-hour", minimum=0)] = None

    @model_validator(mode="after")
    def _known(self) -> "Candidate":
        _accelerator(self.accelerator)
        return self


def _candidate(raw: Any) -> Any:
    return {"accelerator": raw} if isinstance(raw, str) else raw


class ApiPrice(_Section):
    """An API's list price, to compare self-hosting against."""

    input_per_million: quantity("usd", "Price per million prompt tokens, e.g. '$3'", minimum=0)
    output_per_million: quantity("usd", "Price per million generated tokens, e.g. '$15'", minimum=0)
    source: Optional[str] = Field(None, description="where the prices come from, and when")


class Supply(_Section):
    """What the job runs on."""

    accelerator: Annotated[
        Union[Annotated[str, Tag(_BY_NAME)], Annotated[Accelerator, Tag(_INLINE)]],
        Discriminator(_by_name_or_inline),
        BeforeValidator(_accelerator),
        Field(description="a catalog name (see `botec catalog`) or an inline device"),
    ]
    count: Optional[quantity("count", "Accelerators in the job N (training; serving derives it from the traffic)",
                             minimum=1, integer=True)] = None
    candidates: Optional[list[Annotated[Candidate, BeforeValidator(_candidate)]]] = Field(
        None, description="serving: other catalog accelerators to compare, each a name or {accelerator, "
                          "price_per_accelerator_hour}")
    api_price: Optional[ApiPrice] = Field(None, description="serving: an API's price, for the break-even traffic")
    cluster: Optional[Cluster] = None
    network: Optional[Network] = None
    storage: Optional[Storage] = None
    price_per_accelerator_hour: Optional[quantity("usd_per_hour", "Price of one accelerator-hour, e.g. '$2.50/h'",
                                                  minimum=0)] = None
    power_per_accelerator: Optional[quantity("watts", "Power per accelerator (default: its TDP)",
                                             exclusive_minimum=0)] = None
    pue: Optional[quantity("ratio", "Power usage effectiveness of the facility, e.g. 1.2", minimum=1)] = None


# --------------------------------------------------------------------------------------------- strategy


class OptimizerState(_Section):
    """Bytes per parameter kept during training, for an optimizer that is not a preset."""

    weights: quantity("bytes", "Bytes of working weights per parameter", minimum=0)
    gradients: quantity("bytes", "Bytes of gradients per parameter", minimum=0)
    master_weights: quantity("bytes", "Bytes of master weights per parameter", minimum=0)
    optimizer_states: quantity("bytes", "Bytes of optimizer moments per parameter", minimum=0)


def _optimizer(raw: Any) -> Any:
    if isinstance(raw, str):
        from botec.catalog import did_you_mean, optimizer_presets

        presets = optimizer_presets()
        if raw not in presets:
            raise ValueError(f"unknown optimizer preset {raw!r}{did_you_mean(raw, presets)} "
                             f"(presets: {', '.join(presets)}; or give weights, gradients, master_weights, "
                             "optimizer_states in bytes per parameter)")
    return raw


class CheckpointPolicy(_Section):
    interval: quantity("seconds", "Wall time between checkpoint saves, e.g. '1 h'", exclusive_minimum=0) = \
        _default(3600, "one save per hour, as in lesson 000")
    retained: quantity("count", "Checkpoints kept at once", minimum=0, integer=True) = \
        _default(3, "three retained checkpoints, as in lesson 000")


class RetentionPolicy(_Section):
    dataset_copies: quantity("count", "Copies of the prepared dataset retained", minimum=0, integer=True) = \
        _default(2, "a prepared snapshot and a staging copy, as in lesson 000")
    export_bytes_per_parameter: quantity("bytes", "Bytes per parameter of the exported model", minimum=0) = \
        _default(2, "a BF16 export, as in lesson 000")


class Strategy(_Section):
    """How the job runs: parallelism, precision, optimizer, batch, checkpoints, retention."""

    data_parallel: Union[Literal["replicated"], PositiveInt] = Field(
        "replicated", description="DP degree = N / (TP × PP × CP); 'replicated' derives it, a number is checked")
    tensor_parallel: PositiveInt = Field(1, description="TP degree")
    sequence_parallel: bool = Field(False, description="split the TP region's activations over the TP ranks (SP)")
    pipeline_parallel: PositiveInt = Field(1, description="PP stages")
    pipeline_schedule: Literal["1f1b", "interleaved"] = Field("1f1b", description="1F1B or interleaved 1F1B")
    virtual_pipeline_stages: PositiveInt = Field(1, description="model chunks per stage (interleaved: > 1)")
    context_parallel: PositiveInt = Field(1, description="CP degree: ranks splitting each sequence")
    expert_parallel: PositiveInt = Field(1, description="EP degree (MoE), carved out of the DP ranks")
    zero_stage: Literal[0, 1, 2, 3] = Field(
        0, description="ZeRO stage over the data-parallel group: 0 none, 1 optimizer state, 2 + gradients, "
                       "3 + weights (FSDP full shard)")
    fsdp: Optional[Literal["no_shard", "shard_grad_op", "full_shard", "hybrid_shard"]] = Field(
        None, description="PyTorch FSDP's name for the sharding: sets zero_stage (0, 2, 3, 3); hybrid_shard shards "
                          "within a node and replicates across nodes")
    sharding_group: Optional[PositiveInt] = Field(
        None, description="ranks a ZeRO/FSDP shard group spans (default: all DP ranks; fewer = hybrid sharding)")
    micro_batch_size: Optional[quantity("count", "Sequences per accelerator per micro-step B_local (training)",
                                        minimum=1, integer=True)] = None
    gradient_accumulation_steps: Optional[quantity("count", "Micro-batches per optimizer step on each DP rank",
                                                   minimum=1, integer=True)] = None
    global_batch_size: Optional[quantity("count", "Sequences per optimizer step across all replicas "
                                         "(= micro-batch × accumulation × DP)", minimum=1, integer=True)] = None
    recompute: Literal["none", "selective", "full"] = Field(
        "none", description="activation recomputation: none, selective (attention core) or full layers")
    precision: Literal["bf16", "fp8"] = Field("bf16", description="compute precision; selects the catalog's peak")
    weight_precision: Literal["bf16", "fp16", "fp8", "int8", "int4"] = Field(
        "bf16", description="serving: weight format (int8/int4 weight-only, with per-group scales)")
    quantization_group_size: PositiveInt = Field(128, description="serving: weights per quantization scale (int8/int4)")
    kv_cache_precision: Literal["bf16", "fp16", "fp8", "int8"] = Field("bf16", description="serving: KV-cache format")
    memory_fraction: quantity("ratio", "Serving: share of device memory the engine may use (vLLM "
                              "gpu_memory_utilization)", exclusive_minimum=0, maximum=1) = \
        _default(0.9, "vLLM's gpu_memory_utilization default")
    max_batch_size: quantity("count", "Serving: most sequences the engine batches (max_num_seqs)", minimum=1,
                             integer=True) = _default(256, "vLLM's max_num_seqs default")
    activation_bytes_per_element: quantity("bytes", "Bytes per activation element b", exclusive_minimum=0) = \
        _default(2, "BF16 activations")
    optimizer: Annotated[
        Union[Annotated[str, Tag(_BY_NAME)], Annotated[OptimizerState, Tag(_INLINE)]],
        Discriminator(_by_name_or_inline),
        BeforeValidator(_optimizer),
        Field(description="an optimizer/precision preset (adam-mixed, adam-bf16, adam-fp32, sgd-momentum, "
                          "adam-8bit) or bytes per parameter"),
    ] = "adam-mixed"
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    retention: RetentionPolicy = Field(default_factory=RetentionPolicy)

    @model_validator(mode="after")
    def _consistent(self) -> "Strategy":
        if self.fsdp is not None:
            implied = {"no_shard": 0, "shard_grad_op": 2, "full_shard": 3, "hybrid_shard": 3}[self.fsdp]
            if "zero_stage" in self.model_fields_set and self.zero_stage != implied:
                raise ContractError(f"fsdp: {self.fsdp} is ZeRO stage {implied}, but zero_stage is {self.zero_stage}",
                                    field="strategy.zero_stage")
            self.zero_stage = implied
        if self.pipeline_schedule == "interleaved" and self.virtual_pipeline_stages < 2:
            raise ContractError("the interleaved schedule needs virtual_pipeline_stages ≥ 2",
                                field="strategy.virtual_pipeline_stages")
        if self.pipeline_schedule == "1f1b" and self.virtual_pipeline_stages > 1:
            raise ContractError("virtual_pipeline_stages > 1 needs pipeline_schedule: interleaved",
                                field="strategy.virtual_pipeline_stages")
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ContractError("sequence parallelism splits over the TP ranks: it needs tensor_parallel > 1",
                                field="strategy.sequence_parallel")
        return self


# --------------------------------------------------------------------------------------------- assumptions

_LESSON = "the lesson's planning value"


class Thresholds(_Section):
    """When a figure becomes a warning. Thresholds are assumptions too."""

    collective_overlap_share: quantity(
        "ratio", "Collective floor share of the step above which it must overlap with compute", minimum=0) = \
        _default(0.10, "a floor above 10 % of the step needs overlap")
    checkpoint_pause_share: quantity(
        "ratio", "Share of wall time spent writing checkpoints above which it is a problem", minimum=0) = \
        _default(0.02, "more than 2 % of wall time lost to checkpoint writes is worth fixing")


class Assumptions(_Section):
    """Efficiencies and placeholder factors: the numbers a short run should replace."""

    single_accelerator_mfu: Optional[quantity(
        "ratio", "Share of peak one accelerator sustains as useful model FLOPs", exclusive_minimum=0, maximum=1)] = None
    scaling_efficiency: Optional[quantity(
        "ratio", "Rate kept when spreading over N accelerators, relative to N single ones",
        exclusive_minimum=0, maximum=1)] = None
    end_to_end_mfu: Optional[quantity(
        "ratio", "Measured model FLOPs utilization of the whole multi-accelerator job; replaces "
        "single_accelerator_mfu × scaling_efficiency", exclusive_minimum=0, maximum=1)] = None
    saved_tensor_factor: quantity(
        "ratio", "Hidden-state-sized tensors retained per layer for the backward pass", exclusive_minimum=0) = \
        _default(8, _LESSON + " (a placeholder to replace with a measured peak)")
    runtime_buffer: quantity("bytes", "Runtime and temporary buffers per accelerator", minimum=0) = \
        _default(2e9, _LESSON)
    headroom: quantity("ratio", "Extra share of planned memory kept free", minimum=0) = _default(0.25, _LESSON)
    step_time_model: Literal["efficiency", "components"] = Field(
        "efficiency", description="efficiency: N × peak × MFU × scaling efficiency (the lesson); components: "
                                  "compute + pipeline bubble + exposed communication")
    activation_model: Literal["saved_tensor_factor", "korthikanti"] = Field(
        "saved_tensor_factor", description="saved_tensor_factor: layers × factor × one hidden-state tensor (the "
                                           "lesson); korthikanti: Korthikanti et al. 2022 per-layer formulas")
    attention_flops: Literal["full", "causal", "none"] = Field(
        "full", description="attention-score FLOPs counted: full (PaLM, nanoGPT), causal half (Megatron) or none")
    data_parallel_overlap: quantity("ratio", "Share of data-parallel communication hidden behind the backward pass",
                                    minimum=0, maximum=1) = \
        _default(0.5, "half hidden by bucketed overlap with the backward pass; measure it")
    model_parallel_overlap: quantity("ratio", "Share of TP, CP, EP and PP communication hidden behind compute",
                                     minimum=0, maximum=1) = _default(0.0, "on the critical path")
    collective_algorithm: Literal["ring", "tree"] = Field("ring", description="all-reduce algorithm")
    prefill_mfu: quantity("ratio", "Serving: share of peak prefill sustains", exclusive_minimum=0, maximum=1) = \
        _default(0.5, "prefill is large matrix multiplies; BLIS uses 0.45 on H100")
    decode_mfu: quantity("ratio", "Serving: share of peak decode sustains once compute-bound", exclusive_minimum=0,
                         maximum=1) = _default(0.5, "as prefill")
    decode_bandwidth_efficiency: quantity("ratio", "Serving: share of memory bandwidth decode achieves",
                                          exclusive_minimum=0, maximum=1) = \
        _default(0.8, "AIConfigurator's empirical 0.8 of HBM bandwidth")
    activation_reserve: quantity("bytes", "Serving: memory per accelerator for activations, CUDA graphs and buffers",
                                 minimum=0) = _default(3e9, "AIConfigurator reserves 3.5 GB on H100")
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @model_validator(mode="after")
    def _one_efficiency_model(self) -> "Assumptions":
        if self.end_to_end_mfu is not None:
            stated = [n for n in ("single_accelerator_mfu", "scaling_efficiency") if getattr(self, n) is not None]
            if stated:
                raise ContractError(
                    f"state either end_to_end_mfu or {' and '.join(stated)}, not both: a measured end-to-end "
                    "MFU already includes the scaling losses, so multiplying it by a scaling factor would count "
                    "them twice",
                    field="assumptions.end_to_end_mfu",
                )
        return self

    @model_validator(mode="after")
    def _components_model_counts_communication(self) -> "Assumptions":
        if self.step_time_model == "components":
            for name in ("end_to_end_mfu", "scaling_efficiency"):
                if getattr(self, name) is not None:
                    raise ContractError(
                        f"step_time_model components adds the communication time itself; {name} would count the "
                        "distribution losses twice (state single_accelerator_mfu only)", field=f"assumptions.{name}")
        return self

    def efficiency(self) -> dict[str, Stated]:
        """The efficiency model in force: end_to_end_mfu alone, or the (defaulted) pair."""
        if self.step_time_model == "components":
            return {"single_accelerator_mfu": self.single_accelerator_mfu or _default(0.30, _LESSON)}
        if self.end_to_end_mfu is not None:
            return {"end_to_end_mfu": self.end_to_end_mfu}
        return {
            "single_accelerator_mfu": self.single_accelerator_mfu or _default(0.30, _LESSON),
            "scaling_efficiency": self.scaling_efficiency or _default(0.80, _LESSON),
        }


_SERVING_STRATEGY = ("weight_precision", "quantization_group_size", "kv_cache_precision", "memory_fraction",
                     "max_batch_size")
_TRAINING_STRATEGY = ("micro_batch_size", "gradient_accumulation_steps", "global_batch_size", "zero_stage", "fsdp",
                      "sharding_group", "recompute", "optimizer", "checkpoint", "retention", "context_parallel",
                      "virtual_pipeline_stages", "pipeline_schedule", "sequence_parallel", "data_parallel")


class Contract(_Section):
    """A workload contract: workload, supply, strategy and assumptions."""

    model_config = ConfigDict(extra="forbid", title="botec workload contract")

    name: Optional[str] = Field(None, description="a short name for the job")
    description: Optional[str] = Field(None, description="what the job is for")
    workload: Annotated[Union[Annotated[Workload, Tag("training")], Annotated[ServingWorkload, Tag("serving")]],
                        Discriminator(_workload_kind)]
    supply: Supply
    strategy: Strategy
    assumptions: Assumptions = Field(default_factory=Assumptions)

    @model_validator(mode="after")
    def _fields_of_the_kind(self) -> "Contract":
        def changed(section: BaseModel) -> set[str]:
            """Fields stated with a value other than their default (a normalized dump states them all)."""
            fields = type(section).model_fields
            return {name for name in section.model_fields_set
                    if name in fields and getattr(section, name) != fields[name].get_default(call_default_factory=True)}

        strategy_set, supply_set = changed(self.strategy), changed(self.supply)
        if self.workload.kind == "training":
            for name in _SERVING_STRATEGY:
                if name in strategy_set:
                    raise ContractError("applies to serving contracts (workload.kind: serving)",
                                        field=f"strategy.{name}")
            if self.supply.count is None:
                raise ContractError("required field is missing", field="supply.count")
            if self.strategy.micro_batch_size is None:
                raise ContractError("required field is missing", field="strategy.micro_batch_size")
        else:
            for name in _TRAINING_STRATEGY:
                if name in strategy_set:
                    raise ContractError("applies to training contracts", field=f"strategy.{name}")
            if "count" in supply_set:
                raise ContractError("a serving estimate derives the accelerators from the traffic; state the "
                                    "replica's layout (strategy.tensor_parallel, pipeline_parallel) instead",
                                    field="supply.count")
        return self


# --------------------------------------------------------------------------------------------- loading


def _fields_at(model: type[BaseModel], location: tuple) -> list[str]:
    """Field names of the section at ``location`` (for 'did you mean')."""
    current: Any = model
    for part in location:
        if part in _WORKLOAD_KINDS:
            current = _WORKLOAD_KINDS[part]
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(part)
        if info is None:
            return []
        current = _section_type(info.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


_WORKLOAD_KINDS = {"training": Workload, "serving": ServingWorkload}


def _section_type(annotation: Any) -> Any:
    for candidate in getattr(annotation, "__args__", ()) or ():
        found = _section_type(candidate)
        if isinstance(found, type) and issubclass(found, _Section):
            return found
    return annotation


def _one_line(error: ValidationError) -> ContractError:
    """The first problem of a pydantic error as one line naming the field."""
    from botec.catalog import did_you_mean

    errors = error.errors()
    # A misspelt field also shows up as a missing one; the misspelling is the useful report.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    location = tuple(p for p in first["loc"] if isinstance(p, (str, int)))
    # Unions report the member they tried; a user never wrote those.
    raw_location = location
    location = tuple(p for p in location if p not in (_BY_NAME, _INLINE, "training", "serving"))
    field = ".".join(str(p) for p in location)
    kind = first["type"]
    context = first.get("ctx") or {}
    if isinstance(context.get("error"), ContractError):
        inner = context["error"]
        return ContractError(inner.detail, field=inner.field or field)
    if kind == "extra_forbidden":
        known = _fields_at(Contract, raw_location[:-1])
        hint = did_you_mean(location[-1], known)
        allowed = f" (allowed: {', '.join(known)})" if known and not hint else ""
        return ContractError(f"unknown field{hint}{allowed}", field=field)
    if kind == "missing":
        return ContractError("required field is missing", field=field)
    message = first["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if kind == "literal_error":
        message = f"{message}, got {first.get('input')!r}"
    if kind == "union_tag_invalid":
        expected = context.get("expected_tags", "")
        message = f"expected one of {expected}, got {context.get('tag', first.get('input'))!r}"
        field = f"{field}.kind" if field else "kind"
    if kind in ("model_type", "dict_type"):
        message = f"expected a mapping of fields, got {first.get('input')!r}"
    return ContractError(message, field=field)


def parse_contract(data: Any, origin: str | None = None) -> Contract:
    """Validate already-loaded data (a dict) as a contract."""
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            origin=origin)
    try:
        return Contract.model_validate(data)
    except ValidationError as error:
        problem = _one_line(error)
        raise ContractError(problem.detail, field=problem.field, origin=origin) from None
    except ContractError as error:
        raise ContractError(error.detail, field=error.field, origin=origin) from None


def read_contract_data(path: str | Path) -> dict:
    """The raw mapping of a YAML or JSON contract file, or a :class:`ContractError` saying what is wrong."""
    import yaml

    path = Path(path)
    origin = str(path)
    text = read_text_file(path)
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            from botec.catalog import load_yaml_text

            data = load_yaml_text(text)
    except json.JSONDecodeError as error:
        raise ContractError(f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                            origin=origin) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ContractError(f"malformed YAML{where}: {problem}", origin=origin) from None
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            origin=origin)
    return data


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``section.field=value`` overrides (values read as YAML scalars) to a raw contract mapping."""
    import copy

    import yaml

    data = copy.deepcopy(data)
    for override in overrides:
        path, sep, text = override.partition("=")
        if not sep or not path.strip():
            raise ContractError(f"expected FIELD=VALUE such as supply.count=8, got {override!r}", field="--set")
        keys = path.strip().split(".")
        target = data
        for key in keys[:-1]:
            node = target.get(key)
            if node is None or isinstance(node, str):
                node = {} if node is None else node
                target[key] = node
            if not isinstance(node, dict):
                raise ContractError(f"{key!r} is not a section", field=path.strip())
            target = node
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        target[keys[-1]] = value
    return data


def load_contract(path: str | Path, overrides: list[str] | None = None, origin: str | None = None) -> Contract:
    """Read, override and validate a contract file; errors name ``origin`` (default: the path)."""
    try:
        data = read_contract_data(path)
    except ContractError as error:
        raise ContractError(error.detail, field=error.field, origin=origin or error.origin) from None
    if overrides:
        data = apply_overrides(data, overrides)
    return parse_contract(data, origin=origin or str(path))
