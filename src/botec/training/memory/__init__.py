"""Accelerator memory: persistent training state, activations, buffers, headroom.

Sources: lesson 000 ("Accelerator memory: separate persistent state from the batch-dependent
peak"); ZeRO sharding of the state: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models" (section 5: 7.5B parameters on 64 ranks need 120 GB,
31.4 GB, 16.6 GB, 1.9 GB for DP, ZeRO-1, -2, -3); activations per layer: Korthikanti et al.
2022, "Reducing Activation Recomputation in Large Transformer Models" (table 2).

Parameters are split over tensor (t) and pipeline (p) ranks, experts also over expert-parallel
ranks (e) (:mod:`botec.formulas.weights`); ZeRO then shards the state of each over its sharding
group (the data-parallel ranks, or a smaller group for hybrid sharding; experts over that group / e).

The memory savers (:mod:`.savers`): the optimizer offloaded to the CPU (ZeRO-Offload, Ren
et al. 2021; FSDP CPUOffload) and the weight shards with it; paged optimizers (Dettmers et al.
2023, "QLoRA" §3); activation offloading (torchtune); full recomputation of a share of the layers
(Megatron's --recompute-num-layers); FSDP/ZeRO-3's gathered layers (Zhao et al. 2023, "PyTorch
FSDP" §3); the caching allocator's reserve. The plan is then

    allocated = state + activations + workspaces + gather buffers − offloaded      (torch.cuda.max_memory_allocated)
    planned   = (allocated + reserve + runtime buffer − paged out) × (1 + headroom)

the runtime buffer being what the runtime holds outside the allocator (the CUDA context), and host memory is an account of its own (per accelerator and per node, against supply.host_memory).

The account's inputs are declared here; its formulas in four parts, listed in ``PARTS`` in the graph's order:
:mod:`.state` (weights, gradients, optimizer state, as sharded), :mod:`.activations`, :mod:`.savers` (offloading,
FSDP's gather buffers) and :mod:`.plan` (allocated, reserve, paging, headroom, host memory, the largest micro-batch).
"""

from botec.graph import Formulas
from botec.training.memory.activations import formulas as activations_formulas
from botec.training.memory.plan import formulas as plan_formulas
from botec.training.memory.savers import formulas as savers_formulas
from botec.training.memory.state import formulas as state_formulas

# The memory account's inputs: the parts below read them.
inputs = Formulas(account="memory")

inputs.input("loss_activation_bytes_per_logit", unit="B", detail=True,
             meaning="bytes the cross entropy keeps per logit for the backward (4 fused FP32; 10 for the unfused "
                     "Hugging Face loss; 6.5 chunked, 2.25 compiled; 0 fused-linear)")
inputs.input("gradient_bytes_per_parameter", unit="B/parameter",
             meaning="bytes of the gradients per parameter")
inputs.input("master_weight_bytes_per_parameter", unit="B/parameter",
             meaning="bytes of the higher-precision master weights per parameter")
inputs.input("optimizer_state_bytes_per_parameter", unit="B/parameter",
             meaning="bytes of the optimizer's moments per parameter")
inputs.input("zero_stage", unit="1",
             meaning="ZeRO stage: 0 replicates the state, 1 shards optimizer state, 2 also gradients, 3 also weights")
inputs.input("sharding_degree", unit="1",
             meaning="ranks a ZeRO/FSDP shard group spans (DP; fewer for hybrid sharding)")
inputs.input("sequence_parallel", unit="1",
             meaning="1 when sequence parallelism splits the TP region's activations over the TP ranks")
inputs.input("saved_tensor_factor", unit="1",
             meaning="hidden-state-sized tensors retained per layer for the backward pass (placeholder)")
inputs.input("runtime_buffer_bytes", unit="B",
             meaning="the runtime's memory outside PyTorch's allocator per accelerator (the CUDA context): in the "
                     "planned memory, not in torch.cuda.max_memory_allocated")
inputs.input("allocator_workspace_bytes", unit="B", detail=True,
             meaning="workspaces the caching allocator holds for the libraries (cuBLAS, cuBLASLt): part of the "
                     "allocated peak")
inputs.input("pipeline_activation_layers", unit="layers",
             meaning="layers' worth of activations the busiest stage keeps under 1F1B: max over stages i of (p − i)·L_i")
inputs.input("headroom", unit="1",
             meaning="extra share of planned memory kept free for peaks and fragmentation")
# The memory savers (issue 13): offloading to host memory, paged optimizers, FSDP's gather buffers, the allocator.
inputs.input("optimizer_offload_cpu", unit="1",
             meaning="1 when the master weights, optimizer moments and FP32 gradients live in host memory and the "
                     "CPU steps the optimizer (ZeRO-Offload, FSDP CPUOffload), else 0")
inputs.input("optimizer_offload_paged", unit="1",
             meaning="1 when the optimizer state is paged: in unified memory, evicted to host memory only when the "
                     "device runs short (bitsandbytes paged optimizers), else 0")
inputs.input("parameter_offload", unit="1",
             meaning="1 when the weight shards live in host memory (ZeRO-3 offload_param, FSDP "
                     "CPUOffload(offload_params=True)), else 0")
inputs.input("activation_offload", unit="fraction",
             meaning="share of the retained activations copied to host memory until the backward needs them")
inputs.input("fsdp_prefetch", unit="layers",
             meaning="ZeRO-3/FSDP units gathered ahead of the one computing (each one more unsharded layer)")
inputs.input("gradients_freed_between_steps", unit="1", detail=True,
             meaning="1 when the stack drops every gradient after the optimizer step (zero_grad(set_to_none=True)), "
                     "0 when it keeps persistent gradient buffers")
inputs.input("allocator_reserve", unit="1",
             meaning="memory the caching allocator reserves beyond the allocated peak, as a share of it")


# The parts in the order the TRAINING graph lists them (a report lists the quantities in that order).
PARTS = (inputs, state_formulas, activations_formulas, savers_formulas, plan_formulas)
