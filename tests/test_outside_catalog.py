"""Devices outside the catalog, TPU v3, and a stated HFU in the lesson's (given-utilization) step-time method.

Every expected number is derived by hand from 6·N·D (Kaplan et al. 2020), the stated utilization and the
peak: T = F / (N × peak × utilization), accelerator-hours = N × T / 3600.
"""

from __future__ import annotations

import copy

import pytest

from botec.api import estimate
from botec.errors import ContractError

INLINE = {"name": "a device outside the catalog", "peak_flops_per_s": "200 TFLOP/s", "memory": "80 GB"}


def contract(accelerator=INLINE, count=8, model=None, tokens="1B", assumptions=None, strategy=None, **supply):
    return {
        "workload": {"model": model or {"name": "7B", "parameters": "7B", "layers": 32, "hidden_size": 4096},
                     "tokens": tokens, "sequence_length": 2048},
        "supply": {"accelerator": copy.deepcopy(accelerator), "count": count, **supply},
        "strategy": {"micro_batch_size": 1, **(strategy or {})},
        "assumptions": assumptions or {},
    }


# --- 1. a device outside the catalog, no layout, no network -------------------------------------------------------

def test_an_inline_device_without_a_network_gives_flops_hours_and_run_time():
    """Before: `supply.cluster.intra_node.bandwidth: needed for step_seconds` (the components default needs the
    data-parallel link). Now the lesson's method gives the run time; only the collectives' times are absent."""
    result = estimate(contract())
    q = result.quantities
    assert result.inputs.choices["step_time"] == "efficiency"
    flops = 6 * 7e9 * 1e9                                     # 6·N·D = 4.2e19 FLOP
    assert q["training_flops"].value == pytest.approx(flops)
    run = flops / (8 * 200e12 * 0.30 * 0.80)                  # the lesson's MFU 0.30 × scaling 0.80: 109,375 s
    assert q["run_seconds"].value == pytest.approx(run) == pytest.approx(109_375)
    assert q["accelerator_hours"].value == pytest.approx(8 * run / 3600)  # 243.06 accelerator-hours
    for name in ("gradient_all_reduce_seconds", "exposed_communication_seconds"):
        assert name not in q
        assert result.inputs.needed_fields(name, q) == ["supply.cluster.intra_node.bandwidth"]
    assert "collective_bytes_sent_per_step" in q              # the bytes need no link
    from botec.report import methods

    assert "supply.network or supply.cluster" in methods(result)[0]


def test_a_stated_components_model_still_names_the_link():
    with pytest.raises(ContractError) as error:
        estimate(contract(assumptions={"step_time_model": "components"}))
    assert error.value.field == "supply.cluster.intra_node.bandwidth"
    assert "\n" not in str(error.value)


def test_one_accelerator_needs_no_network_and_keeps_the_components_model():
    result = estimate(contract(count=1))
    q = result.quantities
    assert result.inputs.choices["step_time"] == "components"
    # a bare count: compute at the flat model's default MFU 0.52, no communication, no optimizer time; ⌈1e9 / 2,048⌉
    # = 488,282 steps of one 2,048-token sequence, the last one partial: 1,000,001,536 tokens' work
    run = 488_282 * 2048 * 6 * 7e9 / (200e12 * 0.52)
    assert q["run_seconds"].value == pytest.approx(run) == pytest.approx(403_846.8, rel=1e-6)
    assert q["accelerator_hours"].value == pytest.approx(run / 3600)


def test_a_catalog_model_on_a_device_without_memory_bandwidth():
    """Before: `step_seconds needs memory_bandwidth_bytes_per_s, which the contract does not state` (the op-level
    default runs memory-bound ops at the memory bandwidth). Now the flat model runs at its default MFU, and the
    op-level model, asked for, names the field."""
    network = {"bandwidth": "25 GB/s"}
    result = estimate(contract(model="llama-2-7b", network=network))
    choices, q = result.inputs.choices, result.quantities
    assert choices == {"step_time": "components", "activations": "korthikanti", "compute": "model_flops"}
    # one micro-batch of 2,048 tokens at the flat default MFU 0.52 of 200 TFLOP/s
    assert q["microbatch_compute_seconds"].value == pytest.approx(
        q["model_flops_per_token"].value * 2048 / (200e12 * 0.52))
    assert result.inputs.missing["memory_bandwidth_bytes_per_s"].field == "supply.accelerator.memory_bandwidth"
    with pytest.raises(ContractError) as error:
        estimate(contract(model="llama-2-7b", network=network, assumptions={"compute_model": "op_level"}))
    assert error.value.field == "supply.accelerator.memory_bandwidth"
    with_bandwidth = dict(INLINE, memory_bandwidth="2 TB/s")
    assert estimate(contract(with_bandwidth, model="llama-2-7b", network=network)).inputs.choices["compute"] == \
        "op_level"


# --- 2. TPU v3 --------------------------------------------------------------------------------------------------

def test_tpu_v3_catalog_figures():
    """Google Cloud TPU v3 page: 123 TFLOP/s bf16 per chip, HBM2 32 GiB and 900 GBps, 340 TB/s all-reduce per
    1,024-chip pod."""
    from botec.catalog import accelerators
    from botec.catalog.efficiency import families

    device = accelerators()["tpu-v3"]
    assert device.peak_flops_per_s == {"bf16": 123e12}
    assert device.memory_bytes == 32 * 2**30
    assert device.memory_bandwidth_bytes_per_s == 900e9
    assert device.link_bandwidth_bytes_per_s == pytest.approx(340e12 / 1024, rel=0.001)
    assert all(figure.basis == "assumed" for figure in families()["tpu-v3"].figures.values())


CHINCHILLA = {"name": "Chinchilla 70B", "parameters": "70B", "layers": 80, "hidden_size": 8192}


def test_chinchilla_on_tpu_v3_without_a_layout():
    """Hoffmann et al. 2022: 70B parameters, 1.4T tokens. 6·N·D = 5.88e23 FLOP; at a stated MFU of 0.40 on
    1,024 chips: T = 5.88e23 / (1,024 × 123e12 × 0.40) = 1.167e7 s (135 days), 3.32M chip-hours."""
    tpu = contract("tpu-v3", count=1024, model=CHINCHILLA, tokens="1.4T", assumptions={"end_to_end_mfu": 0.40})
    q = estimate(tpu).quantities
    assert q["training_flops"].value == pytest.approx(5.88e23)
    run = 5.88e23 / (1024 * 123e12 * 0.40)
    assert q["run_seconds"].value == pytest.approx(run) == pytest.approx(1.16711e7, rel=1e-5)
    assert q["accelerator_hours"].value == pytest.approx(1024 * run / 3600) == pytest.approx(3.31978e6, rel=1e-5)
    # no utilization stated: the components default (the chip's ICI from the catalog), compute at the flat default
    # MFU 0.52, so the run is at least the compute alone, 5.88e23 / (1,024 × 123e12 × 0.52) = 8.98e6 s
    q = estimate(contract("tpu-v3", count=1024, model=CHINCHILLA, tokens="1.4T")).quantities
    assert q["training_flops"].value == pytest.approx(5.88e23)
    compute = 5.88e23 / (1024 * 123e12 * 0.52)
    assert compute <= q["run_seconds"].value < 2 * compute


def test_gopher_on_4096_tpu_v3_chips():
    """Gopher 280B on 300B tokens, 4,096 TPU v3 chips at 32.5 % MFU (Chowdhery et al. 2022, Table 3):
    6 × 280e9 × 300e9 = 5.04e23 FLOP; T = 5.04e23 / (4,096 × 123e12 × 0.325) = 3.078e6 s (35.6 days)."""
    gopher = {"name": "Gopher 280B", "parameters": "280B", "layers": 80, "hidden_size": 16384}
    q = estimate(contract("tpu-v3", count=4096, model=gopher, tokens="300B",
                          assumptions={"end_to_end_mfu": 0.325})).quantities
    assert q["training_flops"].value == pytest.approx(5.04e23)
    assert q["run_seconds"].value == pytest.approx(5.04e23 / (4096 * 123e12 * 0.325)) == \
        pytest.approx(3.07810e6, rel=1e-5)


# --- 3. a stated HFU in the given-utilization method -------------------------------------------------------------

def tpu_hfu(assumptions, recompute="none"):
    return contract("tpu-v3", count=1024, model=CHINCHILLA, tokens="1.4T", assumptions=assumptions,
                    strategy={"recompute": recompute})


def test_an_end_to_end_hfu_with_full_recomputation():
    """Full recomputation repeats the forward, 2·N per token: executed FLOPs 8·N·D = 7.84e23. At HFU 0.5:
    T = 7.84e23 / (1,024 × 123e12 × 0.5) = 1.2449e7 s; MFU = 6/8 × 0.5 = 0.375."""
    result = estimate(tpu_hfu({"end_to_end_hfu": 0.5}, recompute="full"))
    q = result.quantities
    assert result.inputs.choices["step_time"] == "efficiency_hfu"
    assert q["hardware_training_flops"].value == pytest.approx(8 * 70e9 * 1.4e12)
    run = 8 * 70e9 * 1.4e12 / (1024 * 123e12 * 0.5)
    assert q["run_seconds"].value == pytest.approx(run) == pytest.approx(1.24492e7, rel=1e-5)
    assert q["hardware_flops_utilization"].value == pytest.approx(0.5)
    assert q["end_to_end_mfu"].value == pytest.approx(0.375)
    assert q["training_flops"].value == pytest.approx(5.88e23)     # the model's work is unchanged
    from botec.report.markdown import render

    text = render(result)
    assert "end_to_end_mfu" in text and "hardware_flops_utilization" in text


def test_hfu_equals_mfu_without_recomputation():
    q = estimate(tpu_hfu({"end_to_end_hfu": 0.5})).quantities
    assert q["run_seconds"].value == pytest.approx(5.88e23 / (1024 * 123e12 * 0.5))
    assert q["end_to_end_mfu"].value == pytest.approx(0.5) == pytest.approx(q["hardware_flops_utilization"].value)


def test_a_single_accelerator_hfu_times_the_scaling_efficiency():
    """HFU 0.5 × scaling 0.9 = 0.45 end to end; with selective recomputation under flash attention nothing is
    recomputed, so T = 5.88e23 / (1,024 × 123e12 × 0.45)."""
    q = estimate(tpu_hfu({"single_accelerator_hfu": 0.5, "scaling_efficiency": 0.9})).quantities
    assert q["end_to_end_hfu"].value == pytest.approx(0.45)
    assert q["run_seconds"].value == pytest.approx(5.88e23 / (1024 * 123e12 * 0.45))


@pytest.mark.parametrize("assumptions, field, named", [
    ({"end_to_end_mfu": 0.4, "end_to_end_hfu": 0.5}, "assumptions.end_to_end_hfu", ("end_to_end_mfu", "end_to_end_hfu")),
    ({"end_to_end_hfu": 0.5, "single_accelerator_mfu": 0.4}, "assumptions.end_to_end_hfu", ("single_accelerator_mfu",)),
    ({"end_to_end_mfu": 0.5, "single_accelerator_hfu": 0.4}, "assumptions.end_to_end_mfu", ("single_accelerator_hfu",)),
    ({"single_accelerator_mfu": 0.4, "single_accelerator_hfu": 0.5}, "assumptions.single_accelerator_hfu",
     ("single_accelerator_mfu",)),
    ({"end_to_end_hfu": 0.5, "step_time_model": "components"}, "assumptions.end_to_end_hfu", ("components",)),
])
def test_mfu_and_hfu_together_are_refused_in_one_line(assumptions, field, named):
    with pytest.raises(ContractError) as error:
        estimate(tpu_hfu(assumptions))
    assert error.value.field == field
    assert "\n" not in str(error.value)
    for name in named:
        assert name in str(error.value)
