"""The options of each training tool that botec's launch files write or read, as the pinned version defines them.

Each table was checked by hand against the source of the pinned release (downloaded from PyPI on 2026-12-01,
read, never copied); the tests hold every option an exported file states to these tables, so a name that the
pinned version does not define fails there. A tool whose version changes gets its table re-checked.
"""

from __future__ import annotations

__all__ = ["TOOLS"]

TORCHTITAN = {
    "version": "0.3.0",
    "source": "torchtitan 0.3.0 (PyPI, 2026-09): torchtitan/config/manager.py (ConfigManager: --module, --config, "
              "then tyro flags <section>.<field>), config/configs.py (TrainingConfig, ParallelismConfig, "
              "CompileConfig), trainer.py (Trainer.Config), components/checkpointer/base.py and dcp.py "
              "(CheckpointManager.Config), distributed/activation_checkpoint.py (subcommands selective, full, "
              "memory-budget, none)",
    "options": {
        "--module", "--config",
        "--training.local_batch_size", "--training.global_batch_size", "--training.seq_len", "--training.steps",
        "--training.enable_cpu_offload", "--training.mixed_precision_param", "--training.dtype",
        "--parallelism.data_parallel_replicate_degree", "--parallelism.data_parallel_shard_degree",
        "--parallelism.fsdp_reshard_after_forward", "--parallelism.tensor_parallel_degree",
        "--parallelism.enable_sequence_parallel", "--parallelism.pipeline_parallel_degree",
        "--parallelism.pipeline_parallel_schedule", "--parallelism.pipeline_parallel_microbatch_size",
        "--parallelism.context_parallel_degree", "--parallelism.expert_parallel_degree",
        "--checkpoint.enable", "--checkpoint.interval", "--checkpoint.async_mode",
        "activation-checkpoint:none", "activation-checkpoint:selective", "activation-checkpoint:full",
    },
}

MEGATRON = {
    "version": "core_v0.19.2",
    "source": "Megatron-LM core_v0.19.2 as shipped in megatron-core 0.19.2 (PyPI, 2026-09): "
              "megatron/training/arguments.py (its add_argument calls and the ArgumentGroupFactory groups it builds "
              "from core/transformer/transformer_config.py, core/model_parallel_config.py and "
              "training/config/training_config.py: a field foo_bar is --foo-bar)",
    "options": {
        "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
        "--expert-model-parallel-size", "--sequence-parallel", "--num-virtual-stages-per-pipeline-rank",
        "--micro-batch-size", "--global-batch-size", "--seq-length", "--max-position-embeddings", "--train-iters",
        "--train-samples", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
        "--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
        "--optimizer-cpu-offload", "--bf16", "--fp16", "--fp8-format", "--num-layers", "--hidden-size",
        "--num-attention-heads", "--ffn-hidden-size", "--group-query-attention", "--num-query-groups",
        "--vocab-size", "--swiglu", "--untie-embeddings-and-output-weights", "--normalization",
        "--position-embedding-type", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
        "--save-interval",
    },
    "flags": {"--sequence-parallel", "--use-distributed-optimizer", "--use-megatron-fsdp", "--optimizer-cpu-offload",
              "--bf16", "--fp16", "--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights"},
}

DEEPSPEED = {
    "version": "0.19.8",
    "source": "DeepSpeed 0.19.8 (PyPI, 2026-10): deepspeed/runtime/constants.py (train_batch_size, "
              "train_micro_batch_size_per_gpu, gradient_accumulation_steps), runtime/precision_config.py (bf16, fp16: "
              "enabled), runtime/zero/config.py (zero_optimization: stage, offload_optimizer, offload_param), "
              "runtime/zero/offload_config.py (device: none, cpu, nvme; pin_memory), "
              "runtime/activation_checkpointing/config.py (activation_checkpointing: partition_activations, "
              "cpu_checkpointing, ...)",
    "options": {
        "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
        "bf16", "bf16.enabled", "fp16", "fp16.enabled",
        "zero_optimization", "zero_optimization.stage", "zero_optimization.offload_optimizer",
        "zero_optimization.offload_optimizer.device", "zero_optimization.offload_optimizer.pin_memory",
        "zero_optimization.offload_param", "zero_optimization.offload_param.device",
        "zero_optimization.offload_param.pin_memory",
        "activation_checkpointing", "activation_checkpointing.partition_activations",
        "activation_checkpointing.cpu_checkpointing",
    },
}

ACCELERATE = {
    "version": "1.15.0",
    "source": "accelerate 1.15.0 (PyPI, 2026-09): accelerate/commands/config/config_args.py (ClusterConfig, whose "
              "from_yaml_file refuses unknown keys), commands/config/cluster.py (fsdp_config, deepspeed_config and "
              "parallelism_config keys), utils/constants.py (FSDP_SHARDING_STRATEGY)",
    "options": {
        "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug", "num_processes",
        "num_machines", "machine_rank", "main_training_function", "rdzv_backend", "same_network",
        "fsdp_config", "fsdp_config.fsdp_version", "fsdp_config.fsdp_reshard_after_forward",
        "fsdp_config.fsdp_offload_params", "fsdp_config.fsdp_activation_checkpointing",
        "fsdp_config.fsdp_auto_wrap_policy", "fsdp_config.fsdp_state_dict_type",
        "fsdp_config.fsdp_cpu_ram_efficient_loading", "fsdp_config.fsdp_sharding_strategy",
        "deepspeed_config", "deepspeed_config.zero_stage", "deepspeed_config.offload_optimizer_device",
        "deepspeed_config.offload_param_device", "deepspeed_config.gradient_accumulation_steps",
        "parallelism_config", "parallelism_config.parallelism_config_dp_replicate_size",
        "parallelism_config.parallelism_config_dp_shard_size", "parallelism_config.parallelism_config_tp_size",
        "parallelism_config.parallelism_config_cp_size",
    },
}

TOOLS = {"torchtitan": TORCHTITAN, "megatron": MEGATRON, "deepspeed": DEEPSPEED, "accelerate": ACCELERATE}
"""Each training format's pinned tool: version, the source files read, and the option names."""
