"""Prefill attention from AIConfigurator's measured context-attention tables (botec.serving.prefill_attention): the
grid reads back the measurements, the section follows the engine and its formats, the step's cost per attended pair
is the table's at the prompts a step holds, the fit beyond the grid is the table's own least squares, and a
contract without a table keeps the roofline and says why."""

from __future__ import annotations

import copy
import math

import pytest

import botec
from botec.serving import prefill_attention as pa
from botec.serving.step import gemm_term

# AIConfigurator 0.12.0, systems/data/h100_sxm/attention/{trtllm/1.3.0rc20, vllm/0.24.0}/context_attention_perf.parquet,
# head_dim 128, window_size 0: latency (ms) × 1,000, rounded to 0.01 µs as the extraction writes them (read with
# pandas, 2026-12). (engine, attention dtype, KV dtype, heads, KV heads, batch, isl) -> µs.
MEASURED_US = {("tensorrt-llm", "fp8", "fp8", 32, 8, 1, 16384): 3002.04,
               ("tensorrt-llm", "fp8", "fp8", 32, 8, 4, 2048): 341.94,
               ("tensorrt-llm", "fp8", "fp8", 32, 8, 64, 128): 173.0,
               ("tensorrt-llm", "fp8", "fp8", 32, 8, 16, 8192): 13099.87,
               ("vllm", "bf16", "bf16", 64, 8, 1, 2048): 162.4,
               ("vllm", "bf16", "bf16", 64, 8, 4, 4096): 1902.19}

TRT_8B = {"workload": {"kind": "serving", "model": "llama-3.1-8b",
                       "traffic": {"requests_per_second": 1, "prompt_tokens": 2048, "output_tokens": 128}},
          "supply": {"accelerator": "h100-sxm"},
          "strategy": {"engine": "tensorrt-llm", "weight_precision": "fp8", "kv_cache_precision": "fp8"}}


@pytest.fixture(autouse=True)
def tables_in_force(monkeypatch):
    monkeypatch.setattr(pa, "IN_FORCE_BY_DEFAULT", True)


def _section(engine, attention, kv):
    return next(s for s in pa.load_sections(f"attention-context-{engine}-h100-sxm")
                if (s.attention_dtype, s.kv_dtype) == (attention, kv))


@pytest.mark.parametrize("point", sorted(MEASURED_US))
def test_grid_points_read_back_the_measurement(point):
    engine, attention, kv, heads, kv_heads, batch, prompt = point
    seconds, reach = pa.layer_seconds(_section(engine, attention, kv), (heads, kv_heads), batch, prompt)
    assert seconds == pytest.approx(MEASURED_US[point] * 1e-6, rel=1e-12) and reach == "measured"


def test_between_prompts_the_log_interpolation():
    """Halfway in log s between the measured 2,048 and 3,072 at b = 4 (vLLM, 64/8): the geometric mean of the two
    points."""
    section = _section("vllm", "bf16", "bf16")
    assert 2048.0 in section.prompt and 3072.0 in section.prompt and 2500.0 not in section.prompt
    low = pa.layer_seconds(section, (64, 8), 4, 2048)[0]
    high = pa.layer_seconds(section, (64, 8), 4, 3072)[0]
    between, reach = pa.layer_seconds(section, (64, 8), 4, math.sqrt(2048 * 3072))
    assert between == pytest.approx(math.sqrt(low * high), rel=1e-12) and reach == "interpolated"


def test_beyond_the_grid_the_fit_which_is_the_least_squares_of_the_layouts_points():
    """A 20,000-token prompt lies beyond s = 16,384: the closed form F + ‖σ·b·s, κ·b·s²/2‖_p, and moving σ, κ or p by
    2 % either way raises Σ (log residual)² over the layout's measured points; the misfit is what the file says."""
    section = _section("tensorrt-llm", "fp8", "fp8")
    fit = section.fits[(32, 8)]
    seconds, reach = pa.layer_seconds(section, (32, 8), 1, 20000)
    assert reach == "extrapolated"
    assert seconds == pytest.approx(fit.floor + gemm_term(fit.per_token * 20000, fit.per_pair * 20000 ** 2 / 2,
                                                          fit.exponent), rel=1e-12)

    def misfit(sigma, kappa, p):
        total, residuals = 0.0, []
        for b, row in zip(section.batch, pa.grid(section.name, section.position, 32, 8)):
            for s, value in zip(section.prompt, row):
                if value is not None:
                    closed = fit.floor + gemm_term(sigma * b * s, kappa * b * s * s / 2, p)
                    total += math.log(closed / value) ** 2
                    residuals.append(closed / value - 1)
        return total, min(residuals), max(residuals)

    best, low, high = misfit(fit.per_token, fit.per_pair, fit.exponent)
    assert (low, high) == pytest.approx(fit.misfit, abs=1.5e-3)
    for index in range(3):
        for factor in (0.98, 1.02):
            moved = [fit.per_token, fit.per_pair, fit.exponent]
            moved[index] *= factor
            if moved[2] >= 1:
                assert misfit(*moved)[0] > best


def test_the_step_prices_a_pair_at_the_prompts_its_budget_holds():
    """8B on an H100, TensorRT-LLM, FP8 weights and cache, prompts of 2,048: the budget of 8,192 tokens holds 4, so
    a_p = 32 layers × L(4, 2,048) / (4 · 2,048² / 2) = 32 × 341.94 µs / 8,388,608; the roofline it replaces,
    2 · 32 · 8,192 / (0.43 × 989.4 TFLOP/s), is 25 % dearer."""
    q = botec.estimate(TRT_8B).quantities
    assert q["max_batched_tokens"].value == 8192
    expected = 32 * 341.94e-6 / (4 * 2048 ** 2 / 2)
    assert q["prefill_attention_seconds_per_context_token"].value == pytest.approx(expected, rel=1e-12)
    reason = q["prefill_attention_table_index"].source
    assert "tensorrt-llm, fp8 attention over a fp8 cache" in reason and "4 prompt(s) of 2,048 tokens" in reason
    assert "use_fp8_context_fmha" in reason and "(measured)" in reason


@pytest.mark.parametrize("engine, weights, kv, formats", [
    ("tensorrt-llm", "fp8", "fp8", ("fp8", "fp8")),
    ("tensorrt-llm", "bf16", "fp8", ("bf16", "fp8")),
    ("tensorrt-llm", "bf16", "bf16", ("bf16", "bf16")),
    ("vllm", "fp8", "fp8", ("bf16", "fp8")),
    ("sglang", "fp8", "fp8", ("fp8", "fp8")),
    ("sglang", "bf16", "bf16", ("bf16", "bf16")),
])
def test_the_section_follows_the_engine_and_its_formats(engine, weights, kv, formats):
    contract = copy.deepcopy(TRT_8B)
    contract["strategy"] = {"engine": engine, "weight_precision": weights, "kv_cache_precision": kv}
    q = botec.estimate(contract).quantities
    section = pa.section_by_index(q["prefill_attention_table_index"].value)
    assert (section.engine, section.attention_dtype, section.kv_dtype) == (engine, *formats)


def test_over_a_monte_carlos_arrays_each_sample_as_its_own_estimate():
    """The formula runs elementwise over arrays (an uncertainty run's samples: np.vectorize over the scalar
    lookup), each element what the plain numbers give."""
    np = pytest.importorskip("numpy")
    from botec.serving.attention import prefill_attention_seconds_per_context_token as formula

    q = botec.estimate(TRT_8B).quantities
    names = ("pipeline_stage_layers", "prefill_attention_width_per_context_token", "tensor_parallel",
             "attention_efficiency", "attention_peak_flops_per_s", "prefill_attention_table_index", "attention_heads",
             "kv_heads", "attention_tensor_parallel", "prompt_tokens", "max_batched_tokens")
    plain = {name: float(q[name].value) for name in names}
    prompts = np.array([512.0, 2048.0, 20000.0])
    arrays = formula(**(plain | {"prompt_tokens": prompts}))
    for prompt, value in zip(prompts, arrays):
        assert value == pytest.approx(formula(**(plain | {"prompt_tokens": float(prompt)})), rel=1e-12)
    assert arrays[1] == pytest.approx(q["prefill_attention_seconds_per_context_token"].value, rel=1e-12)
    assert arrays[0] > arrays[1] > arrays[2]   # short prompts run the kernel further from its peak


@pytest.mark.parametrize("change, why", [
    ({"supply": {"accelerator": "l4"}}, "no measured context-attention table for tensorrt-llm with a fp8 cache on l4"),
    ({"workload": {"model": "deepseek-v3"}}, "MLA"),
    ({"assumptions": {"attention_efficiency": 0.5}}, "the contract states its own attention, memory or GEMM efficiency"),
])
def test_without_a_table_the_roofline_and_the_reason(change, why):
    contract = copy.deepcopy(TRT_8B)
    for part, values in change.items():
        contract.setdefault(part, {}).update(values)
    if change.get("workload"):
        contract["supply"] = {"accelerator": "h200", "cluster": {"node": "dgx-h200"}}
        contract["strategy"] |= {"tensor_parallel": 8}
    q = botec.estimate(contract).quantities
    assert q["prefill_attention_table_index"].value == -1 and why in q["prefill_attention_table_index"].source
    roofline = (2 * q["pipeline_stage_layers"].value * q["prefill_attention_width_per_context_token"].value
                / q["tensor_parallel"].value / (q["attention_efficiency"].value * q["attention_peak_flops_per_s"].value))
    assert q["prefill_attention_seconds_per_context_token"].value == pytest.approx(roofline, rel=1e-12)


def test_set_aside_says_why(monkeypatch):
    monkeypatch.setattr(pa, "IN_FORCE_BY_DEFAULT", False)
    q = botec.estimate(TRT_8B).quantities
    assert q["prefill_attention_table_index"].value == -1
    assert ("attention-context-tensorrt-llm-h100-sxm covers this contract but is set aside here"
            in q["prefill_attention_table_index"].source)
