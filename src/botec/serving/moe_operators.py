"""Measured fused-MoE latencies: the serving step's routed-expert GEMMs priced from operator tables.

``catalog/measurements/operators/moe-<format>-<accelerator>.yaml`` hold a grid of NVIDIA AIConfigurator's measured
MoE tables (Apache-2.0, see ``catalog/measurements/NOTICE``; TensorRT-LLM 1.3.0rc20 on Hopper and Blackwell, 1.0.0 on
A100), written by ``benchmarks/extract_operator_tables.py``: the latency L(T) of one layer's fused MoE operator on
one rank (the tokens' permutation to their experts, the grouped gate/up GEMM, the activation, the grouped down GEMM,
the unpermute and weighted sum; not the router GEMM, not the all-to-all) at T ∈ {1, 2, 4 … 16,384} tokens entering
the layer (the whole group's: each rank's tokens times the attention-DP ranks, as AIConfigurator queries it), for a
catalog model's shape (hidden h, expert FFN f_e, E experts, top-k) and each layout (moe_tp: ways each expert is
split, moe_ep: ranks the experts are spread over) at two routings: balanced, read where EPLB's redundant experts
(N > 0) balance the ranks, and the skew AIConfigurator's model family assumes (Mixtral: power law α = 1.2,
DeepSeek: α = 1.01), read otherwise. Kernels timed one at a time, not the end-to-end runs ``botec validate``
grades.

A botec layout maps onto the table's: expert tensor parallelism t_e = TP / EP is moe_tp; the busiest rank holds
r = ⌈(E + N)/EP⌉ physical experts (N redundant copies, EPLB), each picked with probability k/(E + N), so the table's
layout with the same r experts per rank is moe_ep = E / r, at T·E/(E + N) tokens (each physical expert then sees the
same expected tokens, T·k/(E + N)). A layout the table lacks is priced by the roofline, as before.

Lookup (:func:`moe_seconds`): linear interpolation of log L over log T between the grid's neighbours (a grid point
returns its measurement); T below 1 takes T = 1, above the grid L(T) = L(T_max)·T/T_max.

The step's closed form (:func:`expert_fit`). Per MoE layer the step charges F_e + x·(1 − (1 − q)^T) on its memory
side (q = k/(E + N): :func:`botec.serving.step.experts_touched_share`) and g_e·T on its compute side, joined with the
dense GEMMs at one knee p. From the table's points, in the step's tokens T:

    F_e + x·q = L(1)                                      the floor: one token's k experts and the op's fixed cost
    F_e + x·(1 − (1 − q)^T₉₉) = L(T₉₉)                   T₉₉ = ⌈ln 0.01 / ln(1 − q)⌉: 99 % of the experts touched
    g_e = (L(16,384) − L(8,192)) / 8,192                 the marginal seconds per token at the grid's top

(F_e, x ≥ 0), and p (:func:`botec.serving.operators.fit_knee_exponent`) minimises the log misfit of the layer's
closed form to the table's layer (its expert op plus any dense GEMMs a GEMM table prices) over T = 1 … 8,192.

Tables load once, lazily (``catalog_cache``); one estimate never imports numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import bisect
import math

from botec.catalog.root import catalog_cache

__all__ = ["MoeTable", "moe_table_names", "load_moe_table", "moe_table_given", "moe_seconds", "table_layout",
           "expert_fit", "ExpertFit", "MOE_FORMATS_OF_PRECISION", "TOUCHED_SHARE_FULL", "TABLE_ENGINES"]

# strategy.weight_precision -> the table formats tried, in order: a model's FP8 experts run per-tensor scaled
# (Mixtral as NVIDIA quantises it) or 1×128 block scaled (DeepSeek-V3's released checkpoint, its report §3.3)
MOE_FORMATS_OF_PRECISION = {"bf16": ("bf16",), "fp16": ("bf16",), "fp8": ("fp8", "fp8_block")}
TOUCHED_SHARE_FULL = 0.99   # the expert read's second point: the tokens at which 99 % of the experts are touched
SLOPE_TOKENS = (8192.0, 16384.0)   # the marginal seconds per token between these two of the grid's tokens


@dataclass(frozen=True)
class MoeShape:
    """One model's grid in a table: log seconds at each tokens, by (moe_tp, moe_ep)."""

    model: str
    distribution: str
    kernel: str
    layouts: dict             # (moe_tp, moe_ep) -> tuple of log seconds at MoeTable.tokens


@dataclass(frozen=True)
class MoeTable:
    name: str                 # the file's stem: moe-<format>-<accelerator>
    device: str
    dtype: str
    measured_on: str
    source: dict
    tokens: tuple             # floats, ascending
    shapes: dict              # (hidden, expert_ffn, experts, top_k, distribution) -> MoeShape

    def distributions(self, shape: tuple) -> tuple[str, ...]:
        """The routing distributions measured for (hidden, expert_ffn, experts, top_k)."""
        return tuple(sorted(key[-1] for key in self.shapes if key[:-1] == shape))

    def describe(self) -> str:
        return (f"{self.name}: AIConfigurator {self.source.get('engine', '')}, {self.measured_on} "
                f"({self.source.get('path', '')}, {self.source.get('license', '')})")


@catalog_cache
def moe_table_names() -> tuple[str, ...]:
    """The file stems of ``catalog/measurements/operators/moe-*.yaml``, sorted (no file is parsed)."""
    from botec.catalog.operator_files import operator_file_names

    return operator_file_names("moe")


@catalog_cache
def load_moe_table(name: str) -> MoeTable:
    """The grid of ``measurements/operators/<name>.yaml``, parsed and checked once."""
    from botec.catalog.operator_files import read_operator_file

    data = read_operator_file(name)
    tokens = tuple(float(v) for v in data["tokens"])
    shapes = {}
    for entry in data["shapes"]:
        layouts = {}
        for tp, ep, latencies in entry["rows"]:
            if len(latencies) != len(tokens) or not all(float(v) > 0 for v in latencies):
                raise ValueError(f"measurements/operators/{name}.yaml: {entry['model']} row {tp} × {ep} is not "
                                 f"{len(tokens)} positive latencies")
            layouts[(float(tp), float(ep))] = tuple(math.log(float(v) * 1e-6) for v in latencies)
        key = tuple(float(entry[field]) for field in ("hidden_size", "expert_ffn_size", "experts",
                                                      "experts_per_token")) + (str(entry["distribution"]),)
        shapes[key] = MoeShape(str(entry["model"]), str(entry["distribution"]), str(entry["kernel"]), layouts)
    return MoeTable(name, str(data["device"]), str(data["dtype"]), str(data["measured_on"]), dict(data["source"]),
                    tokens, shapes)


def table_index(table: MoeTable | None) -> float:
    """The table's position among :func:`moe_table_names` (−1 for none)."""
    return -1.0 if table is None else float(moe_table_names().index(table.name))


def table_by_index(index: float) -> MoeTable | None:
    return None if index < 0 else load_moe_table(moe_table_names()[int(round(index))])


def table_layout(table: MoeTable, hidden, expert_ffn, experts, top_k, redundant, expert_tensor_parallel,
                 expert_parallel):
    """(the model's grid, the table's (moe_tp, moe_ep), the token scale E/(E + N)) for a botec layout, or None where
    the table lacks the shape or the layout (see the module docstring)."""
    shape = table.shapes.get((float(hidden), float(expert_ffn), float(experts), float(top_k),
                              routing_distribution(table, (hidden, expert_ffn, experts, top_k), redundant)))
    if shape is None:
        return None
    per_rank = math.ceil((experts + redundant) / expert_parallel - 1e-9)
    table_ep = experts / per_rank
    if abs(table_ep - round(table_ep)) > 1e-9:
        return None
    layout = (float(expert_tensor_parallel), float(round(table_ep)))
    if layout not in shape.layouts:
        return None
    return shape, layout, experts / (experts + redundant)


def routing_distribution(table: MoeTable, shape, redundant) -> str | None:
    """The routing the table is read at: balanced where EPLB's redundant experts balance the ranks (N > 0), else the
    skewed power law AIConfigurator's model family assumes (the one distribution other than balanced)."""
    measured = table.distributions(tuple(float(v) for v in shape))
    if redundant > 0 and "balanced" in measured:
        return "balanced"
    skewed = [d for d in measured if d != "balanced"]
    return skewed[0] if skewed else (measured[0] if measured else None)


def moe_seconds(table: MoeTable, shape: MoeShape, layout, tokens: float) -> float:
    """Seconds of one layer's fused MoE op on one rank at ``tokens`` (the table's tokens; plain numbers)."""
    grid, logs = table.tokens, shape.layouts[layout]
    t = min(max(tokens, grid[0]), grid[-1])
    low = min(max(bisect.bisect_right(grid, t) - 1, 0), len(grid) - 2)
    weight = (math.log(t) - math.log(grid[low])) / (math.log(grid[low + 1]) - math.log(grid[low]))
    seconds = math.exp((1 - weight) * logs[low] + weight * logs[low + 1])
    return seconds * max(tokens, grid[-1]) / grid[-1]


@dataclass(frozen=True)
class ExpertFit:
    """One MoE layer's closed-form terms from a table (seconds; see the module docstring)."""

    floor_seconds: float          # F_e
    read_seconds: float           # x: every resident expert read once
    seconds_per_token: float      # g_e
    curve: tuple                  # L at the step's tokens 1, 2, 4 … 8,192 (operators.KNEE_TOKENS)
    reach: str                    # one line: the table, the grid, the layout


@catalog_cache(maxsize=256)
def expert_fit(index: float, hidden: float, expert_ffn: float, experts: float, top_k: float, redundant: float,
               expert_tensor_parallel: float, expert_parallel: float) -> ExpertFit | None:
    """The table's terms for one MoE layer on the busiest rank (None where no table covers it), once per layout."""
    from botec.serving.operators import KNEE_TOKENS

    table = table_by_index(index)
    if table is None or experts <= 0:
        return None
    found = table_layout(table, hidden, expert_ffn, experts, top_k, redundant, expert_tensor_parallel,
                         expert_parallel)
    if found is None:
        return None
    shape, layout, scale = found

    def latency(step_tokens):
        return moe_seconds(table, shape, layout, step_tokens * scale)

    pick = top_k / (experts + redundant)
    full = math.ceil(math.log(1 - TOUCHED_SHARE_FULL) / math.log(1 - pick)) if pick < 1 else 1
    share_one, share_full = pick, 1 - (1 - pick) ** full
    one, at_full = latency(1.0), latency(float(full))
    read = max((at_full - one) / (share_full - share_one), 0.0) if share_full > share_one else 0.0
    floor = one - read * share_one
    if floor < 0:
        floor, read = 0.0, one / share_one
    slope = (latency(SLOPE_TOKENS[1]) - latency(SLOPE_TOKENS[0])) / (SLOPE_TOKENS[1] - SLOPE_TOKENS[0])
    if slope <= 0:
        slope = latency(SLOPE_TOKENS[1]) / SLOPE_TOKENS[1]
    reach = (f"{table.name} ({shape.model}, {shape.kernel}, routing {shape.distribution}), measured at T = "
             f"{int(table.tokens[0])}…{int(table.tokens[-1]):,} on moe_tp {int(layout[0])} × moe_ep {int(layout[1])} "
             f"({len(shape.layouts)} layouts)")
    return ExpertFit(floor, read, slope, tuple(latency(m) for m in KNEE_TOKENS), reach)


TABLE_ENGINES = ("tensorrt-llm",)
"""The engines whose fused-MoE kernels the tables measure (TensorRT-LLM's: CUTLASS grouped GEMMs, DeepGEMM for FP8
blocks on Blackwell). Another engine's MoE runs its own kernels (SGLang's DeepGEMM or Triton, vLLM's Triton
fused_moe), which these tables do not time: it keeps the roofline. (The dense GEMM tables time cuBLAS, which every
engine calls.) On DeepSeek-V3 at EP 64 (balanced routing, 16,384 tokens) the TensorRT-LLM FP8-block kernel runs 1.8·10¹¹
FLOP in 470 µs, 19 % of the H100's FP8 peak: read into SGLang's 96-H100 example it takes decode from 21.7k to 18.3k
tokens/s per node (LMSYS measured 22.3k)."""


def moe_table_given(device, precision: str, arch, engine: str | None = None) -> dict:
    """The graph input ``moe_table_index``: the table measured on ``device`` for the model's routed experts in the
    contract's weight format (the first of :data:`MOE_FORMATS_OF_PRECISION` holding the shape) under an engine of
    :data:`TABLE_ENGINES`, or −1."""
    from botec.graph import Given

    key = getattr(device, "key", None)
    moe = getattr(arch, "moe", None)
    if moe is None:
        return {"moe_table_index": Given(-1.0, "assumed", "a dense model: no routed experts", "workload.model")}
    if engine not in TABLE_ENGINES:
        return {"moe_table_index": Given(-1.0, "assumed", f"{engine}'s MoE kernels are not the measured tables' "
                                         "(TensorRT-LLM's fused MoE): the roofline with the family's e_mm and e_mem",
                                         "strategy.engine")}
    shape = (float(arch.hidden_size), float(moe.expert_ffn_size), float(moe.experts), float(moe.experts_per_token))
    for fmt in MOE_FORMATS_OF_PRECISION.get(precision, ()):
        name = f"moe-{fmt.replace('_', '-')}-{key}"
        if key is not None and name in moe_table_names() and load_moe_table(name).distributions(shape):
            table = load_moe_table(name)
            entries = [table.shapes[shape + (d,)] for d in table.distributions(shape)]
            layouts = ", ".join(f"{int(tp)}×{int(ep)}" for tp, ep in sorted(entries[0].layouts))
            return {"moe_table_index": Given(
                table_index(table), "measured",
                f"routed-expert GEMMs priced from {table.describe()}: {entries[0].model}, {entries[0].kernel}, T = "
                f"{int(table.tokens[0])}…{int(table.tokens[-1]):,} tokens, moe_tp × moe_ep {layouts}, routing "
                f"{' or '.join(e.distribution for e in entries)} (balanced under EPLB's redundant experts); a layout "
                "outside these keeps the roofline", "supply.accelerator")}
    return {"moe_table_index": Given(-1.0, "assumed", f"no measured {precision} MoE table for this model on "
                                     f"{key or 'this accelerator'}: the roofline with the family's e_mm and e_mem",
                                     "supply.accelerator")}
