"""How long `botec calibrate` takes on a Megatron-LM log with one very long line: the CPU seconds of the command.

The log is ``examples/logs/megatron-gpt3-175b.log`` with one line made long, in a temporary folder, then
``botec calibrate examples/gpt3-175b-search.yaml LOG`` runs in a fresh process; the benchmark prints the CPU seconds
(user + system, from ``resource.getrusage(RUSAGE_CHILDREN)``) of each run, the start-up included (the first row:
the log as shipped). The long lines, each at 100 KB and 1 MB:

- ``argument``: digits appended to the argument line `` bf16 ...... True`` (reliability-3 D2: the timer-entry
  pattern ``(\\S+) \\.{2,}: …``, searched on every line, backtracked from every character of a word: 10,000
  characters 1.1 CPU s, 100,000 characters 42.5 CPU s, a 1 MB line about an hour by extrapolation);
- ``word``: a line of one word of letters (the same pattern, on any line);
- ``rank``: ``[Rank 0]`` then spaces (the memory pattern's ``\\s*(.*?)\\s*memory`` was cubic in them: 8,000 spaces
  took 134 CPU s).

Issue 28's target: a 1 MB line in under 2 CPU s (the command's start-up included).

    .venv/bin/python benchmarks/calibrate_long_line.py [--kilobytes 100 1000] [--shape argument word rank]

The script runs the ``botec`` command of the interpreter running it, so ``PYTHONPATH=/path/to/old/src`` measures
an older tree (pass ``--kilobytes 10 30`` there: the old reader is quadratic).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTRACT = REPO / "examples" / "gpt3-175b-search.yaml"
LOG = REPO / "examples" / "logs" / "megatron-gpt3-175b.log"
ARGUMENT_LINE = 3          # 0-based: "  bf16 ........ True"
TARGET_CPU_SECONDS = 2.0   # for a 1 MB line

SHAPES = {
    "argument": lambda lines, n: lines[:ARGUMENT_LINE] + [lines[ARGUMENT_LINE] + "9" * n] + lines[ARGUMENT_LINE + 1:],
    "word": lambda lines, n: lines[:ARGUMENT_LINE] + ["a" * n] + lines[ARGUMENT_LINE:],
    "rank": lambda lines, n: lines[:ARGUMENT_LINE] + ["[Rank 0]" + " " * n + "x"] + lines[ARGUMENT_LINE:],
}


def calibrate_cpu_seconds(log: Path) -> tuple[float, int, str]:
    """CPU seconds (user + system) of ``botec calibrate CONTRACT LOG`` in a fresh process, its exit code and
    its last stderr line."""
    botec = [sys.executable, "-c", "from botec.cli import main; main()"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(botec + ["calibrate", str(CONTRACT), str(log)], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilobytes", type=float, nargs="+", default=[100, 1000],
                        help="the long line's length in kB (default 100 and 1,000)")
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    options = parser.parse_args()
    lines = LOG.read_text(encoding="utf-8").split("\n")
    with tempfile.TemporaryDirectory() as folder:
        cpu, code, last = calibrate_cpu_seconds(LOG)
        print(f"{'the log as shipped':<32} {cpu:6.2f} CPU s  exit {code}")
        for shape in options.shape:
            for kilobytes in options.kilobytes:
                characters = int(kilobytes * 1000)
                log = Path(folder) / f"{shape}-{characters}.log"
                log.write_text("\n".join(SHAPES[shape](lines, characters)), encoding="utf-8")
                cpu, code, last = calibrate_cpu_seconds(log)
                verdict = ""
                if characters >= 1_000_000:
                    verdict = f"  target < {TARGET_CPU_SECONDS:g} s: {'met' if cpu < TARGET_CPU_SECONDS else 'MISSED'}"
                note = "" if code == 0 else f"  ({last[:100]})"
                print(f"{shape + f', {characters:,} characters':<32} {cpu:6.2f} CPU s  exit {code}{verdict}{note}")


if __name__ == "__main__":
    main()
