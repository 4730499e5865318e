"""Time the training layout search on GPT-3 175B (96 layers, hidden 12,288, 96 heads, sequence 2,048)
on 1,024 A100-80GB with a global batch of 1,536 sequences (examples/gpt3-175b-search.yaml).

Target (issue 6): at least 1,000,000 candidates per second on one core, the whole search under 10 s.
Calculon's llm-optimal-execution manages 100-200 per second on two cores (research note §3.4).

    python benchmarks/layout_search.py [--repeat 5] [--one-core]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--one-core", action="store_true", help="pin the process to one CPU")
    args = parser.parse_args()
    if args.one_core and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"
    from botec.contract import load_contract
    from botec.explore.search import search
    from botec.inputs import build_inputs

    path = Path(__file__).resolve().parents[1] / "examples" / "gpt3-175b-search.yaml"
    contract = build_inputs(load_contract(path), path.parent)
    search(contract, top=1)  # warm up imports and caches
    times, result = [], None
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = search(contract, top=10)
        times.append(time.perf_counter() - start)
    wall = statistics.median(times)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"GPT-3 175B on 1,024 A100-80GB: {result.candidates:,} candidates, {result.evaluated:,} valid after "
          f"pruning, {result.feasible:,} fit")
    print(f"median wall {wall:.3f} s over {args.repeat} runs on {cores} core(s): "
          f"{result.candidates / wall:,.0f} candidates/s")
    best = result.best[0]
    print("best:", best["layout"], f"step {best['figures']['step_seconds']:.2f} s, "
          f"{best['figures']['planned_device_bytes'] / 1e9:.1f} GB planned")


if __name__ == "__main__":
    main()
