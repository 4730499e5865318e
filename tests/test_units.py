"""Parsing and formatting quantities at the boundary."""

from __future__ import annotations

import pytest

from botec.units import UnitError, format_quantity, parse_quantity


@pytest.mark.parametrize("text, dimension, expected", [
    ("32 GB", "bytes", 32e9),
    ("32GB", "bytes", 32e9),
    ("14 GiB", "bytes", 14 * 2**30),
    ("128 KB", "bytes", 128e3),          # the lesson's "KB" is decimal
    ("200 TFLOP/s", "flop_rate", 200e12),
    ("989.4 TFLOPS", "flop_rate", 989.4e12),
    ("2.25 PFLOP/s", "flop_rate", 2.25e15),
    ("6e18 FLOP", "flop", 6e18),
    ("25 GB/s", "byte_rate", 25e9),
    ("200 Gbps", "byte_rate", 25e9),     # bits: 200e9 / 8
    ("200 Gb/s", "byte_rate", 25e9),
    ("1 GB/s", "byte_rate", 1e9),
    ("1 h", "seconds", 3600),
    ("30 min", "seconds", 1800),
    ("2 days", "seconds", 172800),
    ("500 ms", "seconds", 0.5),
    ("2,048", "count", 2048),
    ("1e9", "count", 1e9),
    ("7B", "count", 7e9),
    ("2T tokens", "count", 2e12),
    ("7 B params", "count", 7e9),
    ("16k", "count", 16e3),
    ("30%", "ratio", 0.30),
    ("0.3", "ratio", 0.30),
    ("$2.50/h", "usd_per_hour", 2.5),
    ("2.5 USD/h", "usd_per_hour", 2.5),
    ("700 W", "watts", 700),
    ("1.2 kW", "watts", 1200),
    (2048, "count", 2048),
    (1e9, "bytes", 1e9),
])
def test_parse(text, dimension, expected):
    assert parse_quantity(text, dimension) == pytest.approx(expected)


@pytest.mark.parametrize("text, dimension, message", [
    ("32 GX", "bytes", "unknown unit 'GX' in '32 GX'; expected a byte size"),
    ("5 GB", "seconds", "unknown unit 'GB'"),
    ("fast", "flop_rate", "expected a compute rate"),
    ("", "count", "expected a count"),
    (True, "count", "expected a count"),
    (float("nan"), "bytes", "expected a byte size"),
    (float("inf"), "bytes", "expected a byte size"),
    ("1e999", "count", "not a finite number"),
    ([1, 2], "count", "expected a count"),
])
def test_parse_errors_say_what_was_expected(text, dimension, message):
    with pytest.raises(UnitError) as info:
        parse_quantity(text, dimension)
    assert message in str(info.value)


@pytest.mark.parametrize("value, unit, system, expected", [
    (25.18e9, "B", "decimal", "25.2 GB"),
    (16.777216e6, "B", "decimal", "16.8 MB"),
    (25.18e9, "B", "binary", "23.5 GiB"),
    (128e3, "B/s", "decimal", "128 kB/s"),
    (192e12, "FLOP/s", "decimal", "192 TFLOP/s"),
    (6e18, "FLOP", "decimal", "6 × 10¹⁸ FLOP"),
    (31_250, "s", "decimal", "8.68 h"),
    (14, "s", "decimal", "14 s"),
    (3600, "s", "decimal", "1 h"),
    (7 * 86400, "s", "decimal", "7 days"),
    (195 * 365.25 * 86400, "s", "decimal", "195 years"),
    (0.2344, "fraction", "decimal", "23.4 %"),
    (61_036, "steps", "decimal", "61,036 steps"),
    (1e9, "parameters", "decimal", "1B parameters"),
    (1, "sequences", "decimal", "1 sequence"),
    (1.72e6, "accelerator-hours", "decimal", "1.72M accelerator-hours"),
    (3_094_607, "USD", "decimal", "$3.09M"),
    (1.55, "USD", "decimal", "$1.55"),
    (756e6 * 3600, "J", "decimal", "756 MWh"),
])
def test_format(value, unit, system, expected):
    assert format_quantity(value, unit, system) == expected


@pytest.mark.parametrize("text, dimension", [("32 GB", "bytes"), ("25 GB/s", "byte_rate"), ("1 h", "seconds"),
                                             ("200 TFLOP/s", "flop_rate")])
def test_round_trip(text, dimension):
    value = parse_quantity(text, dimension)
    unit = {"bytes": "B", "byte_rate": "B/s", "seconds": "s", "flop_rate": "FLOP/s"}[dimension]
    assert parse_quantity(format_quantity(value, unit), dimension) == pytest.approx(value)
