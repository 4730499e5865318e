"""Accelerator memory: persistent training state, activations, buffers, headroom.

Source: lesson 000 ("Accelerator memory: separate persistent state from the batch-dependent
peak"); ZeRO sharding of the state: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
Toward Training Trillion Parameter Models".
"""

from botec.quantities import declare_input, floor, formula, maximum, where

declare_input("device_memory_bytes", account="memory", unit="B",
              meaning="memory of one accelerator")
declare_input("weight_bytes_per_parameter", account="memory", unit="B/parameter",
              meaning="bytes of the working weights per parameter")
declare_input("gradient_bytes_per_parameter", account="memory", unit="B/parameter",
              meaning="bytes of the gradients per parameter")
declare_input("master_weight_bytes_per_parameter", account="memory", unit="B/parameter",
              meaning="bytes of the higher-precision master weights per parameter")
declare_input("optimizer_state_bytes_per_parameter", account="memory", unit="B/parameter",
              meaning="bytes of the optimizer's moments per parameter")
declare_input("zero_stage", account="memory", unit="1",
              meaning="ZeRO stage: 0 replicates the state, 1 shards optimizer state, 2 also gradients, 3 also weights")
declare_input("activation_bytes_per_element", account="memory", unit="B",
              meaning="bytes per activation element (b; 2 for BF16)")
declare_input("saved_tensor_factor", account="memory", unit="1",
              meaning="hidden-state-sized tensors retained per layer for the backward pass (placeholder)")
declare_input("runtime_buffer_bytes", account="memory", unit="B",
              meaning="runtime and temporary buffers per accelerator")
declare_input("headroom", account="memory", unit="1",
              meaning="extra share of planned memory kept free for peaks and fragmentation")


@formula(account="memory", unit="1", meaning="ways the working weights are split (ZeRO-3 / FSDP full shard)",
         expression="data_parallel_degree if zero_stage ≥ 3 else 1")
def weight_shards(zero_stage, data_parallel_degree):
    return where(zero_stage >= 3, data_parallel_degree, 1)


@formula(account="memory", unit="1", meaning="ways the gradients are split (ZeRO-2 and up)",
         expression="data_parallel_degree if zero_stage ≥ 2 else 1")
def gradient_shards(zero_stage, data_parallel_degree):
    return where(zero_stage >= 2, data_parallel_degree, 1)


@formula(account="memory", unit="1", meaning="ways master weights and optimizer moments are split (ZeRO-1 and up)",
         expression="data_parallel_degree if zero_stage ≥ 1 else 1")
def optimizer_shards(zero_stage, data_parallel_degree):
    return where(zero_stage >= 1, data_parallel_degree, 1)


@formula(account="memory", unit="B/parameter",
         meaning="persistent training state per parameter held on one accelerator",
         expression="weight_bytes_per_parameter / weight_shards + gradient_bytes_per_parameter / gradient_shards"
                    " + (master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter) / optimizer_shards",
         source="lesson 000 table: 2 + 2 + 4 + 4 + 4 = 16 for Adam in mixed precision; ZeRO divides by DP")
def state_bytes_per_parameter(weight_bytes_per_parameter, weight_shards, gradient_bytes_per_parameter,
                              gradient_shards, master_weight_bytes_per_parameter,
                              optimizer_state_bytes_per_parameter, optimizer_shards):
    """s = w/n_w + g/n_g + (m + o)/n_o bytes per parameter (n: shard counts)."""
    return (weight_bytes_per_parameter / weight_shards
            + gradient_bytes_per_parameter / gradient_shards
            + (master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter) / optimizer_shards)


@formula(account="memory", unit="B", meaning="persistent training state per accelerator",
         expression="parameters × state_bytes_per_parameter",
         source="lesson 000: 10⁹ × 16 B = 16 GB")
def state_bytes(parameters, state_bytes_per_parameter):
    """M_state = P × s."""
    return parameters * state_bytes_per_parameter


@formula(account="memory", unit="B", meaning="one hidden-state tensor at one layer",
         expression="micro_batch_size × sequence_length × hidden_size × activation_bytes_per_element",
         source="lesson 000: 2 × 2,048 × 2,048 × 2 ≈ 16.8 MB")
def hidden_state_bytes(micro_batch_size, sequence_length, hidden_size, activation_bytes_per_element):
    """M_hidden = B_local × S × H × b."""
    return micro_batch_size * sequence_length * hidden_size * activation_bytes_per_element


@formula(account="memory", unit="B", meaning="activations retained for the backward pass",
         expression="layers × saved_tensor_factor × hidden_state_bytes",
         source="lesson 000: 16 × 8 × 16.8 MB ≈ 2.15 GB (the factor 8 is a placeholder)")
def activation_bytes(layers, saved_tensor_factor, hidden_state_bytes):
    """M_act = L × k × M_hidden, k the saved-tensor factor (replace with a measured peak)."""
    return layers * saved_tensor_factor * hidden_state_bytes


@formula(account="memory", unit="B", meaning="planned memory per accelerator, headroom included",
         expression="(state_bytes + activation_bytes + runtime_buffer_bytes) × (1 + headroom)",
         source="lesson 000: (16 + 2.15 + 2) × 1.25 ≈ 25.2 GB")
def planned_device_bytes(state_bytes, activation_bytes, runtime_buffer_bytes, headroom):
    """M_planned = (M_state + M_act + M_buffers) × (1 + headroom)."""
    return (state_bytes + activation_bytes + runtime_buffer_bytes) * (1 + headroom)


@formula(account="memory", unit="B", meaning="device memory left after the plan (negative: does not fit)",
         expression="device_memory_bytes − planned_device_bytes")
def memory_spare_bytes(device_memory_bytes, planned_device_bytes):
    return device_memory_bytes - planned_device_bytes


@formula(account="memory", unit="fraction", meaning="planned memory as a share of the device's memory",
         expression="planned_device_bytes / device_memory_bytes")
def memory_utilization(planned_device_bytes, device_memory_bytes):
    return planned_device_bytes / device_memory_bytes


@formula(account="memory", unit="B", meaning="retained activations per sequence of the micro-batch",
         expression="activation_bytes / micro_batch_size")
def activation_bytes_per_sequence(activation_bytes, micro_batch_size):
    return activation_bytes / micro_batch_size


@formula(account="memory", unit="sequences", meaning="largest micro-batch per accelerator that fits the plan",
         expression="⌊(device_memory_bytes / (1 + headroom) − state_bytes − runtime_buffer_bytes)"
                    " / activation_bytes_per_sequence⌋")
def max_micro_batch_size(device_memory_bytes, headroom, state_bytes, runtime_buffer_bytes,
                         activation_bytes_per_sequence):
    """The planned-memory equation solved for B_local, rounded down (0 when even the state does not fit)."""
    room = device_memory_bytes / (1 + headroom) - state_bytes - runtime_buffer_bytes
    return maximum(floor(room / activation_bytes_per_sequence), 0)
