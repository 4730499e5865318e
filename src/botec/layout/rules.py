"""The layout rules, written once: each a predicate on a :class:`~botec.layout.Layout` (numbers or
arrays), the contract field it is about, and what to say when it breaks. ``Layout.check`` raises
the first that breaks, ``Layout.mask`` ANDs them over a sweep's rows, and :func:`candidates`
enumerates the values the search tries, complete with respect to them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from botec.graph.elementwise import floor
from botec.layout.dims import Layout, ModelFacts, Recompute, Rule, number_text

__all__ = ["TRAINING_RULES", "SERVING_RULES", "SearchBounds", "SEARCH_BOUNDS", "candidates", "layout_of"]


def _divides(divisor, number):
    return number % divisor == 0


def _whole(value):
    return value == floor(value)


def _model_parallel(layout: Layout):
    return layout.tensor_parallel * layout.pipeline_parallel * layout.context_parallel


def _positive_whole(field: str, name: str) -> Rule:
    return Rule(field, lambda l: _whole(getattr(l, name)) & (getattr(l, name) >= 1),
                lambda l: f"{name} must be a whole number of at least 1, got {number_text(getattr(l, name))}")


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
             lambda l: f"{number_text(l.pipeline_parallel)} stages for {l.model.layers} layers: every stage needs a layer"),
        Rule("strategy.pipeline_stage_layers",
             lambda l: (l.stage_layers is None) | (l.pipeline_parallel == len(l.stage_layers or ())),
             lambda l: f"lists {len(l.stage_layers)} stages, but pipeline_parallel is {number_text(l.pipeline_parallel)}"),
        Rule("strategy.pipeline_stage_layers",
             lambda l: (l.stage_layers is None) or sum(l.stage_layers) == l.model.layers,
             lambda l: f"the stages hold {sum(l.stage_layers)} layers, but {l.model.name} has {l.model.layers}"),
        Rule("strategy.pipeline_parallel", lambda l: l.pipeline_stage_layers == l.pipeline_stage_layers,  # not NaN
             lambda l: f"{number_text(l.pipeline_parallel)} stages cannot split the {l.model.layers} layers (the default "
                       "split gives the first and last stages one layer fewer and needs at least one there); list "
                       "them in strategy.pipeline_stage_layers"),
        Rule("strategy.virtual_pipeline_stages", lambda l: (l.virtual_pipeline_stages == 1) | (l.pipeline_parallel > 1),
             lambda l: "the interleaved schedule splits each pipeline stage into chunks: it needs pipeline_parallel > 1"),
        Rule("strategy.virtual_pipeline_stages", lambda l: l.virtual_pipeline_stages <= l.pipeline_stage_slots,
             lambda l: f"{number_text(l.virtual_pipeline_stages)} chunks per stage leave a chunk with nothing to run: "
                       f"the stages hold {', '.join(str(c) for c in l.stage_layer_split or ())} layers (the first "
                       "and last also the embedding and the LM head, one chunk's worth each)"),
        *_schedule_rules(),
    ]


def _is(schedule: str):
    """Whether a layout's stated schedule is ``schedule`` (one string for every row of a sweep)."""
    return lambda l: l.pipeline_schedule == schedule


def _schedule_rules() -> list[Rule]:
    """What the zero-bubble and DualPipe schedules need (the interleaved schedule's v is checked above)."""
    zero_bubble = lambda l: l.pipeline_schedule in ("zb-h1", "zb-h2")  # noqa: E731
    dualpipe = _is("dualpipe")
    return [
        Rule("strategy.pipeline_schedule",
             lambda l: (not (zero_bubble(l) or dualpipe(l))) or ((l.pipeline_parallel > 1)
                                                                & (l.virtual_pipeline_stages == 1)),
             lambda l: f"{l.pipeline_schedule} schedules the stages of a pipeline, one model chunk each: it needs "
                       f"pipeline_parallel > 1 (got {number_text(l.pipeline_parallel)}) and virtual_pipeline_stages "
                       f"1 (got {number_text(l.virtual_pipeline_stages)})"),
        # DeepSeek-V3 §3.2.1: "DualPipe only requires that the pipeline stages and micro-batches be divisible by 2";
        # its reference implementation (deepseek-ai/DualPipe, DualPipe.step) also asserts micro-batches ≥ 2 × PP.
        Rule("strategy.pipeline_schedule", lambda l: (not dualpipe(l)) or _divides(2, l.pipeline_parallel),
             lambda l: f"dualpipe feeds the pipeline from both ends: it needs an even pipeline_parallel, got "
                       f"{number_text(l.pipeline_parallel)}"),
        Rule("strategy.gradient_accumulation_steps",
             lambda l: (not dualpipe(l)) or (_divides(2, l.accumulation_steps)
                                             & (l.accumulation_steps >= 2 * l.pipeline_parallel)),
             lambda l: f"dualpipe splits the micro-batches between its two directions: it needs an even number of "
                       f"them, at least 2 × pipeline_parallel = {number_text(2 * l.pipeline_parallel)}, got "
                       f"{number_text(l.accumulation_steps)}"),
    ]


def _split_name(l: Layout) -> str:
    """The degree that splits the heads: TP, or the attention groups' under data-parallel attention."""
    return "tensor_parallel" if l.attention_tensor_parallel is None else "attention_tensor_parallel"


def _tensor_rules() -> list[Rule]:
    return [
        Rule("strategy.tensor_parallel",
             lambda l: (not l.model.has_shape) or _divides(l.attention_split, l.model.attention_heads),
             lambda l: f"{_split_name(l)} {number_text(l.attention_split)} does not divide the "
                       f"{l.model.attention_heads} attention heads"),
        Rule("strategy.tensor_parallel",
             lambda l: (not l.model.has_shape) or (_divides(l.attention_split, l.model.kv_heads)
                                                   | _divides(l.model.kv_heads, l.attention_split)),
             lambda l: f"{_split_name(l)} {number_text(l.attention_split)} neither divides nor is a multiple of the "
                       f"{l.model.kv_heads} KV heads"),
    ]


def _expert_rules(within: str) -> list[Rule]:
    def fits(l: Layout):
        if l.model.experts is None:
            return l.expert_parallel == 1
        if within == "data":
            base = (l.expert_parallel <= l.model.experts) & _divides(l.expert_parallel, l.model.experts)
            return base & _whole(l.data_parallel / l.expert_parallel)
        # serving: every EP rank holds at least one routed expert (or copy: EPLB's redundant experts let EP pass E);
        # an EP not dividing E + N places them unevenly (the busiest rank holds ⌈(E + N)/EP⌉)
        return (l.expert_parallel <= l.model.experts + l.redundant_experts) & _divides(l.expert_parallel,
                                                                                       l.tensor_parallel)

    def message(l: Layout) -> str:
        if l.model.experts is None:
            return "expert parallelism needs a mixture-of-experts model"
        if within == "data":
            return (f"expert_parallel {number_text(l.expert_parallel)} must divide the {l.model.experts} experts and the "
                    f"{number_text(l.data_parallel)} data-parallel ranks it is carved out of")
        if not bool(_divides(l.expert_parallel, l.tensor_parallel)):
            return (f"expert_parallel {number_text(l.expert_parallel)} must divide the replica's tensor_parallel "
                    f"{number_text(l.tensor_parallel)} (experts are split over the TP ranks)")
        return (f"expert_parallel {number_text(l.expert_parallel)} exceeds the {l.model.experts} experts + "
                f"{number_text(l.redundant_experts)} redundant: a rank would hold no expert (state "
                "strategy.redundant_experts, DeepSeek's EPLB)")

    return [Rule("strategy.expert_parallel", fits, message)]


def _training_rules() -> tuple[Rule, ...]:
    rules = [
        *_degrees_rules(("accelerators", "tensor_parallel", "pipeline_parallel", "virtual_pipeline_stages",
                         "context_parallel", "expert_parallel", "micro_batch_size")),
        Rule("supply.count", lambda l: _divides(_model_parallel(l), l.accelerators),
             lambda l: f"tensor_parallel × pipeline_parallel × context_parallel = {number_text(l.tensor_parallel)} × "
                       f"{number_text(l.pipeline_parallel)} × {number_text(l.context_parallel)} = "
                       f"{number_text(_model_parallel(l))} does not divide the {number_text(l.accelerators)} accelerators"),
        Rule("strategy.data_parallel", lambda l: (l.data_parallel_stated is None) | (l.data_parallel_stated
                                                                                   == l.data_parallel),
             lambda l: f"{number_text(l.accelerators)} accelerators / (TP {number_text(l.tensor_parallel)} × PP "
                       f"{number_text(l.pipeline_parallel)} × CP {number_text(l.context_parallel)}) give DP "
                       f"{number_text(l.data_parallel)}, not {number_text(l.data_parallel_stated)}"),
        _needs_shape("tensor_parallel"), _needs_shape("context_parallel"), _needs_shape("expert_parallel"),
        *_stage_rules(),
        Rule("strategy.context_parallel", lambda l: _divides(l.context_parallel, l.model.sequence_length),
             lambda l: f"context_parallel {number_text(l.context_parallel)} does not divide the sequence length "
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
             lambda l: f"micro-batch {number_text(l.micro_batch_size)} × DP {number_text(l.data_parallel)} = "
                       f"{number_text(l.micro_batch_size * l.data_parallel)} sequences does not divide the global batch of "
                       f"{number_text(l.global_batch_size)}"),
        Rule("strategy.gradient_accumulation_steps",
             lambda l: (l.global_batch_size is None) | (l.gradient_accumulation_steps is None)
             | (l.gradient_accumulation_steps == l.accumulation_steps),
             lambda l: f"global batch {number_text(l.global_batch_size)} = micro-batch {number_text(l.micro_batch_size)} × DP "
                       f"{number_text(l.data_parallel)} × accumulation {number_text(l.accumulation_steps)}, not "
                       f"{number_text(l.gradient_accumulation_steps)}"),
        Rule("strategy.sharding_group", lambda l: _whole(l.replica_groups) & (l.replica_groups >= 1),
             lambda l: f"sharding_group {number_text(l.sharding_degree)} does not divide the {number_text(l.data_parallel)} "
                       "data-parallel ranks"),
        Rule("strategy.sharding_group",
             lambda l: (l.zero_stage == 0) | (l.expert_parallel == 1) | _divides(l.expert_parallel, l.sharding_degree),
             lambda l: f"expert_parallel {number_text(l.expert_parallel)} must divide the ZeRO sharding group of "
                       f"{number_text(l.sharding_degree)}"),
    ]
    return tuple(rules)


def _serving_rules() -> tuple[Rule, ...]:
    return tuple([*_degrees_rules(("tensor_parallel", "pipeline_parallel", "expert_parallel")), *_stage_rules(),
                  *_tensor_rules(), *_expert_rules(within="tensor")])


TRAINING_RULES = _training_rules()
SERVING_RULES = _serving_rules()


def layout_of(kind: str, model: ModelFacts, **fields) -> Layout:
    """A layout of ``kind`` (training: a job; serving: one replica) with that kind's rules."""
    return Layout(kind=kind, model=model, rules=TRAINING_RULES if kind == "training" else SERVING_RULES, **fields)


@dataclass(frozen=True)
class SearchBounds:
    """The values `botec search` tries where a degree is not bounded by the model and the count."""

    virtual_pipeline_stages: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)
    max_context_parallel: int = 16
    micro_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    max_serving_tensor_parallel: int = 8  # a serving replica's TP when no node size is stated: one 8-GPU node


SEARCH_BOUNDS = SearchBounds()


def _divisors(number: int, limit: int | None = None) -> list[int]:
    top = number if limit is None else min(number, limit)
    return [d for d in range(1, top + 1) if number % d == 0]


def candidates(model: ModelFacts, accelerators: int, bounds: SearchBounds = SEARCH_BOUNDS) -> dict[str, list]:
    """Every value each training layout field can take for ``model`` on ``accelerators``, within ``bounds``.

    Complete with respect to the rules: a layout within the bounds that :meth:`Layout.check`
    accepts has each of its values here (TP divides the heads and N; PP divides N and is at most
    the layers; CP divides N and the sequence; EP divides the experts and N). A bare parameter
    count has no heads to split: only PP, ZeRO, the micro-batch and recomputation vary.
    """
    sequence = model.sequence_length or 1
    shaped = model.has_shape  # a bare parameter count has no heads to split: data and pipeline parallelism only
    return {
        "strategy.tensor_parallel": _divisors(math.gcd(model.attention_heads, accelerators)) if shaped else [1],
        "strategy.pipeline_parallel": _divisors(accelerators, model.layers),
        "strategy.virtual_pipeline_stages": list(bounds.virtual_pipeline_stages),
        "strategy.context_parallel": _divisors(math.gcd(accelerators, sequence), bounds.max_context_parallel)
        if shaped else [1],
        "strategy.expert_parallel": _divisors(math.gcd(model.experts, accelerators)) if model.experts else [1],
        "strategy.zero_stage": [0, 1, 2, 3],
        "strategy.micro_batch_size": list(bounds.micro_batch_sizes),
        "strategy.recompute": [r.value for r in Recompute],
        "strategy.sequence_parallel": [0, 1] if shaped else [0],
    }
