#!/usr/bin/env bash
# GPU check for sessions that have the device tool: measure the efficiency curves of the H200 at hand
# (`botec measure --efficiency-curve`, bf16) and print them beside the catalog's Hopper curve
# (botec.catalog.efficiency). Run from the repository root on the device machine, e.g.
#   run(command="bash benchmarks/gpu_efficiency_curve.sh", timeout_s=300, carry=[".whl"])
# It takes a minute or two (the measurement's budget is 60 s); results go under $OUT (or
# ./gpu-efficiency-curve): curve.yaml, curve.txt (the measured table), comparison.txt.
#
# It runs with what the device machine has installed (its python3 holds a CUDA PyTorch, PyYAML, typer,
# rich); botec travels with the working tree and runs from src/ (no pip install: nothing can be fetched
# there). pydantic is not in that image: carry its wheels, made here once (see .library/device/README.md):
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
#     pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection typing-extensions
# and they are installed into /tmp/site below when .whl/ is there.
set -euo pipefail
out="${OUT:-gpu-efficiency-curve}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -c "import torch, yaml, typer, rich, pydantic" || {
  echo "missing a Python package on the device machine: carry pydantic's wheels as .whl (see this script's header)"
  exit 3
}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -c "import torch; print('cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0), torch.__version__)" \
  | tee -a "$out/gpu.txt"

# An H200 contract at bf16: Llama-3.1-70B at TP 8 (the ladder adds TP 1, 2 and 4), micro-batches of 1 and
# 2 sequences of 4,096 tokens: its QKV, attention-output, MLP and LM-head GEMMs, and squares to 16,384.
cat > "$out/h200-llama.yaml" <<YAML
name: gpu-efficiency-curve
workload:
  model: llama-3.1-70b
  tokens: 1B
  sequence_length: 4096
supply: {accelerator: h200, count: 8, storage: {write_bandwidth: 2 GB/s}}
strategy: {tensor_parallel: 8, micro_batch_size: 2, precision: bf16, optimizer: adam-mixed}
assumptions: {single_accelerator_mfu: 0.4, scaling_efficiency: 1.0}
YAML
python3 -m botec.cli measure "$out/h200-llama.yaml" --efficiency-curve --budget-seconds 60 \
  -o "$out/curve.yaml" | tee "$out/curve.txt"

# The measured curve beside the catalog's: both relative to the same peak and bandwidth (the catalog's
# H200 figures when the device matched; else the measured curve's own denominators, stated).
python3 - "$out/curve.yaml" <<'PY' | tee "$out/comparison.txt"
import sys

from botec.catalog import curves

curve = curves.read(sys.argv[1])
data = curves.CurveFile.model_validate(__import__("yaml").safe_load(open(sys.argv[1])))
print(f"measured on {curve.device_name} (accelerator {curve.accelerator}); peak "
      f"{curve.peak_flops_per_s / 1e12:.1f} TFLOP/s ({curve.peak_source}), memory "
      f"{curve.memory_bytes_per_s / 1e12:.2f} TB/s ({curve.memory_bandwidth_source})")
catalog = None
try:
    from botec.catalog import accelerators
    from botec.catalog.efficiency import family_efficiency, matmul_efficiency_at

    entry = accelerators()["h200"]
    family = getattr(entry, "family", None) or "hopper"
    figures = family_efficiency(family)
    e_mm, t0 = figures["matmul_efficiency"].value, figures["kernel_overhead"].value
    e_mem = figures["memory_bandwidth_efficiency"].value
    catalog = (family, e_mm, t0, e_mem)
    print(f"catalog curve: family {family}: e_mm {e_mm}, kernel overhead {t0 * 1e6:g} us, e_mem {e_mem}; "
          "e(F) = e_mm·F / (F + e_mm·peak·t0), a memory op e(B) = e_mem·B / (B + e_mem·bandwidth·t0)")
except Exception as error:  # the catalog curves are another change; print the measured curve regardless
    print(f"catalog curve not available ({error.__class__.__name__}: {error}): measured curve only")

print(f"\n{'GFLOP':>10}  {'GEMM (M×K×N)':<32}  {'measured':>9}  {'catalog':>9}")
for p in data.matmul:
    expected = ""
    if catalog:
        expected = f"{matmul_efficiency_at(p.gflop * 1e9, curve.peak_flops_per_s, catalog[1], catalog[2]):9.3g}"
    print(f"{p.gflop:>10.4g}  {(p.op or '') + f' {p.m}×{p.k}×{p.n}':<32}  {p.efficiency:9.3g}  {expected:>9}")
print(f"\n{'MB moved':>10}  {'op':<32}  {'measured':>9}  {'catalog':>9}")
for p in data.memory:
    expected = ""
    if catalog:  # the same form as the GEMM's: t = B / (e_mem·bandwidth) + t0
        expected = f"{matmul_efficiency_at(p.megabytes * 1e6, curve.memory_bytes_per_s, catalog[3], catalog[2]):9.3g}"
    print(f"{p.megabytes:>10.4g}  {p.op or '':<32}  {p.efficiency:9.3g}  {expected:>9}")

# The figures a contract for this H200 would use (assumptions.efficiency_curve): the line
# t = F / (e_mm·peak) + t0 fitted to the points, beside the catalog's.
from botec.inputs.efficiency import fit_curve

fitted = fit_curve(curve.matmul_points, curve.memory_points, curve.peak_flops_per_s)
print(f"\nfitted: e_mm {fitted['matmul_efficiency']:.3f}, kernel overhead {fitted['kernel_overhead'] * 1e6:.1f} us, "
      f"e_mem {fitted.get('memory_bandwidth_efficiency', float('nan')):.3f}"
      + (f"   catalog: e_mm {catalog[1]}, {catalog[2] * 1e6:g} us, e_mem {catalog[3]}" if catalog else ""))
PY
