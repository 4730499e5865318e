"""The shipped model catalog (``catalog/models.yaml``), a shape inferred from a bare parameter count, and an
architecture as plain data."""

from __future__ import annotations

from dataclasses import asdict, replace

from botec.architecture.shape import MLA, Architecture, MoE, breakdown
from botec.catalog.root import catalog_cache, catalog_root

__all__ = ["model_catalog", "infer_from_count", "as_dict"]


@catalog_cache
def model_catalog() -> dict[str, Architecture]:
    """Well-known models from ``catalog/models.yaml``, keyed by the name a contract uses."""
    from botec.yamlfile import load_yaml_text
    from botec.units import parse_quantity

    data = load_yaml_text(catalog_root().joinpath("models.yaml").read_text(encoding="utf-8"))
    catalog = {}
    for key, entry in data["models"].items():
        entry = dict(entry)
        moe = MoE(**entry.pop("moe")) if entry.get("moe") else None
        mla = MLA(**entry.pop("mla")) if entry.get("mla") else None
        entry.pop("moe", None), entry.pop("mla", None)
        published = entry.pop("published_parameters", None)
        source = f"{entry.pop('source')} ({entry.pop('date')})"
        catalog[key] = Architecture(
            moe=moe, mla=mla, source=source,
            published_parameters=None if published is None else parse_quantity(published, "count"),
            **entry)
    return catalog


def infer_from_count(parameters: float, layers: int, hidden_size: int) -> Architecture:
    """A GPT-style shape for a bare parameter count (for measuring it): heads of width 128, a plain
    4h MLP, untied embeddings, and the vocabulary that makes the count come out right. A guess,
    stated as such wherever it is used.

    The count is linear in the vocabulary (an embedding row and an LM-head row per token), so the
    vocabulary follows from :func:`breakdown` at two sizes: V = (P − count(V=0)) / (count(V=1) − count(V=0)).
    """
    heads = max(1, hidden_size // 128)
    shape = Architecture(name=f"a {parameters / 1e9:.3g}B GPT-style shape inferred from the parameter count",
                         family="inferred", layers=layers, hidden_size=hidden_size, attention_heads=heads,
                         kv_heads=heads, ffn_size=4 * hidden_size, vocab_size=0, mlp="plain", norm="layernorm",
                         source="inferred: heads of 128, 4h MLP, untied embeddings")
    without = breakdown(shape).total
    per_token = breakdown(replace(shape, vocab_size=1)).total - without
    return replace(shape, vocab_size=max(256, round((parameters - without) / per_token)))


def as_dict(arch: Architecture) -> dict:
    """The architecture as plain data (for JSON output)."""
    return asdict(arch)

