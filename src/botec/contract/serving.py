"""A serving contract: the model, its traffic and latency targets, the accelerator, one replica's
layout and formats, and the assumptions of the roofline."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field, model_validator

from botec.contract.efficiency import EfficiencyAssumptions
from botec.contract.model import ModelField
from botec.contract.sections import ContractBase, Section
from botec.contract.stated import NonNegativeCount, PositiveCount, Stated, default, default_range, quantity
from botec.contract.supply import ServingSupply
from botec.errors import ContractError

__all__ = ["Traffic", "LatencyTargets", "ServingWorkload", "ServingStrategy", "ServingAssumptions", "ServingContract",
           "SpeculativeDecoding", "Disaggregation", "PrefillLayout"]

SECONDS_PER_DAY = 86_400


class Traffic(Section):
    """Requests and their sizes: means, and how they vary (for the percentiles and `botec simulate`)."""

    requests_per_second: Optional[quantity("count", "Mean arrivals per second, e.g. 5", exclusive_minimum=0)] = None
    requests_per_day: Optional[quantity("count", "Mean arrivals per day, e.g. '10M'", exclusive_minimum=0)] = None
    # the load is a rate or, closed, users: N across the fleet, each sending its next request when its last
    # returns, after think_time (genai-perf --concurrency, vllm bench serve --max-concurrency; botec.serving.closed)
    concurrency: Optional[quantity("count", "Users in flight fleet-wide (closed loop), e.g. 64", minimum=1,
                                   integer=True)] = None
    think_time: Optional[quantity("seconds", "A user's pause between requests (default 0)", minimum=0)] = None
    prompt_tokens: quantity("count", "Prompt tokens per request (mean)", minimum=1, integer=True)
    output_tokens: quantity("count", "Generated tokens per request (mean)", minimum=1, integer=True)
    length_distribution: Literal["fixed", "uniform", "exponential", "lognormal"] = Field(
        "fixed", description="how prompt and output lengths vary around their means: fixed, uniform (0 to twice the "
                             "mean, or the mean ± length_range), exponential, or lognormal (with length_sigma)")
    length_sigma: float = Field(0.5, gt=0, le=3, description="σ of the lognormal lengths' logarithm")
    length_range: Optional[float] = Field(
        None, description="uniform lengths: their half-width as a share of the mean, 0 to under 1 (0.2: the mean "
                          "± 20 %; default: 0 to twice the mean)")
    arrivals: Literal["poisson", "bursty", "uniform"] = Field(
        "poisson", description="arrival process: poisson, bursty (Poisson bursts of burst_size requests), or uniform "
                               "(evenly spaced)")
    burst_size: PositiveCount = Field(8, description="requests per burst when arrivals are bursty")

    @model_validator(mode="after")
    def _one_load(self) -> "Traffic":
        stated = [n for n in ("requests_per_second", "requests_per_day", "concurrency") if getattr(self, n) is not None]
        if len(stated) != 1:
            field = stated[-1] if stated else "requests_per_second"
            raise ContractError("state the load as requests_per_second, requests_per_day (open: arrivals at a rate) or "
                                "concurrency (closed: users in flight), exactly one of them"
                                + (f"; got {' and '.join(stated)}" if stated else ""),
                                field=f"workload.traffic.{field}")
        if self.length_range is not None:
            if not (0 <= self.length_range < 1):
                raise ContractError(f"expected a share of the mean from 0 to under 1 (0.2: the mean ± 20 %), got "
                                    f"{self.length_range:g}", field="workload.traffic.length_range")
            if self.length_distribution != "uniform":
                raise ContractError("length_range is the half-width of uniform lengths: give length_distribution: "
                                    f"uniform (got {self.length_distribution})", field="workload.traffic.length_range")
        if self.think_time is not None and self.concurrency is None:
            raise ContractError("think_time is the pause of a closed loop's users: it needs concurrency, not a rate",
                                field="workload.traffic.think_time")
        return self

    @property
    def closed(self) -> bool:
        """Whether the load is a closed loop of ``concurrency`` users (else arrivals at a rate)."""
        return self.concurrency is not None

    @property
    def per_second(self) -> Stated | None:
        """The arrival rate per second, with its range and distribution (a daily rate divided by 86,400); None for
        a closed loop, whose rate follows from the replies."""
        if self.requests_per_second is not None:
            return self.requests_per_second
        if self.requests_per_day is not None:
            return self.requests_per_day.scaled(1 / SECONDS_PER_DAY)
        return None

    @property
    def rate_field(self) -> str:
        return "workload.traffic." + ("requests_per_second" if self.requests_per_second is not None
                                      else "requests_per_day" if self.requests_per_day is not None else "concurrency")

    @property
    def length_variation(self) -> float:
        """The squared coefficient of variation of the lengths, c² = Var / mean²: uniform on the mean ± r (a share of
        it), c² = r²/3 (a uniform's variance is its width² / 12 = (2r·m)²/12); r = 1 (0 to twice the mean) without a
        ``length_range``."""
        import math

        if self.length_distribution == "uniform":
            return (1.0 if self.length_range is None else self.length_range) ** 2 / 3
        return {"fixed": 0.0, "exponential": 1.0,
                "lognormal": math.exp(self.length_sigma ** 2) - 1}[self.length_distribution]


class LatencyTargets(Section):
    """The latency each request should see, at a percentile (leave a target out to size for throughput only)."""

    time_to_first_token: Optional[quantity("seconds", "Target time to first token, e.g. '500 ms'",
                                           exclusive_minimum=0)] = None
    time_per_output_token: Optional[quantity("seconds", "Target time per output token, e.g. '50 ms'",
                                             exclusive_minimum=0)] = None
    percentile: Literal[50, 90, 95, 99] = Field(
        90, description="the percentile the targets hold at: 90 means 90 % of requests meet them (MLPerf: 99)")
    margin: quantity("ratio", "Share of each target the fleet keeps free: it is sized to target × (1 − margin)",
                     minimum=0, maximum=0.9) = default(
        0.10, "planning margin: the analytic load model's percentiles stand within about 10-15 % of botec simulate's "
              "(tests/test_simulate.py); a plan at a target's edge cannot tell a pass from a miss")


class ServingWorkload(Section):
    """A serving fleet: a model, its traffic and its latency targets."""

    kind: Literal["serving"] = Field(description="serving (this) or training (the default)")
    model: ModelField
    traffic: Traffic
    latency: LatencyTargets = Field(default_factory=LatencyTargets)

    @model_validator(mode="after")
    def _needs_attention_shape(self) -> "ServingWorkload":
        if self.model.kind == "count":
            raise ContractError("serving needs the model's attention shape for its KV cache: give a catalog name, a "
                                "config.json or an architecture", field="workload.model")
        return self


class PrefillLayout(Section):
    """A prefill instance's own layout, where it differs from the decode instance's (DeepSeek's inference system:
    prefill EP 32 on 4 nodes, decode EP 144 on 18; deepseek-ai/open-infra-index, open-source week day 6,
    2025-02-28). A field left out takes the replica's (the decode instance's) value."""

    tensor_parallel: Optional[PositiveCount] = Field(None, description="TP degree of one prefill instance")
    pipeline_parallel: Optional[PositiveCount] = Field(None, description="PP stages of one prefill instance")
    expert_parallel: Optional[PositiveCount] = Field(None, description="EP degree of one prefill instance")
    data_parallel_attention: Optional[bool] = Field(None, description="attention data-parallel over its TP ranks")
    attention_tensor_parallel: Optional[PositiveCount] = Field(
        None, description="data-parallel attention: ranks one attention group splits its heads over")
    redundant_experts: Optional[NonNegativeCount] = Field(
        None, description="redundant routed-expert copies the prefill instance holds (EPLB)")
    two_batch_overlap: Optional[bool] = Field(
        None, description="the prefill instance runs each step as two micro-batches, one's MoE all-to-all under the "
                          "other's compute (SGLang --enable-two-batch-overlap on the prefill server)")
    max_batched_tokens: Optional[quantity("count", "Tokens one prefill step may carry (default: the replica's)",
                                          minimum=1, integer=True)] = None


class Disaggregation(Section):
    """Prefill and decode in separate instances (NVIDIA Dynamo, SGLang and vLLM disaggregated serving): prompts
    run on prefill instances, whose KV cache then crosses the network to a decode instance."""

    prefill_instances: PositiveCount = Field(
        1, description="prefill instances per decode instance (the P of xPyD), each with the replica's TP × PP "
                       "unless prefill states its own layout")
    prefill: Optional[PrefillLayout] = Field(
        None, description="a prefill instance's own layout (TP, EP, PP, data-parallel attention, redundant experts, "
                          "token budget); absent: the replica's")
    kv_transfer_bandwidth: Optional[quantity(
        "byte_rate", "Bytes per second one accelerator sends KV at (default: the tier between the instances: "
        "NVLink when they share a node, else the NICs)", exclusive_minimum=0)] = None


def _known_engine(name: Any) -> str:
    """The engine's name, checked against the presets of ``catalog/engines.yaml`` (the one list of engines)."""
    from botec.catalog import did_you_mean
    from botec.catalog.engines import engine_presets
    from botec.units import excerpt

    presets = engine_presets()
    if not isinstance(name, str) or name not in presets:
        raise ContractError(f"unknown engine {excerpt(name)}{did_you_mean(str(name), presets)} (engines: "
                            f"{', '.join(presets)})", field="strategy.engine")
    return name


class ServingStrategy(Section):
    """One replica: its engine, layout, weight and KV-cache formats, and the engine's limits."""

    engine: Annotated[str, BeforeValidator(_known_engine)] = Field(
        "vllm", description="the serving engine whose defaults apply: a preset of catalog/engines.yaml (vllm, "
                            "tensorrt-llm, sglang; `botec catalog` lists them)")
    tensor_parallel: PositiveCount = Field(1, description="TP degree of one replica")
    pipeline_parallel: PositiveCount = Field(1, description="PP stages of one replica")
    pipeline_stage_layers: Optional[list[PositiveCount]] = Field(
        None, description="transformer layers of each stage, first to last (default as for training)")
    expert_parallel: PositiveCount = Field(1, description="EP degree (MoE): experts split over the TP ranks")
    redundant_experts: NonNegativeCount = Field(
        0, description="redundant copies of hot routed experts held beside the E experts (DeepSeek EPLB; SGLang "
                       "--ep-num-redundant-experts): each EP rank holds (E + N) / EP, the busiest ⌈(E + N) / EP⌉")
    data_parallel_attention: bool = Field(
        False, description="attention data-parallel over the TP ranks (SGLang --enable-dp-attention, TensorRT-LLM "
                           "enable_attention_dp, vLLM data-parallel + expert-parallel): each rank holds whole attention "
                           "weights and caches only its own requests, so MLA's latent is no longer copied on every rank")
    two_batch_overlap: bool = Field(
        False, description="two-batch overlap (SGLang --enable-two-batch-overlap; DeepSeek's inference system, "
                           "deepseek-ai/profile-data): each step runs as two micro-batches, one's MoE all-to-all "
                           "(dispatch, combine) under the other's compute; needs data_parallel_attention")
    attention_tensor_parallel: Optional[PositiveCount] = Field(
        None, description="data-parallel attention: ranks one attention group splits its heads over (default 1: each "
                          "rank runs its requests' attention whole; SGLang's attention TP = tp_size / dp_size); must "
                          "divide the attention heads and tensor_parallel, which then need not divide the heads")
    weight_precision: Literal["bf16", "fp16", "fp8", "fp4", "int8", "int4"] = Field(
        "bf16", description="weight format (fp4: NVFP4, a scale per 16 weights; int8/int4 weight-only, with per-group "
                            "scales)")
    quantization_group_size: PositiveCount = Field(128, description="weights per quantization scale (int8/int4)")
    kv_cache_precision: Literal["bf16", "fp16", "fp8", "int8"] = Field("bf16", description="KV-cache format")
    activation_bytes_per_element: quantity("bytes", "Bytes per activation element (TP all-reduce messages)",
                                           exclusive_minimum=0) = default(2, "16-bit activations")
    memory_fraction: Optional[quantity("ratio", "Share of memory the engine may use (default: the engine's, e.g. "
                                       "vLLM's gpu_memory_utilization 0.9)", exclusive_minimum=0, maximum=1)] = None
    max_batch_size: Optional[quantity("count", "Most sequences the engine runs at once (default: the engine's "
                                      "max_num_seqs)", minimum=1, integer=True)] = None
    max_batched_tokens: Optional[quantity("count", "Tokens one engine step may carry (default: the engine's "
                                          "max_num_batched_tokens)", minimum=1, integer=True)] = None
    kv_reservation: Optional[Literal["incremental", "full"]] = Field(
        None, description="the KV cache a running request holds (default: the engine's): incremental (blocks as it "
                          "grows: vLLM, SGLang, TensorRT-LLM MAX_UTILIZATION) or full (prompt + output reserved at "
                          "admission: TensorRT-LLM GUARANTEED_NO_EVICT)")
    disaggregation: Optional[Disaggregation] = Field(
        None, description="prefill and decode in separate instances, the KV cache sent between them (default: "
                          "both in every step, in-flight batching)")

    @model_validator(mode="after")
    def _attention_ranks(self) -> "ServingStrategy":
        _check_attention(self, "strategy")
        prefill = self.prefill_layout()
        if prefill is not None:
            _check_attention(prefill, "strategy.disaggregation.prefill")
        return self

    def prefill_layout(self) -> "ServingStrategy | None":
        """The prefill instance's strategy: the replica's with disaggregation.prefill's fields in their place (None
        when no prefill layout is stated: the prefill instances take the replica's)."""
        plan = self.disaggregation.prefill if self.disaggregation is not None else None
        if plan is None:
            return None
        own = {name: value for name, value in plan if value is not None}
        if own.get("data_parallel_attention") is False and "attention_tensor_parallel" not in own:
            own["attention_tensor_parallel"] = None
        return self.model_copy(update=own | {"disaggregation": None})


def _check_attention(strategy: ServingStrategy, prefix: str) -> None:
    """Data-parallel attention's ranks: TP > 1, and attention groups that divide TP (one-line errors naming the
    field under ``prefix``: strategy, or strategy.disaggregation.prefill)."""
    if strategy.data_parallel_attention and strategy.tensor_parallel == 1:
        raise ContractError("data-parallel attention spreads requests over the tensor-parallel ranks: it needs "
                            "tensor_parallel > 1", field=f"{prefix}.data_parallel_attention")
    if strategy.two_batch_overlap and not strategy.data_parallel_attention:
        raise ContractError("two-batch overlap hides the MoE all-to-all of data-parallel attention behind compute: "
                            "set data_parallel_attention: true (under plain TP the MoE layer is all-reduced, which "
                            "it does not overlap)", field=f"{prefix}.two_batch_overlap")
    if strategy.attention_tensor_parallel is not None:
        if not strategy.data_parallel_attention:
            raise ContractError("attention_tensor_parallel splits the attention of data-parallel attention groups: "
                                "set data_parallel_attention: true (without it attention runs at tensor_parallel)",
                                field=f"{prefix}.attention_tensor_parallel")
        if strategy.tensor_parallel % strategy.attention_tensor_parallel:
            raise ContractError(f"attention_tensor_parallel {strategy.attention_tensor_parallel} does not divide "
                                f"tensor_parallel {strategy.tensor_parallel}: the ranks form tensor_parallel / "
                                "attention_tensor_parallel attention groups", field=f"{prefix}.attention_tensor_parallel")


_REPLACED = {"prefill_mfu": "matmul_efficiency (the family's GEMM efficiency: prefill and decode share one step model)",
             "decode_mfu": "matmul_efficiency", "decode_bandwidth_efficiency": "memory_bandwidth_efficiency"}


class SpeculativeDecoding(Section):
    """A draft proposes tokens the target model verifies in one step (Leviathan et al. 2023)."""

    draft_tokens: PositiveCount = Field(description="tokens the draft proposes per step, k")
    acceptance_rate: quantity("ratio", "Chance each draft token is accepted, α", minimum=0, maximum=1)
    method: Literal["draft_model", "eagle", "mtp", "ngram"] = Field(
        "draft_model", description="what drafts: draft_model (a separate model), eagle (an EAGLE head), mtp (the "
                                   "model's MTP module, DeepSeek-V3), ngram (prompt lookup)")
    draft_model: Optional[str] = Field(
        None, description="method draft_model: a catalog name or a config.json path; its weights, cache and cost "
                          "are counted")
    draft_cost: Optional[quantity("ratio", "One draft token's cost as a share of a target decode step (default: "
                                  "from the draft's shape; 0.05 unnamed)", minimum=0)] = None

    @model_validator(mode="after")
    def _named_draft(self) -> "SpeculativeDecoding":
        if self.draft_model is not None and self.method != "draft_model":
            raise ContractError(f"draft_model names a separate draft; method {self.method} drafts without one: remove "
                                "draft_model or set method: draft_model",
                                field="assumptions.speculative_decoding.draft_model")
        if self.draft_model is not None and not self.draft_model.endswith(".json"):
            from botec.architecture import model_catalog
            from botec.catalog import did_you_mean

            catalog = model_catalog()
            if self.draft_model not in catalog:
                raise ContractError(f"unknown model {self.draft_model!r}{did_you_mean(self.draft_model, catalog)} "
                                    "(a catalog name or a config.json path)",
                                    field="assumptions.speculative_decoding.draft_model")
        return self


class ServingAssumptions(EfficiencyAssumptions):
    """The efficiencies of the step model (default: the accelerator family's and the engine's) and the load policy
    (the op-level efficiencies and the attention FLOPs convention: :class:`EfficiencyAssumptions`, shared with
    training)."""

    step_overhead: Optional[quantity("seconds", "Engine CPU time per step not hidden (default: the engine's)",
                                     minimum=0)] = None
    request_overhead: Optional[quantity("seconds", "A request's time outside the engine's steps before its first "
                                        "token: HTTP, tokenization, detokenization (default: the engine's)",
                                        minimum=0)] = None
    allreduce_latency: Optional[quantity("seconds", "Latency of one small TP all-reduce (default: the engine's)",
                                         minimum=0)] = None
    activation_reserve: Optional[quantity("bytes", "Non-KV memory per accelerator: activations, CUDA graphs, "
                                          "buffers (default: the engine's)", minimum=0)] = None
    prefix_cache_hit_rate: quantity("ratio", "Share of prompt tokens found in the prefix cache", minimum=0,
                                    maximum=1) = default(0.0, "no shared prefixes assumed; state your workload's")
    speculative_decoding: Optional[SpeculativeDecoding] = Field(
        None, description="draft tokens, acceptance rate, the draft and its cost, when the engine speculates")
    utilization_cap: quantity("ratio", "Largest share of a replica's capacity to load it to", exclusive_minimum=0,
                              maximum=1) = default_range(
        0.8, 0.6, 0.9, "headroom for bursts and failover; queues grow as utilization nears 1")

    @model_validator(mode="before")
    @classmethod
    def _replaced(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in _REPLACED.items():
                if old in data:
                    raise ContractError(f"{old} was replaced in botec 0.3 by the engine step model: state {new}",
                                        field=f"assumptions.{old}")
        return data


class ServingContract(ContractBase):
    """A workload contract for a serving fleet: workload, supply, strategy and assumptions."""

    workload: ServingWorkload
    supply: ServingSupply
    strategy: ServingStrategy = Field(default_factory=ServingStrategy)
    assumptions: ServingAssumptions = Field(default_factory=ServingAssumptions)

    @property
    def kind(self) -> str:
        return "serving"
