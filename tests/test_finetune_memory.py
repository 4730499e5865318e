"""Fine-tuning memory as the stacks allocate it: published torchtune recipe peaks as contracts, the loss per kind
and chunking, and the runtime's own memory split by whether PyTorch's caching allocator sees it.

Every published figure below is a peak that torchtune's recipes log from PyTorch's caching allocator
(torchtune/training/memory.py get_memory_stats: peak memory active, allocated and reserved), so each is compared
with ``allocated_device_bytes`` (torch.cuda.max_memory_allocated: the CUDA context outside the allocator is not in
it). The "Optimization flags" table names its metric ("Peak Memory Active (GiB)"); the Llama 3.1 table of the same
README names none, and is read the same way (GiB, the recipes' logger). Where botec cannot come within 10 %
honestly, the case is a strict xfail with the gap and why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from botec.contract import load_contract, parse_contract
from botec.estimation import estimate

GiB = 2**30
CASES = Path(__file__).parent / "data" / "finetune"

# (contract, published peak in bytes, where it is published)
README_0924 = "pytorch/torchtune README.md at 30b8519e8 (2024-09-24), 'Memory and training speed'"
README_1118 = "pytorch/torchtune README.md at 1814feb17 (2024-11-18), 'Optimization flags', Peak Memory Active"
WITHIN = [
    ("torchtune-llama3.1-8b-lora-rtx4090", 16.2 * GiB, README_0924 + ": Llama 3.1 8B, LoRA, 1x 4090"),
    ("torchtune-llama3.1-8b-qlora-rtx4090", 7.4 * GiB, README_0924 + ": Llama 3.1 8B, QLoRA, 1x 4090"),
    ("torchtune-llama3.1-70b-lora-8xa100", 27.6 * GiB, README_0924 + ": Llama 3.1 70B, LoRA, 8x A100"),
    ("torchtune-llama3.2-3b-lora-a100", 8.5 * GiB, README_1118 + ": Llama 3.2 3B, LoRA"),
    ("torchtune-llama3.2-3b-qlora-a100", 4.6 * GiB, README_1118 + ": Llama 3.2 3B, QLoRA"),
    ("torchtune-llama3.2-3b-full-ac-a100", 24.9 * GiB, README_1118 + ": Llama 3.2 3B, + Activation Checkpointing"),
]
# (contract, published, where, botec's gap at the time of writing, why)
NOT_WITHIN = [
    ("torchtune-llama3.1-405b-qlora-8xa100", 44.8e9, README_0924 + ": Llama 3.1 405B, QLoRA, 8x A100", "+23 %",
     "126 layers' checkpointed inputs (15.8 GiB) and the unchunked loss's FP32 logits (10 B per logit, 4.9 GiB) on "
     "top of 27 GiB of NF4 shards; the row alone prints GB and its config (batch_size 1, no compile key) does not "
     "match the table's note: what ran is not pinned down"),
    ("torchtune-llama3.1-70b-full-offload-8xa100", 13.9 * GiB, README_0924 + ": Llama 3.1 70B, Full finetune, "
     "8x A100 (CPU offload)", "−21 %", "FSDP2's CPUOffloadPolicy stages each unit's shard, its unsharded gradient and "
     "the copies to and from the host on the device; botec keeps only the gathered blocks, not the separately "
     "wrapped 2.1 GB embedding and output units (custom_sharded_layers) nor the copy buffers"),
]


def allocated(name: str) -> float:
    return estimate(load_contract(CASES / f"{name}.yaml")).value("allocated_device_bytes")


@pytest.mark.parametrize("name, published, where", WITHIN, ids=[c[0] for c in WITHIN])
def test_published_torchtune_peaks_within_ten_percent(name, published, where):
    assert allocated(name) == pytest.approx(published, rel=0.10), where


@pytest.mark.parametrize("name, published, where, gap, why", [
    pytest.param(*case, marks=pytest.mark.xfail(strict=True, reason=f"{case[3]}: {case[4]}")) for case in NOT_WITHIN],
    ids=[c[0] for c in NOT_WITHIN])
def test_published_torchtune_peaks_botec_misses(name, published, where, gap, why):
    assert allocated(name) == pytest.approx(published, rel=0.10), where


# --- the loss per kind and chunking -------------------------------------------------------------------------------

def _run(strategy=None, model="llama-3.1-8b", accelerator="rtx-4090", assumptions=None):
    data = {"name": "t", "workload": {"model": model, "tokens": "10M", "sequence_length": 2048},
            "supply": {"accelerator": accelerator, "count": 1},
            "strategy": {"framework": "torchtune", "micro_batch_size": 2, "recompute": "full",
                         "optimizer": "adam-bf16"} | (strategy or {}),
            "assumptions": {"headroom": 0} | (assumptions or {})}
    return estimate(parse_contract(data))


def test_chunked_loss_keeps_its_bf16_chunks_and_log_softmax_outputs_eager_and_only_the_chunks_compiled():
    """CEWithChunkedOutputLoss, 8 chunks. Eager: the BF16 chunks (2 B) and each chunk's FP32 log-softmax output
    (4 B), plus the last chunk's FP32 up-cast (4/8 B) = 6.5 B per logit. Compiled: the BF16 chunks the compiled
    graphs re-read (2 B) and one chunk's BF16 gradient (2/8 B) = 2.25 B."""
    eager, compiled = _run(), _run({"elementwise": "fused"})
    assert eager.value("loss_activation_bytes_per_logit") == 2 + 4 + 4 / 8
    assert compiled.value("loss_activation_bytes_per_logit") == 2 + 2 / 8
    tokens, h, vocab = 2 * 2048, 4096, 128_256
    assert compiled.value("output_layer_activation_bytes") == tokens * (4 * h + 2.25 * vocab)
    # A loss kind without a compiled figure keeps its own under compile.
    assert _run({"elementwise": "fused", "loss": "unfused"}).value("loss_activation_bytes_per_logit") == 10


def test_the_rebuilt_layer_is_never_alive_with_the_loss():
    """Full recompute, one stage: the loss's logits and the LM head's input are freed by their backward before any
    layer is rebuilt, so the peak is the checkpoints plus the larger of the two, not their sum."""
    q = {k: _run({"elementwise": "fused"}).value(k) for k in (
        "activation_bytes", "activation_bytes_per_layer", "output_layer_activation_bytes",
        "rematerialized_layer_bytes")}
    checkpoints = 32 * 2 * 2048 * 4096 * 2            # each block's BF16 input, 32 blocks, 4,096 tokens
    assert q["activation_bytes_per_layer"] == checkpoints / 32
    assert q["output_layer_activation_bytes"] > q["rematerialized_layer_bytes"] > 0
    assert q["activation_bytes"] == checkpoints + q["output_layer_activation_bytes"]


# --- the runtime's own memory -----------------------------------------------------------------------------------

def test_the_cuda_context_is_planned_but_not_allocated():
    """The CUDA context (~400 MB with lazy loading, pytorch/pytorch#109888) is outside the caching allocator:
    in the planned memory, not in allocated_device_bytes (torch.cuda.max_memory_allocated)."""
    result = _run()
    q = {k: result.value(k) for k in ("runtime_buffer_bytes", "allocator_workspace_bytes", "allocated_device_bytes",
                                      "planned_device_bytes", "state_bytes", "activation_bytes",
                                      "gradient_activation_overlap_bytes")}
    assert q["runtime_buffer_bytes"] == 4.0e8
    assert q["allocated_device_bytes"] == pytest.approx(q["state_bytes"] + q["activation_bytes"]
                                                        + q["allocator_workspace_bytes"]
                                                        - q["gradient_activation_overlap_bytes"])
    assert q["planned_device_bytes"] == pytest.approx(q["allocated_device_bytes"] + 4.0e8)


@pytest.mark.parametrize("accelerator, cublas, cublaslt", [
    ("rtx-4090", 8_519_680, 2**20),            # 24 GB = 22.4 GiB: below PyTorch's 24 GiB line
    ("a100-sxm-80gb", 8_519_680, 4 * 2**20),
    ("h100-sxm", 32 * 2**20, 32 * 2**20)])
def test_the_cublas_workspaces_are_allocated_by_family(accelerator, cublas, cublaslt):
    """cuBLAS: PyTorch's default CUBLAS_WORKSPACE_CONFIG :4096:2:16:8 = 2 × 4 MiB + 8 × 16 KiB = 8,519,680 B (the
    active block a memory snapshot shows after one nn.Linear), 32 MiB on Hopper (#91564); cuBLASLt: 1 MiB, 4 MiB on
    compute capability 8.x with at least 24 GiB, 32 MiB on 9.0 and later (PyTorch #120925)."""
    assert _run(accelerator=accelerator).value("allocator_workspace_bytes") == cublas + cublaslt


def test_a_stated_runtime_buffer_replaces_the_context_and_xla_keeps_the_placeholder():
    assert _run(assumptions={"runtime_buffer": "1.5 GB"}).value("runtime_buffer_bytes") == 1.5e9
    tpu = estimate(parse_contract({
        "name": "t", "workload": {"model": "llama-3.1-8b", "tokens": "10M", "sequence_length": 2048},
        "supply": {"accelerator": "tpu-v4", "count": 4}, "strategy": {"micro_batch_size": 1}}))
    assert tpu.value("runtime_buffer_bytes") == 2.0e9 and tpu.value("allocator_workspace_bytes") == 0


# --- gradients that the backward creates as it frees the activations ------------------------------------------

def test_gradients_freed_between_steps_are_never_alive_with_the_activations():
    """torchtune's recipes zero_grad(set_to_none=True) after each step: with no gradient accumulation the backward
    creates the gradients as it releases the activations, so the peak is state − G + max(G, A), not state + A.
    Gradient accumulation (the gradients outlive a micro-batch) and a stack with persistent gradient buffers
    (Megatron's grad buffer) keep the sum."""
    def quantities(strategy):
        result = _run(strategy, model="llama-3.1-8b", accelerator="h100-sxm")
        return {k: result.value(k) for k in ("allocated_device_bytes", "state_bytes", "activation_bytes",
                                             "gradient_memory_bytes", "allocator_workspace_bytes",
                                             "gradient_activation_overlap_bytes", "transient_gradient_bytes")}
    q = quantities({})
    assert q["transient_gradient_bytes"] == q["gradient_memory_bytes"] == 2 * 8_030_261_248
    assert q["gradient_activation_overlap_bytes"] == min(q["gradient_memory_bytes"], q["activation_bytes"])
    assert q["allocated_device_bytes"] == pytest.approx(
        q["state_bytes"] - q["gradient_memory_bytes"] + max(q["gradient_memory_bytes"], q["activation_bytes"])
        + q["allocator_workspace_bytes"])
    for kept in ({"gradient_accumulation_steps": 2}, {"framework": "megatron-core"}):
        other = quantities(kept)
        assert other["gradient_activation_overlap_bytes"] == 0
        assert other["allocated_device_bytes"] == pytest.approx(
            other["state_bytes"] + other["activation_bytes"] + other["allocator_workspace_bytes"])
