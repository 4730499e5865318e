"""What a job runs on: accelerators (a catalog name or an inline device), the network tiers,
storage, prices and power. Training states the accelerator count; serving derives it."""

from __future__ import annotations

from typing import Annotated, Any, Optional, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from botec.contract.sections import BY_NAME, INLINE, Section, by_name_or_inline
from botec.contract.stated import PositiveCount, default, default_range, quantity
from botec.errors import ContractError

__all__ = ["Accelerator", "Network", "Storage", "Link", "Cluster", "Candidate", "ApiPrice", "TrainingSupply",
           "ServingSupply"]


class Accelerator(Section):
    """A device described inline (a hypothetical one, as the lesson's), instead of a catalog name."""

    name: str = Field(description="a label for the device")
    peak_flops_per_s: quantity("flop_rate", "Theoretical dense peak at the training precision, e.g. '200 TFLOP/s'",
                               exclusive_minimum=0)
    memory: quantity("bytes", "Device memory, e.g. '32 GB'", exclusive_minimum=0)
    memory_bandwidth: Optional[quantity("byte_rate", "Device memory bandwidth", exclusive_minimum=0)] = None
    link_bandwidth: Optional[quantity("byte_rate", "Accelerator-to-accelerator bandwidth per direction",
                                      exclusive_minimum=0)] = None
    tdp: Optional[quantity("watts", "Rated power of one device", exclusive_minimum=0)] = None


def _accelerator(raw: Any) -> Any:
    if isinstance(raw, str):
        from botec.catalog import accelerators, did_you_mean

        catalog = accelerators()
        if raw not in catalog:
            raise ValueError(
                f"unknown accelerator {raw!r}{did_you_mean(raw, catalog)} "
                f"(catalog: {', '.join(catalog)}; or describe one inline with name, peak_flops_per_s, memory)"
            )
    return raw


AcceleratorField = Annotated[
    Union[Annotated[str, Tag(BY_NAME)], Annotated[Accelerator, Tag(INLINE)]],
    Discriminator(by_name_or_inline),
    BeforeValidator(_accelerator),
    Field(description="a catalog name (see `botec catalog`) or an inline device"),
]


class Network(Section):
    """One network tier for every collective (the lesson's way); supply.cluster describes two."""

    bandwidth: quantity("byte_rate", "Usable bandwidth per accelerator per direction during the collective, "
                        "e.g. '25 GB/s' (default: the catalog's link bandwidth)", exclusive_minimum=0)
    latency: quantity("seconds", "Latency per collective step (α)", minimum=0) = \
        default(0, "latency not modelled (α = 0)")


class Storage(Section):
    """The storage checkpoints are written to."""

    write_bandwidth: quantity("byte_rate", "Aggregate write bandwidth genuinely available for checkpoints, "
                              "e.g. '1 GB/s'", exclusive_minimum=0)


class Link(Section):
    bandwidth: quantity("byte_rate", "Usable bandwidth per accelerator per direction", exclusive_minimum=0)
    latency: quantity("seconds", "Latency per collective step (α), e.g. '5 us'", minimum=0) = \
        default(0, "latency not modelled (α = 0)")


class Cluster(Section):
    """Accelerators per node and the two network tiers; a node preset fills what is not stated."""

    node: Optional[str] = Field(None, description="a node preset (see `botec catalog`): dgx-h100, dgx-a100, ...")
    accelerators_per_node: Optional[PositiveCount] = Field(None, description="accelerators sharing the intra-node links")
    intra_node: Optional[Link] = Field(None, description="NVLink-class links inside a node")
    inter_node: Optional[Link] = Field(None, description="the network between nodes, per accelerator (NIC share)")

    @model_validator(mode="after")
    def _known_node(self) -> "Cluster":
        if self.node is not None:
            from botec.catalog import did_you_mean, node_presets

            presets = node_presets()
            if self.node not in presets:
                raise ContractError(f"unknown node preset {self.node!r}{did_you_mean(self.node, presets)} "
                                    f"(presets: {', '.join(presets)})", field="supply.cluster.node")
        return self


class Candidate(Section):
    """Another accelerator to compare, with its own price."""

    accelerator: str = Field(description="a catalog accelerator")
    price_per_accelerator_hour: Optional[quantity("usd_per_hour", "Its price per accelerator-hour", minimum=0)] = None

    @model_validator(mode="after")
    def _known(self) -> "Candidate":
        _accelerator(self.accelerator)
        return self


def _candidate(raw: Any) -> Any:
    return {"accelerator": raw} if isinstance(raw, str) else raw


class ApiPrice(Section):
    """An API's list price, to compare self-hosting against."""

    input_per_million: quantity("usd", "Price per million prompt tokens, e.g. '$3'", minimum=0)
    output_per_million: quantity("usd", "Price per million generated tokens, e.g. '$15'", minimum=0)
    source: Optional[str] = Field(None, description="where the prices come from, and when")


class _Supply(Section):
    """What the job runs on."""

    accelerator: AcceleratorField
    cluster: Optional[Cluster] = None
    network: Optional[Network] = None
    price_per_accelerator_hour: Optional[quantity("usd_per_hour", "Price of one accelerator-hour, e.g. '$2.50/h'",
                                                  minimum=0)] = None
    power_per_accelerator: Optional[quantity("watts", "Power per accelerator (default: its TDP)",
                                             exclusive_minimum=0)] = None
    pue: Optional[quantity("ratio", "Power usage effectiveness of the facility, e.g. 1.2", minimum=1)] = None
    host_power_per_accelerator: Optional[quantity(
        "watts", "What the rest of a node draws per accelerator: CPUs, memory, NICs, fans (default: a node preset's "
                 "system power less its accelerators', else 0: accelerators only)", minimum=0)] = None
    average_power_fraction: quantity(
        "ratio", "Average draw over the rated (peak) power while the job runs", exclusive_minimum=0, maximum=1) = \
        default_range(0.75, 0.6, 1.0, "DGX H100 under load draws 6.5-8.5 kW of its 10.2 kW maximum "
                                      "(supercluster.blog, 'NVIDIA DGX Power, Cooling, and Efficiency'); 1 is the peak")


class TrainingSupply(_Supply):
    """The accelerators of a training job, their links and storage."""

    count: quantity("count", "Accelerators in the job N", minimum=1, integer=True)
    storage: Optional[Storage] = None
    host_memory: Optional[quantity("bytes", "Host (CPU) memory of one node, e.g. '128 GB' (what offloading and "
                                   "asynchronous checkpoints may use)", exclusive_minimum=0)] = None
    host_link_bandwidth: Optional[quantity(
        "byte_rate", "Host-to-accelerator bandwidth per accelerator per direction, e.g. '25 GB/s' (default: the "
                     "catalog's host link, PCIe)", exclusive_minimum=0)] = None


class ServingSupply(_Supply):
    """The accelerator of a serving fleet (the count follows from the traffic, or ``replicas`` pins it), candidates
    and an API price."""

    candidates: Optional[list[Annotated[Candidate, BeforeValidator(_candidate)]]] = Field(
        None, description="other catalog accelerators to compare, each a name or {accelerator, "
                          "price_per_accelerator_hour}")
    api_price: Optional[ApiPrice] = Field(None, description="an API's price, for the break-even traffic")
    replicas: Optional[quantity(
        "count", "Replicas the fleet has, pinned (e.g. 1: a benchmark of one server): botec then does not size the "
                 "fleet but reports whether these replicas meet the targets, open or closed loop; default: the fewest "
                 "that meet them", minimum=1, integer=True)] = None

    @model_validator(mode="before")
    @classmethod
    def _no_count(cls, data: Any) -> Any:
        if isinstance(data, dict) and "count" in data:
            if data["count"] is not None:
                raise ContractError("a serving estimate derives the accelerators from the traffic; state the "
                                    "replica's layout (strategy.tensor_parallel, pipeline_parallel) instead",
                                    field="supply.count")
            data = {key: value for key, value in data.items() if key != "count"}
        return data
