"""A device's efficiency curves, measured: the matrix multiplies a model's layers run, and memory-bound ops.

The op-level compute model (:mod:`botec.training.ops`) runs each GEMM of a layer in
t = F / (e_mm · peak) + t0 and each memory-bound op (norms, activations, softmax, the optimizer) at a
share e_mem of the memory bandwidth; the catalog ships e_mm, t0 and e_mem per accelerator family.
``botec measure --efficiency-curve`` measures the curve on the device at hand and writes its points to
a file (``botec.efficiency-curve/1``); a contract for the same accelerator may use it
(``assumptions.efficiency_curve``), the line t = F / (e_mm · peak) + t0 fitted to the points
(:func:`botec.inputs.efficiency.fit_curve`).

What is timed
-------------
**GEMMs**: the shapes a layer of the contract's model runs per rank, at its tensor-parallel degrees
(the table in :mod:`botec.measure.gemm_shapes`), timed as ``torch.matmul`` of activations ``[M, K]`` by a
weight stored ``[N, K]`` and used transposed (as ``nn.Linear`` runs it), at the contract's precision (bf16 or
fp16); square GEMMs (64 to 8,192; 16,384 on CUDA) fill the curve. FLOPs of a GEMM: 2·M·K·N.

**Memory-bound ops**: an elementwise add (``c = a + b``: reads two tensors, writes one, 3·n·e bytes) and
a copy (2·n·e bytes) over a ladder of tensor sizes (256 KB to 64 MB per tensor on CPU, 1 GB on CUDA),
cycling through enough buffers that consecutive calls do not find their data in the last-level cache.

How: warm-up calls, then repeats of a sample of enough back-to-back calls to last about a millisecond;
the median sample. On CUDA each sample is bracketed by CUDA events (``torch.cuda.Event``, then
``synchronize``); on CPU by ``time.perf_counter``. Shapes run smallest first and a shape whose
predicted time (its FLOPs or bytes over the best rate so far) does not fit in what is left of
``--budget-seconds`` (¾ for GEMMs, the rest for memory ops) is skipped and counted: the budget caps
the sizes.

Efficiency
----------
    matmul efficiency  = (2·M·K·N / seconds) / peak_flops_per_s
    memory efficiency  = (bytes moved / seconds) / memory_bytes_per_s

The denominators, in order: ``--peak-flops`` / ``--memory-bandwidth`` when given; on CUDA, when the
device's name matches the contract's catalog accelerator, its dense peak at the precision and its memory
bandwidth (``catalog h200 bf16``); else the best rate measured (on CPU, always), stated as such: the
efficiencies are then relative to the best point, which is exactly 1. Shapes of about the same size
(within 20 % in FLOPs or bytes) make one point: the median shape of the group.

Sources: the roofline model (S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual
performance model for multicore architectures", CACM 52(4), 2009): an op runs at min(peak compute,
bandwidth × arithmetic intensity); Calculon (M. Isaev, N. McDonald, L. Dennison, R. Vuduc, "Calculon: a
methodology and tool for high-level co-design of systems and large language models", SC23): per-op
compute and memory efficiencies that depend on the op's size, measured per system.

The file's format, its reader and writer are in :mod:`botec.catalog.curves` (``assumptions.efficiency_curve``
reads it without PyTorch); measuring needs PyTorch (``botec[measure]``).
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from botec.catalog.curves import (BEST_MEASURED, MAX_EFFICIENCY, CurveDevice, CurveFile, MatmulPoint, MemoryPoint,
                                  write)
from botec.errors import UserError
from botec.measure.gemm_shapes import GemmShape, model_gemms, square_gemms

__all__ = ["CurveRun", "Timing", "device_matches", "measure", "command", "curve_lines", "memory_ladder"]

SAME_SIZE = 1.2             # sizes within this factor of a group's smallest make one point
GEMM_SHARE = 0.75           # of the budget, for the GEMMs; the rest for the memory ops
DTYPES = {"bf16": "bfloat16", "fp16": "float16"}


def device_matches(device_name: str, accelerator_key: str) -> bool:
    """Whether torch's device name (``NVIDIA H200``, ``NVIDIA A100-SXM4-80GB``) names the catalog accelerator
    ``accelerator_key`` (``h200``, ``a100-sxm-80gb``, ``rtx-4090``): its model (the key's parts up to the first
    with a digit: ``a100``, ``rtx 4090``) as words of the name, every later all-letter part but sxm/pcie as a
    word too (``rtx-6000-ada``: "ada"), and PCIe in both or in neither."""
    name, key = device_name.lower(), accelerator_key.lower()
    parts = key.split("-")
    first_numbered = next((i for i, part in enumerate(parts) if any(c.isdigit() for c in part)), 0)
    model = r"[\s_-]*".join(re.escape(part) for part in parts[:first_numbered + 1])
    if not re.search(rf"(?<![a-z0-9]){model}(?![a-z0-9])", name):
        return False
    qualifiers = [part for part in parts[first_numbered + 1:] if part.isalpha() and part not in ("sxm", "pcie")]
    if not all(re.search(rf"(?<![a-z0-9]){part}(?![a-z0-9])", name) for part in qualifiers):
        return False
    return ("pcie" in name) == ("pcie" in key)


@dataclass(frozen=True)
class Timing:
    """One timed op: a GEMM (``shape``) or a memory op (``op``, ``bytes``), its median seconds per call."""

    label: str
    seconds: float
    work: float          # FLOPs (GEMM) or bytes moved (memory op)
    shape: GemmShape | None = None
    op: str = ""

    @property
    def rate(self) -> float:
        return self.work / self.seconds


@dataclass
class CurveRun:
    """What a measurement produced: the curve, each op timed, and what the budget left out."""

    curve: CurveFile
    matmul: list[Timing] = field(default_factory=list)
    memory: list[Timing] = field(default_factory=list)
    skipped_matmul: list[GemmShape] = field(default_factory=list)
    skipped_memory: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _median_groups(timings: list[Timing]) -> list[tuple[Timing, int]]:
    """Timings of about the same size (within SAME_SIZE of a group's smallest) -> each group's median (by rate,
    the lower of two middles) and the group's size."""
    groups: list[list[Timing]] = []
    for timing in sorted(timings, key=lambda t: t.work):
        if groups and timing.work <= groups[-1][0].work * SAME_SIZE:
            groups[-1].append(timing)
        else:
            groups.append([timing])
    points = []
    for group in groups:
        ranked = sorted(group, key=lambda t: t.rate)
        points.append((ranked[(len(ranked) - 1) // 2], len(group)))
    return points   # sizes strictly increase: a group's members lie below the next group's smallest


def _cache_bytes(device) -> float:
    """Bytes that a working set must exceed to leave the last-level cache: twice its size."""
    import torch

    if device.type == "cuda":
        return 2.0 * getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 32 * 2**20)
    largest = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
            largest = max(largest, int(text.rstrip("KMG")) * {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1))
        except (OSError, ValueError, IndexError):
            continue
    return min(2.0 * (largest or 32 * 2**20), 512 * 2**20)


class _Clock:
    """Seconds per call of ``fn`` over ``inner`` back-to-back calls: CUDA events on a GPU, perf_counter on CPU."""

    def __init__(self, device):
        import torch

        self.torch, self.cuda = torch, device.type == "cuda"
        self.device = device

    def __call__(self, fn: Callable[[], object], inner: int) -> float:
        torch = self.torch
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / inner
        began = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - began) / inner

    def median(self, fn: Callable[[], object], deadline: float) -> float:
        """Warm up (a few calls, and at least 10 ms: the first calls of a shape pick kernels and wake threads),
        size a sample to last ~1 ms (2 ms on CPU), and return the median of a few samples."""
        warmups, repeats, target = (3, 10, 1e-3) if self.cuda else (1, 5, 2e-3)
        began, calls = time.perf_counter(), []
        while len(calls) < warmups or (time.perf_counter() - began < 0.01 and len(calls) < 1000):
            calls.append(self(fn, 1))
        probe = max(min(calls[-5:]), 1e-7)
        inner = max(1, min(1000, math.ceil(target / probe)))
        left = deadline - time.perf_counter()
        repeats = max(3, min(repeats, int(left / (inner * probe)) if left > 0 else 0))
        samples = [self(fn, inner) for _ in range(repeats)]
        return statistics.median(samples)


def measure(shapes: Sequence[GemmShape], memory_tensor_bytes: Sequence[int], precision: str, *,
            budget_seconds: float = 20.0, peak_flops_per_s: float | None = None,
            memory_bytes_per_s: float | None = None, accelerator: str | None = None,
            progress: Callable[[int, int, str], None] | None = None, say: Callable[[str], None] | None = None,
            device=None) -> CurveRun:
    """Time ``shapes`` and the memory ops over ``memory_tensor_bytes`` (bytes per tensor) at ``precision``
    within ``budget_seconds``, and make the curve.

    ``accelerator``: the contract's catalog accelerator; on CUDA, when the device's name matches it, the
    curve records it and its catalog peak and bandwidth are the denominators (unless given).
    ``progress(done, total, label)`` is called before each op.
    """
    import torch

    from botec.measure.harness import _cpu_name

    if precision not in DTYPES:
        raise UserError(f"--efficiency-curve times torch.matmul at bf16 or fp16, not {precision} (fp8 GEMMs need "
                        "scaled matmuls): --set strategy.precision=bf16")
    say = say or (lambda text: None)
    dtype = getattr(torch, DTYPES[precision])
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    backend = device.type
    device_name = torch.cuda.get_device_name(device) if backend == "cuda" else _cpu_name()
    notes: list[str] = []
    matched = None
    if backend == "cuda" and accelerator:
        if device_matches(device_name, accelerator):
            matched = accelerator
        else:
            notes.append(f"the device ({device_name}) is not the contract's {accelerator}: the curve records no "
                         "accelerator")
    catalog_peak = catalog_bandwidth = None
    if matched:
        from botec.catalog import accelerators

        entry = accelerators()[matched]
        catalog_peak = entry.peak_flops_per_s.get(precision)
        catalog_bandwidth = entry.memory_bandwidth_bytes_per_s

    clock = _Clock(device)
    began = time.perf_counter()
    gemm_deadline = began + GEMM_SHARE * budget_seconds
    deadline = began + budget_seconds
    total = len(shapes) + 2 * len(memory_tensor_bytes)
    done = 0
    run = CurveRun(curve=None, notes=notes)  # type: ignore[arg-type]
    best_rate = 0.0
    per_element_seconds = 2e-9 if backend == "cpu" else 0.0   # making the operands (randn), predicted

    timed_ops: set = set()   # the budget caps the sizes; every op class keeps at least its smallest shape
    with torch.inference_mode():
        for shape in sorted(shapes, key=lambda s: s.flops):
            done += 1
            elements = shape.m * shape.k + shape.k * shape.n + shape.m * shape.n
            predicted = (elements * per_element_seconds
                         + (6 if backend == "cpu" else 16) * (shape.flops / best_rate if best_rate else 0.0))
            if shape.op in timed_ops and time.perf_counter() + predicted > gemm_deadline:
                run.skipped_matmul.append(shape)
                continue
            if progress:
                progress(done, total, shape.label)
            seconds, making = _time_gemm(clock, shape, dtype, gemm_deadline)
            if elements >= 1_000_000:   # small shapes' fixed costs would overstate it
                per_element_seconds = making / elements
            timing = Timing(shape.label, seconds, shape.flops, shape=shape, op=shape.op)
            timed_ops.add(shape.op)
            run.matmul.append(timing)
            best_rate = max(best_rate, timing.rate)
        flush = _cache_bytes(device)
        element = torch.empty((), dtype=dtype).element_size()
        best_rate = 0.0
        for tensor_bytes in sorted(memory_tensor_bytes):
            n = max(1, int(tensor_bytes // element))
            for op, tensors in (("add", 3), ("copy", 2)):
                done += 1
                moved = tensors * n * element
                label = f"{op} {moved / 1e6:g} MB"
                sets = max(1, min(1024, math.ceil(flush / moved)))
                predicted = sets * tensors * n * per_element_seconds + 16 * (moved / best_rate if best_rate else 0)
                if run.memory and time.perf_counter() + predicted > deadline:
                    run.skipped_memory.append(label)
                    continue
                if progress:
                    progress(done, total, label)
                seconds = _time_memory_op(clock, op, tensors, n, sets, dtype, deadline)
                timing = Timing(label, seconds, float(moved), op=op)
                run.memory.append(timing)
                best_rate = max(best_rate, timing.rate)
    if not run.matmul or not run.memory:
        raise UserError("--efficiency-curve needs at least one GEMM and one memory size to time")
    run.curve = _curve_file(run, precision, device_name, matched, backend, torch.__version__,
                            *_denominator(peak_flops_per_s, "--peak-flops", catalog_peak,
                                          f"catalog {matched} {precision}"),
                            *_denominator(memory_bytes_per_s, "--memory-bandwidth", catalog_bandwidth,
                                          f"catalog {matched}"))
    if run.skipped_matmul or run.skipped_memory:
        largest = max(s.gflop for s in run.skipped_matmul) if run.skipped_matmul else 0
        notes.append(f"the budget ({budget_seconds:g} s) left out {len(run.skipped_matmul)} GEMMs (up to "
                     f"{largest:.3g} GFLOP) and {len(run.skipped_memory)} memory ops: --budget-seconds to include them")
    for note in notes:
        say(note)
    return run


def _time_gemm(clock: _Clock, shape: GemmShape, dtype, deadline: float) -> tuple[float, float]:
    """(median seconds of ``x @ w.t()`` for random operands of ``shape``, seconds spent making them)."""
    torch, device = clock.torch, clock.device
    made = time.perf_counter()
    x = torch.randn(shape.m, shape.k, dtype=dtype, device=device)
    weight = torch.randn(shape.n, shape.k, dtype=dtype, device=device).t()   # nn.Linear's layout
    out = torch.empty(shape.m, shape.n, dtype=dtype, device=device)
    if clock.cuda:
        torch.cuda.synchronize(device)
    making = time.perf_counter() - made
    return clock.median(lambda: torch.matmul(x, weight, out=out), deadline), making


def _time_memory_op(clock: _Clock, op: str, tensors: int, elements: int, sets: int, dtype, deadline: float) -> float:
    """Median seconds of one ``add`` (c = a + b) or ``copy`` over tensors of ``elements``, cycling through ``sets``
    sets of them so that consecutive calls miss the cache."""
    torch, device = clock.torch, clock.device
    buffers = [[torch.randn(elements, dtype=dtype, device=device) for _ in range(tensors)] for _ in range(sets)]
    order = itertools.cycle(buffers)

    def step() -> None:
        parts = next(order)
        if op == "add":
            torch.add(parts[0], parts[1], out=parts[2])
        else:
            parts[1].copy_(parts[0])

    return clock.median(step, deadline)


def _denominator(given: float | None, flag: str, catalog: float | None, catalog_source: str):
    """(value or None for the best measured, its source)."""
    if given is not None:
        return given, flag
    if catalog is not None:
        return catalog, catalog_source
    return None, BEST_MEASURED


def _curve_file(run: CurveRun, precision: str, device_name: str, accelerator: str | None, backend: str,
                torch_version: str, peak: float | None, peak_source: str, bandwidth: float | None,
                bandwidth_source: str) -> CurveFile:
    matmul, memory = _median_groups(run.matmul), _median_groups(run.memory)
    peak = peak or max(t.rate for t, _ in matmul)
    bandwidth = bandwidth or max(t.rate for t, _ in memory)
    for points, denominator, source, flag in ((matmul, peak, peak_source, "--peak-flops"),
                                              (memory, bandwidth, bandwidth_source, "--memory-bandwidth")):
        highest = max(t.rate for t, _ in points) / denominator
        if highest > MAX_EFFICIENCY:
            raise UserError(f"{flag}: the measured rate is {highest:.3g} × the stated one ({source}); efficiencies "
                            f"must be in (0, {MAX_EFFICIENCY}]: is the figure right for this device?")
    return CurveFile(
        device=CurveDevice(name=device_name, accelerator=accelerator, backend=backend, torch=torch_version),
        precision=precision, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        peak_flops_per_s=_digits(peak, 6), peak_source=peak_source, memory_bytes_per_s=_digits(bandwidth, 6),
        memory_bandwidth_source=bandwidth_source,
        matmul=[MatmulPoint(gflop=t.work / 1e9, efficiency=_digits(t.rate / peak), m=t.shape.m, k=t.shape.k,
                            n=t.shape.n, seconds=_digits(t.seconds), op=t.op, shapes=count) for t, count in matmul],
        memory=[MemoryPoint(megabytes=t.work / 1e6, efficiency=_digits(t.rate / bandwidth), seconds=_digits(t.seconds),
                            op=t.op, shapes=count) for t, count in memory])


def _digits(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant digits (never 0 for a positive value; 1.0 stays 1.0)."""
    return float(f"{value:.{digits}g}")


def memory_ladder(cuda: bool) -> list[int]:
    """Bytes per tensor of the memory ops: 256 KB to 64 MB on CPU, to 1 GB on CUDA, ×4 each step."""
    largest = 2**30 if cuda else 64 * 2**20
    sizes, size = [], 256 * 2**10
    while size <= largest:
        sizes.append(size)
        size *= 4
    return sizes


def command(result, arch, output: Path, budget_seconds: float, peak_flops_per_s: float | None,
            memory_bytes_per_s: float | None) -> list[str]:
    """``botec measure --efficiency-curve``: measure the contract's model's GEMMs and the memory ops, write the
    curve to ``output``; the lines to print. Progress on stderr."""
    import torch

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    contract = result.contract
    strategy = contract.strategy
    precision = getattr(strategy, "precision", None) or "bf16"
    cuda = torch.cuda.is_available()
    shapes = model_gemms(arch, int(result.value("micro_batch_size")), int(result.value("sequence_length")),
                         strategy.tensor_parallel, getattr(strategy, "context_parallel", 1))
    squares = square_gemms(16384 if cuda else 8192)
    known = {(s.m, s.k, s.n) for s in shapes}
    shapes += [s for s in squares if (s.m, s.k, s.n) not in known]
    accelerator = contract.supply.accelerator if isinstance(contract.supply.accelerator, str) else None
    print(f"botec: timing {len(shapes)} GEMMs of {arch.name} and the memory ops at {precision} "
          f"(budget {budget_seconds:g} s)", file=sys.stderr, flush=True)
    with Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("ops", total=None, last="")

        def progress(done: int, total: int, label: str) -> None:
            bar.update(task, completed=done - 1, total=total, last=label)

        run = measure(shapes, memory_ladder(cuda), precision, budget_seconds=budget_seconds,
                      peak_flops_per_s=peak_flops_per_s, memory_bytes_per_s=memory_bytes_per_s,
                      accelerator=accelerator, progress=progress,
                      say=lambda text: print(f"botec: {text}", file=sys.stderr, flush=True))
    write(run.curve, output)
    return curve_lines(run.curve)


def curve_lines(curve: CurveFile) -> list[str]:
    """A short table of the curve: size, shape, seconds, efficiency; then the memory points."""
    from botec.units import format_quantity

    device = curve.device
    lines = [f"Efficiency curve: {device.name} ({device.backend}, torch {device.torch}), {curve.precision}"
             + (f", catalog accelerator {device.accelerator}" if device.accelerator else ""),
             f"  peak {format_quantity(curve.peak_flops_per_s, 'FLOP/s')} ({curve.peak_source}); memory "
             f"{format_quantity(curve.memory_bytes_per_s, 'B/s')} ({curve.memory_bandwidth_source})"]
    if BEST_MEASURED in (curve.peak_source, curve.memory_bandwidth_source):
        lines.append("  no rated figure for this device: efficiencies are relative to the best point measured "
                     "(--peak-flops, --memory-bandwidth to state them)")
    lines += ["", f"  {'GFLOP':>10}  {'GEMM (M×K×N)':<34}  {'seconds':>10}  {'efficiency':>10}"]
    for p in curve.matmul:
        shape = f"{p.op or ''} {p.m}×{p.k}×{p.n}" + (f" (median of {p.shapes})" if p.shapes > 1 else "")
        lines.append(f"  {p.gflop:>10.4g}  {shape.strip():<34}  {p.seconds:>10.3g}  {p.efficiency:>10.3g}")
    lines += ["", f"  {'MB moved':>10}  {'op':<34}  {'seconds':>10}  {'efficiency':>10}"]
    for p in curve.memory:
        seconds = f"{p.seconds:.3g}" if p.seconds else ""
        lines.append(f"  {p.megabytes:>10.4g}  {p.op or '':<34}  {seconds:>10}  {p.efficiency:>10.3g}")
    return lines
