"""Defaults derived through botec's own models from measurements of their own kind, with their derivations.

``FLAT_MFU``, the single-accelerator model-FLOPs utilization the flat compute model runs at when a contract states
none (``compute_model: flat``, or a bare parameter count whose layers botec cannot build), is not a published
run's MFU: it is what the op-level model (:mod:`botec.training.ops`) gives on a stated reference shape from the
families' measured kernel figures (``catalog/efficiency.yaml``: GEMM e_mm and t0, the memory-bound share e_mem,
the fused attention's forward + backward share), so that the flat model reproduces the op-level model's compute
time there:

    MFU = model_flops_per_token × global_tokens_per_step / (peak_flops_per_s × compute_seconds_per_step)

on one accelerator, one micro-batch per step (the optimizer step included: a stated utilization covers it, see
:func:`botec.training.compute.step.optimizer_step_seconds`). The reference shape (:data:`FLAT_MFU_REFERENCE`) is
Llama 3.1 8B at sequence 8,192 and micro-batch 2 on the default NVIDIA stack (torchtitan: eager element-wise ops,
the unfused loss, SDPA's FlashAttention-2), BF16, no recomputation; only its compute is used (its memory does not
fit one card, which does not enter the MFU). The value is the H100's; the range is the lowest and the highest MFU
of the A100, H100 and B200 with every kernel figure of the family at its low end (e_mm, e_mem, e_attn low, t0
high) or its high end. tests/test_flat_mfu_default.py recomputes all of it through :func:`botec.api.estimate`
(the derivation runs there: the contract knows no estimate) and requires the stored figures to agree within 0.005.
"""

from __future__ import annotations

from botec.contract.stated import default_range

__all__ = ["FLAT_MFU", "FLAT_MFU_REFERENCE", "FLAT_MFU_REFERENCE_ACCELERATOR", "FLAT_MFU_RANGE_ACCELERATORS",
           "FLEET_FAILURE_RATE_SOURCE"]

FLAT_MFU_REFERENCE = {
    "workload": {"model": "llama-3.1-8b", "tokens": "1B", "sequence_length": 8192},
    "supply": {"accelerator": "h100-sxm", "count": 1},
    "strategy": {"micro_batch_size": 2, "recompute": "none", "precision": "bf16"},
}
"""The reference contract the flat MFU is derived on (the accelerator is replaced per family)."""

FLAT_MFU_REFERENCE_ACCELERATOR = "h100-sxm"
FLAT_MFU_RANGE_ACCELERATORS = ("a100-sxm-80gb", "h100-sxm", "b200")
"""The accelerators whose families' figure ranges bound the range: the datacenter families with operator tables."""

FLAT_MFU = default_range(
    0.52, 0.33, 0.74,
    "the op-level model on a reference shape, not a published run: Llama 3.1 8B, sequence 8,192, micro-batch 2, "
    "one accelerator, one micro-batch per step, BF16, no recomputation, the default NVIDIA stack (torchtitan: eager "
    "element-wise ops, unfused loss, SDPA FlashAttention-2); MFU = model FLOPs per step / (peak × compute seconds "
    "per step, the optimizer included) from the family's measured kernel figures (catalog/efficiency.yaml: GEMM "
    "e_mm and t0, e_mem, the fused attention's forward + backward): 0.52 on an H100 (hopper); the range: the "
    "lowest and highest over the A100, H100 and B200 with each family's figures at their low or high ends (B200 "
    "low 0.33, A100 high 0.74); botec.contract.defaults, recomputed by tests/test_flat_mfu_default.py")



# The default failure rate λ (assumptions.failure_rate, per accelerator-hour) from fleet statistics of two clusters:
# Kokolis et al. 2024, "Revisiting Reliability in Large-Scale Machine Learning Research Clusters" (arXiv:2410.21680,
# HPCA 2025): 11 months, 4 M jobs, over 150 M A100 GPU-hours on Meta's RSC-1 and RSC-2. λ = r_f / (8 GPUs × 24 h),
# r_f the failures per node-day; the value pools the fleets by size (RSC-1 16k GPUs, RSC-2 8k GPUs, the same 11
# months): (2 × 6.50 + 2.34) / 3 = 5.11 per 1,000 node-days / 192 GPU-hours ≈ 2.7e-5. The low end is RSC-2's 1.2e-5;
# the high end the rate a 1,024-GPU job met on RSC-1 (MTTF 7.9 h: 1 / (7.9 × 1,024) = 1.2e-4), 3.6 × that fleet's
# r_f (8-GPU jobs: 47.7 days, 3.2 ×): large jobs meet more than the fleet rate. The figures are as three independent
# transcriptions of the paper give them, and its own projection reproduces r_f (MTTF 1.8 h at 16,384 GPUs = 24 h /
# (2,048 nodes × 6.50e-3)); the paper's text could not be read here, so neither the figures nor their sections were
# checked against it.
FLEET_FAILURE_RATE_SOURCE = (
    "fleet statistics, not a training run: Kokolis et al. 2024 (arXiv:2410.21680), 11 months of Meta's A100 "
    "clusters RSC-1 (16k GPUs) and RSC-2 (8k): 6.50 and 2.34 failures per 1,000 node-days = 3.4e-5 and 1.2e-5 per "
    "GPU-hour, pooled by size 2.7e-5; high: RSC-1's 1,024-GPU jobs, MTTF 7.9 h = 1.2e-4; figures from three "
    "transcriptions, consistent with the paper's 1.8 h MTTF at 16,384 GPUs; its text, and where in it, not read")
