"""Kubernetes: the vLLM production stack's Helm values for a serving plan, and back (chart vllm-stack 0.1.12).

``servingEngineSpec.modelSpec`` holds one entry per deployment (vllm-project/production-stack helm/values.yaml
and values.schema.json @a6c01db, 2026-08-05): the image (``repository`` vllm/vllm-openai, ``tag`` v0.33.0, the
vLLM whose options :mod:`botec.launch.vllm` writes), ``modelURL``, ``replicaCount`` = the replicas the estimate
needs, ``requestGPU`` = accelerators per replica, and ``vllmConfig``: the chart's own keys (tensorParallelSize,
maxNumSeqs, maxModelLen, gpuMemoryUtilization, dtype, enableChunkedPrefill, enablePrefixCaching) and
``extraArgs`` for every other ``vllm serve`` option of the plan (the same options as :mod:`botec.launch.vllm`:
one definition). ``requestCPU``, ``requestMemory`` and ``pvcStorage``, which the chart requires, are assumed:
4 CPUs per GPU, and the model's weights plus a quarter in host memory and on the volume.

A disaggregated plan writes a prefill and a decode entry; NVIDIA Dynamo's DynamoGraphDeployment (the standard
manifest for disaggregated serving) is not written, nor the router's prefill/decode routing.
"""

from __future__ import annotations

import math
import re

from botec.errors import ContractError
from botec.launch import LaunchFormat
from botec.launch.commandline import yaml_document
from botec.launch.serving_plan import check_serving, header_lines, serving_plan
from botec.launch.vllm import ENGINE, engine_options, read_commands

__all__ = ["FORMAT", "export", "read"]

TOOL, VERSION = "vLLM production-stack Helm chart vllm-stack", "0.1.12"
IMAGE_REPOSITORY, IMAGE_TAG = "vllm/vllm-openai", "v0.33.0"
CPUS_PER_GPU = 4          # assumed: tokenization, detokenization and the API server beside each GPU
HOST_MEMORY_MARGIN = 1.25  # assumed: the replica's weights pass through host memory once while loading

CHART_KEYS = {"--tensor-parallel-size": "tensorParallelSize", "--max-num-seqs": "maxNumSeqs",
              "--max-model-len": "maxModelLen", "--gpu-memory-utilization": "gpuMemoryUtilization", "--dtype": "dtype"}
"""vllm serve options the chart writes from vllmConfig keys (helm/templates/deployment-vllm-multi.yaml)."""


def _model_spec(plan, instance, name: str, replicas: int, unexpressed: list[str]) -> dict:
    options = engine_options(plan, instance, unexpressed)
    config: dict = {"enableChunkedPrefill": True, "enablePrefixCaching": plan.prefix_caching}
    extra: list[str] = []
    for option, value in options:
        if option in CHART_KEYS:
            config[CHART_KEYS[option]] = value if option == "--dtype" else (
                float(value) if "." in value else int(value))
        elif option not in ("--enable-chunked-prefill", "--enable-prefix-caching"):
            extra += [option] + ([value] if value is not None else [])
    if extra:
        config["extraArgs"] = extra
    weight_gib = math.ceil(plan.checkpoint_bytes * HOST_MEMORY_MARGIN / 2 ** 30)
    return {"name": name, "repository": IMAGE_REPOSITORY, "tag": IMAGE_TAG, "modelURL": plan.model_id,
            "replicaCount": replicas, "requestCPU": CPUS_PER_GPU * instance.accelerators,
            "requestMemory": f"{max(16, weight_gib)}Gi", "requestGPU": instance.accelerators,
            "pvcStorage": f"{max(50, weight_gib)}Gi", "vllmConfig": config}


def export(result) -> str:
    """The Helm values (YAML) that deploy the estimate's plan with the vLLM production stack."""
    check_serving(result, "the vLLM production stack")
    plan = serving_plan(result)
    unexpressed: list[str] = []
    base = re.sub(r"[^a-z0-9-]+", "-", (result.contract.name or plan.model_id).lower()).strip("-")[:50] or "model"
    if plan.prefill is None:
        specs = [_model_spec(plan, plan.decode, base, plan.replicas, unexpressed)]
    else:
        specs = [_model_spec(plan, plan.prefill, f"{base}-prefill", plan.replicas * plan.prefill_instances, []),
                 _model_spec(plan, plan.decode, f"{base}-decode", plan.replicas, unexpressed)]
        unexpressed.append("disaggregation's routing and KV transfer: NVIDIA Dynamo's DynamoGraphDeployment is "
                           "not written; these are the prefill and decode deployments alone")
    per_node = int(result.value("accelerators_per_node")) if "accelerators_per_node" in result.quantities else 8
    if max(spec["requestGPU"] for spec in specs) > per_node:
        unexpressed.append(f"an instance spans nodes (more than {per_node} GPUs): add modelSpec.raySpec")
    if plan.speculation is not None and plan.speculation.method in ("eagle", "draft_model"):
        unexpressed.append("the draft's checkpoint must be reachable from the pod")
    header = header_lines(TOOL, VERSION, "kubernetes", result, plan, unexpressed, replicas_expressed=True,
                          about=(f"install: helm install vllm vllm/vllm-stack --version {VERSION} -f THIS_FILE",))
    return yaml_document(header, {"servingEngineSpec": {"modelSpec": specs}})


def _command_of(spec: dict, origin: str) -> list[str]:
    """The words after ``vllm serve`` of the command the chart runs for one modelSpec entry."""
    config = spec.get("vllmConfig") or {}
    extra = config.get("extraArgs") or [] if isinstance(config, dict) else None
    if not isinstance(config, dict) or not isinstance(extra, list):
        raise ContractError("expected vllmConfig: a mapping, with extraArgs a list of words",
                            field="servingEngineSpec.modelSpec.vllmConfig", origin=origin)
    words = [str(spec.get("modelURL", ""))]
    for option, key in CHART_KEYS.items():
        if key in config:
            words += [option, str(config[key])]
    return words + [str(word) for word in extra]


def read(text: str, origin: str) -> dict:
    """The contract fields of production-stack Helm values (the vllm serve options of each modelSpec entry: the
    one named ``*-prefill`` is a disaggregated prefill instance)."""
    from botec.yamlfile import parse_user_yaml

    values = parse_user_yaml(text, origin)
    engine = values.get("servingEngineSpec") if isinstance(values, dict) else None
    specs = engine.get("modelSpec") if isinstance(engine, dict) else None
    if not isinstance(specs, list) or not specs or not all(isinstance(spec, dict) for spec in specs):
        raise ContractError("expected a list of model entries", field="servingEngineSpec.modelSpec", origin=origin)
    prefill = [spec for spec in specs if str(spec.get("name", "")).endswith("-prefill")]
    decode = [spec for spec in specs if spec not in prefill] or specs
    commands = [_command_of(decode[0], origin)]
    if prefill:   # the prefill entry's command, as vllm.read tells it: the KV producer
        producer = ["--kv-transfer-config", '{"kv_role":"kv_producer"}']
        commands.insert(0, _command_of(prefill[0], origin) + producer)
    fields = read_commands(commands, origin)
    if prefill:
        replicas = decode[0].get("replicaCount")
        prefill_replicas = prefill[0].get("replicaCount")
        if isinstance(replicas, int) and isinstance(prefill_replicas, int) and replicas > 0 \
                and prefill_replicas % replicas == 0:
            fields["strategy"].setdefault("disaggregation", {})["prefill_instances"] = prefill_replicas // replicas
    return fields


FORMAT = LaunchFormat(name="kubernetes", kind="serving", tool=TOOL, version=VERSION, suffix=".yaml",
                      description="vLLM production-stack Helm values (servingEngineSpec.modelSpec)", export=export,
                      read=read, engines=(ENGINE,), markers=("servingEngineSpec",))   # its pods run vllm serve
