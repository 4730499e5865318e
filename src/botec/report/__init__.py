"""Reports of an estimate: terminal (rich), Markdown and JSON, all built from the same rows.

:func:`assumption_rows` and :func:`account_rows` decide *what* a report shows; the renderers
in ``terminal``, ``markdown`` and ``json_report`` only decide *how*.
"""

from __future__ import annotations

from dataclasses import dataclass

from botec.estimate import Estimate
from botec.quantities import Quantity
from botec.units import format_quantity

__all__ = ["ACCOUNT_TITLES", "AssumptionRow", "QuantityRow", "assumption_rows", "account_rows",
           "state_table_rows", "methods", "headline"]

ACCOUNT_TITLES = {
    "compute": "Compute",
    "memory": "Accelerator memory (per accelerator)",
    "network": "Network (per accelerator, per step)",
    "storage": "Storage",
    "serving": "Serving (one replica)",
    "capacity": "Capacity for the traffic",
    "cost": "Cost and energy",
}


@dataclass(frozen=True)
class AssumptionRow:
    name: str
    value: str
    range: str
    provenance: str
    source: str  # the contract field and the source note


@dataclass(frozen=True)
class QuantityRow:
    name: str
    value: str
    meaning: str
    formula: str


_METHODS = {
    ("step_time", "efficiency"): "step time: N × peak × MFU × scaling efficiency (lesson 000)",
    ("step_time", "components"): "step time: compute + pipeline bubble + exposed communication (α–β collectives)",
    ("activations", "saved_tensor_factor"): "activations: layers × saved-tensor factor × one hidden state (lesson 000)",
    ("activations", "korthikanti"): "activations: Korthikanti et al. 2022 per-layer formulas",
}


def headline(result: Estimate) -> str:
    """What runs on what: the accelerator and how many, and the optimizer or the serving formats."""
    q = result.quantities
    if result.contract.workload.kind == "serving":
        return (f"{result.accelerator_name}: {int(q['replica_accelerators'].value):,} per replica × "
                f"{int(q['replicas'].value):,} replicas; {result.optimizer_name}")
    return f"{result.accelerator_name} × {int(q['accelerators'].value):,}; {result.optimizer_name}"


def methods(result: Estimate) -> list[str]:
    """The methods and conventions the estimate used, in words, for the report's header."""
    contract = result.contract
    lines = [_METHODS[(choice, option)] for choice, option in (result.choices or {}).items()]
    if contract.workload.kind == "serving":
        lines.append("serving: roofline prefill and decode (max of compute and memory time, plus TP all-reduces); "
                     "queueing approximated for the TTFT target")
    model = contract.workload.model
    if model.kind == "count":
        lines.append("model: a bare parameter count; FLOPs 6·P per token, no attention term")
    else:
        lines.append(f"model: {model.kind} {result.architecture.name}; FLOPs 6·N(active, matmul) + attention "
                     f"scores counted {contract.assumptions.attention_flops}")
    return lines


def _range(quantity: Quantity, system: str) -> str:
    if quantity.low is None and quantity.high is None:
        return ""
    low = format_quantity(quantity.low, quantity.unit, system) if quantity.low is not None else "…"
    high = format_quantity(quantity.high, quantity.unit, system) if quantity.high is not None else "…"
    return f"{low} – {high}"


def assumption_rows(result: Estimate, system: str = "decimal") -> list[AssumptionRow]:
    """Every input of the estimate (stated, catalog or measured), in account order."""
    rows = []
    for quantity in result.quantities.values():
        if quantity.provenance == "derived" and quantity.definition.function is not None:
            continue
        source = "; ".join(part for part in (quantity.field, quantity.source) if part)
        rows.append(AssumptionRow(quantity.name, quantity.formatted(system), _range(quantity, system),
                                  quantity.provenance, source))
    return rows


def account_rows(result: Estimate, system: str = "decimal", details: bool = True) -> dict[str, list[QuantityRow]]:
    """The derived quantities of each account, in the order they are defined (``details=False``: without
    the intermediate steps, which `botec explain` still shows)."""
    accounts: dict[str, list[QuantityRow]] = {account: [] for account in ACCOUNT_TITLES}
    for quantity in result.quantities.values():
        if quantity.provenance != "derived" or quantity.account not in accounts or quantity.definition.function is None:
            continue
        if quantity.definition.detail and not details:
            continue
        accounts[quantity.account].append(
            QuantityRow(quantity.name, quantity.formatted(system), quantity.definition.meaning,
                        quantity.definition.expression or ""))
    return {account: rows for account, rows in accounts.items() if rows}


def state_table_rows(result: Estimate) -> list[tuple[str, str, str]]:
    """The lesson's bytes-per-parameter table: (state, bytes/parameter, kept in a checkpoint); empty for serving."""
    q = result.quantities
    if "checkpoint_bytes_per_parameter" not in q:
        return []
    parts = [
        ("working weights", "weight_bytes_per_parameter", "yes"),
        ("gradients", "gradient_bytes_per_parameter", "no"),
        ("master weights", "master_weight_bytes_per_parameter", "yes"),
        ("optimizer moments", "optimizer_state_bytes_per_parameter", "yes"),
    ]
    rows = [(label, format_quantity(q[name].value, "1"), kept) for label, name, kept in parts]
    rows.append(("total during training (before sharding)",
                 format_quantity(sum(q[name].value for _, name, _ in parts), "1"), ""))
    rows.append(("per accelerator after ZeRO sharding", format_quantity(q["state_bytes_per_parameter"].value, "1"),
                 ""))
    rows.append(("in a checkpoint", format_quantity(q["checkpoint_bytes_per_parameter"].value, "1"), ""))
    return rows
