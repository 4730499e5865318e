"""Memory, the plan: what the device's tensors occupy, the allocator's reserve, paging, the headroom, host memory.

    allocated = state + activations + workspaces + gather buffers − offloaded
                − the gradients never alive with the activations              (torch.cuda.max_memory_allocated)
    planned   = (allocated + reserve + runtime buffer − paged out) × (1 + headroom)

against the device's memory (what is spare, the largest micro-batch that fits), and the host memory a node's
accelerators take, against supply.host_memory.
"""

from botec.graph import Formulas, ceil, floor, maximum, minimum, where

formulas = Formulas(account="memory")

# A paged optimizer's state moves between device and host in whole pages: 2 MiB, the GPU's large page.
UNIFIED_MEMORY_PAGE_BYTES = 2.0**21


@formulas.formula(unit="B", meaning="gradients the backward allocates as it frees the activations: none are alive at "
                                    "the forward's end",
                  expression="gradient_memory_bytes × (1 − optimizer_offload_cpu) if gradients_freed_between_steps"
                             " and gradient_accumulation_steps ≤ 1 and (data_parallel_degree ≤ 1 or zero_stage ≥ 2)"
                             " else 0",
                  source="PyTorch's optimizer.zero_grad(set_to_none=True) (the default since 2.0; torchtune's recipes "
                         "call it) leaves no gradient after a step; without gradient accumulation the next backward "
                         "creates them layer by layer while it releases each layer's saved activations. Not under "
                         "DDP's replicated buckets (persistent, full size) nor persistent stack buffers "
                         "(stacks.yaml gradients: kept)",
                  detail=True, choice=("activations", "korthikanti"))
def transient_gradient_bytes(gradient_memory_bytes, optimizer_offload_cpu, gradients_freed_between_steps,
                             gradient_accumulation_steps, data_parallel_degree, zero_stage):
    freed = ((gradients_freed_between_steps > 0) & (gradient_accumulation_steps <= 1)
             & ((data_parallel_degree <= 1) | (zero_stage >= 2)))
    return where(freed, gradient_memory_bytes * (1 - optimizer_offload_cpu), 0.0)


@formulas.formula(unit="B", meaning="gradients the backward allocates as it frees the activations (the lesson's "
                                    "first pass: none, state and activations summed)",
                  expression="0", source="lesson 000: the state and the batch-dependent peak are added",
                  detail=True, choice=("activations", "saved_tensor_factor"))
def transient_gradient_bytes(gradient_memory_bytes):  # noqa: F811
    return 0.0 * gradient_memory_bytes


@formulas.formula(unit="B", meaning="gradients and activations never on the device together: the smaller of the "
                                    "gradients the backward creates and the activations it frees",
                  expression="min(transient_gradient_bytes, activation_bytes − offloaded_activation_bytes)",
                  source="the backward's peak is at its start (every activation, no gradient) or at its end (every "
                         "gradient, no activation): state − G + max(G, A) = state + A − min(G, A)",
                  zero_when="transient_gradient_bytes == 0", detail=True)
def gradient_activation_overlap_bytes(transient_gradient_bytes, activation_bytes, offloaded_activation_bytes):
    return minimum(transient_gradient_bytes, activation_bytes - offloaded_activation_bytes)


@formulas.formula(unit="B", meaning="what the allocator holds at the peak: state, activations, workspaces and "
                                    "buffers, less what lives in host memory (torch.cuda.max_memory_allocated)",
                  expression="state_bytes + activation_bytes + allocator_workspace_bytes + fsdp_gather_buffer_bytes"
                             " − offloaded_state_bytes − offloaded_activation_bytes − gradient_activation_overlap_bytes",
                  source="lesson 000: 16 + 2.15 = 18.2 GB (its 2 GB of buffers outside the allocator); PyTorch's "
                         "CUDA semantics: the cuBLAS workspaces come from the caching allocator, the CUDA context "
                         "does not")
def allocated_device_bytes(state_bytes, activation_bytes, allocator_workspace_bytes, fsdp_gather_buffer_bytes,
                           offloaded_state_bytes, offloaded_activation_bytes, gradient_activation_overlap_bytes):
    return (state_bytes + activation_bytes + allocator_workspace_bytes + fsdp_gather_buffer_bytes
            - offloaded_state_bytes - offloaded_activation_bytes - gradient_activation_overlap_bytes)


@formulas.formula(unit="B", meaning="memory the caching allocator reserves beyond the allocated peak (fragmentation)",
                  expression="allocator_reserve × allocated_device_bytes",
                  source="PyTorch's caching allocator: torch.cuda.max_memory_reserved − max_memory_allocated",
                  zero_when="allocator_reserve == 0")
def allocator_reserve_bytes(allocator_reserve, allocated_device_bytes):
    return allocator_reserve * allocated_device_bytes


@formulas.formula(unit="B", meaning="optimizer state a paged optimizer may evict to host memory",
                  expression="optimizer_memory_bytes", zero_when="optimizer_offload_paged == 0", detail=True)
def pageable_optimizer_bytes(optimizer_memory_bytes):
    return optimizer_memory_bytes


@formulas.formula(unit="B", meaning="optimizer state paged out to host memory at the peak: what the plan cannot "
                                    "hold on the device, at most the optimizer state",
                  expression="min(pageable_optimizer_bytes, 2,097,152 × ⌈max(0, allocated_device_bytes"
                             " + allocator_reserve_bytes + runtime_buffer_bytes − device_memory_bytes / (1 + headroom))"
                             " / 2,097,152⌉)",
                  source="Dettmers et al. 2023, 'QLoRA' §3 (Paged Optimizers): the optimizer state is in NVIDIA "
                         "unified memory, evicted to CPU RAM when the GPU runs short and paged back for the update; "
                         "'fits' then means fits once up to all of it is paged out, the headroom kept. Whole 2 MiB "
                         "pages (the GPU's large page), which also keeps a plan that pages within the device",
                  zero_when="optimizer_offload_paged == 0")
def paged_optimizer_spill_bytes(pageable_optimizer_bytes, allocated_device_bytes, allocator_reserve_bytes,
                                runtime_buffer_bytes, device_memory_bytes, headroom):
    short = (allocated_device_bytes + allocator_reserve_bytes + runtime_buffer_bytes
             - device_memory_bytes / (1 + headroom))
    return minimum(pageable_optimizer_bytes, UNIFIED_MEMORY_PAGE_BYTES * ceil(maximum(short, 0.0)
                                                                               / UNIFIED_MEMORY_PAGE_BYTES))


@formulas.formula(unit="B", meaning="planned memory per accelerator, headroom included",
                  expression="(allocated_device_bytes + allocator_reserve_bytes + runtime_buffer_bytes"
                             " − paged_optimizer_spill_bytes) × (1 + headroom)",
                  source="lesson 000: (16 + 2.15 + 2) × 1.25 ≈ 25.2 GB")
def planned_device_bytes(allocated_device_bytes, allocator_reserve_bytes, runtime_buffer_bytes,
                         paged_optimizer_spill_bytes, headroom):
    """M_planned = (M_allocated + allocator reserve + M_runtime − paged out) × (1 + headroom): the allocator's peak,
    its slack, and the runtime's memory outside it (the CUDA context), which nvidia-smi counts and torch.cuda does
    not."""
    return (allocated_device_bytes + allocator_reserve_bytes + runtime_buffer_bytes
            - paged_optimizer_spill_bytes) * (1 + headroom)


@formulas.formula(unit="accelerators", meaning="accelerators of the job on one node: they share its host memory",
                  expression="min(accelerators, accelerators_per_node)", detail=True)
def accelerators_sharing_host(accelerators, accelerators_per_node):
    return minimum(accelerators, accelerators_per_node)


@formulas.formula(unit="B", meaning="host memory one accelerator's offloading takes at the peak",
                  expression="host_state_bytes + offloaded_activation_bytes + paged_optimizer_spill_bytes")
def host_bytes_per_accelerator(host_state_bytes, offloaded_activation_bytes, paged_optimizer_spill_bytes):
    return host_state_bytes + offloaded_activation_bytes + paged_optimizer_spill_bytes


@formulas.formula(unit="B", meaning="host memory one node needs: its accelerators' offloading and any staged "
                                    "asynchronous checkpoint",
                  expression="host_bytes_per_accelerator × accelerators_sharing_host"
                             " + checkpoint_host_memory_bytes_per_node",
                  source="the node's accelerators share its host memory (DeepSpeed's estimators: per CPU node)")
def host_bytes_per_node(host_bytes_per_accelerator, accelerators_sharing_host, checkpoint_host_memory_bytes_per_node):
    return host_bytes_per_accelerator * accelerators_sharing_host + checkpoint_host_memory_bytes_per_node


@formulas.formula(unit="B", meaning="host memory of a node left after offloading (negative: it does not fit)",
                  expression="host_memory_bytes − host_bytes_per_node")
def host_memory_spare_bytes(host_memory_bytes, host_bytes_per_node):
    return host_memory_bytes - host_bytes_per_node


@formulas.formula(unit="B", meaning="the headroom part of the planned memory", detail=True,
                  expression="planned_device_bytes × headroom / (1 + headroom)")
def memory_headroom_bytes(planned_device_bytes, headroom):
    return planned_device_bytes * headroom / (1 + headroom)


@formulas.formula(unit="B", meaning="device memory left after the plan (negative: does not fit)",
                  expression="device_memory_bytes − planned_device_bytes")
def memory_spare_bytes(device_memory_bytes, planned_device_bytes):
    return device_memory_bytes - planned_device_bytes


@formulas.formula(unit="B", meaning="device memory left after the plan without its headroom (negative: its "
                                    "allocations do not fit the device; between 0 and the headroom: they fit only by "
                                    "eating the headroom, which the verdict fits_device accepts and fits does not)",
                  expression="device_memory_bytes − planned_device_bytes / (1 + headroom)",
                  source="the headroom is a planning margin (lesson 000: × 1.25 for peaks and fragmentation): a "
                         "plan fits with it kept (memory_spare_bytes ≥ 0); a published run that filled its device "
                         "fits the device (this ≥ 0), which is what botec validate checks")
def memory_spare_before_headroom_bytes(device_memory_bytes, planned_device_bytes, headroom):
    """M_device − M_planned / (1 + headroom): ≥ 0 the plan's allocations fit the device (``fits_device``); the plan
    fits (``fits``) when memory_spare_bytes ≥ 0 too, the headroom kept (:mod:`botec.findings.fit`)."""
    return device_memory_bytes - planned_device_bytes / (1 + headroom)


@formulas.formula(unit="1", meaning="planned memory over the device's memory (a ratio: above 1 the plan does not "
                                     "fit)",
                  expression="planned_device_bytes / device_memory_bytes", detail=True)
def memory_utilization(planned_device_bytes, device_memory_bytes):
    return planned_device_bytes / device_memory_bytes


@formulas.formula(unit="B", meaning="retained activations per sequence of the micro-batch, on the device",
                  expression="(activation_bytes − offloaded_activation_bytes) / micro_batch_size", detail=True)
def activation_bytes_per_sequence(activation_bytes, offloaded_activation_bytes, micro_batch_size):
    return (activation_bytes - offloaded_activation_bytes) / micro_batch_size


@formulas.formula(unit="sequences", meaning="largest micro-batch per accelerator that fits the plan",
                  expression="max(⌊(room + transient_gradient_bytes) / activation_bytes_per_sequence⌋, 0) if room ≥ 0"
                             " else 0, room = (device_memory_bytes / (1 + headroom) + pageable_optimizer_bytes"
                             " − runtime_buffer_bytes) / (1 + allocator_reserve) − state_bytes"
                             " − allocator_workspace_bytes − fsdp_gather_buffer_bytes + offloaded_state_bytes",
                  prose=True)
def max_micro_batch_size(device_memory_bytes, headroom, pageable_optimizer_bytes, allocator_reserve, state_bytes,
                         runtime_buffer_bytes, allocator_workspace_bytes, fsdp_gather_buffer_bytes,
                         offloaded_state_bytes, transient_gradient_bytes, activation_bytes_per_sequence):
    """The planned-memory equation solved for B_local, rounded down (0 when even the state does not fit): the
    activations on the device grow with the micro-batch; a paged optimizer may give up all its state to make room;
    gradients the backward creates as it frees the activations leave that much room to activations at no cost."""
    room = ((device_memory_bytes / (1 + headroom) + pageable_optimizer_bytes - runtime_buffer_bytes)
            / (1 + allocator_reserve) - state_bytes - allocator_workspace_bytes - fsdp_gather_buffer_bytes
            + offloaded_state_bytes)
    return where(room >= 0, maximum(floor((room + transient_gradient_bytes) / activation_bytes_per_sequence), 0), 0)
