"""The memory savers of issue 13: optimizer offload to the CPU, paged optimizers, activation offloading, partial
recomputation, FSDP's gather buffers and the allocator's reserve, each against a hand derivation (and DeepSpeed's
published memory estimators where they apply)."""

from __future__ import annotations

import pytest

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate

# Llama 2-7B (Touvron et al. 2023, Table 1): h = 4,096, 32 layers, gated MLP of 11,008, vocabulary 32,000.
P = 6_738_415_616
H, F, L, V = 4096, 11008, 32, 32000
# One transformer block: Q, K, V, O (4·h²) + gate, up, down (3·h·f) + two RMSNorms (2·h).
LAYER = 4 * H * H + 3 * H * F + 2 * H
LINK = 25e9                                  # stated host link, per direction (PCIe 4 x16, achieved)
# The runtime's own memory by default (catalog/runtime.yaml): the CUDA context outside the caching allocator
# (~400 MB, pytorch/pytorch#109888); inside it, cuBLAS's default workspace (:4096:2:16:8 = 8,519,680 B) and cuBLASLt's
# 4 MiB on an A100 (PyTorch #120925).
CUDA_CONTEXT = 4.0e8
A100_WORKSPACES = 8_519_680 + 4 * 2**20


def contract(strategy=None, supply=None, assumptions=None, count=8, sequence=4096, model="llama-2-7b"):
    return {"workload": {"model": model, "tokens": "1B", "sequence_length": sequence},
            "supply": {"accelerator": "a100-sxm-80gb", "count": count, "host_memory": "1 TB",
                       "host_link_bandwidth": "25 GB/s", **(supply or {})},
            "strategy": {"micro_batch_size": 1, "recompute": "full", **(strategy or {})},
            "assumptions": assumptions or {}}


def run(data):
    return estimate(parse_contract(data))


def values(data):
    return {name: q.value for name, q in run(data).quantities.items()}


def test_one_llama_block_is_the_published_shape():
    assert LAYER == 202_383_360
    q = values(contract({"fsdp": "full_shard"}))
    assert q["gathered_layer_parameters"] == LAYER


# --- optimizer offload to the CPU (ZeRO-Offload) --------------------------------------------------------------

def test_optimizer_offload_llama2_7b_on_8_gpus_zero3():
    """Adam in mixed precision, FSDP full shard on 8 GPUs, optimizer offloaded (ZeRO-Offload, Ren et al. 2021):
    the device keeps its 2 B/parameter weight shard, P/8 × 2 B; gradients (2 B) and master weights and moments
    (12 B) leave it; the host keeps 12 B + 4 B of FP32 gradients per parameter of the shard, 16 B."""
    q = values(contract({"fsdp": "full_shard", "offload": {"optimizer": "cpu"}}))
    shard = P / 8
    assert q["state_bytes"] == pytest.approx(16 * shard)                  # the state as sharded, wherever it lives
    assert q["offloaded_state_bytes"] == pytest.approx((2 + 12) * shard)
    assert q["host_state_bytes"] == pytest.approx((12 + 4) * shard)
    assert q["host_bytes_per_accelerator"] == pytest.approx(16 * shard)   # 13.5 GB
    assert q["host_bytes_per_node"] == pytest.approx(16 * P)              # 8 GPUs on one node: 107.8 GB
    assert q["host_memory_spare_bytes"] == pytest.approx(1e12 - 16 * P)
    gather = 2 * LAYER * 2 + LAYER * 2                                    # prefetch 1: 2 blocks' weights, 1's gradients
    allocated = 2 * shard + q["activation_bytes"] + A100_WORKSPACES + gather   # weights + activations + gathers
    assert q["allocated_device_bytes"] == pytest.approx(allocated)
    # default headroom, no reserve, no paging; the CUDA context outside the allocator
    assert q["planned_device_bytes"] == pytest.approx((allocated + CUDA_CONTEXT) * 1.10)
    # Over PCIe per step (one micro-batch): the shard's 16-bit gradients down, its updated 16-bit weights up.
    assert q["gradient_accumulation_steps"] == 1
    assert q["host_gradient_bytes_per_step"] == pytest.approx(2 * shard)
    assert q["host_weight_bytes_per_step"] == pytest.approx(2 * shard)
    assert q["host_link_seconds"] == pytest.approx(4 * shard / LINK)
    # The node's CPUs update all 8 shards: P parameters at the assumed 4 × 10⁹ parameters/s (ZeRO-Offload's CPU-Adam)
    assert q["cpu_optimizer_step_seconds"] == pytest.approx(P / 4e9)
    assert q["optimizer_step_seconds"] == 0                              # the device runs no optimizer step
    # Gradients hide behind the backward; the CPU step and the weights' upload do not.
    hidden = min(2 * shard / LINK, q["microbatch_backward_seconds"])
    assert q["exposed_offload_seconds"] == pytest.approx(P / 4e9 + 2 * shard / LINK - hidden + 2 * shard / LINK)
    assert q["step_seconds"] == pytest.approx(q["compute_seconds_per_step"] + q["exposed_communication_seconds"]
                                              + q["exposed_offload_seconds"])


def test_parameter_offload_moves_the_weight_shards_and_every_gather_crosses_pcie():
    """FSDP CPUOffload(offload_params=True): the weight shard lives on the host too (18 B per parameter there); each
    of the 2 gathers per micro-batch (forward, backward) first copies the 2 B/parameter shard up."""
    q = values(contract({"fsdp": "full_shard", "gradient_accumulation_steps": 2,
                         "offload": {"optimizer": "cpu", "parameters": True}}))
    shard = P / 8
    assert q["offloaded_state_bytes"] == pytest.approx(16 * shard)        # nothing of the state stays on the device
    assert q["host_bytes_per_node"] == pytest.approx(18 * P)
    assert q["host_weight_bytes_per_step"] == pytest.approx(2 * 2 * 2 * shard)   # 2 gathers × 2 micro-batches
    assert q["host_gradient_bytes_per_step"] == pytest.approx(2 * 2 * shard)     # reduced every micro-batch
    upload = 8 * shard / LINK
    exposed = max(0.0, upload - 2 * q["microbatch_compute_seconds"])     # prefetched like the gathers themselves
    gradients = max(0.0, 4 * shard / LINK - 2 * q["microbatch_backward_seconds"])
    assert q["exposed_offload_seconds"] == pytest.approx(P / 4e9 + gradients + exposed)


# DeepSpeed's published estimators, as in deepspeed/runtime/zero/stage_1_and_2.py and stage3.py (documented on
# deepspeed.readthedocs.io, "Memory Requirements"), with additional_buffer_factor = 1 to compare the state itself.
def estimate_zero2_model_states_mem_needs(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
                                          additional_buffer_factor=1.5):
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 4 * total_params + int(16 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1,
                                          cpu_offload=True, cpu_offload_params=True, zero_init=True,
                                          additional_buffer_factor=1.5):
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


def _device_model_states(q):
    """What DeepSpeed's estimators count on the GPU: the state left on the device and the gathered layers."""
    return q["state_bytes"] - q["offloaded_state_bytes"] + q["fsdp_gather_buffer_bytes"]


def test_deepspeed_zero2_offload_estimator_agrees():
    """ZeRO-2 + offload_optimizer on one node of 4 GPUs: DeepSpeed counts 2·P per GPU (the unsharded 16-bit
    weights) and 16·P on the CPU (max(4 × 4, 16) = 16: the steady state, not the 4 B/parameter loading peak)."""
    cpu, gpu = estimate_zero2_model_states_mem_needs(P, num_gpus_per_node=4, cpu_offload=True,
                                                     additional_buffer_factor=1)
    q = values(contract({"zero_stage": 2, "offload": {"optimizer": "cpu"}}, count=4))
    assert _device_model_states(q) == pytest.approx(gpu)
    assert q["host_bytes_per_node"] == pytest.approx(cpu)


@pytest.mark.parametrize("parameters", [False, True])
def test_deepspeed_zero3_offload_estimator_agrees(parameters):
    """ZeRO-3 on one node of 8 GPUs with offload_optimizer (and offload_param), zero_init: DeepSpeed counts
    4 B per parameter of the largest layer on the GPU (its 16-bit weights and gradients, gathered) plus 2·P/8
    without offload_param, and 16·P (18·P with offload_param) on the CPU. Its largest layer is what the FSDP unit
    is here, one block; with fsdp_prefetch 0 no second block is gathered ahead."""
    cpu, gpu, _ = estimate_zero3_model_states_mem_needs(P, LAYER, num_gpus_per_node=8, cpu_offload=True,
                                                        cpu_offload_params=parameters, additional_buffer_factor=1)
    q = values(contract({"fsdp": "full_shard", "fsdp_prefetch": 0,
                         "offload": {"optimizer": "cpu", "parameters": parameters}}))
    assert _device_model_states(q) == pytest.approx(gpu)
    assert q["host_bytes_per_node"] == pytest.approx(cpu)


# --- FSDP / ZeRO-3 gather buffers --------------------------------------------------------------------------

def test_fsdp_gather_buffer_llama2_7b():
    """One block of 202,383,360 parameters: the block computing and the one prefetched (2 × 2 B) and one block's
    16-bit gradients before their reduce-scatter (2 B): 6 B × 202,383,360 = 1.21 GB."""
    q = values(contract({"fsdp": "full_shard"}))
    assert q["fsdp_prefetch"] == 1
    assert q["fsdp_gather_buffer_bytes"] == pytest.approx(2 * LAYER * 2 + LAYER * 2) == 1_214_300_160
    deeper = values(contract({"fsdp": "full_shard", "fsdp_prefetch": 2}))
    assert deeper["fsdp_gather_buffer_bytes"] == pytest.approx(3 * LAYER * 2 + LAYER * 2)
    split = values(contract({"fsdp": "full_shard", "tensor_parallel": 2}))     # TP splits each block's matrices
    assert split["gathered_layer_parameters"] == pytest.approx(LAYER / 2)
    assert values(contract({"zero_stage": 2}))["fsdp_gather_buffer_bytes"] == 0   # weights stay whole


def test_fsdp_unit_of_a_moe_model_holds_the_local_experts():
    """Mixtral 8x7B (h 4,096, GQA 32/8 of 128, 8 experts of 3 × 4,096 × 14,336): one MoE block is attention
    2 × 4,096² + 2 × 4,096 × 1,024, two norms, the router 4,096 × 8, and with EP 8 one expert per rank."""
    q = values(contract({"fsdp": "full_shard", "expert_parallel": 8}, model="mixtral-8x7b", sequence=2048))
    block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 2 * 4096 + 4096 * 8
    assert q["gathered_layer_parameters"] == pytest.approx(block + 3 * 4096 * 14336)


# --- the allocator's reserve and the paged optimizer ------------------------------------------------------

LESSON = {"workload": {"model": {"parameters": "1B", "layers": 16, "hidden_size": 2048}, "tokens": "1B",
                       "sequence_length": 2048},
          "supply": {"accelerator": {"name": "24 GB card", "peak_flops_per_s": "200 TFLOP/s", "memory": "24 GB"},
                     "count": 1, "host_memory": "64 GB", "host_link_bandwidth": "25 GB/s"},
          "strategy": {"micro_batch_size": 2, "optimizer": "adam-mixed"},
          "assumptions": {"activation_model": "saved_tensor_factor", "step_time_model": "efficiency",
                          "runtime_buffer": "2 GB", "headroom": 0.25}}
# The lesson's job on one 24 GB card: state 16 GB, activations 16 × 8 × 2 × 2,048 × 2,048 × 2 B (what the allocator
# holds), buffers 2 GB (stated: outside the allocator; an inline accelerator has no workspaces of its own).
ACTIVATIONS = 16 * 8 * 2 * 2048 * 2048 * 2
ALLOCATED = 16e9 + ACTIVATIONS
BUFFER = 2e9


def _with(data, **sections):
    import copy

    out = copy.deepcopy(data)
    for section, fields in sections.items():
        out[section] = {**out[section], **fields}
    return out


def test_allocator_reserve_is_a_named_line_inside_the_plan():
    q = values(_with(LESSON, assumptions={**LESSON["assumptions"], "allocator_reserve": 0.10},
                     supply={"accelerator": {"name": "80 GB", "peak_flops_per_s": "200 TFLOP/s", "memory": "80 GB"}}))
    assert q["allocator_reserve_bytes"] == pytest.approx(0.10 * ALLOCATED)
    assert q["planned_device_bytes"] == pytest.approx((1.10 * ALLOCATED + BUFFER) * 1.25)
    # the largest micro-batch: ((80 GB / 1.25 − 2 GB) / 1.1 − 16 GB) / (activations per sequence), rounded down
    assert q["max_micro_batch_size"] == int(((80e9 / 1.25 - BUFFER) / 1.1 - 16e9) / (ACTIVATIONS / 2))
    unstated = values(LESSON)
    assert unstated["allocator_reserve_bytes"] == 0 and unstated["allocator_reserve"] == 0


def test_paged_optimizer_pages_out_what_the_plan_cannot_hold():
    """Without paging the plan is 20.15 GB × 1.25 = 25.2 GB on a 24 GB card: it does not fit. Paged, the optimizer
    state pages out until it does: 20.15 GB − 24 GB / 1.25 = 0.947 GB, in whole 2 MiB pages, at most its 12 GB;
    it moves out and back every step over the host link."""
    plain = values(LESSON)
    assert plain["planned_device_bytes"] == pytest.approx((ALLOCATED + BUFFER) * 1.25)
    assert plain["memory_spare_bytes"] < 0
    paged = _with(LESSON, strategy={**LESSON["strategy"], "offload": {"optimizer": "paged"}})
    result = run(paged)
    q = {name: quantity.value for name, quantity in result.quantities.items()}
    page = 2 ** 21
    spill = page * -(-(ALLOCATED + BUFFER - 24e9 / 1.25) // page)
    assert q["paged_optimizer_spill_bytes"] == pytest.approx(spill)
    assert 0.947e9 < spill < 0.947e9 + page
    assert q["planned_device_bytes"] == pytest.approx((ALLOCATED + BUFFER - spill) * 1.25)
    assert result.fits and q["memory_spare_bytes"] >= 0
    assert q["host_bytes_per_accelerator"] == pytest.approx(spill)
    assert q["paged_optimizer_bytes_per_step"] == pytest.approx(2 * spill)
    assert q["paged_optimizer_seconds"] == pytest.approx(2 * spill / LINK)
    # what fits now: (24 GB / 1.25 + 12 GB of pageable state − 16 GB − 2 GB) / activations per sequence
    assert q["max_micro_batch_size"] == int((24e9 / 1.25 + 12e9 - 18e9) / (ACTIVATIONS / 2))
    # a 16 GB card cannot hold even the rest: 20.15 − 12 GB = 8.15 GB × 1.25 = 10.2 GB fits, a 8 GB card does not
    small = _with(paged, supply={**paged["supply"], "accelerator": {"name": "8 GB", "peak_flops_per_s": "200 TFLOP/s",
                                                                     "memory": "8 GB"}})
    q_small = values(small | {"assumptions": {**LESSON["assumptions"]}})
    assert q_small["paged_optimizer_spill_bytes"] == pytest.approx(12e9)
    assert q_small["planned_device_bytes"] == pytest.approx((ALLOCATED + BUFFER - 12e9) * 1.25)
    assert q_small["memory_spare_bytes"] < 0


def test_paged_optimizer_that_fits_pages_nothing():
    q = values(_with(LESSON, strategy={**LESSON["strategy"], "offload": {"optimizer": "paged"}},
                     supply={**LESSON["supply"], "accelerator": {"name": "80 GB", "peak_flops_per_s": "200 TFLOP/s",
                                                                 "memory": "80 GB"}}))
    assert q["paged_optimizer_spill_bytes"] == 0 and q["host_link_bytes_per_step"] == 0


# --- activation offloading and partial recomputation -----------------------------------------------------

def test_activation_offloading_moves_the_blocks_not_the_logits_nor_the_recomputed_layer():
    """f = 0.5 on Llama 2-7B (s = 2,048, b = 1, full recomputation): each of the 32 blocks keeps its input, a = 2·s·b·h
    = 16,777,216 B; offloading sends half of every block's but the one whose backward runs to the host, 0.5 × 31 × a
    = 260,046,848 B. What stays on the device whatever f (torchtune: the output Linear runs under a NoOpManager, the
    recomputation saves outside the offloading hooks): the output layer's input and logits, and the layer being
    rematerialized, s·b·(10h + 2 × (4h + 3f)) = 286,261,248 B, never alive together (the loss's backward frees the
    logits before any layer is rebuilt): the larger, the output layer's. 2 × f × 32 × a crosses PCIe per
    micro-batch."""
    s, a = 2048, 2 * 2048 * H
    remat = s * (10 * H + 2 * (4 * H + 3 * F))
    assert (a, remat) == (16_777_216, 286_261_248)
    base = values(contract(sequence=2048))
    q = values(contract({"offload": {"activations": 0.5}}, sequence=2048))
    A, output = base["activation_bytes"], base["output_layer_activation_bytes"]
    assert q["activation_bytes_per_layer"] == a and q["rematerialized_layer_bytes"] == remat
    assert output > remat
    assert A == pytest.approx(32 * a + output)                          # the last stage: blocks, max(output, remat)
    assert q["activation_bytes"] == pytest.approx(A)                     # what the backward needs is unchanged
    assert q["offloaded_activation_bytes"] == pytest.approx(0.5 * 31 * a) == 260_046_848
    assert base["allocated_device_bytes"] - q["allocated_device_bytes"] == pytest.approx(0.5 * 31 * a)
    assert q["host_bytes_per_accelerator"] == pytest.approx(0.5 * 31 * a)
    assert q["host_activation_bytes_per_step"] == pytest.approx(2 * 0.5 * 32 * a) == 536_870_912
    transfer = 0.5 * 32 * a / LINK
    assert q["exposed_offload_seconds"] == pytest.approx(max(0.0, transfer - q["microbatch_compute_seconds"]))
    everything = values(contract({"offload": {"activations": 1}}, sequence=2048))
    # all of it: the device keeps one block's input (the one in flight) and the larger of the output layer and the
    # recomputed layer
    assert everything["allocated_device_bytes"] - everything["allocator_workspace_bytes"] \
        - everything["state_bytes"] - everything["fsdp_gather_buffer_bytes"] == pytest.approx(a + output)


def test_activation_offloading_on_a_pipeline_takes_the_busier_stage():
    """p = 4, 8 layers a stage, m = 8 micro-batches: the first stage holds p × 8 = 32 blocks' inputs (32·a), the last
    8·a and the output layer O. f = 1 leaves a on the first stage and a + O on the last, so the peak falls from
    max(32·a, 8·a + O) to a + O; each micro-batch moves its stage's 8 blocks down and back."""
    data = contract({"pipeline_parallel": 4, "global_batch_size": 16, "offload": {"activations": 1}}, sequence=2048)
    q = values(data)
    a, output = q["activation_bytes_per_layer"], q["output_layer_activation_bytes"]
    assert q["activation_layers_in_flight"] == 32 and q["last_stage_layers"] == 8
    assert q["offloaded_activation_bytes"] == pytest.approx(max(32 * a, 8 * a + output) - (a + output))
    assert q["host_activation_bytes_per_step"] == pytest.approx(2 * q["gradient_accumulation_steps"] * 8 * a)


def test_partial_recomputation_interpolates_between_the_rows():
    """φ = 0.5 of Llama 2-7B's layers recompute (s = 4,096, b = 1, t = 1, flash attention): half the layers keep
    their input 2·s·b·h, the other half everything, s·b·(10h + 2 × (attention width 4h + MLP width 3f))
    (Korthikanti et al. 2022, table 2, GQA/gated widths); recomputation work and time halve."""
    s, b = 4096, 1
    full_row = 2 * s * b * H
    none_row = s * b * (10 * H + 2 * (4 * H + 3 * F))
    assert (full_row, none_row) == (33_554_432, 572_522_496)
    all_layers = values(contract())
    half = values(contract({"recompute_layer_fraction": 0.5}))
    assert all_layers["activation_bytes_per_layer"] == pytest.approx(full_row)
    assert half["activation_bytes_per_layer"] == pytest.approx(0.5 * full_row + 0.5 * none_row)
    output_layer = s * b * (4 * H + 10 * V)          # the last stage's input; the unfused loss keeps 10 B per logit
    assert output_layer > none_row                   # the layer being rebuilt is never alive with the logits
    assert half["activation_bytes"] == pytest.approx(32 * (full_row + none_row) / 2 + output_layer)
    assert half["recompute_flops_per_token"] == pytest.approx(all_layers["recompute_flops_per_token"] / 2)
    assert half["layer_recompute_seconds"] == pytest.approx(all_layers["layer_recompute_seconds"] / 2)
    none = values(contract({"recompute": "none"}))
    assert half["hardware_flops_per_token"] == pytest.approx(
        (all_layers["hardware_flops_per_token"] + none["hardware_flops_per_token"]) / 2)


# --- nothing stated, nothing changes; bad input --------------------------------------------------------

def test_without_savers_every_new_term_is_zero():
    q = values(contract({"zero_stage": 1}, supply={"host_memory": None, "host_link_bandwidth": None}))
    for name in ("offloaded_state_bytes", "offloaded_activation_bytes", "fsdp_gather_buffer_bytes",
                 "allocator_reserve_bytes", "paged_optimizer_spill_bytes", "host_bytes_per_node",
                 "host_link_bytes_per_step", "exposed_offload_seconds", "cpu_optimizer_step_seconds"):
        assert q[name] == 0, name
    assert q["planned_device_bytes"] == pytest.approx(
        (q["state_bytes"] + q["activation_bytes"] + A100_WORKSPACES + CUDA_CONTEXT) * 1.10)


def test_offload_without_host_memory_names_the_field():
    data = contract({"fsdp": "full_shard", "offload": {"optimizer": "cpu"}}, supply={"host_memory": None})
    with pytest.raises(ContractError) as error:
        run(data)
    assert error.value.field == "supply.host_memory"
    assert "\n" not in str(error.value) and "host memory of one node" in str(error.value)


def test_offload_without_a_host_link_names_the_field():
    data = contract({"fsdp": "full_shard", "offload": {"activations": 0.5}},
                    supply={"host_link_bandwidth": None,
                            "accelerator": {"name": "card", "peak_flops_per_s": "100 TFLOP/s", "memory": "24 GB"}})
    with pytest.raises(ContractError) as error:
        run(data)
    assert error.value.field == "supply.host_link_bandwidth"


def test_parameter_offload_needs_zero3_and_the_cpu_optimizer():
    with pytest.raises(ContractError, match="parameter offloading keeps the weight shards on the host: it needs "
                                            "zero_stage 3"):
        parse_contract(contract({"zero_stage": 2, "offload": {"optimizer": "cpu", "parameters": True}}))
    with pytest.raises(ContractError) as error:
        run(contract({"fsdp": "full_shard", "offload": {"parameters": True}}))
    assert error.value.field == "strategy.offload.optimizer"


# --- with LoRA / QLoRA: the savers read the adapters' state -------------------------------------------------

QLORA = {"workload": {"model": "llama-3.1-8b", "tokens": "10M", "sequence_length": 4096},
         "supply": {"accelerator": "rtx-4090", "count": 1, "host_memory": "64 GB", "host_link_bandwidth": "25 GB/s"},
         "strategy": {"micro_batch_size": 4, "gradient_accumulation_steps": 2, "recompute": "full",
                      "optimizer": "adam-8bit", "loss": "fused",
                      "lora": {"rank": 64, "target_modules": "all-linear", "base_weights": "nf4"}},
         "assumptions": {"headroom": 0.15}}
# Llama 3.1 8B (h 4,096, GQA 32/8 of 128, gated MLP 14,336, 32 layers): r = 64 on all seven linear layers of a block
# is 64 × (2 × (4,096 + 4,096) + 2 × (4,096 + 1,024) + 3 × (4,096 + 14,336)) = 5,242,880 adapter parameters.
ADAPTERS_PER_BLOCK = 64 * (2 * (4096 + 4096) + 2 * (4096 + 1024) + 3 * (4096 + 14336))


def test_qlora_with_a_paged_optimizer_pages_the_adapters_state():
    """QLoRA's recipe (NF4 base, paged 8-bit AdamW, Dettmers et al. 2023 §3): what can page out is the adapters'
    optimizer state, two 8-bit moments per adapter parameter (FP32 adapters are their own master copy)."""
    assert ADAPTERS_PER_BLOCK == 5_242_880
    plain = values(QLORA)
    assert plain["trainable_parameters"] == 32 * ADAPTERS_PER_BLOCK
    assert plain["memory_spare_bytes"] < 0                 # 1.15 × (allocated + the CUDA context) is above 24 GB
    paged = values(_with(QLORA, strategy={**QLORA["strategy"], "offload": {"optimizer": "paged"}}))
    assert paged["pageable_optimizer_bytes"] == pytest.approx(2 * 32 * ADAPTERS_PER_BLOCK)     # 336 MB
    page = 2 ** 21
    short = paged["allocated_device_bytes"] + paged["runtime_buffer_bytes"] - 24e9 / 1.15
    assert 0 < short < paged["pageable_optimizer_bytes"]
    assert paged["paged_optimizer_spill_bytes"] == pytest.approx(page * -(-short // page))
    assert paged["memory_spare_bytes"] >= 0


def test_fsdp_gather_buffer_under_qlora_holds_the_nf4_block_and_its_adapters():
    """FSDP-QLoRA on 2 GPUs: a gathered Llama 3.1 8B block is 218,112,000 weights in NF4 with double quantization
    (0.5 + 1/64 + 4/(64 × 256) B each, QLoRA §3) and its 5,242,880 FP32 adapters; only the adapters have
    gradients."""
    q = values(_with(QLORA, supply={**QLORA["supply"], "count": 2}, strategy={**QLORA["strategy"],
                                                                               "fsdp": "full_shard"}))
    block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert q["gathered_layer_parameters"] == block == 218_112_000
    nf4 = 0.5 + 1 / 64 + 4 / (64 * 256)
    weights = block * nf4 + ADAPTERS_PER_BLOCK * 4
    assert q["fsdp_gather_buffer_bytes"] == pytest.approx(2 * weights + ADAPTERS_PER_BLOCK * 4)


# --- issue 19 item 6: fine-tuning memory that matches what runs ------------------------------------------------

def test_a_paged_optimizer_moves_its_pages_once_per_step_whatever_the_accumulation():
    """The pages leave at the first micro-batch's activation peak and come back for the optimizer update: once per
    step each way, 2 × spill, not once per micro-batch (the optimizer state is not touched between micro-batches).
    The lesson's job on 24 GB, paged: spill = ⌈(20.15 GB − 24 GB / 1.25) / 2 MiB⌉ pages, at 1 and at 4 micro-batches."""
    page = 2 ** 21
    spill = page * -(-(ALLOCATED + BUFFER - 24e9 / 1.25) // page)
    for steps in (1, 4):
        data = _with(LESSON, strategy={**LESSON["strategy"], "offload": {"optimizer": "paged"},
                                       "gradient_accumulation_steps": steps})
        q = values(data)
        assert q["gradient_accumulation_steps"] == steps
        assert q["paged_optimizer_spill_bytes"] == pytest.approx(spill)
        assert q["paged_optimizer_bytes_per_step"] == pytest.approx(2 * spill)
        assert q["host_link_bytes_per_step"] == pytest.approx(2 * spill)      # nothing else crosses the host link
        assert q["paged_optimizer_seconds"] == pytest.approx(2 * spill / LINK)


def test_the_gather_buffer_follows_the_unit_not_the_model_nor_the_shard_count():
    """ZeRO-3/FSDP gather one transformer block at a time (and prefetch the next): Llama-2-70B's block is 2 × 8,192²
    (Q, O) + 2 × 8,192 × 1,024 (K, V: 8 KV heads of 128) + 3 × 8,192 × 28,672 (gate, up, down) + 2 × 8,192 (norms)
    = 855,654,400 parameters; the buffer is 2 blocks' 16-bit weights and one block's 16-bit gradients, 6 B each
    (5.13 GB), on 8 ranks as on 64: it does not grow with the model's 69B parameters nor shrink with the shards.
    DeepSpeed's prefetch bucket (stage3_prefetch_bucket_size) stated as a share of a block: 0.25 → 1.25 blocks."""
    block = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    assert block == 855_654_400
    for count in (8, 64):
        q = values(contract({"fsdp": "full_shard"}, model="llama-2-70b", count=count, sequence=2048))
        assert q["gathered_layer_parameters"] == block
        assert q["fsdp_gather_buffer_bytes"] == pytest.approx(6 * block) == 5_133_926_400
    bucket = values(contract({"fsdp": "full_shard", "fsdp_prefetch": 0.25}))
    assert bucket["fsdp_gather_buffer_bytes"] == pytest.approx(1.25 * LAYER * 2 + LAYER * 2) == 910_725_120


def test_fitting_only_by_eating_the_headroom_does_not_fit():
    """The lesson's job on a 24 GB card needs 16 + 2.15 + 2 = 20.15 GB; with 25 % headroom the plan is 25.2 GB. Its
    allocations fit the device (3.85 GB left: fits_device) but not with the headroom: by the one verdict (issue 28)
    it does not fit, and the estimate refuses it, saying it fits only by eating the headroom; on 20 GB it does not
    fit the device either."""
    result = run(LESSON)
    q = {name: quantity.value for name, quantity in result.quantities.items()}
    needed = ALLOCATED + BUFFER
    assert q["planned_device_bytes"] == pytest.approx(needed * 1.25)
    assert q["memory_spare_bytes"] == pytest.approx(24e9 - needed * 1.25) and q["memory_spare_bytes"] < 0
    assert q["memory_spare_before_headroom_bytes"] == pytest.approx(24e9 - needed) == pytest.approx(3.85e9, 1e-3)
    assert not result.fits and result.fits_device
    memory = [f for f in result.findings if f.account == "memory" and "fit" in f.message]
    assert memory[0].level == "fail" and memory[0].message.startswith(
        "does not fit within the headroom: 25.2 GB planned against 24 GB; the 20.1 GB it needs fit the device only "
        "by eating the 5.04 GB headroom (assumptions.headroom 25 %; 3.85 GB left)")
    small = run(_with(LESSON, supply={**LESSON["supply"], "accelerator": {
        "name": "20 GB", "peak_flops_per_s": "200 TFLOP/s", "memory": "20 GB"}}))
    assert not small.fits and not small.fits_device and small.quantities[
        "memory_spare_before_headroom_bytes"].value == pytest.approx(20e9 - needed)
    assert any(f.level == "fail" and f.message.startswith("does not fit: ") for f in small.findings)
    from botec.estimation import check_fit
    with pytest.raises(ContractError, match="it fits the device only by eating the 25 % headroom: 20.1 GB without"):
        check_fit(result)
    with pytest.raises(ContractError) as refused:
        check_fit(small)
    assert "eating" not in refused.value.detail
