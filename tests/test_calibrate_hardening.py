"""`botec calibrate` refuses what it cannot honestly write (issue 21): a log from another device, a log in the wrong
unit, a step with no tokens, a back-solved value a contract cannot hold, a figure that is not finite; it writes
relative paths that resolve from the written contract; its warm-up and outlier rule is linear in the logged
iterations; on a core install it names the extra to install. Every refusal is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import LESSON
from test_calibrate_device import measurement_data

from botec.measure.logs import LoggedStep, median_without, summarize
from botec.measure.logs.records import Parsed

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "examples"
TITAN = DATA / "torchtitan-llama2-7b.log"          # 8 × A100-SXM4-80GB
TITAN_H100 = DATA / "torchtitan-2024.log"          # NVIDIA H100 80GB HBM3, no workload stated
A100_CONTRACT = EXAMPLES / "llama2-7b-fsdp-finetune.yaml"   # a100-sxm-80gb, op-level: matmul_efficiency


def _refused(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith("botec: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    for word in words:
        assert word in err, err


# ------------------------------------------------------------------------------------------------ linear

class CountedFloat(float):
    """A float that counts the comparisons made with it (sorting and medians compare with ``<``)."""

    count = 0

    def __lt__(self, other):
        CountedFloat.count += 1
        return float.__lt__(self, other)

    def __gt__(self, other):
        CountedFloat.count += 1
        return float.__gt__(self, other)


def _comparisons(n: int) -> int:
    draw = random.Random(n)
    steps = [LoggedStep(10 * (i + 1), i + 1, seconds=CountedFloat(1.0 + draw.random() / 10)) for i in range(n)]
    CountedFloat.count = 0
    log = summarize(Parsed("megatron", steps, {}), "run.log", warmup=2, outlier_factor=2.0)
    assert len(log.used) == n - 2
    return CountedFloat.count


def test_the_outlier_rule_is_linear_in_the_logged_iterations():
    """Doubling the iterations about doubles the comparisons (n log n: × 2.2 from 2,000 to 4,000); the median of
    the others taken afresh for each iteration made it × 4 (0.6.0: 32,000 iterations took 52 s)."""
    small, large = _comparisons(2000), _comparisons(4000)
    assert large / small < 2.5
    assert large < 60 * 4000


@pytest.mark.parametrize("values, left_out, median", [
    ([1.0, 2.0, 3.0, 10.0], 10.0, 2.0),       # the rest 1, 2, 3
    ([1.0, 2.0, 3.0, 10.0], 1.0, 3.0),        # 2, 3, 10
    ([1.0, 2.0, 3.0], 2.0, 2.0),              # (1 + 3) / 2
    ([1.0, 1.0, 1.0, 5.0, 5.0], 5.0, 1.0),    # 1, 1, 1, 5: (1 + 1) / 2
    ([4.0, 9.0], 9.0, 4.0),
])
def test_the_median_of_the_rest(values, left_out, median):
    assert median_without(values, left_out) == median


def test_the_rest_median_agrees_with_recomputing_it():
    import statistics

    draw = random.Random(7)
    values = sorted(draw.choice([0.5, 1.0, 1.0, 1.5, 2.0, 8.0]) for _ in range(41))
    for value in set(values):
        rest = list(values)
        rest.remove(value)
        assert median_without(values, value) == statistics.median(rest)


# ------------------------------------------------------------------------------------------------ devices

def test_a_log_from_another_device_is_refused(tmp_path, cli):
    target = tmp_path / "never.yaml"
    _refused(*cli("calibrate", str(A100_CONTRACT), str(TITAN_H100), "-o", str(target)),
             "supply.accelerator", "NVIDIA H100 80GB HBM3", "a100-sxm-80gb", "--device-independent-only")
    assert not target.exists()


def test_device_independent_only_never_writes_an_efficiency(tmp_path, cli):
    """0.6.0 wrote matmul_efficiency 0.45 from this H100 log into the A100 contract, flag or not."""
    target = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(A100_CONTRACT), str(TITAN_H100), "--device-independent-only", "-f",
                         "json", "-o", str(target))
    assert code == 0, err
    data = json.loads(out)
    assert data["assumptions"] == {}
    assert {c["unit"] for c in data["comparisons"]} == {"B"}            # the peak memory only
    assert data["missing"][0].startswith("matmul_efficiency, step time, tokens/s and FLOP/s: measured on NVIDIA H100")
    header, body = target.read_text(encoding="utf-8").split("\n", 1)
    assert header.startswith("# botec calibrated contract")
    assert "provenance: measured" not in body and "matmul_efficiency" not in body


def test_the_same_device_log_still_calibrates(cli):
    code, out, err = cli("calibrate", str(A100_CONTRACT), str(TITAN), "-f", "json")
    assert code == 0, err
    assert list(json.loads(out)["assumptions"]) == ["assumptions.matmul_efficiency"]


def test_a_serving_benchmark_has_nothing_device_independent(tmp_path, cli):
    _refused(*cli("calibrate", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"),
                  str(EXAMPLES / "benchmarks" / "vllm-llama3.1-8b-h100.json"), "--device-independent-only",
                  "-o", str(tmp_path / "never.yaml")), "--device-independent-only", "serving benchmark")
    assert not (tmp_path / "never.yaml").exists()


# ------------------------------------------------------------------------------------------------ wrong figures

def _megatron(times_ms, extra: str = "") -> str:
    return "\n".join(f" iteration {10 * (i + 1):8d}/     100 | elapsed time per iteration (ms): {ms} |{extra}"
                     for i, ms in enumerate(times_ms))


@pytest.mark.parametrize("times, words", [
    # the lesson: 4 × 200 TFLOP/s, 6 GFLOP per token, 16,384 tokens a step (0.512 s estimated); the median of the
    # kept 0.50 and 0.51 ms, 0.505 ms: 16,384 / 0.505 ms × 6e9 / (4 × 200e12) = 243
    (["0.51", "0.52", "0.50", "0.51"], ("MFU of 243", "above 1", "seconds where Megatron-LM prints ms")),
    (["512000", "520000", "500000", "510000"], ("below 0.001", "µs or another unit")),
])
def test_a_log_in_the_wrong_unit_is_refused(tmp_path, cli, times, words):
    log = tmp_path / "run.log"
    log.write_text(_megatron(times), encoding="utf-8")
    target = tmp_path / "never.yaml"
    _refused(*cli("calibrate", str(LESSON), str(log), "-o", str(target)), f"{log}: elapsed time per iteration (ms)",
             *words)
    assert not target.exists()


def test_a_step_with_no_tokens_is_one_line(tmp_path, cli):
    text = TITAN.read_text(encoding="utf-8").replace("tps: 2,410", "tps: 0")
    log = tmp_path / "zero.log"
    log.write_text(text, encoding="utf-8")
    _refused(*cli("calibrate", str(A100_CONTRACT), str(log)), f"{log}: tps: line 8 gives '0'",
             "expected a positive number of tokens per second")


def test_a_zero_step_time_is_one_line(tmp_path, cli):
    log = tmp_path / "zero.log"
    log.write_text(_megatron(["1000.0", "0.0", "1000.0"]), encoding="utf-8")
    _refused(*cli("calibrate", str(LESSON), str(log)), "elapsed time per iteration (ms): line 2 gives '0.0'")


def test_a_figure_out_of_range_never_reaches_json_as_infinity(tmp_path, cli):
    log = tmp_path / "huge.log"
    log.write_text(_megatron(["512.0"] * 4, " throughput per GPU (TFLOP/s/GPU): 1e300 |"), encoding="utf-8")
    code, out, err = cli("calibrate", str(LESSON), str(log), "--allow-workload-change", "-f", "json")
    _refused(code, out, err, "FLOP/s per accelerator (as logged)", "not a finite number")
    assert "Infinity" not in out


def test_a_negative_saved_tensor_factor_is_not_written(tmp_path, cli):
    """0.6.0 wrote saved_tensor_factor -3, which `botec estimate` then refused."""
    data = measurement_data()
    data["memory"]["saved_tensor_factor"] = -3.0
    run = tmp_path / "run.json"
    run.write_text(json.dumps(data), encoding="utf-8")
    target = tmp_path / "never.yaml"
    _refused(*cli("calibrate", str(LESSON), str(run), "--device-independent-only", "-o", str(target)),
             "assumptions.saved_tensor_factor: -3 back-solved", "is not a value a contract takes", "nothing written")
    assert not target.exists()


# ------------------------------------------------------------------------------------------------ paths

def test_a_relative_config_path_resolves_from_the_written_contract(tmp_path, cli):
    from botec.estimation import estimate_file

    project = tmp_path / "project"
    (project / "hf").mkdir(parents=True)
    shutil.copy(DATA / "hf" / "llama-2-7b" / "config.json", project / "hf" / "config.json")
    contract = yaml.safe_load(A100_CONTRACT.read_text(encoding="utf-8"))
    contract["workload"]["model"] = {"config": "hf/config.json"}
    (project / "job.yaml").write_text(yaml.safe_dump(contract, sort_keys=False), encoding="utf-8")
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "job.calibrated.yaml"
    code, out, err = cli("calibrate", str(project / "job.yaml"), str(TITAN), "-o", str(target))
    assert code == 0, err
    written = yaml.safe_load(target.read_text(encoding="utf-8"))
    assert written["workload"]["model"]["config"] == "../project/hf/config.json"
    assert estimate_file(target).quantities["matmul_efficiency"].provenance == "measured"


# ------------------------------------------------------------------------------------------------ core install

def test_calibrate_names_its_extra_on_a_core_install():
    script = ("import sys\nsys.modules['numpy'] = None\nsys.argv = ['botec'] + sys.argv[1:]\n"
              "from botec.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", script, "calibrate", str(LESSON), str(TITAN)], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    _refused(done.returncode, done.stdout, done.stderr, "pip install 'botec[array]'", "botec calibrate")


# ------------------------------------------------------------------------------------------------ round trip

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step_ms=st.floats(1e-3, 1e9), flops=st.one_of(st.none(), st.floats(0, 1e300)),
       saved=st.floats(-20, 50), activations=st.floats(-1e10, 1e11), save_seconds=st.floats(0, 1e5),
       log=st.booleans())
def test_calibrate_writes_only_what_estimate_accepts(tmp_path, cli, step_ms, flops, saved, activations,
                                                      save_seconds, log):
    """A generated Megatron log or botec measurement -> calibrate -> the written contract: `botec estimate`
    accepts it, or calibrate refused in one line (exit 2) and wrote nothing."""
    from botec.estimation import estimate_file

    if log:
        extra = f" throughput per GPU (TFLOP/s/GPU): {flops:g} |" if flops is not None else ""
        measured = tmp_path / "run.log"
        measured.write_text(_megatron([f"{step_ms:g}"] * 4, extra), encoding="utf-8")
        options = ["--allow-workload-change"]
    else:
        data = measurement_data()
        data["memory"] |= {"saved_tensor_factor": saved, "activations_bytes": activations}
        data["checkpoint"]["seconds"] = save_seconds
        measured = tmp_path / "run.json"
        measured.write_text(json.dumps(data), encoding="utf-8")
        options = ["--device-independent-only"]
    target = tmp_path / "calibrated.yaml"
    target.unlink(missing_ok=True)
    code, out, err = cli("calibrate", str(LESSON), str(measured), *options, "-f", "json", "-o", str(target))
    if code == 2:
        _refused(code, out, err)
        assert not target.exists()
        return
    assert code == 0, err
    assert "Infinity" not in out and "NaN" not in out
    json.loads(out)
    assert estimate_file(target).value("run_seconds") > 0


# ------------------------------------------------------------------------------------------------ linear in a line

# The patterns as they were at ee7e497 (quadratic, or cubic, in one line's length: reliability-3 D2), kept here as
# the reference the linear ones must agree with on every line short enough for the old ones to read.
OLD_TIMER_ENTRY = re.compile(r"(\S+) \.{2,}: \(?(\d+(?:\.\d+)?)(?:, (\d+(?:\.\d+)?))?\)?")
OLD_MEMORY = re.compile(r"\[Rank (\d+)\]\s*(.*?)\s*memory \((MB|GB|MiB|GiB)\)\s*((?:\|[^|]*)+)$")
OLD_ARGUMENT = re.compile(r"^\s*([a-z_][a-z0-9_]*) \.{2,} (\S.*?)\s*$")
OLD_TOKENS_RATE = re.compile(r"\btok(?:en)?s?\b.*(?:per second|per sec|/s\b)|\btgs\b|tokens/s")
OLD_MESH = re.compile(r"Building \d+-D device mesh with \[([^\]]*)\],\s*\[([^\]]*)\]")
OLD_CAPACITY = re.compile(r"\b(?:CUDA|GPU|ROCM|XPU|NPU) capacity:\s*(.+?) with (\d+(?:\.\d+)?)\s*GiB memory")
FRAGMENTS = [" ", "  ", "a", "seq_length", "x-y", "...", ".", ": ", "(", ")", ", ", "12", "3.5", "[Rank 4]",
             "(after 10 iterations)", "memory (MB)", "memory (GiB)", "|", " | allocated: 5", "tok", "tokens", "per",
             " second", "/s", "tgs", "Building 2-D device mesh with [", "'dp', 'tp'", "], [", "4, 2", "]",
             "GPU capacity: ", "NVIDIA H100", " with ", "79.1", " GiB memory", "\t"]
LINES = st.lists(st.sampled_from(FRAGMENTS), max_size=14).map("".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINES)
def test_the_linear_patterns_read_every_line_the_old_ones_read(line):
    from botec.measure.logs import megatron, torchtitan

    def groups(pattern, text, method="search", pick=None):
        found = getattr(pattern, method)(text)
        return None if found is None else tuple(found.group(i) for i in (pick or range(1, pattern.groups + 1)))

    assert groups(megatron._TIMER_ENTRY, line) == groups(OLD_TIMER_ENTRY, line)
    assert groups(megatron._MEMORY, line, pick=(1, 3, 4)) == groups(OLD_MEMORY, line, pick=(1, 3, 4))
    new_argument, old_argument = megatron._ARGUMENT.match(line), OLD_ARGUMENT.match(line)
    assert (new_argument is None) == (old_argument is None)
    if new_argument:
        assert (new_argument.group(1), new_argument.group(2).strip()) == old_argument.groups()
    assert megatron._is_tokens_rate(line) == (OLD_TOKENS_RATE.search(line) is not None)
    assert groups(torchtitan._TT_MESH_OLD, line) == groups(OLD_MESH, line)
    assert groups(torchtitan._TT_CAPACITY, line) == groups(OLD_CAPACITY, line)


@pytest.mark.parametrize("long_line", [
    " bf16 ...... True" + "9" * 20_000,                    # reliability-3 D2's line: digits after an argument
    "a" * 20_000,                                          # one long word
    "[Rank 0]" + " " * 20_000 + "x",                       # the memory pattern's spaces (cubic at ee7e497)
])
def test_a_log_with_a_long_line_reads_as_the_log_without_it(long_line):
    """The long line is no entry of any kind (benchmarks/calibrate_long_line.py times it at 1 MB)."""
    from botec.measure.logs import parse

    text = (EXAMPLES / "logs" / "megatron-gpt3-175b.log").read_text(encoding="utf-8")
    lines = text.split("\n")
    assert lines[3].startswith("  bf16 ....")
    with_it = parse("\n".join(lines[:3] + [long_line] + lines[4:]), "x.log")
    without = parse("\n".join(lines[:3] + lines[4:]), "x.log")
    assert with_it == without
    assert without.stated["global_batch_size"] == 1536 and without.memory_ranks == 8   # ranks 0, 128, … 896


# ------------------------------------------------------------------------------------------------ not above 0

MEGATRON_LOG = EXAMPLES / "logs" / "megatron-gpt3-175b.log"
VLLM_RESULT = EXAMPLES / "benchmarks" / "vllm-llama3.1-8b-h100.json"
SERVE_8B = EXAMPLES / "serve-llama3.1-8b-h100.yaml"


def _line_of(text: str, fragment: str) -> int:
    return text[:text.index(fragment)].count("\n") + 1


@pytest.mark.parametrize("source, contract, old, new, field", [
    # reliability-3 D11: −5,000 TFLOP/s/GPU was "measured −5 PFLOP/s (× −38.1)", exit 0
    (MEGATRON_LOG, EXAMPLES / "gpt3-175b-search.yaml", "(TFLOP/s/GPU): 62.4", "(TFLOP/s/GPU): -5000",
     "throughput per GPU (TFLOP/s/GPU)"),
    (MEGATRON_LOG, EXAMPLES / "gpt3-175b-search.yaml", "(TFLOP/s/GPU): 62.4",
     "(TFLOP/s/GPU): 62.4 | tokens per GPU (tokens/s/GPU): 0", "tokens per GPU (tokens/s/GPU)"),
    (TITAN, A100_CONTRACT, "tps: 2,410", "tps: -2,410", "tps"),      # was read as no rate: the line skipped
    (TITAN, A100_CONTRACT, "tflops: 111.06", "tflops: -111.06", "tflops"),
    (TITAN, A100_CONTRACT, "mfu: 35.60%", "mfu: 0%", "mfu"),
])
def test_a_logged_rate_not_above_zero_is_refused_naming_its_key_and_line(source, contract, old, new, field,
                                                                         tmp_path, cli):
    text = source.read_text(encoding="utf-8")
    log = tmp_path / "run.log"
    log.write_text(text.replace(old, new, 1), encoding="utf-8")
    written = new.rpartition(" ")[2].rstrip("%")
    _refused(*cli("calibrate", str(contract), str(log), "-o", str(tmp_path / "never.yaml")),
             f"{log}: {field}: line {_line_of(text, old)} gives '{written}': expected a positive")
    assert not (tmp_path / "never.yaml").exists()


@pytest.mark.parametrize("key, value", [
    ("p99_ttft_ms", -5),            # reliability-3 D11: accepted without comment
    ("median_tpot_ms", 0),
    ("p99_e2el_ms", -3071.9),
    ("mean_itl_ms", -10.01),        # optional: was read as absent
    ("request_rate", -4.0),         # optional: was read as not stated
])
def test_a_benchmark_latency_or_rate_not_above_zero_is_refused_naming_the_key(key, value, tmp_path, cli):
    data = json.loads(VLLM_RESULT.read_text(encoding="utf-8"))
    assert key in data
    data[key] = value
    result = tmp_path / "run.json"
    result.write_text(json.dumps(data), encoding="utf-8")
    _refused(*cli("calibrate", str(SERVE_8B), str(result)), f"{result}: {key}: {value}: expected a number above 0")


def test_the_benchmark_as_shipped_still_calibrates(cli):
    code, out, err = cli("calibrate", str(SERVE_8B), str(VLLM_RESULT))
    assert code == 0, err
