"""How long `botec calibrate` takes on a long torchtitan log: the CPU seconds of the whole command.

The log is written in a temporary folder in torchtitan's format (v0.1-v0.2: the ``[titan]`` prefix, ANSI colours,
``grad_norm``, ``tflops``; the header of tests/data/torchtitan-llama2-7b.log: 8 A100s, FSDP, global batch 64 ×
4,096 tokens), one step line per step with tokens/s drawn around 2,400 per accelerator (±3 %, seeded), until it
holds the asked size (100 MB: some 430,000 lines). Then ``botec calibrate examples/llama2-7b-fsdp-finetune.yaml
LOG`` runs in a fresh process, and the benchmark prints its wall and CPU seconds (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``) and the CPU per logged line.

Issue 21's target: a 100 MB log in under 30 s (0.6.0 was quadratic in the logged steps: 32,000 lines took 52 s).

    .venv/bin/python benchmarks/calibrate_log.py [--megabytes 100] [--steps N] [--seed 0]

``--steps`` writes exactly N step lines instead of filling a size. The script runs the ``botec`` command of the
interpreter running it, so ``PYTHONPATH=/path/to/old/src`` measures an older tree.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTRACT = REPO / "examples" / "llama2-7b-fsdp-finetune.yaml"
HEADER = [
    "[titan] 2025-06-20 10:00:01,202 - root - INFO - Building 1-D device mesh with ['dp_shard'], [8]",
    "[titan] 2025-06-20 10:00:01,250 - root - INFO - CUDA capacity: NVIDIA A100-SXM4-80GB with 79.15GiB memory",
    "[titan] 2025-06-20 10:00:09,300 - root - INFO - Trainer is initialized with local batch size 4, global batch "
    "size 64, gradient accumulation steps 2, sequence length 4096, total steps 1000 (warmup 100).",
    "[titan] 2025-06-20 10:00:09,310 - root - INFO - Training starts at step 1.",
]
TOKENS_PER_S = 2400.0       # per accelerator: a 13.65 s step of 64 × 4,096 tokens on 8 A100s
TFLOPS_PER_TOKENS_PER_S = 0.04608   # torchtitan's tflops per tps for Llama 2-7B (110.6 TFLOP/s at 2,400 tokens/s)


def step_line(step: int, tokens_per_s: float) -> str:
    """One torchtitan step line (its colours, thousands separators and field widths)."""
    tflops = tokens_per_s * TFLOPS_PER_TOKENS_PER_S
    return (f"[titan] 2025-06-20 10:00:10,000 - root - INFO - \x1b[31mstep: {step:2}  \x1b[32mloss:  2.51230  "
            f"\x1b[38;2;180;60;0mgrad_norm:  1.2015  \x1b[38;2;54;234;195mmemory: 22.38GiB(28.28%)  "
            f"\x1b[34mtps: {tokens_per_s:,.0f}  \x1b[36mtflops: {tflops:,.2f}  \x1b[35mmfu: {tflops / 3.12:.2f}%"
            "\x1b[39m")


def write_log(path: Path, megabytes: float | None, steps: int | None, seed: int) -> int:
    """Write the log; returns the number of step lines."""
    draw = random.Random(seed)
    limit = None if megabytes is None else megabytes * 1e6
    written, step = 0, 0
    with open(path, "w", encoding="utf-8") as file:
        for line in HEADER:
            written += file.write(line + "\n")
        while (steps is not None and step < steps) or (steps is None and written < limit):
            step += 1
            written += file.write(step_line(step, TOKENS_PER_S * (1 + draw.uniform(-0.03, 0.03))) + "\n")
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=100.0, help="the log's size (default 100 MB)")
    parser.add_argument("--steps", type=int, default=None, help="exactly this many step lines instead")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "torchtitan.log"
        lines = write_log(log, None if options.steps else options.megabytes, options.steps, options.seed)
        size = log.stat().st_size
        botec = [sys.executable, "-c", "from botec.cli import main; main()"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(botec + ["calibrate", str(CONTRACT), str(log)], capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        sys.exit(f"botec calibrate failed ({done.returncode}): {done.stderr.strip()}")
    print(f"log: {lines:,} step lines, {size / 1e6:.1f} MB")
    print(f"botec calibrate: {wall:.2f} s wall, {cpu:.2f} s CPU ({cpu / lines * 1e6:.1f} µs CPU per line)")
    print("target (100 MB): under 30 s" + (f": {'met' if cpu < 30 else 'MISSED'}" if size >= 99e6 else ""))


if __name__ == "__main__":
    main()
