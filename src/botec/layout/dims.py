"""The layout's degrees and what follows from them: the data-parallel degree, the shard group, the
accelerators each group spans, the layers of each pipeline stage. Fields hold numbers (one estimate)
or numpy arrays of one length (a sweep); every derived size here works on both."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable

from botec.errors import ContractError
from botec.graph.elementwise import ceil, floor, is_scalar, maximum, minimum, where
from botec.layout.stages import default_stage_layers, layers_in_flight

__all__ = ["Recompute", "PipelineSchedule", "GROUPS", "FSDP_ZERO_STAGE", "ModelFacts", "Rule", "Layout", "number_text"]


class Recompute(enum.IntEnum):
    """Activation recomputation (Korthikanti et al. 2022): none, the attention core, or whole layers."""

    NONE = 0
    SELECTIVE = 1
    FULL = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def named(cls, name: str) -> "Recompute":
        return cls[name.upper()]


class PipelineSchedule(str, enum.Enum):
    """The pipeline schedule (``strategy.pipeline_schedule``), and its number in the graph (:attr:`code`).

    - ``1f1b`` (Narayanan et al. 2021 §2.2.1) and ``interleaved`` (§2.2.2: v model chunks per stage);
    - ``zb-h1`` and ``zb-h2``: zero bubble (Qi et al. 2023, arXiv:2401.10241 §3: the backward split into
      B, the input gradient, and W, the weight gradient, scheduled later): H1 at 1F1B's activation memory,
      H2 with about twice the activations;
    - ``dualpipe``: DeepSeek-V3's bidirectional schedule (arXiv:2412.19437 §3.2.1, Table 2).
    """

    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    ZB_H1 = "zb-h1"
    ZB_H2 = "zb-h2"
    DUALPIPE = "dualpipe"

    @property
    def code(self) -> float:
        """The schedule as a number for the formulas: 0 1F1B or interleaved, 1 ZB-H1, 2 ZB-H2, 3 DualPipe."""
        return {"1f1b": 0.0, "interleaved": 0.0, "zb-h1": 1.0, "zb-h2": 2.0, "dualpipe": 3.0}[self.value]


# The parallel groups whose collectives cross a network tier, and what each carries.
GROUPS = {
    "tp": "the tensor-parallel collectives",
    "cp": "the context-parallel exchanges",
    "ep": "the expert all-to-alls",
    "dp": "the data-parallel gradient all-reduces",
    "shard": "the ZeRO/FSDP shard group's collectives",
    "edp": "the expert data-parallel group's gradient reductions and weight gathers",
    "pp": "the pipeline sends",
}

# PyTorch FSDP's sharding strategies as ZeRO stages (hybrid shard: full shard within a group, replicas across).
FSDP_ZERO_STAGE = {"no_shard": 0, "shard_grad_op": 2, "full_shard": 3, "hybrid_shard": 3}


@dataclass(frozen=True)
class ModelFacts:
    """What the layout rules need to know of the model and the batch."""

    name: str
    layers: int
    attention_heads: int | None = None   # None: a bare parameter count (no heads to split)
    kv_heads: int | None = None
    experts: int | None = None           # routed experts of an MoE model, None for a dense one
    sequence_length: int | None = None   # tokens per training sequence

    @property
    def has_shape(self) -> bool:
        return self.attention_heads is not None


def number_text(value: Any) -> str:
    """A scalar degree as text: ``8``, ``2.5``."""
    return f"{int(value):,}" if float(value) == int(value) else f"{float(value):g}"


@dataclass(frozen=True)
class Rule:
    """One layout rule: the contract field it is about, when it holds, and what to say when not."""

    field: str
    holds: Callable[["Layout"], Any]
    message: Callable[["Layout"], str]


@dataclass(frozen=True)
class Layout:
    """The degrees of one job (or one serving replica) and what follows from them.

    ``kind`` is ``training`` or ``serving`` (a serving layout is one replica: no data parallelism).
    Fields hold numbers, or numpy arrays of one length in a sweep.
    """

    kind: str
    model: ModelFacts
    accelerators: Any                      # N: the job's accelerators (serving: one replica's, t × p)
    accelerators_per_node: Any             # accelerators sharing the fast intra-node links
    tensor_parallel: Any = 1
    pipeline_parallel: Any = 1
    virtual_pipeline_stages: Any = 1
    context_parallel: Any = 1
    expert_parallel: Any = 1
    attention_tensor_parallel: Any = None  # serving, data-parallel attention: ranks of one attention group (None: TP)
    redundant_experts: Any = 0             # serving: redundant routed-expert copies beside the E experts (EPLB)
    sequence_parallel: Any = 0             # 1 when SP splits the TP region's activations
    zero_stage: Any = 0
    sharding_group: Any = None             # stated ZeRO/FSDP group, or None for the default
    hybrid_shard: bool = False             # fsdp: hybrid_shard (default group: the DP ranks of one node)
    recompute: Any = Recompute.NONE
    micro_batch_size: Any = 1
    gradient_accumulation_steps: Any = None  # stated, or None (derived from the global batch, else 1)
    global_batch_size: Any = None          # sequences per optimizer step, when stated
    data_parallel_stated: Any = None       # strategy.data_parallel when a number
    stage_layers: tuple[int, ...] | None = None  # strategy.pipeline_stage_layers, when stated
    pipeline_schedule: str = "1f1b"        # strategy.pipeline_schedule (one value for every row of a sweep)
    rules: tuple[Rule, ...] = field(default=(), repr=False, compare=False)

    # ------------------------------------------------------------------ derived sizes

    @cached_property   # a layout never changes, and the rules, the links and the inputs each ask again
    def data_parallel(self):
        """DP = N / (TP × PP × CP) (Megatron: world = TP × CP × DP × PP); serving replicas have DP 1."""
        if self.kind == "serving":
            return 1.0
        return self.accelerators / (self.tensor_parallel * self.pipeline_parallel * self.context_parallel)

    @property
    def accumulation_steps(self):
        """m: micro-batches per optimizer step on each DP rank (global batch / (micro-batch × DP) when stated)."""
        if self.global_batch_size is not None:
            return self.global_batch_size / (self.micro_batch_size * self.data_parallel)
        if self.gradient_accumulation_steps is not None:
            return self.gradient_accumulation_steps
        return 1.0

    @cached_property
    def sharding_degree(self):
        """Ranks one ZeRO/FSDP shard group spans: stated; hybrid shard: the DP ranks of one node; else all DP."""
        if self.sharding_group is not None:
            return self.sharding_group
        if self.hybrid_shard:
            per_node = floor(self.accelerators_per_node / (self.tensor_parallel * self.context_parallel))
            return maximum(1.0, minimum(self.data_parallel, per_node))
        return self.data_parallel

    @property
    def replica_groups(self):
        """Replicas of each shard group (torchtitan's dp_replicate; > 1 under hybrid sharding)."""
        return self.data_parallel / self.sharding_degree

    @property
    def attention_split(self):
        """Ways one request's attention heads are split: TP, or under data-parallel attention its group's ranks."""
        return self.tensor_parallel if self.attention_tensor_parallel is None else self.attention_tensor_parallel

    @property
    def expert_tensor_parallel(self):
        """Ways each expert's matrices are split: TP in training (Megatron's default), TP / EP in serving."""
        if self.kind == "serving":
            return self.tensor_parallel / self.expert_parallel
        return self.tensor_parallel

    @property
    def expert_data_parallel(self):
        """Data-parallel replicas of each expert: DP / EP."""
        return self.data_parallel / self.expert_parallel

    @property
    def gradient_all_reduce_ranks(self):
        """Ranks of one dense gradient all-reduce: every DP rank without ZeRO; under ZeRO/FSDP the replicas of
        each shard group (one rank of each, t·c·shard apart: hybrid sharding's all-reduce across nodes)."""
        return where(self.zero_stage >= 1, self.replica_groups, self.data_parallel)

    @property
    def expert_shard_ranks(self):
        """Ranks of one expert data-parallel collective: the ranks holding the same experts, EP apart in Megatron's
        order (TP, CP, DP ⊃ EP). Under ZeRO/FSDP those of one shard group (shard / EP, the group memory shards the
        expert state over); without it every expert replica (DP / EP)."""
        return maximum(where(self.zero_stage >= 1, self.sharding_degree / self.expert_parallel,
                             self.expert_data_parallel), 1.0)

    def span(self, group: str):
        """Accelerators a group spans in Megatron's rank order (TP, CP, DP ⊃ EP, PP)."""
        t, c = self.tensor_parallel, self.context_parallel
        # EP is carved out of the DP ranks in training, out of the TP ranks in a serving replica (each expert split
        # TP / EP ways): it spans TP × CP × EP there, TP × CP here
        expert = 1 if self.kind == "serving" else self.expert_parallel
        return {"tp": t, "cp": t * c, "ep": t * c * expert, "dp": t * c * self.data_parallel,
                "shard": t * c * self.sharding_degree, "edp": t * c * self.expert_parallel * self.expert_shard_ranks,
                "pp": self.accelerators}[group]

    def degree(self, group: str):
        """Ranks that take part in one collective of a group (the DP group's: its gradient all-reduce's)."""
        return {"tp": self.tensor_parallel, "cp": self.context_parallel, "ep": self.expert_parallel,
                "dp": self.gradient_all_reduce_ranks, "shard": self.sharding_degree, "edp": self.expert_shard_ranks,
                "pp": self.pipeline_parallel}[group]

    # ------------------------------------------------------------------ pipeline stages

    def _stage_split(self, stages: int) -> tuple[int, ...] | None:
        if self.stage_layers is not None:
            return self.stage_layers if len(self.stage_layers) == stages else None
        return default_stage_layers(self.model.layers, stages)

    def _per_stage_count(self, pick: Callable[[tuple[int, ...]], float]):
        """``pick(split)`` for the layout's stage count (elementwise over the distinct counts of an array)."""
        stages = self.pipeline_parallel
        if is_scalar(stages):
            split = self._stage_split(int(stages)) if float(stages) == int(stages) else None
            return float(pick(split)) if split else math.nan
        import numpy as np

        out = np.full(np.shape(stages), np.nan)
        for value in np.unique(stages):
            split = self._stage_split(int(value)) if float(value) == int(value) else None
            if split:
                out[stages == value] = pick(split)
        return out

    @property
    def stage_layer_split(self) -> tuple[int, ...] | None:
        """The layers of each stage (scalar layouts only), or None when no split exists."""
        return self._stage_split(int(self.pipeline_parallel))

    @property
    def pipeline_stage_layers(self):
        """Transformer layers of the stage with the most: it sets the step time and the state per accelerator."""
        return self._per_stage_count(max)

    @property
    def first_stage_layers(self):
        """Transformer layers of the first stage (it also holds the input embeddings)."""
        return self._per_stage_count(lambda split: split[0])

    @property
    def last_stage_layers(self):
        """Transformer layers of the last stage (it also holds the LM head and the loss)."""
        return self._per_stage_count(lambda split: split[-1])

    @property
    def pipeline_activation_layers(self):
        """Layers' worth of activations the busiest stage holds at the 1F1B peak: max_i (p − i) · L_i."""
        return self._per_stage_count(layers_in_flight)

    @property
    def pipeline_stage_slots(self):
        """The fewest slots of a stage: its layers, with the embedding (first stage) and the LM head (last
        stage) counted as one each. Each of a stage's v model chunks needs at least one slot (Llama 3 §3.3.2:
        "the first model chunk on the first stage has only the embedding")."""
        def fewest(split: tuple[int, ...]) -> int:
            slots = list(split)
            slots[0] += 1
            slots[-1] += 1
            return min(slots)

        return self._per_stage_count(fewest)

    @property
    def pipeline_chunk_layers(self):
        """Layers of the largest model chunk: ⌈L_max / v⌉, the fullest stage's layers split into v chunks as
        evenly as possible (L_max / v when v divides it; L_max under 1F1B)."""
        return ceil(self.pipeline_stage_layers / self.virtual_pipeline_stages)

    @property
    def schedule(self) -> PipelineSchedule:
        """The stated schedule; 1F1B with more than one chunk per stage is the interleaved one."""
        stated = PipelineSchedule(self.pipeline_schedule)
        if stated is PipelineSchedule.ONE_F_ONE_B and is_scalar(self.virtual_pipeline_stages) \
                and self.virtual_pipeline_stages > 1:
            return PipelineSchedule.INTERLEAVED
        return stated

    # ------------------------------------------------------------------ rules

    def check(self) -> "Layout":
        """Raise the first broken rule as a one-line error naming its field; return the layout."""
        for rule in self.rules:
            if not bool(rule.holds(self)):
                raise ContractError(rule.message(self), field=rule.field)
        return self

    def broken(self) -> list[Rule]:
        """Every rule a scalar layout breaks."""
        return [rule for rule in self.rules if not bool(rule.holds(self))]

    def mask(self, rows: int):
        """Where every rule holds: a numpy bool array over the ``rows`` of an array layout."""
        import numpy as np

        with np.errstate(divide="ignore", invalid="ignore"):
            valid = np.ones(rows, bool)
            for rule in self.rules:
                valid &= rule.holds(self)   # a rule on scalar fields holds or not for every row: broadcast
        return valid

    def split_text(self) -> str:
        """The layers of each stage, compactly: ``7, 8 × 14, 7`` (scalar layouts)."""
        split = self.stage_layer_split or ()
        runs: list[list[int]] = []
        for count in split:
            if runs and runs[-1][0] == count:
                runs[-1][1] += 1
            else:
                runs.append([count, 1])
        return ", ".join(f"{count} × {times}" if times > 1 else str(count) for count, times in runs)

    def replaced(self, **changes) -> "Layout":
        """The same layout with some fields replaced (numbers or arrays)."""
        return replace(self, **changes)




