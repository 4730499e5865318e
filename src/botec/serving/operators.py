"""Measured GEMM latencies by format and shape: the serving step's weight GEMMs priced from operator tables.

``catalog/measurements/operators/gemm-<format>-<accelerator>.yaml`` hold a grid of NVIDIA AIConfigurator's
measured GEMM tables (Apache-2.0, see ``catalog/measurements/NOTICE``; each file names its source path and the
engine version it was collected under, TensorRT-LLM 1.3.0rc20 on Hopper and Blackwell, 1.0.0 on A100),
written by ``benchmarks/extract_operator_tables.py``: the latency L(m, n, k) of C (m × n) = A (m × k) · B (k × n)
at m ∈ {1, 2, 4, … 8,192} and n, k on the file's grid (512 … 51,200). These are kernels timed one at a time,
not the end-to-end runs ``botec validate`` grades.

Lookup (:func:`gemm_seconds`, elementwise on numpy arrays): trilinear interpolation of log L over (log m, log n,
log k) between the grid's neighbours; a point of the grid returns its own measurement. Reach
(:func:`gemm_reach`):

- ``measured``: m, n, k all on the grid;
- ``interpolated``: inside the grid's box;
- ``extrapolated``: m above the grid's largest (8,192): L(m) = L(m_max) · m / m_max, the compute-bound
  region's proportionality; m below 1 takes m = 1;
- ``roofline``: n or k outside the grid: no point to lean on, so the caller's fallback prices it (the serving
  step's: the roofline max(2mnk / (e_mm · peak), n·k·b / (e_mem · BW)) with the family's figures).

Tables load once, lazily (``catalog_cache``): nothing here is imported on the estimate's start-up path unless a
contract's accelerator has a table for its weight format. A single estimate never imports numpy (a core install
has none): plain numbers take a pure-Python path, numpy arrays (sweeps, Monte Carlo) the vectorised one, the same
arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import bisect
import math

from botec.catalog.root import catalog_cache

__all__ = ["GemmTable", "gemm_table", "table_index", "table_by_index", "gemm_seconds",
           "gemm_reach", "reach_text", "table_names", "load_table", "layer_gemm_shapes", "knee_curve",
           "knee_exponent", "fit_knee_exponent", "layer_table_seconds", "roofline_fallback", "has_table", "every_layer_moe", "FORMAT_OF_PRECISION", "KNEE_TOKENS"]

# A contract's strategy.weight_precision -> the table format its weight GEMMs run in (TensorRT-LLM's FP8
# checkpoints of Llama, as NIM ships them, are per-tensor scaled; fp8_block is DeepSeek's 1×128 scaling).
FORMAT_OF_PRECISION = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}
KNEE_TOKENS = tuple(2.0 ** i for i in range(14))
"""The m at which :func:`knee_exponent` compares the closed form with the table: the grid's m = 1, 2, 4 … 8,192."""
KNEE_EXPONENT_RANGE = (1.0, 32.0)
"""p's bounds: 1 is a kernel that reads its weights and then computes (the sum), 32 is within 2.2 % of the max (a
perfect overlap of the two)."""
KNEE_SEARCH_STEPS = 48   # golden-section steps over log p: the bracket shrinks by 0.618^48 ≈ 1e-10


@dataclass(frozen=True)
class GemmTable:
    """One measured GEMM grid: latencies (seconds) at every (n, k, m) of its axes."""

    name: str                 # the file's stem: gemm-<format>-<accelerator>
    device: str               # the catalog key of the accelerator measured
    dtype: str                # bf16 | fp8 | fp8_block
    measured_on: str
    source: dict
    m: tuple          # the grid's axes (floats, ascending)
    n: tuple
    k: tuple
    log_seconds: tuple        # [n][k][m]: log of seconds (nested tuples; :func:`_arrays` has numpy's)

    def describe(self) -> str:
        """Where the table comes from, in one line."""
        return (f"{self.name}: AIConfigurator {self.source.get('engine', '')} {self.source.get('kernel', '')}, "
                f"{self.measured_on} ({self.source.get('path', '')}, {self.source.get('license', '')})")

    def reach_line(self) -> str:
        """The table's measured box: m, n, k ranges."""
        return (f"measured at m = {int(self.m[0])}…{int(self.m[-1]):,}, n = {int(self.n[0]):,}…"
                f"{int(self.n[-1]):,}, k = {int(self.k[0]):,}…{int(self.k[-1]):,} ({len(self.n)} × {len(self.k)} × "
                f"{len(self.m)} points)")


@catalog_cache
def table_names() -> tuple[str, ...]:
    """The file stems of ``catalog/measurements/operators/gemm-*.yaml``, sorted (no file is parsed)."""
    from botec.catalog.operator_files import operator_file_names

    return operator_file_names("gemm")


@catalog_cache
def load_table(name: str) -> GemmTable:
    """The grid of ``measurements/operators/<name>.yaml``, parsed and checked once."""
    from botec.catalog.operator_files import read_operator_file

    data = read_operator_file(name)
    m, n, k = (tuple(float(v) for v in data[axis]) for axis in ("m", "n", "k"))
    grid = [[None] * len(k) for _ in n]
    n_at, k_at = {v: i for i, v in enumerate(n)}, {v: i for i, v in enumerate(k)}
    for row_n, row_k, latencies in data["rows"]:
        if len(latencies) != len(m) or not all(float(v) > 0 for v in latencies):
            raise ValueError(f"measurements/operators/{name}.yaml: row {row_n} × {row_k} is not {len(m)} positive "
                             "latencies")
        grid[n_at[float(row_n)]][k_at[float(row_k)]] = tuple(math.log(float(v) * 1e-6) for v in latencies)
    if any(cell is None for row in grid for cell in row):
        raise ValueError(f"measurements/operators/{name}.yaml: the grid lacks a point")
    return GemmTable(name, str(data["device"]), str(data["dtype"]), str(data["measured_on"]), dict(data["source"]),
                     m, n, k, tuple(tuple(row) for row in grid))


@catalog_cache
def _arrays(name: str):
    """The table's axes and log seconds as numpy arrays (for array lookups only: numpy is an extra)."""
    import numpy as np

    table = load_table(name)
    return (np.asarray(table.m), np.asarray(table.n), np.asarray(table.k), np.asarray(table.log_seconds))


def _is_array(value) -> bool:
    """True for a numpy array of one or more dimensions (a sweep's), False for a plain or 0-d number."""
    return getattr(value, "ndim", 0) > 0


def has_table(index) -> bool:
    """Whether ``gemm_table_index`` names a table anywhere (an array: in any of its elements)."""
    return (float(index.max()) if _is_array(index) else float(index)) >= 0


def gemm_table(device: str | None, dtype: str) -> GemmTable | None:
    """The table measured on ``device`` (catalog key) for ``dtype``, or None."""
    name = f"gemm-{dtype.replace('_', '-')}-{device}"
    return load_table(name) if device is not None and name in table_names() else None


def table_index(table: GemmTable | None) -> float:
    """The table's position among :func:`table_names` (−1 for none): how the graph names it as a number."""
    return -1.0 if table is None else float(table_names().index(table.name))


def table_by_index(index) -> GemmTable | None:
    """The inverse of :func:`table_index` (an array of one repeated index is accepted)."""
    value = float(index.max()) if _is_array(index) else float(index)
    if value < 0:
        return None
    return load_table(table_names()[int(round(value))])


def _axis(grid, values):
    """Lower neighbour index and weight of log ``values`` on log ``grid`` (numpy arrays; weights outside [0, 1]
    extrapolate)."""
    import numpy as np

    logs, x = np.log(grid), np.log(values)
    low = np.clip(np.searchsorted(logs, x, side="right") - 1, 0, len(grid) - 2)
    return low, (x - logs[low]) / (logs[low + 1] - logs[low])


def _scalar_axis(grid: tuple, value: float) -> tuple[int, float]:
    """:func:`_axis` for one number: the lower neighbour's index and the weight of log ``value`` between it and
    the next (``value`` already within the grid)."""
    low = min(max(bisect.bisect_right(grid, value) - 1, 0), len(grid) - 2)
    log_low = math.log(grid[low])
    return low, (math.log(value) - log_low) / (math.log(grid[low + 1]) - log_low)


def gemm_seconds(table: GemmTable, m, n, k, fallback=None):
    """Seconds of one GEMM (m × k by k × n) from ``table``, elementwise (see the module docstring):

        log L = Σ over the 8 corners c of the (log m, log n, log k) cell: w_c · log L_c   (trilinear)

    with m clamped to [1, m_max] and L scaled by m / m_max above m_max; where n or k lies outside the grid,
    ``fallback(m, n, k)`` (seconds; required if any point is outside), else the nearest edge. Plain numbers take
    :func:`_scalar_gemm_seconds` (no numpy), arrays the vectorised form below: the same arithmetic.
    """
    if not (_is_array(m) or _is_array(n) or _is_array(k)):
        return _scalar_gemm_seconds(table, float(m), float(n), float(k), fallback)
    import numpy as np

    axis_m, axis_n, axis_k, log_seconds = _arrays(table.name)
    m_arr, n_arr, k_arr = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (m, n, k)))
    m_in = np.clip(m_arr, axis_m[0], axis_m[-1])
    n_in = np.clip(n_arr, axis_n[0], axis_n[-1])
    k_in = np.clip(k_arr, axis_k[0], axis_k[-1])
    im, wm = _axis(axis_m, m_in)
    i_n, wn = _axis(axis_n, n_in)
    ik, wk = _axis(axis_k, k_in)
    log = 0.0
    for dn, fn in ((0, 1 - wn), (1, wn)):
        for dk, fk in ((0, 1 - wk), (1, wk)):
            for dm, fm in ((0, 1 - wm), (1, wm)):
                log = log + fn * fk * fm * log_seconds[i_n + dn, ik + dk, im + dm]
    seconds = np.exp(log) * np.maximum(m_arr, axis_m[-1]) / axis_m[-1]
    outside = (n_arr < axis_n[0]) | (n_arr > axis_n[-1]) | (k_arr < axis_k[0]) | (k_arr > axis_k[-1])
    if np.any(outside):
        if fallback is None:
            raise ValueError(f"{table.name}: n or k outside the measured grid and no fallback given")
        seconds = np.where(outside, fallback(m_arr, n_arr, k_arr), seconds)
    return seconds if seconds.ndim else float(seconds)


def _scalar_gemm_seconds(table: GemmTable, m: float, n: float, k: float, fallback) -> float:
    """:func:`gemm_seconds` for plain numbers, in pure Python."""
    if n < table.n[0] or n > table.n[-1] or k < table.k[0] or k > table.k[-1]:
        if fallback is None:
            raise ValueError(f"{table.name}: n or k outside the measured grid and no fallback given")
        value = fallback(m, n, k)   # an array where the fallback's own figures are (a Monte Carlo's efficiencies)
        return value if getattr(value, "ndim", 0) else float(value)
    im, wm = _scalar_axis(table.m, min(max(m, table.m[0]), table.m[-1]))
    i_n, wn = _scalar_axis(table.n, n)
    ik, wk = _scalar_axis(table.k, k)
    log = 0.0
    for dn, fn in ((0, 1 - wn), (1, wn)):
        for dk, fk in ((0, 1 - wk), (1, wk)):
            for dm, fm in ((0, 1 - wm), (1, wm)):
                log = log + fn * fk * fm * table.log_seconds[i_n + dn][ik + dk][im + dm]
    return math.exp(log) * max(m, table.m[-1]) / table.m[-1]


def gemm_reach(table: GemmTable, m, n, k) -> str:
    """measured | interpolated | extrapolated | roofline: how :func:`gemm_seconds` prices (m, n, k) (scalars)."""
    if not (table.n[0] <= n <= table.n[-1] and table.k[0] <= k <= table.k[-1]):
        return "roofline"
    if m > table.m[-1] or m < table.m[0]:
        return "extrapolated"
    if m in table.m and n in table.n and k in table.k:
        return "measured"
    return "interpolated"


def layer_gemm_shapes(hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, ffn_size, mlp_gated,
                      tensor_parallel):
    """The (name, n, k) of one dense decoder layer's weight GEMMs on one of ``tensor_parallel`` ranks:

    QKV n = (a·d_qk + g·(d_qk + d_v)) / t, k = h; O n = h, k = a·d_v / t; gate/up n = (2 if gated else 1)·f / t,
    k = h; down n = h, k = f / t (Megatron's column- then row-parallel split; a = heads, g = KV heads). Elementwise:
    plain numbers give plain numbers (a graph value stays a Python float), arrays give arrays."""
    from botec.graph.elementwise import where

    t = tensor_parallel
    return (("qkv", (attention_heads * qk_head_dim + kv_heads * (qk_head_dim + v_head_dim)) / t, hidden_size),
            ("o", hidden_size, attention_heads * v_head_dim / t),
            ("gate_up", where(mlp_gated > 0, 2.0, 1.0) * ffn_size / t, hidden_size),
            ("down", hidden_size, ffn_size / t))


def layer_table_seconds(gemm_table_index, hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
                 mlp_gated, tensor_parallel, tokens, roofline):
    """Σ over one layer's weight GEMMs (QKV, O, gate/up, down on one TP rank) of the table's latency at m =
    ``tokens``, 0 without a table; ``roofline(m, n, k)`` prices shapes outside the table's grid."""
    if not has_table(gemm_table_index):
        return 0.0 * tensor_parallel

    table = table_by_index(gemm_table_index)
    shapes = layer_gemm_shapes(hidden_size, attention_heads, kv_heads, qk_head_dim, v_head_dim, table_mlp_ffn_size,
                                         mlp_gated, tensor_parallel)
    return sum(gemm_seconds(table, tokens, n, k, roofline) for _, n, k in shapes)


def roofline_fallback(matmul_efficiency, peak_flops_per_s, memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s,
              weight_bytes_per_parameter):
    """The fallback outside a table's grid: max(2·m·n·k / (e_mm · peak), n·k·b / (e_mem · BW))."""
    from botec.graph.elementwise import maximum

    def roofline(m, n, k):
        return maximum(2 * m * n * k / (matmul_efficiency * peak_flops_per_s),
                       n * k * weight_bytes_per_parameter / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s))
    return roofline


def knee_curve(floor, slope, tokens, exponent):
    """The step's closed form of a layer's weight GEMMs at ``tokens`` m (elementwise):

        G(m) = H · (1 + (L/H)^p)^(1/p),  H = max(F, g·m), L = min(F, g·m)

    i.e. (F^p + (g·m)^p)^(1/p) written so that no power overflows: F = ``floor`` (the GEMMs at m = 1, the weight
    read), g = ``slope`` (seconds per token in the compute-bound region, the GEMMs at m = 8,192 / 8,192), p =
    ``exponent`` ≥ 1. p → ∞ is the roofline's max(F, g·m); p = 1 their sum. It is
    :func:`botec.serving.step.gemm_term`, the step's GEMM term."""
    from botec.serving.step import gemm_term

    return gemm_term(slope * tokens, floor, exponent)


def knee_exponent(curve):
    """The exponent p of a layer's GEMM knee, fitted to the table's own points: ``curve`` holds Σ over the layer's
    weight GEMMs of the table's latency at m = :data:`KNEE_TOKENS` (axis 0: the 14 m; any trailing axes are
    elementwise, a sweep's), F = curve(m = 1), g = curve(m = 8,192) / 8,192, and p minimises

        S(p) = Σ_m (log G(m; F, g, p) − log curve(m))²           (:func:`knee_curve`; least squares in log m space)

    over :data:`KNEE_EXPONENT_RANGE` by golden-section search in log p (each residual falls monotonically with
    p, so S has one minimum in practice). On the Hopper tables G follows the measured layer within −9 … +5 %
    over m = 1 … 8,192 (8B and 70B at TP 1-8, BF16 and FP8), where max(F, g·m) undercuts the knee by 12-32 %.
    This is a fit to kernel measurements (AIConfigurator's, timed one GEMM at a time), not to end-to-end rows.
    A plain sequence of 14 numbers takes :func:`_scalar_knee_exponent` (no numpy)."""
    if not hasattr(curve, "dtype"):   # a list or tuple: one layer's curve
        return _scalar_knee_exponent([float(v) for v in curve])
    import numpy as np

    curve = np.asarray(curve, dtype=float)
    tokens = np.asarray(KNEE_TOKENS).reshape((-1,) + (1,) * (curve.ndim - 1))
    floor, slope = curve[0], curve[-1] / KNEE_TOKENS[-1]
    logs = np.log(curve)

    def misfit(log_p):
        return np.sum((np.log(knee_curve(floor, slope, tokens, np.exp(log_p))) - logs) ** 2, axis=0)

    golden = (np.sqrt(5.0) - 1) / 2
    low = np.full(floor.shape, np.log(KNEE_EXPONENT_RANGE[0]))
    high = np.full(floor.shape, np.log(KNEE_EXPONENT_RANGE[1]))
    left, right = high - golden * (high - low), low + golden * (high - low)
    left_misfit, right_misfit = misfit(left), misfit(right)
    for _ in range(KNEE_SEARCH_STEPS):
        keep_left = left_misfit <= right_misfit        # the minimum lies in [low, right], else in [left, high]
        low, high = np.where(keep_left, low, left), np.where(keep_left, right, high)
        new = np.where(keep_left, high - golden * (high - low), low + golden * (high - low))
        new_misfit = misfit(new)                       # the other inner point is the old one, kept
        left, right = np.where(keep_left, new, right), np.where(keep_left, left, new)
        left_misfit, right_misfit = (np.where(keep_left, new_misfit, right_misfit),
                                     np.where(keep_left, left_misfit, new_misfit))
    exponent = np.exp((low + high) / 2)
    return exponent if exponent.ndim else float(exponent)


def _scalar_knee_exponent(curve: list[float]) -> float:
    """:func:`knee_exponent` of one layer's 14 latencies, in pure Python: the same golden-section search."""
    return fit_knee_exponent(curve, [curve[0]] * len(curve), curve[-1] / KNEE_TOKENS[-1])


def fit_knee_exponent(curve, weights, slope) -> float:
    """The p minimising Σ_m (log G(m) − log curve(m))² over m = :data:`KNEE_TOKENS`, G(m) = ‖g·m, W(m)‖_p
    (:func:`knee_curve` with the floor W(m) = ``weights[i]`` at each m: a dense layer's constant weight read, or an
    MoE layer's F + x·(1 − (1 − q)^m) as more experts are touched), g = ``slope``; golden-section search in log p over
    :data:`KNEE_EXPONENT_RANGE`, pure Python. :func:`knee_exponent`'s scalar form is this with W(m) = curve(1)."""
    logs = [math.log(v) for v in curve]

    def misfit(log_p):
        p = math.exp(log_p)
        return sum((math.log(knee_curve(w, slope, m, p)) - log) ** 2
                   for m, w, log in zip(KNEE_TOKENS, weights, logs))

    golden = (math.sqrt(5.0) - 1) / 2
    low, high = math.log(KNEE_EXPONENT_RANGE[0]), math.log(KNEE_EXPONENT_RANGE[1])
    left, right = high - golden * (high - low), low + golden * (high - low)
    left_misfit, right_misfit = misfit(left), misfit(right)
    for _ in range(KNEE_SEARCH_STEPS):
        if left_misfit <= right_misfit:               # the minimum lies in [low, right]
            high, right, right_misfit = right, left, left_misfit
            left = high - golden * (high - low)
            left_misfit = misfit(left)
        else:                                          # in [left, high]
            low, left, left_misfit = left, right, right_misfit
            right = low + golden * (high - low)
            right_misfit = misfit(right)
    return math.exp((low + high) / 2)


def reach_text(table: GemmTable, shapes, tokens: float = 1.0) -> str:
    """One line: the table, its measured box, and how each of ``shapes`` ((name, n, k)) at m = ``tokens`` is
    priced (measured, interpolated, extrapolated or roofline)."""
    parts = [f"{name} {float(n):,.0f}×{float(k):,.0f} {gemm_reach(table, tokens, float(n), float(k))}"
             for name, n, k in shapes]
    return f"{table.name}, {table.reach_line()}; at m = {tokens:g}: " + ", ".join(parts)


def every_layer_moe(arch) -> bool:
    """An MoE model whose every layer routes all its MLP to experts (no dense layers, no shared experts): its layers'
    dense GEMMs are the attention projections alone, which a GEMM table prices (Mixtral)."""
    moe = arch.moe
    return moe.shared_experts == 0 and moe.first_dense_layers == 0 and moe.layer_frequency == 1


def gemm_table_given(device, precision: str, arch) -> dict:
    """The graph input ``gemm_table_index``: the table that prices a dense model's weight GEMMs on ``device``
    (a catalog accelerator) in the contract's weight format, or −1 (the roofline with the family's figures):
    MoE and MLA layers, formats without a table (int8, int4, fp4, fp8_block) and accelerators without one keep
    the roofline."""
    from botec.graph import Given

    fmt = FORMAT_OF_PRECISION.get(precision)
    key = getattr(device, "key", None)
    table = gemm_table(key, fmt) if fmt is not None and arch is not None else None
    why = None
    if table is None:
        why = (f"no measured {precision} GEMM table for {key or 'this accelerator'}: the roofline with the "
               "family's e_mm and e_mem")
    elif getattr(arch, "mla", False):
        table, why = None, "MLA layers: the roofline with the family's e_mm and e_mem (no MLA projection shapes here)"
    elif getattr(arch, "moe", None) and not every_layer_moe(arch):
        table, why = None, ("MoE with dense layers or shared experts: the roofline with the family's e_mm and e_mem "
                            "for the dense GEMMs (the table prices a layer's attention projections and its MLP together)")
    if table is None:
        return {"gemm_table_index": Given(-1.0, "assumed", why, "supply.accelerator")}
    moe = getattr(arch, "moe", None)
    shapes = layer_gemm_shapes(arch.hidden_size, arch.attention_heads, arch.kv_heads, arch.qk_head_dim,
                               arch.v_head_dim, 0.0 if moe else arch.ffn_size, 1.0 if arch.mlp == "gated" else 0.0, 1.0)
    if moe:   # the routed experts are the MoE table's (botec.serving.moe_operators) or the roofline's
        shapes = shapes[:2]
    return {"gemm_table_index": Given(table_index(table), "measured",
                                      f"weight GEMMs priced from {table.describe()}; {reach_text(table, shapes)} "
                                      "(TP 1; each rank's n or k is divided by TP)", "supply.accelerator")}
