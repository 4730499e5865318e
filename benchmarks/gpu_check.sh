#!/usr/bin/env bash
# GPU check for sessions that have the device tool: one short, prepared run of `botec measure` and
# `botec calibrate` on a CUDA device. Run from the repository root on the device machine, e.g.
#   run(command="bash benchmarks/gpu_check.sh", timeout_s=480)
# Writes its results under $OUT (or ./gpu-check) and prints a summary.
set -euo pipefail
out="${OUT:-gpu-check}"
mkdir -p "$out"
python3 -m venv .venv-gpu
. .venv-gpu/bin/activate
pip install --quiet --upgrade pip
# A CUDA build of PyTorch: whatever the device machine's pip resolves (it may already be installed).
python -c "import torch" 2>/dev/null || pip install --quiet torch
pip install --quiet -e '.[measure]'
nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$out/gpu.txt"
python -c "import torch; print('cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0))" | tee -a "$out/gpu.txt"
# The device: an H100 or H200 (pick the catalog entry that matches nvidia-smi).
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  *H200*) accel=h200 ;; *H100*PCIe*) accel=h100-pcie ;; *H100*) accel=h100-sxm ;; *A100*80*) accel=a100-sxm-80gb ;;
  *A100*) accel=a100-sxm-40gb ;; *L40S*) accel=l40s ;; *L4*) accel=l4 ;; *) accel=h100-sxm ;;
esac
cat > "$out/gpu-llama.yaml" <<YAML
name: gpu-check
workload:
  model: {layers: 8, hidden_size: 2048, attention_heads: 16, kv_heads: 8, ffn_size: 5632, vocab_size: 32000}
  tokens: 1B
  sequence_length: 2048
supply: {accelerator: $accel, count: 1, storage: {write_bandwidth: 2 GB/s}}
strategy: {micro_batch_size: 8, optimizer: adam-mixed}
assumptions: {single_accelerator_mfu: 0.4, scaling_efficiency: 1.0, activation_model: saved_tensor_factor}
YAML
botec estimate "$out/gpu-llama.yaml" -f markdown > "$out/estimate.md"
botec measure "$out/gpu-llama.yaml" --steps 20 --warmup 3 --max-parameters 2B -o "$out/measurement.json" | tee "$out/measure.txt"
botec calibrate "$out/gpu-llama.yaml" "$out/measurement.json" -o "$out/calibrated.yaml" | tee "$out/calibrate.txt"
botec measure "$out/gpu-llama.yaml" --fake | tee "$out/fake.txt"
