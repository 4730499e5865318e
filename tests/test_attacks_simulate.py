"""Issue 21, `botec simulate`'s inputs that hung or crashed: each refused before any long work, in one line naming
the flag, or the trace's line and field, exit code 2 and nothing written; and the warning of a run too short to
reach steady state."""

from __future__ import annotations

import math
import signal

import pytest

from conftest import EXAMPLES, run_cli

H100 = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
FAST = ("--set", "supply.candidates=[]")
HEADER = "arrival_s,prompt_tokens,output_tokens\n"
JSON_LINE = '{"arrival_s": 0, "prompt_tokens": 100, "output_tokens": 10}\n'


@pytest.fixture
def no_hang():
    """A safety net, not the assertion: a case that hangs fails after 20 s instead of stopping the suite (every case
    here is refused in milliseconds)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def hung(signum, frame):
        raise TimeoutError("botec simulate ran for 20 s: it hangs")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def refused(capsys, tmp_path, *arguments) -> str:
    """Run `botec simulate` on the H100 example with ``arguments`` and ``-o``; its one-line error (exit 2, no file)."""
    target = tmp_path / "report.json"
    code, out, err = run_cli(["simulate", str(H100), *FAST, *arguments, "-f", "json", "-o", str(target)], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, (code, err)
    assert "internal error" not in err and "Traceback" not in err
    assert len(lines[0]) < 600, lines[0]             # a bad cell is shown as an excerpt
    assert not target.exists()
    return lines[0]


def trace(tmp_path, text: str, name: str = "trace.csv") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- flags ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, expected", [
    # before: hung (the steps between two arrivals 1e300 s apart were counted one by one)
    (["--rate", "1e-300", "-n", "20"], "--rate: 20 requests at 1e-300 requests/s would take 2e+301 s to arrive; "
                                       "expected at most 1,000,000,000 s (31.7 years)"),
    (["--rate", "1e-8", "-n", "20"], "--rate: 20 requests at 1e-08 requests/s would take 2e+09 s to arrive"),
    (["--set", "workload.traffic.requests_per_second=1e-20", "-n", "20"],
     "workload.traffic.requests_per_second: 20 requests at 1e-20 requests/s would take 2e+21 s"),
    (["--concurrency", "2", "--think-time", "1e300 s", "-n", "20"],
     "--think-time: 2 users pausing 1e+300 s between requests would take at least 1e+301 s to send 20"),
    # before: MemoryError after 59 s
    (["--replicas", "950000000000", "-n", "20"], "--replicas: expected at most 10,000 replicas (each is simulated "
                                                 "step by step), got 950,000,000,000"),
    # before: internal error (numpy's "expected non-negative integer")
    (["--seed", "-1", "-n", "20"], "--seed: expected a whole number from 0 to 4,294,967,295, got -1"),
    (["--seed", "4294967295", "--seeds", "2", "-n", "20"], "--seed: expected a whole number from 0 to 4,294,967,295 "
                                                           "(the last of 2 runs is --seed + 1), got 4294967295"),
], ids=["rate-1e-300", "rate-too-slow", "contract-rate", "think-time", "replicas-huge",
        "seed-negative", "seeds-past-the-last"])
def test_a_flag_out_of_bounds_is_refused(capsys, tmp_path, no_hang, arguments, expected):
    assert expected in refused(capsys, tmp_path, *arguments)


# --- trace files ---------------------------------------------------------------------------------------------

def test_an_arrival_gap_beyond_the_span_is_refused_naming_the_line(capsys, tmp_path, no_hang):
    """Before: a gap of 1e300 s hung; 1e308 s ended in 'cannot convert float infinity to integer'."""
    for gap, apart in (("1e300", "1e+300"), ("1e308", "1e+308"), ("1000000006", "1e+09")):
        path = trace(tmp_path, HEADER + "5,100,10\n" + f"{gap},100,10\n")
        assert refused(capsys, tmp_path, "--trace", path) == (
            f"botec: error: {path}: line 3: arrival_s: expected arrivals within 1,000,000,000 s (31.7 years) of each "
            f"other; line 2's and line 3's are {apart} s apart")
    late = '{"arrival_s": 1e308, "prompt_tokens": 100, "output_tokens": 10}\n'
    path = trace(tmp_path, late + JSON_LINE, "trace.jsonl")   # out of order: the line read second is named
    assert refused(capsys, tmp_path, "--trace", path).endswith(
        f"{path}: line 2: arrival_s: expected arrivals within 1,000,000,000 s (31.7 years) of each other; line 1's "
        "and line 2's are 1e+308 s apart")


def test_a_trace_spanning_just_under_the_bound_is_served(capsys, tmp_path, no_hang):
    """A billion seconds apart is a long idle gap, not an error: two requests, each served alone."""
    path = trace(tmp_path, HEADER + "0,100,10\n1000000000,100,10\n")
    code, out, err = run_cli(["simulate", str(H100), *FAST, "--trace", path, "-f", "json"], capsys)
    assert code == 0, err
    assert '"requests": 2' in out and '"unfinished_requests": 0' in out


def test_a_csv_cell_over_the_field_limit_is_refused_naming_line_and_field(capsys, tmp_path, no_hang):
    """Before: 'field larger than field limit (131072)' named line 1 (the chunk's first), not the cell."""
    long = "1" * 140_000
    for text in (HEADER + "0,100,10\n" + f"1,100,{long}\n", HEADER + "0,100,10\n" + f'"1",100,{long}\n'):
        path = trace(tmp_path, text)
        assert refused(capsys, tmp_path, "--trace", path) == (
            f"botec: error: {path}: line 3: output_tokens: a cell of more than 131,072 characters: expected a number")
    path = trace(tmp_path, "[" * 200_000 + "\n")         # not JSON lines (no "{"): a CSV without a header
    assert refused(capsys, tmp_path, "--trace", path).endswith(
        "line 1, column 1: a cell of more than 131,072 characters: expected a CSV header")


def test_a_histogram_cell_over_the_field_limit_is_refused(capsys, tmp_path, no_hang):
    path = trace(tmp_path, "tokens,weight\n" + "5,1\n" + "6," + "1" * 140_000 + "\n", "lengths.csv")
    assert refused(capsys, tmp_path, "--output-histogram", path, "-n", "20") == (
        f"botec: error: {path}: line 3: weight: a cell of more than 131,072 characters: expected a number")


def test_json_nested_100000_deep_is_refused_naming_the_line(capsys, tmp_path, no_hang):
    """Before: RecursionError, an internal error."""
    path = trace(tmp_path, JSON_LINE + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "\n", "trace.jsonl")
    assert refused(capsys, tmp_path, "--trace", path) == (
        f"botec: error: {path}: line 2: a JSON value nested more than 64 levels deep: expected a JSON object of numbers with "
        "arrival_s, prompt_tokens, output_tokens")


@pytest.mark.parametrize("name, line, expected", [
    ("trace.csv", "1,9223372036854775808,10", "line 3: prompt_tokens: expected a positive whole number of tokens "
                                              "below 2^53, got '9223372036854775808'"),
    ("trace.csv", "1,100,99999999999999999999", "line 3: output_tokens: expected a positive whole number of tokens "
                                                "below 2^53, got '99999999999999999999'"),
    ("trace.jsonl", '{"arrival_s": 1, "prompt_tokens": 9223372036854775808, "output_tokens": 10}',
     "line 2: prompt_tokens: expected a positive whole number of tokens below 2^53, got 9223372036854775808"),
    ("trace.jsonl", '{"arrival_s": 1, "prompt_tokens": ' + "1" * 400 + ', "output_tokens": 10}',
     "line 2: prompt_tokens: expected a finite number, got 1111111111111111111111111111111111111111... (400 "
     "characters)"),
    ("trace.jsonl", '{"arrival_s": 1, "prompt_tokens": ' + "1" * 5000 + ', "output_tokens": 10}',
     "line 2: prompt_tokens: expected a finite number, got inf"),   # read as the float nearest, as JSON reads 1e400
], ids=["csv-2^63", "csv-1e20", "json-2^63", "json-400-digits", "json-5000-digits"])
def test_token_counts_past_int64_are_refused_naming_line_and_field(capsys, tmp_path, no_hang, name, line, expected):
    first = HEADER + "0,100,10\n" if name.endswith(".csv") else JSON_LINE
    path = trace(tmp_path, first + line + "\n", name)
    assert f"{path}: {expected}" in refused(capsys, tmp_path, "--trace", path)


# --- the library and its arithmetic --------------------------------------------------------------------------

def test_the_library_refuses_what_the_command_does():
    from botec.errors import UserError
    from botec.estimation import estimate_file
    from botec.simulate import simulate
    from botec.simulation_limits import check_replicas

    result = estimate_file(H100, list(FAST[1:]))
    with pytest.raises(UserError, match=r"^--seed: expected a whole number from 0 to 4,294,967,295, got -1$"):
        simulate(result, requests=20, seed=-1)
    with pytest.raises(UserError, match=r"^--rate: 20 requests at 1e-300 requests/s"):
        simulate(result, requests=20, rate=1e-300)
    with pytest.raises(UserError, match=r"^the estimate's 20,000 replicas \(give --replicas\): expected at most "
                                        r"10,000 replicas"):
        check_replicas(20_000, given=False)


def test_steps_to_reach_ends_whatever_the_span():
    """Before: a span of 1e300 s looped forever (floats cannot tell j steps from j + 1 there); exact below."""
    from botec.simulate.engine import steps_to_reach

    assert steps_to_reach(1e300, 0.007, 0.0) == math.ceil(1e300 / 0.007)
    assert steps_to_reach(1e300, 0.007, 1e-7) > 2 ** 50
    assert steps_to_reach(1.0, 0.01, 0.0) == 100               # 100 steps of 10 ms: exactly 1 s
    assert steps_to_reach(0.035, 0.01, 0.005) == 3             # 10 + 15 = 25 ms < 35 ms ≤ 10 + 15 + 20 = 45 ms


def test_a_run_too_short_for_steady_state_says_so():
    """H100 example at 20 requests/s, a request staying 4.33 s (the analytic end-to-end latency): 200 requests (190
    measured) arrive over 9.5 s, under 10 × 4.33 s; the decode batch never fills (57 on average against Little's law's
    86) and TPOT reads 16 % fast. 2,000 requests (95 s) are in steady state: no warning, the batch within 4 %."""
    from botec.estimation import estimate_file
    from botec.simulate import STEADY_FILLS, WARMUP_SHARE, simulate

    result = estimate_file(H100, list(FAST[1:]))
    short = simulate(result, requests=200, rate=20.0, replicas=1)
    stay = short.analytic.end_to_end_seconds
    assert 190 / 20.0 < STEADY_FILLS * stay < 1900 / 20.0
    needed = math.ceil(STEADY_FILLS * stay * 20.0 / (1 - WARMUP_SHARE))
    (warning,) = short.warnings
    assert warning.startswith(f"not in steady state: the 190 measured requests arrive over 9.5 s, less than 10 × the "
                              f"{stay:.3g} s a request stays")
    assert warning.endswith(f"simulate at least {needed:,} requests at this rate")
    assert short.mean_decode_batch < 0.8 * short.analytic.decode_batch_size

    steady = simulate(result, requests=2000, rate=20.0, replicas=1)
    assert steady.warnings == ()
    # within 3.4 % (109.7 against 106.2 with the measured decode-attention table; 2.9 % on the roofline)
    assert steady.mean_decode_batch == pytest.approx(steady.analytic.decode_batch_size, rel=0.04)


def test_more_replicas_than_requests_is_a_short_run_of_a_large_fleet():
    """Only the absolute cap holds: 3 replicas serving 2 requests run (one stays idle), each request served once."""
    from botec.estimation import estimate_file
    from botec.simulate import simulate

    sim = simulate(estimate_file(H100, list(FAST[1:])), requests=2, replicas=3, rate=1.0, seed=0)
    assert sim.replicas == 3 and sim.requests == 2
