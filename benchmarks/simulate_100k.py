"""How fast `botec simulate` runs: 100,000 requests through one replica, on one core.

The workload: Llama 3.1-8B in BF16 on one H100 (vLLM's defaults), Poisson arrivals at 80 % of the analytic
offline capacity (``offline_requests_per_s_per_replica``), lognormal prompt and output lengths (σ = 0.5)
with means 1,000 and 250 tokens. The target: under 10 CPU seconds (``time.process_time``) on one core.

    .venv/bin/python benchmarks/simulate_100k.py [--requests 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

CONTRACT = """\
name: simulate-benchmark-llama3.1-8b-h100
description: Llama 3.1-8B on one H100, lognormal chat traffic (prompt 1,000, output 250 tokens on average).
workload:
  kind: serving
  model: llama-3.1-8b
  traffic:
    requests_per_second: 10          # replaced below by 80 % of the analytic capacity
    prompt_tokens: 1000
    output_tokens: 250
    length_distribution: lognormal
    length_sigma: 0.5
    arrivals: poisson
  latency:
    time_to_first_token: 500 ms
    time_per_output_token: 50 ms
supply:
  accelerator: h100-sxm
strategy:
  engine: vllm
  tensor_parallel: 1
  weight_precision: bf16
  kv_cache_precision: bf16
assumptions:
  attention_flops: causal
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--load", type=float, default=0.8, help="share of the analytic capacity (default 0.8)")
    args = parser.parse_args()

    from botec.estimation import estimate_file
    from botec.simulate import simulate

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "contract.yaml"
        path.write_text(CONTRACT)
        capacity = estimate_file(path).quantities["offline_requests_per_s_per_replica"].value
        rate = args.load * capacity
        result = estimate_file(path, [f"workload.traffic.requests_per_second={rate}"])

    started = time.process_time()
    run = simulate(result, requests=args.requests, seed=args.seed, rate=rate, replicas=1)
    cpu_seconds = time.process_time() - started

    print(f"{args.requests:,} requests, Poisson at {rate:.3f} requests/s ({args.load:.0%} of the analytic capacity "
          f"{capacity:.3f}), lognormal lengths around 1,000 + 250 tokens, Llama 3.1-8B on one H100")
    print(f"simulated {run.simulated_seconds:,.0f} s in {run.steps:,} engine steps; mean decode batch "
          f"{run.mean_decode_batch:.1f}, at most {run.max_running_batch} running, {run.preemptions} preemptions")
    print(f"TTFT mean {run.ttft.mean_seconds * 1e3:.1f} ms, P99 {run.ttft.p99_seconds * 1e3:.1f} ms; TPOT mean "
          f"{run.tpot.mean_seconds * 1e3:.2f} ms, P99 {run.tpot.p99_seconds * 1e3:.2f} ms; throughput "
          f"{run.throughput_requests_per_s:.3f} requests/s")
    print(f"CPU seconds: {cpu_seconds:.2f} ({args.requests / cpu_seconds:,.0f} requests per CPU second; "
          f"target < 10 s: {'met' if cpu_seconds < 10 else 'MISSED'})")


if __name__ == "__main__":
    main()
