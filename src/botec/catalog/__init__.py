"""Catalogs shipped as data: accelerators (``hardware.yaml``), node presets (``nodes.yaml``) and optimizer
presets (``optimizers.yaml``).

Every accelerator figure carries a source and a date: the device-level ``source``/``date``
unless the figure has its own entry under ``figure_sources``; a price range carries its own.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from botec.catalog.root import catalog_cache, catalog_root, clear_catalog_caches
from botec.units import parse_quantity

__all__ = ["CatalogAccelerator", "NodePreset", "OptimizerPreset", "PriceRange", "FAMILIES", "accelerators",
           "node_presets", "optimizer_presets", "did_you_mean", "did_you_mean_quantity", "catalog_revised",
           "catalog_root", "clear_catalog_caches", "nvlink_reduction_families"]

def __getattr__(name: str):
    """``FAMILIES``: the architecture generations an accelerator's ``family`` may name, read when first asked for.

    They are the families efficiency.yaml defines, not those hardware.yaml happens to use: an accelerator is only
    estimable on a family with efficiency figures, so a new family is added by giving it an efficiency.yaml block.
    ``<generation>-geforce``: cards of that generation whose 16-bit tensor rate with FP32 accumulation is half the
    FP16-accumulate rate (GeForce, and AWS's A10G); they sustain a larger share of that halved peak, so they get
    their own curve."""
    if name == "FAMILIES":
        from botec.catalog.efficiency import families

        return tuple(families())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CatalogError(ValueError):
    """A shipped catalog entry that does not load: names the file, the entry and the key."""


@dataclass(frozen=True)
class PriceRange:
    """Published prices per accelerator-hour in USD: the cheapest, a typical and the dearest list price found."""

    low: float
    typical: float
    high: float
    source: str
    date: str
    url: str | None = None


@dataclass(frozen=True)
class CatalogAccelerator:
    """One accelerator as its vendor publishes it, figures in base units."""

    key: str
    name: str
    vendor: str
    family: str  # architecture generation, one of FAMILIES (efficiency.yaml's families)
    peak_flops_per_s: dict[str, float]  # by precision: bf16, fp16, fp8, fp4 (FLOP/s), int8 (OP/s)
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float | None
    link: str | None
    link_bandwidth_bytes_per_s: float | None
    tdp_watts: float | None
    source: str
    date: str
    url: str | None = None
    notes: str | None = None
    figure_sources: dict[str, dict[str, str]] = field(default_factory=dict)
    price_per_hour: PriceRange | None = None
    host_link: str | None = None                           # "PCIe Gen4 x16": the link to the host CPU
    host_link_bandwidth_bytes_per_s: float | None = None   # that link, per direction (offload, checkpoint copies)

    def source_of(self, figure: str) -> str:
        """'source (date)' for one figure: its own entry in figure_sources, else the device's."""
        entry = self.figure_sources.get(figure, {})
        return f"{entry.get('source', self.source)} ({entry.get('date', self.date)})"


@dataclass(frozen=True)
class OptimizerPreset:
    """Bytes per parameter an optimizer/precision choice keeps, split as the lesson's table (their total is
    :func:`botec.formulas.weights.unsharded_state_bytes_per_parameter`: the data knows no formula)."""

    key: str
    description: str
    weight_bytes_per_parameter: float
    gradient_bytes_per_parameter: float
    master_weight_bytes_per_parameter: float
    optimizer_state_bytes_per_parameter: float
    source: str


def _load_yaml(name: str) -> dict:
    from botec.yamlfile import load_yaml_text

    return load_yaml_text(catalog_root().joinpath(name).read_text(encoding="utf-8"))


def _optional(entry: dict, key: str, dimension: str) -> float | None:
    value = entry.get(key)
    return None if value is None else parse_quantity(value, dimension)


_OPS = re.compile(r"(?<![A-Za-z])([kMGTPE]?)OP(S|/s)(?![A-Za-z])")


def _peak(value) -> float:
    """A peak rate: FLOP/s, or integer OP/s (``"624 TOP/s"``, ``"4.5 POPS"``), one operation counted as one FLOP."""
    return parse_quantity(_OPS.sub(r"\1FLOP\2", value) if isinstance(value, str) else value, "flop_rate")


def _price_range(key: str, entry: dict | None) -> PriceRange | None:
    if entry is None:
        return None
    missing = [k for k in ("low", "typical", "high", "source", "date") if not entry.get(k)]
    if missing:
        raise CatalogError(f"hardware.yaml: {key}.price_per_hour lacks {', '.join(missing)}")
    low, typical, high = (parse_quantity(entry[k], "usd_per_hour") for k in ("low", "typical", "high"))
    if not low <= typical <= high:
        raise CatalogError(f"hardware.yaml: {key}.price_per_hour must have low <= typical <= high "
                           f"(got {low:g}, {typical:g}, {high:g} USD/h)")
    return PriceRange(low=low, typical=typical, high=high, source=" ".join(str(entry["source"]).split()),
                      date=str(entry["date"]), url=entry.get("url"))


def _host_link(key: str, entry: dict) -> tuple[str | None, float | None]:
    """The link to the host CPU and its bandwidth per direction: both stated, or neither."""
    link, bandwidth = entry.get("host_link"), _optional(entry, "host_link_bandwidth", "byte_rate")
    if (link is None) != (bandwidth is None):
        raise CatalogError(f"hardware.yaml: {key} states {'host_link' if link else 'host_link_bandwidth'} without "
                           f"{'host_link_bandwidth' if link else 'host_link'}; give both or neither")
    if bandwidth is not None and not bandwidth > 0:
        raise CatalogError(f"hardware.yaml: {key}.host_link_bandwidth must be positive (got {bandwidth:g} B/s)")
    return link, bandwidth


def _family(key: str, entry: dict) -> str:
    from botec.catalog.efficiency import families

    family, known = entry.get("family"), tuple(families())
    if family not in known:
        raise CatalogError(f"hardware.yaml: {key}.family must be one of {', '.join(known)} (the families of "
                           f"efficiency.yaml; got {family!r})")
    return family


@catalog_cache
def _hardware() -> dict:
    return _load_yaml("hardware.yaml")


@catalog_cache
def nvlink_reduction_families() -> frozenset[str]:
    """The families whose NVSwitch reduces in the switch (NVLS: Hopper and later), ``hardware.yaml``'s
    ``nvlink_reduction_families``; each is a family of efficiency.yaml."""
    from botec.catalog.efficiency import families

    named, known = _hardware().get("nvlink_reduction_families") or [], families()
    unknown = [family for family in named if family not in known]
    if unknown:
        raise CatalogError(f"hardware.yaml: nvlink_reduction_families names {unknown[0]!r}, not a family of "
                           f"efficiency.yaml ({', '.join(known)})")
    return frozenset(named)


@catalog_cache
def accelerators() -> dict[str, CatalogAccelerator]:
    """The accelerator catalog, keyed by the name a contract uses (``h100-sxm``)."""
    data = _hardware()
    catalog = {}
    for key, entry in data["accelerators"].items():
        host_link, host_link_bandwidth = _host_link(key, entry)
        catalog[key] = CatalogAccelerator(
            key=key,
            name=entry["name"],
            vendor=entry["vendor"],
            family=_family(key, entry),
            peak_flops_per_s={p: _peak(v) for p, v in entry["peak_flops_per_s"].items()},
            memory_bytes=parse_quantity(entry["memory"], "bytes"),
            memory_bandwidth_bytes_per_s=_optional(entry, "memory_bandwidth", "byte_rate"),
            link=entry.get("link"),
            link_bandwidth_bytes_per_s=_optional(entry, "link_bandwidth", "byte_rate"),
            tdp_watts=_optional(entry, "tdp", "watts"),
            source=entry["source"],
            date=str(entry["date"]),
            url=entry.get("url"),
            notes=entry.get("notes"),
            figure_sources=entry.get("figure_sources") or {},
            price_per_hour=_price_range(key, entry.get("price_per_hour")),
            host_link=host_link,
            host_link_bandwidth_bytes_per_s=host_link_bandwidth,
        )
    return catalog


@catalog_cache
def catalog_revised() -> str:
    """When the shipped catalogs (accelerators, nodes, models) were last reviewed: the latest of their dates.

    Read from each file's top-level ``revised:`` line, without parsing the whole file (reports print it).
    """
    import re

    dates = []
    for name in ("hardware.yaml", "nodes.yaml", "models.yaml"):
        text = catalog_root().joinpath(name).read_text(encoding="utf-8")
        match = re.search(r'^revised:\s*"?([0-9-]+)"?', text, re.MULTILINE)
        if match:
            dates.append(match.group(1))
    return max(dates, default="unknown")


@catalog_cache
def device_runtime() -> dict:
    """The runtime's own device memory (runtime.yaml): the CUDA context outside PyTorch's allocator, the cuBLAS and
    cuBLASLt workspaces inside it, and the placeholder for any other runtime."""
    return _load_yaml("runtime.yaml")


@catalog_cache
def optimizer_presets() -> dict[str, OptimizerPreset]:
    """Optimizer and precision presets: the bytes-per-parameter table of lesson 000 and its variants."""
    data = _load_yaml("optimizers.yaml")
    return {
        key: OptimizerPreset(
            key=key,
            description=entry["description"],
            weight_bytes_per_parameter=float(entry["weights"]),
            gradient_bytes_per_parameter=float(entry["gradients"]),
            master_weight_bytes_per_parameter=float(entry["master_weights"]),
            optimizer_state_bytes_per_parameter=float(entry["optimizer_states"]),
            source=entry["source"],
        )
        for key, entry in data["optimizers"].items()
    }


@dataclass(frozen=True)
class TrainingStack:
    """A training framework's defaults (``stacks.yaml``): what it runs unless the contract says otherwise."""

    key: str
    description: str
    attention_kernel: str          # flash | eager
    training_attention: str        # flash2 | cudnn | pallas: the fused kernel's figure in efficiency.yaml
    elementwise: str               # fused | eager
    loss: str                      # fused | unfused | chunked
    optimizer: str                 # an optimizers.yaml preset
    # how it schedules its data-parallel collectives: overlapped, parameter_gather_overlap (bools) and source (its
    # buckets: training/network/granularity.py)
    data_parallel_schedule: dict
    source: str
    selective_recompute: str = "attention-core"   # what recompute: selective means here: attention-core | op-sac
    gradients: str = "kept"        # freed (set to None after each step) | kept (persistent gradient buffers)


@dataclass(frozen=True)
class StackCatalog:
    default: str
    default_by_vendor: dict[str, str]   # an accelerator vendor -> the stack its contracts run on unless they name one
    stacks: dict[str, TrainingStack]
    elementwise: dict[str, dict]   # fused | eager -> traffic_factor, kernels_per_layer, source
    loss: dict[str, dict]          # fused | unfused | chunked -> kept_bytes_per_logit, traffic_bytes_per_logit, source


@catalog_cache
def training_stacks() -> StackCatalog:
    """The training stacks of ``stacks.yaml`` (``strategy.framework``), the default one, and the costs of their
    elementwise and loss kernels."""
    data = _load_yaml("stacks.yaml")
    stacks = {}
    for key, entry in data["stacks"].items():
        schedule = entry["data_parallel_schedule"]
        stacks[key] = TrainingStack(
            key=key, description=entry["description"], attention_kernel=entry["attention_kernel"],
            training_attention=entry["training_attention"], elementwise=entry["elementwise"], loss=entry["loss"],
            optimizer=entry["optimizer"],
            data_parallel_schedule={
                "overlapped": bool(schedule["overlapped"]),
                "parameter_gather_overlap": bool(schedule["parameter_gather_overlap"]),
                "source": str(schedule["source"])},
            source=str(entry["source"]),
            selective_recompute=str(entry.get("selective_recompute", "attention-core")),
            gradients=str(entry.get("gradients", "kept")))
    _check_training_attention_kernels({stack.training_attention for stack in stacks.values()})
    return StackCatalog(default=data["default"], default_by_vendor=dict(data.get("default_by_vendor") or {}),
                        stacks=stacks, elementwise=dict(data["elementwise"]), loss=dict(data["loss"]))


def _check_training_attention_kernels(run: set[str]) -> None:
    """Every kernel of efficiency.yaml's ``training_attention_efficiency`` is one a stack of stacks.yaml runs
    (its ``training_attention``): the stacks are the one list of kernels, and a figure no stack reads is a typo."""
    from botec.catalog.efficiency import families

    for family, figures in families().items():
        unknown = sorted(set(figures.training_attention) - run)
        if unknown:
            raise CatalogError(f"efficiency.yaml: {family}.training_attention_efficiency names {unknown[0]!r}, a "
                               f"kernel no stack of stacks.yaml runs (they run: {', '.join(sorted(run))})")


def did_you_mean(word: str, choices) -> str:
    """'; did you mean 'x'?' when a close match exists, else ''.

    Matches ignore case; a word that begins one or two choices (``H100``: ``h100-sxm``, ``h100-pcie``)
    suggests those; otherwise the closest spelling (``stratgy``: ``strategy``).
    """
    choices = [str(c) for c in choices]
    text = str(word).strip()
    lowered = {c.lower(): c for c in choices}
    if text.lower() in lowered and lowered[text.lower()] != text:
        return f"; did you mean {lowered[text.lower()]!r}?"
    starting = [c for c in choices if text and c.lower().startswith(text.lower()) and c != text]
    if 1 <= len(starting) <= 3:
        names = [repr(c) for c in starting]
        return "; did you mean " + (", ".join(names[:-1]) + " or " if len(names) > 1 else "") + names[-1] + "?"
    close = difflib.get_close_matches(text.lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""


# Words a newcomer writes in a quantity name, and the unit words botec's names use instead (run_time: run_seconds).
_UNIT_WORDS = {"time": "seconds", "duration": "seconds", "secs": "seconds", "sec": "seconds", "s": "seconds",
               "hours": "seconds", "memory": "bytes", "mem": "bytes", "size": "bytes", "gb": "bytes",
               "cost": "usd", "price": "usd", "dollars": "usd"}


def did_you_mean_quantity(word: str, quantities) -> str:
    """:func:`did_you_mean` for a quantity name, also trying botec's unit words (``run_time``: ``run_seconds``)."""
    hint = did_you_mean(word, quantities)
    if hint:
        return hint
    parts = str(word).strip().lower().replace("-", "_").split("_")
    renamed = "_".join(_UNIT_WORDS.get(p, p) for p in parts)
    if renamed in quantities:
        return f"; did you mean {renamed!r}?"
    return did_you_mean(renamed, quantities)


@dataclass(frozen=True)
class NodePreset:
    """A node: its accelerators and the two network tiers, per accelerator."""

    key: str
    name: str
    accelerator: str
    accelerators_per_node: int
    intra_node_bytes_per_s: float
    intra_node_latency_seconds: float
    intra_node_link: str
    inter_node_bytes_per_s: float
    inter_node_latency_seconds: float
    inter_node_link: str
    source: str
    date: str
    notes: str | None = None
    nics_per_node: int | None = None          # scale-out NICs of the compute fabric
    nic_bytes_per_s: float | None = None      # per NIC, per direction
    nvlink_domain: int | None = None          # accelerators sharing one NVLink/NVSwitch (or ICI) domain
    intra_node_achieved_bytes_per_s: float | None = None   # a published measurement, per accelerator per direction
    intra_node_achieved_source: str | None = None
    inter_node_achieved_bytes_per_s: float | None = None
    inter_node_achieved_source: str | None = None
    system_power_watts: float | None = None   # the node's maximum input power (host, NICs, fans, switches included)
    system_power_source: str | None = None
    host_memory_bytes: float | None = None    # the node's host (CPU) memory: what offloading may use


def _achieved(key: str, tier: str, link: dict) -> tuple[float | None, str | None]:
    value, source = link.get("achieved_bandwidth"), link.get("achieved_source")
    if value is None:
        return None, None
    if not source:
        raise CatalogError(f"nodes.yaml: {key}.{tier}.achieved_bandwidth needs an achieved_source")
    return parse_quantity(value, "byte_rate"), " ".join(str(source).split())


def _optional_int(entry: dict, key: str) -> int | None:
    value = entry.get(key)
    return None if value is None else int(value)


@catalog_cache
def node_presets() -> dict[str, NodePreset]:
    """Node presets from ``nodes.yaml`` (DGX A100, DGX H100, TPU slices, ...)."""
    data = _load_yaml("nodes.yaml")
    presets = {}
    for key, entry in data["nodes"].items():
        intra, inter = entry["intra_node"], entry["inter_node"]
        intra_achieved, intra_achieved_source = _achieved(key, "intra_node", intra)
        inter_achieved, inter_achieved_source = _achieved(key, "inter_node", inter)
        presets[key] = NodePreset(
            key=key, name=entry["name"], accelerator=entry["accelerator"],
            accelerators_per_node=int(entry["accelerators_per_node"]),
            intra_node_bytes_per_s=parse_quantity(intra["bandwidth"], "byte_rate"),
            intra_node_latency_seconds=parse_quantity(intra.get("latency", 0), "seconds"),
            intra_node_link=intra.get("link", ""),
            inter_node_bytes_per_s=parse_quantity(inter["bandwidth"], "byte_rate"),
            inter_node_latency_seconds=parse_quantity(inter.get("latency", 0), "seconds"),
            inter_node_link=inter.get("link", ""),
            source=" ".join(str(entry["source"]).split()), date=str(entry["date"]), notes=entry.get("notes"),
            nics_per_node=_optional_int(entry, "nics_per_node"),
            nic_bytes_per_s=_optional(entry, "nic_bandwidth", "byte_rate"),
            nvlink_domain=_optional_int(entry, "nvlink_domain"),
            intra_node_achieved_bytes_per_s=intra_achieved, intra_node_achieved_source=intra_achieved_source,
            inter_node_achieved_bytes_per_s=inter_achieved, inter_node_achieved_source=inter_achieved_source,
            system_power_watts=_optional(entry, "system_power", "watts"),
            system_power_source=entry.get("system_power_source"),
            host_memory_bytes=_optional(entry, "host_memory", "bytes"),
        )
    return presets
