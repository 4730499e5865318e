"""How much fanning simulations out over local workers saves: a study's cells on 1 worker, then on 2.

The issue's target (22): a study of 100 configurations × 10^5 requests runs on 2 local workers in under 60 % of
the time of 1. Each configuration here is one simulation of ``--requests`` requests of the serving example
(Llama 3.1-8B on one H100) at its own rate (configuration k: 10 + k/10 requests per s) and seed k, fanned out by
:func:`botec.fanout.run_tasks`, exactly as ``simulate --seeds`` and ``botec study`` fan theirs. It reports the
wall time, the CPU of this process and of the tasks (the workers' own start-up is not in the tasks' CPU: it is the
wall time's difference), the ratio 2 workers / 1, and checks that both runs give the same figures.

    .venv/bin/python benchmarks/fanout.py [--configurations 100] [--requests 100000] [--workers 1,2] [--ray local]
    .venv/bin/python benchmarks/fanout.py --start-up     # a pool's start-up, 2 and 4 workers, twice each

Full size (100 × 10^5) is about 100 × 1.4 s = 2.5 min on one core; ``--configurations 12 --requests 20000`` is a
quick look. On a machine whose cores are busy with other work the ratio says less: say so with the figures.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

SERVING = Path(__file__).resolve().parent.parent / "examples" / "serve-llama3.1-8b-h100.yaml"


def timed_run(task):
    """One configuration's simulation, with the CPU seconds it took in the worker."""
    from botec.simulate.replications import _run

    started = time.process_time()
    simulation = _run(task)
    return (simulation.ttft.percentile(99), simulation.measured_requests), time.process_time() - started


def study(configurations: int, requests: int, workers: int, ray_address: str = "") -> tuple[list, dict]:
    from botec.estimation import estimate_file
    from botec.fanout import run_tasks
    from botec.simulate.replications import _estimate
    from botec.fanout import Rebuilt

    result = estimate_file(SERVING)
    estimate = Rebuilt(_estimate, result.inputs.contract, result.inputs.base_dir)
    tasks = [(estimate, k, {"requests": requests, "rate": 10 + k / 10}) for k in range(configurations)]
    wall, cpu = time.perf_counter(), time.process_time()
    done = run_tasks(timed_run, tasks, workers=workers, ray_address=ray_address)
    figures = {"wall_s": time.perf_counter() - wall, "parent_cpu_s": time.process_time() - cpu,
               "tasks_cpu_s": sum(seconds for _, seconds in done)}
    return [answer for answer, _ in done], figures


def start_up() -> None:
    from botec.fanout import run_tasks

    for workers in (2, 4, 2, 4):
        started = time.perf_counter()
        run_tasks(abs, list(range(workers)), workers=workers, ray_address="")
        print(f"pool of {workers}: {time.perf_counter() - started:.2f} s to start and answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configurations", type=int, default=100)
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2", help="worker counts to compare, the first the baseline")
    parser.add_argument("--start-up", action="store_true", help="time a pool's start-up only")
    parser.add_argument("--ray", default="", help="then the same study on this Ray cluster ('local': one started "
                                                  "here), its figures compared with the baseline's")
    args = parser.parse_args()
    if args.start_up:
        start_up()
        return
    print(f"{args.configurations} configurations x {args.requests:,} requests; {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f} at the start")
    baseline = None
    for workers in (int(w) for w in args.workers.split(",")):
        answers, figures = study(args.configurations, args.requests, workers)
        ratio = "" if baseline is None else f", {figures['wall_s'] / baseline[1]['wall_s']:.0%} of the baseline's wall"
        same = "" if baseline is None else f", same figures: {answers == baseline[0]}"
        print(f"{workers} worker(s): wall {figures['wall_s']:.2f} s, this process {figures['parent_cpu_s']:.2f} s "
              f"CPU, tasks {figures['tasks_cpu_s']:.2f} s CPU{ratio}{same}")
        baseline = baseline or (answers, figures)
    if args.ray:
        answers, figures = study(args.configurations, args.requests, 1, args.ray)
        print(f"Ray ({args.ray}): wall {figures['wall_s']:.2f} s, tasks {figures['tasks_cpu_s']:.2f} s CPU, "
              f"{figures['wall_s'] / baseline[1]['wall_s']:.0%} of the baseline's wall, same figures: "
              f"{answers == baseline[0]}")


if __name__ == "__main__":
    main()
