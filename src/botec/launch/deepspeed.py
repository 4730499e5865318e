"""DeepSpeed: a ``ds_config.json``, and reading one back.

Keys of DeepSpeed 0.19.8 (:data:`botec.launch.options.DEEPSPEED`):

- ``train_batch_size`` B = ``train_micro_batch_size_per_gpu`` b × ``gradient_accumulation_steps`` m × DP, the
  identity DeepSpeed checks at start-up, so a file read back gives DP = B / (b × m);
- ``zero_optimization.stage`` (0-3), ``offload_optimizer.device`` / ``offload_param.device`` ``cpu`` (ZeRO-Offload,
  ZeRO-Infinity's parameter offload needs stage 3);
- ``bf16.enabled`` / ``fp16.enabled`` (fp8 is not a DeepSpeed config key: Transformer Engine's);
- the tool, version and what the file cannot express under ``"_comment"`` (JSON has no comments; DeepSpeed's
  config reader ignores a top-level key it does not know).

A value of ``"auto"`` (the Hugging Face Trainer fills it in) carries nothing and is not read.
"""

from __future__ import annotations

import json

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.commandline import json_document, whole_number
from botec.launch.options import DEEPSPEED
from botec.launch.plan import fields_of, training_plan

__all__ = ["FORMAT"]


def export(result) -> str:
    plan = training_plan(result)
    unexpressed = ["the optimizer and learning-rate schedule (those of your training script, or DeepSpeed's "
                   "'optimizer' and 'scheduler' sections)"]
    if plan.recompute != "none":
        unexpressed.append(f"{plan.recompute} activation recomputation: enable it in the model (Hugging Face: "
                           "gradient_checkpointing_enable(); Megatron-DeepSpeed: --checkpoint-activations)")
    model_parallel = {"TP": plan.tensor_parallel, "PP": plan.pipeline_parallel, "CP": plan.context_parallel,
                      "EP": plan.expert_parallel}
    if any(degree > 1 for degree in model_parallel.values()):
        unexpressed.append("the model-parallel degrees (" + ", ".join(f"{k} {v}" for k, v in model_parallel.items())
                           + "): the training framework's arguments")
    if plan.hybrid_shard:
        unexpressed.append(f"hybrid sharding over {plan.sharding_degree} ranks (DeepSpeed's hpZ/MiCS: set "
                           "zero_hpz_partition_size or mics_shard_size)")
    if plan.precision == "fp8":
        unexpressed.append("fp8 matmuls (Transformer Engine's); the config runs bf16")
    if plan.lora:
        unexpressed.append("LoRA adapters (PEFT)")
    config: dict = {
        "_comment": {"written_by": "botec", "format": "deepspeed", "contract": result.contract.name or "",
                     "tool": "DeepSpeed", "version": DEEPSPEED["version"], "options": DEEPSPEED["source"],
                     "not_expressed": unexpressed},
        "train_batch_size": plan.global_batch_size,
        "train_micro_batch_size_per_gpu": plan.micro_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
    }
    config["fp16" if plan.precision == "fp16" else "bf16"] = {"enabled": True}
    zero: dict = {"stage": plan.zero_stage}
    if plan.offload_optimizer == "cpu":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    elif plan.offload_optimizer == "paged":
        unexpressed.append("a paged optimizer (bitsandbytes)")
    if plan.offload_parameters:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config["zero_optimization"] = zero
    return json_document(config)


def read(text: str, origin: str) -> dict:
    from botec.jsonfile import load_json_text

    try:
        config = load_json_text(text, origin, unique_keys=True)
    except json.JSONDecodeError as error:
        raise ContractError(f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                            origin=origin) from None
    if not isinstance(config, dict):
        raise ContractError("a DeepSpeed config is a JSON object", origin=origin)

    def number(key: str, section: dict = config, name: str = ""):
        value = section.get(key)
        if value is None or value == "auto":
            return None
        return whole_number(value, name or key, origin) if key != "stage" else _stage(value, origin)

    batch, micro = number("train_batch_size"), number("train_micro_batch_size_per_gpu")
    accumulation = number("gradient_accumulation_steps")
    values: dict = {"strategy.micro_batch_size": micro, "strategy.global_batch_size": batch}
    if batch and micro and accumulation:
        if batch % (micro * accumulation):
            raise ContractError(f"{batch} is not train_micro_batch_size_per_gpu ({micro}) × "
                                f"gradient_accumulation_steps ({accumulation}) × a whole number of ranks",
                                field="train_batch_size", origin=origin)
        values["strategy.data_parallel"] = batch // (micro * accumulation)
    elif accumulation and not batch:
        values["strategy.gradient_accumulation_steps"] = accumulation
    zero = config.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        raise ContractError("expected a mapping", field="zero_optimization", origin=origin)
    values["strategy.zero_stage"] = number("stage", zero, "zero_optimization.stage")
    if _device(zero, "offload_optimizer") == "cpu":
        values["strategy.offload.optimizer"] = "cpu"
    if _device(zero, "offload_param") == "cpu":
        values["strategy.offload.parameters"] = True
    for precision in ("bf16", "bfloat16", "fp16"):
        section = config.get(precision)
        if isinstance(section, dict) and section.get("enabled") is True:
            values["strategy.precision"] = "fp16" if precision == "fp16" else "bf16"
    return fields_of(values)


def _stage(value, origin: str) -> int:
    if value not in (0, 1, 2, 3) or isinstance(value, bool):
        raise ContractError(f"expected 0, 1, 2 or 3, got {str(value)[:40]!r}", field="zero_optimization.stage",
                            origin=origin)
    return value


def _device(zero: dict, key: str) -> str:
    section = zero.get(key)
    return str(section.get("device", "none")) if isinstance(section, dict) else "none"


FORMAT = LaunchFormat(
    name="deepspeed", kind="training", tool="DeepSpeed", version=DEEPSPEED["version"], suffix=".json",
    description="a DeepSpeed config (ds_config.json): batch, ZeRO stage, offload, precision",
    export=export, read=read, markers=("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size"))
