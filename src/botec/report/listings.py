"""How `botec catalog` and `botec model` show the shipped catalogs and a model's parameters."""

from __future__ import annotations

import dataclasses
import json

from botec.report.tables import markdown_table, rich_table
from botec.units import format_number, format_quantity

__all__ = ["catalog_json", "catalog_markdown", "catalog_text", "model_list", "model_text", "model_json",
           "attention_kind"]

_HEADER = ["key", "name", "family", "BF16 TFLOP/s", "FP16 TFLOP/s", "FP8 TFLOP/s", "FP4 TFLOP/s", "INT8 TOP/s",
           "memory GB", "memory GB/s", "link GB/s", "host GB/s", "TDP W", "USD/h low-typical-high", "source"]
# Columns the text table leaves out of the accelerator table, at most 100 columns wide (the price table and
# `-f json` / `-f markdown` carry them).
_WIDE_ONLY = ("name", "family", "FP16 TFLOP/s", "FP4 TFLOP/s", "USD/h low-typical-high", "source")
# ... and those a console narrower than 90 characters leaves out too (80 columns keep the table whole).
_MEDIUM_ONLY = ("host GB/s",)


def _fmt(value, scale: float = 1.0) -> str:
    return "—" if value is None else format_number(value / scale)


def _price(price) -> str:
    """``2.69–3.99–12.29 (2026-11)``: a price range in USD per accelerator-hour with the month it was read."""
    if price is None:
        return "—"
    return f"{'–'.join(format_number(v) for v in (price.low, price.typical, price.high))} ({price.date})"


def _state_bytes_per_parameter(preset) -> float:
    """An optimizer preset's bytes per parameter before sharding, by the training graph's own formula."""
    from botec.formulas.weights import unsharded_state_bytes_per_parameter

    return unsharded_state_bytes_per_parameter(preset.weight_bytes_per_parameter, preset.gradient_bytes_per_parameter,
                                               preset.master_weight_bytes_per_parameter,
                                               preset.optimizer_state_bytes_per_parameter)


def catalog_json() -> str:
    from botec.catalog import accelerators, catalog_revised, node_presets, optimizer_presets

    return json.dumps({
        "revised": catalog_revised(),
        "accelerators": [dataclasses.asdict(d) for d in accelerators().values()],
        "optimizers": [dataclasses.asdict(p) | {"state_bytes_per_parameter": _state_bytes_per_parameter(p)}
                       for p in optimizer_presets().values()],
        "nodes": [dataclasses.asdict(n) for n in node_presets().values()],
        "engines": _engines_json(),
    }, indent=2, ensure_ascii=False)


# Serving-engine presets (strategy.engine): one row per figure, one column per engine.
_ENGINE_UNITS = {"ratio": "fraction", "bytes": "B", "seconds": "s", "count": "count", "rule": None, "reservation": None,
                 "budget": None, "flag": None}
_BASIS_MARK = {"documented": "d", "measured": "m", "assumed": "a"}
_ENGINE_TITLE = ("Serving engines (strategy.engine; value (low–high) and basis: d documented, m measured, "
                 "a assumed)")


def _engines_json() -> list[dict]:
    from botec.catalog.engines import DEFAULT_ENGINE, ENGINE_FIGURES, engine_presets

    return [{"key": p.key, "name": p.name, "default": p.key == DEFAULT_ENGINE,
             "figures": {name: dataclasses.asdict(f) | {"unit": _ENGINE_UNITS[ENGINE_FIGURES[name]]}
                         for name, f in p.figures.items()}}
            for p in engine_presets().values()]


def _engine_value(value, kind: str) -> str:
    if kind == "flag":
        return "yes" if value else "no"
    if kind in ("rule", "reservation", "budget"):
        return str(value).replace("_", " ")
    if kind in ("bytes", "seconds"):
        return format_quantity(value, "B" if kind == "bytes" else "s")
    return format_number(value)


def _engine_cell(figure, kind: str) -> str:
    """``9 µs (5 µs–15 µs) m``: the value, its range when it has one, and its basis."""
    text = _engine_value(figure.value, kind)
    if figure.has_range:
        text += f" ({_engine_value(figure.low, kind)}–{_engine_value(figure.high, kind)})"
    return f"{text} {_BASIS_MARK.get(figure.basis, figure.basis)}"


def _engine_rows() -> tuple[list[str], list[list[str]]]:
    from botec.catalog.engines import DEFAULT_ENGINE, ENGINE_FIGURES, engine_presets

    presets = list(engine_presets().values())
    header = ["figure"] + [p.key + (" (default)" if p.key == DEFAULT_ENGINE else "") for p in presets]
    return header, [[name] + [_engine_cell(p[name], kind) for p in presets] for name, kind in ENGINE_FIGURES.items()]


def _accelerator_rows() -> list[list[str]]:
    from botec.catalog import accelerators

    def peak(d, precision):
        return _fmt(d.peak_flops_per_s.get(precision), 1e12)

    return [[d.key, d.name, d.family, *(peak(d, p) for p in ("bf16", "fp16", "fp8", "fp4", "int8")),
             _fmt(d.memory_bytes, 1e9), _fmt(d.memory_bandwidth_bytes_per_s, 1e9),
             _fmt(d.link_bandwidth_bytes_per_s, 1e9), _fmt(d.host_link_bandwidth_bytes_per_s, 1e9), _fmt(d.tdp_watts),
             _price(d.price_per_hour),
             f"{d.source} ({d.date})"] for d in accelerators().values()]


def _nics(node) -> str:
    """``8 × 50``: scale-out NICs per node times GB/s per NIC per direction."""
    if node.nics_per_node is None or node.nic_bytes_per_s is None:
        return "—"
    return f"{node.nics_per_node} × {format_number(node.nic_bytes_per_s / 1e9)}"


_NODE_HEADER = ["node", "accelerator", "per node", "NVLink domain", "NICs × GB/s", "intra GB/s", "intra achieved",
                "intra α", "inter GB/s", "inter achieved", "inter α"]


def _node_rows() -> list[list[str]]:
    from botec.catalog import node_presets

    return [[n.key, n.accelerator, str(n.accelerators_per_node),
             "—" if n.nvlink_domain is None else str(n.nvlink_domain), _nics(n),
             _fmt(n.intra_node_bytes_per_s, 1e9), _fmt(n.intra_node_achieved_bytes_per_s, 1e9),
             format_quantity(n.intra_node_latency_seconds, "s"), _fmt(n.inter_node_bytes_per_s, 1e9),
             _fmt(n.inter_node_achieved_bytes_per_s, 1e9), format_quantity(n.inter_node_latency_seconds, "s")]
            for n in node_presets().values()]


def catalog_markdown() -> str:
    from botec.catalog import node_presets

    lines = markdown_table(_HEADER, _accelerator_rows())
    lines += ["", "Node presets (bandwidth per accelerator per direction, GB/s; achieved = a published measurement):",
              ""]
    lines += markdown_table(_NODE_HEADER + ["achieved sources"], [
        row + ["; ".join(f"{tier}: {s}" for tier, s in (("intra", n.intra_node_achieved_source),
                                                      ("inter", n.inter_node_achieved_source)) if s) or "—"]
        for row, n in zip(_node_rows(), node_presets().values())])
    from botec.catalog.engines import engine_presets

    header, rows = _engine_rows()
    lines += ["", _ENGINE_TITLE + ":", ""] + markdown_table(header, rows)
    lines += ["", "Serving-engine sources:", ""]
    lines += markdown_table(["engine", "figure", "basis", "source"], [
        [p.key, name, f.basis, f.source] for p in engine_presets().values() for name, f in p.figures.items()])
    return "\n".join(lines)


def catalog_text(console) -> None:
    """The catalogs as tables fitted to the console (at most 100 columns: the text form leaves out the names,
    families, FP16/FP4 peaks, prices and sources that `-f json` / `-f markdown` carry)."""
    from rich.text import Text

    from botec.catalog import accelerators, catalog_revised, optimizer_presets

    from botec.report.width import print_table, say

    medium = console.width >= 90   # the host-link column too
    shown = [c for c in _HEADER if c not in _WIDE_ONLY and (medium or c not in _MEDIUM_ONLY)]
    table = rich_table(f"Accelerators (dense peaks; decimal units; link (to other accelerators) and host (PCIe to the "
                       f"CPU) bandwidth per direction; catalog revised {catalog_revised()})")
    for column in shown:
        left = column in ("key", "name", "family", "source")
        label = column if left else column.replace(" ", "\n", 1)
        table.add_column(label, justify="left" if left else "right",
                         no_wrap=column not in ("name", "source"), overflow="fold")
    for row in _accelerator_rows():
        if row[3] == "—" and row[4] != "—":  # no BF16 (Volta): show the FP16 peak, marked
            row[3] = f"{row[4]} fp16"
        table.add_row(*(cell for column, cell in zip(_HEADER, row) if column in shown))
    print_table(console, table)
    say(console, Text("Sources and notes per figure (and the host links' PCIe bandwidths, in a console narrower than "
                      "90 columns): `botec catalog -f json` or `-f markdown`.", style="dim"))
    table = rich_table("Families and published prices (USD per accelerator-hour, on-demand list prices; the month "
                       "they were read)")
    for column in ("key", "family", "low", "typical", "high", "read"):
        table.add_column(column, justify="right" if column in ("low", "typical", "high") else "left",
                         no_wrap=True, overflow="fold")
    for d in accelerators().values():
        price = d.price_per_hour
        cells = [d.key, d.family] + (["—"] * 3 + ["no public price found"] if price is None else
                                     [format_number(price.low), format_number(price.typical),
                                      format_number(price.high), price.date])
        table.add_row(*cells)
    print_table(console, table)
    rows = _node_rows()
    table = rich_table("Node presets (supply.cluster.node)")
    for column in _NODE_HEADER[:5]:
        table.add_column(column.replace(" ", "\n", 1) if column in ("per node", "NVLink domain") else column,
                         no_wrap=True, justify="left" if column in ("node", "accelerator") else "right")
    for row in rows:
        table.add_row(*row[:5])
    print_table(console, table)
    table = rich_table("Node tiers (GB/s per accelerator per direction: nominal, and achieved where a measurement is "
                       "published; α per collective step)")
    table.add_column("node", no_wrap=True)
    for column in _NODE_HEADER[5:]:
        table.add_column(column.replace(" ", "\n", 1), no_wrap=True, justify="right")
    for row in rows:
        table.add_row(row[0], *row[5:])
    print_table(console, table)
    table = rich_table("Optimizer presets (bytes per parameter)")
    for column in ("preset", "weights", "gradients", "master", "moments", "total", "description"):
        table.add_column(column, overflow="fold", no_wrap=column == "preset")
    for p in optimizer_presets().values():
        table.add_row(p.key, *(f"{v:g}" for v in (p.weight_bytes_per_parameter, p.gradient_bytes_per_parameter,
                                                    p.master_weight_bytes_per_parameter,
                                                    p.optimizer_state_bytes_per_parameter,
                                                    _state_bytes_per_parameter(p))), p.description)
    print_table(console, table)
    header, rows = _engine_rows()
    table = rich_table(_ENGINE_TITLE)
    for column in header:
        table.add_column(column, overflow="fold", no_wrap=column == "figure")
    for row in rows:
        table.add_row(*row)
    print_table(console, table)


def model_list(format: str, console) -> str | None:
    """The model catalog: a JSON text, or a table printed on ``console``."""
    from botec.architecture import breakdown, model_catalog

    def billions(count):
        return f"{format_number(count / 1e9)}B"

    rows = [(key, a.name, billions(breakdown(a).total), billions(breakdown(a).active),
             billions(a.published_parameters) if a.published_parameters else "—")
            for key, a in model_catalog().items()]
    if format == "json":
        return json.dumps([dict(zip(("key", "name", "parameters", "active", "published"), r)) for r in rows], indent=2)
    table = rich_table("Model catalog (parameters counted from the architecture)")
    for column in ("key", "name", "parameters", "active per token", "published"):
        table.add_column(column, justify="left" if column in ("key", "name") else "right")
    for row in rows:
        table.add_row(*row)
    from botec.report.width import print_table

    print_table(console, table)
    return None


def attention_kind(arch) -> str:
    if arch.mla:
        return f"MLA, KV latent {arch.mla.kv_lora_rank}"
    if arch.kv_heads == arch.attention_heads:
        return "MHA"
    return "MQA" if arch.kv_heads == 1 else "GQA"


def _parts(arch, parts) -> list[tuple[str, int]]:
    return [
        ("embeddings (token + position)", parts.embeddings),
        ("LM head" + (" (tied to the embeddings)" if arch.tied_embeddings else ""), parts.lm_head),
        (f"attention ({arch.layers} layers" + (f" + {arch.decoder_layers} cross" if arch.decoder_layers else "")
         + f" × {parts.parts['attention_per_layer']:,})", parts.attention),
        (f"dense MLP ({parts.parts['dense_layers']} layers × {parts.parts['dense_mlp_per_layer']:,})", parts.mlp),
        ("routed experts" + (f" ({parts.parts['moe_layers']} layers × {arch.moe.experts} × "
                             f"{parts.parts['expert']:,})" if arch.moe else ""), parts.experts),
        ("shared experts", parts.shared_experts),
        ("routers", parts.routers),
        ("norms", parts.norms),
    ]


def model_json(arch, lora=None) -> str:
    """The model's parameters by part as JSON; ``lora`` (an :class:`botec.architecture.AdapterCount`) adds the
    trainable adapters."""
    from botec.architecture import as_dict, breakdown

    parts = breakdown(arch)
    data = {"architecture": as_dict(arch), "parameters": dict(_parts(arch, parts)), "total": parts.total,
            "active_per_token": parts.active, "matmul_active_per_token": parts.matmul_active,
            "multi_token_prediction": parts.mtp}
    if lora is not None:
        data["lora"] = {"rank": lora.rank, "target_modules": list(lora.modules),
                        "adapted_matrices": sum(m.count for m in lora.adapted), "trainable": lora.parameters,
                        "all": parts.total + lora.parameters,
                        "trainable_percent": 100 * lora.parameters / (parts.total + lora.parameters)}
    return json.dumps(data, indent=2, default=str)


def lora_text(arch, lora) -> str:
    """Trainable vs all parameters under LoRA, in PEFT's words (print_trainable_parameters) on a line of their own
    (it fits 100 columns whole)."""
    from botec.architecture import breakdown

    total = breakdown(arch).total + lora.parameters
    matrices = sum(m.count for m in lora.adapted)
    return (f"LoRA r = {lora.rank} on {', '.join(lora.modules)} ({matrices:,} matrices):\n  trainable params: "
            f"{lora.parameters:,} || all params: {total:,} || trainable%: {100 * lora.parameters / total:.4f}")


def model_text(arch, lora=None) -> list[str]:
    from botec.architecture import breakdown

    parts = breakdown(arch)
    head_dim = arch.qk_head_dim if not arch.mla else f"{arch.qk_head_dim} (q·k) / {arch.v_head_dim} (v)"
    stacks = f" ({arch.encoder_layers} encoder + {arch.decoder_layers} decoder)" if arch.decoder_layers else ""
    shape = (f"{arch.layers} layers{stacks}, hidden {arch.hidden_size:,}, "
             f"{arch.attention_heads} heads ({attention_kind(arch)}, "
             f"{arch.kv_heads} KV heads, head dim {head_dim}), FFN {arch.ffn_size:,} ({arch.mlp}), vocabulary "
             f"{arch.vocab_size:,}")
    if arch.moe:
        shape += (f"; MoE: {arch.moe.experts} experts of FFN {arch.moe.expert_ffn_size:,}, {arch.moe.experts_per_token}"
                  f" per token, {arch.moe.shared_experts} shared, in {arch.moe_layers} of {arch.layers} layers")
    lines = [f"{arch.name} ({arch.family})", shape] + ([f"source: {arch.source}"] if arch.source else [])
    listed = _parts(arch, parts)
    width = max(len(label) for label, _ in listed)
    lines += [f"  {label:<{width}}  {value:>18,}" for label, value in listed if value]
    lines.append(f"  {'total':<{width}}  {parts.total:>18,}  ({format_number(parts.total / 1e9)}B)")
    lines.append(f"  {'active per token':<{width}}  {parts.active:>18,}  ({format_number(parts.active / 1e9)}B)")
    if parts.mtp:
        lines.append(f"  {'multi-token prediction (not in total)':<{width}}  {parts.mtp:>18,}")
    if arch.published_parameters:
        lines.append(f"published: {format_number(arch.published_parameters / 1e9)}B")
    if lora is not None:
        lines.append(lora_text(arch, lora))
    return lines
