"""A training estimate's plan as the launch formats write it, and the contract fields a launch file carries.

:func:`training_plan` reads what the estimate resolved (not what the contract stated): the layout's degrees
(TP, PP, CP, EP and the derived DP), the ZeRO/FSDP sharding, the micro-batch, the accumulation and global batch
(global batch B = micro-batch b × accumulation m × DP), the sequence length S, the optimizer steps
(⌈D / (B × S)⌉ for D training tokens), recomputation, precision and offload. Every format exports from one
:class:`TrainingPlan`, so the four files of one contract agree.

A format's ``read`` returns the contract fields its file carries as a nested partial contract
(``{"strategy": {"tensor_parallel": 2}}``); :func:`fields_of` builds one from dotted paths and :func:`flatten`
gives the dotted paths back, which ``botec import`` sets on a base contract one by one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from botec.errors import ContractError

__all__ = ["Architecture", "TrainingPlan", "fields_of", "flatten", "training_plan"]


@dataclass(frozen=True)
class Architecture:
    """The model's shape, as the launch files that need one (Megatron-LM) write it."""

    layers: int
    hidden_size: int
    attention_heads: Optional[int] = None
    kv_heads: Optional[int] = None
    ffn_size: Optional[int] = None
    vocab_size: Optional[int] = None
    gated_mlp: bool = True
    tied_embeddings: bool = False
    experts: Optional[int] = None
    experts_per_token: Optional[int] = None
    expert_ffn_size: Optional[int] = None


@dataclass(frozen=True)
class TrainingPlan:
    """What a training launch file states, from an estimate (sizes in sequences and tokens, not bytes)."""

    accelerators: int                 # N, the world size
    accelerators_per_node: int        # torchrun --nproc-per-node
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    expert_parallel: int
    data_parallel: int                # N / (TP × PP × CP)
    zero_stage: int                   # 0 none, 1 optimizer state, 2 + gradients, 3 + weights (FSDP full shard)
    hybrid_shard: bool                # shards within a group, replicas across groups
    sharding_degree: int              # ranks one ZeRO/FSDP shard group spans
    micro_batch_size: int             # b, sequences per rank per micro-step
    gradient_accumulation_steps: int  # m
    global_batch_size: int            # B = b × m × DP
    sequence_length: int              # S
    steps: int                        # optimizer steps ⌈D / (B × S)⌉
    recompute: str                    # none, selective, full
    recompute_layer_fraction: Optional[float]
    precision: str                    # bf16, fp16, fp8
    sequence_parallel: bool
    virtual_pipeline_stages: int
    offload_optimizer: str            # none, cpu, paged
    offload_parameters: bool
    checkpoint_interval_steps: int    # ⌈checkpoint interval τ / step time⌉, at least 1
    model_catalog: Optional[str]      # the catalog name, when the contract names one
    architecture: Optional[Architecture]
    lora: bool = False

    @property
    def nodes(self) -> int:
        """Nodes: ⌈N / accelerators per node⌉ (torchrun --nnodes)."""
        return max(1, math.ceil(self.accelerators / self.accelerators_per_node))

    @property
    def processes_per_node(self) -> int:
        """Processes on each node: all its accelerators, or N when the job is smaller than a node."""
        return min(self.accelerators, self.accelerators_per_node)


def _int(value: Any) -> int:
    return int(round(float(value)))


def training_plan(result) -> TrainingPlan:
    """The plan of a training :class:`~botec.estimation.Estimate`; a one-line error for a serving one."""
    if result.kind != "training":
        raise ContractError(f"this launch format is for training contracts; this one is {result.kind}",
                            field="workload.kind")
    q, layout, strategy = result.quantities, result.inputs.layout, result.contract.strategy
    dp = _int(q["data_parallel_degree"].value)
    micro = _int(q["micro_batch_size"].value)
    accumulation = _int(q["gradient_accumulation_steps"].value)
    step_seconds = q["step_seconds"].value if "step_seconds" in q else None
    interval = strategy.checkpoint.interval.value
    interval_steps = max(1, math.ceil(interval / step_seconds)) if step_seconds else 1
    offload = strategy.offload
    model = result.contract.workload.model
    return TrainingPlan(
        accelerators=_int(layout.accelerators), accelerators_per_node=_int(layout.accelerators_per_node),
        tensor_parallel=_int(layout.tensor_parallel), pipeline_parallel=_int(layout.pipeline_parallel),
        context_parallel=_int(layout.context_parallel), expert_parallel=_int(layout.expert_parallel),
        data_parallel=dp, zero_stage=_int(layout.zero_stage), hybrid_shard=bool(layout.hybrid_shard),
        sharding_degree=_int(q["sharding_degree"].value) if "sharding_degree" in q else dp,
        micro_batch_size=micro, gradient_accumulation_steps=accumulation,
        global_batch_size=micro * accumulation * dp, sequence_length=_int(q["sequence_length"].value),
        steps=_int(q["steps"].value), recompute=strategy.recompute,
        recompute_layer_fraction=(strategy.recompute_layer_fraction.value
                                  if strategy.recompute_layer_fraction is not None else None),
        precision=strategy.precision, sequence_parallel=bool(strategy.sequence_parallel),
        virtual_pipeline_stages=_int(layout.virtual_pipeline_stages),
        offload_optimizer=offload.optimizer if offload else "none",
        offload_parameters=bool(offload.parameters) if offload else False,
        checkpoint_interval_steps=interval_steps, model_catalog=model.catalog,
        architecture=_architecture(result), lora=strategy.lora is not None)


def _architecture(result) -> Optional[Architecture]:
    a = result.architecture
    if a is not None:
        moe = a.moe
        return Architecture(
            layers=a.layers, hidden_size=a.hidden_size, attention_heads=a.attention_heads, kv_heads=a.kv_heads,
            ffn_size=a.ffn_size, vocab_size=a.vocab_size, gated_mlp=a.mlp == "gated", tied_embeddings=a.tied_embeddings,
            experts=moe.experts if moe else None, experts_per_token=moe.experts_per_token if moe else None,
            expert_ffn_size=moe.expert_ffn_size if moe else None)
    model = result.contract.workload.model
    if model.layers is not None and model.hidden_size is not None:   # a bare-count model: its shape only
        return Architecture(layers=_int(model.layers.value), hidden_size=_int(model.hidden_size.value))
    return None


def fields_of(values: dict[str, Any]) -> dict:
    """A nested partial contract from ``{"strategy.tensor_parallel": 2, ...}`` (None values left out)."""
    from botec.contract import set_field

    nested: dict = {}
    for path, value in values.items():
        if value is not None:
            set_field(nested, path, value)
    return nested


def flatten(fields: dict, prefix: str = "") -> dict[str, Any]:
    """The dotted paths and values of a nested partial contract (the inverse of :func:`fields_of`)."""
    flat: dict[str, Any] = {}
    for key, value in fields.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path + "."))
        else:
            flat[path] = value
    return flat
