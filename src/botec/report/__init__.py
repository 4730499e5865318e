"""Reports of an estimate: terminal (rich), Markdown, JSON and HTML, all built from the same rows.

:func:`assumption_rows` and :func:`account_rows` decide *what* a report shows; the renderers
in ``terminal``, ``markdown``, ``json_report`` and ``html`` only decide *how*. Every report names
the botec version and the catalog's revision (:func:`provenance`) and the methods the estimate
used (:func:`methods`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from botec import __version__
from botec.graph import Quantity
from botec.layout import Recompute
from botec.units import format_number, format_quantity

if TYPE_CHECKING:   # a type only: report/ draws the Estimate it is handed (botec.estimation shows itself through it)
    from botec.estimation import Estimate

__all__ = ["ACCOUNT_TITLES", "LAYOUT_INPUTS", "AssumptionRow", "QuantityRow", "assumption_rows", "account_rows",
           "state_table_rows", "described", "methods", "headline", "layout_line", "provenance"]

ACCOUNT_TITLES = {
    "compute": "Compute",
    "memory": "Accelerator memory (per accelerator)",
    "network": "Network (per accelerator, per step)",
    "storage": "Storage",
    "serving": "Serving (one replica)",
    "capacity": "Capacity for the traffic",
    "cost": "Cost and energy",
}


class AssumptionRow(NamedTuple):   # named tuples: a table has some 300 rows, a frozen dataclass is 4x slower to make
    name: str
    value: str
    range: str
    provenance: str
    source: str  # the contract field and the source note


class QuantityRow(NamedTuple):
    name: str
    value: str
    meaning: str
    formula: str


_METHODS = {
    ("step_time", "efficiency"): "step time: N × peak × MFU × scaling efficiency (lesson 000)",
    ("step_time", "efficiency_hfu"): "step time: executed FLOPs (recomputation included) / (N × peak × HFU), the "
                                     "lesson's method at a stated hardware-FLOPs utilization",
    ("step_time", "components"): "step time: micro-batches on the busiest stage + optimizer + pipeline bubble + "
                                 "exposed communication (α–β, hierarchical collectives)",
    ("compute", "op_level"): "compute: op-level, every op of a layer on its roofline with the accelerator family's "
                             "efficiency curve",
    ("compute", "model_flops"): "compute: model FLOPs at a stated MFU (single_accelerator_mfu)",
    ("compute", "hardware_flops"): "compute: executed FLOPs, recomputation included, at a stated HFU "
                                   "(single_accelerator_hfu)",
    ("activations", "saved_tensor_factor"): "activations: layers × saved-tensor factor × one hidden state (lesson 000)",
    ("activations", "korthikanti"): "activations: Korthikanti et al. 2022 per-layer formulas",
}


_ORDER = ("step_time", "compute", "activations")


def provenance() -> str:
    """``botec 0.2.0; catalog revised 2026-11-30``: what produced the report."""
    from botec.catalog import catalog_revised

    return f"botec {__version__}; catalog revised {catalog_revised()}"


def described(contract) -> str:
    """The contract's description for a report's header; after ``--set`` overrides, marked as written before them
    and followed by them, since it may name figures they changed: ``... (as written; overridden: supply.count=512)``.
    Empty when there is neither."""
    description = contract.description or ""
    if not contract.overrides:
        return description
    changed = "overridden: " + ", ".join(contract.overrides)
    return f"{description} (as written; {changed})" if description else changed


def headline(result: Estimate) -> str:
    """What runs on what: the accelerator and how many, and the optimizer or the serving formats."""
    q, inputs = result.quantities, result.inputs
    if result.kind == "serving":
        replicas = int(q["replicas"].value)
        return (f"{inputs.accelerator_label}: {int(q['replica_accelerators'].value):,} per replica × "
                f"{replicas:,} replica{'' if replicas == 1 else 's'}; {inputs.formats_label}")
    return f"{inputs.accelerator_label} × {int(q['accelerators'].value):,}; {inputs.formats_label}"


def methods(result: Estimate) -> list[str]:
    """The methods and conventions the estimate used, in words, for the report's header."""
    contract = result.contract
    model = contract.workload.model
    if result.kind == "serving":
        strategy = contract.strategy
        load = ("load: users in a closed loop, X·(R(X) + Z) = N solved for the rate; at that rate by Little's law"
                if contract.workload.traffic.closed else "load by Little's law")
        lines = [f"serving: {strategy.engine} engine steps of in-flight batching (decode tokens + a prefill chunk) "
                 f"on the rooflines and the measured operator tables; {load}, each replica's prompt queue as "
                 f"G/G/1 behind a round-robin balancer; targets at "
                 f"P{contract.workload.latency.percentile}"]
        flops = f"FLOPs 2·N(active, matmul) per token + attention scores counted {contract.assumptions.attention_flops}"
        lines.append(f"model: {model.kind} {result.architecture.name}; {flops}")
        return lines
    choices = dict(result.choices)
    if choices.get("step_time") in ("efficiency", "efficiency_hfu"):
        choices.pop("compute", None)  # the lesson's method has no per-step compute model
    stack = result.inputs.stack
    lines = []
    for choice, option in sorted(choices.items(), key=lambda item: _ORDER.index(item[0])):
        line = _METHODS[(choice, option)]
        if choice == "step_time" and option != "components" and contract.assumptions.step_time == "components":
            line += ("; the default components model needs a network tier the contract does not state "
                     "(supply.network or supply.cluster)")
        if (choice, option) == ("activations", "korthikanti"):
            line += (", fused (flash) attention: no s × s scores kept" if stack.attention_kernel == "flash"
                     else ", eager attention: the s × s scores kept")
        if (choice, option) == ("compute", "op_level") and contract.assumptions.efficiency_set:
            line += f"; calibration {contract.assumptions.efficiency_set} (fitted to end-to-end runs, opt-in)"
        lines.append(line)
    attention = (f"{stack.training_attention} fused attention" if stack.attention_kernel == "flash"
                 else "eager attention")
    lines.append(f"stack: {stack.label}: {attention}, {stack.elementwise} elementwise ops, {stack.loss} loss")
    if model.kind == "count":
        lines.append("model: a bare parameter count; FLOPs 6·P per token, no attention term")
    else:
        lines.append(f"model: {model.kind} {result.architecture.name}; FLOPs 6·N(active, matmul) + attention "
                     f"scores counted {contract.assumptions.attention_flops}")
    if contract.strategy.precision == "fp16":
        lines.append("precision: FP16 with dynamic loss scaling (the FP16 tensor peak; no memory of its own)")
    return lines


def layout_line(result: Estimate) -> str:
    """TP × CP × PP × DP (EP), ZeRO, recomputation, nodes: the parallel layout in one line."""
    layout = result.inputs.layout
    if result.kind == "serving":
        return (f"replica: TP {_n(layout.tensor_parallel)} × PP {_n(layout.pipeline_parallel)}"
                f"{f' (EP {_n(layout.expert_parallel)})' if layout.expert_parallel > 1 else ''}; "
                f"{result.inputs.formats_label}")
    text = (f"layout: TP {_n(layout.tensor_parallel)}{' + SP' if layout.sequence_parallel else ''} × "
            f"CP {_n(layout.context_parallel)} × PP {_n(layout.pipeline_parallel)}")
    if layout.virtual_pipeline_stages > 1:
        text += f" (interleaved ×{_n(layout.virtual_pipeline_stages)})"
    elif layout.pipeline_schedule not in ("1f1b", "interleaved"):
        text += f" ({layout.pipeline_schedule})"
    split = layout.stage_layer_split
    if split and len(set(split)) > 1:
        text += f" (stages of {layout.split_text()} layers)"
    text += f" × DP {_n(layout.data_parallel)}"
    if layout.expert_parallel > 1:
        text += f" (EP {_n(layout.expert_parallel)} inside DP)"
    text += f"; ZeRO-{_n(layout.zero_stage)}"
    if layout.zero_stage:
        text += f" over {_n(layout.sharding_degree)} ranks"
    recompute = Recompute(int(layout.recompute))
    text += f"; {'no' if recompute is Recompute.NONE else recompute.label} recomputation"
    text += f"; {_n(layout.accumulation_steps)} micro-batches per step; {_n(layout.accelerators_per_node)} accelerators "
    return text + "per node"


def _n(value) -> str:
    return format_number(float(value))


def _range(quantity: Quantity, system: str) -> str:
    if quantity.low is None and quantity.high is None:
        return ""
    low = format_quantity(quantity.low, quantity.unit, system) if quantity.low is not None else "…"
    high = format_quantity(quantity.high, quantity.unit, system) if quantity.high is not None else "…"
    unit = _shared_unit(low, high)
    return f"{low[:-len(unit)]} – {high}" if unit else f"{low} – {high}"


def _shared_unit(low: str, high: str) -> str:
    """The unit words both ends of a range end with (" failures/accelerator-hour"), to write them once: the text
    from the first space followed by a letter (a number's "× 10⁻⁵" stays with it)."""
    import re

    ends = [re.search(r" (?=[^\W\d_]).*$", text) for text in (low, high)]
    if all(ends) and ends[0].group() == ends[1].group():
        return ends[0].group()
    return ""


# Inputs the layout line already says: a summary leaves them out (``details`` shows them).
LAYOUT_INPUTS = frozenset({
    "tensor_parallel", "pipeline_parallel", "virtual_pipeline_stages", "context_parallel", "expert_parallel",
    "sequence_parallel", "recompute", "zero_stage", "sharding_degree", "collective_algorithm_tree",
    "accelerators_per_node", "attention_flops_factor", "moe_layers", "experts_per_token", "qk_head_dim", "v_head_dim",
    "kv_heads", "attention_heads", "active_parameters", "matmul_parameters", "expert_parameters",
    "attention_flops_per_token", "data_parallel_degree", "replica_groups", "expert_tensor_parallel",
    "expert_data_parallel_degree", "pipeline_stage_layers", "pipeline_activation_layers", "kv_tensor_split",
    "pipeline_chunk_layers", "pipeline_schedule",
    *(f"{group}_link_{what}" for group in ("tp", "cp", "ep", "dp", "shard", "edp", "pp")
      for what in ("bytes_per_s", "latency_seconds"))})


def assumption_rows(result: Estimate, system: str = "decimal", details: bool = True) -> list[AssumptionRow]:
    """Every input of the estimate (stated, catalog or measured), in account order (``details=False``, the
    summary: without the inputs the layout line says and the shapes the model's name says)."""
    rows = []
    for quantity in result.quantities.values():
        if quantity.provenance == "derived" and quantity.definition.function is not None:
            continue
        if not details and (quantity.definition.name in LAYOUT_INPUTS or quantity.definition.detail):
            continue
        source = "; ".join(part for part in (quantity.field, quantity.source) if part)
        rows.append(AssumptionRow(quantity.definition.name, format_quantity(quantity.value, quantity.definition.unit,
                                                                            system),
                                  _range(quantity, system), quantity.provenance, source))
    return rows


def account_rows(result: Estimate, system: str = "decimal", details: bool = True) -> dict[str, list[QuantityRow]]:
    """The derived quantities of each account, in the order they are defined (``details=False``, the summary:
    without the intermediate steps, which `botec explain` still shows, and the zero-valued quantities, a
    collective this layout does not use or a bubble it does not have)."""
    accounts: dict[str, list[QuantityRow]] = {account: [] for account in ACCOUNT_TITLES}
    for quantity in result.quantities.values():
        definition = quantity.definition
        if quantity.provenance != "derived" or definition.account not in accounts or definition.function is None:
            continue
        if not details and (definition.detail or quantity.value == 0):
            continue
        accounts[definition.account].append(
            QuantityRow(definition.name, format_quantity(quantity.value, definition.unit, system), definition.meaning,
                        definition.expression or ""))
    return {account: rows for account, rows in accounts.items() if rows}


def state_table_rows(result: Estimate) -> list[tuple[str, str, str]]:
    """The lesson's bytes-per-parameter table: (state, bytes/parameter, kept in a checkpoint); empty for serving."""
    q = result.quantities
    if result.kind != "training":
        return []
    parts = [
        ("working weights", "weight_bytes_per_parameter", "yes"),
        ("gradients", "gradient_bytes_per_parameter", "no"),
        ("master weights", "master_weight_bytes_per_parameter", "yes"),
        ("optimizer moments", "optimizer_state_bytes_per_parameter", "yes"),
        ("total during training (before sharding)", "unsharded_state_bytes_per_parameter", ""),
        ("per accelerator after ZeRO sharding", "state_bytes_per_parameter", ""),
        ("in a checkpoint", "checkpoint_bytes_per_parameter", ""),
    ]
    rows = [(label, format_quantity(q[name].value, "1"), kept) for label, name, kept in parts]
    if "frozen_base" in q and q["frozen_base"].value:
        # LoRA: the rows above are per trainable (adapter) parameter; the frozen base keeps only its weights.
        adapters = [(f"{label} (adapters)", value, kept) for label, value, kept in rows[:4]]
        rows = adapters + [("total during training (per adapter parameter)", rows[4][1], "")]
        rows.append(("frozen base's linear weights (already on disk)",
                     format_quantity(q["quantized_weight_bytes_per_parameter"].value, "1"), "no"))
        rows.append(("per accelerator after ZeRO sharding (all parameters)",
                     format_quantity(q["state_bytes_per_parameter"].value, "1"), ""))
        rows.append(("in a checkpoint (per adapter parameter)",
                     format_quantity(q["checkpoint_bytes_per_parameter"].value, "1"), ""))
    return rows
