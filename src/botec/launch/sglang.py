"""``python -m sglang.launch_server`` arguments for a serving plan, and back (SGLang 0.5.23).

The layout: ``--tp-size`` is the replica's TP degree; data-parallel attention is ``--attn-dp-size G``, the number
of attention groups inside the TP group (G = tensor_parallel / attention_tensor_parallel; 0.5.23 deprecates
``--dp-size G --enable-dp-attention`` for it, and the reader takes both); ``--ep-size`` the expert-parallel degree
and ``--ep-num-redundant-experts`` EPLB's redundant experts. ``--max-running-requests`` and
``--chunked-prefill-size`` are the whole instance's (SGLang divides them over the attention groups:
sglang/srt/arg_groups/parallel_hook.py). ``--mem-fraction-static`` is a share of the whole device (of_total).
A disaggregated plan is two commands, ``--disaggregation-mode prefill`` and ``decode``.

Option names: sglang/srt/server_args.py and sglang/srt/arg_groups/fields/*.py of 0.5.23
(:data:`~botec.launch.serving_options.SGLANG_OPTIONS`).
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.commandline import (commands_of, parse_options, ratio_option, shell_command, shell_commands,
                                      shell_script, whole_option)
from botec.launch.plan import fields_of
from botec.launch.serving_plan import check_serving, header_lines, model_for_id, serving_plan

__all__ = ["FORMAT", "export", "read"]

TOOL, VERSION = "SGLang", "0.5.23"
ENGINE = "sglang"   # the strategy.engine preset whose program the file runs
PROGRAM = ("python", "-m", "sglang.launch_server")

KV_CACHE_DTYPES = {"bf16": "bf16", "fp8": "fp8_e4m3"}
"""botec's KV-cache precision -> --kv-cache-dtype (fields/model.py choices); fp16 is "auto" on an FP16 model."""

WEIGHT_OPTIONS = {"bf16": ("--dtype", "bfloat16"), "fp16": ("--dtype", "float16"),
                  "fp8": ("--quantization", "fp8"), "fp4": ("--quantization", "modelopt_fp4")}

SPECULATIVE_ALGORITHMS = {"eagle": "EAGLE", "mtp": "NEXTN", "ngram": "NGRAM", "draft_model": "STANDALONE"}
"""botec's speculative method -> --speculative-algorithm (fields/spec.py builtins; NEXTN is DeepSeek's MTP)."""

FLAGS = frozenset({"--enable-dp-attention", "--trust-remote-code", "--enable-eplb", "--disable-radix-cache",
                   "--enable-mixed-chunk", "--enable-two-batch-overlap"})

_ALIASES = {"--tensor-parallel-size": "--tp-size", "--pipeline-parallel-size": "--pp-size",
            "--data-parallel-size": "--dp-size", "--expert-parallel-size": "--ep-size", "--ep": "--ep-size",
            "--attention-data-parallel-size": "--attn-dp-size", "--model": "--model-path"}


def _instance_options(plan, instance, role, unexpressed: list[str]) -> list[tuple[str, str | None]]:
    options = [("--model-path", plan.model_id), ("--tp-size", str(instance.tensor_parallel))]
    if instance.pipeline_parallel > 1:
        options.append(("--pp-size", str(instance.pipeline_parallel)))
    if instance.attention_groups > 1:
        options.append(("--attn-dp-size", str(instance.attention_groups)))
    if instance.expert_parallel > 1:
        options.append(("--ep-size", str(instance.expert_parallel)))
    if instance.redundant_experts:
        options.append(("--ep-num-redundant-experts", str(instance.redundant_experts)))
    if instance.two_batch_overlap:
        options.append(("--enable-two-batch-overlap", None))
    options += [("--max-running-requests", str(instance.max_batch_size)),
                ("--chunked-prefill-size", str(instance.max_batched_tokens)),
                ("--mem-fraction-static", f"{plan.memory_fraction_as('of_total'):g}"),
                ("--context-length", str(plan.context_tokens))]
    if plan.kv_cache_precision in KV_CACHE_DTYPES:
        options.append(("--kv-cache-dtype", KV_CACHE_DTYPES[plan.kv_cache_precision]))
    elif role != "prefill":
        unexpressed.append(f"kv_cache_precision {plan.kv_cache_precision} (no --kv-cache-dtype of that format)")
    if plan.weight_precision in WEIGHT_OPTIONS:
        options.append(WEIGHT_OPTIONS[plan.weight_precision])
    elif role != "prefill":
        unexpressed.append(f"weight_precision {plan.weight_precision} (the checkpoint's quantization config says it)")
    if plan.speculation is not None and role != "prefill":
        spec = plan.speculation
        options += [("--speculative-algorithm", SPECULATIVE_ALGORITHMS[spec.method]),
                    ("--speculative-num-steps", str(spec.draft_tokens)), ("--speculative-eagle-topk", "1"),
                    ("--speculative-num-draft-tokens", str(spec.draft_tokens + 1))]
        if spec.draft_model_id:
            options.append(("--speculative-draft-model-path", spec.draft_model_id))
        elif spec.method in ("eagle", "draft_model"):
            unexpressed.append(f"the {spec.method} draft's checkpoint (--speculative-draft-model-path)")
    if role is not None:
        options.append(("--disaggregation-mode", role))
    return options


def export(result) -> str:
    """The ``python -m sglang.launch_server`` command(s) of the estimate's plan (a prefill and a decode command
    when disaggregated)."""
    check_serving(result, "SGLang launch_server")
    plan = serving_plan(result)
    unexpressed: list[str] = []
    if plan.kv_reservation == "full":
        unexpressed.append("kv_reservation full (SGLang allocates KV as requests grow)")
    if plan.prefill is None:
        blocks = [([], _instance_options(plan, plan.decode, None, unexpressed))]
    else:
        blocks = [([f"prefill instance: {plan.prefill_instances} per decode instance, {plan.prefill.accelerators} "
                    "accelerators each"], _instance_options(plan, plan.prefill, "prefill", unexpressed)),
                  ([f"decode instance: {plan.decode.accelerators} accelerators"],
                   _instance_options(plan, plan.decode, "decode", unexpressed))]
        unexpressed.append("the router in front (python -m sglang_router.launch_router --pd-disaggregation "
                           "--prefill URL ... --decode URL)")
    header = header_lines(TOOL, VERSION, "sglang", result, plan, unexpressed)
    return shell_script(header, [(comments, shell_command(list(PROGRAM), options)) for comments, options in blocks])


def _layout(options: dict, origin: str) -> dict:
    """One instance's strategy fields (undotted) from its launch_server options."""
    tensor_parallel = whole_option(options, "--tp-size", origin) or 1
    groups = whole_option(options, "--attn-dp-size", origin) or 1
    if groups == 1 and "--enable-dp-attention" in options:       # the form 0.5.23 deprecates
        groups = whole_option(options, "--dp-size", origin) or 1
    fields = {"tensor_parallel": tensor_parallel}
    if groups > 1:
        if tensor_parallel % groups:
            raise ContractError(f"{groups} attention groups do not divide --tp-size {tensor_parallel}",
                                field="--attn-dp-size", origin=origin)
        fields["data_parallel_attention"] = True
        if tensor_parallel // groups > 1:
            fields["attention_tensor_parallel"] = tensor_parallel // groups
    for option, name, minimum in (("--pp-size", "pipeline_parallel", 1), ("--ep-size", "expert_parallel", 1),
                                  ("--ep-num-redundant-experts", "redundant_experts", 0),
                                  ("--max-running-requests", "max_batch_size", 1)):
        value = whole_option(options, option, origin, minimum)
        if value is not None:
            fields[name] = value
    if "--enable-two-batch-overlap" in options:
        fields["two_batch_overlap"] = True
    if options.get("--chunked-prefill-size", "-1").strip() != "-1":     # -1: chunked prefill off
        fields["max_batched_tokens"] = whole_option(options, "--chunked-prefill-size", origin)
    return fields


def _formats(options: dict, origin: str) -> dict:
    """Memory fraction, formats and speculation (dotted contract fields) from launch_server options."""
    fields: dict = {}
    fraction = ratio_option(options, "--mem-fraction-static", origin)
    if fraction is not None:
        fields["strategy.memory_fraction"] = fraction
    kv = options.get("--kv-cache-dtype", "auto")
    kv_precision = "bf16" if kv in ("bf16", "bfloat16") else "fp8" if kv.startswith("fp8") else None
    if kv_precision:
        fields["strategy.kv_cache_precision"] = kv_precision
    quantization = options.get("--quantization", "")
    weights = ("fp8" if "fp8" in quantization else "fp4" if "fp4" in quantization else
               "int4" if quantization.startswith(("awq", "gptq")) else None)
    if weights is None and not quantization:
        weights = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(options.get("--dtype", ""))
    if weights:
        fields["strategy.weight_precision"] = weights
    if "--speculative-algorithm" in options:
        methods = {value: key for key, value in SPECULATIVE_ALGORITHMS.items()} | {"EAGLE3": "eagle"}
        algorithm = options["--speculative-algorithm"].upper()
        if algorithm not in methods:
            raise ContractError(f"{algorithm!r} is not one botec models ({', '.join(methods)})",
                                field="--speculative-algorithm", origin=origin)
        fields["assumptions.speculative_decoding.method"] = methods[algorithm]
        steps = whole_option(options, "--speculative-num-steps", origin)
        if steps is not None:
            fields["assumptions.speculative_decoding.draft_tokens"] = steps
        draft = model_for_id(options.get("--speculative-draft-model-path", ""))
        if draft and methods[algorithm] == "draft_model":
            fields["assumptions.speculative_decoding.draft_model"] = draft
    return fields


def read(text: str, origin: str) -> dict:
    """The contract fields of a launch_server script (one command, or a prefill and a decode command)."""
    commands = [parse_options(words, FLAGS, origin, _ALIASES)[1]
                for _, words in commands_of(shell_commands(text, origin), PROGRAM, origin)]
    prefill = [c for c in commands if c.get("--disaggregation-mode") == "prefill"]
    decode = [c for c in commands if c.get("--disaggregation-mode") != "prefill"]
    if not decode:
        raise ContractError("a prefill instance without a decode instance: add the --disaggregation-mode decode "
                            "command", field="--disaggregation-mode", origin=origin)
    options = decode[-1]
    fields = {"strategy.engine": ENGINE}
    fields.update({f"strategy.{name}": value for name, value in _layout(options, origin).items()})
    fields.update(_formats(options, origin))
    model = model_for_id(options.get("--model-path", ""))
    if model:
        fields["workload.model"] = model
    if prefill:
        layout = _layout(prefill[-1], origin)
        layout.pop("max_batch_size", None)
        fields.update({f"strategy.disaggregation.prefill.{name}": value for name, value in layout.items()})
    return fields_of(fields)


FORMAT = LaunchFormat(name="sglang", kind="serving", tool=TOOL, version=VERSION, suffix=".sh",
                      description="python -m sglang.launch_server command line (prefill + decode when disaggregated)",
                      export=export, read=read, engines=(ENGINE,), markers=("sglang.launch_server",))
