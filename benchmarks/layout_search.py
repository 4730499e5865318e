"""Time the training layout search on GPT-3 175B (96 layers, hidden 12,288, 96 heads, sequence 2,048)
on 1,024 A100-80GB with a global batch of 1,536 sequences (examples/gpt3-175b-search.yaml), and measure
its peak memory over ten million candidates.

Targets: at least 1,000,000 candidates per second on one core, the whole search under 10 s (issue 6);
peak resident memory under 300 MB for 10^7 candidates, flat in the candidate count (issue 21: the search
keeps a running top-k per chunk, not every column of every row). Calculon's llm-optimal-execution manages
100-200 candidates per second on two cores (research note §3.4).

    python benchmarks/layout_search.py [--repeat 5] [--one-core]
    python benchmarks/layout_search.py --memory [--mfu-values 62]   # a fresh process: its peak RSS is the search's
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
    parser.add_argument("--memory", action="store_true",
                        help="instead of timing: one search over the layouts × --mfu-values values of "
                             "assumptions.matmul_efficiency (62: 9,999,360 candidates), then the peak RSS")
    parser.add_argument("--mfu-values", type=int, default=62)
    args = parser.parse_args()
    if args.one_core and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"
    from botec.contract import load_contract
    from botec.inputs import build_inputs

    path = Path(__file__).resolve().parents[1] / "examples" / "gpt3-175b-search.yaml"
    contract = build_inputs(load_contract(path), path.parent)
    if args.memory:
        peak_memory(contract, args.mfu_values)
    else:
        timing(contract, args.repeat)


def timing(contract, repeat: int) -> None:
    from botec.explore.search import search

    search(contract, top=1)  # warm up imports and caches
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = search(contract, top=10)
        times.append(time.perf_counter() - start)
    wall = statistics.median(times)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"GPT-3 175B on 1,024 A100-80GB: {result.candidates:,} candidates, {result.evaluated:,} valid after "
          f"pruning, {result.feasible:,} fit")
    print(f"median wall {wall:.3f} s over {repeat} runs on {cores} core(s): "
          f"{result.candidates / wall:,.0f} candidates/s")
    best = result.best[0]
    print("best:", best["layout"], f"step {best['figures']['step_seconds']:.2f} s, "
          f"{best['figures']['planned_device_bytes'] / 1e9:.1f} GB planned")


def peak_memory(contract, mfu_values: int) -> None:
    """One search over the layouts × ``mfu_values`` matmul efficiencies; the process's peak resident memory
    (``ru_maxrss``, kilobytes on Linux) before and after it."""
    import resource

    import numpy as np

    from botec.explore.search import default_axes, search
    from botec.explore.space import Axis

    axes = default_axes(contract) + [Axis("assumptions.matmul_efficiency", np.linspace(0.4, 0.7, mfu_values))]
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    result = search(contract, top=10, axes=axes)
    wall = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{result.candidates:,} candidates ({result.evaluated:,} valid, {result.feasible:,} fit) in {wall:.1f} s")
    print(f"peak RSS {peak_mb:,.0f} MB (imports and inputs: {before_mb:,.0f} MB); target under 300 MB")


if __name__ == "__main__":
    main()
