"""Measured decode-attention latencies by KV format and layout: the serving step's decode attention from tables.

``catalog/measurements/operators/attention-decode-<kv format>-<accelerator>.yaml`` hold a grid of NVIDIA
AIConfigurator's measured generation-attention tables (Apache-2.0, see ``catalog/measurements/NOTICE``; TensorRT-LLM
1.3.0rc20's XQA kernel on Hopper and Blackwell, 1.0.0 on A100), written by ``benchmarks/extract_operator_tables.py``:
the latency L(b, s) of one layer's decode attention on one tensor-parallel rank, b sequences of one query each, every
sequence's KV length s (b = 1 … 2,048, s = 2 … 131,072, powers of two; AIConfigurator measures b·s up to about 2^19
only, so the grid is a triangle), for the per-rank layouts (query heads, KV heads) of Llama 3.1 8B and 70B, Mistral
7B and Mixtral 8x7B at TP 1-8, head dim 128. These are kernels timed one at a time, not the end-to-end runs
``botec validate`` grades.

The step's form (:func:`botec.serving.step.engine_step_seconds`): each layout's closed form, fitted by the
extraction script to the layout's own points (least squares in log; the file's ``fit``),

    L(b, s) ≈ F + ‖σ·b, κ·b·s‖_p = F + ((σ·b)^p + (κ·C)^p)^(1/p),   C = b·s the step's context tokens

F the kernel's floor (the point at b = 1, s = 2), σ its cost per sequence (the region s ≤ 64, flat in s: each
sequence reads at least one KV block), κ its cost per context token where the kernel streams the cache (the
layout's median (L − F)/(b·s) over b·s ≥ 2¹⁸, taken from the table, not fitted), p the knee between them (as the
weight GEMMs' knee, :func:`botec.serving.step.gemm_term`; σ and p least squares in log). The misfit each file states
per layout is −45 … +55 % at the extremes (b = 1, where the kernel is latency bound and steps up at s = 256; b = 2,048
at s ≤ 128, bound per sequence); the root-mean-square log error is 0.17-0.22 over all points on Hopper, 0.11-0.23
where b ≥ 16 and s ≥ 512, and 0.07-0.13 with no bias where the kernel streams (b·s ≥ 2¹⁸, s ≥ 1,024: the long
contexts, where attention is most of the step). A κ fitted freely in log space, where most points are floor-bound,
came out 10-18 % above that region on Hopper, and priced TensorRT-LLM's 20,000/2,000 rows 14-20 % slow.

Lookup (:func:`decode_attention_seconds`, plain numbers): bilinear interpolation of log L over (log b, log s)
between the grid's measured neighbours; a point of the grid returns its own measurement. Reach
(:func:`decode_reach`): ``measured`` (b and s on the grid, measured), ``interpolated`` (a cell whose four corners are
measured), ``extrapolated`` (beyond the measured triangle: the closed form).

Tables load once, lazily (``catalog_cache``), only for a contract whose accelerator has a table for its KV format; the
rows (a text block per layout) are parsed only when a lookup needs them. No numpy anywhere here.
"""

from __future__ import annotations

from dataclasses import dataclass

import bisect
import math

from botec.catalog.root import catalog_cache

__all__ = ["DecodeAttentionTable", "DecodeFit", "table_names", "load_table", "decode_table", "table_index",
           "table_by_index", "layout_fit", "layout_on_rank", "decode_attention_seconds", "closed_form_seconds",
           "decode_reach", "attention_table_given", "FORMAT_OF_KV", "log_bilinear", "grid_reach", "parse_rows",
           "read_layouts"]

IN_FORCE_BY_DEFAULT = True
"""Whether a table that covers the contract prices its decode attention by default: yes (issue 29, item 1). The
simulator runs the table's curved step exactly: its decode-only runs take the roofline's step as affine in the context
(t_j = t₀ + j·Δ, in closed form) and the table's knee ‖σ·b, κ·C‖_p, curved in C, summed step by step
(botec.simulate.engine.decode_run; tests/test_simulate.py's step-by-step reference holds both at 1e-12). A contract
sets the table aside by stating its own ``assumptions.attention_efficiency`` (or memory or GEMM efficiency);
``in_force=False`` to :func:`attention_table_given` does the same in code (the tests compare the two pricings)."""

FORMAT_OF_KV = {"fp8": "fp8", "bf16": "bf16", "fp16": "bf16"}
"""A contract's strategy.kv_cache_precision -> the table's KV format (FP16 caches as BF16: the same bytes)."""


@dataclass(frozen=True)
class DecodeFit:
    """A layout's closed form, seconds: L(b, s) = floor + ‖per_sequence·b, per_context_token·b·s‖_exponent."""

    floor: float
    per_sequence: float
    per_context_token: float
    exponent: float
    misfit: tuple          # (lowest, highest) relative residual over the layout's points


@dataclass(frozen=True)
class DecodeAttentionTable:
    """One measured decode-attention file: its axes and, per (heads, kv_heads) on a rank, the fit and the grid."""

    name: str                 # the file's stem: attention-decode-<kv format>-<accelerator>
    device: str
    kv_dtype: str
    head_dim: int
    measured_on: str
    source: dict
    batch: tuple              # the grid's axes (floats, ascending)
    context: tuple
    fits: dict                # (heads, kv_heads) -> DecodeFit
    rows_text: dict           # (heads, kv_heads) -> the rows' text block (parsed by :func:`_grid`)

    def describe(self) -> str:
        return (f"{self.name}: AIConfigurator {self.source.get('engine', '')} generation attention, "
                f"{self.measured_on} ({self.source.get('path', '')}, {self.source.get('license', '')})")


@catalog_cache
def table_names() -> tuple[str, ...]:
    """The file stems of ``catalog/measurements/operators/attention-decode-*.yaml``, sorted (no file is parsed)."""
    from botec.catalog.operator_files import operator_file_names

    return tuple(name for name in operator_file_names("attention") if name.startswith("attention-decode-"))


def read_layouts(layouts: list, fields: tuple, fit_type, name: str) -> tuple[dict, dict]:
    """({(heads, kv_heads): fit}, {(heads, kv_heads): rows text}) of a file's layouts: each fit's ``fields`` (three
    microsecond figures) as seconds, its exponent and misfit, built as ``fit_type``; refused unless positive with
    1 ≤ exponent ≤ 32."""
    fits, rows = {}, {}
    for layout in layouts:
        key = (int(layout["heads"]), int(layout["kv_heads"]))
        fit = layout["fit"]
        values = [float(fit[k]) for k in (*fields, "exponent")]
        if not (all(v > 0 for v in values) and 1 <= values[3] <= 32):
            raise ValueError(f"measurements/operators/{name}.yaml: layout {key[0]}/{key[1]}'s fit is not positive "
                             "with 1 ≤ exponent ≤ 32")
        fits[key] = fit_type(values[0] * 1e-6, values[1] * 1e-6, values[2] * 1e-6, values[3],
                             tuple(float(v) for v in fit["misfit"]))
        rows[key] = str(layout["rows"])
    return fits, rows


@catalog_cache
def load_table(name: str) -> DecodeAttentionTable:
    """The file ``measurements/operators/<name>.yaml``: its fits parsed and checked (its rows kept as text)."""
    from botec.catalog.operator_files import read_operator_file

    data = read_operator_file(name)
    fits, rows = read_layouts(data["layouts"], ("floor_us", "per_sequence_us", "per_context_token_us"), DecodeFit,
                              name)
    return DecodeAttentionTable(name, str(data["device"]), str(data["kv_dtype"]), int(data["head_dim"]),
                                str(data["measured_on"]), dict(data["source"]),
                                tuple(float(v) for v in data["batch"]), tuple(float(v) for v in data["context"]),
                                fits, rows)


@catalog_cache
def _grid(name: str, heads: int, kv_heads: int) -> tuple:
    """The layout's latencies in seconds, [batch][context] (None where not measured)."""
    table = load_table(name)
    return parse_rows(table.rows_text[(heads, kv_heads)], table.batch, len(table.context),
                      f"measurements/operators/{name}.yaml: layout {heads}/{kv_heads}")


def decode_table(device: str | None, kv_format: str) -> DecodeAttentionTable | None:
    """The table measured on ``device`` (catalog key) for a ``kv_format`` cache, or None."""
    name = f"attention-decode-{kv_format}-{device}"
    return load_table(name) if device is not None and name in table_names() else None


def table_index(table: DecodeAttentionTable | None) -> float:
    """The table's position among :func:`table_names` (−1 for none): how the graph names it as a number."""
    return -1.0 if table is None else float(table_names().index(table.name))


def table_by_index(index) -> DecodeAttentionTable | None:
    """The inverse of :func:`table_index`."""
    value = float(index)
    return None if value < 0 else load_table(table_names()[int(round(value))])


def layout_on_rank(attention_heads, kv_heads, attention_tensor_parallel) -> tuple[int, int]:
    """(query heads, KV heads) on one rank of ``attention_tensor_parallel``: a/t and max(g/t, 1) (a KV head is
    replicated, not split, where t exceeds the KV heads)."""
    t = float(attention_tensor_parallel)
    return int(round(float(attention_heads) / t)), int(round(max(float(kv_heads) / t, 1.0)))


def layout_fit(index, attention_heads, kv_heads, attention_tensor_parallel) -> DecodeFit | None:
    """The fit of the layout one rank runs, from the table ``index`` names; None without a table or layout."""
    table = table_by_index(index)
    if table is None:
        return None
    return table.fits.get(layout_on_rank(attention_heads, kv_heads, attention_tensor_parallel))


def closed_form_seconds(fit: DecodeFit, batch: float, context: float) -> float:
    """One layer's decode attention from the layout's closed form, F + ‖σ·b, κ·b·s‖_p (the step's form; the same
    arithmetic as :func:`botec.serving.step.gemm_term`)."""
    from botec.serving.step import gemm_term

    return fit.floor + float(gemm_term(fit.per_sequence * batch, fit.per_context_token * batch * context,
                                       fit.exponent))


def _cell(axis: tuple, value: float) -> tuple[int, float]:
    """The lower neighbour's index on ``axis`` and the weight of log ``value`` towards the next (within the axis)."""
    low = min(max(bisect.bisect_right(axis, value) - 1, 0), len(axis) - 2)
    log_low = math.log(axis[low])
    return low, (math.log(value) - log_low) / (math.log(axis[low + 1]) - log_low)


def log_bilinear(grid: tuple, rows: tuple, columns: tuple, row: float, column: float) -> float | None:
    """A grid's value at (``row``, ``column``): log-bilinear between the four measured corners of its cell (a grid
    point's own value); None outside the axes or where a corner it weighs is not measured (None in ``grid``)."""
    if not (rows[0] <= row <= rows[-1] and columns[0] <= column <= columns[-1]):
        return None
    ir, wr = _cell(rows, row)
    ic, wc = _cell(columns, column)
    corners = [(dr, dc, fr * fc) for dr, fr in ((0, 1 - wr), (1, wr)) for dc, fc in ((0, 1 - wc), (1, wc))
               if fr * fc > 0]
    if any(grid[ir + dr][ic + dc] is None for dr, dc, _ in corners):
        return None
    return math.exp(sum(w * math.log(grid[ir + dr][ic + dc]) for dr, dc, w in corners))


def grid_reach(grid: tuple, rows: tuple, columns: tuple, row: float, column: float) -> str:
    """measured | interpolated | extrapolated: whether (``row``, ``column``) is a measured point of ``grid``, inside a
    cell whose four corners are measured, or beyond them (:func:`log_bilinear` gives None there)."""
    if row in rows and column in columns:
        return "measured" if grid[rows.index(row)][columns.index(column)] is not None else "extrapolated"
    if not (rows[0] <= row <= rows[-1] and columns[0] <= column <= columns[-1]):
        return "extrapolated"
    ir, _ = _cell(rows, row)
    ic, _ = _cell(columns, column)
    inside = all(grid[ir + dr][ic + dc] is not None for dr in (0, 1) for dc in (0, 1))
    return "interpolated" if inside else "extrapolated"


def parse_rows(text: str, rows: tuple, columns: int, where: str) -> tuple:
    """A file's rows block (a line per row: the row's axis value, then ``columns`` values in microseconds, ``-`` not
    measured) as seconds, [row][column]; ``where`` names the block in the error a malformed one raises."""
    grid = []
    for line in text.strip().splitlines():
        head, *values = line.split()
        if len(grid) >= len(rows) or float(head) != rows[len(grid)] or len(values) != columns:
            raise ValueError(f"{where}: row {head} is not the axis's next value with {columns} latencies")
        grid.append(tuple(None if v == "-" else float(v) * 1e-6 for v in values))
    if len(grid) != len(rows):
        raise ValueError(f"{where}: lacks a row")
    return tuple(grid)


def decode_attention_seconds(table: DecodeAttentionTable, heads: int, kv_heads: int, batch: float,
                             context: float) -> float:
    """Seconds of one layer's decode attention from the grid (see the module docstring): log-bilinear between the
    four measured corners of (b, s)'s cell, a grid point's own value; beyond the measured points the closed form."""
    value = log_bilinear(_grid(table.name, heads, kv_heads), table.batch, table.context, batch, context)
    return closed_form_seconds(table.fits[(heads, kv_heads)], batch, context) if value is None else value


def decode_reach(table: DecodeAttentionTable, heads: int, kv_heads: int, batch: float, context: float) -> str:
    """measured | interpolated | extrapolated: how :func:`decode_attention_seconds` prices (b, s)."""
    return grid_reach(_grid(table.name, heads, kv_heads), table.batch, table.context, batch, context)


def _measured_box(table: DecodeAttentionTable, heads: int, kv_heads: int) -> str:
    """Where the layout's points are: the batch and context ranges and the largest b·s measured."""
    grid = _grid(table.name, heads, kv_heads)
    largest = max(b * s for b, row in zip(table.batch, grid) for s, v in zip(table.context, row) if v is not None)
    return (f"measured at b = {int(table.batch[0])}…{int(table.batch[-1]):,} sequences, s = {int(table.context[0])}"
            f"…{int(table.context[-1]):,} tokens, b·s ≤ {int(largest):,}; beyond, the closed form")


def attention_table_given(device, kv_precision: str, arch, speculative, context_tokens: float,
                          in_force: bool | None = None) -> dict:
    """The graph input ``attention_table_index``: the table that prices decode attention on ``device`` (a catalog
    accelerator) for the contract's KV format, or −1 (the roofline max(F_attn / (e_attn·peak₁₆), KV / (e_mem·BW))
    with the family's figures). MLA, a sliding window shorter than the request's ``context_tokens`` (prompt and
    output), head dims other than 128, speculative decoding (the table times one query per sequence), KV formats
    and accelerators without a table keep the roofline; a layout the table lacks
    (heads per rank at the contract's TP) keeps it too, in the graph (``attention_knee_exponent`` = 0)."""
    from botec.graph import Given

    fmt = FORMAT_OF_KV.get(kv_precision)
    key = getattr(device, "key", None)
    table = decode_table(key, fmt) if fmt is not None and arch is not None else None
    why = None
    if table is None:
        why = (f"no measured decode-attention table for a {kv_precision} KV cache on {key or 'this accelerator'}: "
               "the roofline max(F_attn / (e_attn·peak₁₆), KV / (e_mem·BW)) with the family's figures")
    elif getattr(arch, "mla", None) or (getattr(arch, "sliding_window", None) or math.inf) < context_tokens or \
            arch.qk_head_dim != table.head_dim or arch.v_head_dim != table.head_dim:
        table, why = None, ("MLA, a sliding window within the request's context or a head dim other than 128: the "
                            "roofline max(F_attn / (e_attn·peak₁₆), KV / (e_mem·BW)) (the table measures full "
                            "GQA/MHA attention at head dim 128)")
    elif speculative is not None:
        table, why = None, ("speculative decoding: the roofline max(F_attn / (e_attn·peak₁₆), KV / (e_mem·BW)) (the "
                            "table times one query per sequence, a verification runs k + 1)")
    elif not (IN_FORCE_BY_DEFAULT if in_force is None else in_force):
        table, why = None, (f"{table.name} covers this contract but is set aside here (botec.serving."
                            "attention_tables.IN_FORCE_BY_DEFAULT off): the roofline max(F_attn / (e_attn·peak₁₆), KV / "
                            "(e_mem·BW))")
    if table is None:
        return {"attention_table_index": Given(-1.0, "assumed", why, "supply.accelerator")}
    layouts = ", ".join(f"{h}/{g}" for h, g in table.fits)
    heads, kv = layout_on_rank(arch.attention_heads, arch.kv_heads, 1)
    fit = table.fits.get((heads, kv))
    at_tp1 = (f"at TP 1 ({heads}/{kv}): F = {fit.floor * 1e6:.2f} µs, σ = {fit.per_sequence * 1e9:.1f} ns per "
              f"sequence, κ = {fit.per_context_token * 1e12:.0f} ps per context token, p = {fit.exponent:.2f}, "
              f"within {fit.misfit[0] * 100:+.0f} … {fit.misfit[1] * 100:+.0f} % of the layout's points; "
              f"{_measured_box(table, heads, kv)}" if fit is not None else f"no {heads}/{kv} layout at TP 1")
    return {"attention_table_index": Given(
        table_index(table), "measured",
        f"decode attention priced from {table.describe()}: per layer L(b, s) = F + ‖σ·b, κ·b·s‖_p fitted to the "
        f"layout's points (b sequences, s KV tokens each); {at_tp1}; layouts (heads/KV heads per rank): {layouts} "
        "(another keeps the roofline)", "supply.accelerator")}
