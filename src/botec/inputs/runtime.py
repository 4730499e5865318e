"""The runtime's own device memory as inputs: what the process holds besides the training tensors, split by whether
PyTorch's caching allocator sees it (``catalog/runtime.yaml``).

- ``runtime_buffer_bytes``: outside the allocator (the CUDA context): in the planned memory, not in
  ``allocated_device_bytes`` (torch.cuda.max_memory_allocated does not count it; nvidia-smi does);
- ``allocator_workspace_bytes``: inside it (the cuBLAS and cuBLASLt workspaces): part of the allocated peak.

A stated ``assumptions.runtime_buffer`` replaces the part outside the allocator; the workspaces stay.
"""

from __future__ import annotations

from botec.graph import Given

__all__ = ["runtime_given"]


def _cuda(stack_name: str, device) -> bool:
    """A PyTorch stack (every stack but XLA) on a catalog NVIDIA accelerator: the CUDA runtime's measurements hold."""
    return device is not None and device.vendor == "NVIDIA" and stack_name != "xla"


def runtime_given(contract, stack_name: str, device, stated) -> dict[str, Given]:
    """``runtime_buffer_bytes`` (outside the allocator) and ``allocator_workspace_bytes`` (inside it) for the stack on
    the accelerator: the CUDA context and the cuBLAS + cuBLASLt workspaces of one training stream on PyTorch over
    CUDA, the lesson's placeholder and no workspace otherwise; a stated runtime_buffer wins."""
    from botec.catalog import device_runtime

    runtime = device_runtime()
    field = "assumptions.runtime_buffer"
    cuda = _cuda(stack_name, device)
    if contract.assumptions.runtime_buffer is not None:
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
        cublas = float(runtime["cuda"]["cublas_workspace_bytes"]["value"])
        by_family = runtime["cuda"]["cublaslt_workspace_bytes"]
        cublaslt = float(by_family.get(device.family, by_family["default"]))
        workspace = Given(cublas + cublaslt, "catalog",
                          f"cuBLAS {cublas / 2**20:.3g} MiB + cuBLASLt {cublaslt / 2**20:.3g} MiB ({device.family}) "
                          f"for the training stream: {runtime['cuda']['cublas_workspace_bytes']['source']}",
                          "supply.accelerator")
    else:
        workspace = Given(0.0, "assumed", "no measured workspace for this runtime (inside the placeholder buffer)",
                          "supply.accelerator")
    return {"runtime_buffer_bytes": outside, "allocator_workspace_bytes": workspace}
