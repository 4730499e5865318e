"""botec export / import for serving launch configs: vllm serve, SGLang launch_server, trtllm-serve, and the vLLM
production stack's Helm values. vLLM, SGLang and TensorRT-LLM do not install on CPU here, so every option
written is checked against the option names pinned from each tool's version (botec.launch.serving_options)."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botec.contract import parse_contract, read_contract_data
from botec.errors import ContractError
from botec.estimation import estimate, estimate_file
from botec.launch import kubernetes, sglang, trtllm, vllm
from botec.launch.serving_options import (PRODUCTION_STACK_KEYS, SGLANG_OPTIONS, TRTLLM_LLM_API_KEYS,
                                          TRTLLM_SERVE_OPTIONS, VLLM_OPTIONS, unknown_options)

EXAMPLES = sorted(Path(__file__).resolve().parents[1].joinpath("examples").glob("serve-*.yaml"))
FORMATS = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm, "kubernetes": kubernetes}
ENGINE_OF = {name: module.FORMAT.engines[0] for name, module in FORMATS.items()}   # the engine each file runs


@pytest.fixture(scope="module")
def estimates():
    return {path.stem: estimate_file(path) for path in EXAMPLES}


def _options_in(text: str, program: tuple[str, ...]) -> list[str]:
    """Every ``--option`` of every ``program`` command in a launch script."""
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    found, inside = [], False
    for index, word in enumerate(words):
        if tuple(words[index:index + len(program)]) == program:
            inside = True
        elif word in ("cat", "EOF") or word.startswith(("<<", ">")):
            inside = False
        if inside and word.startswith("--"):
            found.append(word)
    return found


def _keys(node, prefix="") -> set[str]:
    """Dotted keys of a YAML mapping (list items share their list's key)."""
    keys = set()
    items = node.items() if isinstance(node, dict) else []
    for key, value in items:
        dotted = f"{prefix}{key}"
        keys.add(dotted)
        for child in (value if isinstance(value, list) else [value]):
            if isinstance(child, dict):
                keys |= _keys(child, dotted + ".")
    return keys


def _merge(base: dict, update: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        merged[key] = _merge(merged.get(key) or {}, value) if isinstance(value, dict) else value
    return merged


def test_every_serving_example_exports_only_pinned_options(estimates):
    # each exporter on every example, whatever its engine (`botec export` refuses that: tests/test_launch_engines.py),
    # so that every option a plan can make each tool write is checked against the tool's pinned list
    assert len(EXAMPLES) >= 8
    for name, result in estimates.items():
        assert not unknown_options(_options_in(vllm.export(result), ("vllm", "serve")), VLLM_OPTIONS), name
        assert not unknown_options(_options_in(sglang.export(result), sglang.PROGRAM), SGLANG_OPTIONS), name
        text = trtllm.export(result)
        assert not unknown_options(_options_in(text, ("trtllm-serve",)), TRTLLM_SERVE_OPTIONS), name
        api = yaml.safe_load(text.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0])
        assert _keys(api) <= TRTLLM_LLM_API_KEYS, name
        values = yaml.safe_load(kubernetes.export(result))
        assert _keys(values) <= PRODUCTION_STACK_KEYS, name
        for spec in values["servingEngineSpec"]["modelSpec"]:
            assert {"name", "repository", "tag", "modelURL", "replicaCount", "requestCPU", "requestMemory",
                    "requestGPU", "vllmConfig"} <= set(spec)
            assert not unknown_options([a for a in spec["vllmConfig"].get("extraArgs", []) if a.startswith("--")],
                                       VLLM_OPTIONS)


def test_the_pinned_lists_refuse_options_those_versions_lack():
    # removed or never there: vLLM V0's --use-v2-block-manager and --num-scheduler-steps, SGLang's --mem-fraction
    # (it is --mem-fraction-static), trtllm-serve's dashed spelling
    assert unknown_options(["--use-v2-block-manager", "--num-scheduler-steps=8", "--max-num-seqs"], VLLM_OPTIONS) \
        == ["--use-v2-block-manager", "--num-scheduler-steps"]
    assert unknown_options(["--mem-fraction", "--tp-size"], SGLANG_OPTIONS) == ["--mem-fraction"]
    assert unknown_options(["--tp-size", "--tp_size"], TRTLLM_SERVE_OPTIONS) == ["--tp-size"]


def test_vllm_writes_the_h100_plan(estimates):
    text = vllm.export(estimates["serve-llama3.1-8b-h100"])
    assert "# vLLM 0.33.0 launch config written by botec" in text
    assert "vllm serve meta-llama/Llama-3.1-8B \\\n  --tensor-parallel-size 1 \\\n" in text
    # the engine's max_num_seqs 1024 and max_num_batched_tokens 8192, vLLM's gpu_memory_utilization 0.92;
    # 1,024 prompt + 256 output tokens at fixed lengths: --max-model-len 1280
    for line in ("--max-num-seqs 1024", "--max-num-batched-tokens 8192", "--gpu-memory-utilization 0.92",
                 "--max-model-len 1280", "--kv-cache-dtype bfloat16", "--dtype bfloat16", "--enable-chunked-prefill"):
        assert f"  {line}" in text


def test_data_parallel_attention_is_vllm_data_parallelism_with_per_engine_limits(estimates):
    # DeepSeek-V3 on 144 H800s, DP attention: 144 engines of TP 1, each with 18,432 / 144 = 128 sequences
    text = vllm.export(estimate_file(EXAMPLES[0].parent / "serve-deepseek-v3-ep144-disaggregated.yaml",
                                     ["strategy.max_batch_size=18432"]))
    decode = text.split("# decode instance")[1]
    assert "--data-parallel-size 144" in decode and "--enable-expert-parallel" in decode
    assert "--max-num-seqs 128" in decode and "--tensor-parallel-size 1" in decode
    assert "--eplb-config '{\"num_redundant_experts\":32}'" in decode
    assert '"kv_role":"kv_consumer"' in decode and '"kv_role":"kv_producer"' in text.split("# decode instance")[0]


def test_sglang_writes_both_disaggregated_instances(estimates):
    text = sglang.export(estimates["serve-deepseek-v3-sglang-96-h100"])
    prefill, decode = text.split("python -m sglang.launch_server")[1:]
    assert "--disaggregation-mode prefill" in prefill and "--tp-size 24" in prefill and "--ep-size 24" in prefill
    assert "--disaggregation-mode decode" in decode and "--attn-dp-size 72" in decode
    # SGLang's default, 2,048 running requests per DP-attention rank, written as the total SGLang divides by
    # attn_dp_size: 2,048 × 72 = 147,456
    assert "--max-running-requests 147456" in decode and "--mem-fraction-static 0.835" in decode


def test_trtllm_reservation_and_memory_fraction_of_free():
    data = read_contract_data(EXAMPLES[0].parent / "serve-llama3.1-8b-l4.yaml")
    data["strategy"].update(engine="tensorrt-llm", kv_reservation="full")
    result = estimate(parse_contract(data), compare=False)
    text = trtllm.export(result)
    assert "capacity_scheduler_policy: GUARANTEED_NO_EVICT" in text
    fraction = result.value("memory_fraction")
    assert f"--kv_cache_free_gpu_memory_fraction {round(fraction, 4):g}" in text
    assert trtllm.read(text, "t.sh")["strategy"]["kv_reservation"] == "full"


def test_memory_fraction_converts_between_engine_rules(estimates):
    # vLLM's 0.92 of the whole device, read as TensorRT-LLM's share of what weights and reserve leave:
    # f = KV / (M − W − R), the same KV budget
    result = estimates["serve-llama3.1-8b-h100"]
    q = result.quantities
    free = q["kv_budget_bytes"].value / (q["device_memory_bytes"].value - q["weight_memory_bytes"].value
                                         - q["activation_reserve_bytes"].value)
    assert trtllm.read(trtllm.export(result), "t")["strategy"]["memory_fraction"] == pytest.approx(free, abs=1e-4)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_import_export_import_is_the_identity_on_every_example(name, estimates):
    fmt = FORMATS[name]
    for example in EXAMPLES:
        first = fmt.read(fmt.export(estimates[example.stem]), f"{example.stem}.out")
        assert first["strategy"]["engine"] == ENGINE_OF[name]
        contract = parse_contract(_merge(read_contract_data(example), first))
        second = fmt.read(fmt.export(estimate(contract, compare=False)), "again")
        assert second == first, example.stem


layouts = st.fixed_dictionaries({
    "tensor_parallel": st.sampled_from([1, 2, 4, 8]), "pipeline_parallel": st.sampled_from([1, 2]),
    "max_batch_size": st.integers(1, 512), "max_batched_tokens": st.integers(512, 32768),
    "memory_fraction": st.integers(50, 95).map(lambda percent: percent / 100)})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts, name=st.sampled_from(sorted(FORMATS)), experts=st.booleans())
def test_export_then_read_is_the_identity_on_the_fields_both_carry(layout, name, experts):
    example = "serve-mixtral-8x7b-h100.yaml" if experts else "serve-llama2-70b-a100-tp4.yaml"
    data = read_contract_data(EXAMPLES[0].parent / example)
    strategy = dict(layout, engine=ENGINE_OF[name], expert_parallel=layout["tensor_parallel"] if experts else 1)
    data["strategy"] = {**data["strategy"], **strategy}
    data["supply"].pop("candidates", None)
    read_back = FORMATS[name].read(FORMATS[name].export(estimate(parse_contract(data), compare=False)), "x")
    carried = {key: value for key, value in read_back["strategy"].items() if key in strategy}
    assert carried == {key: strategy[key] for key in carried}
    assert {"tensor_parallel", "max_batch_size", "max_batched_tokens", "memory_fraction"} <= set(carried) \
        or name == "kubernetes" and {"tensor_parallel", "max_batch_size", "memory_fraction"} <= set(carried)


def test_speculative_decoding_round_trips_through_each_tool():
    data = read_contract_data(EXAMPLES[0].parent / "serve-deepseek-v3-h200.yaml")
    data["assumptions"]["speculative_decoding"] = {"method": "mtp", "draft_tokens": 3, "acceptance_rate": 0.8}
    result = estimate(parse_contract(data), compare=False)
    assert "--speculative-algorithm NEXTN" in sglang.export(result)
    assert "--speculative-num-draft-tokens 4" in sglang.export(result)
    assert json.loads(vllm.export(result).split("--speculative-config '")[1].split("'")[0]) == \
        {"method": "mtp", "num_speculative_tokens": 3}
    assert "num_nextn_predict_layers: 3" in trtllm.export(result)
    for fmt in (vllm, sglang, trtllm):
        spec = fmt.read(fmt.export(result), "x")["assumptions"]["speculative_decoding"]
        assert spec == {"method": "mtp", "draft_tokens": 3}


def test_reads_the_deprecated_sglang_dp_attention_form_and_aliases():
    text = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 "
            "--dp-size 8 --enable-dp-attention --ep 8 --mem-fraction-static=0.8\n")
    fields = sglang.read(text, "run.sh")
    assert fields == {"strategy": {"engine": "sglang", "tensor_parallel": 8, "data_parallel_attention": True,
                                   "expert_parallel": 8, "memory_fraction": 0.8}, "workload": {"model": "deepseek-v3"}}


@pytest.mark.parametrize(("fmt", "text", "message"), [
    (vllm, "vllm serve m --tensor-parallel-size four\n", "--tensor-parallel-size: expected a whole number, got 'four'"),
    (vllm, "vllm serve m --gpu-memory-utilization 1.5\n", "--gpu-memory-utilization: expected a share in (0, 1], got '1.5'"),
    (vllm, "vllm serve m --speculative-config '{bad'\n", "--speculative-config: expected JSON"),
    (vllm, "python train.py --lr 3e-4\n", "no `vllm serve` command found"),
    (sglang, "python -m sglang.launch_server --tp-size 6 --attn-dp-size 4\n", "--attn-dp-size: 4 attention groups do not divide"),
    (trtllm, "trtllm-serve m --max_batch_size 0\n", "--max_batch_size: expected a whole number >= 1, got 0"),
    (kubernetes, "servingEngineSpec: {modelSpec: 3}\n", "servingEngineSpec.modelSpec: expected a list of model entries"),
])
def test_bad_launch_files_get_one_line_errors_naming_the_option(fmt, text, message):
    with pytest.raises(ContractError) as error:
        fmt.read(text, "launch.sh")
    assert message in str(error.value) and "\n" not in str(error.value)
    assert str(error.value).startswith("launch.sh: ")


def test_a_training_contract_is_refused_by_the_serving_formats():
    result = estimate_file(EXAMPLES[0].parent / "lesson-finetune-1b.yaml")
    for fmt in FORMATS.values():
        with pytest.raises(ContractError, match="workload.kind: .* launches serving: this is a training contract"):
            fmt.export(result)
