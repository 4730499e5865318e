"""``vllm serve`` arguments for a serving plan, and back (vLLM 0.33.0).

The layout: ``--tensor-parallel-size`` and ``--pipeline-parallel-size`` as the plan's; data-parallel attention is
vLLM's data parallelism with expert parallelism (``--data-parallel-size G --enable-expert-parallel``, TP =
attention_tensor_parallel inside each of the G groups: vLLM docs, "Data Parallel Deployment" and "Expert Parallel
Deployment", v0.33.0), and then ``--max-num-seqs`` / ``--max-num-batched-tokens`` are per data-parallel engine:
the replica's limits divided by G (rounded up). ``--enable-expert-parallel`` puts the experts over all TP × DP
ranks (EP = TP × DP); an expert-parallel degree between 1 and that is not expressible.

The memory: ``--gpu-memory-utilization`` is a share of the whole device (vLLM's rule, of_total); a plan made under
another engine's rule is converted so that the KV budget stays the estimate's
(:meth:`~botec.launch.serving_plan.ServingPlan.memory_fraction_as`). Option names: vllm/engine/arg_utils.py and
vllm/entrypoints/common/cli_args.py of 0.33.0 (:data:`~botec.launch.serving_options.VLLM_OPTIONS`).
"""

from __future__ import annotations

import json
import math

from botec.errors import ContractError
from botec.jsonfile import load_json_text
from botec.launch import LaunchFormat
from botec.launch.commandline import (commands_of, json_value, parse_options, product, ratio_option, shell_command,
                                      shell_commands, shell_script, whole_number, whole_option)
from botec.launch.plan import fields_of
from botec.launch.serving_plan import check_serving, header_lines, model_for_id, serving_plan

__all__ = ["FORMAT", "export", "read", "read_commands", "engine_options"]

TOOL, VERSION = "vLLM", "0.33.0"
ENGINE = "vllm"   # the strategy.engine preset whose program the file runs

KV_CACHE_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}
"""botec's KV-cache precision -> --kv-cache-dtype (vllm/config/cache.py CacheDType, 0.33.0); int8 has no plain
equivalent there (int8_per_token_head quantizes per head and token)."""

WEIGHT_OPTIONS = {"bf16": ("--dtype", "bfloat16"), "fp16": ("--dtype", "float16"),
                  "fp8": ("--quantization", "fp8"), "fp4": ("--quantization", "modelopt_fp4")}
"""botec's weight precision -> the option that serves it (ModelDType, QuantizationMethods of 0.33.0); int8/int4
weights are read from the checkpoint's own quantization config (GPTQ, AWQ, compressed-tensors)."""

SPECULATIVE_METHODS = {"eagle": "eagle", "mtp": "mtp", "ngram": "ngram", "draft_model": "draft_model"}
"""botec's speculative method -> --speculative-config's "method" (vllm/config/speculative.py SpeculativeMethod)."""

FLAGS = frozenset({"--enable-expert-parallel", "--no-enable-expert-parallel", "--enable-chunked-prefill",
                   "--no-enable-chunked-prefill", "--enable-prefix-caching", "--no-enable-prefix-caching",
                   "--trust-remote-code", "--headless", "--enforce-eager", "--enable-eplb"})
"""Options that take no value (argparse store_true / BooleanOptionalAction)."""

_ALIASES = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size",
            "-q": "--quantization", "-sc": "--speculative-config", "--device-memory-utilization":
            "--gpu-memory-utilization"}


def engine_options(plan, instance, unexpressed: list[str]) -> list[tuple[str, str | None]]:
    """The engine options of one instance (its layout, limits, formats, speculation), in vllm serve's names;
    what they cannot say is appended to ``unexpressed``."""
    groups = instance.attention_groups
    tensor_parallel = instance.attention_tensor_parallel if instance.data_parallel_attention else instance.tensor_parallel
    options = [("--tensor-parallel-size", str(tensor_parallel))]
    if instance.pipeline_parallel > 1:
        options.append(("--pipeline-parallel-size", str(instance.pipeline_parallel)))
    if groups > 1:
        options.append(("--data-parallel-size", str(groups)))
    if instance.expert_parallel > 1:
        if instance.expert_parallel == instance.tensor_parallel:
            options.append(("--enable-expert-parallel", None))
        else:
            unexpressed.append(f"expert_parallel {instance.expert_parallel} (vLLM spreads experts over all "
                               f"{instance.tensor_parallel} TP × DP ranks or none)")
    if instance.two_batch_overlap:
        unexpressed.append("two_batch_overlap (SGLang's --enable-two-batch-overlap; this export writes none)")
    if instance.redundant_experts:
        options += [("--enable-eplb", None), ("--eplb-config", json_value(
            {"num_redundant_experts": instance.redundant_experts}))]
    for option, total in (("--max-num-seqs", instance.max_batch_size),
                          ("--max-num-batched-tokens", instance.max_batched_tokens)):
        options.append((option, str(math.ceil(total / groups))))
    options += [("--gpu-memory-utilization", f"{plan.memory_fraction_as('of_total'):g}"),
                ("--max-model-len", str(plan.context_tokens))]
    if plan.kv_cache_precision in KV_CACHE_DTYPES:
        options.append(("--kv-cache-dtype", KV_CACHE_DTYPES[plan.kv_cache_precision]))
    else:
        unexpressed.append(f"kv_cache_precision {plan.kv_cache_precision} (no --kv-cache-dtype of that format)")
    if plan.weight_precision in WEIGHT_OPTIONS:
        options.append(WEIGHT_OPTIONS[plan.weight_precision])
    else:
        unexpressed.append(f"weight_precision {plan.weight_precision} (the checkpoint's quantization config says it)")
    options.append(("--enable-chunked-prefill", None))
    if plan.prefix_caching:
        options.append(("--enable-prefix-caching", None))
    if plan.speculation is not None:
        spec = plan.speculation
        config = {"method": SPECULATIVE_METHODS[spec.method], "num_speculative_tokens": spec.draft_tokens}
        if spec.draft_model_id:
            config["model"] = spec.draft_model_id
        elif spec.method in ("eagle", "draft_model"):
            unexpressed.append(f"the {spec.method} draft's checkpoint (add \"model\" to --speculative-config)")
        options.append(("--speculative-config", json_value(config)))
    if plan.kv_reservation == "full":
        unexpressed.append("kv_reservation full (vLLM allocates KV blocks as requests grow)")
    return options


def export(result) -> str:
    """The ``vllm serve`` command(s) of the estimate's plan: one per instance (prefill and decode when
    disaggregated, joined by NIXL: --kv-transfer-config with kv_producer / kv_consumer)."""
    check_serving(result, "vllm serve")
    plan = serving_plan(result)
    unexpressed: list[str] = []
    instances = [("decode", plan.decode)] if plan.prefill is None else [("prefill", plan.prefill),
                                                                         ("decode", plan.decode)]
    blocks = []
    for role, instance in instances:
        options = engine_options(plan, instance, unexpressed)
        comments = []
        if plan.prefill is not None:
            kv_role = "kv_producer" if role == "prefill" else "kv_consumer"
            options.append(("--kv-transfer-config", json_value({"kv_connector": "NixlConnector", "kv_role": kv_role})))
            count = plan.prefill_instances if role == "prefill" else 1
            comments = [f"{role} instance: {count} per decode instance, {instance.accelerators} accelerators each"]
        blocks.append((comments, options))
    if plan.prefill is not None:
        unexpressed.append("the proxy that routes each request to a prefill then a decode instance (vLLM "
                           "examples/online_serving/disaggregated_serving)")
    header = header_lines(TOOL, VERSION, "vllm", result, plan, unexpressed)
    return shell_script(header, [(comments, shell_command(["vllm", "serve", plan.model_id], options))
                                 for comments, options in blocks])


def _layout(options: dict, origin: str) -> dict:
    """One instance's contract fields from its vllm serve options (the strategy's names, undotted)."""
    tensor_parallel = whole_option(options, "--tensor-parallel-size", origin) or 1
    groups = whole_option(options, "--data-parallel-size", origin) or 1
    expert_parallel = "--enable-expert-parallel" in options
    fields: dict = {}
    if groups > 1 and expert_parallel:
        fields.update(tensor_parallel=product([("--tensor-parallel-size", tensor_parallel),
                                               ("--data-parallel-size", groups)], origin), data_parallel_attention=True)
        if tensor_parallel > 1:
            fields["attention_tensor_parallel"] = tensor_parallel
    else:
        groups = 1
        fields["tensor_parallel"] = tensor_parallel
    fields["expert_parallel"] = fields["tensor_parallel"] if expert_parallel else 1
    if "--eplb-config" in options:
        config = _json_option(options, "--eplb-config", origin)
        if not isinstance(config, dict):
            raise ContractError("expected a JSON object", field="--eplb-config", origin=origin)
        redundant = config.get("num_redundant_experts", 0)
        fields["redundant_experts"] = whole_number(redundant if _is_int(redundant) else str(redundant),
                                                   "--eplb-config num_redundant_experts", origin, 0)
    pipeline = whole_option(options, "--pipeline-parallel-size", origin)
    if pipeline is not None:
        fields["pipeline_parallel"] = pipeline
    for option, name in (("--max-num-seqs", "max_batch_size"), ("--max-num-batched-tokens", "max_batched_tokens")):
        value = whole_option(options, option, origin)
        if value is not None:
            fields[name] = product([(option, value), ("--data-parallel-size", groups)], origin)
    return fields


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_option(options: dict, name: str, origin: str):
    """An option's JSON value (through :mod:`botec.jsonfile`: no depth or digits can crash it); one line naming
    the option otherwise."""
    try:
        return load_json_text(options[name], origin)
    except json.JSONDecodeError as error:
        raise ContractError(f"expected JSON ({error.msg})", field=name, origin=origin) from None
    except ContractError as error:
        raise ContractError(error.detail, field=name, origin=origin) from None


def _formats(options: dict, origin: str) -> dict:
    """The strategy's formats and memory fraction, and speculation, from vllm serve options (dotted fields)."""
    fields: dict = {}
    fraction = ratio_option(options, "--gpu-memory-utilization", origin)
    if fraction is not None:
        fields["strategy.memory_fraction"] = fraction
    kv = options.get("--kv-cache-dtype", "auto")
    kv_precision = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16"}.get(kv)
    if kv_precision is None and kv.startswith("fp8"):
        kv_precision = "fp8"
    if kv_precision:
        fields["strategy.kv_cache_precision"] = kv_precision
    quantization = options.get("--quantization", "")
    weights = ("fp8" if quantization.startswith("fp8") else "fp4" if "fp4" in quantization else
               "int4" if quantization.startswith(("awq", "gptq", "auto_awq", "auto_gptq")) else None)
    if weights is None and not quantization:
        weights = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(options.get("--dtype", ""))
    if weights:
        fields["strategy.weight_precision"] = weights
    if "--speculative-config" in options:
        config = _json_option(options, "--speculative-config", origin)
        methods = {value: key for key, value in SPECULATIVE_METHODS.items()}
        method = config.get("method") if isinstance(config, dict) else None
        if method not in methods and not str(method).endswith("_mtp"):
            raise ContractError(f"method {method!r} is not one botec models ({', '.join(methods)})",
                                field="--speculative-config", origin=origin)
        fields["assumptions.speculative_decoding.method"] = methods.get(method, "mtp")
        draft_tokens = config.get("num_speculative_tokens")
        fields["assumptions.speculative_decoding.draft_tokens"] = whole_number(
            draft_tokens if _is_int(draft_tokens) else repr(draft_tokens),
            "--speculative-config num_speculative_tokens", origin)
        draft = model_for_id(str(config.get("model"))) if config.get("model") else None
        if draft and method == "draft_model":
            fields["assumptions.speculative_decoding.draft_model"] = draft
    return fields


def read(text: str, origin: str) -> dict:
    """The contract fields of a ``vllm serve`` launch script (one command, or a prefill and a decode command
    joined by --kv-transfer-config's kv_producer / kv_consumer)."""
    found = commands_of(shell_commands(text, origin), ("vllm", "serve"), origin)
    return read_commands([words for _, words in found], origin)


def read_commands(command_words: list[list[str]], origin: str) -> dict:
    """The contract fields of ``vllm serve`` commands, each the words after ``vllm serve``."""
    commands = [parse_options(words, FLAGS, origin, _ALIASES) for words in command_words]

    def role(options: dict) -> str:
        transfer = options.get("--kv-transfer-config", "")
        return "prefill" if "kv_producer" in transfer else "decode"

    decode = [c for c in commands if role(c[1]) == "decode"]
    prefill = [c for c in commands if role(c[1]) == "prefill"]
    positional, options = (decode or commands)[-1]
    fields = {"strategy.engine": ENGINE}
    fields.update({f"strategy.{name}": value for name, value in _layout(options, origin).items()})
    fields.update(_formats(options, origin))
    model = positional[0] if positional else options.get("--model")
    if model and model_for_id(model):
        fields["workload.model"] = model_for_id(model)
    if prefill:
        layout = _layout(prefill[-1][1], origin)
        layout.pop("max_batch_size", None)
        fields.update({f"strategy.disaggregation.prefill.{name}": value for name, value in layout.items()})
    return fields_of(fields)


FORMAT = LaunchFormat(name="vllm", kind="serving", tool=TOOL, version=VERSION, suffix=".sh",
                      description="vllm serve command line (one option per line; prefill + decode when disaggregated)",
                      export=export, read=read, engines=(ENGINE,), markers=("vllm serve",))
