"""Time `botec estimate` as a whole process, interpreter start included.

Target: median under 0.5 s on a 2-core machine, for the reference workload (issue 2) and for
every example (issue 3).

    python benchmarks/estimate_startup.py [--runs 21] [--format text|json|markdown] [CONTRACT ...]
    python benchmarks/estimate_startup.py --examples     # every contract in examples/

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
    parser.add_argument("--examples", action="store_true", help="time every contract in examples/")
    parser.add_argument("contracts", nargs="*", help="contracts to time (default: the reference workload)")
    args = parser.parse_args()
    # Cached bytecode, as an installed package has it (this machine sets PYTHONDONTWRITEBYTECODE,
    # which would otherwise make every run recompile botec's sources).
    import compileall

    import botec

    compileall.compile_dir(str(Path(botec.__file__).parent), quiet=1)
    contracts = list(args.contracts)
    if args.examples:
        contracts += sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))
    for contract in contracts or [None]:
        time_one(contract, args.runs, args.format)


def time_one(contract: str | None, runs: int, format: str) -> None:
    script = shutil.which("botec") or str(Path(sys.executable).with_name("botec"))
    command = [script, "estimate", *([contract] if contract else []), "--format", format]
    env = dict(os.environ, COLUMNS="120")
    subprocess.run(command, check=True, capture_output=True, env=env)  # warm the file cache and .pyc files
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    print(f"{Path(contract).name if contract else 'reference workload'}: median {statistics.median(times):.3f} s, "
          f"min {min(times):.3f} s, max {max(times):.3f} s over {runs} runs on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
