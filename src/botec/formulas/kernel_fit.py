"""Kernel-model figures from operator measurements: the GEMM line, the memory line, attention's share.

The op-level model (:mod:`botec.training.ops`) prices a kernel as a line in its work plus a fixed cost:

    GEMM, compute-bound        t = F / (e_mm · peak) + t0         F = 2·m·n·k FLOPs
    GEMM, weight-read-bound    t = B / (e_mem · BW) + t0'         B = b·(m·k + k·n + m·n) bytes
    fused attention            t = F_attn / (e_attn · peak)       F_attn = 2·b·s²·a·d (causal: half of 4·b·s²·a·d)

Given measured (work, time) points, each line is fitted by least squares on the *relative* error
(Σ ((slope·x + t0) / t − 1)², i.e. 1 = slope·(x/t) + t0·(1/t)): the points span three orders of magnitude
in time, and an unweighted fit would match the largest kernels alone. e_mm = 1 / (slope · peak),
e_mem = 1 / (slope · BW), t0 the intercept.

These are the functions the catalog's default figures are derived with (``catalog/efficiency.yaml``
cites each measurement file; ``tests/test_efficiency_sources.py`` re-derives every default from its
points), and that ``botec measure --efficiency-curve`` fits a device's own curve with.
"""

from __future__ import annotations

import statistics

__all__ = ["relative_line_fit", "gemm_curve", "attention_forward_efficiency", "COMPUTE_BOUND_ROWS",
           "MEMORY_BOUND_ROWS"]

# GEMMs with at least this many rows (tokens) are compute-bound on every measured GPU: the training and
# prefill shapes. GEMMs with at most MEMORY_BOUND_ROWS rows are the weight-read-bound decode shapes.
COMPUTE_BOUND_ROWS = 1024
MEMORY_BOUND_ROWS = 8


def relative_line_fit(work, seconds) -> tuple[float, float]:
    """(slope, intercept) of t = slope · x + t0 minimizing Σ ((slope · x_i + t0) / t_i − 1)².

    The normal equations of the regression 1 = slope · u_i + t0 · v_i with u = x / t, v = 1 / t.
    """
    u = [x / t for x, t in zip(work, seconds)]
    v = [1 / t for t in seconds]
    if len(u) < 2:
        raise ValueError("a line needs at least two measured points")
    suu = sum(a * a for a in u)
    svv = sum(b * b for b in v)
    suv = sum(a * b for a, b in zip(u, v))
    su, sv = sum(u), sum(v)
    determinant = suu * svv - suv * suv
    if determinant <= 0:
        raise ValueError("the measured points do not determine a line (all of one size)")
    slope = (su * svv - sv * suv) / determinant
    intercept = (sv * suu - su * suv) / determinant
    return slope, intercept


def gemm_curve(points, peak_flops_per_s: float, memory_bandwidth_bytes_per_s: float,
               element_bytes: float = 2.0) -> dict[str, float]:
    """The GEMM figures of measured ``points`` ``(m, n, k, seconds)``.

    ``matmul_efficiency`` e_mm and ``kernel_overhead`` t0 from the compute-bound points (m ≥ 1,024);
    ``memory_bandwidth_efficiency`` e_mem from the weight-read-bound ones (m ≤ 8), where the time is the
    bytes b·(m·k + k·n + m·n) at e_mem · BW plus a fixed cost. Either is absent without its points.
    """
    compute = [(2.0 * m * n * k, t) for m, n, k, t in points if m >= COMPUTE_BOUND_ROWS]
    memory = [(element_bytes * (m * k + k * n + m * n), t) for m, n, k, t in points if m <= MEMORY_BOUND_ROWS]
    figures: dict[str, float] = {}
    if compute:
        slope, intercept = relative_line_fit(*zip(*compute))
        figures["matmul_efficiency"] = 1.0 / (slope * peak_flops_per_s)
        figures["kernel_overhead"] = max(0.0, intercept)
    if memory:
        slope, _ = relative_line_fit(*zip(*memory))
        figures["memory_bandwidth_efficiency"] = 1.0 / (slope * memory_bandwidth_bytes_per_s)
    return figures


def attention_forward_efficiency(points, query_heads: int, head_dim: int, peak_flops_per_s: float) -> float:
    """The median share of the 16-bit peak of causal attention forward ``points`` ``(batch, sequence, seconds)``:
    F = 2 · b · s² · a · d (two matmuls of 2·s²·d FLOPs per head, the causal half)."""
    shares = [2.0 * b * s * s * query_heads * head_dim / (t * peak_flops_per_s) for b, s, t in points]
    return statistics.median(shares)
