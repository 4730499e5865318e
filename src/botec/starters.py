"""`botec init --model ... --accelerator ...`: a commented starter contract for a named model and accelerator.

The starter names the choices that change the answer (how step time, compute and activations are modelled,
recomputation, the attention kernel; for serving the engine, the weight and KV-cache formats and the latency
targets), each with what it does, and picks the first of a few standard layouts that fits in memory, so the
file it writes estimates as written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from botec.errors import ContractError, UserError

__all__ = ["DEFAULT_MODEL", "DEFAULT_ACCELERATOR", "DEFAULT_COUNT", "resolve_model", "starter_text"]

DEFAULT_MODEL, DEFAULT_ACCELERATOR, DEFAULT_COUNT = "llama-3.1-8b", "h100-sxm", 8


def resolve_model(name: str, base: Path) -> tuple[str, str]:
    """(the YAML of ``workload.model``, a label) for a catalog name or a Hugging Face config path."""
    from botec.architecture import model_catalog, read_hf_config
    from botec.catalog import did_you_mean

    models = model_catalog()
    if name in models:
        return name, models[name].name
    lowered = name.lower().rpartition("/")[2]  # meta-llama/Llama-3.1-8B -> llama-3.1-8b
    if lowered in models:
        return lowered, models[lowered].name
    path = Path(name)
    if name.endswith(".json") or path.is_dir():
        try:
            arch = read_hf_config(path)
        except ContractError as error:
            raise UserError(f"--model: {error}") from None
        config = path / "config.json" if path.is_dir() else path
        relative = os.path.relpath(config.resolve(), base.resolve())
        return f"{{config: {relative}}}", arch.name or config.parent.name
    raise UserError(f"--model: unknown model {name!r}{did_you_mean(lowered, models)} (see `botec model --list`, "
                    "or give a Hugging Face config.json path)")


def _accelerator(name: str):
    from botec.catalog import accelerators, did_you_mean

    catalog = accelerators()
    key = name.lower()
    if key not in catalog:
        raise UserError(f"--accelerator: unknown accelerator {name!r}{did_you_mean(key, catalog)} "
                        "(see `botec catalog`)")
    return catalog[key]


def _price_line(device) -> str:
    price = device.price_per_hour
    if price is None:
        return (f"  # price_per_accelerator_hour: $2.00/h   # the catalog has no price for {device.key}: state one "
                "for the cost")
    return (f"  price_per_accelerator_hour: {{value: ${price.typical:g}/h, low: ${price.low:g}/h, high: "
            f"${price.high:g}/h, source: \"catalog: published on-demand prices, {price.date}\"}}")


def _node_size(device) -> Optional[int]:
    """Accelerators per node of the device's first node preset, or None without one."""
    from botec.catalog import node_presets

    nodes = [n for n in node_presets().values() if n.accelerator == device.key]
    return nodes[0].accelerators_per_node if nodes else None


def _node_line(device, count: int) -> str:
    from botec.catalog import node_presets

    nodes = [n for n in node_presets().values() if n.accelerator == device.key]
    if nodes and count >= nodes[0].accelerators_per_node:
        return (f"  cluster:\n    node: {nodes[0].key}             # {nodes[0].accelerators_per_node} accelerators "
                "per node: fast links inside, NICs across (botec catalog lists the node presets)")
    example = nodes[0].key if nodes else "dgx-h100"
    return (f"  # cluster: {{node: {example}}}     # a node preset: fast links inside a node, NICs across "
            "(botec catalog); without one, the accelerator's own link is assumed")


_TRAINING = """\
# botec workload contract: train {label} on {count} × {device_name}.
# Written by `botec init`: edit any line; `botec schema` describes every field.
#
# Run it:   botec estimate {path}
# Explain:  botec explain {path} step_seconds
# Layouts:  botec search {path}      (the parallel layouts that fit, fastest first)
name: {name}
description: {label} on {tokens} tokens of {sequence_length} tokens each, {count} × {device_name}.

workload:
  model: {model}         # a catalog model (botec model --list) or {{config: path/to/config.json}}
  tokens: {tokens}                     # D: tokens processed across the run, e.g. 500M, 2B, 15T
  sequence_length: {sequence_length}          # S: tokens per sequence

supply:
  accelerator: {device}          # a catalog accelerator (botec catalog): its peaks, memory and links
  count: {count}                      # N: accelerators in the job
{node}
  storage:
    write_bandwidth: {{value: 2 GB/s, low: 0.5 GB/s, high: 10 GB/s, source: "assumed: replace with your storage's write rate"}}
{price}

strategy:
  # framework: the training stack, whose defaults fill what this file leaves out (attention kernel, fused or eager
  #   elementwise ops, the loss kernel): megatron-2022, megatron-core, torchtitan, torchtune, deepspeed, hf-trainer
  framework: torchtitan         # PyTorch FSDP2 in eager mode, the default; set yours
  # Layout: tensor_parallel × pipeline_parallel × data parallel = count.
  tensor_parallel: {tensor_parallel}            # TP: each layer's matrices split over this many accelerators (keep it inside a node)
  pipeline_parallel: 1          # PP: the layers split into this many stages
  {sharding}
  micro_batch_size: 1           # sequences per accelerator per forward/backward (the memory peak grows with it)
  global_batch_size: {global_batch}        # sequences per optimizer step across all replicas (= micro-batch × accumulation × DP)
  # recompute: none keeps every activation; selective is the framework's (torchtitan: save every second matmul's
  #   and the attention outputs, recompute the rest; Megatron: the attention core only); full keeps each layer's input
  recompute: {recompute:<9}         # activation recomputation: the first of selective, full that fits
  precision: bf16               # compute precision: bf16, fp16 or fp8 (selects the accelerator's peak)
  optimizer: adam-mixed         # BF16 weights and gradients, FP32 master and two moments: 16 B/parameter (botec catalog lists presets)
  checkpoint: {checkpoint}

assumptions:
  # step_time_model: components builds each step from compute + optimizer + pipeline bubble + exposed
  #   communication; efficiency is the lesson's one line, N × peak × MFU × scaling efficiency
  step_time_model: components   # how a step's time is built
  # compute_model: op_level puts every op of a layer on its roofline with the accelerator family's
  #   efficiency curve; flat uses one stated utilization (single_accelerator_mfu) for all compute
  compute_model: op_level       # how compute time is counted
  # activation_model: korthikanti uses per-layer formulas (Korthikanti et al. 2022) that follow recompute and
  #   attention_kernel; saved_tensor_factor is layers × factor × one hidden state (the lesson's placeholder)
  activation_model: korthikanti # how activation memory is counted
  # attention_kernel: flash is fused attention (FlashAttention, SDPA), no s × s scores kept; eager
  #   materializes the scores (memory grows with the square of the sequence length)
  attention_kernel: flash       # which attention kernel runs
  # data_parallel_overlap is derived from the framework's schedule (bucketed reductions behind the last backward,
  #   FSDP's prefetch); state a measured share here to override it
  # runtime_buffer is the runtime's memory outside the allocator (the CUDA context: catalog/runtime.yaml), the
  #   workspaces inside it follow the accelerator; state a measured figure here to override it
  headroom: 0.10                # share of memory kept free on top of the plan
"""

_SERVING = """\
# botec serving contract: {label} on {device_name} replicas.
# Written by `botec init --serving`: edit any line; `botec schema` describes every field.
#
# Run it:   botec estimate {path}
# Explain:  botec explain {path} time_per_output_token_seconds
# Layouts:  botec search {path}      (tensor parallelism and accelerators that meet the targets, cheapest first)
name: {name}
description: {label}, 10 requests/s of 1,024 prompt + 256 output tokens, on {device_name} replicas.

workload:
  kind: serving
  model: {model}         # a catalog model (botec model --list) or {{config: path/to/config.json}}
  traffic:
    requests_per_second: 10     # the mean load the fleet must carry (or concurrency: 64, users in flight fleet-wide)
    prompt_tokens: 1024         # mean prompt length (tokens)
    output_tokens: 256          # mean generated length (tokens)
  latency:                      # targets, held at the 90th percentile by default (latency.percentile); leave one out to size for throughput only
    time_to_first_token: 1 s    # TTFT: queueing + prefill of the prompt
    time_per_output_token: 50 ms   # TPOT: one decode step at the batch the replica runs

supply:
  accelerator: {device}          # a catalog accelerator (botec catalog); the fleet size follows from the traffic
{price}
  # candidates: [{{accelerator: l40s, price_per_accelerator_hour: $1.50/h}}]   # the same traffic on other accelerators

strategy:
  engine: vllm                  # the engine whose memory rule, batch caps and overheads apply: vllm, tensorrt-llm or sglang (botec catalog)
  tensor_parallel: {tensor_parallel}            # accelerators per replica, each holding 1/TP of the weights (raise it when the model does not fit or TPOT is too slow)
  weight_precision: bf16        # stored weights: bf16, fp8, int8, int4 (fp8/int4 halve/quarter the weight read that bounds TPOT)
  kv_cache_precision: bf16      # KV cache: bf16 or fp8 (fp8 doubles the requests that fit)

assumptions:
  attention_flops: causal       # count the causal half of the attention scores
  prefix_cache_hit_rate: {{value: 0.0, low: 0.0, high: 0.3, source: "assumed: no shared system prompt"}}
"""


def _estimate(text: str, directory: Path):
    """(the estimate of the contract text, None) when it estimates and fits (its headroom kept: the estimate's
    verdict), else (None, the one-line reason)."""
    from botec.estimation import check_fit, estimate_file

    handle, name = tempfile.mkstemp(suffix=".yaml", prefix=".botec-init-", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        result = estimate_file(Path(name), [])
        check_fit(result)
    except UserError as error:
        return None, str(error)
    finally:
        os.unlink(name)
    return result, None


_SYNC_CHECKPOINT = "{interval: 1 h, retained: 3}   # a save every hour, three kept; training waits while it is written"
_ASYNC_CHECKPOINT = ("{interval: 1 h, retained: 3, mode: async}   # a save every hour, three kept; training waits "
                     "only while it is copied to host memory (PyTorch DCP async_save: torchtitan checkpoint.async_mode)")


def _checkpoint_flagged(result) -> bool:
    """Whether the estimate flags the synchronous saves: their pause over the threshold's share of the wall time
    (findings/training.py ``_checkpoints``), or the goodput below its threshold."""
    q = result.quantities
    pause = ("checkpoint_pause_share" in q
             and q["checkpoint_pause_share"].value > q["checkpoint_pause_share_threshold"].value)
    return pause or ("goodput" in q and q["goodput"].value < q["goodput_threshold"].value)


def _layouts(count: int, serving: bool, tensor_parallel: Optional[int], node: Optional[int] = None):
    """The layouts tried in order, the cheapest in memory traffic first: (tensor_parallel, recompute, shard group).

    Training: TP 1, 2, 4, 8, each with selective then full recomputation. Within one node the weights, gradients
    and optimizer state are sharded over every data-parallel rank (FSDP full shard). Past one node, hybrid sharding
    (FSDP within a group, replicas across: torchtitan's dp_shard × dp_replicate, FSDP's HYBRID_SHARD): the shard
    group is one node's data-parallel ranks, then two, four, ... nodes' until one fits (None: one node's, the
    ``fsdp: hybrid_shard`` default), and last every data-parallel rank ("all"), so the gathers and reduce-scatters
    stay on NVLink where the state allows."""
    if serving:
        degrees = [tensor_parallel] if tensor_parallel else [1, 2, 4, 8]
        return [(t, None, None) for t in degrees]
    layouts = []
    for t in (d for d in (1, 2, 4, 8) if count % d == 0):
        data_parallel = count // t
        groups: list = [None]
        if node and count > node and node % t == 0:
            group = node // t
            groups = []
            while group < data_parallel and data_parallel % group == 0:
                groups.append(group)
                group *= 2
            groups = [None] + groups[1:] + ["all"]
        layouts += [(t, r, g) for r in ("selective", "full") for g in groups]
    return layouts


def _sharding(count: int, node: Optional[int], group) -> str:
    """The strategy's sharding lines: full shard within one node, hybrid shard past one node."""
    if not node or count <= node or group == "all":
        return ("fsdp: full_shard              # shard weights, gradients and optimizer state over the "
                "data-parallel ranks (ZeRO-3); or zero_stage: 0 (replicated), 1 (optimizer state), 2 (+ gradients)")
    text = ("fsdp: hybrid_shard            # shard weights, gradients and optimizer state within a group, replicate "
            "across groups (FSDP HYBRID_SHARD; torchtitan dp_shard × dp_replicate): the gathers stay inside it")
    if group is None:
        return text + "\n  # sharding_group: the data-parallel ranks of one node (the default of hybrid_shard)"
    return text + (f"\n  sharding_group: {group}            # ranks per shard group: the fewest whole nodes' "
                   "data-parallel ranks the state fits in")


def starter_text(path: Path, model: Optional[str], accelerator: Optional[str], count: Optional[int],
                 serving: bool) -> tuple[str, Optional[str]]:
    """The starter contract to write at ``path`` ('-': stdout), and why it does not fit (None if it does).

    Training: the first layout of :func:`_layouts` that fits, with synchronous hourly saves unless its own estimate
    flags them (:func:`_checkpoint_flagged`); then asynchronous ones (PyTorch DCP async_save)."""
    directory = Path.cwd() if str(path) == "-" else (path.parent if str(path.parent) else Path("."))
    if not directory.is_dir():
        raise UserError(f"{path}: the folder {directory} does not exist")
    device = _accelerator(accelerator or DEFAULT_ACCELERATOR)
    model_yaml, label = resolve_model(model or DEFAULT_MODEL, directory)
    shown = "job.yaml" if str(path) == "-" else str(path)
    name = Path(shown).stem
    why = None
    text = ""
    n = count or DEFAULT_COUNT
    node = _node_size(device)

    def training(tensor_parallel, recompute, group, checkpoint):
        return _TRAINING.format(label=label, device_name=device.name, path=shown, name=name, model=model_yaml,
                                device=device.key, count=n, node=_node_line(device, n), price=_price_line(device),
                                tokens="1B", sequence_length=4096, tensor_parallel=tensor_parallel,
                                sharding=_sharding(n, node, group), global_batch=n * 8, recompute=recompute,
                                checkpoint=checkpoint)

    for tensor_parallel, recompute, group in _layouts(n, serving, count if serving else None, node):
        if serving:
            text = _SERVING.format(label=label, device_name=device.name, path=shown, name=name, model=model_yaml,
                                   device=device.key, price=_price_line(device), tensor_parallel=tensor_parallel)
            result, why = _estimate(text, directory)
        else:
            text = training(tensor_parallel, recompute, group, _SYNC_CHECKPOINT)
            result, why = _estimate(text, directory)
            if result is not None and _checkpoint_flagged(result):
                saved_async = training(tensor_parallel, recompute, group, _ASYNC_CHECKPOINT)
                if _estimate(saved_async, directory)[1] is None:
                    text = saved_async
        if why is None:
            break
    return text, why
