#!/usr/bin/env bash
# GPU check for sessions that have the device tool (issue 29): time the kernels botec's serving step is priced
# on, to hold the shipped operator tables (AIConfigurator's, src/botec/catalog/measurements/) against the H200
# at hand. At most 8 minutes; run from the repository root on the device machine:
#   run(command="bash benchmarks/gpu_kernels.sh", timeout_s=540)
# It needs only the device machine's CUDA PyTorch (no botec, no pydantic). Results under $OUT (or
# ./gpu-kernels): gpu.txt, gemm.csv, decode_attention.csv, and the same tables printed.
#
# - GEMMs C (m × n) = A (m × k) · Wᵀ, W (n × k) as a linear layer keeps it, for the Llama-3.1-8B and -70B
#   (TP 1) layer shapes: fused QKV, attention output, fused gate/up, down; m = 1 … 8,192 tokens.
#   BF16: torch.matmul (cuBLAS). FP8 (E4M3, per-tensor scales): torch._scaled_mm, which needs every dimension a
#   multiple of 16: m below 16 runs padded to 16 (the column m_run says so), as TensorRT-LLM's small-m FP8 GEMMs
#   pad too.
# - Decode attention: one query token per sequence against a BF16 KV cache of `context` tokens (32 query heads,
#   8 KV heads, head size 128: the 8B's GQA), batch × context, torch's scaled_dot_product_attention (its flash
#   or memory-efficient kernel; the engines run FlashInfer or TensorRT-LLM's XQA, so expect the table faster).
# Each figure is the median of 30 timed calls (CUDA events) after 5 warm-up calls; the L2 cache is flushed
# between calls (a 256 MB write) so that a weight read is a read from HBM, as in a real decode step.
set -euo pipefail
out="${OUT:-gpu-kernels}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 - "$out" <<'PY'
import csv
import statistics
import sys
import time

import torch

out = sys.argv[1]
start = time.monotonic()
BUDGET_SECONDS = 420          # stop before the script's 8 minutes, whatever is left unmeasured
device = torch.device("cuda")
print("torch", torch.__version__, torch.cuda.get_device_name(0), file=open(f"{out}/gpu.txt", "a"))
flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device=device)


def median_seconds(call, repeats=30, warmup=5):
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        flush.zero_()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        call()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / 1e3)
    return statistics.median(times)


SHAPES = {   # model -> op -> (n, k): the layer's output and input widths at TP 1
    "llama-3.1-8b": {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)},
    "llama-3.1-70b": {"qkv": (10240, 8192), "o": (8192, 8192), "gate_up": (57344, 8192), "down": (8192, 28672)},
}
TOKENS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
fp8 = getattr(torch, "float8_e4m3fn", None)
rows = []
with open(f"{out}/gemm.csv", "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["model", "op", "dtype", "m", "m_run", "n", "k", "latency_us", "tflops", "weight_tb_per_s"])
    for model, ops in SHAPES.items():
        for op, (n, k) in ops.items():
            weight = torch.randn(n, k, device=device, dtype=torch.bfloat16) / k ** 0.5
            weight8 = weight.to(fp8) if fp8 is not None else None
            one = torch.ones((), device=device)
            for m in TOKENS:
                if time.monotonic() - start > BUDGET_SECONDS:
                    break
                a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
                measured = [("bf16", m, lambda: torch.matmul(a, weight.t()))]
                if weight8 is not None:
                    m_run = max(16, -(-m // 16) * 16)
                    a8 = torch.randn(m_run, k, device=device, dtype=torch.bfloat16).to(fp8)
                    measured.append(("fp8", m_run, lambda: torch._scaled_mm(a8, weight8.t(), scale_a=one, scale_b=one,
                                                                           out_dtype=torch.bfloat16)))
                for dtype, m_run, call in measured:
                    try:
                        seconds = median_seconds(call)
                    except RuntimeError as error:   # an FP8 GEMM this build or GPU cannot run
                        print(f"{model} {op} {dtype} m={m}: {error}".splitlines()[0])
                        continue
                    weight_bytes = n * k * (1 if dtype == "fp8" else 2)
                    row = [model, op, dtype, m, m_run, n, k, round(seconds * 1e6, 2),
                           round(2 * m * n * k / seconds / 1e12, 1), round(weight_bytes / seconds / 1e12, 3)]
                    writer.writerow(row)
                    rows.append(row)
            del weight, weight8
print(f"{'model':14} {'op':8} {'dtype':5} {'m':>5} {'us':>9} {'TFLOP/s':>8} {'W TB/s':>7}")
for model, op, dtype, m, m_run, n, k, us, tflops, tbs in rows:
    print(f"{model:14} {op:8} {dtype:5} {m:>5} {us:>9} {tflops:>8} {tbs:>7}")

HEADS, KV_HEADS, HEAD_SIZE = 32, 8, 128
with open(f"{out}/decode_attention.csv", "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(["batch", "context", "heads", "kv_heads", "head_size", "kv_dtype", "latency_us", "kv_tb_per_s"])
    print(f"{'batch':>5} {'context':>7} {'us':>9} {'KV TB/s':>8}")
    for batch in (1, 8, 32, 128):
        for context in (1024, 4096, 16384):
            if time.monotonic() - start > BUDGET_SECONDS or batch * context > 128 * 16384:
                continue
            q = torch.randn(batch, HEADS, 1, HEAD_SIZE, device=device, dtype=torch.bfloat16)
            kv = [torch.randn(batch, KV_HEADS, context, HEAD_SIZE, device=device, dtype=torch.bfloat16)
                  for _ in range(2)]
            call = lambda: torch.nn.functional.scaled_dot_product_attention(q, kv[0], kv[1], enable_gqa=True)
            seconds = median_seconds(call)
            kv_bytes = 2 * batch * KV_HEADS * context * HEAD_SIZE * 2
            writer.writerow([batch, context, HEADS, KV_HEADS, HEAD_SIZE, "bf16", round(seconds * 1e6, 2),
                             round(kv_bytes / seconds / 1e12, 3)])
            print(f"{batch:>5} {context:>7} {seconds * 1e6:>9.2f} {kv_bytes / seconds / 1e12:>8.3f}")
            del q, kv
print(f"done in {time.monotonic() - start:.0f} s")
PY
