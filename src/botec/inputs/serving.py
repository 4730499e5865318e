"""The inputs of a serving estimate: the model's shape, one replica's layout, the traffic and targets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botec.architecture import breakdown
from botec.contract.serving import ServingContract
from botec.contract.stated import default
from botec.errors import ContractError
from botec.graph import Given
from botec.graph.elementwise import minimum
from botec.inputs import Inputs, Varied, accelerator_options, checked
from botec.inputs.cluster import Tiers, place, ranks_per_node, tiers_of
from botec.catalog.engines import counting_units, engine_presets
from botec.inputs.efficiency import efficiency_given
from botec.inputs.facility import accelerator_given, api_price_given, facility_given
from botec.inputs.model import model_facts, model_given, resolve_architecture
from botec.inputs.speculation import draft_architecture, draft_kv_split, speculation_given
from botec.inputs.stated import StatedInputs
from botec.layout import Layout, layout_of
from botec.serving.instances import FLAG, LAYOUT_INPUTS, mirror_name

__all__ = ["build", "derive", "WEIGHT_BYTES", "KV_BYTES"]

# Bytes per element of each format; weight-only INT8/INT4 also keep one 16-bit scale per quantization group.
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5 + 1 / 16, "int8": 1.0, "int4": 0.5}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}
SCALE_BYTES = 2.0



# The squared coefficient of variation c_a² of the gaps between arrival epochs: Poisson 1; evenly spaced 0; bursty
# arrivals are Poisson epochs (c_a² = 1), each bringing burst_size requests (botec.simulate.workload).
ARRIVAL_VARIATION = {"poisson": 1.0, "bursty": 1.0, "uniform": 0.0}
ROOFLINE_EFFICIENCIES = ("assumptions.matmul_efficiency", "assumptions.memory_bandwidth_efficiency")
"""A contract that states either prices its weight GEMMs on the roofline with it: the measured GEMM table steps
aside (``gemm_table_index = -1``), so a back-solve of either (botec.explore.solve) solves the roofline's."""
ATTENTION_EFFICIENCIES = ROOFLINE_EFFICIENCIES + ("assumptions.attention_efficiency",)
"""A contract that states any of these prices decode attention on the roofline (``attention_table_index = -1``): its
own attention or memory figure, or its own GEMM figure (a roofline contract, as a solve of any of them holds)."""
TABLE_ASIDE = {"gemm_table_index": -1.0, "moe_table_index": -1.0, "attention_table_index": -1.0}
"""The graph values that set the measured GEMM, fused-MoE and decode-attention tables aside: the roofline with the
family's e_mm and e_mem (what a solve or a calibration of :data:`ROOFLINE_EFFICIENCIES` holds)."""


def build(contract: ServingContract, base_dir: Path | None) -> Inputs:
    """Everything but the replica's layout-derived inputs, which :func:`derive` adds."""
    from botec.catalog import accelerators
    from botec.serving import SERVING

    workload, supply, strategy, assumptions = contract.workload, contract.supply, contract.strategy, \
        contract.assumptions
    arch = resolve_architecture(workload.model, base_dir)
    if arch is not None and arch.decoder_layers:
        raise ContractError(f"{arch.name} is an encoder-decoder model: the serving estimate models decoder-only "
                            "engines (one KV cache per layer, no encoder pass nor cross-attention cache); estimate "
                            "its training instead", field="workload.model")
    traffic = workload.traffic
    prompt, output = int(traffic.prompt_tokens.value), int(traffic.output_tokens.value)
    context = prompt + output
    if arch.max_sequence_length and context > arch.max_sequence_length:
        raise ContractError(f"prompt {prompt:,} + output {output:,} = {context:,} tokens exceeds "
                            f"{arch.name}'s {arch.max_sequence_length:,}-token context",
                            field="workload.traffic.prompt_tokens")
    stated = StatedInputs()
    fixed = model_given(workload.model, arch, assumptions.attention_flops, stated)

    precision = strategy.weight_precision
    weight_bytes, weight_source = WEIGHT_BYTES[precision], f"{precision} weights"
    if precision in ("int8", "int4"):
        weight_bytes += SCALE_BYTES / strategy.quantization_group_size
        weight_source += f" + a 2-byte scale per {strategy.quantization_group_size} weights (weight-only quantization)"
    if arch.sliding_window:
        window, window_source = arch.sliding_window, f"sliding window of {arch.sliding_window:,}"
    elif arch.max_sequence_length:
        window, window_source = arch.max_sequence_length, f"the model's {arch.max_sequence_length:,}-token context"
    else:
        window, window_source = context, "the request's context (the model states no limit)"
    fixed |= {
        "weight_bytes_per_parameter": Given(weight_bytes, "assumed", weight_source, "strategy.weight_precision"),
        "activation_bytes_per_element": stated.given("activation_bytes_per_element",
                                                     strategy.activation_bytes_per_element,
                                                     "strategy.activation_bytes_per_element"),
        "kv_elements_per_token_per_layer": Given(float(arch.kv_elements_per_token_per_layer), "derived",
                                                 "MLA: kv_lora_rank + qk_rope_head_dim" if arch.mla
                                                 else "2 × KV heads × head dim", "workload.model"),
        "kv_bytes_per_element": Given(KV_BYTES[strategy.kv_cache_precision], "assumed",
                                      f"{strategy.kv_cache_precision} KV cache", "strategy.kv_cache_precision"),
        "prompt_tokens": stated.given("prompt_tokens", traffic.prompt_tokens, "workload.traffic.prompt_tokens"),
        "output_tokens": stated.given("output_tokens", traffic.output_tokens, "workload.traffic.output_tokens"),
        "attention_window_tokens": Given(float(window), "assumed", window_source, "workload.model"),
        "prefix_cache_hit_rate": stated.given("prefix_cache_hit_rate", assumptions.prefix_cache_hit_rate,
                                              "assumptions.prefix_cache_hit_rate"),
        "utilization_cap": stated.given("utilization_cap", assumptions.utilization_cap, "assumptions.utilization_cap"),
        "latency_percentile": Given(workload.latency.percentile / 100, "assumed", f"P{workload.latency.percentile}",
                                    "workload.latency.percentile"),
        "latency_margin": stated.given("latency_margin", workload.latency.margin, "workload.latency.margin"),
        "prompt_length_variation": Given(traffic.length_variation, "assumed",
                                         f"{traffic.length_distribution} lengths: c² = Var / mean²"
                                         + ("" if traffic.length_range is None else
                                            f" = r²/3, r = {traffic.length_range:g}"),
                                         "workload.traffic.length_distribution" if traffic.length_range is None
                                         else "workload.traffic.length_range"),
        "arrival_variation": Given(ARRIVAL_VARIATION[traffic.arrivals], "assumed",
                                   f"{traffic.arrivals} arrivals: c_a² = {ARRIVAL_VARIATION[traffic.arrivals]:g} "
                                   "(a burst's epochs are Poisson: c_a² = 1)", "workload.traffic.arrivals"),
        "burst_size": Given(float(traffic.burst_size if traffic.arrivals == "bursty" else 1), "assumed",
                            "requests arriving together" if traffic.arrivals == "bursty" else "one request at a time",
                            "workload.traffic.burst_size"),
        "attention_width_per_context_token": Given(float(_attention_width(arch)), "derived",
                                                   "absorbed MLA: a × (2·r_kv + d_rope)" if arch.mla
                                                   else "a × (d_qk + d_v)", "workload.model"),
        "prefill_attention_width_per_context_token": Given(float(_attention_width(arch, prefill=True)), "derived",
                                                           "MLA prefilled decompressed (MHA form): a × (d_qk + d_v)"
                                                           if arch.mla else "a × (d_qk + d_v)", "workload.model"),
    } | _load(traffic, stated) | speculation_given(assumptions.speculative_decoding, arch, base_dir, stated) \
        | _engine(strategy, assumptions, prompt, stated)
    preset = engine_presets()[strategy.engine]
    choices = {"kv_budget": preset.value("kv_budget_rule"),
               "kv_reservation": strategy.kv_reservation or preset.value("kv_reservation")}
    if traffic.closed:   # open loads take the graph's default methods (botec.serving.closed: the closed ones)
        choices["load"] = "closed"
    for target, name, choice in (("time_to_first_token", "time_to_first_token_target_seconds", "ttft_target"),
                                 ("time_per_output_token", "time_per_output_token_target_seconds", "tpot_target")):
        value = getattr(workload.latency, target)
        fixed |= stated.optional(name, value, f"workload.latency.{target}", "no target is stated")
        choices[choice] = "stated" if value is not None else "none"

    device = accelerators()[supply.accelerator] if isinstance(supply.accelerator, str) else None
    compute_precision = precision if precision in ("fp8", "fp4") else "bf16"
    if device is not None and compute_precision not in device.peak_flops_per_s:
        if compute_precision in ("fp8", "fp4"):
            raise ContractError(f"{device.key} has no {compute_precision.upper()} tensor cores: those weights would run "
                                "as BF16; use bf16, int8 or int4 (weight-only) or an accelerator with "
                                f"{compute_precision.upper()}", field="strategy.weight_precision")
        if "fp16" in device.peak_flops_per_s:  # Volta: no BF16; 16-bit weights and activations run in FP16
            compute_precision = "fp16"
    label, accelerator = accelerator_given(supply, device, compute_precision, "strategy.weight_precision", stated,
                                           bandwidth_needed_for="serving reads the weights every decode step")
    fixed |= accelerator | facility_given(supply, device, stated)
    fixed |= efficiency_given(assumptions, supply, device, compute_precision, base_dir, stated)
    if device is not None and all(getattr(assumptions, field.removeprefix("assumptions.")) is None
                                  for field in ROOFLINE_EFFICIENCIES):
        from botec.serving.moe_operators import moe_table_given   # the measured MoE tables (lazily)
        from botec.serving.operators import gemm_table_given   # the measured GEMM tables (lazily: one file each)

        fixed |= gemm_table_given(device, precision, arch) | moe_table_given(device, precision, arch,
                                                                                   strategy.engine)
    else:
        fixed["gemm_table_index"] = Given(-1.0, "assumed", "the contract states its own GEMM or memory efficiency: "
                                          "the roofline", "assumptions.matmul_efficiency")
        fixed["moe_table_index"] = Given(-1.0, "assumed", "the contract states its own GEMM or memory efficiency: "
                                         "the roofline", "assumptions.matmul_efficiency")
    if device is not None and all(getattr(assumptions, field.removeprefix("assumptions.")) is None
                                  for field in ATTENTION_EFFICIENCIES):
        from botec.serving.attention_tables import attention_table_given   # lazily: one file, only when needed

        from botec.serving.prefill_attention import prefill_table_given

        fixed |= attention_table_given(device, strategy.kv_cache_precision, arch, assumptions.speculative_decoding,
                                       context)
        fixed |= prefill_table_given(device, strategy.engine, strategy.weight_precision, strategy.kv_cache_precision,
                                     arch, context, prompt, float(fixed["max_batched_tokens"].value))
    else:
        fixed["attention_table_index"] = Given(-1.0, "assumed", "the contract states its own attention, memory or "
                                               "GEMM efficiency: the roofline", "assumptions.attention_efficiency")
        fixed["prefill_attention_table_index"] = Given(-1.0, "assumed", fixed["attention_table_index"].source,
                                                       "assumptions.attention_efficiency")
    from botec.serving.allreduce import allreduce_table_given   # lazily: its tables

    fixed |= allreduce_table_given(device, strategy.engine, assumptions.allreduce_latency is not None)
    if assumptions.kernel_overhead is None:  # a serving engine captures the decode step in CUDA graphs
        fixed["kernel_overhead_seconds"] = _engine_given(strategy.engine, "kernel_overhead", "assumptions.kernel_overhead")
    if supply.replicas is not None:   # a pinned fleet: the graph's sizing formula is replaced, not consulted
        fixed["replicas"] = stated.given("replicas", supply.replicas, "supply.replicas")
    fixed |= api_price_given(supply.api_price, stated)
    choices["expert_placement"] = "busiest"   # EPLB's redundant experts, uneven placements: the busiest rank
    spec = {"strategy.tensor_parallel": strategy.tensor_parallel, "strategy.pipeline_parallel":
            strategy.pipeline_parallel, "strategy.expert_parallel": strategy.expert_parallel}
    return Inputs(kind="serving", contract=contract, base_dir=base_dir, architecture=arch,
                  model=model_facts(workload.model, arch), graph=SERVING, choices=choices, accelerator_label=label,
                  formats_label=f"{precision} weights, {strategy.kv_cache_precision} KV cache", spec=spec, spec_given={},
                  fixed=fixed, tiers=tiers_of(supply, device, stated),
                  stated_fields={k: tuple(v) for k, v in stated.fields.items()}, absent=stated.absent, derive=derive,
                  engine=preset, traffic=traffic, options=accelerator_options(supply))


def _attention_width(arch, prefill: bool = False) -> int:
    """Multiply-adds one query makes per cached token per layer: a·(d_qk + d_v); absorbed MLA decode attends in the
    latent, a·(2·r_kv + d_rope) (formula audit row 30: FlashMLA, vLLM), MLA prefill in the decompressed MHA form,
    a·(d_qk + d_v) (vLLM's and SGLang's MLA prefill; formula audit 2, §4 N6)."""
    if arch.mla and not prefill:
        return arch.attention_heads * (2 * arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim)
    return arch.attention_heads * (arch.qk_head_dim + arch.v_head_dim)


def _engine_given(engine: str, figure: str, field: str) -> Given:
    preset = engine_presets()[engine]
    entry = preset[figure]
    basis = "" if entry.source.startswith(entry.basis) else f"{entry.basis}: "   # an assumed source says so itself
    return Given(entry.value, "catalog", f"{preset.name}: {basis}{entry.source}", field, entry.low, entry.high)


def _engine(strategy, assumptions, prompt_tokens: int, stated: StatedInputs) -> dict[str, Given]:
    """The engine's figures, each replaced where the contract states its own."""
    given: dict[str, Given] = {}
    for name, figure, field, own in (
            ("memory_fraction", "memory_fraction", "strategy.memory_fraction", strategy.memory_fraction),
            ("max_batch_size", "max_batch_size", "strategy.max_batch_size", strategy.max_batch_size),
            ("max_batched_tokens", "max_batched_tokens", "strategy.max_batched_tokens", strategy.max_batched_tokens),
            ("activation_reserve_bytes", "activation_reserve", "assumptions.activation_reserve",
             assumptions.activation_reserve),
            ("step_overhead_seconds", "step_overhead", "assumptions.step_overhead", assumptions.step_overhead),
            ("request_overhead_seconds", "request_overhead", "assumptions.request_overhead",
             assumptions.request_overhead),
            ("allreduce_latency_seconds", "allreduce_latency", "assumptions.allreduce_latency",
             assumptions.allreduce_latency)):
        if own is not None:
            given[name] = stated.given(name, own, field)
        else:
            given[name] = _engine_given(strategy.engine, figure, field)
            stated.fields.setdefault(field, []).append(name)
    preset = engine_presets()[strategy.engine]
    budget = given["max_batched_tokens"]
    if not preset.value("chunked_prefill") and strategy.max_batched_tokens is None and budget.value < prompt_tokens:
        given["max_batched_tokens"] = Given(float(prompt_tokens), "catalog", f"{preset.name} prefills a prompt whole "
                                            "(no chunked prefill by default): a step carries at least the prompt",
                                            "strategy.max_batched_tokens")
    given["decode_tokens_in_budget"] = Given(
        1.0 if preset.value("token_budget_counts") == "all_tokens" else 0.0, "catalog",
        f"{preset.name}: the token budget bounds {'every token of a step' if preset.value('token_budget_counts') == 'all_tokens' else 'the prefill chunk only, not the decode batch'} ({preset['token_budget_counts'].source})",
        "strategy.engine")
    return given


def _counted_per_unit(engine: str, layout: Layout, limits: dict[str, Given], stated: dict[str, bool]) -> dict[str, Given]:
    """The engine's default limits for one instance: each preset default × :func:`counting_units` of the unit the
    engine counts it in (a DP-attention rank: D = TP / t_a of them; 1 without data-parallel attention); a value the
    contract states (``stated[name]``) is the replica's total and stays as stated."""
    preset = engine_presets()[engine]
    ranks = layout.tensor_parallel / layout.attention_split if layout.attention_tensor_parallel is not None else 1.0
    out = {}
    for name, given in limits.items():
        figure = preset[name]
        if stated[name] or given.provenance != "catalog" or figure.per is None:
            out[name] = given
            continue
        n = counting_units(figure.per, ranks, layout.tensor_parallel * layout.pipeline_parallel)
        scale = (lambda x, n=n: None if x is None else x * n)   # n bound now, not at the loop's end
        unit = {"replica": "per replica", "dp_rank": "per data-parallel attention rank", "gpu": "per accelerator"}
        out[name] = Given(given.value * n, "catalog", f"{given.source}; counted {unit[figure.per]} "
                          f"({figure.per_source}){'' if figure.per == 'replica' else ': × the instance’s units'}",
                          given.field, scale(given.low), scale(given.high))
    return out


def _load(traffic, stated: StatedInputs) -> dict[str, Given]:
    """The load: an open one's arrival rate, or a closed loop's users in flight and their think time."""
    if not traffic.closed:
        return {"requests_per_s": stated.given("requests_per_s", traffic.per_second, traffic.rate_field)}
    think = traffic.think_time if traffic.think_time is not None else default(0.0, "no think time: a user sends "
                                                                                   "its next request as one returns")
    return {"concurrency": stated.given("concurrency", traffic.concurrency, "workload.traffic.concurrency"),
            "think_time_seconds": stated.given("think_time_seconds", think, "workload.traffic.think_time")}


def _layout(inputs: Inputs, strategy, degrees: tuple, tiers: Tiers) -> Layout:
    """One instance's layout: ``degrees`` (TP, PP, EP) with ``strategy``'s attention and expert placement."""
    tp, pp, ep = degrees
    stages = strategy.pipeline_stage_layers
    if stages and len(stages) != pp and strategy is not inputs.contract.strategy:
        stages = None   # a prefill instance of other stages than the replica's takes the default split
    replica = tp * pp
    attention_tp = (strategy.attention_tensor_parallel or 1) if strategy.data_parallel_attention else None
    return layout_of("serving", inputs.model, accelerators=replica,
                     accelerators_per_node=tiers.accelerators_per_node.value if tiers.accelerators_per_node else replica,
                     tensor_parallel=tp, pipeline_parallel=pp, expert_parallel=ep,
                     attention_tensor_parallel=attention_tp, redundant_experts=strategy.redundant_experts,
                     stage_layers=tuple(stages) if stages else None)


PREFILL_FIELD = "strategy.disaggregation.prefill"


def derive(inputs: Inputs, spec: dict[str, Any], fixed: dict[str, Given], tiers: Tiers, rows: int | None) -> Varied:
    """One replica's layout (checked when scalar, masked when arrays) and the inputs that follow from it; a
    disaggregated replica's prefill instance of its own layout adds its own, named prefill_instance_*
    (:mod:`botec.serving.instances`)."""
    strategy = inputs.contract.strategy
    layout = _layout(inputs, strategy, (spec["strategy.tensor_parallel"], spec["strategy.pipeline_parallel"],
                                        spec["strategy.expert_parallel"]), tiers)
    valid = checked(layout, rows)
    given = dict(fixed) | _instance_given(inputs, strategy, layout, "strategy")
    limits = ("max_batch_size", "max_batched_tokens")
    given |= _counted_per_unit(strategy.engine, layout, {name: fixed[name] for name in limits},
                               {name: getattr(strategy, name) is not None for name in limits})
    prefill = strategy.prefill_layout()
    prefill_layout, prefill_missing = None, {}
    if prefill is not None:
        prefill_layout = _layout(inputs, prefill, (prefill.tensor_parallel, prefill.pipeline_parallel,
                                                   prefill.expert_parallel), tiers)
        try:
            prefill_layout.check()
        except ContractError as error:   # the same rules, about the prefill instance's fields
            field = (error.field or "strategy").replace("strategy.", f"{PREFILL_FIELD}.", 1)
            raise ContractError(f"prefill instance: {error.detail}", field=field) from None
        own = _instance_given(inputs, prefill, prefill_layout, PREFILL_FIELD)
        links, _, prefill_missing, _ = place(prefill_layout, tiers, None)
        prefill_missing = {mirror_name(name): problem for name, problem in prefill_missing.items()}
        budget = prefill.max_batched_tokens
        own["max_batched_tokens"] = (Given(budget.value, budget.provenance, budget.source,
                                           f"{PREFILL_FIELD}.max_batched_tokens") if budget is not None
                                     else _counted_per_unit(strategy.engine, prefill_layout,
                                                            {"max_batched_tokens": fixed["max_batched_tokens"]},
                                                            {"max_batched_tokens": strategy.max_batched_tokens
                                                             is not None})["max_batched_tokens"])
        given |= {mirror_name(name): value for name, value in (own | links).items()
                  if name in LAYOUT_INPUTS and mirror_name(name) in inputs.graph}   # those its formulas read
    else:   # what the replica model reads of its prefill instance's layout directly: the replica's (unused)
        given |= {mirror_name(name): given[name] for name in ("pipeline_parallel", "max_batched_tokens",
                                                              "two_batch_overlap")}
    given[FLAG] = Given(0.0 if prefill is None else 1.0, "assumed", "the prefill instances take the replica's layout"
                        if prefill is None else "the prefill instances' own layout", PREFILL_FIELD)
    given |= _disaggregation(strategy, layout, prefill_layout, tiers, inputs.stated_fields)
    links, placement, missing, unplaced = place(layout, tiers, rows)
    from botec.serving.allreduce import allreduce_fit_said

    given["allreduce_table_index"] = allreduce_fit_said(given | links)
    return Varied(given | links, layout, valid, unplaced, missing | prefill_missing, placement)


def _instance_given(inputs: Inputs, strategy, layout: Layout, field: str) -> dict[str, Given]:
    """The inputs that follow from one instance's layout (``field``: where its strategy is stated)."""
    arch = inputs.architecture
    if strategy.redundant_experts and not arch.moe:
        raise ContractError(f"{arch.name} has no routed experts to copy: redundant_experts needs a mixture-of-experts "
                            "model", field=f"{field}.redundant_experts")
    if strategy.two_batch_overlap and not arch.moe:
        raise ContractError(f"{arch.name} has no routed experts: two-batch overlap hides the MoE all-to-all behind "
                            "compute, and a dense model has none", field=f"{field}.two_batch_overlap")
    tp = layout.tensor_parallel
    speculative = inputs.contract.assumptions.speculative_decoding
    draft = draft_architecture(speculative, inputs.base_dir)
    spread = strategy.data_parallel_attention
    parts = breakdown(arch).parts
    attention_per_layer = parts["attention_per_layer"]
    attention_tp = layout.attention_split if spread else tp
    groups = tp / attention_tp   # D: attention groups (DP ranks of attention), each caching its own requests
    if spread:
        # D groups each cache their own requests; inside a group of t_a ranks the heads split as under plain TP
        # (MLA's latent is not split: each of the group's ranks holds it)
        within = 1.0 if arch.mla else minimum(attention_tp, float(arch.kv_heads))
        split = groups * within
        split_source = ("data-parallel attention: each TP rank caches only its own requests" if attention_tp == 1 else
                        "data-parallel attention: TP / t_a groups cache their own requests, each split "
                        f"{'not at all (MLA latent)' if arch.mla else 'min(t_a, KV heads) ways'} within")
        # the shared experts run data-parallel beside the attention (DeepSeek's inference system: "MLA and shared
        # expert DP"; each GPU holds the shared expert whole)
        shared = breakdown(arch).shared_experts / arch.layers
        replicated = (attention_per_layer + shared) * layout.pipeline_stage_layers * (1 / attention_tp - 1 / tp)
        replicated_source = ("data-parallel attention: the stage's attention and shared-expert weights × (1/t_a − "
                             "1/TP) beyond the TP share (t_a = attention_tensor_parallel)")
    else:
        split = 1.0 if arch.mla else minimum(tp, float(arch.kv_heads))
        split_source = ("MLA's latent is shared by all heads: not split by TP" if arch.mla
                        else "min(TP, KV heads): heads are replicated beyond that")
        replicated, replicated_source = 0.0, "attention split over the TP ranks"
    return {
        "tensor_parallel": Given(layout.tensor_parallel, "assumed", None, f"{field}.tensor_parallel"),
        "pipeline_parallel": Given(layout.pipeline_parallel, "assumed", None, f"{field}.pipeline_parallel"),
        "expert_parallel": Given(layout.expert_parallel, "assumed", None, f"{field}.expert_parallel"),
        "redundant_experts": Given(float(strategy.redundant_experts), "assumed", "EPLB's redundant copies" if
                                   strategy.redundant_experts else "none", f"{field}.redundant_experts"),
        "expert_tensor_parallel": Given(layout.expert_tensor_parallel, "derived",
                                        "experts split over the EP ranks, each TP / EP ways", f"{field}.expert_parallel"),
        "pipeline_stage_layers": Given(layout.pipeline_stage_layers, "derived", "the fullest stage",
                                       f"{field}.pipeline_parallel"),
        "first_stage_layers": Given(layout.first_stage_layers, "derived", "the first stage (with the embeddings)",
                                    f"{field}.pipeline_parallel"),
        "last_stage_layers": Given(layout.last_stage_layers, "derived", "the last stage (with the LM head)",
                                   f"{field}.pipeline_parallel"),
        "kv_tensor_split": Given(split, "assumed", split_source, f"{field}.tensor_parallel"),
        "replicated_attention_parameters": Given(replicated, "derived", replicated_source,
                                                 f"{field}.data_parallel_attention"),
        "attention_tensor_parallel": Given(attention_tp, "assumed", "data-parallel attention: ranks per attention "
                                           "group (default 1)" if spread else "attention split over the TP ranks",
                                           f"{field}.attention_tensor_parallel"),
        "data_parallel_attention": Given(1.0 if spread else 0.0, "assumed", None, f"{field}.data_parallel_attention"),
        "attention_parameters_per_layer": Given(float(attention_per_layer), "derived", "the model's QKV and output "
                                                "projections per layer (MLA: its down- and up-projections)",
                                                "workload.model"),
        "shared_prefix_copies": Given(groups if spread else 1.0, "assumed", "data-parallel attention: every rank caches "
                                      "a shared prefix for its own requests" if spread else "one copy, split like any "
                                      "token's KV", f"{field}.data_parallel_attention"),
        "two_batch_overlap": Given(1.0 if strategy.two_batch_overlap else 0.0, "assumed", None,
                                   f"{field}.two_batch_overlap"),
        "expert_parallel_nodes": Given(layout.expert_parallel / ranks_per_node(layout, "ep"), "derived",
                                       "nodes the EP group spans: EP / its ranks per node", f"{field}.expert_parallel"),
        # DeepEP's kernels: the normal (high-throughput) ones on a disaggregated prefill instance, the low-latency
        # ones (CUDA-graph capturable) where a step decodes (LMSYS blog 2025-05-05, "Expert Parallelism with DeepEP")
        "deepep_normal_kernels": Given(1.0 if field == PREFILL_FIELD else 0.0, "assumed",
                                       "a prefill instance: DeepEP's normal kernels" if field == PREFILL_FIELD else
                                       "a step that decodes: DeepEP's low-latency kernels", field),
        "draft_kv_tensor_split": Given(draft_kv_split(speculative, draft, tp, split), "assumed", "a separate draft: "
                                       "min(TP, its KV heads); a head: as the target's layers",
                                       "assumptions.speculative_decoding"),
    }


def _disaggregation(strategy, layout: Layout, prefill: Layout | None, tiers: Tiers, stated_fields) -> dict[str, Given]:
    """Prefill instances per decode instance (0: in-flight batching of both) and the bandwidth each accelerator
    sends the KV cache at: the contract's, else NVLink when the 1 + n instances share a node, else the NICs."""
    field = "strategy.disaggregation"
    plan = strategy.disaggregation
    if plan is None:
        return {"prefill_instances": Given(0.0, "assumed", "prefill and decode share every step (in-flight batching)",
                                           field),
                "kv_transfer_bytes_per_s": Given(1.0, "assumed", "no KV transfer: one instance", field)}
    instances = Given(float(plan.prefill_instances), "assumed", None, f"{field}.prefill_instances")
    if plan.kv_transfer_bandwidth is not None:
        own = plan.kv_transfer_bandwidth
        bandwidth = Given(own.value, own.provenance, own.source, f"{field}.kv_transfer_bandwidth", own.low, own.high)
        return {"prefill_instances": instances, "kv_transfer_bytes_per_s": bandwidth}
    prefill = prefill or layout
    span = (layout.tensor_parallel * layout.pipeline_parallel
            + plan.prefill_instances * prefill.tensor_parallel * prefill.pipeline_parallel)
    per_node = tiers.accelerators_per_node.value if tiers.accelerators_per_node is not None else None
    inside = per_node is None or span <= per_node
    tier = tiers.intra if inside else tiers.inter
    if tier is None:
        where_ = "inside a node" if inside else "across nodes"
        raise ContractError(f"the {span} accelerators of 1 decode + {plan.prefill_instances} prefill instances send KV "
                            f"{where_}, and the contract states no such link: state supply.cluster (a node preset) or "
                            f"{field}.kv_transfer_bandwidth", field=f"{field}.kv_transfer_bandwidth")
    bandwidth = Given(tier.bytes_per_s.value, tier.bytes_per_s.provenance,
                      f"{span} accelerators {'inside a node' if inside else 'across nodes'}: {tier.label}",
                      f"{field}.kv_transfer_bandwidth")
    return {"prefill_instances": instances, "kv_transfer_bytes_per_s": bandwidth}
