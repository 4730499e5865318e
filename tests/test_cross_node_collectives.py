"""Collectives across nodes (botec.formulas.nccl_tuning: NCCL's cost model, the algorithm it would pick) against
published nccl-tests bus bandwidth, and inside one node (AIConfigurator's NCCL tables) against published 8-GPU runs.

Tables (catalog/measurements/collectives/, sources in each file and in ../NOTICE):
- nccl-tests-aws-p5-efa.yaml: AWS p5.48xlarge (8 x H100, 32 x 100 Gb/s EFA), all_reduce_perf and all_gather_perf at
  16-256 GPUs, 32 MiB-8 GiB: crazyguitar/aws-gpu-communication-benchmark @ fd167f9, data/nccl_all_reduce.csv and
  data/nccl_all_gather.csv, "out busbw" column. Its two 16-GPU all-gather points at 32 MiB and 2 GiB set the
  preset's EFA step latency and bandwidth (catalog/nodes.yaml aws-p5.48xlarge); every other row is held out here.
- nccl-tests-h100-ndr-ib.yaml: Hopper nodes with 8 x 400 Gb/s NDR IB: all-reduce at 1,984 H200 GPUs, 512 MiB, ~350
  GB/s (NVIDIA/nccl-tests#283); all-gather at 256 H100 GPUs, 2 GiB, ~200 GB/s (NVIDIA/nccl#1218).
- 8 GPUs in one node (H100 SXM): reduce_scatter_perf ring table of NVIDIA/nccl#1047 (2023-10-31: 311.34 GB/s at
  128 MiB … 357.76 at 4 GiB); all-reduce peak ~480 GB/s busbw with NVLS on 8 x H100 (NCCL maintainer, NVIDIA/
  nccl-tests#212, 2024-05-06).

No table at 1-16 MiB across nodes was found, nor a full sweep at 512 GPUs or more (the 1,984-GPU point is a single
size): those parts of the issue's range are not tested here.
"""

import pytest

from botec.catalog import node_presets
from botec.catalog.collective_measurements import published_busbw
from botec.formulas.collective_tables import BUS_FACTORS, bus_bytes_per_s, collective_seconds, collective_table
from botec.formulas.collectives import hierarchical_bytes_per_s
from botec.formulas.nccl_tuning import cross_node_choice

MIB = 2 ** 20
P5 = "nccl-tests-aws-p5-efa"
IB = "nccl-tests-h100-ndr-ib"


def _links(preset: str):
    node = node_presets()[preset]
    nic, nvlink = node.inter_node_achieved_bytes_per_s, node.intra_node_achieved_bytes_per_s
    return dict(ring_bytes_per_s=hierarchical_bytes_per_s(8.0, nvlink, nic), nvlink_bytes_per_s=nvlink, nvls=True,
                net_step_seconds=node.inter_node_latency_seconds)


def botec_busbw(op: str, gpus: int, message_bytes: float, preset: str) -> float:
    """botec's bus bandwidth (nccl-tests' convention) for one collective over ``gpus`` on 8-GPU nodes."""
    *_, seconds = cross_node_choice(op, message_bytes, float(gpus), 8.0, **_links(preset))
    return message_bytes / seconds * BUS_FACTORS[op](gpus)


# --- hand-derived: what the model is ---------------------------------------------------------------------------

def test_ring_all_gather_is_paced_by_the_network_step():
    # 256 GPUs, 32 MiB on p5: Ring/Simple, t = 8.4 us + 255 x 9.18 us + (255/256) S / (8 x 42.08 GB/s)
    s = 32 * MIB
    by_hand = 8.4e-6 + 255 * 9.18e-6 + 255 / 256 * s / (8 * 42.08e9)
    algorithm, protocol, seconds = cross_node_choice("allgather", s, 256.0, 8.0, **_links("aws-p5.48xlarge"))
    assert (algorithm, protocol) == ("Ring", "Simple")
    assert seconds == pytest.approx(by_hand, rel=1e-9)


def test_all_reduce_at_scale_leaves_the_ring():
    # 512 GPUs (64 DGX H100 nodes, a 14 us network step), 1 MiB: the ring needs 8.4 us + 1,022 x 14 us = 14.3 ms of
    # latency alone. NCCL's NVLS tree: 25 us (NVSwitch) + 2 x log2(64) x 14 us = 193 us plus S over 8 x 46 GB/s
    # x 512/1,022 (its bus-to-algorithm ratio); its double binary tree with LL128, 14.0 + 2 x (7 x 1.25 + 6 x 14)
    # = 199.5 us plus S over 0.5 x 0.92 x 120/128 x 8 x 46 GB/s x 0.6 (treeCorrectionFactor[LL128] at 1 MiB), is
    # the runner-up.
    s = 1 * MIB
    algorithm, protocol, seconds = cross_node_choice("allreduce", s, 512.0, 8.0, **_links("dgx-h100"))
    nvls_tree_by_hand = 193e-6 + s / (8 * 46e9 * 512 / 1022)
    tree_by_hand = 199.5e-6 + s / (0.92 * 120 / 128 * 8 * 46e9 * 0.5 * 0.6)
    assert (algorithm, protocol) == ("NVLSTree", "Simple")
    assert seconds == pytest.approx(nvls_tree_by_hand, rel=1e-9)
    assert nvls_tree_by_hand < tree_by_hand < (8.4e-6 + 1022 * 14e-6) / 40
    links = _links("dgx-h100") | {"nvls": False}   # an A100-style node without NVLS: the tree
    assert cross_node_choice("allreduce", s, 512.0, 8.0, **links)[:2] == ("Tree", "LL128")
    assert cross_node_choice("allreduce", s, 512.0, 8.0, **links)[2] == pytest.approx(tree_by_hand, rel=1e-9)


def test_two_nodes_nvls_tree_doubles_the_network_share():
    # NCCL's NVLS tree on two nodes (tuning.cc "Handle 2 node case of NVLSTree"): bus bandwidth up to 2 x l x B_NIC,
    # capped by 2 x 0.85 x the NVLink figure: 2 x 0.85 x 370 = 629 GB/s at 8 GiB on DGX H100
    algorithm, protocol, seconds = cross_node_choice("allreduce", 8192 * MIB, 16.0, 8.0, **_links("dgx-h100"))
    assert algorithm == "NVLSTree"
    busbw = 8192 * MIB / seconds * BUS_FACTORS["allreduce"](16)
    assert busbw == pytest.approx(629e9, rel=0.01)


# --- 8 GPUs: inside one node (AIConfigurator's NCCL tables, H100 SXM) ------------------------------------------

NCCL_1047_REDUCE_SCATTER = [(128, 311.34), (256, 330.94), (512, 340.94), (1024, 349.36), (2048, 354.81),
                            (4096, 357.76)]
"""NVIDIA/nccl#1047: reduce_scatter_perf on one 8 x H100 node, ring, out-of-place busbw (GB/s) by MiB."""


@pytest.mark.parametrize("size_mib, measured_gb_s", NCCL_1047_REDUCE_SCATTER)
def test_eight_gpus_reduce_scatter_matches_nccl_1047(size_mib, measured_gb_s):
    s = size_mib * MIB
    table = collective_table("reducescatter", "nccl", "h100-sxm")
    busbw = bus_bytes_per_s("reducescatter", 8, s, collective_seconds(table, 8, s, beyond="alpha_beta"))
    assert busbw == pytest.approx(measured_gb_s * 1e9, rel=0.15)


def test_eight_gpus_all_reduce_peak_matches_nccl_tests_212():
    # ~480 GB/s busbw with NVLS on 8 x H100 "on larger sizes" (maintainer, nccl-tests#212): 4 GiB
    s = 4096 * MIB
    table = collective_table("allreduce", "nccl", "h100-sxm")
    busbw = bus_bytes_per_s("allreduce", 8, s, collective_seconds(table, 8, s, beyond="alpha_beta"))
    assert busbw == pytest.approx(480e9, rel=0.15)


# --- AWS p5 (EFA): all-gather, held-out rows --------------------------------------------------------------------

P5_FIT_POINTS = {(16, 32 * MIB), (16, 2048 * MIB)}
P5_ALL_GATHER_DIPS = {(16, 256): 215.58, (32, 512): 220.57, (64, 1024): 224.47}
"""Rows where the published busbw falls below the smaller size's before rising again (16 GPUs: 234.54 at 128 MiB,
215.58 at 256, 275.52 at 512; 32: 253.36, 220.57, 288.53; 64: 261.26, 224.47, 293.71): botec is 26-31 % above
them (281.6, 283.0, 283.6 GB/s) and within 15 % of their neighbours; a time that grows with size cannot dip."""


def _p5(op):
    return [(g, s, b) for g, s, b in published_busbw(P5, op) if (g, s) not in P5_FIT_POINTS]


def _case(op, gpus, size, measured, dips, why):
    key = (gpus, int(size // MIB))
    marks = [pytest.mark.xfail(strict=True, reason=why(key, measured))] if key in dips else []
    return pytest.param(op, gpus, size, measured, marks=marks, id=f"{op}-{gpus}gpus-{key[1]}MiB")


@pytest.mark.parametrize("op, gpus, size, measured", [
    _case("allgather", g, s, b, P5_ALL_GATHER_DIPS,
          lambda key, m: f"published dip at {key}: {m / 1e9:.1f} GB/s between higher neighbours") for g, s, b in _p5(
        "allgather")])
def test_p5_all_gather_matches_published_busbw(op, gpus, size, measured):
    assert botec_busbw(op, gpus, size, "aws-p5.48xlarge") == pytest.approx(measured, rel=0.15)


# --- AWS p5 (EFA): all-reduce -----------------------------------------------------------------------------------

P5_ALL_REDUCE_GAPS = {
    (16, 32): 198, (16, 64): 150, (16, 128): 86, (16, 256): 64, (16, 512): 55, (16, 1024): 43, (16, 2048): 40,
    (16, 4096): 35, (16, 8192): 31,
    (32, 32): 167, (32, 64): 90, (32, 128): 36, (32, 256): 18, (32, 512): 19, (32, 1024): 19,
    (64, 32): 176, (64, 64): 169, (64, 128): 95, (64, 256): 38, (64, 512): 20, (64, 1024): 21, (64, 2048): 20,
    (128, 32): 200, (128, 64): 192, (128, 128): 132, (128, 256): 114, (128, 512): 46, (128, 1024): 23,
    (128, 2048): 23,
    (256, 32): 220, (256, 64): 211, (256, 128): 153, (256, 256): 127, (256, 512): 107, (256, 1024): 50,
    (256, 2048): 24}
"""botec above the published all-reduce busbw, in %, per (GPUs, MiB). Why no model change closes it: the run used
AWS's tuner plugin (libnccl-ofi-tuner, aws-ofi-nccl 1.16.3), which replaces NCCL's algorithm choice; its curve is
not one algorithm (256 GPUs: the marginal rate is ~90 GB/s algbw up to 512 MiB and ~173 GB/s above, with a ~3.5 ms
intercept, ring-like), and up to 512 MiB it is 2-3x slower than the NVLS tree NCCL's own model picks on the same
links. At 2 nodes NCCL's NVLS tree doubles the network share (629 GB/s modelled against 478 measured at 8 GiB).
At 4 GiB and 8 GiB on 32-256 GPUs botec is within 15 %."""


@pytest.mark.parametrize("op, gpus, size, measured", [
    _case("allreduce", g, s, b, P5_ALL_REDUCE_GAPS,
          lambda key, m: f"AWS tuner plugin's choice: botec +{P5_ALL_REDUCE_GAPS[key]} % at {key}")
    for g, s, b in published_busbw(P5, "allreduce")])
def test_p5_all_reduce_matches_published_busbw(op, gpus, size, measured):
    assert botec_busbw(op, gpus, size, "aws-p5.48xlarge") == pytest.approx(measured, rel=0.15)


def test_p5_all_reduce_gaps_are_as_recorded():
    # the xfail reasons above state the gaps: they are what botec gives now (to a percent)
    for gpus, size, measured in published_busbw(P5, "allreduce"):
        key = (gpus, int(size // MIB))
        if key in P5_ALL_REDUCE_GAPS:
            gap = botec_busbw("allreduce", gpus, size, "aws-p5.48xlarge") / measured - 1
            assert gap * 100 == pytest.approx(P5_ALL_REDUCE_GAPS[key], abs=1.5), key


# --- InfiniBand NDR, 256 and 1,984 GPUs ------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["allreduce", "allgather"])
def test_ndr_infiniband_at_scale_matches_published_points(op):
    for gpus, size, measured in published_busbw(IB, op):
        assert botec_busbw(op, gpus, size, "dgx-h100") == pytest.approx(measured, rel=0.15), (op, gpus)
