"""The serving plan an estimate resolved, as the launch formats write it, and the helpers they share.

One :class:`ServingPlan` per export: the replica's layout (TP, PP, EP, data-parallel attention), its engine limits
(max batch, token budget, memory fraction), its formats (weights, KV cache), the longest request it admits, the
replicas the traffic needs, speculative decoding and disaggregation, all read from the estimate's quantities and
resolved contract (never from the contract file again). The formats (:mod:`botec.launch.vllm`,
:mod:`~botec.launch.sglang`, :mod:`~botec.launch.trtllm`, :mod:`~botec.launch.kubernetes`) turn it into a tool's
options; their readers turn the options back into contract fields with :func:`botec.launch.plan.fields_of`
(through the one setter, ``contract.set_field``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from botec.errors import ContractError
from botec.launch.commandline import file_header

__all__ = ["ServingPlan", "InstancePlan", "Speculation", "serving_plan", "header_lines", "model_for_id",
           "check_serving"]


@dataclass(frozen=True)
class InstancePlan:
    """One engine instance's layout and limits (the replica's, or a disaggregated prefill instance's)."""

    tensor_parallel: int
    pipeline_parallel: int
    expert_parallel: int
    data_parallel_attention: bool
    attention_tensor_parallel: int      # ranks one attention group splits its heads over (1 unless stated)
    redundant_experts: int              # redundant routed-expert copies (EPLB)
    max_batch_size: int                 # sequences the instance runs at once, all its ranks together
    max_batched_tokens: int             # tokens one step may carry, all its ranks together
    two_batch_overlap: bool = False     # two micro-batches, one's MoE all-to-all under the other's compute

    @property
    def attention_groups(self) -> int:
        """Data-parallel attention groups: tensor_parallel / attention_tensor_parallel (1 without DP attention)."""
        return self.tensor_parallel // self.attention_tensor_parallel if self.data_parallel_attention else 1

    @property
    def accelerators(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding as the contract states it: what drafts, how many tokens per step."""

    method: str                   # draft_model, eagle, mtp, ngram
    draft_tokens: int
    draft_model_id: Optional[str]  # the draft's Hugging Face id (method draft_model), when known


@dataclass(frozen=True)
class ServingPlan:
    """What every serving launch format writes, resolved by the estimate."""

    model_id: str                   # Hugging Face repository id (or the config.json's folder, or the catalog key)
    engine: str                     # the contract's engine preset (vllm, sglang, tensorrt-llm)
    decode: InstancePlan            # the replica (the decode instance when disaggregated)
    prefill: Optional[InstancePlan]  # a disaggregated prefill instance; None: in-flight batching in one instance
    prefill_instances: int          # prefill instances per decode instance (0: not disaggregated)
    memory_fraction: float          # the engine's memory fraction, in its own rule (kv_budget_rule)
    kv_budget_rule: str             # of_total (vLLM, SGLang) or of_free (TensorRT-LLM)
    kv_budget_bytes: float          # KV-cache bytes per accelerator the estimate plans
    weight_bytes: float             # weight bytes per accelerator
    checkpoint_bytes: float         # the whole model's weight bytes: parameters × bytes per parameter
    reserve_bytes: float            # non-KV reserve per accelerator (activations, CUDA graphs)
    device_memory_bytes: float
    weight_precision: str
    kv_cache_precision: str
    kv_reservation: str             # incremental or full
    context_tokens: int             # the longest request (prompt + output) the engine must admit
    replicas: int                   # replicas the traffic needs (each: decode + its prefill instances)
    prefix_caching: bool            # the contract assumes shared prefixes (prefix_cache_hit_rate > 0)
    speculation: Optional[Speculation]

    def memory_fraction_as(self, rule: str) -> float:
        """The memory fraction that gives the planned KV budget under ``rule`` (the engine's kv_budget_rule):

            of_total:  f = (W + R + KV) / M        (vLLM gpu_memory_utilization, SGLang mem_fraction_static)
            of_free:   f = KV / (M − W − R)        (TensorRT-LLM free_gpu_memory_fraction)

        with M the device memory, W the weights, R the non-KV reserve and KV the planned KV budget, all per
        accelerator (catalog/engines.yaml, kv_budget_rule). Under the contract's own rule: its fraction as it is.
        """
        if rule == self.kv_budget_rule:
            return round(self.memory_fraction, 4)
        used = self.weight_bytes + self.reserve_bytes
        if rule == "of_total":
            return round(min(1.0, (used + self.kv_budget_bytes) / self.device_memory_bytes), 4)
        return round(min(1.0, self.kv_budget_bytes / max(self.device_memory_bytes - used, 1.0)), 4)


_REPOSITORY_IN_SOURCE = re.compile(r"([\w.-]+/[\w.-]+) config\.json")
"""How a catalog entry's source names its Hugging Face repository: "meta-llama/Llama-3.1-8B config.json"."""


def _repository_of(source: Optional[str], fallback: str) -> str:
    found = _REPOSITORY_IN_SOURCE.search(source or "")
    return found.group(1) if found else fallback


def _hugging_face_id(result) -> str:
    """The model's Hugging Face repository id: named in the catalog entry's source ("org/name config.json"); a
    config.json's folder; else the catalog key (edit it to the checkpoint you serve)."""
    spec = result.contract.workload.model
    if spec.config:
        from pathlib import Path

        return str(Path(spec.config).parent) or "."
    return _repository_of(result.architecture.source, spec.catalog or spec.name or "MODEL")


def model_for_id(model_id: str) -> Optional[str]:
    """The catalog key whose source names the Hugging Face repository ``model_id`` (None if none does)."""
    from botec.architecture import model_catalog

    for key, architecture in model_catalog().items():
        if _repository_of(architecture.source, key) == model_id or key == model_id:
            return key
    return None


def _context_tokens(result) -> int:
    """The longest request the engine must admit, prompt + output: the means when lengths are fixed, twice them
    when uniform (0 to twice the mean; the mean × (1 + r) with a length_range r), the model's maximum when the lengths have no bound (exponential,
    lognormal); never above the model's maximum sequence length."""
    traffic = result.contract.workload.traffic
    mean = int(result.value("prompt_tokens") + result.value("output_tokens"))
    spread = traffic.length_range
    longest_by_distribution = {"fixed": mean, "uniform": 2 * mean if spread is None else math.ceil((1 + spread) * mean)}
    model_max = result.architecture.max_sequence_length
    longest = longest_by_distribution.get(traffic.length_distribution, model_max or mean)
    return int(min(longest, model_max)) if model_max else int(longest)


def _instance(q: dict, prefix: str, strategy) -> InstancePlan:
    def value(name: str, default):
        quantity = q.get(prefix + name)
        return quantity.value if quantity is not None else default

    data_parallel_attention = bool(strategy.data_parallel_attention)
    return InstancePlan(
        tensor_parallel=int(value("tensor_parallel", strategy.tensor_parallel)),
        pipeline_parallel=int(value("pipeline_parallel", strategy.pipeline_parallel)),
        expert_parallel=int(value("expert_parallel", strategy.expert_parallel)),
        data_parallel_attention=data_parallel_attention,
        attention_tensor_parallel=int(strategy.attention_tensor_parallel or 1) if data_parallel_attention else 1,
        redundant_experts=int(strategy.redundant_experts),
        max_batch_size=int(q["max_batch_size"].value),
        max_batched_tokens=int(value("max_batched_tokens", q["max_batched_tokens"].value)),
        two_batch_overlap=bool(strategy.two_batch_overlap))


def check_serving(result, tool: str) -> None:
    """A serving estimate, or a one-line error naming the contract's kind."""
    if result.kind != "serving":
        raise ContractError(f"{tool} launches serving: this is a {result.kind} contract (export a serving "
                            "contract, or a training format: botec export --help lists them)", field="workload.kind")


def serving_plan(result) -> ServingPlan:
    """The plan of a serving :class:`~botec.estimation.Estimate`, as the launch formats write it."""
    q, contract = result.quantities, result.contract
    strategy = contract.strategy
    prefill_strategy = strategy.prefill_layout()
    disaggregated = strategy.disaggregation is not None
    prefill = None
    if disaggregated:
        prefill = _instance(q, "prefill_instance_", prefill_strategy or strategy)
    speculation = None
    spec = contract.assumptions.speculative_decoding
    if spec is not None:
        draft_id = None
        if spec.draft_model and not spec.draft_model.endswith(".json"):
            from botec.architecture import model_catalog

            draft_id = _repository_of(model_catalog()[spec.draft_model].source, spec.draft_model)
        speculation = Speculation(spec.method, int(spec.draft_tokens), draft_id)
    return ServingPlan(
        model_id=_hugging_face_id(result), engine=strategy.engine, decode=_instance(q, "", strategy),
        prefill=prefill, prefill_instances=int(strategy.disaggregation.prefill_instances) if disaggregated else 0,
        memory_fraction=float(q["memory_fraction"].value), kv_budget_rule=result.choices.get("kv_budget", "of_total"),
        kv_budget_bytes=float(q["kv_budget_bytes"].value), weight_bytes=float(q["weight_memory_bytes"].value),
        checkpoint_bytes=float(q["parameters"].value * q["weight_bytes_per_parameter"].value),
        reserve_bytes=float(q["activation_reserve_bytes"].value), device_memory_bytes=float(q["device_memory_bytes"].value),
        weight_precision=strategy.weight_precision, kv_cache_precision=strategy.kv_cache_precision,
        kv_reservation=result.choices.get("kv_reservation", "incremental"), context_tokens=_context_tokens(result),
        replicas=max(1, math.ceil(q["replicas"].value)), prefix_caching=q["prefix_cache_hit_rate"].value > 0,
        speculation=speculation)


def header_lines(tool: str, version: str, format_name: str, result, plan: ServingPlan, unexpressed: list[str],
                 replicas_expressed: bool = False, about: tuple[str, ...] = ()) -> list[str]:
    """The comment lines that open every serving export (:func:`botec.launch.commandline.file_header`): the tool
    and version, the contract, the replicas the traffic needs, ``about``, and each part of the plan the format
    cannot express (the replicas too, unless ``replicas_expressed``)."""
    accelerator = result.contract.supply.accelerator
    per_replica = plan.decode.accelerators + plan.prefill_instances * (plan.prefill.accelerators if plan.prefill else 0)
    plan_line = (f"the plan: {plan.replicas} replica{'s' if plan.replicas != 1 else ''} of {per_replica} × "
                 f"{accelerator if isinstance(accelerator, str) else 'accelerator'} each, for the contract's traffic")
    if plan.replicas > 1 and not replicas_expressed:
        unexpressed = unexpressed + [f"the {plan.replicas} replicas: launch this once per replica, behind a load "
                                     "balancer"]
    return file_header(tool, version, format_name, result.contract.name, [plan_line, *about], unexpressed)
