"""A training contract: the job, what it runs on, the parallel layout and recipe, the assumptions."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from botec.contract.defaults import FLAT_MFU, FLEET_FAILURE_RATE_SOURCE
from botec.contract.efficiency import OP_LEVEL_FIGURES, EfficiencyAssumptions
from botec.contract.model import ModelField
from botec.contract.sections import ContractBase, BY_NAME, INLINE, Section, by_name_or_inline
from botec.contract.stack_keys import ElementwiseName, LossName, StackName
from botec.contract.stated import PositiveCount, Stated, below_whole_bound, default, default_range, quantity
from botec.contract.supply import TrainingSupply
from botec.errors import ContractError
from botec.layout import FSDP_ZERO_STAGE

__all__ = ["TrainingWorkload", "TrainingStrategy", "TrainingAssumptions", "Thresholds", "TrainingContract",
           "OptimizerState", "LoraPolicy", "OffloadPolicy", "TARGET_MODULE_SETS", "LESSON"]

LESSON = "the lesson's planning value"


class TrainingWorkload(Section):
    """A training job; fixed when an estimate is compared with a measurement."""

    kind: Literal["training"] = Field("training", description="training (this) or serving")
    model: ModelField
    tokens: quantity("count", "Training tokens processed across the run D, e.g. '1B' or '2T'", exclusive_minimum=0)
    sequence_length: quantity("count", "Tokens per sequence S", minimum=1, integer=True)
    token_bytes: quantity("bytes", "Bytes per stored token id in the prepared dataset", exclusive_minimum=0) = \
        default(4, "four-byte token ids, as in lesson 000")


class OptimizerState(Section):
    """Bytes per parameter kept during training, for an optimizer that is not a preset."""

    weights: quantity("bytes", "Bytes of working weights per parameter", minimum=0)
    gradients: quantity("bytes", "Bytes of gradients per parameter", minimum=0)
    master_weights: quantity("bytes", "Bytes of master weights per parameter", minimum=0)
    optimizer_states: quantity("bytes", "Bytes of optimizer moments per parameter", minimum=0)


def _optimizer(raw: Any) -> Any:
    if isinstance(raw, str):
        from botec.catalog import did_you_mean, optimizer_presets

        presets = optimizer_presets()
        if raw not in presets:
            raise ValueError(f"unknown optimizer preset {raw!r}{did_you_mean(raw, presets)} "
                             f"(presets: {', '.join(presets)}; or give weights, gradients, master_weights, "
                             "optimizer_states in bytes per parameter)")
    return raw


class CheckpointPolicy(Section):
    """How often the training state is saved, how many saves are kept, and whether training waits for them."""

    interval: quantity("seconds", "Training time between checkpoint saves τ (a save every K steps: K × the step "
                                  "time), e.g. '1 h'", exclusive_minimum=0) = \
        default(3600, "one save per hour, as in lesson 000")
    retained: quantity("count", "Checkpoints kept at once", minimum=0, integer=True) = \
        default(3, "three retained checkpoints, as in lesson 000")
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: training waits while the checkpoint is written to storage; async: training "
                            "waits only while it is copied to host memory, then the write runs in the background "
                            "(PyTorch DCP async_save, Megatron --async-save, NeMo)")


class RetentionPolicy(Section):
    """What else the job keeps in storage: dataset copies and the exported model."""

    dataset_copies: quantity("count", "Copies of the prepared dataset retained", minimum=0, integer=True) = \
        default(2, "a prepared snapshot and a staging copy, as in lesson 000")
    export_bytes_per_parameter: quantity("bytes", "Bytes per parameter of the exported model", minimum=0) = \
        default(2, "a BF16 export, as in lesson 000")


TARGET_MODULE_SETS = {"all-linear": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                      "attention": ("q_proj", "k_proj", "v_proj", "o_proj")}
"""Named sets of LoRA target modules (Hugging Face Llama names; PEFT's ``all-linear`` leaves the LM head out)."""


class LoraPolicy(Section):
    """Parameter-efficient fine-tuning: low-rank adapters on a frozen base (LoRA; QLoRA with a 4-bit base).

    Sources: Hu et al. 2021, "LoRA" (r·(d_in + d_out) trainable parameters per adapted matrix); Dettmers et al.
    2023, "QLoRA" (NF4 base weights in blocks of 64 with one absmax each; double quantization stores those
    absmax in 8 bits with one FP32 constant per 256 blocks: 0.5 → 0.127 bits per parameter).
    """

    rank: PositiveCount = Field(description="the adapters' rank r (LoRA's r; PEFT's `r`)")
    alpha: Optional[float] = Field(None, description="LoRA's scaling α (changes neither memory nor time; kept so a "
                                                     "PEFT config can be pasted)")
    target_modules: Union[Literal["all-linear", "attention"], list[str]] = Field(
        default_factory=lambda: ["q_proj", "v_proj"],
        description="the linear layers that get adapters, by their Hugging Face names (q_proj, k_proj, v_proj, "
                    "o_proj, gate_proj, up_proj, down_proj; Mixtral's experts w1, w3, w2; GPT-2 c_attn, c_proj, "
                    "c_fc; GPT-NeoX and BLOOM query_key_value, dense, dense_h_to_4h, dense_4h_to_h), or all-linear / "
                    "attention (default: q_proj and v_proj, PEFT's default for Llama-family models); every routed "
                    "expert gets its own adapter")
    base_weights: Literal["fp32", "bf16", "fp16", "int8", "nf4", "fp4"] = Field(
        "bf16", description="how the frozen base weights are stored: fp32 (a base loaded in full precision, "
                            "torch_dtype float32: 4 B per weight, embeddings, norms and head too), bf16/fp16 (LoRA), "
                            "int8 (LLM.int8()), nf4 or fp4 (QLoRA, bitsandbytes 4-bit); under int8/nf4/fp4 the "
                            "embeddings, norms and the LM head stay 16-bit")
    double_quantization: bool = Field(
        True, description="4-bit base: quantize the per-block absmax constants too (QLoRA's double quantization, "
                          "bnb_4bit_use_double_quant)")
    quantization_block_size: PositiveCount = Field(
        64, description="4-bit base: weights per quantization block sharing one absmax (bitsandbytes: 64)")
    adapter_precision: Literal["fp32", "bf16", "fp16"] = Field(
        "fp32", description="the adapters' weights (PEFT casts them to fp32 by default: autocast_adapter_dtype)")

    @property
    def modules(self) -> tuple[str, ...]:
        """The target modules as a tuple of Hugging Face names."""
        if isinstance(self.target_modules, str):
            return TARGET_MODULE_SETS[self.target_modules]
        return tuple(self.target_modules)

    @model_validator(mode="after")
    def _some_targets(self) -> "LoraPolicy":
        if not isinstance(self.target_modules, str) and not self.target_modules:
            raise ContractError("name at least one module to adapt (or all-linear)",
                                field="strategy.lora.target_modules")
        return self


class OffloadPolicy(Section):
    """Memory savers that move training state to host memory over the host link (PCIe)."""

    optimizer: Literal["none", "cpu", "paged"] = Field(
        "none", description="cpu: master weights and optimizer moments live in host memory, the update runs on the "
                            "CPU and gradients stream to the host (ZeRO-Offload, FSDP CPUOffload); paged: the "
                            "optimizer state is in unified memory and pages out to the host only when the device "
                            "runs short (bitsandbytes paged optimizers)")
    parameters: bool = Field(False, description="keep the sharded parameters in host memory too (ZeRO-3 / FSDP "
                                                "offload_params: needs zero_stage 3)")
    activations: quantity("ratio", "Share of the retained activations copied to host memory until the backward "
                          "needs them (activation offloading, torchtune's enable_activation_offloading)",
                          minimum=0, maximum=1) = default(0, "no activation offloading")


class TrainingStrategy(Section):
    """How the job runs: parallelism, precision, optimizer, batch, checkpoints, retention."""

    framework: StackName = Field(
        None, description="the training stack (catalog/stacks.yaml), whose defaults apply where the contract is "
                          "silent: attention kernel, elementwise ops, loss, optimizer storage, data-parallel "
                          "overlap (default: xla on Google TPUs, else torchtitan, PyTorch FSDP2 in eager mode)")
    elementwise: ElementwiseName = Field(
        None, description="norms, RoPE, activation and residual ops: fused kernels (Megatron/Transformer Engine, "
                          "torch.compile) or eager PyTorch, one kernel per op (default: the framework's)")
    loss: LossName = Field(
        None, description="the cross entropy: fused (vocabulary-parallel, FP32 logits kept: 4 B per logit), unfused "
                          "(the Hugging Face loss: 10 B), chunked (torchtune: 6 B) or fused-linear (Liger, Cut "
                          "Cross-Entropy: no logits kept) (default: the framework's)")
    data_parallel: Annotated[Union[Literal["replicated"], PositiveCount], BeforeValidator(below_whole_bound)] = Field(
        "replicated", description="DP degree = N / (TP × PP × CP); 'replicated' derives it, a number is checked")
    tensor_parallel: PositiveCount = Field(1, description="TP degree")
    sequence_parallel: bool = Field(False, description="split the TP region's activations over the TP ranks (SP)")
    tp_comm_overlap: bool = Field(False, description="overlap TP's all-gathers and reduce-scatters with their GEMMs "
                                                     "(Megatron-Core --tp-comm-overlap; needs sequence_parallel)")
    pipeline_parallel: PositiveCount = Field(1, description="PP stages")
    pipeline_schedule: Literal["1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipe"] = Field(
        "1f1b", description="1F1B, interleaved 1F1B (virtual_pipeline_stages > 1), zero bubble zb-h1 (a third of "
                            "1F1B's bubble at its memory) or zb-h2 (about none, twice the activations; Qi et al. "
                            "2023), or DeepSeek-V3's dualpipe (two copies of each stage's parameters)")
    virtual_pipeline_stages: PositiveCount = Field(1, description="model chunks per stage (interleaved: > 1)")
    pipeline_stage_layers: Optional[list[PositiveCount]] = Field(
        None, description="transformer layers of each pipeline stage, first to last (default: L/p each when p divides "
                          "L, else the first and last stages one layer fewer: they hold the embedding and the LM head)")
    context_parallel: PositiveCount = Field(1, description="CP degree: ranks splitting each sequence")
    expert_parallel: PositiveCount = Field(1, description="EP degree (MoE), carved out of the DP ranks")
    zero_stage: Literal[0, 1, 2, 3] = Field(0, description="ZeRO stage over the data-parallel group: 0 none, 1 "
                                            "optimizer state, 2 + gradients, 3 + weights (FSDP full shard)")
    fsdp: Optional[Literal["no_shard", "shard_grad_op", "full_shard", "hybrid_shard"]] = Field(
        None, description="PyTorch FSDP's name for the sharding: sets zero_stage (0, 2, 3, 3); hybrid_shard shards "
                          "within a node and replicates across nodes")
    sharding_group: Optional[PositiveCount] = Field(
        None, description="ranks a ZeRO/FSDP shard group spans (default: all DP ranks; fewer = hybrid sharding)")
    micro_batch_size: quantity("count", "Sequences per accelerator per micro-step B_local: what one forward "
                               "and backward pass holds", minimum=1, integer=True)
    gradient_accumulation_steps: Optional[quantity(
        "count", "Micro-batches per optimizer step on each DP rank m (default: global batch / (micro-batch × DP), "
                 "else 1)", minimum=1, integer=True)] = None
    global_batch_size: Optional[quantity(
        "count", "Sequences per optimizer step across all replicas (= micro-batch × accumulation × DP); sets the "
                 "accumulation", minimum=1, integer=True)] = None
    recompute: Literal["none", "selective", "full"] = Field(
        "none", description="activation recomputation: none, selective (the framework's: Megatron the attention "
                            "core, torchtitan op-level SAC, every second matmul saved) or full layers")
    recompute_layer_fraction: Optional[quantity(
        "ratio", "Share of the layers that recompute: full checkpoints (Megatron --recompute-num-layers / L); the "
                 "rest keep all their activations", exclusive_minimum=0, maximum=1)] = None
    fsdp_prefetch: Optional[quantity(
        "count", "ZeRO-3/FSDP units gathered ahead of the one computing (FSDP backward_prefetch / "
                 "forward_prefetch: 1; DeepSpeed: stage3_prefetch_bucket_size over one block's parameters, a "
                 "fraction such as 0.25): each holds one more unsharded layer",
        minimum=0)] = None
    lora: Optional[LoraPolicy] = Field(None, description="parameter-efficient fine-tuning: LoRA or QLoRA adapters "
                                                         "on a frozen base")
    offload: Optional[OffloadPolicy] = Field(None, description="optimizer, parameter and activation offloading to "
                                                               "host memory")
    precision: Literal["bf16", "fp16", "fp8"] = Field(
        "bf16", description="compute precision; selects the catalog's peak (fp16: with dynamic loss scaling)")
    activation_bytes_per_element: quantity("bytes", "Bytes per activation element b", exclusive_minimum=0) = \
        default(2, "16-bit activations")
    optimizer: Annotated[
        Union[Annotated[str, Tag(BY_NAME)], Annotated[OptimizerState, Tag(INLINE)]],
        Discriminator(by_name_or_inline),
        BeforeValidator(_optimizer),
        Field(description="an optimizer/precision preset (adam-mixed, adam-bf16, adam-fp32, sgd-momentum, "
                          "adam-8bit) or bytes per parameter"),
    ] = "adam-mixed"
    checkpoint: CheckpointPolicy = Field(default_factory=CheckpointPolicy)
    retention: RetentionPolicy = Field(default_factory=RetentionPolicy)

    @model_validator(mode="after")
    def _consistent(self) -> "TrainingStrategy":
        if self.fsdp is not None:
            implied = FSDP_ZERO_STAGE[self.fsdp]
            if "zero_stage" in self.model_fields_set and self.zero_stage != implied:
                raise ContractError(f"fsdp: {self.fsdp} is ZeRO stage {implied}, but zero_stage is {self.zero_stage}",
                                    field="strategy.zero_stage")
            self.zero_stage = implied
        if self.recompute_layer_fraction is not None and self.recompute != "full":
            raise ContractError("recompute_layer_fraction is the share of layers under full recomputation: it needs "
                                "recompute: full", field="strategy.recompute_layer_fraction")
        if self.fsdp_prefetch is not None and self.zero_stage < 3:
            raise ContractError("fsdp_prefetch gathers sharded weights ahead: it needs zero_stage 3 (fsdp: "
                                "full_shard or hybrid_shard)", field="strategy.fsdp_prefetch")
        if self.offload is not None and self.offload.parameters and self.zero_stage < 3:
            raise ContractError("parameter offloading keeps the weight shards on the host: it needs zero_stage 3 "
                                "(fsdp: full_shard)", field="strategy.offload.parameters")
        if self.pipeline_schedule == "interleaved" and self.virtual_pipeline_stages < 2:
            raise ContractError("the interleaved schedule needs virtual_pipeline_stages ≥ 2",
                                field="strategy.virtual_pipeline_stages")
        if self.pipeline_schedule != "interleaved" and self.virtual_pipeline_stages > 1:
            raise ContractError("virtual_pipeline_stages > 1 needs pipeline_schedule: interleaved",
                                field="strategy.virtual_pipeline_stages")
        return self


class Thresholds(Section):
    """When a figure becomes a warning. Thresholds are assumptions too."""

    collective_overlap_share: quantity(
        "ratio", "Collective floor share of the step above which it must overlap with compute", minimum=0) = \
        default(0.10, "a floor above 10 % of the step needs overlap")
    checkpoint_pause_share: quantity(
        "ratio", "Share of wall time spent writing checkpoints above which it is a problem", minimum=0) = \
        default(0.02, "more than 2 % of wall time lost to checkpoint writes is worth fixing")
    pipeline_bubble_share: quantity(
        "ratio", "Share of the compute time lost to the pipeline bubble above which it is worth shrinking",
        minimum=0) = default(0.10, "a bubble above 10 % of the compute time is worth more micro-batches")
    goodput: quantity(
        "ratio", "Goodput (useful training time over expected wall time, failures and checkpoint pauses counted) "
                 "below which it is worth fixing", minimum=0, maximum=1) = \
        default(0.90, "a judgment: below 90 %, a tenth of the paid accelerator-hours is lost")


class TrainingAssumptions(EfficiencyAssumptions):
    """The methods, efficiencies and placeholder factors: the numbers a short run should replace (the op-level
    efficiencies and the attention FLOPs convention: :class:`EfficiencyAssumptions`, shared with serving)."""

    step_time_model: Optional[Literal["efficiency", "components"]] = Field(
        None, description="components (the default): each step's compute, optimizer, pipeline bubble and exposed "
                          "communication; efficiency: N × peak × MFU × scaling efficiency (the lesson's method; "
                          "implied when end_to_end_mfu or scaling_efficiency is stated)")
    compute_model: Optional[Literal["op_level", "flat"]] = Field(
        None, description="op_level (the default when the architecture is known): every op of a layer on its "
                          "roofline with the accelerator family's efficiency curve; flat: one stated utilization "
                          "(single_accelerator_mfu or single_accelerator_hfu; implied when one is stated)")
    activation_model: Optional[Literal["saved_tensor_factor", "korthikanti"]] = Field(
        None, description="korthikanti (the default): Korthikanti et al. 2022 per-layer formulas; "
                          "saved_tensor_factor: layers × factor × one hidden-state tensor (the lesson's method)")
    attention_kernel: Literal["flash", "eager"] = Field(
        "flash", description="flash (the default of current stacks: FlashAttention, cuDNN/TE fused attention, SDPA): "
                             "no s × s scores kept, the causal half computed; eager: the full scores materialized "
                             "(Megatron-LM before 2023)")
    single_accelerator_mfu: Optional[quantity(
        "ratio", "Model-FLOPs utilization of one accelerator (MFU): model FLOPs over its peak",
        exclusive_minimum=0, maximum=1)] = None
    single_accelerator_hfu: Optional[quantity(
        "ratio", "Hardware-FLOPs utilization of one accelerator (HFU): executed FLOPs, recomputation included, over its "
                 "peak (what Megatron-LM's TFLOP/s per GPU measures)", exclusive_minimum=0, maximum=1)] = None
    scaling_efficiency: Optional[quantity(
        "ratio", "Rate kept when spreading over N accelerators, relative to N single ones",
        exclusive_minimum=0, maximum=1)] = None
    end_to_end_mfu: Optional[quantity(
        "ratio", "Measured model FLOPs utilization of the whole multi-accelerator job; replaces "
        "single_accelerator_mfu × scaling_efficiency", exclusive_minimum=0, maximum=1)] = None
    end_to_end_hfu: Optional[quantity(
        "ratio", "Measured hardware-FLOPs utilization of the whole job: executed FLOPs, recomputation included, over "
        "N × peak (what Megatron-LM, BLOOM and PaLM's HFU publish); replaces single_accelerator_hfu × "
        "scaling_efficiency", exclusive_minimum=0, maximum=1)] = None
    expert_load_imbalance: quantity(
        "ratio", "Tokens the busiest expert receives over the mean (MoE)", minimum=1) = default_range(
        1.0, 1.0, 1.25, "balanced routing; the range covers the capacity factors of 1.0-1.25 of Switch Transformer "
                        "(Fedus et al. 2021)")
    saved_tensor_factor: quantity(
        "ratio", "Hidden-state-sized tensors retained per layer for the backward pass", exclusive_minimum=0) = \
        default(8, LESSON + " (a placeholder to replace with a measured peak)")
    runtime_buffer: Optional[quantity("bytes", "Runtime memory outside PyTorch's allocator per accelerator (CUDA "
                                      "context, NCCL buffers); default: catalog runtime.yaml", minimum=0)] = None
    allocator_reserve: quantity(
        "ratio", "Memory the caching allocator reserves beyond what tensors occupy, as a share of the allocated "
                 "peak (fragmentation; torch.cuda.max_memory_reserved / max_memory_allocated − 1)", minimum=0) = \
        default(0.0, "not modelled unless stated (the headroom covers it; no range, so that --uncertainty does not "
                     "count fragmentation twice); PyTorch's caching allocator commonly reserves 5-30 % above the "
                     "allocated peak: state it, with that range, to plan with it")
    cpu_optimizer_rate: quantity(
        "count_rate", "Parameters per second the host CPUs of one node update with the optimizer when it is offloaded "
                      "(strategy.offload.optimizer: cpu), e.g. '4B parameters/s'", exclusive_minimum=0) = \
        default_range(4.0e9, 1.0e9, 4.5e9, "ZeRO-Offload's CPU-Adam (Ren et al. 2021, Table 3, as recalled, not "
                                           "checked against a stored copy): about 1B parameters in 0.22 s and 10B in "
                                           "2.6 s on a DGX-2's two 24-core Xeons (AVX-512), 5.1-6.5x torch's CPU Adam "
                                           "(DeepSpeed docs); hosts with fewer cores or AVX2 only run several times "
                                           "slower (DeepSpeed issues #1635, #6834): measure it")
    failure_rate: quantity(
        "count", "Job-interrupting failures per accelerator-hour λ (hardware, software and network), e.g. 2.7e-5",
        minimum=0) = default_range(2.7e-5, 1.2e-5, 1.2e-4, FLEET_FAILURE_RATE_SOURCE)
    restart_time: quantity(
        "seconds", "Time from a failure to training again: detection, rescheduling, reloading the last checkpoint, "
                   "warm-up", minimum=0) = default_range(
        900, 300, 3600, "assumed: a quarter of an hour to detect, replace the node and reload; minutes with hot "
                        "spares and in-memory checkpoints, an hour without automation")
    headroom: quantity("ratio", "Extra share of planned memory kept free", minimum=0) = default_range(
        0.10, 0.05, 0.25, "assumed margin for allocator fragmentation and transient peaks beyond the runtime buffer; "
                          "the lesson's conservative 0.25 is the top of the range (state it to plan with it)")
    data_parallel_overlap: quantity("ratio", "Share of data-parallel communication hidden behind the backward pass "
                                    "(at most the backward it can overlap)", minimum=0, maximum=1) = \
        default_range(0.5, 0.0, 0.9, "half hidden by bucketed overlap with the backward pass (never more than the "
                                     "backward it overlaps); measure it")
    model_parallel_overlap: quantity("ratio", "Share of TP, CP, EP and PP communication hidden behind compute",
                                     minimum=0, maximum=1) = default_range(
        0.0, 0.0, 0.5, "on the critical path, as Megatron-LM runs it without TP communication overlap; "
                       "Transformer Engine's overlapped GEMMs hide part of it")
    collective_algorithm: Literal["ring", "tree"] = Field("ring", description="all-reduce algorithm")
    thresholds: Thresholds = Field(default_factory=Thresholds)

    @model_validator(mode="after")
    def _one_efficiency_model(self) -> "TrainingAssumptions":
        if self.end_to_end_mfu is not None and self.end_to_end_hfu is not None:
            raise ContractError("state end_to_end_mfu or end_to_end_hfu, not both: one divides the model's FLOPs, the "
                                "other the executed ones (recomputation included)", field="assumptions.end_to_end_hfu")
        for end_to_end in ("end_to_end_mfu", "end_to_end_hfu"):
            if getattr(self, end_to_end) is None:
                continue
            stated = [n for n in ("single_accelerator_mfu", "single_accelerator_hfu", "scaling_efficiency")
                      if getattr(self, n) is not None]
            if stated:
                raise ContractError(
                    f"state either {end_to_end} or {' and '.join(stated)}, not both: a measured end-to-end "
                    f"{end_to_end[-3:].upper()} already includes the scaling losses, so multiplying it by a scaling "
                    "factor would count them twice", field=f"assumptions.{end_to_end}")
        if self.single_accelerator_mfu is not None and self.single_accelerator_hfu is not None:
            raise ContractError("state single_accelerator_mfu or single_accelerator_hfu, not both: one divides the "
                                "model's FLOPs, the other the executed ones", field="assumptions.single_accelerator_hfu")
        if self.step_time == "components":
            for name in ("end_to_end_mfu", "end_to_end_hfu", "scaling_efficiency"):
                if getattr(self, name) is not None:
                    raise ContractError(
                        f"step_time_model components adds the communication time itself; {name} would count the "
                        "distribution losses twice (state single_accelerator_mfu only)", field=f"assumptions.{name}")
        if self.compute_model == "op_level":
            for name in ("single_accelerator_mfu", "single_accelerator_hfu"):
                if getattr(self, name) is not None:
                    raise ContractError(f"compute_model op_level derives the compute from the ops; {name} applies to "
                                        "compute_model: flat", field=f"assumptions.{name}")
        if self.compute_model == "flat" or self.step_time == "efficiency":
            for name in OP_LEVEL_FIGURES:
                if getattr(self, name) is not None:
                    raise ContractError(f"{name} is a figure of the op-level compute model (compute_model: "
                                        "op_level, step_time_model: components)", field=f"assumptions.{name}")
        return self

    @property
    def step_time(self) -> str:
        """The step-time method in force: stated, implied by an end-to-end efficiency, or components."""
        if self.step_time_model is not None:
            return self.step_time_model
        if self.end_to_end_mfu is not None or self.end_to_end_hfu is not None or self.scaling_efficiency is not None:
            return "efficiency"
        return "components"

    def compute(self, architecture_known: bool) -> str:
        """The compute method of the components model: op_level, model_flops (MFU) or hardware_flops (HFU)."""
        if self.single_accelerator_hfu is not None:
            return "hardware_flops"
        if self.compute_model == "flat" or self.single_accelerator_mfu is not None or not architecture_known:
            return "model_flops"
        return "op_level"

    @property
    def hardware_flops_basis(self) -> bool:
        """Whether the stated utilization counts executed FLOPs (HFU) rather than the model's (MFU)."""
        return self.single_accelerator_hfu is not None or self.end_to_end_hfu is not None

    @property
    def activations(self) -> str:
        return self.activation_model or "korthikanti"

    def efficiency(self, architecture_known: bool = True, step_time: str | None = None) -> dict[str, Stated]:
        """The utilization inputs in force: end_to_end_mfu (or _hfu) alone, the lesson's (defaulted) pair, or the
        flat component model's MFU or HFU (none for the op-level model). ``step_time``: the method in force, when
        the inputs chose another than :attr:`step_time` (components without the network it needs)."""
        if (step_time or self.step_time) == "components":
            compute = self.compute(architecture_known)
            if compute == "hardware_flops":
                return {"single_accelerator_hfu": self.single_accelerator_hfu}
            if compute == "model_flops":
                return {"single_accelerator_mfu": self.single_accelerator_mfu or FLAT_MFU}
            return {}
        if self.end_to_end_mfu is not None:
            return {"end_to_end_mfu": self.end_to_end_mfu}
        if self.end_to_end_hfu is not None:
            return {"end_to_end_hfu": self.end_to_end_hfu}
        if self.single_accelerator_hfu is not None:
            return {"single_accelerator_hfu": self.single_accelerator_hfu,
                    "scaling_efficiency": self.scaling_efficiency or default(0.80, LESSON)}
        return {
            "single_accelerator_mfu": self.single_accelerator_mfu or default(0.30, LESSON),
            "scaling_efficiency": self.scaling_efficiency or default(0.80, LESSON),
        }


class TrainingContract(ContractBase):
    """A workload contract for a training job: workload, supply, strategy and assumptions."""

    workload: TrainingWorkload
    supply: TrainingSupply
    strategy: TrainingStrategy
    assumptions: TrainingAssumptions = Field(default_factory=TrainingAssumptions)

    @property
    def kind(self) -> str:
        return "training"
