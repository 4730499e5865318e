"""Time one `botec.estimate` in process, the contract already loaded: CPU seconds per estimate.

Targets: a training estimate stays at or under 2 ms in process (issue 19), a serving estimate at or under
10 ms (issue 29: one replica model solved for its latency limits and at the fleet's load). A serving contract
that names ``supply.candidates`` is estimated once per accelerator it compares (the contract's own and each
candidate), so its figure is that many estimates: the table says how many, and holds it to the target times
that count. The contract is parsed once (``botec.api.load``); each repetition builds the whole estimate from
it (every account, every finding), as a sweep or a search does for each candidate. CPU seconds
(``time.process_time``) are the figure to compare: on a shared machine wall time swings with the other load,
CPU time much less.

    python benchmarks/estimate_in_process.py [--repeats 200] [CONTRACT ...]
    python benchmarks/estimate_in_process.py               # the reference workload and every serve-* example
    python benchmarks/estimate_in_process.py --examples    # every contract in examples/

Prints the median CPU milliseconds per estimate over batches of repeats; exits 0 either way
(a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from botec.api import load
from botec.estimation import accelerator_options, estimate as estimate_contract

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TARGET_MS = {"training": 2.0, "serving": 10.0}   # issue 19, issue 29


def cpu_ms_per_estimate(contract, base_dir: Path | None, repeats: int, batches: int = 7) -> float:
    """Median over ``batches`` of (CPU seconds of ``repeats`` estimates) / repeats, in ms."""
    estimate_contract(contract, base_dir)  # warm: catalog caches, imports
    per_batch = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(repeats):
            estimate_contract(contract, base_dir)
        per_batch.append((time.process_time() - start) / repeats * 1e3)
    return statistics.median(per_batch)


def accelerators_compared(contract) -> int:
    """How many accelerators one estimate of ``contract`` evaluates: 1, or each of a serving contract's candidates
    and its own (:func:`botec.estimation.compare_accelerators`)."""
    if contract.workload.kind != "serving" or not contract.supply.candidates:
        return 1
    return max(len(accelerator_options(contract)), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="estimates per timed batch (default 200)")
    parser.add_argument("--examples", action="store_true", help="time every contract in examples/")
    parser.add_argument("contracts", nargs="*", help="contracts to time (default: the reference workload and the "
                                                     "serving examples)")
    args = parser.parse_args()
    sources = list(args.contracts)
    if args.examples:
        sources += sorted(str(path) for path in EXAMPLES.glob("*.yaml"))
    if not sources:
        sources = [None] + sorted(str(path) for path in EXAMPLES.glob("serve-*.yaml"))
    print(f"{'contract':<40} {'kind':<9} {'accelerators':>12} {'CPU ms per estimate':>20} {'target ms':>10}")
    for source in sources:
        contract, base_dir = load(source)
        label = Path(source).stem if source else "reference workload"
        kind, compared = contract.workload.kind, accelerators_compared(contract)
        target = TARGET_MS.get(kind, TARGET_MS["training"]) * compared
        ms = cpu_ms_per_estimate(contract, base_dir, args.repeats)
        verdict = "ok" if ms <= target else "over"
        print(f"{label:<40} {kind:<9} {compared:>12} {ms:>20.3f} {target:>7.0f} {verdict}")


if __name__ == "__main__":
    main()
