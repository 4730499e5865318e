"""The accelerator catalog and the optimizer presets: data with sources, published figures."""

from __future__ import annotations

import re

import pytest

from botec.catalog import accelerators, optimizer_presets

REQUIRED = ["a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi300x", "l4", "l40s",
            "tpu-v5e", "tpu-v5p"]


def test_required_devices_are_present():
    assert set(REQUIRED) <= set(accelerators())


@pytest.mark.parametrize("key", REQUIRED)
def test_every_figure_has_a_source_and_a_date(key):
    device = accelerators()[key]
    assert device.source and re.match(r"^\d{4}-\d{2}", device.date), device
    for figure in ("peak_flops_per_s", "memory", "memory_bandwidth", "link_bandwidth", "tdp"):
        text = device.source_of(figure)
        assert re.search(r"\(\d{4}-\d{2}(-\d{2})?\)$", text), (figure, text)
    assert "bf16" in device.peak_flops_per_s
    assert device.memory_bytes > 0 and device.memory_bandwidth_bytes_per_s > 0
    assert device.link_bandwidth_bytes_per_s > 0
    # TDP is published for every device but Google's TPUs, whose notes say so.
    if device.tdp_watts is None:
        assert key.startswith("tpu") and "publish" in (device.notes or "").lower()


@pytest.mark.parametrize("key, bf16, fp8, memory, tdp", [
    ("a100-sxm-40gb", 312e12, None, 40e9, 400),        # A100 datasheet: 312 TFLOPS BF16 dense
    ("a100-sxm-80gb", 312e12, None, 80e9, 400),
    ("h100-sxm", 989.4e12, 1978.9e12, 80e9, 700),      # Hopper whitepaper: 989.4 / 1,978.9 dense
    ("h200", 989.4e12, 1978.9e12, 141e9, 700),
    ("mi300x", 1307.4e12, 2614.9e12, 192e9, 750),      # AMD data sheet
])
def test_published_figures(key, bf16, fp8, memory, tdp):
    device = accelerators()[key]
    assert device.peak_flops_per_s["bf16"] == pytest.approx(bf16)
    assert device.peak_flops_per_s.get("fp8") == (pytest.approx(fp8) if fp8 else None)
    assert device.memory_bytes == pytest.approx(memory)
    assert device.tdp_watts == pytest.approx(tdp)


def test_nvlink_is_stored_per_direction():
    # NVIDIA quotes NVLink 4 as 900 GB/s bidirectional: 450 GB/s each way.
    assert accelerators()["h100-sxm"].link_bandwidth_bytes_per_s == pytest.approx(450e9)
    assert accelerators()["a100-sxm-80gb"].link_bandwidth_bytes_per_s == pytest.approx(300e9)


@pytest.mark.parametrize("key, training, checkpoint", [
    ("adam-mixed", 16, 14),    # lesson 000: 2 + 2 + 4 + 4 + 4; checkpoint 2 + 4 + 4 + 4
    ("adam-bf16", 8, 6),       # 2 + 2 + 2 + 2
    ("adam-fp32", 16, 12),     # 4 + 4 + 4 + 4
    ("sgd-momentum", 12, 8),   # 4 + 4 + 4
    ("adam-8bit", 10, 8),      # 2 + 2 + 4 + 1 + 1
])
def test_optimizer_presets(key, training, checkpoint):
    preset = optimizer_presets()[key]
    assert preset.state_bytes_per_parameter == training
    assert preset.state_bytes_per_parameter - preset.gradient_bytes_per_parameter == checkpoint


def test_catalog_accelerator_in_a_contract(cli):
    from conftest import LESSON

    code, out, err = cli("estimate", str(LESSON), "--set", "supply.accelerator=h100-sxm", "-f", "json")
    assert code == 0, err
    import json

    quantities = {q["name"]: q for q in json.loads(out)["quantities"]}
    peak = quantities["peak_flops_per_s"]
    assert peak["value"] == pytest.approx(989.4e12)
    assert peak["source"]["provenance"] == "catalog"
    assert "H100" in peak["source"]["note"]
    assert quantities["device_memory_bytes"]["value"] == pytest.approx(80e9)
