"""Megatron-LM arguments: a ``torchrun ... pretrain_gpt.py`` launch script, and reading one back.

Options of Megatron-LM core_v0.19.2 (:data:`botec.launch.options.MEGATRON`). The mapping, both ways:

- layout: ``--tensor-model-parallel-size`` TP, ``--pipeline-model-parallel-size`` PP, ``--context-parallel-size``
  CP, ``--expert-model-parallel-size`` EP, ``--sequence-parallel``, ``--num-virtual-stages-per-pipeline-rank`` v
  (interleaved 1F1B); DP = world size / (TP × PP × CP), the world size torchrun's ``--nproc-per-node`` ×
  ``--nnodes``;
- batch: ``--micro-batch-size`` b, ``--global-batch-size`` B (Megatron derives the accumulation B / (b × DP)),
  ``--seq-length`` S, ``--train-iters`` steps (tokens D = steps × B × S; ``--train-samples`` n: D = n × S);
- sharding: ZeRO-1 is ``--use-distributed-optimizer``; ZeRO-2 and 3 are Megatron FSDP with
  ``--data-parallel-sharding-strategy optim_grads`` / ``optim_grads_params``;
- recomputation: selective is ``--recompute-granularity selective``; full is ``full`` with ``--recompute-method
  uniform --recompute-num-layers 1`` (every layer), or ``block`` with n layers of each stage's L/PP when only a share
  f = n·PP/L recomputes;
- precision ``--bf16`` / ``--fp16`` (fp8: ``--bf16 --fp8-format hybrid``); ``--optimizer-cpu-offload``;
- the model's shape (Megatron has no model names): ``--num-layers``, ``--hidden-size``, ``--num-attention-heads``,
  ``--group-query-attention --num-query-groups``, ``--ffn-hidden-size``, ``--vocab-size``, ``--swiglu``,
  ``--untie-embeddings-and-output-weights``, MoE ``--num-experts``, ``--moe-router-topk``, ``--moe-ffn-hidden-size``.
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.options import MEGATRON
from botec.launch.commandline import (file_header, product, shell_command, shell_script, unread_note,
                                      whole_number)
from botec.launch.plan import fields_of, training_plan
from botec.launch.script import read_command

__all__ = ["FORMAT"]

PROGRAM = "pretrain_gpt.py"
_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}
_ZERO_OF_SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}


def export(result) -> str:
    plan = training_plan(result)
    options: list[tuple[str, object]] = [
        ("--tensor-model-parallel-size", plan.tensor_parallel),
        ("--pipeline-model-parallel-size", plan.pipeline_parallel),
        ("--context-parallel-size", plan.context_parallel),
        ("--expert-model-parallel-size", plan.expert_parallel)]
    if plan.sequence_parallel:
        options.append(("--sequence-parallel", None))
    if plan.virtual_pipeline_stages > 1:
        options.append(("--num-virtual-stages-per-pipeline-rank", plan.virtual_pipeline_stages))
    options += [("--micro-batch-size", plan.micro_batch_size), ("--global-batch-size", plan.global_batch_size),
                ("--seq-length", plan.sequence_length), ("--max-position-embeddings", plan.sequence_length),
                ("--train-iters", plan.steps)]
    unexpressed = ["data, tokenizer, learning-rate schedule and --save/--load paths"]
    if plan.zero_stage == 1:
        options.append(("--use-distributed-optimizer", None))
    elif plan.zero_stage > 1:
        options += [("--use-megatron-fsdp", None), ("--data-parallel-sharding-strategy", _SHARDING[plan.zero_stage])]
    if plan.hybrid_shard:
        unexpressed.append(f"hybrid sharding over groups of {plan.sharding_degree} ranks")
    options += _recompute(plan, unexpressed)
    options += {"bf16": [("--bf16", None)], "fp16": [("--fp16", None)],
                "fp8": [("--bf16", None), ("--fp8-format", "hybrid")]}[plan.precision]
    if plan.offload_optimizer == "cpu":
        options.append(("--optimizer-cpu-offload", None))
    elif plan.offload_optimizer == "paged":
        unexpressed.append("a paged optimizer (bitsandbytes)")
    if plan.offload_parameters:
        unexpressed.append("parameter offload to host memory")
    if plan.lora:
        unexpressed.append("LoRA adapters (Megatron-LM trains the full model)")
    options += _model(plan, unexpressed)
    options.append(("--save-interval", plan.checkpoint_interval_steps))
    about = [f"options: {MEGATRON['source']}", f"--save-interval {plan.checkpoint_interval_steps}: the contract's "
             "checkpoint interval over the estimated step time"]
    header = file_header("Megatron-LM", MEGATRON["version"], "megatron", result.contract.name, about, unexpressed)
    launcher = ["torchrun", "--nproc-per-node", plan.processes_per_node, "--nnodes", plan.nodes, PROGRAM]
    return shell_script(header, [([], shell_command(launcher, options))])


def _recompute(plan, unexpressed: list[str]) -> list[tuple[str, object]]:
    if plan.recompute == "selective":
        return [("--recompute-granularity", "selective")]
    if plan.recompute != "full":
        return []
    fraction = plan.recompute_layer_fraction
    if fraction is None or fraction >= 1 or plan.architecture is None:
        return [("--recompute-granularity", "full"), ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)]
    stage_layers = plan.architecture.layers / plan.pipeline_parallel
    layers = max(1, round(fraction * stage_layers))
    if abs(layers - fraction * stage_layers) > 1e-9:
        unexpressed.append(f"recompute_layer_fraction {fraction:g} (written as {layers} of {stage_layers:g} layers "
                           "per stage)")
    return [("--recompute-granularity", "full"), ("--recompute-method", "block"), ("--recompute-num-layers", layers)]


def _model(plan, unexpressed: list[str]) -> list[tuple[str, object]]:
    a = plan.architecture
    if a is None:
        unexpressed.append("the model's shape (--num-layers, --hidden-size, --num-attention-heads, ...): the contract "
                           "names none")
        return []
    options: list[tuple[str, object]] = [("--num-layers", a.layers), ("--hidden-size", a.hidden_size)]
    if a.attention_heads is None:
        unexpressed.append("--num-attention-heads, --ffn-hidden-size, --vocab-size: the contract gives the model as a "
                           "parameter count")
        return options
    options.append(("--num-attention-heads", a.attention_heads))
    if a.kv_heads is not None and a.kv_heads != a.attention_heads:
        options += [("--group-query-attention", None), ("--num-query-groups", a.kv_heads)]
    options += [("--ffn-hidden-size", a.ffn_size), ("--vocab-size", a.vocab_size)]
    if a.gated_mlp:
        options.append(("--swiglu", None))
    if not a.tied_embeddings:
        options.append(("--untie-embeddings-and-output-weights", None))
    if a.experts:
        options += [("--num-experts", a.experts), ("--moe-router-topk", a.experts_per_token),
                    ("--moe-ffn-hidden-size", a.expert_ffn_size)]
    if plan.model_catalog:
        unexpressed.append(f"the model's name ({plan.model_catalog}): written as its shape")
    return options


def read(text: str, origin: str) -> dict:
    command = read_command(text, origin, (PROGRAM, "pretrain_gpt", "pretrain_mamba.py", "pretrain_t5.py"),
                           MEGATRON["flags"])
    o = command.options
    unknown = sorted(name for name in o if name not in MEGATRON["options"])

    def number(option: str):
        return whole_number(o[option], option, origin) if option in o else None

    values: dict = {"supply.count": command.world_size(origin)}
    for option, path in (("--tensor-model-parallel-size", "strategy.tensor_parallel"),
                         ("--pipeline-model-parallel-size", "strategy.pipeline_parallel"),
                         ("--context-parallel-size", "strategy.context_parallel"),
                         ("--expert-model-parallel-size", "strategy.expert_parallel"),
                         ("--micro-batch-size", "strategy.micro_batch_size"),
                         ("--global-batch-size", "strategy.global_batch_size"),
                         ("--seq-length", "workload.sequence_length")):
        values[path] = number(option)
    if "--sequence-parallel" in o:
        values["strategy.sequence_parallel"] = True
    virtual = number("--num-virtual-stages-per-pipeline-rank")
    if virtual and virtual > 1:
        values["strategy.pipeline_schedule"], values["strategy.virtual_pipeline_stages"] = "interleaved", virtual
    sequence, batch = values["workload.sequence_length"], values["strategy.global_batch_size"]
    if "--train-iters" in o and sequence and batch:
        values["workload.tokens"] = product([("--train-iters", number("--train-iters")), ("--global-batch-size", batch),
                                             ("--seq-length", sequence)], origin)
    elif "--train-samples" in o and sequence:
        values["workload.tokens"] = product([("--train-samples", number("--train-samples")),
                                             ("--seq-length", sequence)], origin)
    values["strategy.zero_stage"] = _zero_stage(o, origin)
    values["strategy.precision"] = ("fp8" if "--fp8-format" in o else "fp16" if "--fp16" in o else
                                    "bf16" if "--bf16" in o else None)
    if "--optimizer-cpu-offload" in o:
        values["strategy.offload.optimizer"] = "cpu"
    values.update(_read_model(o, number))
    values.update(_read_recompute(o, number, values, origin))
    fields = fields_of(values)
    if unknown:
        fields["_notes"] = [unread_note(unknown)]
    return fields


def _zero_stage(o: dict, origin: str):
    if "--use-megatron-fsdp" in o or "--data-parallel-sharding-strategy" in o:
        strategy = o.get("--data-parallel-sharding-strategy", "no_shard")
        if strategy not in _ZERO_OF_SHARDING:
            raise ContractError(f"expected one of {', '.join(_ZERO_OF_SHARDING)}, got {str(strategy)[:40]!r}",
                                field="--data-parallel-sharding-strategy", origin=origin)
        return _ZERO_OF_SHARDING[strategy]
    return 1 if "--use-distributed-optimizer" in o else 0


def _read_model(o: dict, number) -> dict:
    if "--num-layers" not in o:
        return {}
    model = {"layers": number("--num-layers"), "hidden_size": number("--hidden-size"),
             "attention_heads": number("--num-attention-heads"), "ffn_size": number("--ffn-hidden-size"),
             "vocab_size": number("--vocab-size")}
    if model["attention_heads"] is None:   # a shape without heads: the contract needs the parameter count too
        return {f"workload.model.{k}": v for k, v in model.items() if v is not None}
    model["kv_heads"] = number("--num-query-groups") if "--group-query-attention" in o else None
    model["mlp"] = "gated" if "--swiglu" in o else "plain"
    model["tied_embeddings"] = "--untie-embeddings-and-output-weights" not in o
    if "--num-experts" in o:
        model["moe"] = {"experts": number("--num-experts"), "experts_per_token": number("--moe-router-topk") or 2,
                        "expert_ffn_size": number("--moe-ffn-hidden-size") or model["ffn_size"]}
    return {f"workload.model.{k}": v for k, v in model.items() if v is not None}


def _read_recompute(o: dict, number, values: dict, origin: str) -> dict:
    granularity = o.get("--recompute-granularity")
    if granularity is None:
        return {"strategy.recompute": "none"}
    if granularity not in ("full", "selective"):
        raise ContractError(f"expected full or selective, got {str(granularity)[:40]!r}",
                            field="--recompute-granularity", origin=origin)
    found = {"strategy.recompute": granularity}
    layers, stages = values.get("workload.model.layers"), values.get("strategy.pipeline_parallel") or 1
    if granularity == "full" and o.get("--recompute-method") == "block" and layers:
        fraction = (number("--recompute-num-layers") or 1) * stages / layers
        if fraction < 1:
            found["strategy.recompute_layer_fraction"] = fraction
    return found


FORMAT = LaunchFormat(
    name="megatron", kind="training", tool="Megatron-LM", version=MEGATRON["version"], suffix=".sh",
    description="a torchrun launch script of Megatron-LM's pretrain_gpt.py with its arguments",
    export=export, read=read, markers=("pretrain_gpt", "--tensor-model-parallel-size"))
