"""`botec validate`: botec beside the published figures it ships, with the targets of issue 11."""

from __future__ import annotations

import json

import pytest

from botec.validate import cases, run_case


def case(prefix: str):
    return run_case(next(c for c in cases() if c.id.startswith(prefix)))


def test_every_shipped_case_runs_every_row():
    for found in cases():
        result = run_case(found)
        assert result.rows and all(row.problem is None for row in result.rows), found.id
        assert found.source and found.published_as and found.flop_convention


def test_korthikanti_table_5_iteration_times():
    """Selene, Korthikanti et al. 2022 Table 5: mean |error| ≤ 4 %, max ≤ 9 % (Calculon: 3.7 %, 8.9 %)."""
    result = case("train-korthikanti-selene-table5")
    assert len(result.rows) == 8
    assert result.mean_abs_error <= 0.04 and result.max_abs_error <= 0.09
    assert all(row.fits for row in result.rows)                   # these layouts ran on 80 GB A100s
    published = {row.id: row.published for row in result.rows}
    assert published["175b-full"] == 18.13 and published["1t-seq-sel"] == 71.49


def test_sc21_weak_scaling_rises_with_model_size():
    """Narayanan et al. 2021 Table 1: every row within ±10 % and rising from 1.7B to 1T, as published."""
    result = case("train-megatron-sc21")
    assert len(result.rows) == 10
    assert all(abs(row.error) <= 0.10 for row in result.rows)
    values = [row.botec for row in result.rows]
    assert values[-1] > values[0] and sum(values[5:]) > sum(values[:5])
    assert all(row.fits for row in result.rows)
    assert result.rows[0].published == pytest.approx(137e12)


def test_memory_cases_are_exact():
    zero = case("mem-zero")
    assert [row.botec for row in zero.rows] == pytest.approx([120e9, 31.40625e9, 16.640625e9, 1.875e9])
    assert zero.checks == {"exact": True}
    korthikanti = case("mem-korthikanti")
    assert [row.botec for row in korthikanti.rows] == [2_868_903_936, 106_954_752, 50_331_648]


def test_flop_counts_and_collectives():
    gpt3 = case("train-gpt3")
    assert gpt3.rows[0].botec == pytest.approx(3.14e23, rel=0.02)
    assert gpt3.rows[1].botec == pytest.approx(3.14e23 / (0.213 * 125e12 * 3600), rel=0.05)
    network = case("net-collectives")
    assert network.rows[0].botec == pytest.approx(1e9 * 2 * 7 / 8 / 100e9)
    chinchilla = case("train-chinchilla")
    assert chinchilla.checks == {"each_within": True}
    assert [row.id for row in chinchilla.rows if row.outside_target] == ["n-67b"]


def test_cli_json_and_errors(cli):
    code, out, err = cli("validate", "mem-zero", "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    (only,) = data["cases"]
    assert only["id"] == "mem-zero-model-states" and only["summary"]["targets"] == {"exact": True}
    assert [row["published"] for row in only["rows"]] == pytest.approx([120e9, 31.4e9, 16.6e9, 1.9e9])
    assert only["rows"][3]["error"] == pytest.approx(1.875 / 1.9 - 1)
    code, out, err = cli("validate", "no-such-case")
    assert code == 2 and "no validation case starts with 'no-such-case'" in err
    code, out, err = cli("validate", "--list")
    assert code == 0 and "train-korthikanti-selene-table5" in out


def test_strict_passes_when_every_target_is_met_and_fails_when_one_is_missed(cli):
    code, out, err = cli("validate", "train", "mem", "net", "--strict", "-f", "markdown")
    assert code == 0, err
    assert "Targets met: 11 of 11." in out
    # the serving set: the MLPerf Mixtral row is out of its ±15 % (botec over-predicts the MoE throughput)
    code, out, err = cli("validate", "serve", "--strict", "-f", "markdown")
    assert code == 1
    assert "Targets met: 4 of 5." in out and "serve-mlperf-v41-mixtral-offline" in out
