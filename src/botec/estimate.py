"""From a contract to an estimate: the given quantities, the evaluated graph, the findings.

This is the only place that knows which contract field feeds which quantity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

from dataclasses import replace
from pathlib import Path

from botec.architecture import Architecture
from botec.contract import Contract, ModelSpec, Stated, load_contract
from botec.errors import ContractError
from botec.findings import Finding, findings_for
from botec.quantities import Given, Quantity, definitions, evaluate
from botec.units import format_quantity

__all__ = ["Estimate", "REFERENCE_CONTRACT", "estimate", "given_quantities", "reference_contract_path"]

REFERENCE_CONTRACT = "lesson-finetune-1b.yaml"


def reference_contract_path():
    """The built-in reference workload (lesson 000), shipped inside the package."""
    return resources.files("botec.contracts").joinpath(REFERENCE_CONTRACT)


@dataclass(frozen=True)
class Estimate:
    """A contract, every quantity it resolves to, and what they mean."""

    contract: Contract
    quantities: dict[str, Quantity]
    findings: list[Finding]
    accelerator_name: str
    optimizer_name: str
    architecture: Architecture | None = None
    choices: dict | None = None
    reevaluate: object = None  # (changes: dict[str, float]) -> quantities of the same contract with those inputs
    candidates: list = None  # serving: [(accelerator key, quantities or the reason it cannot serve)]

    def value(self, name: str) -> float:
        return self.quantities[name].value

    @property
    def fits(self) -> bool:
        if "kv_budget_bytes" in self.quantities:
            return self.quantities["max_concurrent_requests"].value >= 1
        return self.quantities["memory_spare_bytes"].value >= 0


def _stated(stated: Stated, field: str) -> Given:
    return Given(stated.value, stated.provenance, stated.source, field, stated.low, stated.high, stated.distribution)


def resolve_architecture(model: ModelSpec, base_dir: Path | None = None) -> Architecture | None:
    """The architecture a contract's model names (None for a bare parameter count)."""
    from botec.architecture import MLA, MoE, model_catalog, read_hf_config

    if model.kind == "count":
        return None
    if model.kind == "catalog":
        arch = model_catalog()[model.catalog]
    elif model.kind == "config":
        path = Path(model.config)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            arch = read_hf_config(path)
        except ContractError as error:
            raise ContractError(error.detail, field="workload.model.config",
                                origin=error.origin if error.origin != str(path) else None) from None
    else:
        arch = Architecture(
            name=model.name or "architecture", family="custom", layers=int(model.layers.value),
            hidden_size=int(model.hidden_size.value), attention_heads=model.attention_heads,
            kv_heads=model.kv_heads or model.attention_heads, head_dim=model.head_dim, ffn_size=model.ffn_size,
            vocab_size=model.vocab_size, mlp=model.mlp, tied_embeddings=model.tied_embeddings,
            position_embeddings=model.position_embeddings, norm=model.norm, attention_bias=model.attention_bias,
            mlp_bias=model.mlp_bias, moe=MoE(**model.moe.model_dump()) if model.moe else None,
            mla=MLA(**model.mla.model_dump()) if model.mla else None, mtp_layers=model.mtp_layers,
            source="workload.model")
    return replace(arch, name=model.name) if model.name else arch


_ATTENTION_FLOPS_FACTOR = {"full": 1.0, "causal": 0.5, "none": 0.0}
_RECOMPUTE = {"none": 0.0, "selective": 1.0, "full": 2.0}


def _workload_given(contract: Contract, arch: Architecture | None) -> dict[str, Given]:
    from botec.architecture import breakdown

    workload = contract.workload
    model = workload.model
    given = {}
    if workload.kind == "training":
        given |= {
            "tokens": _stated(workload.tokens, "workload.tokens"),
            "sequence_length": _stated(workload.sequence_length, "workload.sequence_length"),
            "token_bytes": _stated(workload.token_bytes, "workload.token_bytes"),
        }
    if arch is None:
        bare = "bare parameter count: every parameter in matmuls, dense"
        given |= {
            "parameters": _stated(model.parameters, "workload.model.parameters"),
            "active_parameters": Given(model.parameters.value, "assumed", bare, "workload.model.parameters"),
            "matmul_parameters": Given(model.parameters.value, "assumed", bare, "workload.model.parameters"),
            "expert_parameters": Given(0.0, "assumed", bare, "workload.model.parameters"),
            "layers": _stated(model.layers, "workload.model.layers"),
            "hidden_size": _stated(model.hidden_size, "workload.model.hidden_size"),
            "moe_layers": Given(0.0, "assumed", bare, "workload.model"),
            "experts_per_token": Given(0.0, "assumed", bare, "workload.model"),
            "attention_flops_per_token": Given(0.0, "assumed", "bare parameter count: 6·P only, no attention term "
                                                              "(the lesson's convention)", "workload.model"),
            "kv_sequence_bytes": Given(0.0, "assumed", "bare parameter count: no context parallelism",
                                       "workload.model"),
        }
        return given
    parts = breakdown(arch)
    origin = f"{model.kind} {arch.name}"
    counted = (f"{origin}: embeddings {parts.embeddings:,} + LM head {parts.lm_head:,} + attention "
               f"{parts.attention:,} + MLP {parts.mlp:,} + experts {parts.experts + parts.shared_experts:,} + routers "
               f"{parts.routers:,} + norms {parts.norms:,}")
    field = "workload.model"
    given |= {
        "parameters": Given(float(parts.total), "derived", counted, field),
        "active_parameters": Given(float(parts.active), "derived", f"{origin}: all but the experts a token skips",
                                   field),
        "matmul_parameters": Given(float(parts.matmul_active), "derived",
                                   f"{origin}: active parameters less the embedding lookup", field),
        "expert_parameters": Given(float(parts.experts), "derived", f"{origin}: routed experts", field),
        "layers": Given(float(arch.layers), "assumed", origin, field),
        "hidden_size": Given(float(arch.hidden_size), "assumed", origin, field),
        "attention_heads": Given(float(arch.attention_heads), "assumed", origin, field),
        "kv_heads": Given(float(arch.kv_heads), "assumed", origin, field),
        "qk_head_dim": Given(float(arch.qk_head_dim), "assumed", origin, field),
        "v_head_dim": Given(float(arch.v_head_dim), "assumed", origin, field),
        "moe_layers": Given(float(arch.moe_layers), "assumed", origin, field),
        "experts_per_token": Given(float(arch.moe.experts_per_token if arch.moe else 0), "assumed", origin, field),
        "attention_flops_factor": Given(_ATTENTION_FLOPS_FACTOR[contract.assumptions.attention_flops], "assumed",
                                        f"convention: {contract.assumptions.attention_flops}",
                                        "assumptions.attention_flops"),
    }
    return given


def _layout(contract: Contract, arch: Architecture | None, accelerators_per_node: int) -> dict[str, float]:
    """Check the parallel layout against the model and the batch; return the derived degrees."""
    strategy, count = contract.strategy, int(contract.supply.count.value)
    tp, pp, cp, ep = (strategy.tensor_parallel, strategy.pipeline_parallel, strategy.context_parallel,
                      strategy.expert_parallel)
    model_parallel = tp * pp * cp
    if count % model_parallel:
        raise ContractError(f"tensor_parallel × pipeline_parallel × context_parallel = {tp} × {pp} × {cp} = "
                            f"{model_parallel} does not divide the {count:,} accelerators", field="supply.count")
    dp = count // model_parallel
    if strategy.data_parallel != "replicated" and strategy.data_parallel != dp:
        raise ContractError(f"{count:,} accelerators / (TP {tp} × PP {pp} × CP {cp}) give DP {dp}, not "
                            f"{strategy.data_parallel}", field="strategy.data_parallel")
    layers = arch.layers if arch else int(contract.workload.model.layers.value)
    if layers % (pp * strategy.virtual_pipeline_stages):
        chunks = f"{pp} stages × {strategy.virtual_pipeline_stages} chunks" if strategy.virtual_pipeline_stages > 1 \
            else f"{pp} stages"
        raise ContractError(f"{chunks} do not divide the {layers} layers", field="strategy.pipeline_parallel")
    sequence = int(contract.workload.sequence_length.value)
    if sequence % cp:
        raise ContractError(f"context_parallel {cp} does not divide the sequence length {sequence:,}",
                            field="strategy.context_parallel")
    if strategy.sequence_parallel and (sequence // cp) % tp:
        raise ContractError(f"sequence parallelism splits each {sequence // cp:,}-token sequence over {tp} TP ranks, "
                            "which do not divide it", field="strategy.sequence_parallel")
    if arch is None:
        for name, degree in (("tensor_parallel", tp), ("context_parallel", cp), ("expert_parallel", ep)):
            if degree > 1:
                raise ContractError(f"{name} needs the model's attention heads and experts: give the model as a "
                                    "catalog name, a config.json or an architecture", field=f"strategy.{name}")
    else:
        if arch.attention_heads % tp:
            raise ContractError(f"tensor_parallel {tp} does not divide the {arch.attention_heads} attention heads",
                                field="strategy.tensor_parallel")
        if arch.kv_heads % tp and tp % arch.kv_heads:
            raise ContractError(f"tensor_parallel {tp} neither divides nor is a multiple of the {arch.kv_heads} KV "
                                "heads", field="strategy.tensor_parallel")
        if ep > 1:
            if arch.moe is None:
                raise ContractError("expert parallelism needs a mixture-of-experts model", field="strategy.expert_parallel")
            if ep > arch.moe.experts or arch.moe.experts % ep:
                raise ContractError(f"expert_parallel {ep} must divide the {arch.moe.experts} experts",
                                    field="strategy.expert_parallel")
            if dp % ep:
                raise ContractError(f"expert_parallel {ep} is carved out of the {dp} data-parallel ranks and must "
                                    "divide them", field="strategy.expert_parallel")
    micro = int(strategy.micro_batch_size.value)
    accumulation = strategy.gradient_accumulation_steps
    if strategy.global_batch_size is not None:
        global_batch = int(strategy.global_batch_size.value)
        if global_batch % (micro * dp):
            raise ContractError(f"micro-batch {micro} × DP {dp} = {micro * dp:,} sequences does not divide the global "
                                f"batch of {global_batch:,}", field="strategy.global_batch_size")
        derived = global_batch // (micro * dp)
        if accumulation is not None and int(accumulation.value) != derived:
            raise ContractError(f"global batch {global_batch:,} = micro-batch {micro} × DP {dp} × accumulation "
                                f"{derived}, not {int(accumulation.value)}", field="strategy.gradient_accumulation_steps")
        accumulation_steps, source = float(derived), f"global_batch_size {global_batch:,} / (micro-batch × DP)"
    else:
        accumulation_steps = float(accumulation.value) if accumulation else 1.0
        source = None if accumulation else "default: no gradient accumulation"
    if strategy.fsdp == "hybrid_shard" and strategy.sharding_group is None:
        sharding = max(1, min(dp, accelerators_per_node // (tp * cp)))
    else:
        sharding = strategy.sharding_group or dp
    if dp % sharding:
        raise ContractError(f"sharding_group {sharding} does not divide the {dp} data-parallel ranks",
                            field="strategy.sharding_group")
    if strategy.zero_stage and ep > 1 and sharding % ep:
        raise ContractError(f"expert_parallel {ep} must divide the ZeRO sharding group of {sharding}",
                            field="strategy.sharding_group")
    return {"data_parallel": dp, "gradient_accumulation_steps": accumulation_steps, "accumulation_source": source,
            "sharding_degree": float(sharding)}


def _cluster_given(contract: Contract, device) -> tuple[dict[str, Given], int]:
    """Accelerators per node and the two tiers for a training job of ``supply.count`` accelerators."""
    return _cluster_given_for(contract, device, int(contract.supply.count.value))


def _cluster_given_for(contract: Contract, device, count: int) -> tuple[dict[str, Given], int]:
    """Accelerators per node and the two tiers: the contract's cluster, a node preset, the single network
    bandwidth (the lesson's), or the accelerator's catalog link bandwidth, in that order; ``count`` is the
    number of accelerators that communicate (the job, or one serving replica)."""
    from botec.catalog import node_presets

    supply = contract.supply
    cluster = supply.cluster
    preset = node_presets()[cluster.node] if cluster is not None and cluster.node else None
    given: dict[str, Given] = {}
    if cluster is not None and cluster.accelerators_per_node:
        per_node, per_node_given = cluster.accelerators_per_node, Given(
            float(cluster.accelerators_per_node), "assumed", None, "supply.cluster.accelerators_per_node")
    elif preset is not None:
        per_node, per_node_given = preset.accelerators_per_node, Given(
            float(preset.accelerators_per_node), "catalog", f"{preset.name}: {preset.source} ({preset.date})",
            "supply.cluster.node")
    else:
        per_node, per_node_given = count, Given(float(count), "assumed",
                                                "no cluster stated: all accelerators share one network tier",
                                                "supply.count" if contract.workload.kind == "training" else None)
    given["accelerators_per_node"] = per_node_given

    def tier(name: str, link, preset_bytes, preset_latency, preset_link) -> None:
        field = f"supply.cluster.{name}"
        if link is not None:
            given[f"{name}_bytes_per_s"] = _stated(link.bandwidth, f"{field}.bandwidth")
            given[f"{name}_latency_seconds"] = _stated(link.latency, f"{field}.latency")
        elif supply.network is not None:
            given[f"{name}_bytes_per_s"] = _stated(supply.network.bandwidth, "supply.network.bandwidth")
            latency = supply.network.latency
            given[f"{name}_latency_seconds"] = _stated(latency, "supply.network.latency")
        elif preset is not None:
            source = f"{preset_link}; {preset.name}: {preset.source} ({preset.date})"
            given[f"{name}_bytes_per_s"] = Given(preset_bytes, "catalog", source, "supply.cluster.node")
            given[f"{name}_latency_seconds"] = Given(preset_latency, "catalog", source, "supply.cluster.node")
        elif name == "intra_node" and device is not None and device.link_bandwidth_bytes_per_s is not None:
            given["intra_node_bytes_per_s"] = Given(device.link_bandwidth_bytes_per_s, "catalog",
                                                    f"{device.link}; {device.source_of('link_bandwidth')}",
                                                    "supply.accelerator")
            given["intra_node_latency_seconds"] = Given(0.0, "assumed", "latency not modelled", None)

    intra = cluster.intra_node if cluster else None
    inter = cluster.inter_node if cluster else None
    tier("intra_node", intra, *(preset and (preset.intra_node_bytes_per_s, preset.intra_node_latency_seconds,
                                            preset.intra_node_link) or (None, None, None)))
    tier("inter_node", inter, *(preset and (preset.inter_node_bytes_per_s, preset.inter_node_latency_seconds,
                                            preset.inter_node_link) or (None, None, None)))
    if "inter_node_bytes_per_s" not in given and count <= per_node and "intra_node_bytes_per_s" in given:
        given["inter_node_bytes_per_s"] = Given(given["intra_node_bytes_per_s"].value, "assumed",
                                                "single node: no inter-node traffic", None)
        given["inter_node_latency_seconds"] = Given(0.0, "assumed", "single node: no inter-node traffic", None)
    if "intra_node_bytes_per_s" not in given and count == 1:
        given["intra_node_bytes_per_s"] = Given(1.0, "assumed", "one accelerator: no collectives", None)
        given["intra_node_latency_seconds"] = Given(0.0, "assumed", "one accelerator: no collectives", None)
    if "inter_node_bytes_per_s" not in given and count <= per_node and "intra_node_bytes_per_s" in given:
        given["inter_node_bytes_per_s"] = Given(given["intra_node_bytes_per_s"].value, "assumed",
                                                "single node: no inter-node traffic", None)
        given["inter_node_latency_seconds"] = Given(0.0, "assumed", "single node: no inter-node traffic", None)
    if "inter_node_bytes_per_s" not in given and count > per_node:
        raise ContractError(f"{count:,} accelerators span several nodes of {per_node}: state the inter-node "
                            "bandwidth per accelerator (supply.cluster.inter_node or a node preset)",
                            field="supply.cluster.inter_node")
    return given, per_node


def given_quantities(contract: Contract, base_dir: Path | None = None) -> tuple[dict[str, Given], str, str]:
    """The inputs of the quantity graph, each with its provenance and the contract field it came from.

    Returns (given, accelerator label, optimizer label).
    """
    from botec.catalog import accelerators, optimizer_presets

    supply, strategy, assumptions = contract.supply, contract.strategy, contract.assumptions
    arch = resolve_architecture(contract.workload.model, base_dir)
    if assumptions.activation_model == "korthikanti" and arch is None:
        raise ContractError("the Korthikanti formulas need the attention heads: give the model as a catalog name, "
                            "a config.json or an architecture (or use saved_tensor_factor)",
                            field="assumptions.activation_model")
    given = _workload_given(contract, arch)
    device = accelerators()[supply.accelerator] if isinstance(supply.accelerator, str) else None
    cluster, per_node = _cluster_given(contract, device)
    given |= cluster
    layout = _layout(contract, arch, per_node)
    given |= {
        "accelerators": _stated(supply.count, "supply.count"),
        "micro_batch_size": _stated(strategy.micro_batch_size, "strategy.micro_batch_size"),
        "gradient_accumulation_steps": Given(layout["gradient_accumulation_steps"], "assumed",
                                             layout["accumulation_source"],
                                             "strategy.gradient_accumulation_steps"),
        "tensor_parallel": Given(float(strategy.tensor_parallel), "assumed", None, "strategy.tensor_parallel"),
        "expert_tensor_parallel": Given(float(strategy.tensor_parallel), "assumed",
                                        "Megatron's default: expert tensor parallelism = TP", "strategy.tensor_parallel"),
        "pipeline_parallel": Given(float(strategy.pipeline_parallel), "assumed", None, "strategy.pipeline_parallel"),
        "virtual_pipeline_stages": Given(float(strategy.virtual_pipeline_stages), "assumed", None,
                                         "strategy.virtual_pipeline_stages"),
        "context_parallel": Given(float(strategy.context_parallel), "assumed", None, "strategy.context_parallel"),
        "expert_parallel": Given(float(strategy.expert_parallel), "assumed", None, "strategy.expert_parallel"),
        "sequence_parallel": Given(float(strategy.sequence_parallel), "assumed", None, "strategy.sequence_parallel"),
        "recompute": Given(_RECOMPUTE[strategy.recompute], "assumed", strategy.recompute, "strategy.recompute"),
        "zero_stage": Given(float(strategy.zero_stage), "assumed", f"fsdp {strategy.fsdp}" if strategy.fsdp else None,
                            "strategy.zero_stage"),
        "sharding_degree": Given(layout["sharding_degree"], "assumed",
                                 None if strategy.sharding_group else "all data-parallel ranks"
                                 if strategy.fsdp != "hybrid_shard" else "hybrid shard: the DP ranks of one node",
                                 "strategy.sharding_group"),
        "activation_bytes_per_element": _stated(strategy.activation_bytes_per_element,
                                                "strategy.activation_bytes_per_element"),
        "checkpoint_interval_seconds": _stated(strategy.checkpoint.interval, "strategy.checkpoint.interval"),
        "retained_checkpoints": _stated(strategy.checkpoint.retained, "strategy.checkpoint.retained"),
        "dataset_copies": _stated(strategy.retention.dataset_copies, "strategy.retention.dataset_copies"),
        "export_bytes_per_parameter": _stated(strategy.retention.export_bytes_per_parameter,
                                              "strategy.retention.export_bytes_per_parameter"),
        "saved_tensor_factor": _stated(assumptions.saved_tensor_factor, "assumptions.saved_tensor_factor"),
        "runtime_buffer_bytes": _stated(assumptions.runtime_buffer, "assumptions.runtime_buffer"),
        "headroom": _stated(assumptions.headroom, "assumptions.headroom"),
        "data_parallel_overlap": _stated(assumptions.data_parallel_overlap, "assumptions.data_parallel_overlap"),
        "model_parallel_overlap": _stated(assumptions.model_parallel_overlap, "assumptions.model_parallel_overlap"),
        "collective_algorithm_tree": Given(float(assumptions.collective_algorithm == "tree"), "assumed",
                                           assumptions.collective_algorithm, "assumptions.collective_algorithm"),
        "collective_overlap_share_threshold": _stated(assumptions.thresholds.collective_overlap_share,
                                                      "assumptions.thresholds.collective_overlap_share"),
        "checkpoint_pause_share_threshold": _stated(assumptions.thresholds.checkpoint_pause_share,
                                                    "assumptions.thresholds.checkpoint_pause_share"),
    }
    for name, stated in assumptions.efficiency().items():
        given[name] = _stated(stated, f"assumptions.{name}")

    # The optimizer: a preset from the catalog, or bytes per parameter stated in the contract.
    components = ("weight", "gradient", "master_weight", "optimizer_state")
    if isinstance(strategy.optimizer, str):
        preset = optimizer_presets()[strategy.optimizer]
        optimizer_name = f"{preset.key}: {preset.description}"
        for part in components:
            name = f"{part}_bytes_per_parameter"
            given[name] = Given(getattr(preset, name), "catalog", f"preset {preset.key}", "strategy.optimizer")
    else:
        optimizer_name = "custom optimizer state"
        for part, field in zip(components, ("weights", "gradients", "master_weights", "optimizer_states")):
            given[f"{part}_bytes_per_parameter"] = _stated(getattr(strategy.optimizer, field),
                                                           f"strategy.optimizer.{field}")

    # The accelerator: catalog figures with their sources, or an inline (hypothetical) device.
    accelerator = supply.accelerator
    power = None
    if device is not None:
        accelerator_name = f"{device.name} ({device.key})"
        if strategy.precision not in device.peak_flops_per_s:
            raise ContractError(
                f"{device.key} has no published {strategy.precision} peak (it has: "
                f"{', '.join(device.peak_flops_per_s)})", field="strategy.precision")
        given["peak_flops_per_s"] = Given(device.peak_flops_per_s[strategy.precision], "catalog",
                                          device.source_of("peak_flops_per_s"), "supply.accelerator")
        given["device_memory_bytes"] = Given(device.memory_bytes, "catalog", device.source_of("memory"),
                                             "supply.accelerator")
        if device.tdp_watts is not None:
            power = Given(device.tdp_watts, "catalog", f"TDP; {device.source_of('tdp')}", "supply.accelerator")
    else:
        accelerator_name = accelerator.name
        given["peak_flops_per_s"] = _stated(accelerator.peak_flops_per_s, "supply.accelerator.peak_flops_per_s")
        given["device_memory_bytes"] = _stated(accelerator.memory, "supply.accelerator.memory")
        if accelerator.tdp is not None:
            power = _stated(accelerator.tdp, "supply.accelerator.tdp")
    if supply.storage is not None:
        given["storage_write_bytes_per_s"] = _stated(supply.storage.write_bandwidth, "supply.storage.write_bandwidth")
    given |= _facility_given(supply, power)
    return given, accelerator_name, optimizer_name


def _facility_given(supply, device_power: Given | None) -> dict[str, Given]:
    """Power (the device's TDP unless stated), PUE and price: the inputs of cost and energy."""
    given: dict[str, Given] = {}
    power = device_power
    if supply.power_per_accelerator is not None:
        power = _stated(supply.power_per_accelerator, "supply.power_per_accelerator")
    if power is not None:
        given["accelerator_power_watts"] = power
    if supply.pue is not None:
        given["pue"] = _stated(supply.pue, "supply.pue")
    if supply.price_per_accelerator_hour is not None:
        given["price_per_accelerator_hour"] = _stated(supply.price_per_accelerator_hour,
                                                      "supply.price_per_accelerator_hour")
    return given


def choices_of(contract: Contract) -> dict[str, str]:
    """The methods the contract picks for quantities that have several."""
    if contract.workload.kind == "serving":
        return {}
    return {"step_time": contract.assumptions.step_time_model,
            "activations": contract.assumptions.activation_model}


_WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
_KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}
_SCALE_BYTES = 2.0  # one FP16/BF16 scale per quantization group


def serving_given(contract: Contract, base_dir: Path | None = None) -> tuple[dict[str, Given], str, str]:
    """The inputs of a serving estimate: the model's shape, one replica's layout, the traffic and targets."""
    from botec.catalog import accelerators

    workload, supply, strategy, assumptions = (contract.workload, contract.supply, contract.strategy,
                                               contract.assumptions)
    arch = resolve_architecture(workload.model, base_dir)
    traffic = workload.traffic
    prompt, output = int(traffic.prompt_tokens.value), int(traffic.output_tokens.value)
    if arch.max_sequence_length and prompt + output > arch.max_sequence_length:
        raise ContractError(f"prompt {prompt:,} + output {output:,} = {prompt + output:,} tokens exceeds "
                            f"{arch.name}'s {arch.max_sequence_length:,}-token context",
                            field="workload.traffic.prompt_tokens")
    device = accelerators()[supply.accelerator] if isinstance(supply.accelerator, str) else None
    given, per_node = _cluster_given_for(contract, device, int(strategy.tensor_parallel * strategy.pipeline_parallel))
    tp, pp, ep = strategy.tensor_parallel, strategy.pipeline_parallel, strategy.expert_parallel
    if arch.attention_heads % tp:
        raise ContractError(f"tensor_parallel {tp} does not divide the {arch.attention_heads} attention heads",
                            field="strategy.tensor_parallel")
    if arch.layers % pp:
        raise ContractError(f"{pp} stages do not divide the {arch.layers} layers", field="strategy.pipeline_parallel")
    if ep > 1:
        if arch.moe is None:
            raise ContractError("expert parallelism needs a mixture-of-experts model", field="strategy.expert_parallel")
        if arch.moe.experts % ep or (tp * pp) % ep:
            raise ContractError(f"expert_parallel {ep} must divide the {arch.moe.experts} experts and the replica's "
                                f"{tp * pp} accelerators", field="strategy.expert_parallel")
    given |= _workload_given(contract, arch)

    # Weights at their precision: weight-only INT8/INT4 keep one 2-byte scale per group.
    precision = strategy.weight_precision
    weight_bytes = _WEIGHT_BYTES[precision]
    weight_source = f"{precision} weights"
    if precision in ("int8", "int4"):
        weight_bytes += _SCALE_BYTES / strategy.quantization_group_size
        weight_source += f" + a 2-byte scale per {strategy.quantization_group_size} weights (weight-only quantization)"
    compute_precision = "fp8" if precision == "fp8" else "bf16"
    kv_heads_split = 1.0 if arch.mla else float(min(tp, arch.kv_heads))
    window = min(arch.sliding_window or arch.max_sequence_length or prompt + output,
                 arch.max_sequence_length or 10**12)
    given |= {
        "tensor_parallel": Given(float(tp), "assumed", None, "strategy.tensor_parallel"),
        "expert_tensor_parallel": Given(float(tp * pp // ep) / pp if ep > 1 else float(tp), "assumed",
                                        "serving: EP reuses the replica's ranks, so each expert is split TP / EP ways",
                                        "strategy.expert_parallel"),
        "pipeline_parallel": Given(float(pp), "assumed", None, "strategy.pipeline_parallel"),
        "expert_parallel": Given(float(ep), "assumed", None, "strategy.expert_parallel"),
        "zero_stage": Given(0.0, "assumed", "serving: weights are not sharded over replicas", None),
        "sharding_degree": Given(1.0, "assumed", "serving: weights are not sharded over replicas", None),
        "weight_bytes_per_parameter": Given(weight_bytes, "assumed", weight_source, "strategy.weight_precision"),
        "activation_bytes_per_element": Given(2.0, "assumed", "BF16 activations", None),
        "kv_elements_per_token_per_layer": Given(float(arch.kv_elements_per_token_per_layer), "derived",
                                                 "MLA: kv_lora_rank + qk_rope_head_dim" if arch.mla
                                                 else "2 × KV heads × head dim", "workload.model"),
        "kv_bytes_per_element": Given(_KV_BYTES[strategy.kv_cache_precision], "assumed",
                                      f"{strategy.kv_cache_precision} KV cache", "strategy.kv_cache_precision"),
        "kv_tensor_split": Given(kv_heads_split, "assumed",
                                 "MLA's latent is shared by all heads: not split by TP" if arch.mla
                                 else "min(TP, KV heads): heads are replicated beyond that", "strategy.tensor_parallel"),
        "prompt_tokens": _stated(traffic.prompt_tokens, "workload.traffic.prompt_tokens"),
        "output_tokens": _stated(traffic.output_tokens, "workload.traffic.output_tokens"),
        "attention_window_tokens": Given(float(window), "assumed",
                                         f"sliding window of {arch.sliding_window:,}" if arch.sliding_window
                                         else "the model's context", "workload.model"),
        "requests_per_s": _stated(traffic.per_second, "workload.traffic.requests_per_second"
                                  if traffic.requests_per_second is not None else "workload.traffic.requests_per_day"),
        "memory_fraction": _stated(strategy.memory_fraction, "strategy.memory_fraction"),
        "max_batch_size": _stated(strategy.max_batch_size, "strategy.max_batch_size"),
        "activation_reserve_bytes": _stated(assumptions.activation_reserve, "assumptions.activation_reserve"),
        "prefill_mfu": _stated(assumptions.prefill_mfu, "assumptions.prefill_mfu"),
        "decode_mfu": _stated(assumptions.decode_mfu, "assumptions.decode_mfu"),
        "decode_bandwidth_efficiency": _stated(assumptions.decode_bandwidth_efficiency,
                                               "assumptions.decode_bandwidth_efficiency"),
    }
    targets = workload.latency
    if targets.time_to_first_token is not None:
        given["time_to_first_token_target_seconds"] = _stated(targets.time_to_first_token,
                                                              "workload.latency.time_to_first_token")
    else:
        given["time_to_first_token_target_seconds"] = Given(1e9, "assumed", "no TTFT target", None)
    if targets.time_per_output_token is not None:
        given["time_per_output_token_target_seconds"] = _stated(targets.time_per_output_token,
                                                                "workload.latency.time_per_output_token")
    else:
        given["time_per_output_token_target_seconds"] = Given(1e9, "assumed", "no TPOT target", None)

    if device is not None:
        accelerator_name = f"{device.name} ({device.key})"
        if compute_precision not in device.peak_flops_per_s:
            raise ContractError(f"{device.key} has no FP8 tensor cores: FP8 weights would run as BF16; use bf16, "
                                "int8 or int4 (weight-only) or an accelerator with FP8", field="strategy.weight_precision")
        given["peak_flops_per_s"] = Given(device.peak_flops_per_s[compute_precision], "catalog",
                                          f"{compute_precision} dense; {device.source_of('peak_flops_per_s')}",
                                          "supply.accelerator")
        given["device_memory_bytes"] = Given(device.memory_bytes, "catalog", device.source_of("memory"),
                                             "supply.accelerator")
        given["memory_bandwidth_bytes_per_s"] = Given(device.memory_bandwidth_bytes_per_s, "catalog",
                                                      device.source_of("memory_bandwidth"), "supply.accelerator")
        power = None if device.tdp_watts is None else Given(device.tdp_watts, "catalog",
                                                             f"TDP; {device.source_of('tdp')}", "supply.accelerator")
    else:
        accelerator = supply.accelerator
        accelerator_name = accelerator.name
        if accelerator.memory_bandwidth is None:
            raise ContractError("serving needs the device's memory bandwidth (decode reads the weights every step)",
                                field="supply.accelerator.memory_bandwidth")
        given["peak_flops_per_s"] = _stated(accelerator.peak_flops_per_s, "supply.accelerator.peak_flops_per_s")
        given["device_memory_bytes"] = _stated(accelerator.memory, "supply.accelerator.memory")
        given["memory_bandwidth_bytes_per_s"] = _stated(accelerator.memory_bandwidth,
                                                        "supply.accelerator.memory_bandwidth")
        power = None if accelerator.tdp is None else _stated(accelerator.tdp, "supply.accelerator.tdp")
    given |= _facility_given(supply, power)
    if supply.api_price is not None:
        api = supply.api_price
        for name, stated, field in (("api_price_per_million_input_tokens", api.input_per_million, "input_per_million"),
                                    ("api_price_per_million_output_tokens", api.output_per_million,
                                     "output_per_million")):
            if stated.source is None and api.source:
                stated = stated.model_copy(update={"source": api.source})
            given[name] = _stated(stated, f"supply.api_price.{field}")
    return given, accelerator_name, f"{precision} weights, {strategy.kv_cache_precision} KV cache"


def _check_finite(quantities: dict[str, Quantity]) -> None:
    for quantity in quantities.values():
        value = quantity.value
        if isinstance(value, (int, float)) and not math.isfinite(value):
            inputs = ", ".join(quantity.inputs) or "its inputs"
            raise ContractError(f"not a finite number; check its inputs: {inputs}", field=quantity.name)


def check_fit(result: "Estimate") -> None:
    """Raise a :class:`ContractError` naming the batch when the plan does not fit the device."""
    q = result.quantities
    if result.fits:
        return
    if "kv_budget_bytes" in q:
        weights, usable = q["weight_memory_bytes"].formatted(), q["usable_memory_bytes"].formatted()
        raise ContractError(
            f"weights take {weights} per accelerator and the KV cache of one request "
            f"{q['kv_bytes_per_request'].formatted()}, beyond the {usable} usable (after the "
            f"{q['activation_reserve_bytes'].formatted()} reserve): raise tensor_parallel, quantize the weights or use "
            "a larger device", field="strategy.tensor_parallel")
    planned, capacity = q["planned_device_bytes"].formatted(), q["device_memory_bytes"].formatted()
    largest = int(q["max_micro_batch_size"].value)
    batch = int(q["micro_batch_size"].value)
    from botec.findings import memory_relief

    if largest >= 1:
        advice = f"at most {largest} fit{'s' if largest == 1 else ''}"
    else:
        advice = f"not even 1 fits (state {q['state_bytes'].formatted()}, activations {q['activation_bytes'].formatted()})"
    advice += memory_relief(q, result.reevaluate, "decimal")
    raise ContractError(
        f"{format_quantity(batch, 'sequences')} per accelerator need{'s' if batch == 1 else ''} {planned} planned per "
        f"accelerator, more than "
        f"its {capacity}; {advice}", field="strategy.micro_batch_size")


def estimate(contract: Contract, base_dir: Path | None = None, compare: bool = True) -> Estimate:
    """Evaluate every quantity the contract determines, and the findings they support."""
    if contract.workload.kind == "serving":
        given, accelerator_name, optimizer_name = serving_given(contract, base_dir)
    else:
        given, accelerator_name, optimizer_name = given_quantities(contract, base_dir)
    choices = choices_of(contract)
    other_kind = {"serving", "capacity"} if contract.workload.kind == "training" else {"compute", "storage"}
    wanted = [name for name, definition in definitions(choices).items() if definition.account not in other_kind]
    quantities = evaluate(given, wanted=wanted, choices=choices)
    quantities = {name: q for name, q in quantities.items()  # a dead end of the other kind's formulas
                  if q.account not in other_kind or q.provenance != "derived"}
    _check_finite(quantities)
    architecture = resolve_architecture(contract.workload.model, base_dir)

    def reevaluate(changes: dict[str, float]) -> dict[str, Quantity]:
        """The same estimate with some inputs changed (for findings that propose a relief)."""
        changed = dict(given)
        for name, value in changes.items():
            changed[name] = Given(value, "assumed")
        return evaluate(changed, wanted=wanted, choices=choices)

    candidates = []
    if compare and contract.workload.kind == "serving" and contract.supply.candidates:
        candidates = compare_accelerators(contract, base_dir)
    return Estimate(contract, quantities, findings_for(quantities, reevaluate=reevaluate), accelerator_name,
                    optimizer_name, architecture, choices, reevaluate, candidates)


def compare_accelerators(contract: Contract, base_dir: Path | None = None) -> list[tuple[str, dict | str]]:
    """The same serving contract on each candidate accelerator: (key, quantities) or (key, why it cannot)."""
    rows = []
    supply = contract.supply
    options = [(supply.accelerator, supply.price_per_accelerator_hour)] if isinstance(supply.accelerator, str) else []
    options += [(c.accelerator, c.price_per_accelerator_hour) for c in supply.candidates
                if c.accelerator != supply.accelerator]
    for key, price in options:
        changed = contract.model_copy(update={"supply": supply.model_copy(
            update={"accelerator": key, "price_per_accelerator_hour": price})})
        try:
            quantities = estimate(changed, base_dir, compare=False).quantities
        except ContractError as error:
            rows.append((key, error.detail))
            continue
        rows.append((key, unreachable_target(quantities) or quantities))
    return rows


def unreachable_target(q: dict[str, Quantity]) -> str | None:
    """Why a serving replica cannot meet its latency targets or hold a request, or None."""
    if q["max_concurrent_requests"].value < 1:
        return f"does not fit: weights {q['weight_memory_bytes'].formatted()} of {q['usable_memory_bytes'].formatted()}"
    floor, target = q["time_per_output_token_floor_seconds"], q["time_per_output_token_target_seconds"]
    if floor.value > target.value:
        return f"TPOT floor {floor.formatted()} exceeds the {target.formatted()} target"
    ttft, ttft_target = q["time_to_first_token_seconds"], q["time_to_first_token_target_seconds"]
    if ttft.value > ttft_target.value:
        return f"TTFT {ttft.formatted()} exceeds the {ttft_target.formatted()} target"
    return None


def estimate_file(path=None, overrides: list[str] | None = None) -> Estimate:
    """Load a contract file (the reference workload when ``path`` is None) and estimate it."""
    if path is None:
        with resources.as_file(reference_contract_path()) as reference:
            return estimate(load_contract(reference, overrides, origin=f"reference workload {REFERENCE_CONTRACT}"))
    return estimate(load_contract(path, overrides), base_dir=Path(path).resolve().parent)
