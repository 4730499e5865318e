"""LoRA and QLoRA through every account: parameters, memory, compute, network, storage; bad input.

Sources: Hu et al. 2021, "LoRA" (r·(d_in + d_out) per adapted matrix); Dettmers et al. 2023, "QLoRA"
(NF4 in blocks of 64, double quantization, paged optimizers; LLaMA-65B in < 48 GB); PEFT's
print_trainable_parameters; the torchtune README's table of peak memory per GPU.
"""

from __future__ import annotations

import pytest

from botec.architecture import lora_parameters, model_catalog
from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate
from botec.inputs.lora import quantized_weight_bytes_per_parameter
from botec.training.ops import gemm_seconds

from conftest import EXAMPLES, write
from test_cli_errors import assert_one_line_error

CATALOG = model_catalog()
LLAMA2_7B = 6_738_415_616
# Llama-2-7B (h 4,096, 32 MHA heads, FFN 11,008 gated, 32 layers): its linear weights and the rest.
LLAMA2_7B_LINEAR = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)        # 6,476,005,376
LLAMA2_7B_16BIT = LLAMA2_7B - LLAMA2_7B_LINEAR                       # embeddings, LM head, norms: 262,410,240
NF4_DQ = 0.5 + 1 / 64 + 4 / (64 * 256)
QV_R8 = 32 * 8 * (4096 + 4096) * 2                                   # q_proj and v_proj, r = 8: 4,194,304


def run(model="llama-2-7b", lora=None, accelerator="a100-sxm-80gb", count=1, sequence_length=512,
        assumptions=None, **strategy):
    """A training estimate from a contract written here (one sequence per micro-batch, full recomputation)."""
    data = {"name": "peft", "workload": {"model": model, "tokens": "1M", "sequence_length": sequence_length},
            "supply": {"accelerator": accelerator, "count": count},
            "strategy": {"micro_batch_size": 1, "recompute": "full", "optimizer": "adam-mixed"} | strategy,
            "assumptions": {"runtime_buffer": "1 GB", "headroom": 0} | (assumptions or {})}
    if lora is not None:
        data["strategy"]["lora"] = lora
    return estimate(parse_contract(data))


QLORA_QV = {"rank": 8, "target_modules": ["q_proj", "v_proj"], "base_weights": "nf4"}


# --- parameters -------------------------------------------------------------------------------------------------

def test_llama2_7b_q_v_rank_8_is_what_peft_prints():
    """PEFT on meta-llama/Llama-2-7b-hf, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]):
    "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622"."""
    count = lora_parameters(CATALOG["llama-2-7b"], 8, ["q_proj", "v_proj"])
    assert count.parameters == QV_R8 == 4_194_304
    assert LLAMA2_7B + count.parameters == 6_742_609_920


def test_llama31_8b_rank_16_all_linear_by_hand():
    # 32 layers × 16 × (q 4,096+4,096 + k 4,096+1,024 + v 4,096+1,024 + o 4,096+4,096 + gate 4,096+14,336
    #                    + up 4,096+14,336 + down 14,336+4,096)
    by_hand = 32 * 16 * (4096 + 4096 + 4096 + 1024 + 4096 + 1024 + 4096 + 4096 + 4096 + 14336 + 4096 + 14336
                         + 14336 + 4096)
    assert by_hand == 41_943_040
    assert lora_parameters(CATALOG["llama-3.1-8b"], 16, "all-linear").parameters == by_hand
    # the named set and the seven names are the same adapters
    names = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert lora_parameters(CATALOG["llama-3.1-8b"], 16, names).parameters == by_hand


def test_gpt2_and_mixtral_module_names():
    # GPT-2 small: c_attn is one fused matrix 768 → 2,304: 12 layers × 8 × (768 + 2,304) = 294,912
    assert lora_parameters(CATALOG["gpt2"], 8, ["c_attn"]).parameters == 12 * 8 * (768 + 2304) == 294_912
    # c_proj names both the attention output (768 → 768) and the MLP's down projection (3,072 → 768)
    assert lora_parameters(CATALOG["gpt2"], 8, ["c_proj"]).parameters == 12 * 8 * ((768 + 768) + (3072 + 768))
    # Mixtral-8x7B: every expert's w1/w3/w2 gets its own adapter (32 layers × 8 experts × 3 × 8 × (4,096 + 14,336));
    # the Llama names map onto the experts' matrices
    mixtral = CATALOG["mixtral-8x7b"]
    experts = lora_parameters(mixtral, 8, ["w1", "w2", "w3"])
    assert experts.parameters == experts.expert_parameters == 32 * 8 * 3 * 8 * (4096 + 14336) == 113_246_208
    assert lora_parameters(mixtral, 8, ["gate_proj", "up_proj", "down_proj"]).parameters == experts.parameters
    # a token passes 2 of the 8 experts' adapters
    assert experts.active_parameters == pytest.approx(experts.parameters * 2 / 8)


def test_nf4_bytes_per_weight_with_and_without_double_quantization():
    """QLoRA §3: one FP32 absmax per 64 weights is 32/64 = 0.5 bits per parameter; double quantization stores
    it in 8 bits with one FP32 constant per 256 blocks: 8/64 + 32/(64·256) = 0.127 bits."""
    assert quantized_weight_bytes_per_parameter("nf4", True, 64) == pytest.approx(0.5 + 1 / 64 + 4 / 16384)
    assert quantized_weight_bytes_per_parameter("nf4", False, 64) == pytest.approx(0.5 + 4 / 64)
    assert (quantized_weight_bytes_per_parameter("nf4", True, 64) - 0.5) * 8 == pytest.approx(0.127, abs=5e-4)
    assert quantized_weight_bytes_per_parameter("bf16") == 2
    # LLM.int8(): one FP32 scale per output row; Llama-2-7B's matrices have 32 × (4 × 4,096 + 2 × 11,008 + 4,096)
    rows = 32 * (4 * 4096 + 2 * 11008 + 4096)
    assert quantized_weight_bytes_per_parameter("int8", rows_per_parameter=rows / LLAMA2_7B_LINEAR) == \
        pytest.approx(1 + 4 * rows / LLAMA2_7B_LINEAR)


def test_without_lora_every_parameter_trains(lesson):
    assert lesson.value("trainable_parameters") == lesson.value("parameters")
    assert lesson.value("frozen_parameters") == 0
    assert lesson.quantities["frozen_weight_memory_bytes"].condition == "frozen_base = 0"


# --- memory -----------------------------------------------------------------------------------------------------

def test_qlora_memory_components_by_hand():
    """Llama-2-7B, NF4 + double quantization, r = 8 on q_proj and v_proj, FP32 adapters with AdamW (adam-mixed),
    one A100, one sequence of 512 tokens, full recomputation."""
    result = run(lora=QLORA_QV)
    assert result.value("trainable_parameters") == QV_R8
    assert result.value("frozen_parameters") == LLAMA2_7B
    # frozen base: 6,476,005,376 linear weights × 0.51587 B + 262,410,240 16-bit parameters × 2 B
    # = 3,340,771,328 + 524,820,480 B; plus the BF16 copy of the largest matrix being dequantized, 4,096 × 11,008 × 2
    stored = LLAMA2_7B_LINEAR * NF4_DQ + 2 * LLAMA2_7B_16BIT
    assert stored == pytest.approx(3_865_591_808)
    assert result.value("dequantization_buffer_bytes") == 2 * 4096 * 11008
    assert result.value("frozen_weight_memory_bytes") == pytest.approx(stored + 2 * 4096 * 11008)
    # adapters: FP32 weights 4 B, FP32 gradients 4 B, no master copy, two FP32 moments 8 B
    assert result.value("weight_memory_bytes") == pytest.approx(stored + 2 * 4096 * 11008 + 4 * QV_R8)
    assert result.value("gradient_memory_bytes") == 4 * QV_R8
    assert result.value("optimizer_memory_bytes") == 8 * QV_R8
    assert result.value("state_bytes") == pytest.approx(stored + 2 * 4096 * 11008 + 16 * QV_R8)
    # activations (Korthikanti et al., full recomputation, flash attention, 16-bit): each layer keeps its input
    # 2·s·h = 2 × 512 × 4,096 B; the last stage adds the output layer s·(4h + 10V) = 512 × (4 × 4,096 + 10 × 32,000)
    # (the layer's FP32 input, and the unfused loss of the default stack: 10 B per logit, catalog/stacks.yaml);
    # the layer being recomputed rebuilds s·(10h + 2·(4h + 3f)) = 512 × (40,960 + 2 × 49,408) B plus its adapters'
    # x·A: 2 B × 512 tokens × r 8 × 2 matrices
    adapters = 2 * 512 * 8 * 2
    assert result.value("adapter_activation_bytes_per_layer") == adapters == 16_384
    # x·A: 2 B × 512 tokens × r 8 × 2 matrices. The loss and the head's input are freed by their backward before
    # any layer is rebuilt: the peak takes the larger of the two (the output layer's), not their sum.
    remat = 512 * (10 * 4096 + 2 * (4 * 4096 + 3 * 11008)) + adapters
    assert result.value("rematerialized_layer_bytes") == remat
    output = 512 * (4 * 4096 + 10 * 32000)
    assert output > remat
    assert result.value("activation_bytes") == pytest.approx(32 * 2 * 512 * 4096 + output)
    # planned: state + activations + the cuBLAS/cuBLASLt workspaces (A100: 8,519,680 + 4 MiB) + 1 GB buffer outside
    # the allocator, no headroom; the adapters' 4 × QV_R8 B of gradients (the default torchtitan stack frees them
    # after each step, no accumulation) are made by the backward as it frees the activations: never with them
    assert result.value("activation_bytes") == 306_446_336
    assert result.value("gradient_activation_overlap_bytes") == 4 * QV_R8
    assert result.value("planned_device_bytes") == pytest.approx(
        stored + 2 * 4096 * 11008 + 12 * QV_R8 + 306_446_336 + 8_519_680 + 4 * 2**20 + 1e9)


def test_a_16_bit_base_and_16_bit_adapters_take_the_optimizer_presets_bytes():
    result = run(lora={"rank": 8, "target_modules": ["q_proj", "v_proj"], "adapter_precision": "bf16"})
    assert result.value("dequantization_buffer_bytes") == 0          # nothing to dequantize
    assert result.value("frozen_weight_memory_bytes") == pytest.approx(2 * LLAMA2_7B)
    # adam-mixed on BF16 adapters: 2 + 2 + (4 + 8) B
    assert result.value("state_bytes") == pytest.approx(2 * LLAMA2_7B + 16 * QV_R8)
    assert result.value("optimizer_memory_bytes") == 12 * QV_R8


def test_a_frozen_fp32_base_takes_four_bytes_per_weight():
    """LoRA on a base loaded in FP32 (torch_dtype=torch.float32, as Hugging Face loads a model by default): every
    frozen weight, linear or not, 4 B: Llama-2-7B's 6,738,415,616 → 26.95 GB, no dequantization buffer; the
    adapters as before (FP32: 16 B each with AdamW). ZeRO-3 gathers the block's frozen weights at 4 B."""
    assert quantized_weight_bytes_per_parameter("fp32") == 4.0
    result = run(lora={"rank": 8, "target_modules": ["q_proj", "v_proj"], "base_weights": "fp32"})
    assert result.value("frozen_dense_weight_bytes_per_parameter") == pytest.approx(4.0)
    assert result.value("dequantization_buffer_bytes") == 0
    assert result.value("frozen_weight_memory_bytes") == pytest.approx(4 * LLAMA2_7B) == 26_953_662_464
    assert result.value("state_bytes") == pytest.approx(4 * LLAMA2_7B + 16 * QV_R8)
    sharded = run(lora={"rank": 8, "target_modules": ["q_proj", "v_proj"], "base_weights": "fp32"}, count=2,
                  fsdp="full_shard")
    block = 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096
    assert sharded.value("frozen_weight_memory_bytes") == pytest.approx(4 * LLAMA2_7B / 2)
    # two blocks gathered (FP32 frozen, FP32 adapters) and one block's adapter gradients (FP32)
    adapters_per_block = QV_R8 / 32
    assert sharded.value("fsdp_gather_buffer_bytes") == pytest.approx(
        2 * (4 * block + 4 * adapters_per_block) + 4 * adapters_per_block)
    # the 16-bit base, for comparison: half the bytes
    assert run(lora={"rank": 8, "target_modules": ["q_proj", "v_proj"]}).value(
        "frozen_weight_memory_bytes") == pytest.approx(2 * LLAMA2_7B)


def test_zero3_shards_the_frozen_base_too_and_gathers_its_stored_bytes():
    result = run(lora=QLORA_QV, count=2, fsdp="full_shard")
    stored = LLAMA2_7B_LINEAR * NF4_DQ + 2 * LLAMA2_7B_16BIT
    assert result.value("frozen_weight_memory_bytes") == pytest.approx(stored / 2 + 2 * 4096 * 11008)
    assert result.value("gradient_memory_bytes") == 4 * QV_R8 / 2
    # each micro-batch gathers the weights before the forward and the backward: the packed 4-bit base and the
    # FP32 adapters, (2 − 1)/2 of them sent by each rank
    message = stored + 4 * QV_R8
    assert result.value("parameter_gather_message_bytes") == pytest.approx(message)
    assert result.value("parameter_gather_bytes_sent_per_step") == pytest.approx(2 * 1 / 2 * message)


# --- QLoRA and torchtune, published -------------------------------------------------------------------------------

# LLaMA-1 65B and 33B (Touvron et al. 2023, Table 2): 80 layers of 8,192 (64 heads, FFN 22,016), 60 of 6,656
# (52 heads, FFN 17,920), vocabulary 32,000, untied.
LLAMA_65B = {"name": "LLaMA-65B", "layers": 80, "hidden_size": 8192, "attention_heads": 64, "ffn_size": 22016,
             "vocab_size": 32000}
LLAMA_33B = {"name": "LLaMA-33B", "layers": 60, "hidden_size": 6656, "attention_heads": 52, "ffn_size": 17920,
             "vocab_size": 32000}
# artidoro/qlora scripts/finetune_guanaco_65b.sh: --lora_r 64 --lora_modules all --double_quant --quant_type nf4
# --bf16 (adapters cast to BF16) --gradient_checkpointing; qlora.py's default optimizer paged_adamw_32bit: BF16
# weights and gradients, no master copy, two FP32 moments.
GUANACO = {"rank": 64, "alpha": 16, "target_modules": "all-linear", "base_weights": "nf4",
           "double_quantization": True, "adapter_precision": "bf16"}
PAGED_ADAMW_32BIT = {"weights": 2, "gradients": 2, "master_weights": 0, "optimizer_states": 8}
NOTHING_ELSE = {"runtime_buffer": 0, "headroom": 0}


def test_qlora_finetunes_llama_65b_in_under_48_gb():
    """QLoRA abstract and §1: 'reduces the average memory requirements of finetuning a 65B parameter model from
    >780GB of GPU memory to <48GB'; Fig. 6 counts one sequence of 512 tokens. (The Hugging Face announcement,
    huggingface.co/blog/4bit-transformers-bitsandbytes, says a single 46 GB GPU.)"""
    qlora = run(LLAMA_65B, GUANACO, optimizer=PAGED_ADAMW_32BIT, assumptions=NOTHING_ELSE)
    assert qlora.value("parameters") == 65_285_660_672
    assert qlora.value("trainable_parameters") == 80 * 64 * (4 * (8192 + 8192) + 3 * (8192 + 22016))
    assert qlora.value("planned_device_bytes") < 46e9
    # 16-bit finetuning with Adam: 2 + 2 + 8 B per parameter = 783 GB
    full = run(LLAMA_65B, None, optimizer=PAGED_ADAMW_32BIT, assumptions=NOTHING_ELSE)
    assert full.value("state_bytes") == pytest.approx(65_285_660_672 * 12)
    assert full.value("state_bytes") > 780e9


def test_qlora_finetunes_llama_33b_on_24_gb_with_its_optimizer_paged():
    """The Hugging Face announcement of QLoRA: 'finetune a 33B model on a single 24GB consumer GPU'; QLoRA Fig. 6:
    'While some models do not quite fit on certain GPUs, paged optimizers provide enough memory to make these
    models fit' (the moments page to host memory). Everything but the 3.9 GB of moments fits in 24 GB."""
    result = run(LLAMA_33B, GUANACO, optimizer=PAGED_ADAMW_32BIT, assumptions=NOTHING_ELSE)
    assert result.value("parameters") == 32_528_943_616
    assert result.value("planned_device_bytes") - result.value("optimizer_memory_bytes") < 24e9


@pytest.mark.parametrize("lora, published", [
    ({"rank": 8, "target_modules": "all-linear", "base_weights": "nf4"}, 12.3e9),
    ({"rank": 8, "target_modules": ["q_proj", "v_proj"], "base_weights": "bf16"}, 21.3e9),
])
def test_torchtune_single_device_peaks(lora, published):
    """pytorch/torchtune README (2024), 'Peak Memory per GPU' on 1 × RTX 4090, Llama2-7B, batch size 4, sequence
    length 2,048: QLoRA 12.3 GB, LoRA 21.3 GB ('based on GPU peak memory reserved'). The configs
    (recipes/configs/llama2/7B_qlora_single_device.yaml, 7B_lora_single_device.yaml): rank 8 on q, k, v, output and
    the MLP (QLoRA) or on q and v (LoRA), activation checkpointing, everything in BF16 (adapters and AdamW's
    moments: the adam-bf16 preset, the torchtune stack's), the chunked cross entropy (the stack's: 6 B per logit). Within 10 %: the reserved peak includes the caching allocator's slack, which the
    plan's 2 GB runtime buffer and 10 % headroom stand for, and the table does not pin the PyTorch version."""
    result = run(lora=lora | {"adapter_precision": "bf16"}, accelerator="rtx-4090", sequence_length=2048,
                 micro_batch_size=4, optimizer="adam-bf16", framework="torchtune",
                 assumptions={"runtime_buffer": "2 GB", "headroom": 0.10})
    assert result.value("planned_device_bytes") == pytest.approx(published, rel=0.10)


# --- compute ------------------------------------------------------------------------------------------------------

def test_a_frozen_base_does_four_flops_per_parameter_and_the_adapters_six():
    full = run()
    lora = run(lora=QLORA_QV)
    matmul, attention = lora.value("matmul_parameters"), lora.value("attention_flops_per_token")
    assert matmul == LLAMA2_7B - 131_072_000          # all but the embedding lookup
    assert full.value("model_flops_per_token") == pytest.approx(6 * matmul + attention)
    assert lora.value("model_flops_per_token") == pytest.approx(4 * matmul + 6 * QV_R8 + attention)
    # full recomputation repeats the forward of the layers (not the LM head, 32,000 × 4,096), adapters included
    assert lora.value("hardware_flops_per_token") == pytest.approx(
        4 * matmul + 6 * QV_R8 + attention + 2 * (matmul - 32000 * 4096 + QV_R8) + attention / 3)


def test_op_level_skips_the_frozen_weight_gradients_and_adds_adapters_and_dequantization():
    full, lora = run(), run(lora=QLORA_QV)
    q = {name: lora.value(name) for name in ("memory_bandwidth_efficiency", "memory_bandwidth_bytes_per_s",
                                             "kernel_overhead_seconds", "peak_flops_per_s", "matmul_efficiency")}
    bandwidth = q["memory_bandwidth_efficiency"] * q["memory_bandwidth_bytes_per_s"]
    t0 = q["kernel_overhead_seconds"]
    # dequantization per layer and pass: read 0.516 B and write 2 B per linear weight, one kernel per matrix (7)
    dequantize = (NF4_DQ + 2) * LLAMA2_7B_LINEAR / 32 / bandwidth + 7 * t0
    assert lora.value("dequantization_seconds") == pytest.approx(dequantize)
    # adapters: x·A (512 × 8,192 by 8,192 × 8 for q and v together) and ·B, scale-and-add on 512 × 8,192 elements
    machine = (2, q["peak_flops_per_s"], q["matmul_efficiency"], q["memory_bandwidth_bytes_per_s"],
               q["memory_bandwidth_efficiency"], t0)
    adapters = (gemm_seconds(512, 8192, 8, *machine) + gemm_seconds(512, 8, 8192, *machine)
                + 5 * 2 * 512 * 8192 / bandwidth + (4 * 2 - 2) * t0)
    assert lora.value("adapter_forward_seconds") == pytest.approx(adapters)
    assert lora.value("adapter_backward_seconds") == pytest.approx(2 * adapters)
    # the frozen matrices' GEMMs run once in the backward (input gradients), not twice
    gemms = full.value("attention_projection_seconds") + full.value("dense_mlp_seconds")
    assert lora.value("layer_forward_seconds") == pytest.approx(full.value("layer_forward_seconds") + adapters
                                                                + dequantize)
    assert lora.value("layer_backward_seconds") == pytest.approx(full.value("layer_backward_seconds") - gemms
                                                                 + 2 * adapters + dequantize)
    # the optimizer step streams the adapters' state only: 2 × 8 B moments + 2 × 4 B gradient reads + 4 B weights
    assert lora.value("optimizer_step_bytes") == pytest.approx((2 * 8 + 2 * 4 + 4) * QV_R8)


# --- network and storage ------------------------------------------------------------------------------------------

def test_data_parallel_gradients_are_the_adapters_only():
    result = run(lora=QLORA_QV, count=2)
    assert result.value("gradient_bytes") == 4 * QV_R8                  # FP32 adapter gradients
    # ring all-reduce over 2 ranks: 2 × (2 − 1)/2 × the message, once per step
    assert result.value("gradient_sync_bytes_sent_per_step") == pytest.approx(4 * QV_R8)
    assert result.value("parameter_gather_bytes_sent_per_step") == 0     # plain DP gathers nothing


def test_a_lora_checkpoint_holds_the_adapters_and_their_optimizer_state():
    result = run(lora=QLORA_QV)
    # FP32 adapter weights 4 B + no master copy + moments 8 B; the frozen base is already on disk
    assert result.value("checkpoint_bytes") == 12 * QV_R8 == 50_331_648


# --- the example, and bad input ------------------------------------------------------------------------------------

def test_the_consumer_gpu_example_fits(cli):
    import json

    code, out, err = cli("estimate", str(EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml"), "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    q = {item["name"]: item["value"] for item in data["quantities"]}
    assert data["fits"] is True and data["accelerator"].startswith("NVIDIA GeForce RTX 4090")
    assert q["trainable_parameters"] == 41_943_040
    assert q["device_memory_bytes"] - q["memory_spare_bytes"] < 24e9


def test_botec_model_shows_trainable_and_all_parameters(cli):
    code, out, err = cli("model", "llama-2-7b", "--lora-rank", "8")
    assert code == 0, err
    assert "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622" in out


def test_rank_zero_is_refused_naming_the_field(cli, tmp_path):
    path = write(tmp_path, (EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml").read_text().replace("rank: 16", "rank: 0"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "strategy.lora.rank")


def test_a_module_the_architecture_lacks_is_refused_with_did_you_mean(cli, tmp_path):
    text = (EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml").read_text()
    path = write(tmp_path, text.replace("target_modules: all-linear", "target_modules: [q_proj, v_porj]"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "strategy.lora.target_modules", "'v_porj'", "did you mean 'v_proj'?")
    # GPT-2's MLP is not gated; its attention fuses Q, K and V
    with pytest.raises(ContractError, match="strategy.lora.target_modules: 'gate_proj' .* not gated"):
        run(model="gpt2", lora={"rank": 8, "target_modules": ["gate_proj"]})
    with pytest.raises(ContractError, match="fuses Q, K and V in one matrix: target c_attn"):
        run(model="gpt2", lora={"rank": 8, "target_modules": ["q_proj"]})


def test_lora_on_a_bare_parameter_count_is_refused(cli, tmp_path):
    text = (EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml").read_text()
    path = write(tmp_path, text.replace("model: llama-3.1-8b", "model: {parameters: 8B, layers: 32, hidden_size: 4096}"))
    code, out, err = cli("estimate", str(path))
    assert_one_line_error(code, out, err, "workload.model", "LoRA needs the model's shapes")


def test_lora_on_multi_head_latent_attention_is_refused():
    with pytest.raises(ContractError, match="strategy.lora: .*multi-head latent attention"):
        run(model="deepseek-v3", lora={"rank": 8}, accelerator="h200")
