"""Hugging Face accelerate: an ``accelerate launch --config_file`` YAML with FSDP options, and reading one back.

Keys of accelerate 1.15.0 (:data:`botec.launch.options.ACCELERATE`), whose ``ClusterConfig.from_yaml_file``
refuses a key it does not know (so the tool, version and what the file cannot express are YAML comments):

- ``num_processes`` N (all ranks), ``num_machines`` (nodes);
- ZeRO-3 and ZeRO-2: ``distributed_type: FSDP`` with ``fsdp_config.fsdp_version: 2`` and
  ``fsdp_reshard_after_forward`` true (full shard) or false (parameters kept gathered: ZeRO-2);
  ``fsdp_offload_params`` (parameters, gradients and optimizer state to the host), ``fsdp_activation_checkpointing``
  (full recomputation); hybrid sharding and TP/CP in ``parallelism_config`` (dp_replicate, dp_shard, tp, cp sizes);
- ZeRO-1, or an optimizer offloaded without the parameters: ``distributed_type: DEEPSPEED`` with
  ``deepspeed_config.zero_stage`` and ``offload_optimizer_device``, which FSDP cannot express;
- ZeRO-0: ``MULTI_GPU`` (DDP), or ``NO`` on one accelerator;
- ``mixed_precision``: bf16, fp16 or fp8.
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.options import ACCELERATE
from botec.launch.commandline import file_header, whole_number, yaml_document
from botec.launch.plan import fields_of, training_plan

__all__ = ["FORMAT"]


def export(result) -> str:
    plan = training_plan(result)
    unexpressed = ["the micro-batch, accumulation, sequence length and steps: your training script's "
                   f"(b = {plan.micro_batch_size}, m = {plan.gradient_accumulation_steps}, S = {plan.sequence_length}, "
                   f"{plan.steps} steps)"]
    if plan.pipeline_parallel > 1 or plan.expert_parallel > 1:
        unexpressed.append(f"PP {plan.pipeline_parallel} and EP {plan.expert_parallel}: accelerate's "
                           "parallelism_config has no such degrees")
    deepspeed = plan.zero_stage == 1 or (plan.offload_optimizer == "cpu" and not plan.offload_parameters
                                         and plan.zero_stage > 0)
    kind = ("DEEPSPEED" if deepspeed else "FSDP" if plan.zero_stage > 0 else
            "MULTI_GPU" if plan.accelerators > 1 else "NO")
    config: dict = {"compute_environment": "LOCAL_MACHINE", "distributed_type": kind,
                    "mixed_precision": plan.precision, "num_processes": plan.accelerators,
                    "num_machines": plan.nodes, "machine_rank": 0, "main_training_function": "main",
                    "rdzv_backend": "static", "same_network": True, "use_cpu": False, "debug": False}
    if kind == "DEEPSPEED":
        config["deepspeed_config"] = {
            "zero_stage": plan.zero_stage, "gradient_accumulation_steps": plan.gradient_accumulation_steps,
            "offload_optimizer_device": "cpu" if plan.offload_optimizer == "cpu" else "none",
            "offload_param_device": "cpu" if plan.offload_parameters else "none"}
    if kind == "FSDP":
        config["fsdp_config"] = {
            "fsdp_version": 2, "fsdp_reshard_after_forward": plan.zero_stage == 3,
            "fsdp_offload_params": plan.offload_parameters, "fsdp_activation_checkpointing": plan.recompute == "full",
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True}
        if plan.hybrid_shard or plan.tensor_parallel > 1 or plan.context_parallel > 1:
            shard = plan.sharding_degree if plan.hybrid_shard else plan.data_parallel
            config["parallelism_config"] = {
                "parallelism_config_dp_replicate_size": plan.data_parallel // shard,
                "parallelism_config_dp_shard_size": shard, "parallelism_config_tp_size": plan.tensor_parallel,
                "parallelism_config_cp_size": plan.context_parallel}
    elif plan.tensor_parallel > 1 or plan.context_parallel > 1:
        unexpressed.append("TP and CP outside FSDP")
    if plan.recompute == "selective" or (plan.recompute == "full" and kind != "FSDP"):
        unexpressed.append(f"{plan.recompute} recomputation: enable it in the model (gradient_checkpointing_enable())")
    if plan.lora:
        unexpressed.append("LoRA adapters (PEFT)")
    header = file_header("accelerate", ACCELERATE["version"], "accelerate", result.contract.name,
                         [f"options: {ACCELERATE['source']}"], unexpressed)
    return yaml_document(header, config)


_ZERO_OF_SHARDING = {"FULL_SHARD": 3, "HYBRID_SHARD": 3, "SHARD_GRAD_OP": 2, "HYBRID_SHARD_ZERO2": 2, "NO_SHARD": 0}


def read(text: str, origin: str) -> dict:
    from botec.yamlfile import parse_user_yaml

    config = parse_user_yaml(text, origin)
    if not isinstance(config, dict):
        raise ContractError("an accelerate config is a YAML mapping", origin=origin)
    kind = str(config.get("distributed_type", "NO"))
    values: dict = {"supply.count": whole_number(config["num_processes"], "num_processes", origin)
                    if "num_processes" in config else None}
    precision = config.get("mixed_precision")
    if precision in ("bf16", "fp16", "fp8"):
        values["strategy.precision"] = precision
    if kind in ("MULTI_GPU", "NO"):
        values["strategy.zero_stage"] = 0
    elif kind == "DEEPSPEED":
        values.update(_read_deepspeed(_mapping(config, "deepspeed_config", origin), origin))
    elif kind == "FSDP":
        values.update(_read_fsdp(_mapping(config, "fsdp_config", origin),
                                 _mapping(config, "parallelism_config", origin), origin))
    else:
        raise ContractError(f"expected FSDP, DEEPSPEED, MULTI_GPU or NO, got {kind[:40]!r}", field="distributed_type",
                            origin=origin)
    return fields_of(values)


def _mapping(config: dict, key: str, origin: str) -> dict:
    """The section ``key`` of the config (empty when absent); a one-line error when it is not a mapping."""
    section = config.get(key) or {}
    if not isinstance(section, dict):
        raise ContractError("expected a mapping of key: value", field=key, origin=origin)
    return section


def _read_deepspeed(section: dict, origin: str) -> dict:
    stage = section.get("zero_stage", 0)
    if stage not in (0, 1, 2, 3):
        raise ContractError(f"expected 0, 1, 2 or 3, got {str(stage)[:40]!r}", field="deepspeed_config.zero_stage",
                            origin=origin)
    values = {"strategy.zero_stage": stage}
    if section.get("offload_optimizer_device") == "cpu":
        values["strategy.offload.optimizer"] = "cpu"
    if section.get("offload_param_device") == "cpu":
        values["strategy.offload.parameters"] = True
    return values


def _read_fsdp(fsdp: dict, parallel: dict, origin: str) -> dict:
    reshard = fsdp.get("fsdp_reshard_after_forward", fsdp.get("fsdp_sharding_strategy", True))
    if isinstance(reshard, str) and reshard.upper() in _ZERO_OF_SHARDING:
        stage = _ZERO_OF_SHARDING[reshard.upper()]
    elif isinstance(reshard, bool):
        stage = 3 if reshard else 2
    else:
        raise ContractError(f"expected true, false or one of {', '.join(_ZERO_OF_SHARDING)}, got {str(reshard)[:40]!r}",
                            field="fsdp_config.fsdp_reshard_after_forward", origin=origin)
    values: dict = {"strategy.zero_stage": stage,
                    "strategy.recompute": "full" if fsdp.get("fsdp_activation_checkpointing") else "none"}
    if fsdp.get("fsdp_offload_params"):
        values["strategy.offload.optimizer"], values["strategy.offload.parameters"] = "cpu", True
    for key, path in (("tp_size", "strategy.tensor_parallel"), ("cp_size", "strategy.context_parallel")):
        if f"parallelism_config_{key}" in parallel:
            values[path] = whole_number(parallel[f"parallelism_config_{key}"], f"parallelism_config_{key}", origin)
    replicate = parallel.get("parallelism_config_dp_replicate_size", 1)
    if replicate not in (None, 1) and stage == 3:
        values["strategy.fsdp"], values["strategy.zero_stage"] = "hybrid_shard", None
        values["strategy.sharding_group"] = whole_number(parallel.get("parallelism_config_dp_shard_size"),
                                                         "parallelism_config_dp_shard_size", origin)
    return values


FORMAT = LaunchFormat(
    name="accelerate", kind="training", tool="accelerate", version=ACCELERATE["version"], suffix=".yaml",
    description="an accelerate config (accelerate launch --config_file) with FSDP options",
    export=export, read=read, markers=("distributed_type:",))
