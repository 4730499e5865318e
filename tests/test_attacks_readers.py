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


# --- issue 28: every reader, nested 100,000 deep and a 5,000-digit number: exit 2, one line -------------------

LESSON = EXAMPLES / "lesson-finetune-1b.yaml"
LLAMA_CONFIG = REPO / "tests" / "data" / "hf" / "llama-3.1-8b" / "config.json"


def one_line_refusal(cli, *args) -> str:
    """``botec ARGS``: exit 2, nothing on stdout, one line on stderr; that line, its prefix removed."""
    code, out, err = cli(*args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, (code, out[:200], err[:400])
    assert "internal error" not in err and len(lines[0]) < 600
    return lines[0].removeprefix("botec: error: ")


def lesson_json() -> dict:
    from botec.yamlfile import load_user_yaml

    return load_user_yaml(LESSON.read_text())


def contract_naming(tmp_path, config) -> str:
    """A serving contract whose model is ``{config: CONFIG}``."""
    from botec.yamlfile import load_user_yaml

    data = load_user_yaml(SERVING.read_text())
    data["workload"]["model"] = {"config": str(config)}
    path = tmp_path / "contract.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_json_contract_nested_100000_deep_names_where(cli, tmp_path):
    head = json.dumps(lesson_json())[:-1] + ', "x": '
    path = tmp_path / "deep.json"
    path.write_text(head + DEEP + "}")
    assert one_line_refusal(cli, "estimate", str(path)) == (
        f"{path}: JSON nested too deep: more than 64 levels at line 1, column {len(head) + 64} (no file botec reads "
        "nests that deep)")


def test_a_json_contract_with_a_5000_digit_count_names_the_field(cli, tmp_path):
    path = tmp_path / "digits.json"
    path.write_text(json.dumps(lesson_json()).replace('"micro_batch_size": 2', '"micro_batch_size": ' + "9" * 5000))
    assert "9" * 5000 in path.read_text()
    assert one_line_refusal(cli, "estimate", str(path)) == (
        f"{path}: strategy.micro_batch_size: expected a count such as '2,048', '1e9', '7B' or '2T tokens', got inf "
        "(not a finite number)")


@pytest.mark.parametrize("attack", ["nested", "digits"])
def test_a_config_json_attack_is_one_line_in_model_and_in_estimate(attack, cli, tmp_path):
    text = LLAMA_CONFIG.read_text()
    if attack == "nested":
        text = text.rstrip()[:-1] + ', "x": ' + DEEP + "}"
        expected = "JSON nested too deep: more than 64 levels at line"
    else:
        text = text.replace('"num_hidden_layers": 32', '"num_hidden_layers": ' + "9" * 5000)
        expected = "num_hidden_layers: expected a whole number from 1 to 100,000, got inf"
    config = tmp_path / "config.json"
    config.write_text(text)
    assert one_line_refusal(cli, "model", str(config)).startswith(f"{config}: {expected}")
    assert one_line_refusal(cli, "estimate", contract_naming(tmp_path, config)).startswith(
        f"workload.model.config: {expected}")


def test_an_sglang_line_with_a_5000_digit_count_names_the_run(cli, tmp_path):
    lines = SGLANG.read_text().splitlines()
    runs = [json.loads(line) for line in lines]
    text = "\n".join(lines[:-1] + [with_raw(runs[-1], "completed", "9" * 5000)]) + "\n"
    assert refused(cli, tmp_path, SERVING, text, "run.jsonl") == f"completed: inf (run {len(runs)} of {len(runs)}): " \
                                                                  f"{COUNT}"


# --- reliability-3 D9: a lone surrogate in a string a reader keeps is printable ---------------------------------

def test_a_lone_surrogate_in_an_sglang_line_is_printed_as_the_replacement_character(cli, tmp_path):
    """D9 as found: ``"backend": "\\ud83d"`` (a JSON escape) in the run calibrate uses crashed its report with
    UnicodeEncodeError; the reader now keeps U+FFFD in its place (capsys's stream is UTF-8 and strict, as a
    terminal's is), and -o writes the calibrated contract."""
    lines = SGLANG.read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["backend"] == "vllm"   # the engine the benchmark measured
    path, target = tmp_path / "run.jsonl", tmp_path / "calibrated.yaml"
    path.write_text("\n".join(lines[:-1] + [with_raw(last, "backend", '"\\ud83d"')]) + "\n")
    assert '"backend": "\\ud83d"' in path.read_text()
    code, out, err = cli("calibrate", str(SERVING), str(path))
    assert code == 0 and "backend \ufffd" in out, err
    code, out, err = cli("calibrate", str(SERVING), str(path), "-o", str(target))
    assert code == 0 and target.exists(), err


def test_lone_surrogates_in_every_string_of_a_vllm_result_are_printable(cli, tmp_path):
    data = vllm()
    text = json.dumps({key: ("\ud83d" if isinstance(value, str) else value) for key, value in data.items()})
    assert text.count('"\\ud83d"') >= 4   # date, backend, model_id, tokenizer_id, ...
    path = tmp_path / "run.json"
    path.write_text(text)
    code, out, err = cli("calibrate", str(SERVING), str(path))
    assert code == 0 and "model \ufffd, backend \ufffd" in out, err


def test_the_json_reader_replaces_only_lone_surrogates():
    from botec.jsonfile import load_json_rows, load_json_text

    text = r'{"a\ud83d": ["x\ud83d\ude00y", "\udc00", "\\ud83d"], "b": "\ud800"}'
    assert load_json_text(text) == {"a\ufffd": ["x\U0001f600y", "\ufffd", "\\ud83d"], "b": "\ufffd"}
    assert load_json_rows([r'{"a": "\ud83d"}']) is None and load_json_rows(['{"a": "b"}']) == [{"a": "b"}]


def test_a_json_contract_named_with_a_lone_surrogate_prints(cli, tmp_path):
    path = tmp_path / "named.json"
    path.write_text(with_raw(lesson_json(), "name", '"lesson \\ud83d"'))
    code, out, err = cli("estimate", str(path))
    assert code == 0 and out.startswith("botec estimate: lesson \ufffd\n"), err


# --- reliability-3 D9b: a NUL byte in a path a user wrote in a file ---------------------------------------------

NUL = "expected a file path without a NUL byte (\\x00), got "


def test_a_nul_byte_in_a_study_contract_path_names_the_entry(cli, tmp_path):
    """D9b as found: ``contracts: ["\\x00"]`` ended in ``internal error: ValueError: embedded null byte``."""
    study = tmp_path / "s.yaml"
    study.write_text('study: nul\ncontracts: ["\\x00"]\n')
    assert one_line_refusal(cli, "study", str(study)) == f"{study}: contracts[0]: {NUL}'\\x00'"


@pytest.mark.parametrize("field, value, shown", [
    ("workload.model", '{config: "a\\0.json"}', "workload.model.config: "),
    ("assumptions.speculative_decoding", '{draft_tokens: 4, acceptance_rate: 0.7, method: draft_model, '
                                         'draft_model: "a\\0.json"}', "assumptions.speculative_decoding.draft_model: "),
    ("assumptions.efficiency_curve", '"a\\0.yaml"', "assumptions.efficiency_curve: "),
], ids=["model-config", "draft-model", "efficiency-curve"])
def test_a_nul_byte_in_a_path_a_contract_names_is_one_line_naming_the_field(field, value, shown, cli, tmp_path):
    contract = SERVING if field != "assumptions.efficiency_curve" else TRAINING
    message = one_line_refusal(cli, "estimate", str(contract), "--set", f"{field}={value}")
    assert message.startswith(shown) and NUL in message and "\x00" not in message, message


def test_every_file_reader_refuses_a_nul_path_in_one_line():
    """The shared check (botec.errors.check_user_path) in read_text_file, which every reader of a user's file but
    the trace's goes through (a histogram, a config.json, a measurement), and in the trace's own reader."""
    from botec.errors import ContractError, read_text_file
    from botec.simulate.trace import trace_stream
    from botec.simulate.workload import read_histogram

    for read in (lambda path: read_text_file(path, "config.json"), read_histogram):
        with pytest.raises(ContractError) as caught:
            read("dir/a\x00b.csv")
        assert str(caught.value) == f"{NUL}'dir/a\\x00b.csv'"
    with pytest.raises(ContractError) as caught:
        trace_stream("a\x00.csv")
    assert str(caught.value) == f"--trace: {NUL}'a\\x00.csv'"
