"""Time `botec estimate` as a whole process, interpreter start included: CPU seconds (user + system of the child,
from ``os.wait4``) and wall seconds.

Target: a median of 0.15 CPU s for the reference workload (issue 15; earlier, 0.5 s wall on a 2-core
machine, issues 2 and 3). CPU seconds are the figure to compare: a shared machine's wall time varies
with its other load, the CPU a process uses much less.

    python benchmarks/estimate_startup.py [--runs 7] [--format text|json|markdown] [CONTRACT ...]
    python benchmarks/estimate_startup.py --examples     # every contract in examples/
    python benchmarks/estimate_startup.py --instructions # instructions executed (valgrind), the same on a busy machine

``--instructions`` counts the machine instructions of one run under valgrind's callgrind (``Collected``; the hash
seed fixed, the .pyc files compiled first): a deterministic figure to compare two trees side by side where CPU
seconds on a loaded machine swing by ±30 %. The reference workload: 1,479 M at ee7e497, 1,542 M after issue 28
(every line wrapped at 100 columns: +54 M, most of it rich wrapping the tables; the model bounds +16 M; rendering
each table cell once −7 M, measuring a plain-ASCII cell by its lengths −10 M, the narrowing loop −3 M, a one-style cell rewrapped as its lines −10 M: 1,521 M).

Prints the median, min and max of each over the runs; exits 0 either way (a benchmark, not a test).
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
    parser.add_argument("--runs", type=int, default=7, help="runs of each contract (default 7; the median is quoted)")
    parser.add_argument("--format", default="text", choices=["text", "json", "markdown"])
    parser.add_argument("--examples", action="store_true", help="time every contract in examples/")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions of one run under valgrind instead of timing (deterministic)")
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
        if args.instructions:
            count_one(contract, args.format)
        else:
            time_one(contract, args.runs, args.format)


def count_one(contract: str | None, format: str) -> None:
    """Print the instructions one ``botec estimate`` executes (valgrind --tool=callgrind), its output thrown away."""
    import re

    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    script = shutil.which("botec") or str(Path(sys.executable).with_name("botec"))
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, script, "estimate",
               *([contract] if contract else []), "--format", format]
    env = dict(os.environ, COLUMNS="120", PYTHONHASHSEED="0")
    done = subprocess.run(command, capture_output=True, env=env, text=True)
    counted = re.findall(r"Collected : (\d+)", done.stderr)
    if done.returncode or not counted:
        raise SystemExit(f"valgrind run failed ({done.returncode}): {done.stderr[-500:]}")
    name = Path(contract).name if contract else "reference workload"
    print(f"{name}: {int(counted[-1]) / 1e6:,.1f} M instructions (one run under callgrind)")


def time_one(contract: str | None, runs: int, format: str) -> None:
    script = shutil.which("botec") or str(Path(sys.executable).with_name("botec"))
    command = [script, "estimate", *([contract] if contract else []), "--format", format]
    env = dict(os.environ, COLUMNS="120")
    subprocess.run(command, check=True, capture_output=True, env=env)  # warm the file cache and .pyc files
    cpu_seconds, wall_seconds = [], []
    for _ in range(runs):
        cpu, wall = run_once(command, env)
        cpu_seconds.append(cpu)
        wall_seconds.append(wall)
    name = Path(contract).name if contract else "reference workload"
    print(f"{name}: CPU median {statistics.median(cpu_seconds):.3f} s (min {min(cpu_seconds):.3f}, max "
          f"{max(cpu_seconds):.3f}); wall median {statistics.median(wall_seconds):.3f} s (min {min(wall_seconds):.3f},"
          f" max {max(wall_seconds):.3f}) over {runs} runs on {os.cpu_count()} CPUs")


def run_once(command: list[str], env: dict) -> tuple[float, float]:
    """(CPU seconds: user + system, wall seconds) of one run of ``command``, its output thrown away."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    error = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode:
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}: {error.decode(errors='replace')[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall

if __name__ == "__main__":
    main()
