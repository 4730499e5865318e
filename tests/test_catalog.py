"""The accelerator catalog, the node presets and the optimizer presets: data with sources, published figures."""

from __future__ import annotations

import json
import re

import pytest

from botec.catalog import FAMILIES, accelerators, node_presets, optimizer_presets

REQUIRED = ["v100-sxm2", "a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h800", "h200",
            "b200", "mi300x", "l4", "l40s", "tpu-v4", "tpu-v5e", "tpu-v5p",
            "rtx-3090", "rtx-4090", "rtx-5090", "rtx-6000-ada", "a10g", "t4"]
FIGURES = ("peak_flops_per_s", "memory", "memory_bandwidth", "link_bandwidth", "host_link_bandwidth", "tdp")
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
    assert {families[k] for k in ("l4", "l40s", "rtx-6000-ada")} == {"ada"}
    assert (families["b200"], families["mi300x"]) == ("blackwell", "cdna3")
    # GeForce-class cards (FP32-accumulate tensor rate halved) have their own curves; the T4 is Turing.
    assert {k: families[k] for k in ("rtx-3090", "a10g", "rtx-4090", "rtx-5090", "t4")} == {
        "rtx-3090": "ampere-geforce", "a10g": "ampere-geforce", "rtx-4090": "ada-geforce",
        "rtx-5090": "blackwell-geforce", "t4": "turing"}
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
    for key in ("a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "v100-sxm2", "tpu-v4", "tpu-v5e", "rtx-3090",
                "a10g", "t4"):
        assert "fp8" not in accelerators()[key].peak_flops_per_s, key
    assert set(accelerators()["v100-sxm2"].peak_flops_per_s) == {"fp16"}
    assert set(accelerators()["t4"].peak_flops_per_s) == {"fp16", "int8"}   # Turing: FP16 tensor cores, no BF16


def test_int8_and_fp4_peaks():
    devices = accelerators()
    assert devices["h100-sxm"].peak_flops_per_s["int8"] == pytest.approx(1978.9 * T)   # whitepaper, dense
    assert devices["l40s"].peak_flops_per_s["int8"] == pytest.approx(733 * T)          # datasheet: 733 | 1,466
    assert devices["b200"].peak_flops_per_s["int8"] == pytest.approx(4.5e15)           # HGX page: 9 POPS sparse
    assert devices["b200"].peak_flops_per_s["fp4"] == pytest.approx(9e15)              # 18 PFLOPS sparse
    # FP4 tensor cores: Blackwell only (datacenter B200, and the consumer RTX 5090's 1,676 dense, whitepaper App. A)
    assert [k for k, d in devices.items() if "fp4" in d.peak_flops_per_s] == ["b200", "rtx-5090"]


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
            # NVLink nodes share one 8-GPU domain; PCIe-only nodes (no NVLink) have a domain of 1.
            pcie_only = "pcie" in node.intra_node_link.lower()
            assert node.nics_per_node and node.nic_bytes_per_s and node.nvlink_domain == (1 if pcie_only else 8), key


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
    """The catalog holds each preset's bytes; the shared formula (not the catalog) adds them up."""
    from botec.formulas.weights import unsharded_state_bytes_per_parameter

    preset = optimizer_presets()[key]
    total = unsharded_state_bytes_per_parameter(preset.weight_bytes_per_parameter, preset.gradient_bytes_per_parameter,
                                                preset.master_weight_bytes_per_parameter,
                                                preset.optimizer_state_bytes_per_parameter)
    assert total == training
    assert total - preset.gradient_bytes_per_parameter == checkpoint
    assert not hasattr(preset, "state_bytes_per_parameter")   # data knows no formula


def test_catalog_listing_totals_the_optimizer_presets(cli):
    """The listing applies the formula to the catalog's bytes: the lesson's 16 B for Adam in mixed precision."""
    code, out, err = cli("catalog", "-f", "json")
    assert code == 0, err
    optimizers = {p["key"]: p for p in json.loads(out)["optimizers"]}
    assert optimizers["adam-mixed"]["state_bytes_per_parameter"] == 16
    assert optimizers["adam-8bit"]["state_bytes_per_parameter"] == 10


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


# ------------------------------------------------------------------------------------ consumer and workstation GPUs

# Each new card's figures as its vendor publishes them (dense; 16-bit and FP8 peaks with FP32 accumulation):
#   key, peaks, memory (B), memory bandwidth (GB/s), accelerator link and host link per direction (GB/s), host
#   link, TDP (W); the source is in the comment above each row.
CARDS = [
    # Ada GPU Architecture whitepaper, Appendix A Table 2 (RTX 4090): BF16/FP16 with FP32 accumulate 165.2/330.4,
    # FP8 with FP32 accumulate 330.3/660.6, INT8 660.6/1,321.2 TOPS; 24 GB GDDR6X, 1,008 GB/s; 450 W TGP.
    ("rtx-4090", {"bf16": 165.2 * T, "fp16": 165.2 * T, "fp8": 330.3 * T, "int8": 660.6 * T}, 24e9, 1008, 31.5,
     "PCIe Gen4 x16", 450),
    # GA102 whitepaper, Appendix A (RTX 3090): FP16/BF16 with FP32 accumulate 71/142, INT8 284/568; 936 GB/s; 350 W.
    ("rtx-3090", {"bf16": 71 * T, "fp16": 71 * T, "int8": 284 * T}, 24e9, 936, 31.5, "PCIe Gen4 x16", 350),
    # RTX Blackwell whitepaper v1.1, Appendix A (RTX 5090): BF16 209.5/419, FP8 (FP32 acc.) 419/838,
    # FP4 1,676/3,352 ("3,352 AI TOPS"), INT8 838/1,676; 32 GB GDDR7, 1,792 GB/s; 575 W; PCIe Gen5 x16.
    ("rtx-5090", {"bf16": 209.5 * T, "fp8": 419 * T, "fp4": 1676 * T, "int8": 838 * T}, 32e9, 1792, 63,
     "PCIe Gen5 x16", 575),
    # RTX 6000 Ada datasheet: "Tensor Performance 1,457 TFLOPS" (FP8, sparse) -> BF16 1,457 / 4 = 364.25 dense
    # (RTX PRO Blackwell whitepaper Table 4: 364 / 728); 48 GB GDDR6, 960 GB/s; 300 W; PCIe Gen4 x16.
    ("rtx-6000-ada", {"bf16": 1457 / 4 * T, "fp8": 1457 / 2 * T, "int8": 1457 / 2 * T}, 48e9, 960, 31.5,
     "PCIe Gen4 x16", 300),
    # A10G (AWS G5): 80 SMs x 512 FLOP/clock x 1.71 GHz = 70.0 TFLOP/s (derived; 69.47 measured, issue #126 of
    # zzc0721/torch-performance-test-data); 24 GB, 600 GB/s (the A10's GDDR6); 300 W nvidia-smi power limit.
    ("a10g", {"bf16": 80 * 512 * 1.71e9, "fp16": 80 * 512 * 1.71e9}, 24e9, 600, 31.5, "PCIe Gen4 x16", 300),
    # T4 datasheet: 65 TFLOPS mixed precision (FP16/FP32), 130 INT8 TOPS; 16 GB GDDR6, 320 GB/s; 70 W; PCIe Gen3 x16.
    ("t4", {"fp16": 65 * T, "int8": 130 * T}, 16e9, 320, 15.75, "PCIe Gen3 x16", 70),
]


@pytest.mark.parametrize("key, peaks, memory, bandwidth_gbs, link_gbs, host_link, tdp", CARDS,
                         ids=[row[0] for row in CARDS])
def test_consumer_and_workstation_cards(key, peaks, memory, bandwidth_gbs, link_gbs, host_link, tdp):
    device = accelerators()[key]
    for precision, value in peaks.items():
        assert device.peak_flops_per_s[precision] == pytest.approx(value, rel=1e-3), (key, precision)
    assert device.memory_bytes == pytest.approx(memory)
    assert device.memory_bandwidth_bytes_per_s == pytest.approx(bandwidth_gbs * 1e9)
    # No NVLink on any of them (the RTX 3090's bridge joins one pair only): the card-to-card link is PCIe.
    assert device.link_bandwidth_bytes_per_s == pytest.approx(link_gbs * 1e9)
    assert (device.host_link, device.host_link_bandwidth_bytes_per_s) == (host_link, pytest.approx(link_gbs * 1e9))
    assert device.tdp_watts == pytest.approx(tdp)


def test_geforce_peaks_are_the_fp32_accumulate_rate():
    # Ada whitepaper App. A: RTX 4090 "Peak FP16 Tensor TFLOPS with FP16 Accumulate 330.3" against 165.2 with FP32
    # accumulate; GA102 whitepaper: RTX 3090 142 against 71. Training accumulates in FP32: the catalog keeps half.
    devices = accelerators()
    assert devices["rtx-4090"].peak_flops_per_s["bf16"] == pytest.approx(330.3e12 / 2, rel=1e-3)
    assert devices["rtx-3090"].peak_flops_per_s["fp16"] == pytest.approx(142e12 / 2)
    # The RTX 6000 Ada (same AD102, workstation) and the L40S are not halved: twice the 4090 at fewer SMs' clocks.
    assert devices["rtx-6000-ada"].peak_flops_per_s["bf16"] / devices["rtx-4090"].peak_flops_per_s["bf16"] == \
        pytest.approx(364.25 / 165.2)


# PCIe x16, per direction, after 128b/130b encoding: lanes × GT/s × 128/130 / 8 bits (PCI-SIG base specifications).
PCIE_X16_BYTES_PER_S = {"Gen3": 16 * 8e9 * 128 / 130 / 8, "Gen4": 16 * 16e9 * 128 / 130 / 8,
                        "Gen5": 16 * 32e9 * 128 / 130 / 8}


def test_pcie_line_rates():
    assert PCIE_X16_BYTES_PER_S["Gen3"] == pytest.approx(15.75e9, rel=1e-3)
    assert PCIE_X16_BYTES_PER_S["Gen4"] == pytest.approx(31.5e9, rel=1e-3)
    assert PCIE_X16_BYTES_PER_S["Gen5"] == pytest.approx(63.0e9, rel=1e-3)


@pytest.mark.parametrize("key", sorted(accelerators()))
def test_every_host_link_is_a_positive_pcie_rate(key):
    device = accelerators()[key]
    if key.startswith("tpu"):   # TPUs state no host link
        assert device.host_link is None and device.host_link_bandwidth_bytes_per_s is None
        return
    assert device.host_link_bandwidth_bytes_per_s > 0
    generation = re.match(r"PCIe (Gen[345]) x16$", device.host_link).group(1)
    assert device.host_link_bandwidth_bytes_per_s == pytest.approx(PCIE_X16_BYTES_PER_S[generation], rel=1e-3)
    assert "PCI-SIG" in device.source_of("host_link_bandwidth")


def test_host_links_of_sxm_parts():
    # An SXM part's host link is its PCIe connection to the CPU: A100 Gen4, H100/H200/B200 Gen5, V100 Gen3.
    devices = accelerators()
    assert devices["v100-sxm2"].host_link_bandwidth_bytes_per_s == pytest.approx(15.75e9)
    assert devices["a100-sxm-80gb"].host_link_bandwidth_bytes_per_s == pytest.approx(31.5e9)
    assert {devices[k].host_link for k in ("h100-sxm", "h200", "b200", "mi300x")} == {"PCIe Gen5 x16"}


def test_host_link_needs_both_fields():
    from botec.catalog import CatalogError, _host_link

    with pytest.raises(CatalogError, match="x.* host_link without host_link_bandwidth"):
        _host_link("x", {"host_link": "PCIe Gen4 x16"})
    with pytest.raises(CatalogError, match="host_link_bandwidth must be positive"):
        _host_link("x", {"host_link": "PCIe Gen4 x16", "host_link_bandwidth": "0 GB/s"})
    assert _host_link("x", {}) == (None, None)


def test_every_family_has_an_efficiency_curve():
    from botec.catalog.efficiency import families

    from botec.catalog import CatalogError, _family

    # the families are efficiency.yaml's (issue 31): one it defines is accepted, one it lacks is refused
    assert _family("x", {"family": "hopper"}) == "hopper" and "hopper" in FAMILIES
    with pytest.raises(CatalogError, match=r"x\.family must be one of .*hopper.*got 'cdna9'"):
        _family("x", {"family": "cdna9"})
    turing = families()["turing"]
    # T4, best square FP16 torch.matmul 41.9 and 42.7 of 65 TFLOP/s (zzc0721/torch-performance-test-data): 0.64-0.66;
    # the curve is the measurement itself (no longer 0.9 of it: that ratio was botec 0.6's Ampere fit's).
    assert turing["matmul_efficiency"].value == pytest.approx((41.9 + 42.7) / 2 / 65, abs=0.01)
    assert turing["matmul_efficiency"].low < 41.9 / 65 < turing["matmul_efficiency"].high
    assert turing["attention_efficiency"].value < families()["ampere"]["attention_efficiency"].value  # no FA2


def test_geforce_curves_sit_below_their_measured_best_case():
    from botec.catalog.efficiency import families

    curves = families()
    # Best square BF16 torch.matmul, TFLOP/s (zzc0721/torch-performance-test-data database.md, issue #126), and the
    # catalog's FP32-accumulate peaks: every card reaches about all of its halved peak.
    best = {"rtx-3090": 76.34, "rtx-4090": 160.53, "rtx-5090": 232.22, "a10g": 69.47}   # lowest row of each card
    for key, tflops in best.items():
        device = accelerators()[key]
        curve = curves[device.family]["matmul_efficiency"]
        sustained = curve.value * device.peak_flops_per_s["bf16"]
        assert 0.8 * tflops * 1e12 <= sustained <= tflops * 1e12, key
        assert curve.high <= 1.0 and curve.basis == "measured"
    # ... where the unhalved datacenter Ada curve would predict a quarter less for the RTX 4090.
    assert curves["ada"]["matmul_efficiency"].value * 165.2e12 < 0.76 * 160.53e12


def test_measured_device_names_match_the_new_keys():
    from botec.measure.gemm_curve import device_matches

    assert device_matches("NVIDIA GeForce RTX 4090", "rtx-4090")
    assert not device_matches("NVIDIA GeForce RTX 3090", "rtx-4090")       # the model number, not just "RTX"
    assert device_matches("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada")
    assert not device_matches("Quadro RTX 6000", "rtx-6000-ada")           # the Turing card of the same number
    assert device_matches("NVIDIA A10G", "a10g") and not device_matches("NVIDIA A10", "a10g")
    assert device_matches("Tesla T4", "t4")


def test_pcie_node_presets():
    nodes = node_presets()
    # AWS Batch instance table: g5.48xlarge 8 GPUs, 768 GiB memory, 100 Gbps; g5.xlarge 1 GPU, 16 GiB, up to 10 Gbps.
    big, small = nodes["aws-g5.48xlarge"], nodes["aws-g5.xlarge"]
    assert (big.accelerator, big.accelerators_per_node, small.accelerators_per_node) == ("a10g", 8, 1)
    assert big.host_memory_bytes == 768 * GiB and small.host_memory_bytes == 16 * GiB
    assert big.inter_node_bytes_per_s == pytest.approx(100e9 / 8 / 8)     # 100 Gb/s shared by 8 GPUs
    # No NVLink: the intra-node tier is PCIe Gen4 with NCCL's PCIe ring latency (tuning.cc: 5.7 us).
    for node in (big, small, nodes["workstation-pcie"]):
        assert node.intra_node_bytes_per_s == pytest.approx(31.5e9) and node.nvlink_domain == 1
        assert node.intra_node_latency_seconds == pytest.approx(5.7e-6)
    assert nodes["workstation-pcie"].accelerator == "rtx-4090"


def test_catalog_lists_the_consumer_cards(cli):
    code, out, err = cli("catalog")
    assert code == 0, err
    for key in ("rtx-3090", "rtx-4090", "rtx-5090", "rtx-6000-ada", "a10g", "t4", "workstation-pcie",
                "aws-g5.48xlarge", "ada-geforce", "turing"):
        assert key in out, key
    assert "65 fp16" in out                                  # the T4 has no BF16: its FP16 peak, marked
    code, out, err = cli("catalog", "-f", "json")
    devices = {d["key"]: d for d in json.loads(out)["accelerators"]}
    assert devices["rtx-4090"]["host_link"] == "PCIe Gen4 x16"
    assert devices["rtx-4090"]["host_link_bandwidth_bytes_per_s"] == pytest.approx(31.5e9)
    assert devices["tpu-v4"]["host_link_bandwidth_bytes_per_s"] is None
    nodes = {n["key"]: n for n in json.loads(out)["nodes"]}
    assert nodes["aws-g5.48xlarge"]["host_memory_bytes"] == 768 * GiB
    code, out, err = cli("catalog", "-f", "markdown")
    assert code == 0 and "host GB/s" in out and "| rtx-4090 |" in out


def test_catalog_shows_host_links_in_a_wide_enough_console():
    from io import StringIO

    from rich.console import Console

    from botec.report.listings import catalog_text

    for width, shown in ((80, False), (100, True)):
        buffer = StringIO()
        catalog_text(Console(file=buffer, width=width, highlight=False, soft_wrap=False))
        table = buffer.getvalue().split("Sources and notes")[0]
        header = table.split("catalog revised")[1].split("───")[0]     # the column labels, above the rule
        assert ("host" in header) == shown, width
        assert max(len(line) for line in table.splitlines()) <= width


def test_bf16_on_a_t4_is_refused_by_name(cli):
    from conftest import LESSON

    code, out, err = cli("estimate", str(LESSON), "--set", "supply.accelerator=t4")
    assert code != 0
    assert "strategy.precision" in err and "bf16" in err and "fp16" in err, err
    # In FP16 it runs (with ZeRO-1: the lesson's 25.2 GB per accelerator does not fit in 16 GB).
    code, out, err = cli("estimate", str(LESSON), "--set", "supply.accelerator=t4",
                         "--set", "strategy.precision=fp16", "--set", "strategy.zero_stage=1", "-f", "json")
    assert code == 0, err
    peak = {q["name"]: q for q in json.loads(out)["quantities"]}["peak_flops_per_s"]
    assert peak["value"] == pytest.approx(65e12)


def test_a10g_node_in_a_contract(cli):
    # Llama 2-7B with FSDP over the 8 A10Gs of a g5.48xlarge (the example's DGX A100 swapped for the AWS node).
    from conftest import EXAMPLES

    code, out, err = cli("estimate", str(EXAMPLES / "llama2-7b-fsdp-finetune.yaml"), "--set", "supply.accelerator=a10g",
                         "--set", "supply.cluster.node=aws-g5.48xlarge", "--set", "strategy.micro_batch_size=1",
                         "-f", "json")
    assert code == 0, err
    quantities = {q["name"]: q for q in json.loads(out)["quantities"]}
    assert quantities["peak_flops_per_s"]["value"] == pytest.approx(70e12)
    assert quantities["device_memory_bytes"]["value"] == pytest.approx(24e9)
    assert quantities["matmul_efficiency"]["value"] == pytest.approx(0.97)          # ampere-geforce, not ampere's 0.82
    assert quantities["intra_node_bytes_per_s"]["value"] == pytest.approx(31.5e9)   # PCIe Gen4, no NVLink
    assert quantities["inter_node_bytes_per_s"]["value"] == pytest.approx(12.5e9 / 8)
