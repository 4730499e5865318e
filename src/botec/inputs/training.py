"""The inputs of a training estimate: the model, the layout, the cluster, the recipe, the assumptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botec.contract.training import TrainingContract
from botec.errors import ContractError
from botec.graph import Given, where
from botec.inputs import Inputs, Varied, checked
from botec.inputs.cluster import Tiers, collective_tables_given, cross_node_given, place, tiers_of
from botec.inputs.efficiency import efficiency_given
from botec.inputs.facility import accelerator_given, facility_given, host_given, runtime_given
from botec.inputs.lora import adapter_state_given, lora_given
from botec.inputs.model import model_facts, model_given, resolve_architecture
from botec.inputs.stack import stack_given, stack_of
from botec.inputs.stated import StatedInputs
from botec.layout import Layout, PipelineSchedule, Recompute, layout_of

# The SMs an overlapped TP collective takes from the GEMM beside it (strategy.tp_comm_overlap).
TP_OVERLAP_SM_SHARE = 16 / 132
TP_OVERLAP_SM_SOURCE = ("Transformer Engine's userbuffers defaults (transformer_engine/pytorch/module/base.py "
                        "initialize_ub, get_default_config): the pipelined and bulk overlaps run their communication "
                        "on 16 SMs, the GEMM on the rest (set_sm_margin), of an H100's 132; the ring-exchange ones on "
                        "the copy engines with 1 SM (the low end); NeMo's tuned H100 configs use 2-24, TE allows 32 "
                        "(UB_MAX_SM: the high end)")

__all__ = ["build", "derive"]

_SPEC_STATED = ("supply.count", "strategy.micro_batch_size", "strategy.gradient_accumulation_steps",
                "strategy.global_batch_size")


def build(contract: TrainingContract, base_dir: Path | None) -> Inputs:
    """Everything but the layout-derived inputs, which :func:`derive` adds (for the contract, or varied)."""
    from botec.catalog import accelerators
    from botec.training import TRAINING

    workload, supply, strategy, assumptions = contract.workload, contract.supply, contract.strategy, \
        contract.assumptions
    arch = resolve_architecture(workload.model, base_dir)
    stack = stack_of(contract)
    if assumptions.activations == "korthikanti" and arch is None and stack.attention_kernel == "eager":
        raise ContractError("eager attention keeps the s × s scores, which need the attention heads: give the model "
                            "as a catalog name, a config.json or an architecture (or use attention_kernel: flash)",
                            field="assumptions.attention_kernel")
    if strategy.tp_comm_overlap and not strategy.sequence_parallel:
        raise ContractError("tp_comm_overlap overlaps the sequence-parallel all-gathers and reduce-scatters: it needs "
                            "sequence_parallel: true", field="strategy.tp_comm_overlap")
    stated = StatedInputs()
    fixed = model_given(workload.model, arch, assumptions.attention_flops, stated)
    fixed |= _sections_given(contract, stack, stated)
    thresholds = assumptions.thresholds
    fixed |= stack_given(contract, stack, stated)
    for name in ("collective_overlap_share", "checkpoint_pause_share", "pipeline_bubble_share", "goodput"):
        fixed[f"{name}_threshold"] = stated.given(f"{name}_threshold", getattr(thresholds, name),
                                                  f"assumptions.thresholds.{name}")

    formats, optimizer = _optimizer_given(strategy, stack, stated)
    fixed |= optimizer
    if strategy.precision == "fp16":
        formats += "; FP16 with dynamic loss scaling"
    # LoRA / QLoRA: the adapters' shapes, the frozen base's format, the bytes per trainable parameter.
    fixed |= lora_given(strategy.lora, arch) | adapter_state_given(strategy.lora)
    if strategy.lora is not None:
        formats += (f"; LoRA r = {strategy.lora.rank} ({strategy.lora.adapter_precision} adapters) on a frozen "
                    f"{strategy.lora.base_weights} base")

    device = accelerators()[supply.accelerator] if isinstance(supply.accelerator, str) else None
    label, accelerator = accelerator_given(supply, device, strategy.precision, "strategy.precision", stated)
    fixed |= accelerator
    fixed |= runtime_given(contract, stack.name, device, stated)
    fixed |= stated.optional("storage_write_bytes_per_s", supply.storage.write_bandwidth if supply.storage else None,
                             "supply.storage.write_bandwidth", "the checkpoint write time needs the storage's "
                                                               "write bandwidth")
    fixed |= facility_given(supply, device, stated)
    fixed |= host_given(supply, device, stated)
    fixed |= _failure_given(contract, "host_link_bytes_per_s" in fixed, stated)
    fixed |= _savers_given(contract, "host_memory_bytes" in fixed, "host_link_bytes_per_s" in fixed, stated)
    tiers = tiers_of(supply, device, stated)

    spec, spec_given = _layout_spec(supply, strategy, stated)
    for path in spec:
        stated.fields.pop(path, None)  # layout numbers are varied through the layout, not replaced as inputs
    model = model_facts(workload.model, arch, int(workload.sequence_length.value))
    # The op-level model puts memory-bound ops on the memory bandwidth: by default only where the device has one.
    op_level_possible = arch is not None and ("memory_bandwidth_bytes_per_s" in accelerator
                                              or assumptions.compute_model == "op_level")
    step_time = _step_time(contract, model, spec, tiers)
    compute = assumptions.compute(op_level_possible) if step_time == "components" else "model_flops"
    for name, value in assumptions.efficiency(op_level_possible, step_time).items():
        fixed[name] = stated.given(name, value, f"assumptions.{name}")
    if compute == "op_level":
        fixed |= efficiency_given(assumptions, supply, device, strategy.precision, base_dir, stated,
                                  training_attention_kernel=stack.training_attention)
    if step_time == "efficiency" and assumptions.hardware_flops_basis:
        step_time = "efficiency_hfu"  # the graph's option for a stated utilization of executed FLOPs
    return Inputs(kind="training", contract=contract, base_dir=base_dir, architecture=arch,
                  model=model, graph=TRAINING,
                  choices={"step_time": step_time, "activations": assumptions.activations,
                           "compute": compute},
                  accelerator_label=label, formats_label=formats, spec=spec, spec_given=spec_given, fixed=fixed,
                  tiers=tiers, stated_fields={k: tuple(v) for k, v in stated.fields.items()},
                  absent=stated.absent, derive=derive, stack=stack, peft=strategy.lora,
                  calibration=assumptions.efficiency_set)


def _sections_given(contract: TrainingContract, stack, stated: StatedInputs) -> dict[str, Given]:
    """The workload's token counts, the strategy's checkpoint and retention, and the assumptions' factors and
    switches: each a stated input (or an assumed switch) named by its contract field."""
    workload, strategy, assumptions = contract.workload, contract.strategy, contract.assumptions
    return {
        "tokens": stated.given("tokens", workload.tokens, "workload.tokens"),
        "sequence_length": stated.given("sequence_length", workload.sequence_length, "workload.sequence_length"),
        "token_bytes": stated.given("token_bytes", workload.token_bytes, "workload.token_bytes"),
        "activation_bytes_per_element": stated.given("activation_bytes_per_element",
                                                     strategy.activation_bytes_per_element,
                                                     "strategy.activation_bytes_per_element"),
        "checkpoint_interval_seconds": stated.given("checkpoint_interval_seconds", strategy.checkpoint.interval,
                                                    "strategy.checkpoint.interval"),
        "retained_checkpoints": stated.given("retained_checkpoints", strategy.checkpoint.retained,
                                             "strategy.checkpoint.retained"),
        "dataset_copies": stated.given("dataset_copies", strategy.retention.dataset_copies,
                                       "strategy.retention.dataset_copies"),
        "export_bytes_per_parameter": stated.given("export_bytes_per_parameter",
                                                   strategy.retention.export_bytes_per_parameter,
                                                   "strategy.retention.export_bytes_per_parameter"),
        "saved_tensor_factor": stated.given("saved_tensor_factor", assumptions.saved_tensor_factor,
                                            "assumptions.saved_tensor_factor"),
        "headroom": stated.given("headroom", assumptions.headroom, "assumptions.headroom"),
        "model_parallel_overlap": stated.given("model_parallel_overlap", assumptions.model_parallel_overlap,
                                               "assumptions.model_parallel_overlap"),
        "tp_overlap_sm_share": Given(TP_OVERLAP_SM_SHARE, "catalog", TP_OVERLAP_SM_SOURCE, "strategy.tp_comm_overlap",
                                     1 / 132, 32 / 132),
        "tp_comm_overlap": Given(float(strategy.tp_comm_overlap), "assumed", None, "strategy.tp_comm_overlap"),
        "collective_algorithm_tree": Given(float(assumptions.collective_algorithm == "tree"), "assumed",
                                           assumptions.collective_algorithm, "assumptions.collective_algorithm"),
        "fused_attention": Given(float(stack.attention_kernel == "flash"), "assumed",
                                 f"{stack.attention_kernel} attention"
                                 + ("" if "attention_kernel" in assumptions.model_fields_set else f" ({stack.name})"),
                                 "assumptions.attention_kernel"),
        "expert_load_imbalance": stated.given("expert_load_imbalance", assumptions.expert_load_imbalance,
                                              "assumptions.expert_load_imbalance"),
    }


def _optimizer_given(strategy, stack, stated: StatedInputs) -> tuple[str, dict[str, Given]]:
    """The optimizer: a preset from the catalog (the stack's unless the contract names one), or bytes per parameter
    stated in the contract. Returns the formats label and the four bytes-per-parameter inputs."""
    from botec.catalog import optimizer_presets

    fixed: dict[str, Given] = {}
    components = ("weight", "gradient", "master_weight", "optimizer_state")
    if isinstance(stack.optimizer, str):
        preset = optimizer_presets()[stack.optimizer]
        formats = f"{preset.key}: {preset.description}"
        chosen = "" if "optimizer" in strategy.model_fields_set else f" (the {stack.name} stack's)"
        for part in components:
            name = f"{part}_bytes_per_parameter"
            fixed[name] = Given(getattr(preset, name), "catalog", f"preset {preset.key}{chosen}", "strategy.optimizer")
    else:
        formats = "custom optimizer state"
        for part, key in zip(components, ("weights", "gradients", "master_weights", "optimizer_states")):
            fixed[f"{part}_bytes_per_parameter"] = stated.given(f"{part}_bytes_per_parameter",
                                                                getattr(strategy.optimizer, key),
                                                                f"strategy.optimizer.{key}")
    return formats, fixed


def _layout_spec(supply, strategy, stated: StatedInputs) -> tuple[dict[str, Any], dict[str, Given]]:
    """The layout numbers by contract field (what :meth:`Inputs.vary` may replace), and the provenance of the
    stated ones (count, micro-batch, accumulation or global batch)."""
    spec_given = {"supply.count": stated.given("accelerators", supply.count, "supply.count"),
                  "strategy.micro_batch_size": stated.given("micro_batch_size", strategy.micro_batch_size,
                                                            "strategy.micro_batch_size")}
    for key in ("gradient_accumulation_steps", "global_batch_size"):
        value = getattr(strategy, key)
        if value is not None:
            spec_given[f"strategy.{key}"] = stated.given(key, value, f"strategy.{key}")
    spec = {
        "supply.count": supply.count.value,
        "strategy.tensor_parallel": strategy.tensor_parallel,
        "strategy.pipeline_parallel": strategy.pipeline_parallel,
        "strategy.virtual_pipeline_stages": strategy.virtual_pipeline_stages,
        "strategy.context_parallel": strategy.context_parallel,
        "strategy.expert_parallel": strategy.expert_parallel,
        "strategy.sequence_parallel": float(strategy.sequence_parallel),
        "strategy.zero_stage": strategy.zero_stage,
        "strategy.recompute": float(Recompute.named(strategy.recompute)),
        "strategy.micro_batch_size": strategy.micro_batch_size.value,
        "strategy.gradient_accumulation_steps": _value(strategy.gradient_accumulation_steps),
        "strategy.global_batch_size": _value(strategy.global_batch_size),
        "strategy.sharding_group": strategy.sharding_group,
        "strategy.data_parallel": None if strategy.data_parallel == "replicated" else strategy.data_parallel,
    }
    return spec, spec_given


def _step_time(contract: TrainingContract, model, spec: dict[str, Any], tiers: Tiers) -> str:
    """The step-time method: as stated or implied; components by default, unless a parallel group of the contract's
    layout needs a network tier it does not state and nothing it states belongs to the components model only. Then
    the lesson's efficiency method (N × peak × MFU × scaling efficiency, which needs no link) gives the run time, and
    only what needs the link (the collectives' times) is absent, naming the field to state."""
    from types import SimpleNamespace

    assumptions = contract.assumptions
    components_only = ("compute_model", "matmul_efficiency", "kernel_overhead", "memory_bandwidth_efficiency",
                       "attention_efficiency", "efficiency_curve", "efficiency_set")
    if assumptions.step_time_model is not None or assumptions.step_time != "components" or any(
            getattr(assumptions, name, None) is not None for name in components_only):
        return assumptions.step_time
    if tiers.intra is not None and tiers.inter is not None:
        return "components"  # every group has a tier (the common case: no layout to build twice)
    try:
        layout = _layout(SimpleNamespace(contract=contract, model=model), spec, tiers)
        unplaced = place(layout, tiers)[2]
    except ContractError:  # a broken layout rule: derive() raises it
        return assumptions.step_time
    return "efficiency" if unplaced else "components"


def _value(stated) -> float | None:
    return None if stated is None else stated.value


def _failure_given(contract: TrainingContract, host_link_known: bool, stated: StatedInputs) -> dict[str, Given]:
    """The failure model's inputs: failures per accelerator-hour, the restart time, and the checkpoint mode (an
    asynchronous save pauses training only for the copy to host memory, which needs the host link)."""
    checkpoint, assumptions = contract.strategy.checkpoint, contract.assumptions
    if checkpoint.mode == "async" and not host_link_known:
        raise ContractError("an asynchronous checkpoint pauses training while each shard is copied to host memory: "
                            "state the host link's bandwidth per accelerator per direction, e.g. '32 GB/s' (PCIe Gen4 "
                            "x16), or use mode: sync", field="supply.host_link_bandwidth")
    return {
        "failure_rate_per_accelerator_hour": stated.given("failure_rate_per_accelerator_hour",
                                                          assumptions.failure_rate, "assumptions.failure_rate"),
        "restart_seconds": stated.given("restart_seconds", assumptions.restart_time, "assumptions.restart_time"),
        "checkpoint_mode_async": Given(float(checkpoint.mode == "async"), "assumed", f"{checkpoint.mode} checkpoints",
                                       "strategy.checkpoint.mode"),
    }


_OFFLOAD_SOURCES = {
    "none": "the optimizer state stays on the device",
    "cpu": "CPU offload: master weights, moments and FP32 gradients in host memory, the CPU steps the optimizer "
           "(ZeRO-Offload, FSDP CPUOffload)",
    "paged": "paged optimizer: the state in unified memory, evicted to host memory when the device runs short "
             "(bitsandbytes paged_adamw)",
}


def _savers_given(contract: TrainingContract, host_memory_known: bool, host_link_known: bool,
                  stated: StatedInputs) -> dict[str, Given]:
    """The memory savers: offloading (optimizer, parameters, activations), partial recomputation, FSDP's prefetch
    depth, the allocator's reserve and the CPU optimizer's rate. Offloading needs the node's host memory (it becomes
    an account) and the host link's bandwidth (its copies take time)."""
    from botec.contract.stated import default
    from botec.contract.training import OffloadPolicy

    strategy, assumptions = contract.strategy, contract.assumptions
    offload = strategy.offload or OffloadPolicy()
    offloading = offload.optimizer != "none" or offload.parameters or offload.activations.value > 0
    if offloading and not host_memory_known:
        raise ContractError("offloading keeps training state in host memory: state the host memory of one node, "
                            "e.g. '768 GB'", field="supply.host_memory")
    if offloading and not host_link_known:
        raise ContractError("offloading copies state over the host link: state its bandwidth per accelerator per "
                            "direction, e.g. '25 GB/s' (PCIe 4 x16)", field="supply.host_link_bandwidth")
    if offload.parameters and offload.optimizer != "cpu":
        raise ContractError("offloaded parameters are updated where they live, on the host: set offload.optimizer: "
                            "cpu (FSDP CPUOffload and ZeRO-3 offload_param step the optimizer on the CPU)",
                            field="strategy.offload.optimizer")
    path = "strategy.offload"
    return {
        "optimizer_offload_cpu": Given(float(offload.optimizer == "cpu"), "assumed",
                                       _OFFLOAD_SOURCES[offload.optimizer], f"{path}.optimizer"),
        "optimizer_offload_paged": Given(float(offload.optimizer == "paged"), "assumed",
                                         _OFFLOAD_SOURCES[offload.optimizer], f"{path}.optimizer"),
        "parameter_offload": Given(float(offload.parameters), "assumed",
                                   "weight shards in host memory (offload_params)" if offload.parameters
                                   else "weight shards on the device", f"{path}.parameters"),
        "activation_offload": stated.given("activation_offload", offload.activations, f"{path}.activations"),
        "recompute_layer_fraction": stated.given(
            "recompute_layer_fraction", default(1.0, "every layer (full recomputation of all of them)")
            if strategy.recompute_layer_fraction is None else strategy.recompute_layer_fraction,
            "strategy.recompute_layer_fraction"),
        "fsdp_prefetch": stated.given(
            "fsdp_prefetch", default(1.0, "one unit ahead: FSDP's default backward_prefetch BACKWARD_PRE")
            if strategy.fsdp_prefetch is None else strategy.fsdp_prefetch, "strategy.fsdp_prefetch"),
        "allocator_reserve": stated.given("allocator_reserve", assumptions.allocator_reserve,
                                          "assumptions.allocator_reserve"),
        "cpu_optimizer_parameters_per_s": stated.given("cpu_optimizer_parameters_per_s",
                                                       assumptions.cpu_optimizer_rate,
                                                       "assumptions.cpu_optimizer_rate"),
    }


def _layout(inputs: Inputs, spec: dict[str, Any], tiers: Tiers) -> Layout:
    strategy = inputs.contract.strategy
    count = spec["supply.count"]
    return layout_of(
        "training", inputs.model, accelerators=count,
        accelerators_per_node=tiers.accelerators_per_node.value if tiers.accelerators_per_node else count,
        tensor_parallel=spec["strategy.tensor_parallel"], pipeline_parallel=spec["strategy.pipeline_parallel"],
        virtual_pipeline_stages=spec["strategy.virtual_pipeline_stages"],
        context_parallel=spec["strategy.context_parallel"], expert_parallel=spec["strategy.expert_parallel"],
        sequence_parallel=spec["strategy.sequence_parallel"], zero_stage=spec["strategy.zero_stage"],
        sharding_group=spec["strategy.sharding_group"], hybrid_shard=strategy.fsdp == "hybrid_shard",
        recompute=spec["strategy.recompute"], micro_batch_size=spec["strategy.micro_batch_size"],
        gradient_accumulation_steps=spec["strategy.gradient_accumulation_steps"],
        global_batch_size=spec["strategy.global_batch_size"], data_parallel_stated=spec["strategy.data_parallel"],
        stage_layers=tuple(strategy.pipeline_stage_layers) if strategy.pipeline_stage_layers else None,
        pipeline_schedule=strategy.pipeline_schedule)


def _layout_given(inputs: Inputs, layout: Layout, spec: dict[str, Any], scalar: bool) -> dict[str, Given]:
    """The layout's degrees and what follows from them, as inputs (numbers or arrays)."""
    strategy = inputs.contract.strategy

    def stated(path: str, value, default_source: str | None = None) -> Given:
        template = inputs.spec_given.get(path)
        if template is not None:
            return template.with_value(value)
        return Given(value, "assumed", default_source, path)

    def derived(value, source: str, path: str) -> Given:
        return Given(value, "derived", source if scalar else None, path)

    if spec["strategy.global_batch_size"] is not None:
        accumulation = derived(layout.accumulation_steps, f"global_batch_size {_n(spec['strategy.global_batch_size'])}"
                               " / (micro-batch × DP)" if scalar else "", "strategy.gradient_accumulation_steps")
    else:
        accumulation = stated("strategy.gradient_accumulation_steps", layout.accumulation_steps,
                              "default: no gradient accumulation")
    if spec["strategy.sharding_group"] is not None:
        sharding = Given(layout.sharding_degree, "assumed", None, "strategy.sharding_group")
    else:
        sharding = derived(layout.sharding_degree, "hybrid shard: the DP ranks of one node" if layout.hybrid_shard
                           else "all data-parallel ranks", "strategy.sharding_group")
    if strategy.pipeline_stage_layers:
        split = f"strategy.pipeline_stage_layers: {layout.split_text()}" if scalar else ""
    elif scalar and layout.model.layers % int(layout.pipeline_parallel):
        split = f"the default split {layout.split_text()} (first and last stages hold the embedding and the head)"
    else:
        split = ""
        if scalar:
            stages = _n(layout.pipeline_parallel)
            split = f"{layout.model.layers} layers on {stages} stage{'s' if stages != '1' else ''}"
    recompute = Recompute(int(layout.recompute)).label if scalar else None
    zero = layout.zero_stage
    shard_grad_op = strategy.fsdp == "shard_grad_op"
    gathers_per_microbatch = where(zero >= 3, 2.0, where((zero >= 2) & shard_grad_op, 1.0, 0.0))
    post_step_gathers = where((zero >= 1) & (zero <= 2) & (not shard_grad_op), 1.0, 0.0)
    return {
        "accelerators": stated("supply.count", layout.accelerators),
        "micro_batch_size": stated("strategy.micro_batch_size", layout.micro_batch_size),
        "tensor_parallel": Given(layout.tensor_parallel, "assumed", None, "strategy.tensor_parallel"),
        "pipeline_parallel": Given(layout.pipeline_parallel, "assumed", None, "strategy.pipeline_parallel"),
        "virtual_pipeline_stages": Given(layout.virtual_pipeline_stages, "assumed", None,
                                         "strategy.virtual_pipeline_stages"),
        "context_parallel": Given(layout.context_parallel, "assumed", None, "strategy.context_parallel"),
        "expert_parallel": Given(layout.expert_parallel, "assumed", None, "strategy.expert_parallel"),
        "sequence_parallel": Given(layout.sequence_parallel, "assumed", None, "strategy.sequence_parallel"),
        "recompute": Given(layout.recompute, "assumed", recompute, "strategy.recompute"),
        "zero_stage": Given(layout.zero_stage, "assumed", f"fsdp {strategy.fsdp}" if strategy.fsdp else None,
                            "strategy.zero_stage"),
        "data_parallel_degree": derived(layout.data_parallel, "accelerators / (TP × PP × CP)",
                                        "strategy.data_parallel"),
        "gradient_accumulation_steps": accumulation,
        "sharding_degree": sharding,
        "replica_groups": derived(layout.replica_groups, "data-parallel ranks / sharding group",
                                  "strategy.sharding_group"),
        "expert_tensor_parallel": Given(layout.expert_tensor_parallel, "assumed",
                                        "Megatron's default: expert tensor parallelism = TP", "strategy.tensor_parallel"),
        "expert_data_parallel_degree": derived(layout.expert_data_parallel, "data-parallel ranks / EP",
                                               "strategy.expert_parallel"),
        "pipeline_stage_layers": derived(layout.pipeline_stage_layers, f"the fullest stage; {split}",
                                         "strategy.pipeline_parallel"),
        "first_stage_layers": derived(layout.first_stage_layers, f"the first stage; {split}",
                                      "strategy.pipeline_parallel"),
        "last_stage_layers": derived(layout.last_stage_layers, f"the last stage; {split}", "strategy.pipeline_parallel"),
        "parameter_gathers_per_microbatch": derived(gathers_per_microbatch, _gather_policy(strategy.fsdp, "micro")
                                                    if scalar else "", "strategy.zero_stage"),
        "post_step_parameter_gathers": derived(post_step_gathers, _gather_policy(strategy.fsdp, "step")
                                               if scalar else "", "strategy.zero_stage"),
        "pipeline_activation_layers": derived(layout.pipeline_activation_layers,
                                              f"1F1B: max over stages i of (p − i) × their layers; {split}",
                                              "strategy.pipeline_parallel"),
        "pipeline_chunk_layers": derived(layout.pipeline_chunk_layers, "⌈the fullest stage's layers / v⌉: its "
                                         f"layers in v chunks as even as they split; {split}",
                                         "strategy.virtual_pipeline_stages"),
        "pipeline_schedule": Given(PipelineSchedule(strategy.pipeline_schedule).code, "assumed",
                                   strategy.pipeline_schedule, "strategy.pipeline_schedule"),
    }


def derive(inputs: Inputs, spec: dict[str, Any], fixed: dict[str, Given], tiers: Tiers, rows: int | None) -> Varied:
    """The layout of ``spec`` (checked when scalar, masked when arrays) and every input that follows from it."""
    layout = _layout(inputs, spec, tiers)
    valid = checked(layout, rows)
    import contextlib

    quiet = contextlib.nullcontext()
    if rows is not None:
        import numpy as np

        quiet = np.errstate(divide="ignore", invalid="ignore")
    with quiet:
        given = dict(fixed) | _layout_given(inputs, layout, spec, rows is None)
        links, placement, missing, unplaced = place(layout, tiers, rows)
        links |= collective_tables_given(_accelerator_key(inputs), layout, tiers, rows)
        links |= cross_node_given(_accelerator(inputs), inputs.contract.supply, layout, tiers)
        links |= _granularity(stack_of(inputs.contract).name, layout)
    return Varied(given | links, layout, valid, unplaced, missing, placement)


def _accelerator_key(inputs: Inputs) -> str | None:
    """The catalog key of the contract's accelerator (None for one it describes itself)."""
    accelerator = inputs.contract.supply.accelerator
    return accelerator if isinstance(accelerator, str) else None


def _granularity(stack_name: str, layout) -> dict[str, Given]:
    from botec.training.network.granularity import granularity_given  # the graph's own module: loaded already

    return granularity_given(stack_name, layout)


def _accelerator(inputs: Inputs):
    """The catalog entry of the contract's accelerator (None for one it describes itself)."""
    from botec.catalog import accelerators

    key = _accelerator_key(inputs)
    return accelerators()[key] if key is not None else None


def _gather_policy(fsdp: str | None, when: str) -> str:
    """Why the weights are all-gathered as often as they are, for the inputs' source text."""
    if when == "micro":
        return ("ZeRO-3 / FSDP full or hybrid shard: before the forward and before the backward; FSDP "
                "shard_grad_op: once per forward, kept through the backward; otherwise none")
    return "ZeRO-1/2 (DeepSpeed, Megatron's distributed optimizer): the updated shards once per step; otherwise none"


def _n(value) -> str:
    return f"{float(value):,.0f}" if float(value) == int(value) else f"{float(value):g}"
