"""``trtllm-serve`` options and its LLM-API options YAML for a serving plan, and back (TensorRT-LLM 1.2).

The command carries what trtllm-serve's own options can (--tp_size, --pp_size, --ep_size, --max_batch_size,
--max_num_tokens, --max_seq_len, --kv_cache_free_gpu_memory_fraction); the file passed as
``--extra_llm_api_options`` carries the rest, as LLM-API fields (tensorrt_llm/llmapi/llm_args.py):
``enable_chunked_prefill``, ``enable_attention_dp``, ``kv_cache_config`` (free_gpu_memory_fraction, dtype,
enable_block_reuse), ``scheduler_config.capacity_scheduler_policy`` (GUARANTEED_NO_EVICT when the plan reserves a
request's whole KV at admission, kv_reservation full; MAX_UTILIZATION when it grows, incremental) and
``speculative_config``. The export is one shell script: the YAML written by a here-document, then the command.

``free_gpu_memory_fraction`` is a share of the memory left after weights and buffers (of_free); a plan made
under an of_total engine is converted so that the KV budget stays the estimate's. Data-parallel attention is
``enable_attention_dp`` over all TP ranks: an attention group of several ranks is not expressible. Option names:
tensorrt_llm/commands/serve.py (:data:`~botec.launch.serving_options.TRTLLM_SERVE_OPTIONS`).
"""

from __future__ import annotations

import math

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.commandline import (commands_of, here_document, parse_options, ratio_option, shell_command,
                                      shell_commands, shell_script, whole_number, whole_option, yaml_document)
from botec.launch.plan import fields_of
from botec.launch.serving_plan import check_serving, header_lines, model_for_id, serving_plan

__all__ = ["FORMAT", "export", "read", "llm_api_options"]

TOOL, VERSION = "TensorRT-LLM", "1.2"
ENGINE = "tensorrt-llm"   # the strategy.engine preset whose program the file runs
OPTIONS_FILE = "extra-llm-api-options.yaml"

POLICIES = {"full": "GUARANTEED_NO_EVICT", "incremental": "MAX_UTILIZATION"}
"""botec's kv_reservation -> SchedulerConfig.capacity_scheduler_policy (trtllm-serve's default: GUARANTEED_NO_EVICT)."""

KV_CACHE_DTYPES = {"fp8": "fp8"}
"""botec's KV-cache precision -> KvCacheConfig.dtype ("auto": the model's, BF16/FP16)."""

DECODING_TYPES = {"mtp": "MTP", "eagle": "Eagle", "ngram": "NGram", "draft_model": "Draft_Target"}
"""botec's speculative method -> speculative_config.decoding_type (llm_args.py DecodingBaseConfig subclasses)."""

FLAGS = frozenset({"--trust_remote_code", "--enable_chunked_prefill", "--fail_fast_on_attention_window_too_large"})

_ALIASES = {"--tensor_parallel_size": "--tp_size", "--pipeline_parallel_size": "--pp_size",
            "--moe_expert_parallel_size": "--ep_size", "--free_gpu_memory_fraction": "--kv_cache_free_gpu_memory_fraction",
            "--config": "--extra_llm_api_options"}


def llm_api_options(plan, unexpressed: list[str]) -> dict:
    """The ``--extra_llm_api_options`` YAML's fields for the plan."""
    instance = plan.decode
    options: dict = {"enable_chunked_prefill": True}
    if instance.data_parallel_attention:
        options["enable_attention_dp"] = True
        if instance.attention_tensor_parallel > 1:
            unexpressed.append(f"attention_tensor_parallel {instance.attention_tensor_parallel} (enable_attention_dp "
                               "runs each rank's attention alone)")
    kv_cache = {"free_gpu_memory_fraction": plan.memory_fraction_as("of_free"),
                "dtype": KV_CACHE_DTYPES.get(plan.kv_cache_precision, "auto"), "enable_block_reuse": plan.prefix_caching}
    if plan.kv_cache_precision not in ("fp8", "bf16", "fp16"):
        unexpressed.append(f"kv_cache_precision {plan.kv_cache_precision} (KvCacheConfig.dtype)")
    options["kv_cache_config"] = kv_cache
    options["scheduler_config"] = {"capacity_scheduler_policy": POLICIES[plan.kv_reservation]}
    if plan.speculation is not None:
        spec = plan.speculation
        config = {"decoding_type": DECODING_TYPES[spec.method]}
        config["num_nextn_predict_layers" if spec.method == "mtp" else "max_draft_len"] = spec.draft_tokens
        if spec.draft_model_id:
            config["speculative_model"] = spec.draft_model_id
        elif spec.method in ("eagle", "draft_model"):
            unexpressed.append(f"the {spec.method} draft's checkpoint (speculative_config.speculative_model)")
        options["speculative_config"] = config
    return options


def export(result) -> str:
    """A script that writes the LLM-API options YAML (a here-document) and runs ``trtllm-serve`` with it."""
    check_serving(result, "trtllm-serve")
    plan = serving_plan(result)
    instance = plan.decode
    unexpressed: list[str] = []
    if instance.two_batch_overlap:
        unexpressed.append("two_batch_overlap (SGLang's --enable-two-batch-overlap; this export writes none)")
    if instance.redundant_experts:
        unexpressed.append(f"redundant_experts {instance.redundant_experts} (moe_config.load_balancer's own file)")
    if plan.weight_precision != "bf16":
        unexpressed.append(f"weight_precision {plan.weight_precision} (a quantized checkpoint carries it: "
                           "hf_quant_config.json)")
    if plan.prefill is not None:
        unexpressed.append("disaggregation: this is the decode instance; trtllm-serve disaggregated's config "
                           "(context_servers, generation_servers) is not written")
    api_options = llm_api_options(plan, unexpressed)
    options = [("--backend", "pytorch"), ("--tp_size", str(instance.tensor_parallel)),
               ("--pp_size", str(instance.pipeline_parallel)), ("--ep_size", str(instance.expert_parallel)),
               # under enable_attention_dp both limits are per rank (the engines preset's per: dp_rank)
               ("--max_batch_size", str(math.ceil(instance.max_batch_size / instance.attention_groups))),
               ("--max_num_tokens", str(math.ceil(instance.max_batched_tokens / instance.attention_groups))),
               ("--max_seq_len", str(plan.context_tokens)),
               ("--kv_cache_free_gpu_memory_fraction", f"{plan.memory_fraction_as('of_free'):g}"),
               ("--extra_llm_api_options", OPTIONS_FILE)]
    header = header_lines(TOOL, VERSION, "trtllm", result, plan, unexpressed)
    return shell_script(header, [([], here_document(["cat"], OPTIONS_FILE, yaml_document([], api_options))),
                                 ([], shell_command(["trtllm-serve", plan.model_id], options))])


def _options_file(commands: list, path, origin: str) -> dict:
    """The LLM-API options the script writes to ``path`` (``--extra_llm_api_options``) by a here-document
    (``cat > FILE <<'EOF' ... EOF``), else those of its one here-document; none when it writes none."""
    from botec.yamlfile import parse_user_yaml

    written = [body for command in commands for body in command.here_documents
               if any(operator in (">", ">|") and target == path for operator, target in command.redirects)]
    every = [body for command in commands for body in command.here_documents]
    bodies = written or (every if len(every) == 1 else [])
    body = bodies[-1] if bodies else ""
    options = parse_user_yaml(body, origin, field="--extra_llm_api_options") if body.strip() else {}
    if not isinstance(options, dict):
        raise ContractError("the LLM-API options must be a mapping of option: value", field="--extra_llm_api_options",
                            origin=origin)
    return options


def read(text: str, origin: str) -> dict:
    """The contract fields of a trtllm-serve script (its command and its options here-document)."""
    commands = shell_commands(text, origin)
    positional, options = parse_options(commands_of(commands, ("trtllm-serve",), origin)[-1][1], FLAGS, origin,
                                        _ALIASES)
    api = _options_file(commands, options.get("--extra_llm_api_options"), origin)
    fields: dict = {"strategy.engine": ENGINE}
    for option, name in (("--tp_size", "tensor_parallel"), ("--pp_size", "pipeline_parallel"),
                         ("--ep_size", "expert_parallel"), ("--max_batch_size", "max_batch_size"),
                         ("--max_num_tokens", "max_batched_tokens")):
        value = whole_option(options, option, origin)
        if value is not None:
            fields[f"strategy.{name}"] = value
    kv_cache = api.get("kv_cache_config") or {}
    fraction = ratio_option(options, "--kv_cache_free_gpu_memory_fraction", origin)
    if isinstance(kv_cache, dict) and "free_gpu_memory_fraction" in kv_cache:
        fraction = ratio_option(kv_cache, "free_gpu_memory_fraction", origin)   # the YAML overrides the command
    if fraction is not None:
        fields["strategy.memory_fraction"] = fraction
    if isinstance(kv_cache, dict) and str(kv_cache.get("dtype", "auto")).startswith("fp8"):
        fields["strategy.kv_cache_precision"] = "fp8"
    if api.get("enable_attention_dp"):
        fields["strategy.data_parallel_attention"] = True
        ranks = fields.get("strategy.tensor_parallel", 1)   # attention DP: a rank per TP rank, each its own limits
        for name in ("strategy.max_batch_size", "strategy.max_batched_tokens"):
            if name in fields:
                fields[name] *= ranks
    scheduler = api.get("scheduler_config") or {}
    policy = scheduler.get("capacity_scheduler_policy", "GUARANTEED_NO_EVICT") if isinstance(scheduler, dict) else None
    reservations = {value: key for key, value in POLICIES.items()}
    if isinstance(policy, str) and policy in reservations:
        fields["strategy.kv_reservation"] = reservations[policy]
    spec = api.get("speculative_config")
    if isinstance(spec, dict):
        methods = {value: key for key, value in DECODING_TYPES.items()} | {"Eagle3": "eagle", "DraftTarget": "draft_model"}
        method = methods.get(str(spec.get("decoding_type")))
        if method is None:
            raise ContractError(f"decoding_type {spec.get('decoding_type')!r} is not one botec models "
                                f"({', '.join(methods)})", field="speculative_config.decoding_type", origin=origin)
        fields["assumptions.speculative_decoding.method"] = method
        key = "num_nextn_predict_layers" if method == "mtp" else "max_draft_len"
        if key in spec:
            value = spec[key]
            fields["assumptions.speculative_decoding.draft_tokens"] = whole_number(
                value if isinstance(value, int) and not isinstance(value, bool) else repr(value),
                f"speculative_config.{key}", origin)
        draft = model_for_id(str(spec.get("speculative_model", "")))
        if draft and method == "draft_model":
            fields["assumptions.speculative_decoding.draft_model"] = draft
    model = model_for_id(positional[0]) if positional else None
    if model:
        fields["workload.model"] = model
    return fields_of(fields)


FORMAT = LaunchFormat(name="trtllm", kind="serving", tool=TOOL, version=VERSION, suffix=".sh",
                      description="trtllm-serve command and its --extra_llm_api_options YAML (one script)",
                      export=export, read=read, engines=(ENGINE,), markers=("trtllm-serve",))
