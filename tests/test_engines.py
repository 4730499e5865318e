"""Serving-engine presets (engines.yaml): every figure present and sourced, ranges ordered, the engines' own
defaults as their source code states them, and `botec catalog` listing them."""

from __future__ import annotations

import copy
import json

import pytest

from botec.catalog import CatalogError
from botec.yamlfile import load_yaml_text
from botec.catalog.engines import (BASES, DEFAULT_ENGINE, ENGINE_FIGURES, KV_BUDGET_RULES, KV_RESERVATIONS, engine_preset,
                                   engine_presets, parse_engines)

ENGINES = ("vllm", "tensorrt-llm", "sglang")
GiB = 2**30


@pytest.fixture(scope="module")
def raw():
    from importlib import resources

    return load_yaml_text(resources.files("botec.catalog").joinpath("engines.yaml").read_text(encoding="utf-8"))


def test_every_preset_loads_with_every_figure():
    presets = engine_presets()
    assert set(ENGINES) <= set(presets)
    assert DEFAULT_ENGINE == "vllm" and engine_preset(None) is presets["vllm"]
    for preset in presets.values():
        assert preset.name and set(preset.figures) == set(ENGINE_FIGURES)
        for name, figure in preset.figures.items():
            assert figure.basis in BASES, (preset.key, name)
            assert len(figure.source) > 20, (preset.key, name)


def test_ranges_are_ordered_and_kinds_hold():
    for preset in engine_presets().values():
        for name, kind in ENGINE_FIGURES.items():
            figure = preset[name]
            if kind == "flag":
                assert isinstance(figure.value, bool) and figure.low is None and figure.high is None
            elif kind == "rule":
                assert figure.value in KV_BUDGET_RULES and figure.low is None
            elif kind == "reservation":
                assert figure.value in KV_RESERVATIONS and figure.low is None
            elif kind == "budget":
                assert figure.value in ("all_tokens", "prefill_tokens") and figure.low is None
            else:
                assert 0 <= figure.low <= figure.value <= figure.high, (preset.key, name)
        assert 0 < preset.value("memory_fraction") <= preset["memory_fraction"].high <= 1
    # vLLM's SchedulerConfig refuses max_num_batched_tokens below max_num_seqs (vllm/config/scheduler.py).
    vllm = engine_presets()["vllm"]
    assert vllm.value("max_batched_tokens") >= vllm.value("max_batch_size")
    assert vllm["max_batched_tokens"].low >= vllm["max_batch_size"].low


def test_documented_defaults():
    vllm, trt, sgl = (engine_presets()[key] for key in ENGINES)
    # vllm/config/cache.py CacheConfig.gpu_memory_utilization = 0.92 (main @002f10e0); 0.90 through v0.19
    # (vllm/engine/arg_utils.py EngineArgs @001999d2), kept as the low end of the range.
    assert vllm.value("memory_fraction") == pytest.approx(0.92)
    assert vllm["memory_fraction"].low == pytest.approx(0.90)
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults: on >= 70 GiB non-A100 GPUs the OpenAI server gets
    # max_num_seqs 1024 and max_num_batched_tokens 8192; 256 / 2048 elsewhere; LLM class 16384 tokens.
    assert (vllm.value("max_batch_size"), vllm["max_batch_size"].low) == (1024, 256)
    assert (vllm["max_batched_tokens"].low, vllm.value("max_batched_tokens"), vllm["max_batched_tokens"].high) \
        == (2048, 8192, 16384)
    # vllm/config/scheduler.py enable_chunked_prefill = True; vllm/config/cache.py enable_prefix_caching = True.
    assert vllm.value("chunked_prefill") is True and vllm.value("prefix_caching") is True
    assert vllm.value("kv_budget_rule") == "of_total"

    # TensorRT-LLM llmapi KvCacheConfig.free_gpu_memory_fraction = 0.9 and trtllm-serve get_llm_args(0.9),
    # a share of the memory left free after weights and buffers.
    assert trt.value("memory_fraction") == pytest.approx(0.9) and trt.value("kv_budget_rule") == "of_free"
    # tensorrt_llm/builder.py BuildConfig: max_batch_size 2048, max_num_tokens 8192 (what trtllm-serve passes).
    assert (trt.value("max_batch_size"), trt.value("max_batched_tokens")) == (2048, 8192)
    # trtllm-serve enable_chunked_prefill=False; KvCacheConfig.enable_block_reuse = True.
    assert trt.value("chunked_prefill") is False and trt.value("prefix_caching") is True

    # SGLang server_args.py: mem_fraction_static = (M − reserved)/M, reserved = 512 MB + 1.5 MB × 8192 chunk
    # + TP/8 GiB + 2 MB × 256 graph batch on an 80 GB H100 (81,559 MiB) at TP 1 -> 0.835.
    reserved = 512 + 1.5 * 8192 + 1 / 8 * 1024 + 2 * 256
    assert sgl.value("memory_fraction") == pytest.approx(round((81559 - reserved) / 81559, 3))
    assert sgl.value("kv_budget_rule") == "of_total"
    # chunked_prefill_size 8192 on 60-160 GB GPUs, 2048 below 35 GB, 16384 above 160 GB.
    assert (sgl["max_batched_tokens"].low, sgl.value("max_batched_tokens"), sgl["max_batched_tokens"].high) \
        == (2048, 8192, 16384)
    # model_runner: max_running_requests unset -> KV tokens / context length × 512 clamped to 2048-4096.
    assert (sgl.value("max_batch_size"), sgl["max_batch_size"].high) == (2048, 4096)
    # RadixAttention on (disable_radix_cache = False); chunked prefill on by default.
    assert sgl.value("prefix_caching") is True and sgl.value("chunked_prefill") is True


def test_assumed_figures_are_marked_and_in_base_units():
    for preset in engine_presets().values():
        assert preset["step_overhead"].basis == "assumed" and preset["kernel_overhead"].basis == "assumed"
        assert preset["activation_reserve"].basis == "assumed"
        assert 1e-6 <= preset.value("kernel_overhead") <= 1e-5          # a few µs
        assert 1e-5 <= preset.value("step_overhead") <= 1e-2            # tenths of a ms
        assert 1e-6 <= preset.value("allreduce_latency") <= 5e-5        # µs, not ms
        assert 0.1 * GiB <= preset.value("activation_reserve") <= 16 * GiB
    # AIConfigurator's non-KV 'other_mem' on H100 (systems/h100_sxm.yaml) is 3.5 GiB.
    assert engine_presets()["vllm"].value("activation_reserve") == 3.5 * GiB
    # NCCL's ring/LL model for 8 GPUs over NVLink: 6.6 µs + 14 × 0.6 µs (src/graph/tuning.cc) bounds vLLM's.
    assert engine_presets()["vllm"]["allreduce_latency"].high == pytest.approx(6.6e-6 + 14 * 0.6e-6)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["engines"]["sglang"].pop("step_overhead"), "engines.yaml: sglang.step_overhead is missing"),
    (lambda d: d["engines"]["vllm"]["memory_fraction"].update(low=0.95),
     "engines.yaml: vllm.memory_fraction needs low <= value <= high"),
    (lambda d: d["engines"]["vllm"]["kernel_overhead"].update(high="1 us"),
     "engines.yaml: vllm.kernel_overhead needs low <= value <= high"),
    (lambda d: d["engines"]["tensorrt-llm"]["allreduce_latency"].pop("source"),
     "engines.yaml: tensorrt-llm.allreduce_latency needs a source"),
    (lambda d: d["engines"]["tensorrt-llm"]["step_overhead"].update(basis="guessed"),
     "engines.yaml: tensorrt-llm.step_overhead.basis must be one of"),
    (lambda d: d["engines"]["sglang"]["kv_budget_rule"].update(value="of_everything"),
     "engines.yaml: sglang.kv_budget_rule.value must be one of of_total, of_free"),
    (lambda d: d["engines"]["sglang"]["prefix_caching"].update(value="yes"),
     "engines.yaml: sglang.prefix_caching.value must be true or false"),
    (lambda d: d["engines"]["vllm"]["activation_reserve"].update(value="3 parsecs"),
     "engines.yaml: vllm.activation_reserve.value"),
    (lambda d: d["engines"]["vllm"].update(step_overheads={}), "engines.yaml: vllm.step_overheads is not a figure"),
    (lambda d: d["engines"].pop("vllm"), "the default engine 'vllm' has no preset"),
])
def test_a_bad_entry_is_refused_naming_file_preset_and_key(raw, mutate, message):
    data = copy.deepcopy(raw)
    mutate(data)
    with pytest.raises(CatalogError, match=message.replace(".", r"\.").replace("(", r"\(")):
        parse_engines(data)


def test_an_unknown_engine_is_refused_with_a_suggestion():
    with pytest.raises(CatalogError, match="did you mean 'sglang'"):
        engine_preset("sglan")


def test_catalog_lists_the_engines(cli):
    code, out, err = cli("catalog", "-f", "json")
    assert code == 0, err
    engines = {e["key"]: e for e in json.loads(out)["engines"]}
    assert set(ENGINES) <= set(engines) and engines["vllm"]["default"] is True
    figure = engines["tensorrt-llm"]["figures"]["memory_fraction"]
    assert figure["value"] == pytest.approx(0.9) and figure["basis"] == "documented" and figure["unit"] == "fraction"
    assert engines["sglang"]["figures"]["step_overhead"]["unit"] == "s"
    code, out, err = cli("catalog")
    assert code == 0 and "Serving engines" in out and "tensorrt-llm" in out and "of free" in out
    code, out, err = cli("catalog", "-f", "markdown")
    assert code == 0 and "| memory_fraction | 0.92 (0.9–0.92) d |" in out and "Serving-engine sources" in out
