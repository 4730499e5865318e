"""The accelerator catalog, the node presets and the optimizer presets: data with sources, published figures."""

from __future__ import annotations

import json
import re

import pytest

from botec.catalog import FAMILIES, accelerators, node_presets, optimizer_presets

REQUIRED = ["v100-sxm2", "a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h800", "h200",
            "b200", "mi300x", "l4", "l40s", "tpu-v4", "tpu-v5e", "tpu-v5p"]
FIGURES = ("peak_flops_per_s", "memory", "memory_bandwidth", "link_bandwidth", "tdp")
_DATED = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")

T, GiB = 1e12, 2.0**30


def test_required_devices_are_present():
    assert set(REQUIRED) <= set(accelerators())


@pytest.mark.parametrize("key", sorted(accelerators()))
def test_every_figure_has_a_source_and_a_date(key):
    device = accelerators()[key]
    assert device.source and _DATED.match(device.date), device
    for figure in FIGURES:
        text = device.source_of(figure)
        assert re.search(r"\(\d{4}-\d{2}(-\d{2})?\)$", text), (figure, text)
    for figure, entry in device.figure_sources.items():
        assert figure in FIGURES and entry.get("source") and _DATED.match(str(entry.get("date"))), (figure, entry)
    assert device.family in FAMILIES
    assert device.peak_flops_per_s and ("bf16" in device.peak_flops_per_s or "fp16" in device.peak_flops_per_s)
    assert set(device.peak_flops_per_s) <= {"bf16", "fp16", "fp8", "fp4", "int8"}
    assert device.memory_bytes > 0 and device.memory_bandwidth_bytes_per_s > 0
    assert device.link_bandwidth_bytes_per_s > 0
    # TDP is published for every device but Google's TPUs, whose notes say so.
    if device.tdp_watts is None:
        assert key.startswith("tpu") and "publish" in (device.notes or "").lower()


@pytest.mark.parametrize("key", sorted(accelerators()))
def test_price_ranges_are_ordered_and_sourced(key):
    device = accelerators()[key]
    price = device.price_per_hour
    if price is None:  # no public figure found: the notes must say so
        assert "price" in (device.notes or "").lower(), key
        return
    assert 0 < price.low <= price.typical <= price.high < 100, price
    assert price.source and re.match(r"^\d{4}-\d{2}$", price.date), price
    assert price.url is None or price.url.startswith("https://")


def test_family_of_each_generation():
    families = {key: d.family for key, d in accelerators().items()}
    assert families["v100-sxm2"] == "volta"
    assert {families[k] for k in ("a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb")} == {"ampere"}
    assert {families[k] for k in ("h100-sxm", "h100-pcie", "h800", "h200")} == {"hopper"}
    assert {families[k] for k in ("l4", "l40s")} == {"ada"}
    assert (families["b200"], families["mi300x"]) == ("blackwell", "cdna3")
    assert all(families[k] == k for k in ("tpu-v4", "tpu-v5e", "tpu-v5p"))


# The hardware rows of the public validation set (shared/validation/public-cases.yaml, ids hw-*), copied here
# with their case ids so the test does not need that file: dense peaks, memory, memory bandwidth, link per
# direction (the set quotes NVLink/ICI bidirectional) and TDP must match exactly.
PUBLISHED = [
    # case id            key               peaks (dense, per precision)                memory  GB/s  link/dir  TDP
    ("hw-a100-sxm-80gb", "a100-sxm-80gb", {"bf16": 312 * T, "int8": 624 * T}, 80e9, 2039, 600 / 2, 400),
    ("hw-a100-pcie-80gb", "a100-pcie-80gb", {"bf16": 312 * T}, 80e9, 1935, None, 300),
    ("hw-a100-sxm-40gb", "a100-sxm-40gb", {"bf16": 312 * T}, 40e9, 1555, 600 / 2, 400),
    ("hw-h100-sxm", "h100-sxm", {"bf16": 989.4 * T, "fp8": 1978.9 * T}, 80e9, 3350, 900 / 2, 700),
    ("hw-h200-sxm", "h200", {"bf16": 989.4 * T, "fp8": 1978.9 * T}, 141e9, 4800, 900 / 2, 700),
    ("hw-h800-sxm", "h800", {"bf16": 989 * T, "fp8": 1979 * T}, 80e9, 3350, 400 / 2, 700),
    ("hw-b200-hgx", "b200", {"bf16": 2250 * T, "fp8": 4500 * T, "fp4": 9000 * T}, 180e9, 8000, 1800 / 2, 1000),
    ("hw-mi300x", "mi300x", {"bf16": 1307.4 * T, "fp8": 2614.9 * T}, 192e9, 5300, None, 750),
    ("hw-l4", "l4", {"fp16": 121 * T}, 24e9, 300, None, 72),
    ("hw-v100-sxm2", "v100-sxm2", {"fp16": 125 * T}, 32e9, 900, None, 300),
    ("hw-tpu-v4", "tpu-v4", {"bf16": 275 * T, "int8": 275 * T}, 32 * GiB, 1200, None, None),
    ("hw-tpu-v5e", "tpu-v5e", {"bf16": 197 * T, "int8": 393 * T}, 16e9, 819, 400 / 2, None),
    ("hw-tpu-v5p", "tpu-v5p", {"bf16": 459 * T, "int8": 918 * T}, 95e9, 2765, 4800 / 8, None),  # ICI 4800 Gb/s
]


@pytest.mark.parametrize("case, key, peaks, memory, bandwidth_gbs, link_gbs, tdp", PUBLISHED,
                         ids=[row[0] for row in PUBLISHED])
def test_published_figures(case, key, peaks, memory, bandwidth_gbs, link_gbs, tdp):
    device = accelerators()[key]
    for precision, value in peaks.items():
        assert device.peak_flops_per_s[precision] == pytest.approx(value), (case, precision)
    assert device.memory_bytes == pytest.approx(memory), case
    assert device.memory_bandwidth_bytes_per_s == pytest.approx(bandwidth_gbs * 1e9), case
    if link_gbs is not None:
        assert device.link_bandwidth_bytes_per_s == pytest.approx(link_gbs * 1e9), case
    assert device.tdp_watts == (None if tdp is None else pytest.approx(tdp)), case


def test_no_fp8_where_the_hardware_has_none():
    # Ampere and Volta have no FP8; Volta has no BF16 either (only its FP16 tensor peak is listed).
    for key in ("a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "v100-sxm2", "tpu-v4", "tpu-v5e"):
        assert "fp8" not in accelerators()[key].peak_flops_per_s, key
    assert set(accelerators()["v100-sxm2"].peak_flops_per_s) == {"fp16"}


def test_int8_and_fp4_peaks():
    devices = accelerators()
    assert devices["h100-sxm"].peak_flops_per_s["int8"] == pytest.approx(1978.9 * T)   # whitepaper, dense
    assert devices["l40s"].peak_flops_per_s["int8"] == pytest.approx(733 * T)          # datasheet: 733 | 1,466
    assert devices["b200"].peak_flops_per_s["int8"] == pytest.approx(4.5e15)           # HGX page: 9 POPS sparse
    assert devices["b200"].peak_flops_per_s["fp4"] == pytest.approx(9e15)              # 18 PFLOPS sparse
    assert [k for k, d in devices.items() if "fp4" in d.peak_flops_per_s] == ["b200"]


def test_integer_peaks_parse_as_operations_per_second():
    from botec.catalog import _peak

    assert _peak("624 TOP/s") == pytest.approx(624e12)
    assert _peak("4.5 POPS") == pytest.approx(4.5e15)
    assert _peak("989.4 TFLOP/s") == pytest.approx(989.4e12)


def test_nvlink_is_stored_per_direction():
    # NVIDIA quotes NVLink 4 as 900 GB/s bidirectional: 450 GB/s each way; the H800's export NVLink 400 -> 200.
    assert accelerators()["h100-sxm"].link_bandwidth_bytes_per_s == pytest.approx(450e9)
    assert accelerators()["a100-sxm-80gb"].link_bandwidth_bytes_per_s == pytest.approx(300e9)
    assert accelerators()["h800"].link_bandwidth_bytes_per_s == pytest.approx(200e9)


# ---------------------------------------------------------------------------------------------------- nodes

@pytest.mark.parametrize("key", sorted(node_presets()))
def test_node_presets_are_consistent(key):
    node = node_presets()[key]
    device = accelerators()[node.accelerator]
    assert node.intra_node_bytes_per_s == pytest.approx(device.link_bandwidth_bytes_per_s), key
    assert node.source and _DATED.match(node.date)
    if node.nics_per_node is not None or node.nic_bytes_per_s is not None:
        # NIC count × NIC rate shared by the node's accelerators is the inter-node bandwidth per accelerator.
        assert node.nics_per_node * node.nic_bytes_per_s / node.accelerators_per_node == \
            pytest.approx(node.inter_node_bytes_per_s), key
    assert node.nvlink_domain is not None and node.nvlink_domain >= 1
    for tier in ("intra_node", "inter_node"):
        achieved = getattr(node, f"{tier}_achieved_bytes_per_s")
        source = getattr(node, f"{tier}_achieved_source")
        assert (achieved is None) == (source is None), (key, tier)
        if achieved is not None:
            assert 0 < achieved <= getattr(node, f"{tier}_bytes_per_s"), (key, tier)


def test_every_gpu_preset_has_its_nics_and_nvlink_domain():
    for key, node in node_presets().items():
        if not node.accelerator.startswith("tpu"):
            assert node.nics_per_node and node.nic_bytes_per_s and node.nvlink_domain == 8, key


def test_published_achieved_bandwidths():
    nodes = node_presets()
    # net-a100-nvlink-allreduce: ~230 GB/s all-reduce busbw on 8 x A100 (nccl-tests #149)
    assert nodes["dgx-a100"].intra_node_achieved_bytes_per_s == pytest.approx(230e9)
    # net-h100-nvlink-allreduce: ~370 GB/s ring busbw on 8 x H100 (nccl-tests #212)
    assert nodes["dgx-h100"].intra_node_achieved_bytes_per_s == pytest.approx(370e9)
    assert "#212" in nodes["dgx-h100"].intra_node_achieved_source
    # NDR 400 Gb/s: 46-48 GB/s per NIC (nccl-tests #290): about 0.9 of the line rate
    assert nodes["dgx-h100"].inter_node_achieved_bytes_per_s / nodes["dgx-h100"].inter_node_bytes_per_s == \
        pytest.approx(0.92)


def test_deepseek_v3_node():
    # DeepSeek-V3 (arXiv:2412.19437 §3.1): 8 x H800 per node over NVLink/NVSwitch, 400 Gb/s IB per GPU.
    node = node_presets()["hgx-h800"]
    assert (node.accelerator, node.accelerators_per_node, node.nvlink_domain) == ("h800", 8, 8)
    assert node.intra_node_bytes_per_s == pytest.approx(200e9)
    assert (node.nics_per_node, node.nic_bytes_per_s, node.inter_node_bytes_per_s) == (8, pytest.approx(50e9),
                                                                                        pytest.approx(50e9))


# ---------------------------------------------------------------------------------------------------- use

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

    quantities = {q["name"]: q for q in json.loads(out)["quantities"]}
    peak = quantities["peak_flops_per_s"]
    assert peak["value"] == pytest.approx(989.4e12)
    assert peak["source"]["provenance"] == "catalog"
    assert "H100" in peak["source"]["note"]
    assert quantities["device_memory_bytes"]["value"] == pytest.approx(80e9)


def test_bf16_on_a_v100_is_refused_by_name(cli):
    from conftest import LESSON

    code, out, err = cli("estimate", str(LESSON), "--set", "supply.accelerator=v100-sxm2")
    assert code != 0
    assert "strategy.precision" in err and "bf16" in err and "fp16" in err, err
    code, out, err = cli("estimate", str(LESSON), "--set", "supply.accelerator=v100-sxm2",
                         "--set", "strategy.precision=fp16", "-f", "json")
    assert code == 0, err
    peak = {q["name"]: q for q in json.loads(out)["quantities"]}["peak_flops_per_s"]
    assert peak["value"] == pytest.approx(125e12)


def test_catalog_listing_shows_the_new_fields(cli):
    code, out, err = cli("catalog", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    devices = {d["key"]: d for d in payload["accelerators"]}
    assert devices["h100-sxm"]["family"] == "hopper"
    assert devices["h100-sxm"]["price_per_hour"]["low"] <= devices["h100-sxm"]["price_per_hour"]["high"]
    assert devices["v100-sxm2"]["price_per_hour"] is None
    nodes = {n["key"]: n for n in payload["nodes"]}
    assert nodes["dgx-h100"]["nics_per_node"] == 8 and nodes["dgx-h100"]["nvlink_domain"] == 8
    assert nodes["dgx-h100"]["intra_node_achieved_bytes_per_s"] == pytest.approx(370e9)
    code, out, err = cli("catalog")
    assert code == 0, err
    for text in ("hopper", "INT8", "8 × 50", "370", "2026-11", "125 fp16"):
        assert text in out, text
    code, out, err = cli("catalog", "-f", "markdown")
    assert code == 0 and "FP4 TFLOP/s" in out and "NVLink domain" in out and "nccl-tests" in out
