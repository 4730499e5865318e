"""`botec calibrate` of a serving contract from a vLLM or SGLang serving-benchmark result: reading both formats
(ms -> s, the traffic from the totals, the runs of a JSON-lines file), the one-line errors, and the calibration
itself. The fixtures are written here: their latencies are botec's own estimate of the example contract with
known efficiencies (so calibrating the unchanged contract must give those efficiencies back), or botec's
estimate scaled by stated factors. No number below is copied from a run of the code under test: each is the
fixture's own figure, or botec's estimate of a contract edited here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from botec.contract import parse_contract, read_contract_data
from botec.errors import ContractError
from botec.estimation import estimate
from botec.measure import serving_bench
from botec.measure.calibrate import measured_contract_data
from botec.measure.logs import read_measurement

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
CONTRACT = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
LESSON = EXAMPLES / "lesson-finetune-1b.yaml"
PROMPT, OUTPUT, COMPLETED = 1024, 256, 400


# --------------------------------------------------------------------------------------------- fixtures

def botec_at(rps: float, changes: dict | None = None, prompt: int = PROMPT, output: int = OUTPUT,
             percentile: int = 99, contract: Path = CONTRACT) -> dict[str, float]:
    """botec's estimate of the example contract, edited here by hand: the given traffic on one replica (no
    targets, utilization cap 1) and ``changes`` (dotted contract paths) applied."""
    data = read_contract_data(contract)
    data["workload"]["traffic"] = {"requests_per_second": rps, "prompt_tokens": prompt, "output_tokens": output}
    data["workload"]["latency"] = {"percentile": percentile}
    data["assumptions"]["utilization_cap"] = 1
    data["supply"].pop("candidates", None)
    for dotted, value in (changes or {}).items():
        section, key = dotted.split(".")
        data[section][key] = value
    result = estimate(parse_contract(data, origin="test"), base_dir=contract.parent, compare=False)
    return {name: float(quantity.value) for name, quantity in result.quantities.items()
            if isinstance(quantity.value, (int, float))}


def figures(q: dict[str, float]) -> dict[str, float]:
    """A run's latencies (seconds) as botec estimates them."""
    return {"ttft": q["time_to_first_token_seconds"], "tpot": q["time_per_output_token_seconds"],
            "ttft_p99": q["time_to_first_token_percentile_seconds"],
            "tpot_p99": q["time_per_output_token_percentile_seconds"], "e2e": q["end_to_end_latency_seconds"]}


def vllm_result(rps: float, f: dict[str, float], completed: int = COMPLETED, prompt: int = PROMPT,
                output: int = OUTPUT, **extra) -> dict:
    """A `vllm bench serve --save-result` object (the keys of vllm/benchmarks/serve.py), latencies in ms."""
    duration = completed / rps
    return {"date": "20250301-120000", "endpoint_type": "openai", "backend": "openai", "label": None,
            "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
            "num_prompts": completed, "request_rate": rps, "burstiness": 1.0, "max_concurrency": None,
            "duration": duration, "completed": completed, "failed": 0, "total_input_tokens": completed * prompt,
            "total_output_tokens": completed * output, "request_throughput": rps, "request_goodput": None,
            "output_throughput": completed * output / duration,
            "total_token_throughput": completed * (prompt + output) / duration,
            "mean_ttft_ms": f["ttft"] * 1e3, "median_ttft_ms": f["ttft"] * 1e3, "std_ttft_ms": 1.0,
            "p99_ttft_ms": f["ttft_p99"] * 1e3, "mean_tpot_ms": f["tpot"] * 1e3, "median_tpot_ms": f["tpot"] * 1e3,
            "std_tpot_ms": 0.1, "p99_tpot_ms": f["tpot_p99"] * 1e3, "mean_itl_ms": f["tpot"] * 1e3,
            "median_itl_ms": f["tpot"] * 1e3, "std_itl_ms": 0.5, "p99_itl_ms": f["tpot"] * 2e3,
            "mean_e2el_ms": f["e2e"] * 1e3, "median_e2el_ms": f["e2e"] * 1e3, "std_e2el_ms": 10.0,
            "p99_e2el_ms": f["e2e"] * 1.1e3} | extra


def sglang_line(rps: float, f: dict[str, float], completed: int = COMPLETED, prompt: int = PROMPT,
                output: int = OUTPUT, **extra) -> dict:
    """One `python -m sglang.bench_serving --output-file` line (the keys of python/sglang/bench_serving.py)."""
    duration = completed / rps
    return {"backend": "vllm", "dataset_name": "random", "request_rate": rps, "max_concurrency": None,
            "sharegpt_output_len": None, "random_input_len": prompt, "random_output_len": output,
            "random_range_ratio": 1.0, "duration": duration, "completed": completed,
            "total_input_tokens": completed * prompt, "total_output_tokens": completed * output,
            "total_output_tokens_retokenized": completed * output, "request_throughput": rps,
            "input_throughput": completed * prompt / duration, "output_throughput": completed * output / duration,
            "mean_e2e_latency_ms": f["e2e"] * 1e3, "median_e2e_latency_ms": f["e2e"] * 1e3,
            "std_e2e_latency_ms": 10.0, "p99_e2e_latency_ms": f["e2e"] * 1.1e3,
            "mean_ttft_ms": f["ttft"] * 1e3, "median_ttft_ms": f["ttft"] * 1e3, "std_ttft_ms": 1.0,
            "p99_ttft_ms": f["ttft_p99"] * 1e3, "mean_tpot_ms": f["tpot"] * 1e3, "median_tpot_ms": f["tpot"] * 1e3,
            "std_tpot_ms": 0.1, "p99_tpot_ms": f["tpot_p99"] * 1e3, "mean_itl_ms": f["tpot"] * 1e3,
            "median_itl_ms": f["tpot"] * 1e3, "std_itl_ms": 0.5, "p95_itl_ms": f["tpot"] * 1.5e3,
            "p99_itl_ms": f["tpot"] * 2e3, "concurrency": rps * f["e2e"], "accept_length": None} | extra


def write_json(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def calibrate_json(cli, *args) -> dict:
    code, out, err = cli("calibrate", *map(str, args), "-f", "json")
    assert code == 0, err
    return json.loads(out)


# --------------------------------------------------------------------------------------------- reading

def test_both_formats_read_the_same_run(tmp_path):
    """The same figures in both formats give the same run: ms -> s, lengths from the totals, the last line of a
    JSON-lines file by default, the median as the 50th percentile."""
    f = {"ttft": 0.0315, "tpot": 0.0102, "ttft_p99": 0.0620, "tpot_p99": 0.0118, "e2e": 2.6325}
    vllm = write_json(tmp_path / "run.json", vllm_result(5.0, f))
    earlier = sglang_line(2.0, {key: 2 * value for key, value in f.items()}, completed=100)
    sglang = write_lines(tmp_path / "runs.jsonl", [earlier, sglang_line(5.0, f)])
    a, b = read_measurement(vllm), read_measurement(sglang)
    assert (a.format, a.tool, a.runs) == ("vllm-bench", "vLLM", 1)
    assert (b.format, b.tool, b.run, b.runs) == ("sglang-bench", "SGLang", 2, 2)
    for run in (a, b):
        assert run.completed == 400
        assert run.prompt_tokens == 1024.0 and run.output_tokens == 256.0       # 409,600 / 400 and 102,400 / 400
        assert run.requests_per_s == 5.0 and run.duration_seconds == 80.0      # 400 requests / 5 per second
        assert run.output_tokens_per_s == pytest.approx(1280.0)                # 102,400 tokens / 80 s
        assert run.mean_ttft_seconds == pytest.approx(0.0315)                  # 31.5 ms
        assert run.mean_tpot_seconds == pytest.approx(0.0102)                  # 10.2 ms
        assert run.mean_itl_seconds == pytest.approx(0.0102)
        assert run.mean_e2e_seconds == pytest.approx(2.6325)
        assert run.percentiles["ttft"] == pytest.approx({99: 0.0620, 50: 0.0315})
        assert run.percentiles["tpot"] == pytest.approx({99: 0.0118, 50: 0.0102})
        assert run.percentile == 99
    assert b.percentiles["itl"][95] == pytest.approx(0.0153)                   # SGLang's p95_itl_ms: 15.3 ms
    assert a.date == "2025-03-01" and b.date is None
    first = read_measurement(sglang, run=1)
    assert (first.run, first.completed, first.requests_per_s) == (1, 100, 2.0)
    assert first.mean_ttft_seconds == pytest.approx(0.063)


def test_unlimited_rates_and_percentiles_the_file_chooses(tmp_path):
    f = {"ttft": 0.03, "tpot": 0.01, "ttft_p99": 0.05, "tpot_p99": 0.012, "e2e": 2.58}
    data = vllm_result(5.0, f, request_rate="inf", max_concurrency=32)
    for key in ("p99_ttft_ms", "p99_tpot_ms"):
        del data[key]
    data |= {"p90_ttft_ms": 44.0, "p90_tpot_ms": 11.0, "p99.9_ttft_ms": 80.0}   # --metric-percentiles 90,99.9
    run = serving_bench.parse(json.dumps(data), "run.json")
    assert math.isinf(run.request_rate) and run.max_concurrency == 32 and run.closed_loop and not run.burst
    assert run.percentile == 90                                                  # p99 absent; 99.9 is no target
    assert run.percentiles["ttft"] == pytest.approx({90: 0.044, 50: 0.03})
    # SGLang writes an unlimited rate as Python's json writes float('inf')
    text = json.dumps(sglang_line(5.0, f, request_rate=float("inf")))
    assert "Infinity" in text
    sglang = serving_bench.parse(text, "runs.jsonl")
    assert math.isinf(sglang.request_rate) and sglang.burst


def test_the_measured_contract_is_the_contract_at_the_measured_traffic():
    """Lengths are the totals over the completed requests, rounded; the load the achieved throughput."""
    data = vllm_result(3.0, {"ttft": 0.03, "tpot": 0.01, "ttft_p99": 0.05, "tpot_p99": 0.012, "e2e": 1.0},
                       completed=3) | {"total_input_tokens": 1000, "total_output_tokens": 2, "request_throughput": 2.5}
    run = serving_bench.parse(json.dumps(data), "run.json")
    assert run.prompt_tokens == pytest.approx(1000 / 3)
    contract = read_contract_data(CONTRACT)
    measured = measured_contract_data(contract, run)
    # 1000 / 3 = 333.3 -> 333; 2 / 3 = 0.67 -> 1 (at least one token); the load is request_throughput, 2.5
    assert measured["workload"]["traffic"] == {"requests_per_second": 2.5, "prompt_tokens": 333, "output_tokens": 1}
    assert measured["workload"]["latency"] == {"percentile": 99}           # the targets go, the file's percentile
    assert measured["assumptions"]["utilization_cap"] == 1
    assert "candidates" not in measured["supply"]
    assert measured["strategy"] == contract["strategy"] and measured["workload"]["model"] == "llama-3.1-8b"
    assert contract["workload"]["traffic"]["requests_per_second"] == 20     # the contract's data untouched


# --------------------------------------------------------------------------------------------- errors

def _truncated_vllm() -> str:
    text = json.dumps(vllm_result(5.0, {"ttft": 0.03, "tpot": 0.01, "ttft_p99": 0.05, "tpot_p99": 0.012,
                                        "e2e": 2.58}))
    return text[: text.index('"mean_ttft_ms"') + 20]


def _without(key: str) -> str:
    data = vllm_result(5.0, {"ttft": 0.03, "tpot": 0.01, "ttft_p99": 0.05, "tpot_p99": 0.012, "e2e": 2.58})
    del data[key]
    return json.dumps(data)


def _with(**changes) -> str:
    return json.dumps(vllm_result(5.0, {"ttft": 0.03, "tpot": 0.01, "ttft_p99": 0.05, "tpot_p99": 0.012,
                                        "e2e": 2.58}) | changes)


_LINE = json.dumps(sglang_line(5.0, {"ttft": 0.03, "tpot": 0.01, "ttft_p99": 0.05, "tpot_p99": 0.012, "e2e": 2.58}))


@pytest.mark.parametrize("name, text, options, message", [
    ("cut.json", _truncated_vllm(), [], "corrupt or truncated JSON at line 1, column"),
    ("cut.jsonl", _LINE + "\n" + _LINE[:200], [], "corrupt or truncated JSON at line 2, column"),
    ("no-tpot.json", _without("mean_tpot_ms"), [],
     "mean_tpot_ms: missing: expected a number, the mean time per output token in ms"),
    ("no-throughput.json", _without("request_throughput"), [],
     "request_throughput: missing: expected a number, completed requests per second"),
    ("none.json", _with(completed=0), [], "completed: 0 (no request completed): expected a number above 0"),
    ("text.json", _with(mean_ttft_ms="fast"), [], "mean_ttft_ms: 'fast': expected a number above 0"),
    ("nan.json", _with(mean_tpot_ms=float("nan")), [], "mean_tpot_ms: nan: expected a number above 0"),
    ("empty.json", "", ["--log-format", "vllm-bench"], "empty file: expected a vLLM serving benchmark result"),
    ("list.json", "[1, 2]", ["--log-format", "sglang-bench"], "expected an SGLang serving benchmark result"),
    ("runs.jsonl", _LINE + "\n" + _LINE + "\n", ["--run", "3"], "--run: 3: the file holds 2 run(s); expected 1 to 2"),
])
def test_a_bad_result_file_is_one_line(tmp_path, cli, name, text, options, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    target = tmp_path / "never.yaml"
    code, out, err = cli("calibrate", str(CONTRACT), str(path), *options, "-o", str(target))
    assert code == 2, out + err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    if "--run" not in message:
        assert str(path) in err                                     # names the file
    assert not target.exists() and out == ""


def test_a_serving_result_needs_a_serving_contract_and_the_other_way_round(tmp_path, cli):
    result = write_json(tmp_path / "run.json", json.loads(_with()))
    code, _, err = cli("calibrate", str(LESSON), str(result))
    assert code == 2 and err.count("\n") == 1
    assert "a vLLM serving benchmark calibrates a serving contract (workload.kind: serving)" in err
    code, _, err = cli("calibrate", str(CONTRACT), str(EXAMPLES / "logs" / "megatron-gpt3-175b.log"))
    assert code == 2 and err.count("\n") == 1
    assert "botec calibrate compares a serving contract with a vLLM or SGLang serving benchmark result" in err
    code, _, err = cli("calibrate", str(LESSON), str(EXAMPLES / "logs" / "megatron-gpt3-175b.log"), "--run", "1")
    assert code == 2 and "--run: picks a run of a serving benchmark result" in err


# --------------------------------------------------------------------------------------------- calibration

@pytest.mark.parametrize("share", [0.25, 0.95])
def test_round_trip_recovers_the_efficiencies(tmp_path, cli, share):
    """A run whose latencies are botec's own at memory_bandwidth_efficiency 0.6 and matmul_efficiency 0.5
    (the catalog's: 0.75 and 0.7): calibrating the unchanged contract gives 0.6 and 0.5 back, at a light load
    and at 95 % of that server's capacity, where prefill chunks ride in most steps and each efficiency moves
    the other's figure (two rounds of TPOT-then-TTFT solves are not enough there)."""
    slow = {"assumptions.memory_bandwidth_efficiency": 0.6, "assumptions.matmul_efficiency": 0.5}
    rps = share * botec_at(1.0, slow)["offline_requests_per_s_per_replica"]
    measured = figures(botec_at(rps, slow))
    path = write_json(tmp_path / "run.json", vllm_result(rps, measured))
    data = calibrate_json(cli, CONTRACT, path)
    solved = {key: value["value"] for key, value in data["assumptions"].items()}
    assert solved == pytest.approx({"assumptions.memory_bandwidth_efficiency": 0.6,
                                    "assumptions.matmul_efficiency": 0.5}, abs=0.01)
    assert all(value["source"].startswith("measured: run.json (vLLM serving benchmark, 2025-03-01)")
               for value in data["assumptions"].values())
    # each side of each comparison: botec's estimate of the contract as it is, and the file's figure
    default = botec_at(rps)
    compared = {c["name"]: (c["estimated"], c["measured"]) for c in data["comparisons"]}
    assert compared["time_to_first_token_seconds"] == pytest.approx((default["time_to_first_token_seconds"],
                                                                     measured["ttft"]))
    assert compared["time_per_output_token_seconds"] == pytest.approx((default["time_per_output_token_seconds"],
                                                                       measured["tpot"]))
    assert compared["time_to_first_token_percentile_seconds (P99)"] == pytest.approx(
        (default["time_to_first_token_percentile_seconds"], measured["ttft_p99"]))
    assert compared["time_per_output_token_percentile_seconds (P99)"] == pytest.approx(
        (default["time_per_output_token_percentile_seconds"], measured["tpot_p99"]))
    assert compared["end_to_end_latency_seconds"] == pytest.approx((default["end_to_end_latency_seconds"],
                                                                    measured["e2e"]))
    # botec's output rate at a load is the load × 256 tokens, the file's 102,400 tokens / (400 / rps) s
    assert compared["output_tokens_per_s_per_accelerator"] == pytest.approx((rps * 256, rps * 256))
    # the failed assumption is the one farthest from its assumed value: ln(0.5 / 0.7) beats ln(0.6 / 0.75)
    slower = measured["ttft"] / default["time_to_first_token_seconds"] - 1
    assert data["diagnosis"][0].startswith(f"load: {rps:.4g} requests/s on one replica")
    assert data["diagnosis"][1] == (f"the failed assumption: matmul_efficiency: {default['matmul_efficiency']:.3g} "
                                    f"assumed, {solved['assumptions.matmul_efficiency']:.3g} measured (TTFT "
                                    f"{slower * 100:.0f} % slower than estimated)")
    assert data["serving"]["overloaded"] is False and data["serving"]["percentile"] == 99
    assert data["serving"]["prompt_tokens"] == 1024 and data["serving"]["output_tokens"] == 256


def test_both_formats_calibrate_alike(tmp_path, cli):
    rps = 6.0
    measured = figures(botec_at(rps, {"assumptions.memory_bandwidth_efficiency": 0.65}))
    vllm = calibrate_json(cli, CONTRACT, write_json(tmp_path / "run.json", vllm_result(rps, measured)))
    sglang = calibrate_json(cli, CONTRACT, write_lines(tmp_path / "runs.jsonl", [sglang_line(rps, measured)]))
    assert [c["name"] for c in vllm["comparisons"]] == [c["name"] for c in sglang["comparisons"]]
    assert [c["measured"] for c in vllm["comparisons"]] == pytest.approx(
        [c["measured"] for c in sglang["comparisons"]])
    assert [c["estimated"] for c in vllm["comparisons"]] == pytest.approx(
        [c["estimated"] for c in sglang["comparisons"]])
    assert {k: v["value"] for k, v in vllm["assumptions"].items()} == pytest.approx(
        {k: v["value"] for k, v in sglang["assumptions"].items()})
    assert vllm["assumptions"]["assumptions.memory_bandwidth_efficiency"]["value"] == pytest.approx(0.65, abs=0.01)
    tpot = {c["name"]: c.get("note", "") for c in sglang["comparisons"]}["time_per_output_token_seconds"]
    assert tpot.startswith("SGLang's TPOT is per request (end-to-end − TTFT) / (output tokens − 1), the first "
                           "token excluded")


def test_a_throughput_above_botec_capacity_is_the_first_finding(tmp_path, cli):
    """A closed-loop run whose throughput is botec's saturated capacity at matmul_efficiency 0.9: above the
    contract's (0.7) capacity, said first, and 0.9 back-solved from the throughput."""
    capacity = botec_at(1.0)["offline_requests_per_s_per_replica"]
    rps = botec_at(1.0, {"assumptions.matmul_efficiency": 0.9})["offline_requests_per_s_per_replica"]
    assert rps > capacity
    f = {"ttft": 2.0, "tpot": 0.030, "ttft_p99": 4.0, "tpot_p99": 0.035, "e2e": 9.65}
    path = write_json(tmp_path / "run.json", vllm_result(rps, f, request_rate="inf", max_concurrency=512))
    data = calibrate_json(cli, CONTRACT, path)
    assert data["diagnosis"][0] == (f"botec's saturated capacity, {capacity:.4g} requests/s per replica, is below "
                                    f"the measured {rps:.4g}: the estimate cannot carry the measured load on one "
                                    "replica; botec's step model is too slow for this server, and matmul_efficiency "
                                    "is back-solved from the throughput instead")
    assert data["assumptions"]["assumptions.matmul_efficiency"]["value"] == pytest.approx(0.9, abs=0.01)
    assert set(data["assumptions"]) == {"assumptions.matmul_efficiency"}
    names = [c["name"] for c in data["comparisons"]]
    assert not any(name.startswith("time_to_first_token") for name in names)
    assert data["missing"][0].startswith(f"TTFT: botec's replica cannot carry {rps:.4g} requests/s")
    assert data["serving"]["overloaded"] is True
    assert any(note.startswith("a closed-loop run (max_concurrency 512)") for note in data["notes"])


def test_nothing_back_solved_writes_nothing(tmp_path, cli):
    """Ten times botec's capacity: no matmul_efficiency in (0, 1] carries it; -o writes no contract, exit 1."""
    rps = 10 * botec_at(1.0)["offline_requests_per_s_per_replica"]
    f = {"ttft": 2.0, "tpot": 0.030, "ttft_p99": 4.0, "tpot_p99": 0.035, "e2e": 9.65}
    path = write_json(tmp_path / "run.json", vllm_result(rps, f, max_concurrency=1024))
    target = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(CONTRACT), str(path), "-o", str(target))
    assert code == 1 and not target.exists()
    assert f"no assumption could be back-solved from {path} (see the diagnosis): {target} not written" in err
    assert f"no matmul_efficiency in (0, 1] reproduces the measured {rps:.4g} requests/s" in out


def test_a_tpot_no_efficiency_reproduces_solves_the_step_overhead(tmp_path, cli):
    """A contract that assumes a 3 ms step overhead against a server whose step costs 1 ms: even at a
    bandwidth efficiency of 1 botec's TPOT is too slow, so the step overhead is solved instead (1 ms back)."""
    data = read_contract_data(CONTRACT)
    data["assumptions"]["step_overhead"] = "3 ms"
    # the roofline for the "server" too: a solved efficiency is the roofline's (calibrate sets the GEMM tables
    # aside while it solves), so truth and solve share one step model
    data["assumptions"]["memory_bandwidth_efficiency"] = 0.89
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(data), encoding="utf-8")
    rps = 5.0
    measured = figures(botec_at(rps, {"assumptions.step_overhead": "1 ms"}, contract=contract))
    at_best = botec_at(rps, {"assumptions.memory_bandwidth_efficiency": 1.0}, contract=contract)
    assert at_best["time_per_output_token_seconds"] > measured["tpot"]      # what makes the efficiency fail
    result = calibrate_json(cli, contract, write_json(tmp_path / "run.json", vllm_result(rps, measured)))
    assert result["assumptions"]["assumptions.step_overhead"]["value"] == pytest.approx(1e-3, rel=0.02)
    assert "assumptions.memory_bandwidth_efficiency" not in result["assumptions"]
    assert any(line.startswith("no memory_bandwidth_efficiency in (0, 1] reproduces the measured mean TPOT")
               and line.endswith("solving assumptions.step_overhead instead") for line in result["diagnosis"])
    assert any(line.startswith("the failed assumption: step_overhead: 3 ms assumed, 1 ms measured (TPOT")
               for line in result["diagnosis"])


def test_calibrated_contract_reproduces_the_measured_tpot(tmp_path, cli):
    """-o writes the contract with the back-solved assumptions marked measured, its traffic and targets
    untouched; at the measured traffic its TPOT and TTFT are the measured ones."""
    rps = 6.0
    default = figures(botec_at(rps))
    measured = {key: value * 1.2 for key, value in default.items()} | {"ttft": default["ttft"] * 1.3}
    path = write_json(tmp_path / "run.json", vllm_result(rps, measured))
    target = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(CONTRACT), str(path), "-o", str(target))
    assert code == 0, err
    assert f"wrote {target}" in err
    written = yaml.safe_load(target.read_text(encoding="utf-8"))
    original = read_contract_data(CONTRACT)
    assert written["workload"] == original["workload"]                     # traffic and targets as they were
    assert written["supply"] == original["supply"] and written["strategy"] == original["strategy"]
    for key in ("memory_bandwidth_efficiency", "matmul_efficiency"):
        entry = written["assumptions"][key]
        assert entry["provenance"] == "measured" and entry["source"].startswith("measured: run.json")
        assert 0 < entry["value"] < 1
    assert written["assumptions"]["prefix_cache_hit_rate"] == original["assumptions"]["prefix_cache_hit_rate"]
    parse_contract(written, origin="calibrated")                          # a valid contract
    again = botec_at(rps, {f"assumptions.{key}": written["assumptions"][key]["value"]
                           for key in ("memory_bandwidth_efficiency", "matmul_efficiency")})
    assert again["time_per_output_token_seconds"] == pytest.approx(measured["tpot"], rel=0.02)
    assert again["time_to_first_token_seconds"] == pytest.approx(measured["ttft"], rel=0.02)
    assert "assumptions.memory_bandwidth_efficiency = " in out and "diagnosis:" in out


def test_other_lengths_are_calibrated_at_the_measured_lengths(tmp_path, cli):
    rps = 8.0
    measured = figures(botec_at(rps, prompt=512, output=128))
    path = write_lines(tmp_path / "runs.jsonl", [sglang_line(rps, measured, prompt=512, output=128)])
    code, out, err = cli("calibrate", str(CONTRACT), str(path))
    assert code == 0, err
    assert "estimated as one replica of 1 accelerator(s) at 8 requests/s of 512 + 128 tokens, latencies at P99" in out
    assert "the contract's prompt length is 1,024 tokens, the run's 512.0 (more than 10 % apart)" in out
    assert "the contract's output length is 256 tokens, the run's 128.0 (more than 10 % apart)" in out
    # the run is botec's own estimate of the contract: nothing failed
    assert "mean TTFT and TPOT within 5 % of the estimate: no assumption failed" in out


def test_the_examples_are_labelled_illustrations_and_calibrate(cli):
    for name in ("vllm-llama3.1-8b-h100.json", "sglang-llama3.1-8b-h100.jsonl"):
        path = EXAMPLES / "benchmarks" / name
        for line in path.read_text(encoding="utf-8").splitlines():
            assert json.loads(line)["note"].startswith("HAND-WRITTEN ILLUSTRATION, NOT A MEASUREMENT")
        code, out, err = cli("calibrate", str(CONTRACT), str(path))
        assert code == 0, err
        assert "assumptions.memory_bandwidth_efficiency = " in out and "assumptions.matmul_efficiency = " in out


def test_parse_refuses_what_is_not_a_serving_result():
    with pytest.raises(ContractError, match="not a recognised serving benchmark"):
        serving_bench.parse('{"hello": 1}', "x.json")
    assert serving_bench.detect('{"schema": "botec.measurement/1", "request_throughput": 1}') is None
    assert serving_bench.detect(_truncated_vllm()[:200]) == "vllm-bench"     # the first keys are enough
