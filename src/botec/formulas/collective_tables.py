"""Measured collective latencies by message size and ranks: the tables serving (and training) price collectives from.

``catalog/measurements/operators/<op>-<source>-<accelerator>.yaml`` hold NVIDIA AIConfigurator's measured
collective tables (Apache-2.0, see ``catalog/measurements/NOTICE``), written by
``benchmarks/extract_operator_tables.py``: the latency L(S, n) of one collective of an S-byte tensor (NCCL's
convention: the all-reduced tensor, the gathered result, the per-rank buffer of an all-to-all) over n = 2, 4, 8
GPUs of one node, S = 256 B … 1 GiB in powers of two. ``<op>`` is allreduce, allgather, reducescatter or alltoall;
``<source>`` the engine whose own all-reduce kernel was timed (``tensorrt-llm``, ``vllm``, ``sglang``: the kernel
each engine runs for its tensor-parallel all-reduce, vLLM's and SGLang's captured in a CUDA graph) or ``nccl``.
These are collectives timed one at a time, not the end-to-end runs ``botec validate`` grades.

Lookup (:func:`collective_seconds`): linear interpolation of log L over log S between the table's neighbours at the
table's own rank counts (no interpolation between rank counts: a count it lacks has no table); S above the largest
size scales L by S / S_max (the bandwidth-bound region's proportionality), S below the smallest takes the smallest's.

The knee (:func:`allreduce_knee`). A step of T tokens all-reduces an S = T·h·b-byte tensor; the serving step keeps
its cost a closed form of T, the power mean of a latency side α and a bandwidth side β·S,

    L(S) ≈ (α^p + (β·S)^p)^(1/p)                      p = 1: the α–β sum; p < 1: above it near the crossover

fitted to the table's points at the message sizes the step produces (T = 1, 2, 4 … its token budget): for each p,
(α^p, β^p) by linear least squares of the relative error in L^p (closed form); p by golden-section search over
[1/4, 4] for the least squares of log L. A custom all-reduce is not one algorithm: TensorRT-LLM's goes one-shot,
two-shot then NCCL as S grows, so the measured curve rises faster than α + β·S between its latency floor and its
bandwidth asymptote (the fitted p is 0.4-0.8 at 4 and 8 ranks, 1.0-1.3 at 2). On Hopper the fit follows the table
within about ±10-30 % over T = 1 … 8,192 for h = 4,096-8,192, where the straight α + β·S misses by up to 60 %.

Tables load once, lazily (``catalog_cache``), only when a contract's accelerator and engine have one; a single estimate
runs in pure Python (no numpy): the fit is cached per (table, ranks, hidden size, bytes, budget).
"""

from __future__ import annotations

from dataclasses import dataclass

import bisect
import math

from botec.catalog.root import catalog_cache

__all__ = ["CollectiveTable", "table_names", "load_table", "collective_table", "allreduce_table", "table_index",
           "table_by_index", "collective_seconds", "allreduce_knee", "AllReduceKnee", "fit_tokens", "ENGINE_TABLES",
           "KNEE_EXPONENT_RANGE", "nccl_devices", "nccl_device_index", "measured_or_modelled", "BUS_FACTORS",
           "bus_bytes_per_s"]

OPS = ("allreduce", "allgather", "reducescatter", "alltoall")
ENGINE_TABLES = ("tensorrt-llm", "vllm", "sglang")
"""The engines (catalog/engines.yaml keys) whose own all-reduce kernel a table holds."""
TRAINING_OPS = ("allreduce", "allgather", "reducescatter")
"""The NCCL tables training's collectives read (the data-parallel and tensor-parallel ones)."""
BUS_FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
               "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}
"""nccl-tests' bus-bandwidth factor busbw / algbw per op over n ranks (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""
KNEE_EXPONENT_RANGE = (0.25, 4.0)
"""p's bounds: 1/4 is a curve far above α + β·S near the crossover, 4 within 19 % of max(α, β·S) there."""
KNEE_SEARCH_STEPS = 48   # golden-section steps over log p: the bracket shrinks by 0.618^48 ≈ 1e-10


@dataclass(frozen=True)
class CollectiveTable:
    """One measured collective: latencies (seconds) at every (ranks, message bytes) of its axes."""

    name: str                 # the file's stem: <op>-<source>-<accelerator>
    op: str                   # all_reduce | all_gather | reduce_scatter | alltoall
    device: str               # the catalog key of the accelerator measured
    dtype: str
    measured_on: str
    source: dict
    ranks: tuple              # the rank counts measured (ints, ascending)
    message_bytes: tuple      # the sizes (floats, ascending)
    log_seconds: tuple        # [ranks][size]: log of seconds

    def describe(self) -> str:
        """Where the table comes from, in one line."""
        return (f"{self.name}: AIConfigurator {self.source.get('engine', '')} {self.source.get('kernel', '')}, "
                f"{self.measured_on}, {', '.join(map(str, self.ranks))} ranks, {_bytes(self.message_bytes[0])} … "
                f"{_bytes(self.message_bytes[-1])} ({self.source.get('path', '')}, {self.source.get('license', '')})")


def _bytes(value: float) -> str:
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B"


@catalog_cache
def table_names() -> tuple[str, ...]:
    """The file stems of the collective tables in ``catalog/measurements/operators``, sorted (no file is parsed)."""
    from botec.catalog.operator_files import operator_file_names

    return operator_file_names(*OPS)


@catalog_cache
def load_table(name: str) -> CollectiveTable:
    """The table of ``measurements/operators/<name>.yaml``, parsed and checked once."""
    from botec.catalog.operator_files import read_operator_file

    data = read_operator_file(name)
    sizes = tuple(float(v) for v in data["message_bytes"])
    ranks = tuple(int(v) for v in data["ranks"])
    rows = {int(r): latencies for r, latencies in data["rows"]}
    if sorted(rows) != list(ranks) or list(sizes) != sorted(sizes):
        raise ValueError(f"measurements/operators/{name}.yaml: rows do not match ranks {ranks} or sizes not ascending")
    for r, latencies in rows.items():
        if len(latencies) != len(sizes) or not all(float(v) > 0 for v in latencies):
            raise ValueError(f"measurements/operators/{name}.yaml: row {r} is not {len(sizes)} positive latencies")
    return CollectiveTable(name, str(data["op"]), str(data["device"]), str(data["dtype"]), str(data["measured_on"]),
                           dict(data["source"]), ranks, sizes,
                           tuple(tuple(math.log(float(v) * 1e-6) for v in rows[r]) for r in ranks))


def collective_table(op: str, source: str, device: str | None) -> CollectiveTable | None:
    """The ``op`` table (allreduce, allgather, reducescatter, alltoall) of ``source`` (an engine key or nccl)
    measured on ``device`` (catalog key), or None."""
    name = f"{op}-{source}-{device}"
    return load_table(name) if device is not None and name in table_names() else None


def allreduce_table(device: str | None, engine: str) -> CollectiveTable | None:
    """The all-reduce an engine's tensor parallelism runs on ``device``: its own kernel's table, else NCCL's."""
    own = collective_table("allreduce", engine, device) if engine in ENGINE_TABLES else None
    return own if own is not None else collective_table("allreduce", "nccl", device)


def table_index(table: CollectiveTable | None) -> float:
    """The table's position among :func:`table_names` (−1 for none): how the graph names it as a number."""
    return -1.0 if table is None else float(table_names().index(table.name))


def table_by_index(index) -> CollectiveTable | None:
    """The inverse of :func:`table_index` (an array of one repeated index is accepted)."""
    value = float(index.max()) if getattr(index, "ndim", 0) else float(index)
    return None if value < 0 else load_table(table_names()[int(round(value))])


def collective_seconds(table: CollectiveTable, ranks: int, message_bytes: float, beyond: str = "proportional"
                       ) -> float:
    """Seconds of one collective of ``message_bytes`` over ``ranks`` GPUs (one of ``table.ranks``), plain numbers:

        log L = (1 − w)·log L_i + w·log L_{i+1},  w = (log S − log S_i) / (log S_{i+1} − log S_i)

    between the neighbouring sizes S_i ≤ S ≤ S_{i+1}; below the smallest L(S_min). Above the largest size,
    ``beyond="proportional"`` (serving's) L(S_max)·S / S_max; ``beyond="alpha_beta"`` (training's) the α–β line
    through the table's last two points, L = α + β·S with β = (L_max − L_prev) / (S_max − S_prev) and α = L_max −
    β·S_max (at least 0): the bandwidth the largest messages gained last, not the bandwidth of the largest one."""
    if ranks not in table.ranks:
        raise ValueError(f"{table.name}: no measurement at {ranks} ranks (measured: {table.ranks})")
    logs, sizes = table.log_seconds[table.ranks.index(ranks)], table.message_bytes
    if message_bytes >= sizes[-1]:
        last, previous = math.exp(logs[-1]), math.exp(logs[-2])
        per_byte = (last - previous) / (sizes[-1] - sizes[-2])
        if beyond == "alpha_beta" and per_byte > 0:
            return max(last - per_byte * sizes[-1], 0.0) + per_byte * message_bytes
        return last * message_bytes / sizes[-1]
    if message_bytes <= sizes[0]:
        return math.exp(logs[0])
    low = bisect.bisect_right(sizes, message_bytes) - 1
    weight = (math.log(message_bytes) - math.log(sizes[low])) / (math.log(sizes[low + 1]) - math.log(sizes[low]))
    return math.exp((1 - weight) * logs[low] + weight * logs[low + 1])


def fit_tokens(max_tokens: float) -> tuple[float, ...]:
    """The step tokens T the knee is fitted at: 1, 2, 4 … up to the token budget, and the budget itself."""
    tokens, t = [], 1.0
    while t < max_tokens:
        tokens.append(t)
        t *= 2
    return tuple(tokens + [float(max(max_tokens, 1.0))])


@dataclass(frozen=True)
class AllReduceKnee:
    """The fitted closed form of one all-reduce: (α^p + (β·S)^p)^(1/p), S in bytes."""

    latency_seconds: float     # α
    seconds_per_byte: float    # β
    exponent: float            # p
    worst_error: float         # max over the fitted points of |fit / table − 1|
    tokens: tuple              # the step tokens fitted at

    def seconds(self, message_bytes: float) -> float:
        """The closed form at ``message_bytes``."""
        a, u, p = self.latency_seconds, self.seconds_per_byte * message_bytes, self.exponent
        high, low = max(a, u), min(a, u)
        return high * (1 + (low / high) ** p) ** (1 / p) if high > 0 else 0.0


def _fit_at(p: float, sizes, latencies):
    """(α, β) minimising Σ ((α^p + β^p·S^p) / L^p − 1)² (linear in α^p, β^p), or None where either is not positive."""
    xx = xy = yy = x1 = y1 = 0.0
    for s, lat in zip(sizes, latencies):
        x, y = lat ** -p, (s / lat) ** p
        xx, xy, yy, x1, y1 = xx + x * x, xy + x * y, yy + y * y, x1 + x, y1 + y
    det = xx * yy - xy * xy
    if det <= 0:
        return None
    a, c = (x1 * yy - y1 * xy) / det, (y1 * xx - x1 * xy) / det
    return (a ** (1 / p), c ** (1 / p)) if a > 0 and c > 0 else None


@catalog_cache(maxsize=512)
def allreduce_knee(name: str, ranks: int, hidden_size: float, bytes_per_element: float,
                   max_tokens: float) -> AllReduceKnee | None:
    """The knee of table ``name``'s all-reduce at ``ranks`` for a step's tensor of T·h·b bytes, fitted over T =
    :func:`fit_tokens` (``max_tokens``) (see the module docstring); None where the table has no such rank count."""
    table = load_table(name)
    if ranks not in table.ranks:
        return None
    tokens = fit_tokens(max_tokens)
    sizes = [t * hidden_size * bytes_per_element for t in tokens]
    latencies = [collective_seconds(table, ranks, s) for s in sizes]
    logs = [math.log(v) for v in latencies]

    def misfit(log_p):
        p = math.exp(log_p)
        fit = _fit_at(p, sizes, latencies)
        if fit is None:
            return math.inf, None
        knee = AllReduceKnee(fit[0], fit[1], p, 0.0, tokens)
        return sum((math.log(knee.seconds(s)) - log) ** 2 for s, log in zip(sizes, logs)), knee

    golden = (math.sqrt(5.0) - 1) / 2
    low, high = math.log(KNEE_EXPONENT_RANGE[0]), math.log(KNEE_EXPONENT_RANGE[1])
    left, right = high - golden * (high - low), low + golden * (high - low)
    (left_misfit, _), (right_misfit, _) = misfit(left), misfit(right)
    for _ in range(KNEE_SEARCH_STEPS):
        if left_misfit <= right_misfit:               # the minimum lies in [low, right]
            high, right, right_misfit = right, left, left_misfit
            left = high - golden * (high - low)
            left_misfit = misfit(left)[0]
        else:                                          # in [left, high]
            low, left, left_misfit = left, right, right_misfit
            right = low + golden * (high - low)
            right_misfit = misfit(right)[0]
    _, knee = misfit((low + high) / 2)
    if knee is None:
        return None
    worst = max(abs(knee.seconds(s) / lat - 1) for s, lat in zip(sizes, latencies))
    return AllReduceKnee(knee.latency_seconds, knee.seconds_per_byte, knee.exponent, worst, tokens)


# --- training: NCCL's tables for the collectives of one node ------------------------------------------------

def bus_bytes_per_s(op: str, ranks: int, message_bytes: float, seconds: float) -> float:
    """nccl-tests' bus bandwidth of one collective: algbw × factor, algbw = S / t (doc/PERFORMANCE.md: all-reduce
    2(n − 1)/n, all-gather, reduce-scatter, all-to-all (n − 1)/n)."""
    return message_bytes / seconds * BUS_FACTORS[op](ranks)


@catalog_cache
def nccl_devices() -> tuple[str, ...]:
    """The accelerators (catalog keys) with NCCL's all-reduce, all-gather and reduce-scatter tables, sorted."""
    names = set(table_names())
    devices = {n[len("allreduce-nccl-"):] for n in names if n.startswith("allreduce-nccl-")}
    return tuple(sorted(d for d in devices if all(f"{op}-nccl-{d}" in names for op in TRAINING_OPS)))


def nccl_device_index(device: str | None) -> float:
    """``device``'s position among :func:`nccl_devices` (how the graph names its tables as a number), −1 for none."""
    return float(nccl_devices().index(device)) if device in nccl_devices() else -1.0


def _measured(op: str, device_index: float, ranks: float, message_bytes: float, modelled: float) -> float:
    if device_index < 0 or ranks < 2 or ranks != int(ranks) or message_bytes <= 0:
        return modelled
    table = collective_table(op, "nccl", nccl_devices()[int(round(device_index))])
    if int(ranks) not in table.ranks:
        return modelled
    return collective_seconds(table, int(ranks), message_bytes, beyond="alpha_beta")


def measured_or_modelled(op: str, device_index, ranks, message_bytes, modelled):
    """Seconds of one ``op`` collective (allreduce, allgather, reducescatter) of ``message_bytes`` over ``ranks``:
    NCCL's measured table of accelerator ``device_index`` (:func:`nccl_device_index`; −1: none) at that rank count
    (:func:`collective_seconds`, the α–β line through its last two points above its largest size), else
    ``modelled`` (the α–β ring of the group's link). Elementwise: plain numbers, or a sweep's arrays (one lookup per
    element; the tables load once)."""
    values = (device_index, ranks, message_bytes, modelled)
    if not any(getattr(v, "ndim", 0) for v in values):
        return _measured(op, *(float(v) for v in values))
    import numpy as np

    arrays = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in values))
    out = np.array(arrays[-1], dtype=float)
    for at in np.ndindex(out.shape):
        out[at] = _measured(op, *(float(a[at]) for a in arrays))
    return out
