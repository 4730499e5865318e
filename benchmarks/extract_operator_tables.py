"""Write botec's operator-measurement files (src/botec/catalog/measurements/*.yaml) from AIConfigurator's tables.

The catalog's default efficiency figures come from operator measurements, never from the end-to-end runs
`botec validate` grades. This script is how the shipped points were taken: NVIDIA AIConfigurator's measured
operator tables (Apache-2.0), collected on the named GPU through PyTorch (`torch_flow`: torch.matmul, i.e.
cuBLAS, for BF16 GEMMs) and TensorRT-LLM's context FMHA for attention. Only a grid of points is kept:

- GEMM, compute-bound region (training and prefill shapes): M ∈ {1,024 … 16,384}, N, K ∈ {1,024 … 16,384},
  powers of two;
- GEMM, memory-bound region (decode shapes: the weight read dominates): M ∈ {1, 8}, N, K ∈ {4,096, 8,192, 16,384};
- context attention (forward, causal), 32 query heads, 8 KV heads, head dim 128, sequences 1,024-16,384.

The serving step's operator tables (``measurements/operators/*.yaml``, read by
:mod:`botec.serving.operators`) keep a grid per GEMM format (bf16; fp8: per-tensor scaled; fp8_block: 1×128
block scaled, DeepSeek-style), TensorRT-LLM 1.3.0rc20's collection (A100: 1.0.0):

- M ∈ {1, 2, 4, … 8,192} (powers of two: the step's tokens), N, K ∈ NK_GRID (512 … 51,200, those the
  device's table holds: the 8B, 70B and Mixtral projections at TP 1-8 fall inside), one row per (N, K) with
  the latencies over M.

The fused MoE operator (``measurements/operators/moe-<format>-<accelerator>.yaml``, read by
:mod:`botec.serving.moe_operators`): TensorRT-LLM 1.3.0rc20's ``moe_perf.parquet`` (the whole fused MoE op of one
layer on one rank: routing's permutation, the grouped gate/up GEMM, the activation, the grouped down GEMM, the
unpermute; the router GEMM and the all-to-all are separate ops), grids per catalog MoE model in MOE_SHAPES,
every (moe_tp, moe_ep) layout the device's table holds, tokens T ∈ {1, 2, 4 … 16,384} (the tokens entering the
layer's MoE across the group: AIConfigurator's own query scales a rank's tokens by the attention-DP size), at two
routing distributions: balanced (what EPLB's redundant experts aim at) and the skewed one AIConfigurator's model
family uses (models/moe.py: power_law 1.2; models/deepseek.py: 1.01).

- decode (generation) attention, ``measurements/operators/attention-decode-<kv format>-<accelerator>.yaml`` (read by
  :mod:`botec.serving.attention_tables`): TensorRT-LLM's generation-attention kernel (XQA) per layer, one query per
  sequence, by batch b (1 … 2,048 sequences) and KV length s = isl + step (2 … 131,072 tokens: AIConfigurator's
  collector runs isl = 1 and ``step`` generated tokens), for the per-rank layouts of DECODE_LAYOUTS (query heads,
  KV heads; head dim 128, no sliding window), each with the closed form the serving step uses fitted to its own
  points: L(b, s) = F + ‖σ·b, κ·b·s‖_p with F the table's point at b = 1, s = 2, κ the table's median
  (L − F)/(b·s) where the kernel streams the cache (b·s ≥ 2¹⁸), and σ, p (1 ≤ p ≤ 32) minimising
  Σ (log L_closed − log L_table)² over the layout's measured points (scipy's Nelder-Mead in log σ, log p).

Usage (needs pandas and pyarrow, and scipy for the attention fits, not botec dependencies):
    python benchmarks/extract_operator_tables.py /path/to/aiconfigurator-checkout   # a git checkout (HEAD)
    python benchmarks/extract_operator_tables.py --installed /path/to/site-packages/aiconfigurator_core
The second reads the data folder of an installed aiconfigurator-core (pip install aiconfigurator==0.12.0)
and writes only the serving step's operator tables, and the collective tables (read by
:mod:`botec.formulas.collective_tables`):

- ``allreduce-<engine>-<device>.yaml``: the engine's own (custom) all-reduce, BF16, as the engine runs it in a
  decode step (vLLM and SGLang: their CUDA-graph backend, the kernel's device time; TensorRT-LLM: its
  AllReduce op, which picks one-shot, two-shot or NCCL by size);
- ``allreduce-nccl-<device>.yaml``, ``allgather-nccl-…``, ``reducescatter-nccl-…``, ``alltoall-nccl-…``: NCCL's
  collectives, FP16 (``half``), at the NCCL version the AIConfigurator system file names (``misc.nccl_version``);

each by message bytes (AIConfigurator's ``message_size`` is in elements: × 2 bytes for these 16-bit tables; the
all-reduced tensor, NCCL's convention) and ranks (2, 4, 8 GPUs inside one node), latencies in microseconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

DATA = "aic-core/src/aiconfigurator_core/systems/data"
# botec catalog key -> (AIConfigurator system, TensorRT-LLM collection version)
DEVICES = {"a100-sxm-80gb": ("a100_sxm", "1.0.0"), "h100-sxm": ("h100_sxm", "1.3.0rc20"),
           "h200": ("h200_sxm", "1.3.0rc20"), "b200": ("b200_sxm", "1.3.0rc20")}
POWERS = [1024, 2048, 4096, 8192, 16384]
OUT = Path(__file__).resolve().parents[1] / "src/botec/catalog/measurements"
OPERATORS = OUT / "operators"
GEMM_FORMATS = {"bf16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block"}   # botec name -> AIConfigurator's
M_GRID = [2 ** i for i in range(14)]                                              # 1 … 8,192 tokens
NK_GRID = [512, 1024, 1536, 2048, 3072, 4096, 5120, 6144, 8192, 10240, 12288, 16384, 51200]
# N also reaches 65,536 where measured: a 70B's fused gate/up projection is 2 × 28,672 = 57,344 wide at TP 1
# (AIConfigurator has no 65,536 × 65,536 point, so K stops at 51,200).
N_GRID = NK_GRID + [65536]
MOE_FORMATS = {"bf16": "bfloat16", "fp8": "fp8", "fp8_block": "fp8_block"}
MOE_TOKENS = [2 ** i for i in range(15)]                                          # 1 … 16,384 tokens
# botec catalog model -> (hidden, expert FFN, experts, top-k, the skewed routing distribution AIConfigurator's
# model family queries: MOEModel power_law 1.2 for Mixtral, DeepSeekModel power_law 1.01); "balanced" is kept too
MOE_SHAPES = {"mixtral-8x7b": (4096, 14336, 8, 2, "power_law_1.2"),
              "deepseek-v3": (7168, 2048, 256, 8, "power_law_1.01")}


def _read(repo: Path, path: str) -> pd.DataFrame:
    blob = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True, check=True).stdout
    tmp = OUT / ".tmp.parquet"
    tmp.write_bytes(blob)
    try:
        return pd.read_parquet(tmp)
    finally:
        tmp.unlink()


def _header(kind, key, frame, repo, path, commit, date, what):
    return (f"# {what}\n# Written by benchmarks/extract_operator_tables.py; do not edit by hand.\n"
            f"schema_version: 1\nkind: {kind}\ndevice: {key}\nmeasured_on: {frame.device.iloc[0]}\n"
            f"source:\n  repository: ai-dynamo/aiconfigurator\n  commit: {commit}\n  date: {date}\n"
            f"  path: {path}\n  framework: {frame.framework.iloc[0]} {frame.version.iloc[0]}\n"
            f"  kernel: {frame.kernel_source.iloc[0]}\n  license: Apache-2.0\n")


def main(repo: Path) -> None:
    commit, date = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%H %ad", "--date=short"],
                                  capture_output=True, check=True, text=True).stdout.split()
    for key, (system, version) in DEVICES.items():
        path = f"{DATA}/{system}/gemm/trtllm/{version}/gemm_perf.parquet"
        frame = _read(repo, path)
        frame = frame[frame.gemm_dtype == "bfloat16"]
        large = frame[frame.m.isin(POWERS) & frame.n.isin(POWERS) & frame.k.isin(POWERS)]
        small = frame[frame.m.isin([1, 8]) & frame.n.isin(POWERS[2:]) & frame.k.isin(POWERS[2:])]
        rows = pd.concat([large, small]).groupby(["m", "n", "k"], as_index=False).latency.median()
        text = _header("gemm", key, frame, repo, path, commit, date,
                       f"BF16 GEMM latencies measured on {frame.device.iloc[0]} (AIConfigurator)")
        text += "units: {m: rows, n: columns, k: inner dimension, latency: microseconds}\n"
        text += "dtype: bf16\npoints:  # [m, n, k, latency_us]; C (m × n) = A (m × k) · B (k × n)\n"
        text += "".join(f"  - [{r.m}, {r.n}, {r.k}, {r.latency * 1e3:.2f}]\n" for r in rows.itertuples())
        (OUT / f"gemm-bf16-{key}.yaml").write_text(text, encoding="utf-8")

        path = f"{DATA}/{system}/attention/trtllm/{version}/context_attention_perf.parquet"
        frame = _read(repo, path)
        frame = frame[(frame.attn_dtype == "bfloat16") & (frame.kv_cache_dtype == "bfloat16") & (frame.head_dim == 128)
                      & (frame.num_heads == 32) & (frame.num_key_value_heads == 8) & (frame.window_size == 0)
                      & frame.isl.isin([1024, 2048, 4096, 8192, 16384]) & (frame.batch_size * frame.isl >= 16384)
                      & (frame.batch_size * frame.isl <= 65536)]
        rows = frame.groupby(["batch_size", "isl"], as_index=False).latency.median()
        text = _header("context_attention", key, frame, repo, path, commit, date,
                       f"Causal context (prefill) attention forward latencies on {frame.device.iloc[0]} (AIConfigurator)")
        text += ("shape: {query_heads: 32, kv_heads: 8, head_dim: 128, causal: true, dtype: bf16}\n"
                 "units: {batch: sequences, sequence: tokens, latency: microseconds}\n"
                 "points:  # [batch, sequence, latency_us]\n")
        text += "".join(f"  - [{r.batch_size}, {r.isl}, {r.latency * 1e3:.2f}]\n" for r in rows.itertuples())
        (OUT / f"attention-bf16-{key}.yaml").write_text(text, encoding="utf-8")


def write_gemm_grids(read, key: str, system: str, version: str, path: str, origin: dict) -> None:
    """One file per GEMM format measured for ``system``: rows [n, k, [latency_us at each M of M_GRID]]."""
    frame = read(path)
    for name, theirs in GEMM_FORMATS.items():
        rows = frame[(frame.gemm_dtype == theirs) & frame.m.isin(M_GRID) & frame.n.isin(N_GRID)
                     & frame.k.isin(NK_GRID)]
        if rows.empty:
            continue
        table = rows.groupby(["n", "k", "m"]).latency.median()
        k_grid = [v for v in NK_GRID if v in set(rows.k)]

        def complete(n, table=table, k_grid=k_grid):   # this iteration's table (B023)
            return all(table.get((n, k, m)) is not None for k in k_grid for m in M_GRID)

        n_grid = [v for v in NK_GRID if v in set(rows.n)]
        n_grid += [v for v in N_GRID[len(NK_GRID):] if v in set(rows.n) and complete(v)]   # wider N where whole
        lines, missing = [], 0
        for n in n_grid:
            for k in k_grid:
                values = [table.get((n, k, m)) for m in M_GRID]
                if any(v is None for v in values):
                    missing += 1
                    continue
                lines.append(f"  - [{n}, {k}, [{', '.join(f'{v * 1e3:.2f}' for v in values)}]]\n")
        if missing:   # the lookup needs the whole grid: a table that lacks part of it is left out
            print(f"{system} {version} {name}: {missing} of {len(n_grid) * len(k_grid)} (n, k) lack a point at "
                  "some M; not written", file=sys.stderr)
            continue
        head = rows.iloc[0]
        text = (f"# {name} GEMM latencies measured on {head.device} (AIConfigurator), a grid of its table\n"
                "# Written by benchmarks/extract_operator_tables.py; do not edit by hand. See ../NOTICE.\n"
                f"schema_version: 1\nkind: gemm_grid\ndevice: {key}\nmeasured_on: {head.device}\ndtype: {name}\n"
                "source:\n  repository: ai-dynamo/aiconfigurator\n"
                + "".join(f"  {field}: {value}\n" for field, value in origin.items())
                + f"  path: {path}\n  engine: {head.framework} {head.version}\n  kernel: {head.kernel_source}\n"
                "  license: Apache-2.0\n"
                "units: {m: rows (tokens of the step), n: columns, k: inner dimension, latency: microseconds}\n"
                f"m: [{', '.join(map(str, M_GRID))}]\nn: [{', '.join(map(str, n_grid))}]\n"
                f"k: [{', '.join(map(str, k_grid))}]\n"
                "rows:  # [n, k, [latency_us at each m]]; C (m × n) = A (m × k) · B (k × n)\n" + "".join(lines))
        OPERATORS.mkdir(exist_ok=True)
        (OPERATORS / f"gemm-{name.replace('_', '-')}-{key}.yaml").write_text(text, encoding="utf-8")


def write_moe_grids(read, key: str, system: str, version: str, path: str, origin: dict) -> None:
    """One file per MoE format measured for ``system``: per model of MOE_SHAPES, rows [moe_tp, moe_ep,
    [latency_us at each T of MOE_TOKENS]] for every layout measured at all of MOE_TOKENS."""
    frame = read(path)
    for name, theirs in MOE_FORMATS.items():
        shapes = []
        for model, (hidden, ffn, experts, top_k, _skewed), distribution in (
                (model, shape, distribution) for model, shape in MOE_SHAPES.items()
                for distribution in ("balanced", shape[-1])):
            rows = frame[(frame.moe_dtype == theirs) & (frame.hidden_size == hidden) & (frame.inter_size == ffn)
                         & (frame.num_experts == experts) & (frame.topk == top_k)
                         & (frame.distribution == distribution) & frame.num_tokens.isin(MOE_TOKENS)]
            if rows.empty:
                continue
            table = rows.groupby(["moe_tp_size", "moe_ep_size", "num_tokens"]).latency.median()
            lines = []
            for tp, ep in sorted(set(zip(rows.moe_tp_size, rows.moe_ep_size))):
                values = [table.get((tp, ep, t)) for t in MOE_TOKENS]
                if any(v is None for v in values):
                    continue
                lines.append(f"      - [{tp}, {ep}, [{', '.join(f'{v * 1e3:.2f}' for v in values)}]]\n")
            kernels = ", ".join(sorted(set(rows.kernel_source)))
            shapes.append(f"  - model: {model}\n    hidden_size: {hidden}\n    expert_ffn_size: {ffn}\n"
                          f"    experts: {experts}\n    experts_per_token: {top_k}\n    distribution: {distribution}\n"
                          f"    kernel: {kernels}\n"
                          "    rows:  # [moe_tp, moe_ep, [latency_us at each tokens]]\n" + "".join(lines))
        if not shapes:
            continue
        head = frame[frame.moe_dtype == theirs].iloc[0]
        text = (f"# {name} fused-MoE latencies measured on {head.device} (AIConfigurator), a grid of its table\n"
                "# Written by benchmarks/extract_operator_tables.py; do not edit by hand. See ../NOTICE.\n"
                f"schema_version: 1\nkind: moe_grid\ndevice: {key}\nmeasured_on: {head.device}\ndtype: {name}\n"
                "source:\n  repository: ai-dynamo/aiconfigurator\n"
                + "".join(f"  {field}: {value}\n" for field, value in origin.items())
                + f"  path: {path}\n  engine: {head.framework} {head.version}\n  license: Apache-2.0\n"
                "units: {tokens: tokens entering one layer's MoE (the whole group's), latency: microseconds of the "
                "fused MoE op on one rank}\n"
                f"tokens: [{', '.join(map(str, MOE_TOKENS))}]\nshapes:\n" + "".join(shapes))
        OPERATORS.mkdir(exist_ok=True)
        (OPERATORS / f"moe-{name.replace('_', '-')}-{key}.yaml").write_text(text, encoding="utf-8")


# botec catalog key -> AIConfigurator's comm tables: engine -> (folder, version, backend column value or None);
# "nccl" -> the system file's misc.nccl_version. The newest collection of each engine with a custom all-reduce table.
COMM = {"a100-sxm-80gb": ("a100_sxm", {"tensorrt-llm": ("trtllm", "1.0.0", None),
                                       "vllm": ("vllm", "0.14.0", "vllm_graph"),
                                       "sglang": ("sglang", "0.5.10", "sglang_graph")}, "2.27.3"),
        "h100-sxm": ("h100_sxm", {"tensorrt-llm": ("trtllm", "1.3.0rc20", None),
                                  "vllm": ("vllm", "0.24.0", "vllm_graph"),
                                  "sglang": ("sglang", "0.5.14", "sglang_graph")}, "2.27.3"),
        "h200": ("h200_sxm", {"tensorrt-llm": ("trtllm", "1.3.0rc20", None),
                              "vllm": ("vllm", "0.24.0", "vllm_graph"),
                              "sglang": ("sglang", "0.5.14", "sglang_graph")}, "2.26.2"),
        "b200": ("b200_sxm", {"tensorrt-llm": ("trtllm", "1.3.0rc20", None),
                              "vllm": ("vllm", "0.24.0", "vllm_graph"),
                              "sglang": ("sglang", "0.5.14", "sglang_graph")}, "2.27.3")}
NCCL_OPS = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
            "alltoall": "alltoall"}
ELEMENT_BYTES = {"bfloat16": 2, "half": 2}


def write_collective(frame, op: str, stem: str, key: str, path: str, origin: dict, dtype: str) -> None:
    """One file: rows [ranks, [latency_us at each message size]] over the sizes every rank count has."""
    table = frame.groupby(["num_gpus", "message_size"]).latency.median()   # repeated collections: their median
    ranks = sorted(int(r) for r in frame.num_gpus.unique())
    sizes = sorted(int(s) for s in frame.message_size.unique()
                   if all((r, s) in table.index for r in ranks))
    head = frame.iloc[0]
    width = ELEMENT_BYTES[dtype]
    lines = [f"  - [{r}, [{', '.join(f'{table[(r, s)] * 1e3:.2f}' for s in sizes)}]]\n" for r in ranks]
    text = (f"# {op} latencies measured on {head.device} (AIConfigurator: {head.kernel_source}), one node\n"
            "# Written by benchmarks/extract_operator_tables.py; do not edit by hand. See ../NOTICE.\n"
            f"schema_version: 1\nkind: collective\nop: {op}\ndevice: {key}\nmeasured_on: {head.device}\n"
            f"dtype: {'bf16' if dtype == 'bfloat16' else 'fp16'}\n"
            "source:\n  repository: ai-dynamo/aiconfigurator\n"
            + "".join(f"  {field}: {value}\n" for field, value in origin.items())
            + f"  path: {path}\n  engine: {head.framework} {head.version}\n  kernel: {head.kernel_source}\n"
            "  license: Apache-2.0\n"
            "units: {message: bytes of the whole tensor (AIConfigurator's message_size elements × "
            f"{width} B), ranks: GPUs of one node, latency: microseconds}}\n"
            f"ranks: [{', '.join(map(str, ranks))}]\n"
            f"message_bytes: [{', '.join(str(s * width) for s in sizes)}]\n"
            "rows:  # [ranks, [latency_us at each message size]]\n" + "".join(lines))
    OPERATORS.mkdir(exist_ok=True)
    (OPERATORS / f"{stem}-{key}.yaml").write_text(text, encoding="utf-8")


def write_collective_tables(package: Path, origin: dict) -> None:
    """The engines' custom all-reduce tables and NCCL's collectives, per device (see the module docstring)."""
    for key, (system, engines, nccl) in COMM.items():
        for engine, (folder, version, backend) in engines.items():
            path = f"systems/data/{system}/comm/{folder}/{version}/custom_allreduce_perf.parquet"
            if not (package / path).exists():
                continue
            frame = pd.read_parquet(package / path)
            if backend is not None:
                frame = frame[frame.backend == backend]
            frame = frame[frame.allreduce_dtype == "bfloat16"]
            write_collective(frame, "all_reduce", f"allreduce-{engine}", key, path, origin, "bfloat16")
        path = f"systems/data/{system}/comm/nccl/{nccl}/nccl_perf.parquet"
        if not (package / path).exists():
            continue
        frame = pd.read_parquet(package / path)
        for op, stem in NCCL_OPS.items():
            rows = frame[(frame.op_name == op) & (frame.nccl_dtype == "half")]
            if not rows.empty:
                write_collective(rows, op, f"{stem}-nccl", key, path, origin, "half")


DECODE_LAYOUTS = ((64, 8), (32, 8), (32, 4), (16, 4), (16, 2), (8, 2), (8, 1), (4, 1))
"""(query heads, KV heads) on one TP rank: Llama 3.1 70B (64/8) and 8B, Mistral 7B and Mixtral 8x7B (32/8) at TP 1,
2, 4 and 8 (heads and KV heads each divided by TP; a KV head is not split below one)."""
EXPONENT_RANGE = (1.0, 32.0)   # p's bounds, as the GEMM knee's (botec.serving.operators.KNEE_EXPONENT_RANGE)
ATTENTION_FORMATS = {"bf16": "bfloat16", "fp8": "fp8"}   # botec's KV format -> AIConfigurator's kv_cache_dtype


STREAMING_WORK = 2 ** 18   # b·s from which the kernel streams the cache: L/(b·s) varies < 4 % beyond (H100, H200)


def fit_decode_layout(batch, context, latency_us):
    """(F, σ, κ, p) of L(b, s) = F + ‖σ·b, κ·b·s‖_p (microseconds) over one layout's measured points: F the point at
    the smallest b and s; κ the table's own cost per context token where the kernel streams the cache, the median
    of (L − F)/(b·s) over the points with b·s ≥ STREAMING_WORK (a free κ, fitted in log space where most points
    are floor-bound, came out 6-19 % above those points, and long contexts are where attention is the step);
    σ, p (≥ 1) the least squares of the log residuals (Nelder-Mead in log space)."""
    import numpy as np
    from scipy.optimize import minimize

    b, s, latency = (np.asarray(v, dtype=float) for v in (batch, context, latency_us))
    floor = float(latency[(b == b.min()) & (s == s.min())][0])
    contexts = b * s
    streaming = contexts >= min(STREAMING_WORK, contexts.max())
    kappa = float(np.median((latency[streaming] - floor) / contexts[streaming]))

    def closed(x):
        sigma, p = np.exp(x)
        p = min(max(p, EXPONENT_RANGE[0]), EXPONENT_RANGE[1])
        a, c = sigma * b, kappa * contexts
        high, low = np.maximum(a, c), np.minimum(a, c)
        return floor + high * (1 + (low / high) ** p) ** (1 / p)

    start = np.log([(latency.max() - floor) / b.max() / 4, 2.0])
    best = minimize(lambda x: float(np.sum(np.log(closed(x) / latency) ** 2)), start, method="Nelder-Mead",
                    options={"maxiter": 20000, "xatol": 1e-10, "fatol": 1e-14})
    sigma, p = np.exp(best.x)
    residual = closed(best.x) / latency - 1
    p = min(max(p, EXPONENT_RANGE[0]), EXPONENT_RANGE[1])
    return floor, float(sigma), kappa, float(p), float(residual.min()), float(residual.max())


def write_decode_attention_grids(read, key: str, system: str, version: str, path: str, origin: dict) -> None:
    """One file per KV format measured for ``system``: per layout of DECODE_LAYOUTS, its grid (rows [b, [latency_us at
    each s of the file's axis, null where not measured]]) and its fitted closed form."""
    frame = read(path)
    frame = frame[(frame.head_dim == 128) & (frame.window_size == 0) & (frame.beam_width == 1)]
    frame = frame.assign(s=frame.isl + frame.step)
    for name, theirs in ATTENTION_FORMATS.items():
        rows = frame[frame.kv_cache_dtype == theirs]
        if rows.empty:
            continue
        layouts = []
        for heads, kv_heads in DECODE_LAYOUTS:
            cell = rows[(rows.num_heads == heads) & (rows.num_key_value_heads == kv_heads)]
            if not cell.empty:
                layouts.append((heads, kv_heads, cell.groupby(["batch_size", "s"]).latency.median()))
        if not layouts:
            continue
        batches = sorted({int(b) for *_, table in layouts for b, _ in table.index})
        contexts = sorted({int(s) for *_, table in layouts for _, s in table.index})
        head = rows.iloc[0]
        text = (f"# Decode (generation) attention latencies per layer measured on {head.device} (AIConfigurator), "
                f"{name} KV cache, a grid of its table\n"
                "# Written by benchmarks/extract_operator_tables.py; do not edit by hand. See ../NOTICE.\n"
                f"schema_version: 1\nkind: decode_attention_grid\ndevice: {key}\nmeasured_on: {head.device}\n"
                f"kv_dtype: {name}\nhead_dim: 128\n"
                "source:\n  repository: ai-dynamo/aiconfigurator\n"
                + "".join(f"  {field}: {value}\n" for field, value in origin.items())
                + f"  path: {path}\n  engine: {head.framework} {head.version}\n  kernel: {head.kernel_source}\n"
                "  license: Apache-2.0\n"
                "units: {batch: sequences of one query each, context: KV tokens per sequence (isl + step), latency: "
                "microseconds per layer on one rank}\n"
                f"batch: [{', '.join(map(str, batches))}]\ncontext: [{', '.join(map(str, contexts))}]\n"
                "# fit (botec's, not AIConfigurator's): L(b, s) = floor + ((per_sequence·b)^p + (per_context_token·b·s)^p)"
                "^(1/p); per_context_token the median (L - floor)/(b·s) over b·s >= 2^18 (the kernel streaming the "
                "cache), per_sequence and 1 ≤ p ≤ 32 least squares in log over the layout's points; misfit: the "
                "extreme relative residuals\n"
                "layouts:\n")
        for heads, kv_heads, table in layouts:
            b, s = zip(*table.index)
            floor, sigma, kappa, p, low, high = fit_decode_layout(b, s, table.values * 1e3)
            text += (f"  - heads: {heads}\n    kv_heads: {kv_heads}\n"
                     f"    fit: {{floor_us: {floor:.6g}, per_sequence_us: {sigma:.6g}, per_context_token_us: "
                     f"{kappa:.6g}, exponent: {p:.6g}, misfit: [{low:+.3f}, {high:+.3f}]}}\n"
                     "    rows: |  # a row per batch: the batch, then latency_us at each context (- not measured)\n")
            for batch in batches:
                values = [table.get((batch, s)) for s in contexts]
                text += (f"      {batch:<5d}" + " ".join("-" if v is None else f"{v * 1e3:.2f}" for v in values)
                         + "\n")
        OPERATORS.mkdir(exist_ok=True)
        (OPERATORS / f"attention-decode-{name}-{key}.yaml").write_text(text, encoding="utf-8")


# botec engine -> (AIConfigurator backend folder, its collection version per system)
CONTEXT_ENGINES = {"tensorrt-llm": ("trtllm", {system: version for system, version in DEVICES.values()}),
                   "vllm": ("vllm", {"a100_sxm": "0.14.0", "h100_sxm": "0.24.0", "h200_sxm": "0.24.0",
                                     "b200_sxm": "0.24.0"}),
                   "sglang": ("sglang", {"a100_sxm": "0.5.10", "h100_sxm": "0.5.14", "h200_sxm": "0.5.14",
                                         "b200_sxm": "0.5.14"})}
CONTEXT_FORMATS = {"bfloat16": "bf16", "fp8": "fp8"}   # AIConfigurator's attn / KV dtype -> botec's format name


def fit_context_layout(batch, prompt, latency_us):
    """(F, σ, κ, p, lowest, highest residual) of L(b, s) = F + ‖σ·b·s, κ·b·s²/2‖_p (microseconds) over one layout's
    measured points: b causal prompts of s tokens, so b·s query tokens and b·s²/2 attended pairs; F the point at
    the smallest b and s; σ, κ, p (1 ≤ p ≤ 32) the least squares of the log residuals (Nelder-Mead in log space).
    A free fit: most points are compute-bound, and the long prompts' points sit within about ±15 % of it."""
    import numpy as np
    from scipy.optimize import minimize

    b, s, latency = (np.asarray(v, dtype=float) for v in (batch, prompt, latency_us))
    floor = float(latency[(b == b.min()) & (s == s.min())][0])
    tokens, pairs = b * s, b * s * s / 2

    def closed(x):
        sigma, kappa, p = np.exp(x)
        p = min(max(p, EXPONENT_RANGE[0]), EXPONENT_RANGE[1])
        a, c = sigma * tokens, kappa * pairs
        high, low = np.maximum(a, c), np.minimum(a, c)
        return floor + high * (1 + (low / high) ** p) ** (1 / p)

    start = np.log([(latency.max() - floor) / tokens.max(), (latency.max() - floor) / pairs.max(), 2.0])
    best = minimize(lambda x: float(np.sum(np.log(closed(x) / latency) ** 2)), start, method="Nelder-Mead",
                    options={"maxiter": 20000, "xatol": 1e-10, "fatol": 1e-14})
    sigma, kappa, p = np.exp(best.x)
    residual = closed(best.x) / latency - 1
    p = min(max(p, EXPONENT_RANGE[0]), EXPONENT_RANGE[1])
    return floor, float(sigma), float(kappa), float(p), float(residual.min()), float(residual.max())


def write_context_attention_grids(package: Path, key: str, system: str, origin: dict) -> None:
    """``attention-context-<engine>-<device>.yaml``: per engine whose table the device has, per (attention, KV) format
    it measured, per layout of DECODE_LAYOUTS, the grid of causal-prefill attention latencies (b prompts × s tokens,
    isl ≥ 16; the median over repeated points) and its fitted closed form."""
    for engine, (folder, versions) in CONTEXT_ENGINES.items():
        path = f"systems/data/{system}/attention/{folder}/{versions.get(system)}/context_attention_perf.parquet"
        if not (package / path).exists():
            continue
        frame = pd.read_parquet(package / path)
        if "window_size" not in frame:   # vLLM 0.14's A100 table measures full attention only
            frame = frame.assign(window_size=0)
        frame = frame[(frame.head_dim == 128) & (frame.window_size == 0) & (frame.isl >= 16)]
        sections, batches, prompts = [], set(), set()
        for (attention, kv), rows in frame.groupby(["attn_dtype", "kv_cache_dtype"]):
            # one kernel per section: where a table holds several (SGLang and vLLM on B200), the one it measured
            # most, the backend the engine runs by default there (trtllm_mha, flashinfer's TensorRT-LLM prefill)
            rows = rows[rows.kernel_source == rows.kernel_source.value_counts().idxmax()]
            layouts = []
            for heads, kv_heads in DECODE_LAYOUTS:
                cell = rows[(rows.num_heads == heads) & (rows.num_key_value_heads == kv_heads)]
                if not cell.empty:
                    layouts.append((heads, kv_heads, cell.groupby(["batch_size", "isl"]).latency.median()))
            if layouts:
                sections.append((rows.iloc[0], CONTEXT_FORMATS[attention], CONTEXT_FORMATS[kv], layouts))
                batches |= {int(b) for *_, table in layouts for b, _ in table.index}
                prompts |= {int(s) for *_, table in layouts for _, s in table.index}
        if not sections:
            continue
        batches, prompts, head = sorted(batches), sorted(prompts), sections[0][0]
        text = (f"# Context (prefill) attention latencies per layer measured on {head.device} (AIConfigurator) for "
                f"{engine}, causal, a grid of its table per format\n"
                "# Written by benchmarks/extract_operator_tables.py; do not edit by hand. See ../NOTICE.\n"
                f"schema_version: 1\nkind: context_attention_grid\nengine: {engine}\ndevice: {key}\n"
                f"measured_on: {head.device}\nhead_dim: 128\n"
                "source:\n  repository: ai-dynamo/aiconfigurator\n"
                + "".join(f"  {field}: {value}\n" for field, value in origin.items())
                + f"  path: {path}\n  engine: {head.framework} {head.version}\n  license: Apache-2.0\n"
                "units: {batch: prompts, prompt: tokens per prompt (isl, attended causally), latency: microseconds "
                "per layer on one rank}\n"
                f"batch: [{', '.join(map(str, batches))}]\nprompt: [{', '.join(map(str, prompts))}]\n"
                "# fit (botec's, not AIConfigurator's): L(b, s) = floor + ((per_token·b·s)^p + (per_pair·b·s²/2)^p)"
                "^(1/p), 1 ≤ p ≤ 32, least squares in log over the layout's points; misfit: the extreme relative "
                "residuals\nsections:\n")
        for first, attention, kv, layouts in sections:
            text += (f"  - attention_dtype: {attention}\n    kv_dtype: {kv}\n    kernel: {first.kernel_source}\n"
                     "    layouts:\n")
            for heads, kv_heads, table in layouts:
                b, s = zip(*table.index)
                floor, sigma, kappa, p, low, high = fit_context_layout(b, s, table.values * 1e3)
                text += (f"      - heads: {heads}\n        kv_heads: {kv_heads}\n"
                         f"        fit: {{floor_us: {floor:.6g}, per_token_us: {sigma:.6g}, per_pair_us: "
                         f"{kappa:.6g}, exponent: {p:.6g}, misfit: [{low:+.3f}, {high:+.3f}]}}\n"
                         "        rows: |  # a row per batch: the batch, then latency_us at each prompt (- not "
                         "measured)\n")
                for batch in batches:
                    values = [table.get((batch, s)) for s in prompts]
                    text += (f"          {batch:<4d}"
                             + " ".join("-" if v is None else f"{v * 1e3:.2f}" for v in values) + "\n")
        OPERATORS.mkdir(exist_ok=True)
        (OPERATORS / f"attention-context-{engine}-{key}.yaml").write_text(text, encoding="utf-8")


def main_installed(package: Path) -> None:
    """The serving step's GEMM, fused-MoE and decode-attention grids and the collective tables from an installed
    aiconfigurator-core's data folder."""
    from importlib.metadata import version as installed_version

    try:
        origin = {"package": f"aiconfigurator-core {installed_version('aiconfigurator-core')}"}
    except Exception:
        origin = {"package": "aiconfigurator-core (installed)"}
    for key, (system, version) in DEVICES.items():
        path = f"systems/data/{system}/gemm/trtllm/{version}/gemm_perf.parquet"
        if (package / path).exists():
            write_gemm_grids(lambda p: pd.read_parquet(package / p), key, system, version, path, origin)
        path = f"systems/data/{system}/moe/trtllm/{version}/moe_perf.parquet"
        if (package / path).exists():
            write_moe_grids(lambda p: pd.read_parquet(package / p), key, system, version, path, origin)
        path = f"systems/data/{system}/attention/trtllm/{version}/generation_attention_perf.parquet"
        if (package / path).exists():
            write_decode_attention_grids(lambda p: pd.read_parquet(package / p), key, system, version, path, origin)
        write_context_attention_grids(package, key, system, origin)
    write_collective_tables(package, origin)


def main_operators(repo: Path) -> None:
    """The serving step's GEMM grids from a git checkout (or mirror) of ai-dynamo/aiconfigurator."""
    commit, date = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%H %ad", "--date=short"],
                                  capture_output=True, check=True, text=True).stdout.split()
    for key, (system, version) in DEVICES.items():
        path = f"{DATA}/{system}/gemm/trtllm/{version}/gemm_perf.parquet"
        write_gemm_grids(lambda p: _read(repo, p), key, system, version, path, {"commit": commit, "date": date})
        path = f"{DATA}/{system}/moe/trtllm/{version}/moe_perf.parquet"
        try:
            write_moe_grids(lambda p: _read(repo, p), key, system, version, path, {"commit": commit, "date": date})
        except subprocess.CalledProcessError:   # no MoE table for this system and version
            pass


if __name__ == "__main__":
    if sys.argv[1] == "--installed":
        main_installed(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]))
        main_operators(Path(sys.argv[1]))
