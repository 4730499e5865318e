"""How much memory and CPU `botec simulate` takes per request, drawn or replayed from a trace, at 10⁶–10⁷ requests.

The workload is benchmarks/simulate_100k.py's: Llama 3.1-8B in BF16 on one H100 (vLLM's defaults), Poisson
arrivals at 80 % of the analytic offline capacity, lognormal prompt and output lengths (σ = 0.5) around
1,000 and 250 tokens. Two runs, each in a fresh process so that its peak resident memory is its own:

- ``drawn``: ``simulate(requests=N)``, the requests drawn as they are served;
- ``trace``: an N-line CSV trace of the same kind of traffic, written first (numpy, in blocks), then
  ``simulate(trace=...)``: the trace checked, then streamed.

Each reports the peak resident set (``resource.getrusage(...).ru_maxrss``, the whole process: Python, numpy
and the estimate included), the resident set before the simulation started, and the CPU seconds of the
simulation alone (``time.process_time``) per request. The targets (issue 20, item 6): at 10⁷ requests,
under 500 MB at peak and at most 20 µs of CPU a request.

    .venv/bin/python benchmarks/simulate_streaming.py [--requests 1e6] [--only drawn|trace] [--seed 0]

The script calls only ``botec.simulate.simulate``, so it also measures an older tree:
``PYTHONPATH=/path/to/old/src .venv/bin/python benchmarks/simulate_streaming.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simulate_100k import CONTRACT  # noqa: E402  (the same workload)

TARGET_PEAK_BYTES = 500e6
TARGET_CPU_SECONDS_PER_REQUEST = 20e-6


def _estimate(folder: Path, load: float):
    from botec.estimation import estimate_file

    path = folder / "contract.yaml"
    path.write_text(CONTRACT)
    capacity = estimate_file(path).quantities["offline_requests_per_s_per_replica"].value
    rate = load * capacity
    return estimate_file(path, [f"workload.traffic.requests_per_second={rate}"]), rate


def write_trace(path: Path, requests: int, rate_per_s: float, seed: int, block: int = 1 << 18) -> None:
    """An N-line CSV trace: Poisson arrivals at ``rate_per_s``, lognormal lengths (σ = 0.5) around 1,000 and 250
    tokens, written a block at a time."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sigma, last = 0.5, 0.0
    with open(path, "w") as file:
        file.write("arrival_s,prompt_tokens,output_tokens\n")
        for start in range(0, requests, block):
            size = min(block, requests - start)
            arrivals = last + np.cumsum(rng.exponential(1 / rate_per_s, size))
            last = float(arrivals[-1])
            lengths = [np.maximum(np.rint(mean * np.exp(sigma * rng.standard_normal(size) - sigma ** 2 / 2)), 1)
                       .astype(np.int64) for mean in (1000, 250)]
            file.write("".join(f"{a:.6f},{p},{o}\n" for a, p, o in zip(arrivals.tolist(), lengths[0].tolist(),
                                                                       lengths[1].tolist())))


def child(kind: str, requests: int, seed: int, trace: str | None) -> None:
    """One run, in this process: print a JSON line of what it measured."""
    from botec.simulate import simulate

    with tempfile.TemporaryDirectory() as folder:
        result, rate = _estimate(Path(folder), 0.8)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.process_time()
    if kind == "drawn":
        run = simulate(result, requests=requests, seed=seed, rate=rate, replicas=1)
    else:
        run = simulate(result, trace=trace, replicas=1)
    cpu = time.process_time() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"kind": kind, "requests": run.requests, "cpu_seconds": cpu, "peak_bytes": peak,
                      "before_bytes": before, "ttft_p99_s": run.ttft.p99_seconds, "ttft_mean_s": run.ttft.mean_seconds,
                      "tpot_p99_s": run.tpot.p99_seconds, "throughput": run.throughput_requests_per_s,
                      "relative_accuracy": getattr(run.ttft, "relative_accuracy", 0.0)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=float, default=1e6, help="N (default 1e6; 1e7 takes some minutes)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=("drawn", "trace"), default=None)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "TRACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    requests = int(args.requests)
    if args.child:
        child(args.child[0], requests, args.seed, args.child[1])
        return

    kinds = [args.only] if args.only else ["drawn", "trace"]
    print(f"botec simulate, {requests:,} requests: Poisson at 80 % of the analytic capacity, lognormal lengths "
          "around 1,000 + 250 tokens, Llama 3.1-8B on one H100")
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.csv"
        if "trace" in kinds:
            _, rate = _estimate(Path(folder), 0.8)
            started = time.perf_counter()
            write_trace(trace, requests, rate, args.seed)
            print(f"  (trace written: {trace.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - started:.0f} s)")
        for kind in kinds:
            out = subprocess.run([sys.executable, __file__, "--requests", str(requests), "--seed", str(args.seed),
                                  "--child", kind, str(trace)], capture_output=True, text=True, env=os.environ)
            if out.returncode:
                print(f"{kind}: failed\n{out.stderr}")
                continue
            m = json.loads(out.stdout.strip().splitlines()[-1])
            per_request = m["cpu_seconds"] / m["requests"]
            accuracy = (f"percentiles within {m['relative_accuracy']:.0%}" if m["relative_accuracy"]
                        else "percentiles exact")
            print(f"{kind:>6}: peak RSS {m['peak_bytes'] / 1e6:,.0f} MB (before the simulation "
                  f"{m['before_bytes'] / 1e6:,.0f} MB); CPU {m['cpu_seconds']:,.1f} s = {per_request * 1e6:.1f} µs a "
                  f"request; TTFT mean {m['ttft_mean_s'] * 1e3:.2f} ms, P99 {m['ttft_p99_s'] * 1e3:.1f} ms, TPOT P99 "
                  f"{m['tpot_p99_s'] * 1e3:.2f} ms, {m['throughput']:.3f} requests/s; {accuracy}")
            if requests >= 10_000_000:
                print(f"        targets at 10⁷: peak < 500 MB {'met' if m['peak_bytes'] < TARGET_PEAK_BYTES else 'MISSED'}"
                      f", ≤ 20 µs a request {'met' if per_request <= TARGET_CPU_SECONDS_PER_REQUEST else 'MISSED'}")


if __name__ == "__main__":
    main()
