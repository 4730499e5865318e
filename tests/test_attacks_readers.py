"""Issue 21, the readers of a user's measurements: a `botec measure` file, a vLLM or SGLang benchmark result and an
efficiency curve, each attacked through the CLI. Every attack was an internal error (exit 1: RecursionError,
OverflowError, ValueError) or a silently accepted absurdity; each is now one line naming the field (or the line
where the nesting passes 64 levels) and what was expected, exit 2, and no calibrated contract written."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLES, REPO, tiny_cpu_contract

VLLM = EXAMPLES / "benchmarks" / "vllm-llama3.1-8b-h100.json"
SGLANG = EXAMPLES / "benchmarks" / "sglang-llama3.1-8b-h100.jsonl"
SERVING = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
TRAINING = EXAMPLES / "llama3.1-8b-finetune-h100.yaml"
MEASUREMENT = REPO / "tests" / "data" / "measurement-tiny-cpu.json"
DEEP = "[" * 100_000 + "]" * 100_000            # 200 KB; Python's json recursed past its limit on it
RAW = "@raw@"


def with_raw(data: dict, key: str, raw: str) -> str:
    """``data`` as JSON with ``key``'s value written as the raw text ``raw`` (what json.dumps cannot write)."""
    return json.dumps({**data, key: RAW}).replace(f'"{RAW}"', raw)


def refused(cli, tmp_path, contract, text: str, name: str = "run.json") -> str:
    """Calibrate ``contract`` from a file of ``text`` with -o: exit 2, one line, nothing written; the line."""
    path, target = tmp_path / name, tmp_path / "calibrated.yaml"
    path.write_text(text)
    code, out, err = cli("calibrate", str(contract), str(path), "-o", str(target))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and out == "", (code, out, err)
    assert "internal error" not in err and "Traceback" not in err and len(lines[0]) < 600
    assert not target.exists()
    return lines[0].removeprefix(f"botec: error: {path}: ")


def vllm() -> dict:
    return json.loads(VLLM.read_text())


# --- nesting: refused before parsing, naming the line and column ---------------------------------------------

def test_a_vllm_result_nested_100000_deep_names_where(cli, tmp_path):
    head = json.dumps(vllm())[:-1] + ', "extra": '
    message = refused(cli, tmp_path, SERVING, head + DEEP + "}")
    # the object is level 1: the 64th bracket opens level 65, at column len(head) + 64
    assert message == (f"JSON nested too deep: more than 64 levels at line 1, column {len(head) + 64} "
                       "(no file botec reads nests that deep)")


def test_an_sglang_line_nested_100000_deep_names_its_line(cli, tmp_path):
    first = SGLANG.read_text().splitlines()[0]
    message = refused(cli, tmp_path, SERVING, first + "\n" + '{"backend": "sglang", "x": ' + DEEP + "}\n", "run.jsonl")
    assert message.startswith("JSON nested too deep: more than 64 levels at line 2, column 91 ")


def test_a_measurement_nested_100000_deep_is_refused(cli, tmp_path):
    contract = tmp_path / "tiny.yaml"
    contract.write_text(tiny_cpu_contract())
    text = MEASUREMENT.read_text().rstrip()[:-1] + ', "x": ' + DEEP + "}"
    assert "JSON nested too deep: more than 64 levels at line" in refused(cli, tmp_path, contract, text)


def test_a_log_of_100000_brackets_is_no_measurement(cli, tmp_path):
    """A text starting with '[' may be a JSON measurement or a log with '[titan]' prefixes: nested too deep, it is
    neither, and says what was expected (it used to end in a RecursionError)."""
    contract = tmp_path / "tiny.yaml"
    contract.write_text(tiny_cpu_contract())
    line = refused(cli, tmp_path, contract, "[" * 100_000, name="train.log")
    assert line.startswith("not a recognised measurement: expected a botec measurement")


def test_brackets_inside_strings_do_not_nest():
    from botec.jsonfile import MAX_JSON_DEPTH, load_json_text, too_deep_at

    text = json.dumps({"generated_texts": ["[" * 500, "{" * 500], "itls": [[0.01, 0.02]]})
    assert too_deep_at(text) == -1 and load_json_text(text)["itls"] == [[0.01, 0.02]]
    assert too_deep_at("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) == -1 and too_deep_at("[" * 65) == 64
    assert too_deep_at('"' + '\\"' * 100_000 + "[" * 70) == -1   # an unterminated string: linear, no brackets


# --- numbers a float cannot hold, and counts past 2^63 ------------------------------------------------------

CAP = "expected the cap on requests in flight (null: no cap), a whole number from 1 to below 10^18"
COUNT = "expected a number above 0, whole and below 10^18"


@pytest.mark.parametrize("key, raw, expected", [
    ("max_concurrency", "Infinity", f"max_concurrency: inf: {CAP}"),
    ("max_concurrency", "1e400", f"max_concurrency: inf: {CAP}"),                  # json reads 1e400 as inf
    ("max_concurrency", "9" * 5000, f"max_concurrency: inf: {CAP}"),               # > 4,300 digits: read as inf
    ("max_concurrency", str(2**63), f"max_concurrency: {2**63}: {CAP}"),
    ("max_concurrency", "2.5", f"max_concurrency: 2.5: {CAP}"),
    ("total_input_tokens", str(2**63), f"total_input_tokens: {2**63}: {COUNT}"),
    ("total_output_tokens", "1" + "0" * 30, f"total_output_tokens: {10**30}: {COUNT}"),
    ("completed", str(2**64), f"completed: {2**64}: {COUNT}"),
    ("completed", "1e299", f"completed: 1e+299: {COUNT}"),
    ("failed", "-1", "failed: -1: expected the requests that failed, a whole number from 0 to below 10^18"),
    ("burstiness", "Infinity", "burstiness: inf: expected a finite number above 0 (1: Poisson arrivals)"),
], ids=["inf-cap", "1e400-cap", "5000-digit-cap", "2^63-cap", "fractional-cap", "2^63-tokens", "10^30-tokens",
        "2^64-completed", "1e299-completed", "negative-failed", "inf-burstiness"])
def test_a_vllm_number_out_of_range_names_its_key(cli, tmp_path, key, raw, expected):
    assert refused(cli, tmp_path, SERVING, with_raw(vllm(), key, raw)) == expected


def test_a_1000_digit_failed_count_is_shown_cut(cli, tmp_path):
    message = refused(cli, tmp_path, SERVING, with_raw(vllm(), "failed", "1" + "0" * 1000))
    assert message.startswith("failed: 1000") and "..." in message and message.endswith("from 0 to below 10^18")


def test_an_sglang_run_with_an_infinite_cap_names_the_run(cli, tmp_path):
    lines = SGLANG.read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    text = "\n".join(lines[:-1] + [with_raw(runs[-1], "max_concurrency", "Infinity")]) + "\n"
    assert refused(cli, tmp_path, SERVING, text, "run.jsonl") == f"max_concurrency: inf (run {len(runs)} of " \
                                                                  f"{len(runs)}): {CAP}"


@pytest.mark.parametrize("raw, expected", [
    ("9" * 5000, "workload.tokens_per_step: Input should be a finite number (found inf)"),
    ("Infinity", "workload.tokens_per_step: Input should be a finite number (found inf)"),
    (str(2**63), f"workload.tokens_per_step: Input should be less than 1000000000000000000 (found {2**63})"),
], ids=["5000-digits", "infinity", "2^63"])
def test_a_measurement_count_out_of_range_names_its_field(cli, tmp_path, raw, expected):
    contract = tmp_path / "tiny.yaml"
    contract.write_text(tiny_cpu_contract())
    data = json.loads(MEASUREMENT.read_text())
    data["workload"]["tokens_per_step"] = RAW
    assert refused(cli, tmp_path, contract, json.dumps(data).replace(f'"{RAW}"', raw)) == expected


# --- the efficiency curve a contract names (assumptions.efficiency_curve) ----------------------------------

CURVE = """schema: botec.efficiency-curve/1
device: {name: NVIDIA H100 80GB HBM3, accelerator: h100-sxm, backend: cuda, torch: 2.13.0}
precision: bf16
created: '2026-11-30T12:00:00+00:00'
peak_flops_per_s: 989.4e12
peak_source: catalog h100-sxm bf16
memory_bytes_per_s: 3.35e12
memory_bandwidth_source: catalog h100-sxm
matmul:
- {gflop: 1.0, efficiency: 0.4, m: 2048, k: 4096, n: 64, seconds: 2.5e-06}
- {gflop: 100.0, efficiency: 0.7, m: 4096, k: 4096, n: 3000, seconds: 1.4e-04}
memory:
- {megabytes: 100.0, efficiency: 0.85}
"""


@pytest.mark.parametrize("text, expected", [
    (CURVE.replace("m: 2048", "m: " + "9" * 5000), "at line 10, column 36 (a whole number of 5000 characters (at "
                                                     "most 100))"),
    (CURVE + "extra: " + "[" * 40 + "]" * 40 + "\n", "at line 14, column 39 (nested deeper than 32 levels)"),
    (CURVE.replace("memory:\n", "memory: &points\n") + "matmul_again: *points\n", "at line 14, column 1 "
                                                                                  "(anchors and aliases"),
], ids=["5000-digit-integer", "40-deep", "alias"])
def test_a_curve_file_that_would_bomb_the_reader_is_one_line(cli, tmp_path, text, expected):
    curve, target = tmp_path / "curve.yaml", tmp_path / "out.json"
    curve.write_text(text)
    code, out, err = cli("estimate", str(TRAINING), "--set", f"assumptions.efficiency_curve={curve}", "-f", "json",
                         "-o", str(target))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "internal error" not in err, (code, err)
    assert lines[0].startswith(f"botec: error: {curve}: not an efficiency curve: corrupt or truncated YAML ")
    assert expected in lines[0] and not target.exists()


def test_the_good_curve_is_read(cli, tmp_path):
    """The attacks above edit a curve that works: the estimate takes its e_mem (0.85) as measured."""
    curve = tmp_path / "curve.yaml"
    curve.write_text(CURVE)
    code, out, err = cli("estimate", str(TRAINING), "--set", f"assumptions.efficiency_curve={curve}", "-f", "json")
    assert code == 0, err
    quantity = next(q for q in json.loads(out)["quantities"] if q["name"] == "memory_bandwidth_efficiency")
    assert quantity["value"] == pytest.approx(0.85) and quantity["source"]["provenance"] == "measured"
