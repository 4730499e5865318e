"""A disaggregated replica's prefill instance at its own layout: the same formulas, fed the prefill layout.

Disaggregated serving may size its prefill and decode instances apart: DeepSeek-V3/R1's inference system prefills
on 4-node instances (routed experts EP 32, attention and shared expert data-parallel 32) and decodes on 18-node
ones (EP 144, DP 144) (deepseek-ai/open-infra-index, "Day 6 - One More Thing: DeepSeek-V3/R1 Inference System
Overview", 2025-02-28); SGLang's large-scale EP decodes at EP 72 on 9 nodes beside 3-4-node prefill instances
(LMSYS blog, 2025-05-05). A prefill instance's step costs then differ from the decode instance's: its GEMMs split
over its own TP, its experts over its own EP, its exchange over its own span of nodes.

One definition per formula: every formula that reads the layout (the degrees, the stage split, the KV split, the
links each group crosses, the token budget) is registered a second time, under the name ``prefill_instance_<name>``
(:func:`mirrored`), reading the prefill layout's inputs (``prefill_instance_tensor_parallel``, ...) in place of the
replica's, and 0 when no prefill layout is stated (``prefill_instance_layout`` = 0: the prefill instances take the
replica's layout, as :attr:`botec.serving.load.Replica.prefill_instance` = None). :func:`replica_of` builds the
replica model with its prefill instance from the quantities, for the estimate's formulas and for ``botec
simulate``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from botec.graph import Formulas
from botec.graph.engine import Condition, Definition
from botec.layout import GROUPS
from botec.serving import load as model
from botec.serving.step import STEP_INPUTS

__all__ = ["formulas", "mirrored", "replica_of", "replica_of_quantities", "mirror_name", "LAYOUT_INPUTS",
           "INSTANCE_FIELDS", "INSTANCE_READS", "FLAG", "PREFIX"]

PREFIX = "prefill_instance_"
FLAG = "prefill_instance_layout"

formulas = Formulas(account="serving")
formulas.input(FLAG, unit="1", detail=True,
               meaning="disaggregated: 1 when the prefill instances have a layout of their own "
                       "(strategy.disaggregation.prefill), else 0 (the replica's)")

# The inputs that follow from an instance's layout (botec.inputs.serving.derive gives them once per instance).
LAYOUT_INPUTS = ("tensor_parallel", "pipeline_parallel", "expert_parallel", "expert_tensor_parallel",
                 "pipeline_stage_layers", "first_stage_layers", "last_stage_layers", "kv_tensor_split",
                 "replicated_attention_parameters", "attention_tensor_parallel", "data_parallel_attention",
                 "shared_prefix_copies", "draft_kv_tensor_split", "redundant_experts", "max_batched_tokens",
                 "accelerators_per_node", "two_batch_overlap", "expert_parallel_nodes", "deepep_normal_kernels") + tuple(f"{group}_link_{what}" for group in GROUPS
                                                  for what in ("bytes_per_s", "latency_seconds"))

# What the prefill instance's step and its memory fit read: the fields of its Replica that follow from its layout,
# and the memory and placement figures its findings name.
INSTANCE_FIELDS = STEP_INPUTS + ("pipeline_parallel", "max_batched_tokens")
WANTED = INSTANCE_FIELDS + ("instance_accelerators", "instance_prompt_excess_seconds", "weight_memory_bytes",
                            "kv_budget_bytes", "kv_bytes_per_token_per_device",
                            "routed_experts_per_device", "expert_placement_imbalance")


def mirror_name(name: str) -> str:
    """``gemm_seconds_per_token`` -> ``prefill_instance_gemm_seconds_per_token`` (``instance_accelerators`` ->
    ``prefill_instance_accelerators``)."""
    return PREFIX + name.removeprefix("instance_")


INSTANCE_READS = (FLAG,) + tuple(mirror_name(name) for name in INSTANCE_FIELDS)
"""What a formula that runs the replica model reads beyond its Replica's fields: the prefill instance's own."""


@formulas.formula(unit="accelerators", meaning="accelerators of one instance (the replica's, or one decode instance)",
                  expression="tensor_parallel × pipeline_parallel", detail=True)
def instance_accelerators(tensor_parallel, pipeline_parallel):
    return tensor_parallel * pipeline_parallel


@formulas.formula(unit="B", meaning="disaggregated: KV-cache memory a prefill instance's accelerator has left beyond a "
                                    "full step of prompts (negative: its prompts' cache does not fit)",
                  expression="prefill_instance_kv_budget_bytes − prefill_instance_kv_bytes_per_token_per_device × "
                             "prefill_instance_max_batched_tokens", zero_when=f"{FLAG} == 0", detail=True)
def prefill_instance_kv_spare_bytes(prefill_instance_kv_budget_bytes, prefill_instance_kv_bytes_per_token_per_device,
                                    prefill_instance_max_batched_tokens):
    return (prefill_instance_kv_budget_bytes
            - prefill_instance_kv_bytes_per_token_per_device * prefill_instance_max_batched_tokens)


def mirrored(parts: list[Formulas]) -> Formulas:
    """The prefill instance's formulas: each definition of ``parts`` that :data:`WANTED` reads and that reads a
    layout input (directly or through another formula), renamed with :func:`mirror_name`, its layout-dependent
    inputs renamed alike, and 0 while ``prefill_instance_layout`` is 0. The functions are the same objects."""
    definitions: dict[str, list[Definition]] = {}
    for part in parts:
        for definition in part.definitions:
            definitions.setdefault(definition.name, []).append(definition)

    def reads(name: str) -> set[str]:
        return {i for d in definitions[name] for i in d.inputs + tuple(c.name for c in d.zero_when)}

    reached: set[str] = set()
    stack = list(WANTED)
    while stack:
        name = stack.pop()
        if name in reached or name not in definitions:
            continue
        reached.add(name)
        stack.extend(reads(name))
    moved = set(LAYOUT_INPUTS) & reached
    changed = True
    while changed:
        changed = False
        for name in reached - moved:
            if reads(name) & moved:
                moved.add(name)
                changed = True
    missing = [name for name in WANTED if name not in moved]
    if missing:
        raise ValueError(f"the prefill instance's {', '.join(missing)} read no layout input")
    pattern = re.compile(r"\b(" + "|".join(sorted(moved, key=len, reverse=True)) + r")\b")
    rename = (lambda text: pattern.sub(lambda m: mirror_name(m[1]), text) if text else text)
    out = Formulas(account="serving")
    for name, variants in definitions.items():
        if name not in moved:
            continue
        for d in variants:
            renamed = replace(
                d, name=mirror_name(d.name), meaning=f"prefill instance: {d.meaning}", detail=True,
                inputs=tuple(mirror_name(i) if i in moved else i for i in d.inputs), expression=rename(d.expression),
                symbols=tuple((symbol, rename(text)) for symbol, text in d.symbols))
            if d.function is not None:
                conditions = tuple(Condition(mirror_name(c.name) if c.name in moved else c.name, c.operator, c.value)
                                   for c in d.zero_when)
                renamed = replace(renamed, zero_when=(Condition(FLAG, "==", 0.0),) + conditions)
            out.definitions.append(renamed)
    return out


def replica_of(values: dict) -> model.Replica:
    """The replica model from a formula's values (or an estimate's quantities' values): its own step costs, and its
    prefill instance's when the prefill layout is its own (``prefill_instance_layout`` = 1)."""
    replica = model.Replica(**{name: values[name] for name in model.REPLICA_FIELDS})
    if values.get(FLAG, 0.0) > 0:
        own = {name: values[mirror_name(name)] for name in INSTANCE_FIELDS}
        replica.prefill_instance = replace(replica, **own)
    return replica


def replica_of_quantities(quantities: dict) -> model.Replica:
    """:func:`replica_of` from an estimate's quantities (``result.quantities``), as ``botec simulate`` reads them."""
    return replica_of({name: quantity.value for name, quantity in quantities.items()})
