"""`botec simulate` streams: nothing it keeps grows with the number of requests.

What is checked, and against what:

- the quantile sketch (botec.simulate.streaming) against numpy's percentiles on generated data, within its stated
  relative accuracy (1 %), a hand-checked case, and hypothesis's data; the running sum against math.fsum;
- drawn requests in blocks against the requests drawn at once; a trace streamed in blocks against the trace read
  whole (CSV and JSON lines, comments, quotes, chunk boundaries), and numpy.loadtxt;
- the streamed simulation against the same simulation on whole arrays measured as before streaming (the
  measurement code of botec 0.7.0, copied here as the reference): identical counts, windows and percentiles,
  means to the last bits; bounded state (slots, pending finishes) whatever the count;
- the limits: --requests, a trace's size and count, a NUL byte (/dev/zero), an over-long line: one line, exit 2,
  nothing written; prompts over the model's context refused and outputs cut, as vLLM does.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, write

H100 = EXAMPLES / "serve-llama3.1-8b-h100.yaml"
L4 = EXAMPLES / "serve-llama3.1-8b-l4.yaml"
FAST = ("supply.candidates=[]",)
LEVELS = [0, 1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9, 100]


def estimated(path, overrides=()):
    from botec.estimation import estimate_file

    return estimate_file(path, list(overrides) + list(FAST))


# --- the quantile sketch ----------------------------------------------------------------------------

def test_the_sketch_by_hand():
    """α = 1 %: γ = 1.01 / 0.99; a value x sits in bucket ⌈log_γ x⌉ and reads 2γ^k / (γ + 1). Of [1, 2, 3, 4, 100]:
    P50 = x₍₂₎ = 3, bucket ⌈ln 3 / ln γ⌉ = 55, 2γ⁵⁵/(γ + 1) = 2.9742 (−0.86 %); P25 = x₍₁₎ = 2, bucket 35, 1.9937;
    P0 and P100 are the exact minimum and maximum (the bucket's 100.49 is clamped to 100); P62.5: h = 2.5, halfway
    between the buckets of 3 and 4 (70: 4.0148)."""
    from botec.simulate.streaming import QuantileSketch

    sketch = QuantileSketch(0.01, exact_up_to=0)
    sketch.add([1.0, 2.0, 3.0, 4.0, 100.0])
    gamma = 1.01 / 0.99
    assert math.ceil(math.log(3) / math.log(gamma)) == 55 and math.ceil(math.log(2) / math.log(gamma)) == 35
    p0, p25, p50, p625, p100 = sketch.percentiles([0, 25, 50, 62.5, 100])
    assert p50 == pytest.approx(2 * gamma ** 55 / (gamma + 1), rel=1e-12) == pytest.approx(2.9742, abs=1e-4)
    assert p25 == pytest.approx(2 * gamma ** 35 / (gamma + 1), rel=1e-12) == pytest.approx(1.9937, abs=1e-4)
    four = 2 * gamma ** math.ceil(math.log(4) / math.log(gamma)) / (gamma + 1)
    assert p625 == pytest.approx((p50 + four) / 2, rel=1e-12) and four == pytest.approx(4.0148, abs=1e-4)
    assert (p0, p100) == (1.0, 100.0)
    assert sketch.count == 5 and sketch.relative_accuracy == 0.01 and not sketch.exact


def _assert_within(sketch, values, alpha):
    got = np.array(sketch.percentiles(LEVELS))
    exact = np.percentile(values, LEVELS)
    assert np.all(np.abs(got - exact) <= alpha * exact * (1 + 1e-9) + 1e-300), (got, exact)


@pytest.mark.parametrize("kind", ["lognormal", "exponential", "wide", "with zeros", "constant"])
def test_the_sketch_is_within_its_accuracy_of_numpy(kind):
    from botec.simulate.streaming import QuantileSketch

    rng = np.random.default_rng(7)
    values = {"lognormal": rng.lognormal(-3, 1.0, 200_000), "exponential": rng.exponential(0.05, 200_000),
              "wide": 10.0 ** rng.uniform(-6, 4, 200_000),
              "with zeros": np.where(rng.random(200_000) < 0.1, 0.0, rng.lognormal(0, 2, 200_000)),
              "constant": np.full(1000, 0.0375)}[kind]
    for alpha in (0.01, 0.001):
        sketch = QuantileSketch(alpha, exact_up_to=10_000)
        for block in np.array_split(values, 37):          # blocks of any size, in any order
            sketch.add(block)
        assert sketch.count == len(values) and (sketch.min, sketch.max) == (values.min(), values.max())
        assert sketch.relative_accuracy == (alpha if len(values) > 10_000 else 0.0)
        _assert_within(sketch, values, alpha)


def test_the_sketch_is_exact_while_it_keeps_the_values():
    from botec.simulate.streaming import QuantileSketch

    values = np.random.default_rng(3).lognormal(0, 1, 5_000)
    sketch = QuantileSketch(exact_up_to=5_000)
    sketch.add(values[:1234])
    sketch.add(values[1234:])
    assert sketch.exact and sketch.relative_accuracy == 0.0
    assert sketch.percentiles(LEVELS) == [float(v) for v in np.percentile(values, LEVELS)]
    sketch.add([1.0])                                     # one more: the sketch takes over, within 1 %
    _assert_within(sketch, np.append(values, 1.0), 0.01)
    assert all(math.isnan(v) for v in QuantileSketch().percentiles([50, 99]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e9, allow_nan=False), min_size=1, max_size=300),
       st.floats(min_value=0, max_value=100))
def test_any_values_any_level(values, level):
    from botec.simulate.streaming import QuantileSketch

    sketch = QuantileSketch(0.01, exact_up_to=0)
    sketch.add(values)
    (got,) = sketch.percentiles([level])
    exact = float(np.percentile(values, level))
    assert abs(got - exact) <= 0.01 * exact * (1 + 1e-9) + 1e-300


def test_the_sketch_refuses_what_it_cannot_hold():
    from botec.simulate.streaming import QuantileSketch

    for bad in ([-1.0], [math.nan], [math.inf]):
        with pytest.raises(ValueError):
            QuantileSketch().add(bad)
    with pytest.raises(ValueError):
        QuantileSketch(1.5)


def test_the_running_sum_is_exact():
    from botec.simulate.streaming import RunningSum

    rng = np.random.default_rng(1)
    values = rng.lognormal(-4, 2, 300_000)
    total = RunningSum()
    for block in np.array_split(values, 200):                 # more blocks than it keeps parts: it folds them
        total.add(block)
    assert total.value == math.fsum(values.tolist())
    cancelling = RunningSum()
    for block in ([1e16], [1.0], [-1e16], [1e-3] * 3):
        cancelling.add(block)
    assert cancelling.value == math.fsum([1e16, 1.0, -1e16, 1e-3, 1e-3, 1e-3])


# --- drawn in blocks, read in blocks ----------------------------------------------------------------

@pytest.mark.parametrize("arrivals, lengths", [("poisson", "lognormal"), ("bursty", "exponential"),
                                               ("uniform", "uniform"), ("poisson", "fixed")])
def test_requests_drawn_in_blocks_are_those_drawn_at_once(arrivals, lengths, tmp_path):
    from botec.simulate.workload import synthetic_stream, synthetic_workload

    traffic = estimated(H100, (f"workload.traffic.arrivals={arrivals}", "workload.traffic.burst_size=8",
                               f"workload.traffic.length_distribution={lengths}")).contract.workload.traffic
    histogram = write(tmp_path, "tokens,weight\n100,3\n400,1\n", "h.csv") if lengths == "fixed" else None
    whole = synthetic_workload(traffic, 1_001, 7.5, 900, 200, seed=4, output_histogram=histogram)
    for block in (1, 13, 64, 1_000, 5_000):
        stream = synthetic_stream(traffic, 1_001, 7.5, 900, 200, seed=4, output_histogram=histogram, block=block)
        parts = list(stream.blocks())
        assert all(len(p[0]) == stream.block for p in parts[:-1])
        for k, column in enumerate((whole.arrival_seconds, whole.prompt_tokens, whole.output_tokens)):
            assert np.array_equal(np.concatenate([p[k] for p in parts]), column)
        assert stream.description == whole.description and stream.count == 1_001


def test_numpy_draws_the_same_numbers_in_blocks():
    """What drawing in blocks rests on (numpy's Generators draw element by element): the balancer's power-of-two
    picks (integers), the arrivals (exponential), the lengths (normal, geometric, integers, choice)."""
    draws = {"integers": lambda rng, n: rng.integers(4, size=n), "from one": lambda rng, n: rng.integers(1, 4, size=n),
             "exponential": lambda rng, n: rng.exponential(0.3, n), "normal": lambda rng, n: rng.standard_normal(n),
             "geometric": lambda rng, n: rng.geometric(1 / 300, n),
             "choice": lambda rng, n: rng.choice(np.array([100, 400]), size=n, p=[0.75, 0.25])}
    for name, draw in draws.items():
        whole = draw(np.random.default_rng(5), 10_007)
        rng = np.random.default_rng(5)
        blocks = np.concatenate([draw(rng, len(part)) for part in np.array_split(np.empty(10_007), 13)])
        assert np.array_equal(blocks, whole), name


TRACE = """\
# a recorded trace
arrival_s,prompt_tokens,output_tokens,model
12.5,100,20,"llama, 8B"

10.0,50,5,x
10.25, 70 ,7,"two
lines"
11,80,8,y
"""


@pytest.mark.parametrize("read_bytes", [7, 64, 1 << 20])
def test_a_trace_streams_as_it_reads_whole(tmp_path, monkeypatch, read_bytes):
    """Comments, a blank line, an extra column with a comma and a line end in quotes; read in chunks of 7 bytes
    (a line split across chunks) and up; unordered: sorted stably."""
    from botec.simulate import trace

    monkeypatch.setattr(trace, "READ_BYTES", read_bytes)
    path = write(tmp_path, TRACE, "t.csv")
    stream = trace.trace_stream(path, block=2)
    parts = list(stream.blocks())
    assert [len(p[0]) for p in parts] == [2, 2]
    assert np.concatenate([p[0] for p in parts]).tolist() == [0.0, 0.25, 1.0, 2.5]
    assert np.concatenate([p[1] for p in parts]).tolist() == [50, 70, 80, 100]
    assert stream.count == 4 and stream.mean_rate_per_s == pytest.approx(3 / 2.5)
    lines = write(tmp_path, '\n{"arrival_s": 3, "prompt_tokens": 7, "output_tokens": 3, "x": [1, 2]}\n\n'
                            '{"arrival_s": 4.5, "prompt_tokens": 9, "output_tokens": 1}\n', "t.jsonl")
    streamed = trace.trace_stream(lines, block=1)
    assert [p[1].tolist() for p in streamed.blocks()] == [[7], [9]]


def test_a_long_csv_trace_reads_as_numpy_does(tmp_path):
    """The plain-chunk path (numpy.fromstring) against numpy.loadtxt, ordered (streamed twice) and shuffled."""
    from botec.simulate.trace import read_trace, trace_stream

    rng = np.random.default_rng(5)
    arrivals = np.cumsum(rng.exponential(0.05, 150_000)) + 1000.123456
    prompts, outputs = rng.integers(1, 4000, 150_000), rng.integers(1, 900, 150_000)
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(
        f"{a!r},{p},{o}\n" for a, p, o in zip(arrivals.tolist(), prompts.tolist(), outputs.tolist())))
    stream = trace_stream(path)
    parts = list(stream.blocks())
    assert np.array_equal(np.concatenate([p[0] for p in parts]), arrivals - arrivals[0])
    assert np.array_equal(np.concatenate([p[2] for p in parts]), outputs)
    order = rng.permutation(150_000)
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(
        f"{a!r},{p},{o}\n" for a, p, o in zip(arrivals[order].tolist(), prompts[order].tolist(),
                                               outputs[order].tolist())))
    whole = read_trace(path)
    assert np.array_equal(whole.arrival_seconds, arrivals - arrivals[0]) and np.array_equal(whole.prompt_tokens,
                                                                                           prompts)


@pytest.mark.parametrize("text, fragments", [
    ("arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * 5000 + "1,nan,1\n", ["line 5002: prompt_tokens"]),
    ("arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * 5000 + "inf,1,1\n", ["line 5002: arrival_s", "finite"]),
    ("arrival_s,prompt_tokens,output_tokens\n0,1e300,1\n", ["line 2: prompt_tokens", "below 2^53"]),
    ('{"arrival_s": 0, "prompt_tokens": true, "output_tokens": 2}\n', ["line 1: prompt_tokens", "True"]),
    ('{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 2}\n[1, 2]\n', ["line 2", "JSON object"]),
    ('"arrival_s",prompt_tokens,output_tokens\n"0",1,"x\n', ["line 2: output_tokens"]),
])
def test_a_bad_cell_among_many_names_its_line(tmp_path, text, fragments):
    from botec.errors import ContractError
    from botec.simulate.trace import trace_stream

    path = write(tmp_path, text, "t.csv")
    with pytest.raises(ContractError) as caught:
        trace_stream(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    for fragment in fragments:
        assert fragment in message, message


def test_a_trace_from_a_pipe(tmp_path):
    """A FIFO cannot be read twice: its requests are kept (and sorted) in memory."""
    from botec.simulate.trace import trace_stream

    fifo = tmp_path / "trace.csv"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "w") as stream:
            stream.write("arrival_s,prompt_tokens,output_tokens\n5,10,2\n4,20,3\n")

    thread = threading.Thread(target=writer)
    thread.start()
    stream = trace_stream(fifo)
    thread.join()
    (arrivals, prompts, _), = list(stream.blocks())
    assert arrivals.tolist() == [0.0, 1.0] and prompts.tolist() == [20, 10]


# --- the limits --------------------------------------------------------------------------------------

def test_the_trace_limits(tmp_path, monkeypatch):
    from botec.errors import ContractError, UserError
    from botec.simulate import trace

    path = write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n" + "0,1,1\n" * 10, "t.csv")
    with pytest.raises(UserError, match=r"^--trace .*at most 9 requests, line 11 is one more$"):
        trace.trace_stream(path, max_requests=9)
    assert trace.trace_stream(path, max_requests=10).count == 10
    with pytest.raises(UserError, match=r"^--trace .*at most 50 bytes, the file has 98$"):
        trace.trace_stream(path, max_bytes=50)
    monkeypatch.setattr(trace, "MAX_LINE_CHARACTERS", 100)
    long = write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n0,1,1\n" + "9" * 300 + "\n", "long.csv")
    with pytest.raises(ContractError, match="line 3: a line of more than 100 characters"):
        trace.trace_stream(long)
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"arrival_s,prompt_tokens,output_tokens\n0,1,1\n0,\x001,1\n")
    with pytest.raises(ContractError, match="line 3: a NUL byte"):
        trace.trace_stream(binary)
    latin = tmp_path / "l.csv"
    latin.write_bytes(b"arrival_s,prompt_tokens,output_tokens\n0,1,1\n# caf\xe9\n")
    with pytest.raises(ContractError, match="line 3: not UTF-8"):
        trace.trace_stream(latin)
    with pytest.raises(ContractError, match="is a directory"):
        trace.trace_stream(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_at_once_in_bounded_memory():
    from botec.errors import ContractError
    from botec.simulate.trace import trace_stream

    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ContractError, match="line 1: a NUL byte"):
            trace_stream("/dev/zero")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5 and peak < 16e6


def test_the_command_refuses_over_the_limits_and_writes_nothing(cli, tmp_path):
    from botec.simulation_limits import MAX_REQUESTS

    target = tmp_path / "report.json"
    for arguments, fragment in (
            (["-n", str(MAX_REQUESTS + 1)], "--requests: expected at most 100,000,000 requests"),
            (["--trace", "/dev/zero"], "/dev/zero: line 1: a NUL byte")):
        if arguments[-1] == "/dev/zero" and not os.path.exists("/dev/zero"):
            continue
        code, out, err = cli("simulate", str(H100), *arguments, "--set", "supply.candidates=[]", "-f", "json",
                             "-o", str(target))
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and fragment in lines[0] and "Traceback" not in err, err
        assert not target.exists()


# --- the context ----------------------------------------------------------------------------------------

def test_prompts_over_the_context_are_refused_and_outputs_cut():
    """L = 100: P = 50, O = 10 is served whole; P = 100 gets one token (vLLM appends it, then stops at L); P = 101
    is refused (longer than the maximum model length); P = 99, O = 10 is cut to 1. Without L, nothing changes."""
    from botec.simulate.engine import Engine
    from botec.simulate.ledger import screen

    engine = Engine.from_estimate(estimated(H100))
    served, accepted, over, cut = screen(engine, 100, np.array([50, 100, 101, 99]), np.array([10, 5, 5, 10]))
    assert served.tolist() == [10, 1, 5, 1] and accepted.tolist() == [True, True, False, True]
    assert over.tolist() == [False, False, True, False] and cut.tolist() == [False, True, False, True]
    small = dataclasses.replace(engine, kv_capacity_blocks=10)               # 160 tokens of KV cache
    served, accepted, over, cut = screen(small, None, np.array([500_000, 150]), np.array([10, 10]))
    assert served.tolist() == [10, 10] and not over.any() and not cut.any() and accepted.tolist() == [False, True]


def test_a_trace_over_the_context_is_counted(cli, tmp_path):
    """Llama 2 70B's context is 4,096 tokens."""
    trace = write(tmp_path, "arrival_s,prompt_tokens,output_tokens\n0,100,20\n0.1,5000,10\n0.2,4090,50\n"
                            "0.3,200,30\n", "t.csv")
    code, out, err = cli("simulate", str(EXAMPLES / "serve-llama2-70b-a100-tp4.yaml"), "--trace", str(trace),
                         "--replicas", "1", "-f", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["context_tokens"] == 4096 and report["prompts_over_context"] == 1
    assert report["outputs_cut_at_context"] == 1 and report["rejected_requests"] == 1
    assert report["prompt_tokens"] == 100 + 4090 + 200 and report["unfinished_requests"] == 0
    code, out, err = cli("simulate", str(EXAMPLES / "serve-llama2-70b-a100-tp4.yaml"), "--trace", str(trace),
                         "--replicas", "1", "-f", "markdown")
    assert "1 requests refused: the prompt is longer than the model's 4,096-token context" in out
    assert "1 outputs cut where prompt and output reach the 4,096-token context" in out


# --- the streamed simulation against whole arrays --------------------------------------------------------

def reference_measure(result, workload, ledger, fleet, accepted):
    """botec 0.7.0's measurement on whole arrays (before streaming), its figures as a dict; a request's TTFT and
    end-to-end time hold the engine's front-end time o (request_overhead) besides the engine's."""
    q = result.quantities
    front = float(q["request_overhead_seconds"].value)
    count = len(workload)
    arrival = workload.arrival_seconds
    first, finish = np.array(ledger.first_token_s), np.array(ledger.finish_s)
    outputs = workload.output_tokens
    warmup = math.ceil(0.05 * count) if count > 1 else 0
    done = np.isfinite(finish)
    kept = done.copy()
    kept[:warmup] = False
    level = int(round(float(q["latency_percentile"].value) * 100))
    ttft, e2e = first - arrival + front, finish - arrival + front
    multi = outputs > 1
    tpot = np.where(multi, (finish - first) / np.maximum(outputs - 1, 1), np.nan)
    meets = np.ones(count, dtype=bool)
    for name, values, extra in (("time_to_first_token_target_seconds", ttft, None),
                                ("time_per_output_token_target_seconds", tpot, ~multi)):
        if name in q:
            meets &= (values <= q[name].value) if extra is None else (extra | (values <= q[name].value))
    meets &= done
    finished_sorted = np.sort(finish[done])
    start = float(finished_sorted[max(warmup - 1, 0)]) if len(finished_sorted) else 0.0
    admissions = [r.stats.last_admission_s for r in fleet if r.assigned]
    end = min(admissions) if admissions else math.nan
    if not (end - start > 0) or np.count_nonzero((finish > start) & (finish <= end)) < 2:
        start, end = float(arrival[0]), float(finished_sorted[-1]) if len(finished_sorted) else 0.0
        in_window = done
    else:
        in_window = done & (finish > start) & (finish <= end)
    span = end - start

    def latency(values):
        return (float(np.mean(values)), *[float(v) for v in np.percentile(values, [50, 90, 99, level])])

    return {"window": (start, end), "throughput": np.count_nonzero(in_window) / span,
            "tokens_per_s": float(outputs[in_window].sum()) / span, "goodput": np.count_nonzero(in_window & meets) / span,
            "measured": int(np.count_nonzero(kept)), "share": np.count_nonzero(meets & kept) / np.count_nonzero(kept),
            "ttft": latency(ttft[kept]), "tpot": latency(tpot[kept & multi]), "e2e": latency(e2e[kept]),
            "unfinished": int(np.count_nonzero(accepted & ~done)), "rejected": int(np.count_nonzero(~accepted)),
            "prompt_tokens": int(workload.prompt_tokens[accepted].sum()),
            "simulated_seconds": (float(np.nanmax(finish)) if done.any() else arrival[0]) - arrival[0]}


def _both(path, overrides, requests, rate, replicas, balancer, monkeypatch, block=97, exact_up_to=100_000):
    """The same run streamed (blocks of ``block``, finishes handed over 7 at a time) and on whole arrays."""
    from botec.simulate import _context_tokens, _simulation, _tally
    from botec.simulate import ledger as ledger_module
    from botec.simulate.fleet import run_fleet
    from botec.simulate.engine import Engine
    from botec.simulate.ledger import Ledger, StreamLedger
    from botec.simulate.workload import synthetic_stream, synthetic_workload

    monkeypatch.setattr(ledger_module, "FLUSH_REQUESTS", 7)
    result = estimated(path, overrides)
    q = result.quantities
    engine = Engine.from_estimate(result)
    traffic = result.contract.workload.traffic
    stream = synthetic_stream(traffic, requests, rate, q["prompt_tokens"].value, q["output_tokens"].value, 3,
                              block=block)
    tally = _tally(result, requests)
    for metric in (tally.ttft, tally.tpot, tally.end_to_end):
        metric.sketch.exact_up_to = exact_up_to
    ledger = StreamLedger(stream, engine, _context_tokens(result), tally)
    fleet = run_fleet(engine, ledger, replicas, balancer, 3)
    streamed = _simulation(result, engine, stream.description, tally, fleet, replicas, balancer, 3, rate)

    workload = synthetic_workload(traffic, requests, rate, q["prompt_tokens"].value, q["output_tokens"].value, 3)
    whole = Ledger(workload.arrival_seconds, workload.prompt_tokens, workload.output_tokens,
                   engine.cached_tokens(workload.prompt_tokens))
    accepted = engine.footprint_blocks(workload.prompt_tokens, workload.output_tokens) <= engine.kv_capacity_blocks
    whole_fleet = run_fleet(engine, whole, replicas, balancer, 3, accepted.tolist())
    return streamed, reference_measure(result, workload, whole, whole_fleet, accepted), ledger, fleet, workload, whole


BURSTY = ("workload.traffic.arrivals=bursty", "workload.traffic.burst_size=16",
          "workload.traffic.length_distribution=lognormal", "workload.traffic.length_sigma=1.0")


@pytest.mark.parametrize("path, overrides, rate, replicas, balancer", [
    (H100, ("workload.traffic.length_distribution=lognormal",), 20.0, 1, "least-outstanding"),
    (L4, BURSTY, 12.0, 4, "least-outstanding"),
    (L4, BURSTY, 12.0, 3, "round-robin"),
    (L4, BURSTY, 12.0, 4, "power-of-two"),
    (H100, ("strategy.max_batch_size=64", "strategy.max_batched_tokens=320"), math.inf, 2, "least-outstanding"),
    (H100, ("assumptions.speculative_decoding.draft_tokens=3",
            "assumptions.speculative_decoding.acceptance_rate=0.6"), 8.0, 2, "round-robin"),
], ids=["one replica", "bursts, least outstanding", "round robin", "power of two", "all at once", "speculative"])
def test_streamed_equals_whole_arrays(path, overrides, rate, replicas, balancer, monkeypatch):
    streamed, reference, ledger, fleet, workload, whole = _both(path, overrides, 1_500, rate, replicas, balancer,
                                                               monkeypatch)
    assert streamed.measurement_window_seconds == reference["window"]
    assert streamed.throughput_requests_per_s == reference["throughput"]
    assert streamed.output_tokens_per_s == reference["tokens_per_s"]
    assert streamed.goodput_requests_per_s == reference["goodput"]
    assert streamed.share_meeting_targets == reference["share"]
    assert (streamed.measured_requests, streamed.unfinished_requests, streamed.rejected_requests,
            streamed.prompt_tokens) == (reference["measured"], reference["unfinished"], reference["rejected"],
                                        reference["prompt_tokens"])
    assert streamed.simulated_seconds == reference["simulated_seconds"]
    for latency, (mean, *percentiles) in ((streamed.ttft, reference["ttft"]), (streamed.tpot, reference["tpot"]),
                                          (streamed.end_to_end, reference["e2e"])):
        assert latency.mean_seconds == pytest.approx(mean, rel=1e-14)
        assert [latency.p50_seconds, latency.p90_seconds, latency.p99_seconds,
                latency.at_target_percentile_seconds] == percentiles
        assert latency.relative_accuracy == 0.0
    records = streamed.records
    assert np.array_equal(records["finish_s"], np.array(whole.finish_s))
    assert np.array_equal(records["first_token_s"], np.array(whole.first_token_s))
    assert np.array_equal(records["replica"], np.array(whole.replica))
    assert np.array_equal(records["preemptions"], np.array(whole.preemptions))
    assert np.array_equal(records["prompt_tokens"], workload.prompt_tokens)
    assert ledger.in_system() == 0 and not ledger.tally._pending and not any(r.finish_times for r in fleet)


def test_the_sketched_percentiles_stay_within_one_percent(monkeypatch):
    streamed, reference, *_ = _both(L4, BURSTY, 2_000, 12.0, 4, "least-outstanding", monkeypatch, exact_up_to=100)
    for latency, (mean, *percentiles) in ((streamed.ttft, reference["ttft"]), (streamed.tpot, reference["tpot"]),
                                          (streamed.end_to_end, reference["e2e"])):
        assert latency.relative_accuracy == 0.01 and latency.mean_seconds == pytest.approx(mean, rel=1e-14)
        got = [latency.p50_seconds, latency.p90_seconds, latency.p99_seconds, latency.at_target_percentile_seconds]
        assert all(abs(g - p) <= 0.01 * p * (1 + 1e-9) for g, p in zip(got, percentiles)), (got, percentiles)
    assert streamed.percentile_relative_accuracy == 0.01


def test_state_does_not_grow_with_the_requests(monkeypatch):
    """At 60 % of the capacity the replica holds a few dozen requests at once: the ledger's slots, the tally's
    waiting finishes and the records stay bounded while 6,000 requests pass."""
    from botec.simulate import simulate

    result = estimated(H100)
    capacity = result.quantities["offline_requests_per_s_per_replica"].value
    seen = {}
    import botec.simulate.fleet as fleet_module

    original = fleet_module.StreamLedger.settle

    def settle(self, at, fleet):
        original(self, at, fleet)
        seen["slots"] = max(seen.get("slots", 0), self.slots)
        seen["pending"] = max(seen.get("pending", 0), sum(len(p[0]) for p in self.tally._pending)
                              + len(self.tally._after_start[0]))

    monkeypatch.setattr(fleet_module.StreamLedger, "settle", settle)
    from botec.simulate import workload

    monkeypatch.setattr(workload, "BLOCK_REQUESTS", 500)
    stream = workload.synthetic_stream
    monkeypatch.setattr(workload, "synthetic_stream", lambda *a, **k: stream(*a, **{**k, "block": 500}))
    run = simulate(result, requests=6_000, rate=0.6 * capacity, replicas=1, records=100)
    assert run.unfinished_requests == 0 and len(run.records["finish_s"]) == 100
    assert seen["slots"] < 600 and seen["pending"] < 600, seen


def test_the_report_says_how_exact_its_percentiles_are(monkeypatch):
    from botec.report.simulation import simulation_json, simulation_markdown
    from botec.simulate import simulate

    run = simulate(estimated(H100), requests=300, rate=5.0, replicas=1)
    assert "means and percentiles exact" in simulation_markdown(run)
    assert json.loads(simulation_json(run))["percentile_relative_accuracy"] == 0.0
    sketched = dataclasses.replace(run, ttft=dataclasses.replace(run.ttft, relative_accuracy=0.01))
    assert "percentiles from a quantile sketch within 1 %" in simulation_markdown(sketched)
    report = json.loads(simulation_json(sketched))
    assert report["percentile_relative_accuracy"] == 0.01
    assert report["time_to_first_token"]["percentile_relative_accuracy"] == 0.01
