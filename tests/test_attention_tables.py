"""Decode attention from AIConfigurator's measured generation-attention tables (botec.serving.attention_tables): the
grid reads back the measurements, interpolates between neighbours, the fit the step uses is the table's own least
squares, and a contract without a table keeps the roofline and says why."""

from __future__ import annotations

import copy
import math

import pytest

import botec
from botec.serving import attention_tables as at
from botec.serving.step import gemm_term

H100_FP8 = "attention-decode-fp8-h100-sxm"
# AIConfigurator 0.12.0, systems/data/h100_sxm/attention/trtllm/1.3.0rc20/generation_attention_perf.parquet, rows
# num_heads 32, num_key_value_heads 8, head_dim 128, window_size 0, kv_cache_dtype fp8, isl 1 (s = isl + step):
# latency (ms) × 1,000, rounded to 0.01 µs as the extraction writes them (read with pandas, 2026-12).
MEASURED_US = {(1, 2): 5.70, (256, 256): 55.82, (512, 256): 102.71, (1, 65536): 64.62, (2048, 128): 234.65}

@pytest.fixture(autouse=True)
def tables_in_force(monkeypatch):
    """The tables price decode attention (the default: attention_tables.IN_FORCE_BY_DEFAULT)."""
    monkeypatch.setattr(at, "IN_FORCE_BY_DEFAULT", True)


NIM_8B = {"workload": {"kind": "serving", "model": "llama-3.1-8b",
                       "traffic": {"concurrency": 100, "prompt_tokens": 200, "output_tokens": 200}},
          "supply": {"accelerator": "h100-sxm", "replicas": 1},
          "strategy": {"engine": "tensorrt-llm", "weight_precision": "fp8", "kv_cache_precision": "fp8"},
          "assumptions": {"utilization_cap": 1}}


@pytest.mark.parametrize("point", sorted(MEASURED_US))
def test_grid_points_read_back_the_measurement(point):
    table = at.load_table(H100_FP8)
    batch, context = point
    assert at.decode_attention_seconds(table, 32, 8, batch, context) == pytest.approx(MEASURED_US[point] * 1e-6,
                                                                                       rel=1e-12)
    assert at.decode_reach(table, 32, 8, batch, context) == "measured"


def test_between_neighbours_the_log_interpolation():
    """Halfway in log b between b = 256 and 512 at s = 256: the geometric mean of the two measurements."""
    table = at.load_table(H100_FP8)
    between = at.decode_attention_seconds(table, 32, 8, math.sqrt(256 * 512), 256)
    assert between == pytest.approx(math.sqrt(55.82 * 102.71) * 1e-6, rel=1e-12)
    assert at.decode_reach(table, 32, 8, 300, 256) == "interpolated"
    # b = 2,048 is measured up to s = 128 only: beyond, the closed form (extrapolated)
    assert at.decode_reach(table, 32, 8, 2048, 256) == "extrapolated"
    fit = table.fits[(32, 8)]
    assert at.decode_attention_seconds(table, 32, 8, 2048, 256) == at.closed_form_seconds(fit, 2048, 256)


def _misfit(table, key, floor, sigma, kappa, p):
    """Σ (log closed form − log measured)² over the layout's measured points, and the extreme relative residuals."""
    grid = at._grid(table.name, *key)
    total, residuals = 0.0, []
    for b, row in zip(table.batch, grid):
        for s, value in zip(table.context, row):
            if value is not None:
                closed = floor + gemm_term(sigma * b, kappa * b * s, p)
                total += math.log(closed / value) ** 2
                residuals.append(closed / value - 1)
    return total, min(residuals), max(residuals)


@pytest.mark.parametrize("key", [(32, 8), (64, 8), (8, 1)])
def test_the_fit_is_the_least_squares_of_the_layouts_points(key):
    """The stored fit's floor is the point at b = 1, s = 2; its κ the median (L − F)/(b·s) over the points where the
    kernel streams the cache (b·s ≥ 2¹⁸); its misfit is what the file says; and moving σ or p by 2 % either way
    raises Σ (log residual)², so they are the least squares the extraction says they are."""
    import statistics

    table = at.load_table(H100_FP8)
    fit = table.fits[key]
    grid = at._grid(table.name, *key)
    assert fit.floor == pytest.approx(grid[0][0], abs=0.005e-6)   # the grid rounds to 0.01 µs
    streaming = [(value - fit.floor) / (b * s) for b, row in zip(table.batch, grid)
                 for s, value in zip(table.context, row) if value is not None and b * s >= 2 ** 18]
    assert len(streaming) >= 5
    assert fit.per_context_token == pytest.approx(statistics.median(streaming), rel=2e-3)   # the grid's rounding
    best, low, high = _misfit(table, key, fit.floor, fit.per_sequence, fit.per_context_token, fit.exponent)
    assert (low, high) == pytest.approx(fit.misfit, abs=1.5e-3)
    for index in (0, 2):
        for factor in (0.98, 1.02):
            moved = [fit.per_sequence, fit.per_context_token, fit.exponent]
            moved[index] *= factor
            if moved[2] > 32:
                continue
            assert _misfit(table, key, fit.floor, *moved)[0] > best


def test_where_the_kernel_streams_the_fit_is_the_table():
    """Llama 3.1 8B's 32/8 layout on an H100 (FP8 cache) at b·s ≥ 2¹⁸, the long-context decode steps: the closed
    form within 6 % of every measured point there (a free κ in log space came out 10 % above them on average,
    and the 20,000/2,000 throughput row −19.5 % below the published)."""
    table = at.load_table(H100_FP8)
    fit = table.fits[(32, 8)]
    grid = at._grid(table.name, 32, 8)
    for b, row in zip(table.batch, grid):
        for s, value in zip(table.context, row):
            if value is not None and b * s >= 2 ** 18:
                assert at.closed_form_seconds(fit, b, s) == pytest.approx(value, rel=0.06)


def test_the_8b_step_takes_the_tables_attention_and_says_so():
    """8B at TP 1 on an H100 with an FP8 cache: the rank's layout is 32/8; the step's attention inputs are the layers
    × the fit; the reason names the table, the fit and its reach."""
    result = botec.estimate(NIM_8B)
    q = result.quantities
    fit = at.load_table(H100_FP8).fits[(32, 8)]
    assert q["attention_table_index"].value == at.table_names().index(H100_FP8)
    assert q["attention_table_floor_seconds"].value == pytest.approx(32 * fit.floor, rel=1e-12)
    assert q["attention_table_seconds_per_context_token"].value == pytest.approx(32 * fit.per_context_token,
                                                                                 rel=1e-12)
    assert q["attention_knee_exponent"].value == fit.exponent
    reason = q["attention_table_index"].source
    assert "generation_attention_perf.parquet" in reason and "b·s ≤ 524,288" in reason and "32/8" in reason


def test_at_tp_8_the_rank_runs_4_heads_and_one_kv_head():
    contract = copy.deepcopy(NIM_8B)
    contract["strategy"]["tensor_parallel"] = 8
    contract["supply"]["cluster"] = {"node": "dgx-h100"}
    q = botec.estimate(contract).quantities
    assert q["attention_knee_exponent"].value == at.load_table(H100_FP8).fits[(4, 1)].exponent


@pytest.mark.parametrize("change, why", [
    ({"supply": {"accelerator": "l4", "replicas": 1}}, "no measured decode-attention table for a fp8 KV cache on l4"),
    ({"workload": {"model": "deepseek-v3"}}, "MLA"),
    ({"assumptions": {"attention_efficiency": 0.5}}, "the contract states its own attention, memory or GEMM efficiency"),
    ({"assumptions": {"matmul_efficiency": 0.7}}, "the contract states its own attention, memory or GEMM efficiency"),
])
def test_without_a_table_the_roofline_and_the_reason(change, why):
    contract = copy.deepcopy(NIM_8B)
    for part, values in change.items():
        contract[part] |= values
    if change.get("workload"):
        contract["supply"] = {"accelerator": "h200", "replicas": 1, "cluster": {"node": "dgx-h200"}}
        contract["strategy"] |= {"tensor_parallel": 8}
    q = botec.estimate(contract).quantities
    assert q["attention_table_index"].value == -1
    assert q["attention_knee_exponent"].value == 0
    assert why in q["attention_table_index"].source


def test_a_sliding_window_inside_the_context_keeps_the_roofline():
    """Mistral 7B's 4,096-token window: beyond the context of a 200 + 200 request it changes nothing (the table
    prices it); a 8,000-token prompt runs the window, which the table does not measure."""
    contract = copy.deepcopy(NIM_8B)
    contract["workload"]["model"] = "mistral-7b"
    assert botec.estimate(contract).quantities["attention_table_index"].value >= 0
    contract["workload"]["traffic"]["prompt_tokens"] = 8000
    q = botec.estimate(contract).quantities
    assert q["attention_table_index"].value == -1 and "sliding window" in q["attention_table_index"].source


def test_in_force_by_default_and_set_aside_says_why(monkeypatch):
    q = botec.estimate(NIM_8B).quantities
    assert q["attention_table_index"].value >= 0 and q["attention_knee_exponent"].value > 0
    monkeypatch.setattr(at, "IN_FORCE_BY_DEFAULT", False)
    q = botec.estimate(NIM_8B).quantities
    assert q["attention_table_index"].value == -1 and q["attention_knee_exponent"].value == 0
    assert f"{H100_FP8} covers this contract but is set aside here" in q["attention_table_index"].source
