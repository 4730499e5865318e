"""One record per parallel dimension: its contract field, its Megatron name, its network group, what
reports call it, where `botec search` bounds it, and each training launch tool's option for it.

The records are data only (in the spirit of torchtitan's ``MeshAxisName``): they list in one place what
a new dimension must name, and ``tests/test_parallelisms.py`` holds them to the contract, the groups,
the search bounds and the launch tools' option tables. They are in Megatron's rank order (TP fastest, then
CP, then DP with EP and the shard group inside it, then PP). Expert tensor parallelism (ETP) has no record:
the training contract has no field for it (a training layout splits experts TP ways, a replica TP / EP).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PARALLELISMS", "Parallelism"]


@dataclass(frozen=True)
class Parallelism:
    """One parallel dimension of a layout."""

    field: str                  # the training contract's strategy field ("strategy.<field>")
    short: str                  # its Megatron name: TP, CP, ...
    group: str | None           # its network group in botec.layout.GROUPS, None when it has no collectives of its own
    words: str                  # what reports call it
    search: str | None          # the key of botec.layout.candidates it is searched under, None when not searched
    launch: dict[str, str] = field(default_factory=dict)   # training launch tool -> its option for the degree


PARALLELISMS: tuple[Parallelism, ...] = (
    Parallelism("tensor_parallel", "TP", "tp", "tensor parallelism", "strategy.tensor_parallel",
                {"megatron": "--tensor-model-parallel-size", "torchtitan": "--parallelism.tensor_parallel_degree"}),
    Parallelism("sequence_parallel", "SP", None, "sequence parallelism (the TP region's activations split)",
                "strategy.sequence_parallel",
                {"megatron": "--sequence-parallel", "torchtitan": "--parallelism.enable_sequence_parallel"}),
    Parallelism("context_parallel", "CP", "cp", "context parallelism", "strategy.context_parallel",
                {"megatron": "--context-parallel-size", "torchtitan": "--parallelism.context_parallel_degree"}),
    Parallelism("data_parallel", "DP", "dp", "data parallelism", None,
                {"torchtitan": "--parallelism.data_parallel_replicate_degree"}),
    Parallelism("expert_parallel", "EP", "ep", "expert parallelism", "strategy.expert_parallel",
                {"megatron": "--expert-model-parallel-size", "torchtitan": "--parallelism.expert_parallel_degree"}),
    Parallelism("sharding_group", "FSDP", "shard", "the ZeRO/FSDP shard group", None,
                {"torchtitan": "--parallelism.data_parallel_shard_degree"}),
    Parallelism("pipeline_parallel", "PP", "pp", "pipeline parallelism", "strategy.pipeline_parallel",
                {"megatron": "--pipeline-model-parallel-size", "torchtitan": "--parallelism.pipeline_parallel_degree"}),
    Parallelism("virtual_pipeline_stages", "VPP", None, "interleaved pipeline chunks per stage",
                "strategy.virtual_pipeline_stages", {"megatron": "--num-virtual-stages-per-pipeline-rank"}),
)
