"""How much memory and CPU `botec simulate --concurrency N` (a closed loop) takes, at 10⁵–10⁷ requests.

The workload: Llama 3.1-8B on one H100 (examples/serve-llama3.1-8b-h100.yaml, candidates dropped) with its rate
replaced by 64 users in a closed loop (no think time), lognormal prompt and output lengths (σ = 0.5) around the
example's 1,024 and 256 tokens, one replica (``supply.replicas: 1``). Each size runs in a fresh process, so that
its peak resident memory is its own, and reports:

- the peak resident set (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, the whole process: Python, numpy and the
  estimate included) and the resident set before the simulation started;
- the CPU seconds of the simulation alone (``time.process_time``) per request.

Target (issue 29, item 3): 10⁷ requests under 500 MB at peak (the loop that kept every request took 516 MiB at
10⁶). The run's figures (mean TTFT, throughput) are printed too, so that sizes can be compared.

    .venv/bin/python benchmarks/simulate_closed_loop.py [--requests 1e5 1e6 1e7] [--users 64]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "serve-llama3.1-8b-h100.yaml"
TARGET_PEAK_BYTES = 500e6


def _rss_bytes() -> float:
    """The peak resident set so far: ru_maxrss is in kB on Linux, bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak) if sys.platform == "darwin" else peak * 1024.0


def one(requests: int, users: int) -> dict:
    from botec.contract import parse_contract, read_contract_data
    from botec.estimation import estimate
    from botec.simulate import simulate

    data = read_contract_data(EXAMPLE)
    traffic = data["workload"]["traffic"]
    traffic.pop("requests_per_second", None)
    traffic |= {"concurrency": users, "length_distribution": "lognormal"}
    data["supply"].pop("candidates", None)
    data["supply"]["replicas"] = 1
    result = estimate(parse_contract(data, origin="benchmark"), base_dir=EXAMPLE.parent, compare=False)
    before = _rss_bytes()
    start = time.process_time()
    run = simulate(result, requests=requests)
    cpu = time.process_time() - start
    return {"requests": requests, "users": users, "peak_rss_bytes": _rss_bytes(), "rss_before_bytes": before,
            "cpu_seconds": cpu, "cpu_seconds_per_request": cpu / requests, "mean_ttft_s": run.ttft.mean_seconds,
            "output_tokens_per_s": run.output_tokens_per_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one(int(args.requests[0]), args.users)))
        return
    for count in args.requests:
        done = subprocess.run([sys.executable, __file__, "--child", "--requests", str(int(count)), "--users",
                               str(args.users)], capture_output=True, text=True, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        verdict = "" if row["requests"] < 10 ** 7 else (
            "  (target < 500 MB: " + ("met)" if row["peak_rss_bytes"] < TARGET_PEAK_BYTES else "MISSED)"))
        print(f"{row['requests']:>12,} requests, {row['users']} users: peak RSS {row['peak_rss_bytes'] / 1e6:7.1f} MB "
              f"(before the run {row['rss_before_bytes'] / 1e6:6.1f} MB), {row['cpu_seconds']:8.1f} CPU s = "
              f"{row['cpu_seconds_per_request'] * 1e6:5.1f} µs a request; mean TTFT {row['mean_ttft_s'] * 1e3:.2f} ms,"
              f" {row['output_tokens_per_s']:,.0f} output tokens/s{verdict}", flush=True)


if __name__ == "__main__":
    main()
