"""The parallel layout of a job: its degrees, schedule, sharding, recomputation and stage split,
validated once by one list of rules.

In the spirit of torchtitan's ``ParallelDims``: the degrees are held in one value object,
named as Megatron names them, and every derived size (the data-parallel degree, the ZeRO shard
group, the accelerators each group spans, the layers of each pipeline stage) is computed here
and nowhere else. Ranks are laid out as Megatron does: TP fastest, then CP, then DP (EP inside
DP), then PP.

One list of rules serves three uses, so they cannot drift apart:

- :meth:`Layout.check` raises the first broken rule as a one-line :class:`ContractError` naming
  the field (``botec estimate``);
- :meth:`Layout.mask` ANDs the same predicates over numpy arrays (``botec sweep``, the search);
- :func:`candidates` enumerates the values each degree can take for a model and an accelerator
  count (``botec search``), within the named :data:`SEARCH_BOUNDS`.

A layout's fields may be plain numbers (one estimate) or numpy arrays of equal length (a sweep):
the predicates and derived sizes use only operators and the elementwise helpers that work on both.

Pipeline stages need not be even. When ``p`` divides the layers each stage takes ``L/p``;
otherwise the default split (:func:`default_stage_layers`) counts the embedding and the LM head as
one layer each on the first and last stages and balances the rest, which reproduces published
layouts: Llama 3.1 405B's 126 layers on 16 stages (7, 8 × 14, 7; Llama 3 paper §3.3.2), BLOOM's 70
on 12 (5, 6 × 10, 5; Megatron-DeepSpeed's ``type:transformer|embedding`` partition). A contract may
list the layers of each stage instead (``strategy.pipeline_stage_layers``). The stage with the most
layers sets the step time and the training state per accelerator; under 1F1B the first stages keep
the most micro-batches in flight, so the activations peak at max over stages i of (p − i) · L_i.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from botec.errors import ContractError
from botec.graph.elementwise import floor, is_scalar, maximum, minimum, where

__all__ = ["GROUPS", "Recompute", "PipelineSchedule", "ModelFacts", "Layout", "Rule", "SEARCH_BOUNDS", "SearchBounds",
           "candidates", "default_stage_layers", "FSDP_ZERO_STAGE"]


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
    """1F1B (Narayanan et al. 2021) or its interleaved form with v model chunks per stage."""

    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


# The parallel groups whose collectives cross a network tier, and what each carries.
GROUPS = {
    "tp": "the tensor-parallel collectives",
    "cp": "the context-parallel exchanges",
    "ep": "the expert all-to-alls",
    "dp": "the data-parallel gradient all-reduces",
    "shard": "the ZeRO/FSDP shard group's collectives",
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


@dataclass(frozen=True)
class SearchBounds:
    """The values `botec search` tries where a degree is not bounded by the model and the count."""

    virtual_pipeline_stages: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    max_context_parallel: int = 16
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    max_serving_tensor_parallel: int = 8  # a serving replica's TP when no node size is stated: one 8-GPU node


SEARCH_BOUNDS = SearchBounds()


def _number(value: Any) -> str:
    """A scalar degree as text: ``8``, ``2.5``."""
    return f"{int(value):,}" if float(value) == int(value) else f"{float(value):g}"


def default_stage_layers(layers: int, stages: int) -> tuple[int, ...] | None:
    """Transformer layers per pipeline stage under the default split, or None when none exists.

    ``p`` dividing ``L``: ``L/p`` each. Otherwise the embedding and the LM head count as one layer
    each on the first and last stages: S = L + 2 slots are spread as evenly as possible (the extra
    slots going to the middle stages first), and the first and last stages give one slot back.
    """
    if stages < 1 or stages > layers:
        return None
    if layers % stages == 0:
        return (layers // stages,) * stages
    slots, extra = divmod(layers + 2, stages)
    if stages < 2 or slots < 2:
        return None
    counts = [slots] * stages
    order = list(range(1, stages - 1)) + [0, stages - 1]  # middle stages take the remainder first
    for index in order[:extra]:
        counts[index] += 1
    counts[0] -= 1
    counts[-1] -= 1
    return tuple(counts)


def _in_flight(stage_layers: tuple[int, ...]) -> int:
    """Layers' worth of activations at the 1F1B peak: max over stages i of (p − i) · L_i (i from 0)."""
    stages = len(stage_layers)
    return max((stages - index) * count for index, count in enumerate(stage_layers))


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
    rules: tuple[Rule, ...] = field(default=(), repr=False, compare=False)

    # ------------------------------------------------------------------ derived sizes

    @property
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

    @property
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
    def expert_tensor_parallel(self):
        """Ways each expert's matrices are split: TP in training (Megatron's default), TP / EP in serving."""
        if self.kind == "serving":
            return self.tensor_parallel / self.expert_parallel
        return self.tensor_parallel

    @property
    def expert_data_parallel(self):
        """Data-parallel replicas of each expert: DP / EP."""
        return self.data_parallel / self.expert_parallel

    def span(self, group: str):
        """Accelerators a group spans in Megatron's rank order (TP, CP, DP ⊃ EP, PP)."""
        t, c = self.tensor_parallel, self.context_parallel
        return {"tp": t, "cp": t * c, "ep": t * c * self.expert_parallel, "dp": t * c * self.data_parallel,
                "shard": t * c * self.sharding_degree, "pp": self.accelerators}[group]

    def degree(self, group: str):
        """Ranks that take part in one collective of a group."""
        return {"tp": self.tensor_parallel, "cp": self.context_parallel, "ep": self.expert_parallel,
                "dp": self.data_parallel, "shard": self.sharding_degree, "pp": self.pipeline_parallel}[group]

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
    def pipeline_activation_layers(self):
        """Layers' worth of activations the busiest stage holds at the 1F1B peak: max_i (p − i) · L_i."""
        return self._per_stage_count(_in_flight)

    @property
    def stages_divisible_by_chunks(self):
        """Whether every stage's layers split into the v model chunks of the interleaved schedule."""
        chunks = self.virtual_pipeline_stages
        if is_scalar(self.pipeline_parallel, chunks):
            split = self.stage_layer_split if float(self.pipeline_parallel) == int(self.pipeline_parallel) else None
            return bool(split) and all(count % chunks == 0 for count in split)
        import numpy as np

        stages, chunks = np.broadcast_arrays(np.asarray(self.pipeline_parallel, float), np.asarray(chunks, float))
        out = np.zeros(stages.shape, bool)
        for pair in {(float(s), float(v)) for s, v in zip(stages.ravel(), chunks.ravel())}:
            split = self._stage_split(int(pair[0])) if pair[0] == int(pair[0]) else None
            if split and pair[1] >= 1:
                out[(stages == pair[0]) & (chunks == pair[1])] = all(count % pair[1] == 0 for count in split)
        return out

    @property
    def schedule(self) -> PipelineSchedule:
        """1F1B, or interleaved when each stage holds more than one model chunk (scalar layouts)."""
        return PipelineSchedule.INTERLEAVED if self.virtual_pipeline_stages > 1 else PipelineSchedule.ONE_F_ONE_B

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
                valid &= np.broadcast_to(np.asarray(rule.holds(self), bool), (rows,))
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

    @classmethod
    def of(cls, kind: str, model: ModelFacts, **fields) -> "Layout":
        """A layout with the rules of its kind."""
        return cls(kind=kind, model=model, rules=TRAINING_RULES if kind == "training" else SERVING_RULES, **fields)


# ---------------------------------------------------------------------------------------------- rules


def _divides(divisor, number):
    return number % divisor == 0


def _whole(value):
    return value == floor(value)


def _model_parallel(layout: Layout):
    return layout.tensor_parallel * layout.pipeline_parallel * layout.context_parallel


def _positive_whole(field: str, name: str) -> Rule:
    return Rule(field, lambda l: _whole(getattr(l, name)) & (getattr(l, name) >= 1),
                lambda l: f"{name} must be a whole number of at least 1, got {_number(getattr(l, name))}")


def _degrees_rules(names: tuple[str, ...]) -> list[Rule]:
    fields = {"accelerators": "supply.count"}
    return [_positive_whole(fields.get(name, f"strategy.{name}"), name) for name in names]


def _needs_shape(name: str) -> Rule:
    return Rule(f"strategy.{name}", lambda l: l.model.has_shape | (getattr(l, name) == 1),
                lambda l: f"{name} needs the model's attention heads and experts: give the model as a catalog name, "
                          "a config.json or an architecture")


def _stage_rules() -> list[Rule]:
    return [
        Rule("strategy.pipeline_parallel", lambda l: l.pipeline_parallel <= l.model.layers,
             lambda l: f"{_number(l.pipeline_parallel)} stages for {l.model.layers} layers: every stage needs a layer"),
        Rule("strategy.pipeline_stage_layers",
             lambda l: (l.stage_layers is None) | (l.pipeline_parallel == len(l.stage_layers or ())),
             lambda l: f"lists {len(l.stage_layers)} stages, but pipeline_parallel is {_number(l.pipeline_parallel)}"),
        Rule("strategy.pipeline_stage_layers",
             lambda l: (l.stage_layers is None) or sum(l.stage_layers) == l.model.layers,
             lambda l: f"the stages hold {sum(l.stage_layers)} layers, but {l.model.name} has {l.model.layers}"),
        Rule("strategy.pipeline_parallel", lambda l: l.pipeline_stage_layers == l.pipeline_stage_layers,  # not NaN
             lambda l: f"{_number(l.pipeline_parallel)} stages cannot split the {l.model.layers} layers (the default "
                       "split gives the first and last stages one layer fewer and needs at least one there); list "
                       "them in strategy.pipeline_stage_layers"),
        Rule("strategy.virtual_pipeline_stages", lambda l: (l.virtual_pipeline_stages == 1) | (l.pipeline_parallel > 1),
             lambda l: "the interleaved schedule splits each pipeline stage into chunks: it needs pipeline_parallel > 1"),
        Rule("strategy.virtual_pipeline_stages", lambda l: l.stages_divisible_by_chunks,
             lambda l: f"{_number(l.virtual_pipeline_stages)} chunks per stage do not divide the stages' layers "
                       f"({', '.join(str(c) for c in l.stage_layer_split or ())})"),
    ]


def _tensor_rules() -> list[Rule]:
    return [
        Rule("strategy.tensor_parallel",
             lambda l: (not l.model.has_shape) or _divides(l.tensor_parallel, l.model.attention_heads),
             lambda l: f"tensor_parallel {_number(l.tensor_parallel)} does not divide the {l.model.attention_heads} "
                       "attention heads"),
        Rule("strategy.tensor_parallel",
             lambda l: (not l.model.has_shape) or (_divides(l.tensor_parallel, l.model.kv_heads)
                                                   | _divides(l.model.kv_heads, l.tensor_parallel)),
             lambda l: f"tensor_parallel {_number(l.tensor_parallel)} neither divides nor is a multiple of the "
                       f"{l.model.kv_heads} KV heads"),
    ]


def _expert_rules(within: str) -> list[Rule]:
    def fits(l: Layout):
        if l.model.experts is None:
            return l.expert_parallel == 1
        base = (l.expert_parallel <= l.model.experts) & _divides(l.expert_parallel, l.model.experts)
        if within == "data":
            return base & _whole(l.data_parallel / l.expert_parallel)
        return base & _divides(l.expert_parallel, l.tensor_parallel)

    def message(l: Layout) -> str:
        if l.model.experts is None:
            return "expert parallelism needs a mixture-of-experts model"
        if within == "data":
            return (f"expert_parallel {_number(l.expert_parallel)} must divide the {l.model.experts} experts and the "
                    f"{_number(l.data_parallel)} data-parallel ranks it is carved out of")
        return (f"expert_parallel {_number(l.expert_parallel)} must divide the {l.model.experts} experts and the "
                f"replica's tensor_parallel {_number(l.tensor_parallel)} (experts are split over the TP ranks)")

    return [Rule("strategy.expert_parallel", fits, message)]


def _training_rules() -> tuple[Rule, ...]:
    rules = [
        *_degrees_rules(("accelerators", "tensor_parallel", "pipeline_parallel", "virtual_pipeline_stages",
                         "context_parallel", "expert_parallel", "micro_batch_size")),
        Rule("supply.count", lambda l: _divides(_model_parallel(l), l.accelerators),
             lambda l: f"tensor_parallel × pipeline_parallel × context_parallel = {_number(l.tensor_parallel)} × "
                       f"{_number(l.pipeline_parallel)} × {_number(l.context_parallel)} = "
                       f"{_number(_model_parallel(l))} does not divide the {_number(l.accelerators)} accelerators"),
        Rule("strategy.data_parallel", lambda l: (l.data_parallel_stated is None) | (l.data_parallel_stated
                                                                                   == l.data_parallel),
             lambda l: f"{_number(l.accelerators)} accelerators / (TP {_number(l.tensor_parallel)} × PP "
                       f"{_number(l.pipeline_parallel)} × CP {_number(l.context_parallel)}) give DP "
                       f"{_number(l.data_parallel)}, not {_number(l.data_parallel_stated)}"),
        _needs_shape("tensor_parallel"), _needs_shape("context_parallel"), _needs_shape("expert_parallel"),
        *_stage_rules(),
        Rule("strategy.context_parallel", lambda l: _divides(l.context_parallel, l.model.sequence_length),
             lambda l: f"context_parallel {_number(l.context_parallel)} does not divide the sequence length "
                       f"{l.model.sequence_length:,}"),
        Rule("strategy.sequence_parallel",
             lambda l: (l.sequence_parallel == 0) | ((l.tensor_parallel > 1)
                                                     & _divides(l.tensor_parallel,
                                                                l.model.sequence_length / l.context_parallel)),
             lambda l: "sequence parallelism splits each sequence over the TP ranks: it needs tensor_parallel > 1 "
                       f"dividing the {l.model.sequence_length / l.context_parallel:,.0f} tokens each CP rank holds"),
        *_tensor_rules(),
        *_expert_rules(within="data"),
        Rule("strategy.global_batch_size",
             lambda l: (l.global_batch_size is None) | _whole(l.accumulation_steps) & (l.accumulation_steps >= 1),
             lambda l: f"micro-batch {_number(l.micro_batch_size)} × DP {_number(l.data_parallel)} = "
                       f"{_number(l.micro_batch_size * l.data_parallel)} sequences does not divide the global batch of "
                       f"{_number(l.global_batch_size)}"),
        Rule("strategy.gradient_accumulation_steps",
             lambda l: (l.global_batch_size is None) | (l.gradient_accumulation_steps is None)
             | (l.gradient_accumulation_steps == l.accumulation_steps),
             lambda l: f"global batch {_number(l.global_batch_size)} = micro-batch {_number(l.micro_batch_size)} × DP "
                       f"{_number(l.data_parallel)} × accumulation {_number(l.accumulation_steps)}, not "
                       f"{_number(l.gradient_accumulation_steps)}"),
        Rule("strategy.sharding_group", lambda l: _whole(l.replica_groups) & (l.replica_groups >= 1),
             lambda l: f"sharding_group {_number(l.sharding_degree)} does not divide the {_number(l.data_parallel)} "
                       "data-parallel ranks"),
        Rule("strategy.sharding_group",
             lambda l: (l.zero_stage == 0) | (l.expert_parallel == 1) | _divides(l.expert_parallel, l.sharding_degree),
             lambda l: f"expert_parallel {_number(l.expert_parallel)} must divide the ZeRO sharding group of "
                       f"{_number(l.sharding_degree)}"),
    ]
    return tuple(rules)


def _serving_rules() -> tuple[Rule, ...]:
    return tuple([*_degrees_rules(("tensor_parallel", "pipeline_parallel", "expert_parallel")), *_stage_rules(),
                  *_tensor_rules(), *_expert_rules(within="tensor")])


TRAINING_RULES = _training_rules()
SERVING_RULES = _serving_rules()


# ---------------------------------------------------------------------------------------------- search


def _divisors(number: int, limit: int | None = None) -> list[int]:
    top = number if limit is None else min(number, limit)
    return [d for d in range(1, top + 1) if number % d == 0]


def candidates(model: ModelFacts, accelerators: int, bounds: SearchBounds = SEARCH_BOUNDS) -> dict[str, list]:
    """Every value each training layout field can take for ``model`` on ``accelerators``, within ``bounds``.

    Complete with respect to the rules: a layout within the bounds that :meth:`Layout.check`
    accepts has each of its values here (TP divides the heads and N; PP divides N and is at most
    the layers; CP divides N and the sequence; EP divides the experts and N).
    """
    if not model.has_shape:
        raise ContractError("the layout search needs the model's shape (heads, layers): give a catalog name, a "
                            "config.json or an architecture", field="workload.model")
    sequence = model.sequence_length or 1
    return {
        "strategy.tensor_parallel": _divisors(math.gcd(model.attention_heads, accelerators)),
        "strategy.pipeline_parallel": _divisors(accelerators, model.layers),
        "strategy.virtual_pipeline_stages": list(bounds.virtual_pipeline_stages),
        "strategy.context_parallel": _divisors(math.gcd(accelerators, sequence), bounds.max_context_parallel),
        "strategy.expert_parallel": _divisors(math.gcd(model.experts, accelerators)) if model.experts else [1],
        "strategy.zero_stage": [0, 1, 2, 3],
        "strategy.micro_batch_size": list(bounds.micro_batch_sizes),
        "strategy.recompute": [r.value for r in Recompute],
        "strategy.sequence_parallel": [0, 1],
    }
