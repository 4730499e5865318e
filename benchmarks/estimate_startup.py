"""Time `botec estimate` of the reference workload as a whole process, interpreter start included.

Target (issue 2): median under 0.5 s on a 2-core machine.

    python benchmarks/estimate_startup.py [--runs 21] [--format text|json|markdown]

Prints every run's wall time and the median; exits 0 either way (a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--format", default="text", choices=["text", "json", "markdown"])
    args = parser.parse_args()
    script = shutil.which("botec") or str(Path(sys.executable).with_name("botec"))
    command = [script, "estimate", "--format", args.format]
    env = dict(os.environ, COLUMNS="120")
    subprocess.run(command, check=True, capture_output=True, env=env)  # warm the file cache and .pyc files
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    print(f"command: {' '.join(command)}")
    print("runs (s): " + ", ".join(f"{t:.3f}" for t in times))
    print(f"median {statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s "
          f"over {args.runs} runs on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
