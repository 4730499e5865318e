"""The accelerator's figures (catalog or inline), the facility's power, PUE and price, a hosted API's token price,
and the runtime's own device memory, as inputs."""

from __future__ import annotations

from botec.errors import ContractError
from botec.graph import Given
from botec.inputs.stated import StatedInputs

__all__ = ["accelerator_given", "api_price_given", "facility_given", "host_given", "runtime_given"]


def accelerator_given(supply, device, precision: str, precision_field: str, stated: StatedInputs,
                      bandwidth_needed_for: str | None = None) -> tuple[str, dict[str, Given]]:
    """(label, inputs): the device's peak at ``precision``, its memory and memory bandwidth.

    ``bandwidth_needed_for``: why the memory bandwidth is required (serving), or None when optional.
    """
    if device is not None:
        if precision not in device.peak_flops_per_s:
            raise ContractError(f"{device.key} has no published {precision} peak (it has: "
                                f"{', '.join(device.peak_flops_per_s)})", field=precision_field)
        given = {
            "peak_flops_per_s": Given(device.peak_flops_per_s[precision], "catalog",
                                      f"{precision} dense; {device.source_of('peak_flops_per_s')}", "supply.accelerator"),
            "device_memory_bytes": Given(device.memory_bytes, "catalog", device.source_of("memory"),
                                         "supply.accelerator"),
        }
        if device.memory_bandwidth_bytes_per_s is not None:
            given["memory_bandwidth_bytes_per_s"] = Given(device.memory_bandwidth_bytes_per_s, "catalog",
                                                          device.source_of("memory_bandwidth"), "supply.accelerator")
        return f"{device.name} ({device.key})", given
    accelerator = supply.accelerator
    given = {
        "peak_flops_per_s": stated.given("peak_flops_per_s", accelerator.peak_flops_per_s,
                                         "supply.accelerator.peak_flops_per_s"),
        "device_memory_bytes": stated.given("device_memory_bytes", accelerator.memory, "supply.accelerator.memory"),
    }
    if accelerator.memory_bandwidth is not None:
        given["memory_bandwidth_bytes_per_s"] = stated.given("memory_bandwidth_bytes_per_s",
                                                             accelerator.memory_bandwidth,
                                                             "supply.accelerator.memory_bandwidth")
    elif bandwidth_needed_for:
        raise ContractError(f"{bandwidth_needed_for}: state the device's memory bandwidth",
                            field="supply.accelerator.memory_bandwidth")
    else:  # absent: whatever needs it (the op-level model's memory-bound ops) names the field
        given |= stated.optional("memory_bandwidth_bytes_per_s", None, "supply.accelerator.memory_bandwidth",
                                 "the op-level compute model runs memory-bound ops (the optimizer step, norms) at the "
                                 "device's memory bandwidth (or use compute_model: flat)")
    return accelerator.name, given


def facility_given(supply, device, stated: StatedInputs) -> dict[str, Given]:
    """Power (the device's TDP unless stated), PUE and price: the inputs of cost and energy."""
    given: dict[str, Given] = {}
    if supply.power_per_accelerator is not None:
        given |= stated.optional("accelerator_power_watts", supply.power_per_accelerator,
                                 "supply.power_per_accelerator", "")
    elif device is not None and device.tdp_watts is not None:
        given["accelerator_power_watts"] = Given(device.tdp_watts, "catalog", f"TDP; {device.source_of('tdp')}",
                                                 "supply.accelerator")
    else:
        inline = supply.accelerator.tdp if device is None else None
        given |= stated.optional("accelerator_power_watts", inline,
                                 "supply.accelerator.tdp" if device is None else "supply.power_per_accelerator",
                                 "energy needs the power each accelerator draws")
    given |= _host_power(supply, device, given.get("accelerator_power_watts"), stated)
    given["average_power_fraction"] = stated.given("average_power_fraction", supply.average_power_fraction,
                                                   "supply.average_power_fraction")
    given |= stated.optional("pue", supply.pue, "supply.pue", "energy needs the facility's PUE (1 or more)")
    given |= stated.optional("price_per_accelerator_hour", supply.price_per_accelerator_hour,
                             "supply.price_per_accelerator_hour", "cost needs a price per accelerator-hour")
    return given


def _host_power(supply, device, accelerator_power: Given | None, stated: StatedInputs) -> dict[str, Given]:
    """What the rest of a node draws per accelerator: stated; a node preset's system power less its accelerators'
    rated power; or nothing (accelerators only, a lower bound on the facility's energy)."""
    field = "supply.host_power_per_accelerator"
    if supply.host_power_per_accelerator is not None:
        return {"host_power_per_accelerator_watts": stated.given("host_power_per_accelerator_watts",
                                                                 supply.host_power_per_accelerator, field)}
    from botec.catalog import node_presets

    cluster = supply.cluster
    preset = node_presets()[cluster.node] if cluster is not None and cluster.node else None
    if preset is not None and preset.system_power_watts is not None and accelerator_power is not None:
        per_accelerator = preset.system_power_watts / preset.accelerators_per_node
        host = max(per_accelerator - accelerator_power.value, 0.0)
        return {"host_power_per_accelerator_watts": Given(
            host, "derived", f"{preset.name}: {preset.system_power_source}: {per_accelerator:,.0f} W per accelerator "
                             f"less its {accelerator_power.value:,.0f} W", "supply.cluster.node")}
    return {"host_power_per_accelerator_watts": Given(
        0.0, "assumed", "accelerators only (no node preset with a system power): a lower bound on the facility's "
                        "energy; state supply.host_power_per_accelerator", field)}


def host_given(supply, device, stated: StatedInputs) -> dict[str, Given]:
    """The host side of each accelerator: its host link (stated, else the catalog accelerator's) and its node's host
    memory (stated only). Either may be absent; whatever needs it names the field."""
    given = stated.optional("host_memory_bytes", getattr(supply, "host_memory", None), "supply.host_memory",
                            "host memory of one node (offloading, asynchronous checkpoints)")
    stated_link = getattr(supply, "host_link_bandwidth", None)
    catalog_link = getattr(device, "host_link_bandwidth_bytes_per_s", None) if device is not None else None
    if stated_link is None and catalog_link is not None:
        source = getattr(device, "host_link", None) or "host link"
        return given | {"host_link_bytes_per_s": Given(catalog_link, "catalog",
                                                       f"{source}; {device.source_of('host_link_bandwidth')}",
                                                       "supply.accelerator")}
    return given | stated.optional("host_link_bytes_per_s", stated_link, "supply.host_link_bandwidth",
                                   "the host link's bandwidth per accelerator per direction (PCIe)")


# The runtime's own device memory as inputs: what the process holds besides the training tensors, split by whether
# PyTorch's caching allocator sees it (``catalog/runtime.yaml``).
#
# - ``runtime_buffer_bytes``: outside the allocator (the CUDA context): in the planned memory, not in
#   ``allocated_device_bytes`` (torch.cuda.max_memory_allocated does not count it; nvidia-smi does);
# - ``allocator_workspace_bytes``: inside it (the cuBLAS and cuBLASLt workspaces): part of the allocated peak.
#
# A stated ``assumptions.runtime_buffer`` replaces the part outside the allocator; the workspaces stay.

def _cuda(stack_name: str, device) -> bool:
    """A PyTorch stack (every stack but XLA) on a catalog NVIDIA accelerator: the CUDA runtime's measurements hold."""
    return device is not None and device.vendor == "NVIDIA" and stack_name != "xla"


def runtime_given(contract, stack_name: str, device, stated) -> dict[str, Given]:
    """``runtime_buffer_bytes`` (outside the allocator) and ``allocator_workspace_bytes`` (inside it) for the stack on
    the accelerator: the CUDA context and the cuBLAS + cuBLASLt workspaces of one training stream on PyTorch over
    CUDA, the lesson's placeholder and no workspace otherwise; a stated runtime_buffer wins."""
    from botec.catalog import device_runtime

    field = "assumptions.runtime_buffer"
    cuda = _cuda(stack_name, device)
    stated_buffer = contract.assumptions.runtime_buffer is not None
    # runtime.yaml is read only where a figure of it is used (an inline accelerator with a stated buffer needs none)
    runtime = device_runtime() if cuda or not stated_buffer else {}
    if stated_buffer:
        outside = stated.given("runtime_buffer_bytes", contract.assumptions.runtime_buffer, field)
    elif cuda:
        context = runtime["cuda"]["context_bytes"]
        outside = Given(float(context["value"]), "catalog", f"the CUDA context ({stack_name} on CUDA): "
                        f"{context['source']}", field, float(context["low"]), float(context["high"]))
        stated.fields.setdefault(field, []).append("runtime_buffer_bytes")
    else:
        placeholder = runtime["placeholder"]
        where = "an accelerator described inline" if device is None else f"{stack_name} on {device.vendor}"
        outside = Given(float(placeholder["value"]), "assumed", f"{where}: {placeholder['source']}", field)
        stated.fields.setdefault(field, []).append("runtime_buffer_bytes")
    if cuda:
        cublas_table, lt_table = runtime["cuda"]["cublas_workspace_bytes"], runtime["cuda"]["cublaslt_workspace_bytes"]
        cublas = float(cublas_table.get(device.family, cublas_table["default"]))
        compute_8_large = device.family in lt_table["compute_8_families"] and device.memory_bytes // 2**30 >= 24
        cublaslt = float(lt_table["compute_8_at_least_24_gib"] if compute_8_large
                         else lt_table.get(device.family, lt_table["default"]))
        workspace = Given(cublas + cublaslt, "catalog",
                          f"cuBLAS {cublas / 2**20:.3g} MiB + cuBLASLt {cublaslt / 2**20:.3g} MiB ({device.family}, "
                          f"{device.memory_bytes / 2**30:.0f} GiB) for the training stream: PyTorch's defaults "
                          "(catalog/runtime.yaml)", "supply.accelerator")
    else:
        workspace = Given(0.0, "assumed", "no measured workspace for this runtime (inside the placeholder buffer)",
                          "supply.accelerator")
    return {"runtime_buffer_bytes": outside, "allocator_workspace_bytes": workspace}


def api_price_given(api, stated: StatedInputs) -> dict[str, Given]:
    """``supply.api_price``: a hosted API's price per million input and output tokens (the block's source for each
    that names none), to compare the fleet's cost against; empty when the contract states none."""
    if api is None:
        return {}
    given = {}
    for name, value, key in (("api_price_per_million_input_tokens", api.input_per_million, "input_per_million"),
                             ("api_price_per_million_output_tokens", api.output_per_million, "output_per_million")):
        if value.source is None and api.source:
            value = value.model_copy(update={"source": api.source})
        given[name] = stated.given(name, value, f"supply.api_price.{key}")
    return given
