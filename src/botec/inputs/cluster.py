"""The network tiers a contract states, and the link each parallel group of a layout crosses.

Two tiers: inside a node (NVLink-class links) and across nodes (each accelerator's share of the
NICs). Each tier comes from, in this order: ``supply.cluster.intra_node`` / ``inter_node``, the
single ``supply.network`` (the lesson's way: one tier for every collective), a node preset
(``supply.cluster.node``), or, inside a node only, the accelerator's catalog link. A tier none of
these states is absent: nothing stands in for it.

Accelerators per node: stated, or the preset's; with no cluster at all, every accelerator of the
job shares one tier (a node of N).

A group stays inside a node while the accelerators it spans (Megatron's rank order: TP, CP, DP ⊃
EP, PP) fit in one, and crosses nodes otherwise. A group of one rank sends nothing: its
collectives are zero (the formulas' ``zero_when``) and it needs no link. A group that needs an
absent tier gets no link either; whatever needs its time then names the field to state
(:class:`Missing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botec.graph import Given
from botec.inputs.missing import Missing
from botec.inputs.stated import StatedInputs
from botec.layout import GROUPS, Layout

__all__ = ["Tier", "Tiers", "Missing", "Placement", "tiers_of", "place", "collective_tables_given", "cross_node_given"]

_TIER_FIELDS = {"intra": "supply.cluster.intra_node", "inter": "supply.cluster.inter_node"}


@dataclass(frozen=True)
class Tier:
    bytes_per_s: Given
    latency_seconds: Given
    label: str  # what the link is, for the source text of the groups on it


@dataclass(frozen=True)
class Tiers:
    accelerators_per_node: Given | None  # None: every accelerator of the job shares one tier
    intra: Tier | None
    inter: Tier | None

    def tier(self, name: str) -> Tier | None:
        return self.intra if name == "intra" else self.inter

    def replaced(self, values: dict[str, Given]) -> "Tiers":
        """The tiers with some of their inputs replaced (``{"intra_node_bytes_per_s": Given(…)}``)."""
        def swap(tier: Tier | None, prefix: str) -> Tier | None:
            if tier is None:
                return None
            bandwidth = values.get(f"{prefix}_node_bytes_per_s", tier.bytes_per_s)
            latency = values.get(f"{prefix}_node_latency_seconds", tier.latency_seconds)
            return Tier(bandwidth, latency, tier.label)

        return Tiers(self.accelerators_per_node, swap(self.intra, "intra"), swap(self.inter, "inter"))

    def given(self) -> dict[str, Given]:
        given = {}
        for name, tier in (("intra", self.intra), ("inter", self.inter)):
            if tier is not None:
                given[f"{name}_node_bytes_per_s"] = tier.bytes_per_s
                given[f"{name}_node_latency_seconds"] = tier.latency_seconds
        return given


@dataclass(frozen=True)
class Placement:
    """Where one group of a scalar layout runs: the accelerators it spans and the tier it crosses."""

    group: str
    carried: str
    ranks: float
    span: float
    tier: str  # "intra" | "inter"

    @property
    def crosses_nodes(self) -> bool:
        return self.tier == "inter"


def tiers_of(supply, device, stated: StatedInputs) -> Tiers:
    """The tiers a contract's supply states (a catalog ``device`` may give the intra-node link)."""
    from botec.catalog import node_presets

    cluster = supply.cluster
    preset = node_presets()[cluster.node] if cluster is not None and cluster.node else None
    if cluster is not None and cluster.accelerators_per_node:
        per_node = Given(float(cluster.accelerators_per_node), "assumed", None, "supply.cluster.accelerators_per_node")
    elif preset is not None:
        per_node = Given(float(preset.accelerators_per_node), "catalog", f"{preset.name}: {preset.source} "
                                                                          f"({preset.date})", "supply.cluster.node")
    else:
        per_node = None

    def tier(name: str) -> Tier | None:
        link = getattr(cluster, f"{name}_node", None) if cluster is not None else None
        prefix = f"{name}_node"
        if link is not None:
            field = _TIER_FIELDS[name]
            return Tier(stated.given(f"{prefix}_bytes_per_s", link.bandwidth, f"{field}.bandwidth"),
                        stated.given(f"{prefix}_latency_seconds", link.latency, f"{field}.latency"), field)
        if supply.network is not None:
            return Tier(stated.given(f"{prefix}_bytes_per_s", supply.network.bandwidth, "supply.network.bandwidth"),
                        stated.given(f"{prefix}_latency_seconds", supply.network.latency, "supply.network.latency"),
                        "supply.network")
        if preset is not None:
            link_name = getattr(preset, f"{prefix}_link")
            source = f"{link_name}; {preset.name}: {preset.source} ({preset.date})"
            nominal = getattr(preset, f"{prefix}_bytes_per_s")
            achieved = getattr(preset, f"{prefix}_achieved_bytes_per_s", None)
            bandwidth = Given(nominal, "catalog", f"nominal; {source}", "supply.cluster.node")
            if achieved is not None:  # what collectives really reach, where a measurement is published
                measured_by = getattr(preset, f"{prefix}_achieved_source")
                bandwidth = Given(achieved, "catalog", f"achieved (nominal {_n_rate(nominal)}): {measured_by}; "
                                                       f"{link_name}", "supply.cluster.node")
            return Tier(bandwidth,
                        Given(getattr(preset, f"{prefix}_latency_seconds"), "catalog", source, "supply.cluster.node"),
                        link_name)
        if name == "intra" and device is not None and device.link_bandwidth_bytes_per_s is not None:
            source = f"{device.link}; {device.source_of('link_bandwidth')}"
            return Tier(Given(device.link_bandwidth_bytes_per_s, "catalog", source, "supply.accelerator"),
                        Given(0.0, "assumed", "the catalog gives no latency: α = 0 (latency not modelled)", None),
                        device.link or "the accelerator's link")
        return None

    return Tiers(per_node, tier("intra"), tier("inter"))


def _needs_link(layout: Layout, group: str):
    """Where a group's collectives move bytes (a group of one rank, or no ZeRO for the shard group, moves none)."""
    ranks = layout.degree(group)
    if group == "shard":
        return (ranks > 1) & (layout.zero_stage >= 1)
    if group == "edp":  # a dense model has no expert gradients
        return (ranks > 1) & bool(layout.model.experts)
    return ranks > 1


def ranks_per_node(layout: Layout, group: str):
    """Ranks of one of the group's collectives inside one node: ⌊accelerators per node / stride⌋, between 1 and
    the group's ranks (the stride: how far apart its ranks sit in Megatron's order TP, CP, DP ⊃ EP, PP).

    These l ranks are all of one collective's NICs in that node: a shard group with TP 8 on 8-GPU nodes, the
    expert-DP group under EP 8, or hybrid sharding's all-reduce across the replicas has one rank per node and
    gets one NIC (:func:`botec.formulas.collectives.hierarchical_bytes_per_s` with l = 1), however many the node
    has; the other ranks of the node run their own collectives through their own NICs at the same time."""
    from botec.graph import floor, maximum, minimum

    ranks = layout.degree(group)
    stride = layout.span(group) / ranks
    inside = floor(layout.accelerators_per_node / stride)  # floats for one estimate (no numpy), arrays for a sweep
    return minimum(maximum(inside, 1.0), ranks)


def _across_nodes(group: str, layout: Layout, tiers: Tiers):
    """The bandwidth a group's collective gets across nodes, and how: its ranks in one node pool their NICs."""
    from botec.formulas.collectives import all_to_all_bytes_per_s, hierarchical_bytes_per_s

    nic = tiers.inter.bytes_per_s.value
    links = tiers.intra.bytes_per_s.value if tiers.intra is not None else float("inf")
    local = ranks_per_node(layout, group)
    if group in ("dp", "shard", "edp", "tp"):
        return hierarchical_bytes_per_s(local, links, nic), local, "rings over their NICs (hierarchical)"
    if group == "ep":
        return all_to_all_bytes_per_s(layout.degree(group), local, links, nic), local, "all-to-all: off-node bytes " \
                                                                                       "through each rank's own NIC"
    return nic, local, "point to point through one NIC"


def place(layout: Layout, tiers: Tiers, rows: int | None = None
          ) -> tuple[dict[str, Given], dict[str, Placement], dict[str, Missing], dict[str, tuple[Any, Missing]]]:
    """Each group's link as inputs of the graph: for a scalar layout, or row by row for an array one
    (``rows``: its length).

    Returns (given; the placement of each group, scalar layouts only; the link inputs left out
    because the tier they need is absent, with the field that would state it; for array layouts,
    the rows that need an absent tier, by link input).
    """
    given: dict[str, Given] = {"accelerators_per_node": _per_node_given(layout, tiers)} | tiers.given()
    placement: dict[str, Placement] = {}
    missing: dict[str, Missing] = {}
    rows_missing: dict[str, tuple[Any, Missing]] = {}
    per_node = layout.accelerators_per_node
    for group, carried in GROUPS.items():
        span, ranks = layout.span(group), layout.degree(group)
        inside = span <= per_node
        needs = _needs_link(layout, group)
        names = (f"{group}_link_bytes_per_s", f"{group}_link_latency_seconds")
        if rows is None:
            tier_name = "intra" if inside else "inter"
            placement[group] = Placement(group, carried, float(ranks), float(span), tier_name)
            tier = tiers.tier(tier_name) if needs else (tiers.tier(tier_name) or tiers.intra or tiers.inter)
            if tier is None:
                if needs:
                    missing[names[0]] = missing[names[1]] = _missing(tier_name, carried, span, per_node)
                continue
            note = (f"{carried} span {_n(span)} accelerators, {'inside a node' if inside else 'across nodes'} of "
                    f"{_n(per_node)}" if needs else f"no {carried} (one rank)")
            bandwidth = _noted(tier.bytes_per_s, f"{note}: {tier.label}")
            if needs and not inside:
                pooled, local, how = _across_nodes(group, layout, tiers)
                bandwidth = Given(float(pooled), tier.bytes_per_s.provenance,
                                  f"{note}, {_n(local)} of its ranks per node: {how}: {_n_rate(pooled)} per rank "
                                  f"from {tier.label}", tier.bytes_per_s.field)
            given[names[0]] = bandwidth
            given[names[1]] = _noted(tier.latency_seconds, f"{note}: {tier.label}")
            continue
        import numpy as np

        needs, inside = np.broadcast_to(needs, (rows,)), np.broadcast_to(inside, (rows,))
        for tier_name, tier in (("intra", tiers.intra), ("inter", tiers.inter)):
            unplaced = needs & (inside if tier_name == "intra" else ~inside)
            if tier is None and unplaced.any():
                problem = Missing(_field(tier_name), f"{carried} need the {tier_name}-node tier")
                for name in names:
                    earlier = rows_missing.get(name, (False, problem))[0]
                    rows_missing[name] = (earlier | unplaced, problem)
        known = [t for t in (tiers.intra, tiers.inter) if t is not None]
        if not known:
            continue  # no tier at all: only rows where the group has one rank can be evaluated, and they need none
        for name, what in zip(names, ("bytes_per_s", "latency_seconds")):
            # A row whose group needs an absent tier is left out where it matters (``unplaced``); any real
            # tier's value stands in its array slot, multiplying nothing elsewhere.
            fill = getattr(known[0], what).value
            intra = getattr(tiers.intra, what).value if tiers.intra else fill
            inter = getattr(tiers.inter, what).value if tiers.inter else fill
            if what == "bytes_per_s" and tiers.inter is not None:
                # pooled across nodes only where the group has collectives to run, as for one estimate (a group
                # of one rank keeps its tier's figure: an all-to-all of one rank pools to 0 B/s, and 0 B / 0 B/s
                # made every sweep row's collective floor NaN)
                with np.errstate(divide="ignore", invalid="ignore"):
                    inter = np.where(needs, _across_nodes(group, layout, tiers)[0], inter)
            given[name] = Given(np.where(inside, intra, inter), "assumed", f"each row's tier for {carried}", None)
    return given, placement, missing, rows_missing


MEASURED_GROUPS = {"tp": "tensor-parallel collectives", "dp": "data-parallel gradient all-reduces",
                   "shard": "ZeRO/FSDP shard group's reduce-scatters and all-gathers"}
"""The groups whose collectives inside one node are priced from NCCL's measured tables."""


def collective_tables_given(device_key: str | None, layout: Layout, tiers: Tiers, rows: int | None = None
                            ) -> dict[str, Given]:
    """``<group>_collective_table_index`` for the groups of :data:`MEASURED_GROUPS`: the accelerator's position
    among the NCCL-measured ones (botec.formulas.collective_tables.nccl_devices) where the group spans no more
    than a node and the intra-node link is the catalog's (a node preset's or the accelerator's), else −1 (the α–β
    ring of the group's link). A link the contract states is its own: the tables are set aside for it. The rank
    counts a table lacks (it holds 2, 4, 8) fall back to the α–β ring in the formulas."""
    intra = tiers.intra
    stated = intra is None or intra.bytes_per_s.provenance != "catalog"
    if stated or device_key is None:   # an inline accelerator has no tables: not even their folder is listed
        index = -1.0
    else:
        from botec.formulas.collective_tables import nccl_device_index  # lazily (file names only: none parsed)

        index = nccl_device_index(device_key)
    if index < 0:
        why = ("the contract states the intra-node link: the α–β ring of that link" if stated and intra is not None
               else f"no NCCL tables measured on {device_key or 'this accelerator'}: the α–β ring of the group's link")
        return {f"{g}_collective_table_index": Given(-1.0, "assumed", why, None) for g in MEASURED_GROUPS}
    tables = (f"catalog/measurements/operators/{{allreduce,allgather,reducescatter}}-nccl-{device_key}.yaml "
              "(AIConfigurator 0.12.0, Apache-2.0: NCCL's own collectives timed one at a time, 512 B … 512 MiB; "
              "log-log between their points, the α–β line through their last two beyond)")
    given = {}
    for group, carried in MEASURED_GROUPS.items():
        inside = layout.span(group) <= layout.accelerators_per_node
        if rows is not None:
            import numpy as np

            value = np.where(np.broadcast_to(inside, (rows,)), index, -1.0)
        else:
            value = index if inside else -1.0
            if not inside:
                given[f"{group}_collective_table_index"] = Given(
                    -1.0, "assumed", f"the {carried} cross nodes: NCCL's cost model on their link (data-parallel and "
                                      f"shard groups; botec.formulas.nccl_tuning), else the α–β ring", None)
                continue
        given[f"{group}_collective_table_index"] = Given(
            value, "measured", f"the {carried} inside a node priced from NCCL's measured tables at 2, 4 or 8 ranks "
                               f"(other counts, and the tree option: the α–β ring): {tables}",
            "supply.accelerator")
    return given


CROSS_NODE_GROUPS = {"dp": "data-parallel gradient all-reduce", "shard": "ZeRO/FSDP shard group's collectives"}
"""The groups whose collectives across nodes are priced by NCCL's cost model (botec.formulas.nccl_tuning)."""


def cross_node_given(device, supply, layout: Layout, tiers: Tiers) -> dict[str, Given]:
    """What NCCL's cost model needs besides each group's link: the ranks of one collective per node (fewer than its
    ranks where it crosses nodes), one accelerator's NVLink figure, and how a node's GPUs talk (PCIe, NVLink, or
    NVLink with an NVSwitch that reduces: NVLS, Hopper and later)."""
    given = {f"{g}_ranks_per_node": Given(ranks_per_node(layout, g), "assumed", _PER_NODE_SOURCE, None)
             for g in CROSS_NODE_GROUPS}
    intra = tiers.intra or tiers.inter
    given["collective_nvlink_bytes_per_s"] = Given(intra.bytes_per_s.value if intra is not None else 1.0, "assumed",
                                                   "the intra-node tier's bandwidth", None)
    cluster = supply.cluster
    if cluster is not None and cluster.node:
        from botec.catalog import node_presets

        over_nvlink = (node_presets()[cluster.node].nvlink_domain or 1) > 1
    else:
        over_nvlink = device is not None and "nvlink" in str(device.link or "").lower()
    if over_nvlink and device is not None:
        from botec.catalog import nvlink_reduction_families

        kind = 2.0 if device.family in nvlink_reduction_families() else 1.0
    else:
        kind = float(over_nvlink)
    given["collective_node_kind"] = Given(kind, "assumed", _NODE_KINDS[int(kind)], None)
    return given


_PER_NODE_SOURCE = "ranks of one collective per node: ⌊accelerators per node / stride⌋, at most its ranks"
_NODE_KINDS = ("PCIe inside a node: no NVLS tree", "NVLink inside a node, no NVLS (before Hopper)",
               "NVLink with NVSwitch reduction (NVLS tree: Hopper and later)")


def _n_rate(bytes_per_s: float) -> str:
    from botec.units import format_quantity

    return format_quantity(float(bytes_per_s), "B/s")


def _per_node_given(layout: Layout, tiers: Tiers) -> Given:
    if tiers.accelerators_per_node is not None:
        return tiers.accelerators_per_node
    return Given(layout.accelerators_per_node, "assumed", "no cluster stated: all accelerators share one network tier",
                 "supply.count" if layout.kind == "training" else None)


def _field(tier_name: str) -> str:
    return f"{_TIER_FIELDS[tier_name]}.bandwidth"


def _missing(tier_name: str, carried: str, span, per_node) -> Missing:
    if tier_name == "inter":
        return Missing(_field("inter"), f"{carried} span {_n(span)} accelerators across nodes of {_n(per_node)} "
                                        "(or name a node preset in supply.cluster.node)")
    return Missing(_field("intra"), f"{carried} run over {_n(span)} accelerators inside a node, and no link is "
                                    "stated (supply.network.bandwidth, a node preset, or a catalog accelerator's "
                                    "link would do)")


def _noted(given: Given, note: str) -> Given:
    source = f"{note}; {given.source}" if given.source and given.source not in note else note
    return Given(given.value, given.provenance, source, given.field, given.low, given.high, given.distribution)


def _n(value) -> str:
    return f"{float(value):,.0f}" if float(value) == int(value) else f"{float(value):g}"
