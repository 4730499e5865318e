"""A serving contract: the model, its traffic and latency targets, the accelerator, one replica's
layout and formats, and the assumptions of the roofline."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, PositiveInt, model_validator

from botec.contract.model import ModelField
from botec.contract.sections import ContractBase, Section
from botec.contract.stated import Stated, default, quantity
from botec.contract.supply import ServingSupply
from botec.errors import ContractError

__all__ = ["Traffic", "LatencyTargets", "ServingWorkload", "ServingStrategy", "ServingAssumptions", "ServingContract"]

SECONDS_PER_DAY = 86_400


class Traffic(Section):
    """Requests and their sizes (means)."""

    requests_per_second: Optional[quantity("count", "Mean arrivals per second, e.g. 5", exclusive_minimum=0)] = None
    requests_per_day: Optional[quantity("count", "Mean arrivals per day, e.g. '10M'", exclusive_minimum=0)] = None
    prompt_tokens: quantity("count", "Prompt tokens per request (mean)", minimum=1, integer=True)
    output_tokens: quantity("count", "Generated tokens per request (mean)", minimum=1, integer=True)

    @model_validator(mode="after")
    def _one_rate(self) -> "Traffic":
        stated = [n for n in ("requests_per_second", "requests_per_day") if getattr(self, n) is not None]
        if len(stated) != 1:
            raise ContractError("state the traffic as requests_per_second or requests_per_day (one of them)",
                                field="workload.traffic.requests_per_second")
        return self

    @property
    def per_second(self) -> Stated:
        """The arrival rate per second, with its range and distribution (a daily rate divided by 86,400)."""
        if self.requests_per_second is not None:
            return self.requests_per_second
        return self.requests_per_day.scaled(1 / SECONDS_PER_DAY)

    @property
    def rate_field(self) -> str:
        return "workload.traffic." + ("requests_per_second" if self.requests_per_second is not None
                                      else "requests_per_day")


class LatencyTargets(Section):
    time_to_first_token: Optional[quantity("seconds", "Target time to first token, e.g. '500 ms'",
                                           exclusive_minimum=0)] = None
    time_per_output_token: Optional[quantity("seconds", "Target time per output token, e.g. '50 ms'",
                                             exclusive_minimum=0)] = None


class ServingWorkload(Section):
    """A serving fleet: a model, its traffic and its latency targets."""

    kind: Literal["serving"]
    model: ModelField
    traffic: Traffic
    latency: LatencyTargets = Field(default_factory=LatencyTargets)

    @model_validator(mode="after")
    def _needs_attention_shape(self) -> "ServingWorkload":
        if self.model.kind == "count":
            raise ContractError("serving needs the model's attention shape for its KV cache: give a catalog name, a "
                                "config.json or an architecture", field="workload.model")
        return self


class ServingStrategy(Section):
    """One replica: its layout, weight and KV-cache formats, and the engine's limits."""

    tensor_parallel: PositiveInt = Field(1, description="TP degree of one replica")
    pipeline_parallel: PositiveInt = Field(1, description="PP stages of one replica")
    pipeline_stage_layers: Optional[list[PositiveInt]] = Field(
        None, description="transformer layers of each stage, first to last (default as for training)")
    expert_parallel: PositiveInt = Field(1, description="EP degree (MoE): experts split over the TP ranks")
    weight_precision: Literal["bf16", "fp16", "fp8", "int8", "int4"] = Field(
        "bf16", description="weight format (int8/int4 weight-only, with per-group scales)")
    quantization_group_size: PositiveInt = Field(128, description="weights per quantization scale (int8/int4)")
    kv_cache_precision: Literal["bf16", "fp16", "fp8", "int8"] = Field("bf16", description="KV-cache format")
    activation_bytes_per_element: quantity("bytes", "Bytes per activation element (TP all-reduce messages)",
                                           exclusive_minimum=0) = default(2, "16-bit activations")
    memory_fraction: quantity("ratio", "Share of device memory the engine may use (vLLM "
                              "gpu_memory_utilization)", exclusive_minimum=0, maximum=1) = \
        default(0.9, "vLLM's gpu_memory_utilization default")
    max_batch_size: quantity("count", "Most sequences the engine batches (max_num_seqs)", minimum=1,
                             integer=True) = default(256, "vLLM's max_num_seqs default")


class ServingAssumptions(Section):
    """The roofline's efficiencies and the engine's reserve."""

    attention_flops: Literal["full", "causal", "none"] = Field(
        "full", description="attention-score FLOPs counted: full (PaLM, nanoGPT), causal half (Megatron) or none")
    prefill_mfu: quantity("ratio", "Share of peak prefill sustains", exclusive_minimum=0, maximum=1) = \
        default(0.5, "prefill is large matrix multiplies; BLIS uses 0.45 on H100")
    decode_mfu: quantity("ratio", "Share of peak decode sustains once compute-bound", exclusive_minimum=0,
                         maximum=1) = default(0.5, "as prefill")
    decode_bandwidth_efficiency: quantity("ratio", "Share of memory bandwidth decode achieves",
                                          exclusive_minimum=0, maximum=1) = \
        default(0.8, "AIConfigurator's empirical 0.8 of HBM bandwidth")
    activation_reserve: quantity("bytes", "Memory per accelerator for activations, CUDA graphs and buffers",
                                 minimum=0) = default(3e9, "AIConfigurator reserves 3.5 GB on H100")


class ServingContract(ContractBase):
    """A workload contract for a serving fleet: workload, supply, strategy and assumptions."""

    workload: ServingWorkload
    supply: ServingSupply
    strategy: ServingStrategy = Field(default_factory=ServingStrategy)
    assumptions: ServingAssumptions = Field(default_factory=ServingAssumptions)

    @property
    def kind(self) -> str:
        return "serving"
