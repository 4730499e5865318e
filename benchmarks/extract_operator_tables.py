"""Write botec's operator-measurement files (src/botec/catalog/measurements/*.yaml) from AIConfigurator's tables.

The catalog's default efficiency figures come from operator measurements, never from the end-to-end runs
`botec validate` grades. This script is how the shipped points were taken: NVIDIA AIConfigurator's measured
operator tables (Apache-2.0), collected on the named GPU through PyTorch (`torch_flow`: torch.matmul, i.e.
cuBLAS, for BF16 GEMMs) and TensorRT-LLM's context FMHA for attention. Only a grid of points is kept:

- GEMM, compute-bound region (training and prefill shapes): M ∈ {1,024 … 16,384}, N, K ∈ {1,024 … 16,384},
  powers of two;
- GEMM, memory-bound region (decode shapes: the weight read dominates): M ∈ {1, 8}, N, K ∈ {4,096, 8,192, 16,384};
- context attention (forward, causal), 32 query heads, 8 KV heads, head dim 128, sequences 1,024-16,384.

Usage (needs pandas and pyarrow, not botec dependencies):
    python benchmarks/extract_operator_tables.py /path/to/aiconfigurator-checkout
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


if __name__ == "__main__":
    main(Path(sys.argv[1]))
