"""torchtitan: a ``torchrun ... -m torchtitan.train`` launch script, and reading one back.

torchtitan 0.3.0 has no job TOML any more: a job is a config function of a model's ``config_registry``
(``--module llama3 --config llama3_8b``) with command-line overrides ``--<section>.<field> value``, parsed by tyro
(torchtitan/config/manager.py), and the activation-checkpointing policy is a tyro subcommand
(``activation-checkpoint:full``). This format writes exactly that (:data:`botec.launch.options.TORCHTITAN`):

- data parallelism: ``--parallelism.data_parallel_shard_degree`` (the FSDP group) and
  ``--parallelism.data_parallel_replicate_degree`` (replicas of it): ZeRO-3 shards over DP (hybrid: over the
  sharding group, replicated across groups); ZeRO-2 is FSDP with ``--parallelism.fsdp_reshard_after_forward never``
  (parameters stay gathered between forward and backward); ZeRO-0 replicates (DDP);
- ``--parallelism.tensor_parallel_degree``, ``pipeline_parallel_degree``, ``context_parallel_degree``,
  ``expert_parallel_degree`` (torchtitan applies sequence parallelism with TP by default);
- batch: ``--training.local_batch_size`` is the sequences a DP rank takes per micro-step b (under PP: b × m, split
  into ``pipeline_parallel_microbatch_size`` b), ``--training.global_batch_size`` B = b × m × DP (the accumulation is
  B / (local × DP)), ``--training.seq_len`` S, ``--training.steps``;
- recomputation: the subcommand none / selective / full; ``--training.enable_cpu_offload`` (FSDP offloads
  parameters, gradients and optimizer state); ``--checkpoint.interval`` in steps.
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.options import TORCHTITAN
from botec.launch.commandline import (file_header, product, shell_command, shell_script, unread_note,
                                      whole_number)
from botec.launch.plan import fields_of, training_plan
from botec.launch.script import read_command

__all__ = ["FORMAT", "CONFIGS"]

CONFIGS = {"llama-3.1-8b": ("llama3", "llama3_8b"), "llama-3.1-70b": ("llama3", "llama3_70b"),
           "llama-3.1-405b": ("llama3", "llama3_405b"), "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b")}
"""botec's catalog models that torchtitan 0.3.0 ships a config function for (models/*/config_registry.py)."""

_SCHEDULES = {"1f1b": "1F1B", "interleaved": "Interleaved1F1B"}
_FLAGS = {"--checkpoint.enable", "--training.enable_cpu_offload", "--parallelism.enable_sequence_parallel"}
_RECOMPUTE = {"none": "activation-checkpoint:none", "selective": "activation-checkpoint:selective",
              "full": "activation-checkpoint:full"}


def export(result) -> str:
    plan = training_plan(result)
    unexpressed = ["the dataset, tokenizer (hf_assets_path) and optimizer: those of the config function"]
    module, config = CONFIGS.get(plan.model_catalog, (None, None))
    if module is None:
        module, config = "<model-module>", "<config-function>"
        unexpressed.append(f"the model ({plan.model_catalog or 'not a catalog model'}): torchtitan 0.3.0 ships no "
                           "config function for it; replace the --module/--config placeholders with yours")
    shard, replicate = _data_parallel(plan, unexpressed)
    pipelined = plan.pipeline_parallel > 1
    local_batch = plan.micro_batch_size * (plan.gradient_accumulation_steps if pipelined else 1)
    options: list[tuple[str, object]] = [
        ("--module", module), ("--config", config),
        ("--training.local_batch_size", local_batch), ("--training.global_batch_size", plan.global_batch_size),
        ("--training.seq_len", plan.sequence_length), ("--training.steps", plan.steps),
        ("--parallelism.data_parallel_replicate_degree", replicate),
        ("--parallelism.data_parallel_shard_degree", shard)]
    if plan.zero_stage == 2:
        options.append(("--parallelism.fsdp_reshard_after_forward", "never"))
    options += [("--parallelism.tensor_parallel_degree", plan.tensor_parallel),
                ("--parallelism.pipeline_parallel_degree", plan.pipeline_parallel),
                ("--parallelism.context_parallel_degree", plan.context_parallel),
                ("--parallelism.expert_parallel_degree", plan.expert_parallel)]
    if pipelined:
        options += [("--parallelism.pipeline_parallel_microbatch_size", plan.micro_batch_size),
                    ("--parallelism.pipeline_parallel_schedule",
                     _SCHEDULES["interleaved" if plan.virtual_pipeline_stages > 1 else "1f1b"])]
        if plan.virtual_pipeline_stages > 2:
            unexpressed.append(f"{plan.virtual_pipeline_stages} virtual stages per rank "
                               "(--parallelism.pipeline_parallel_layers_per_stage sets them)")
    if plan.tensor_parallel > 1 and not plan.sequence_parallel:
        unexpressed.append("TP without sequence parallelism (torchtitan enables it with TP)")
    if plan.precision != "bf16":
        unexpressed.append(f"{plan.precision} training: torchtitan's mixed precision is bf16 (fp8 is a model "
                           "converter of the config function)")
    if plan.offload_optimizer == "cpu" and plan.offload_parameters:
        options.append(("--training.enable_cpu_offload", None))
    elif plan.offload_optimizer != "none" or plan.offload_parameters:
        unexpressed.append("offloading only part of the state (torchtitan offloads parameters, gradients and "
                           "optimizer state together)")
    if plan.recompute_layer_fraction is not None and plan.recompute_layer_fraction < 1:
        unexpressed.append(f"recompute_layer_fraction {plan.recompute_layer_fraction:g}")
    if plan.lora:
        unexpressed.append("LoRA adapters")
    options += [("--checkpoint.enable", None), ("--checkpoint.interval", plan.checkpoint_interval_steps),
                (_RECOMPUTE[plan.recompute], None)]
    header = file_header("torchtitan", TORCHTITAN["version"], "torchtitan", result.contract.name,
                         [f"options: {TORCHTITAN['source']}"], unexpressed)
    launcher = ["torchrun", "--nproc-per-node", plan.processes_per_node, "--nnodes", plan.nodes,
                "-m", "torchtitan.train"]
    return shell_script(header, [([], shell_command(launcher, options))])


def _data_parallel(plan, unexpressed: list[str]) -> tuple[int, int]:
    """(shard degree, replicate degree) of the plan's data parallelism."""
    if plan.zero_stage == 0:
        return 1, plan.data_parallel
    if plan.zero_stage == 1:
        unexpressed.append("ZeRO-1 (torchtitan's FSDP shards gradients too: written as ZeRO-2)")
    shard = plan.sharding_degree if plan.hybrid_shard else plan.data_parallel
    return shard, max(1, plan.data_parallel // shard)


def read(text: str, origin: str) -> dict:
    command = read_command(text, origin, ("torchtitan.train", "torchtitan/train.py"), _FLAGS)
    o = command.options

    def number(option: str, default=None):
        return whole_number(o[option], option, origin) if option in o else default

    world = command.world_size(origin)
    tp, pp = number("--parallelism.tensor_parallel_degree", 1), number("--parallelism.pipeline_parallel_degree", 1)
    cp = number("--parallelism.context_parallel_degree", 1)
    replicate = number("--parallelism.data_parallel_replicate_degree", 1)
    shard_raw = str(o.get("--parallelism.data_parallel_shard_degree", "-1")).strip()
    if shard_raw == "-1":   # torchtitan: the ranks left over
        shard = world // (replicate * tp * pp * cp) if world else None
    else:
        shard = whole_number(shard_raw, "--parallelism.data_parallel_shard_degree", origin)
    values = {"supply.count": world, "strategy.tensor_parallel": tp, "strategy.pipeline_parallel": pp,
              "strategy.context_parallel": cp, "strategy.sequence_parallel": tp > 1,
              "strategy.expert_parallel": number("--parallelism.expert_parallel_degree", 1),
              "workload.sequence_length": number("--training.seq_len", 2048)}
    if shard == 1 or shard is None:
        values["strategy.zero_stage"] = 0 if shard == 1 else None
    else:
        reshard = o.get("--parallelism.fsdp_reshard_after_forward", "default")
        values["strategy.zero_stage"] = 2 if reshard == "never" else 3
        if replicate > 1:
            values["strategy.fsdp"], values["strategy.zero_stage"] = "hybrid_shard", None
            values["strategy.sharding_group"] = shard
    local = number("--training.local_batch_size", 8)
    dp = replicate * shard if shard else None
    micro = number("--parallelism.pipeline_parallel_microbatch_size", 1) if pp > 1 else local
    values["strategy.micro_batch_size"] = micro
    batch = number("--training.global_batch_size") if str(o.get("--training.global_batch_size")) != "-1" else None
    values["strategy.global_batch_size"] = batch or (product([("--training.local_batch_size", local),
                                                              ("the data-parallel degree", dp)], origin)
                                                     if dp else None)
    if values["strategy.global_batch_size"]:
        values["workload.tokens"] = product([("--training.steps", number("--training.steps", 10000)),
                                             ("--training.global_batch_size", values["strategy.global_batch_size"]),
                                             ("--training.seq_len", values["workload.sequence_length"])], origin)
    if pp > 1 and o.get("--parallelism.pipeline_parallel_schedule") == "Interleaved1F1B":
        values["strategy.pipeline_schedule"], values["strategy.virtual_pipeline_stages"] = "interleaved", 2
    values["strategy.recompute"] = _recompute(o, origin)
    if str(o.get("--training.enable_cpu_offload", "false")).lower() in ("true", "1", "yes"):
        values["strategy.offload.optimizer"], values["strategy.offload.parameters"] = "cpu", True
    values["strategy.precision"] = "bf16"
    values["workload.model"] = next((name for name, pair in CONFIGS.items()
                                     if pair == (o.get("--module"), o.get("--config"))), None)
    fields = fields_of(values)
    unknown = sorted(name for name in o if name not in TORCHTITAN["options"])
    if unknown:
        fields["_notes"] = [unread_note(unknown)]
    return fields


def _recompute(o: dict, origin: str) -> str:
    chosen = [name for name in o if name.startswith("activation-checkpoint:")]
    if not chosen:
        return "selective"   # Trainer.Config's default: SelectiveAC
    if len(chosen) > 1:
        raise ContractError(f"stated twice ({chosen[0]} and {chosen[1]}); state it once", field="activation-checkpoint",
                            origin=origin)
    policy = chosen[0].partition(":")[2]
    if policy not in ("none", "selective", "full"):
        raise ContractError(f"expected none, selective or full, got {policy[:40]!r}", field="activation-checkpoint",
                            origin=origin)
    return policy


FORMAT = LaunchFormat(
    name="torchtitan", kind="training", tool="torchtitan", version=TORCHTITAN["version"], suffix=".sh",
    description="a torchrun launch script of torchtitan.train: --module/--config and its command-line overrides",
    export=export, read=read, markers=("torchtitan.train",))
