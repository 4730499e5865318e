"""Training's collectives inside one node, priced from NCCL's measured tables (botec.formulas.collective_tables:
catalog/measurements/operators/{allreduce,allgather,reducescatter}-nccl-<accelerator>.yaml, AIConfigurator 0.12.0,
NCCL 2.27.3 on H100 SXM and A100 SXM, 2.26.2 on H200; latencies in µs at 512 B … 512 MiB, 2/4/8 GPUs).

Bus bandwidth follows nccl-tests' convention (NVIDIA/nccl-tests doc/PERFORMANCE.md, "Summary"): busbw = algbw ×
2(n − 1)/n for all-reduce, × (n − 1)/n for all-gather and reduce-scatter, algbw = S / t. Beyond the tables' 512 MiB
the time follows the α–β line through their last two points; the published 8-GPU figures at 1-4 GB it is held to:
- NVIDIA/nccl-tests issue #212 (NCCL maintainer, 2024-05-06): 8 × H100, all-reduce (NVLS) "peak busBw of ~480GB/s
  (algbw ~275GB/s)" at sizes above 256 MB; ~370 GB/s bus bandwidth for the non-all-reduce operations.
- NVIDIA/nccl-tests issue #272 (2024-11-27): 8 × H200, all_reduce_perf -b 64k -e 4G, "peak bandwidth of 475 GB/s".
- NVIDIA/nccl-tests issue #149 (NCCL maintainer, 2023-07-05): 8 × A100 SXM, ~230 GB/s all-reduce bus bandwidth.
"""

from __future__ import annotations

import pytest

from botec.formulas import collective_tables as ct

MIB, GIB = 2 ** 20, 2 ** 30


def _seconds(op, device, ranks, message_bytes):
    return ct.measured_or_modelled(op, ct.nccl_device_index(device), ranks, message_bytes, -1.0)


def test_bus_bandwidth_is_nccl_tests_convention():
    """PERFORMANCE.md: B = S/t · 2(n−1)/n (all-reduce), S/t · (n−1)/n (all-gather, reduce-scatter, all-to-all).
    8 ranks, 1 GB in 10 ms: algbw 100 GB/s, all-reduce busbw 175 GB/s, all-gather 87.5 GB/s."""
    assert ct.bus_bytes_per_s("allreduce", 8, 1e9, 0.01) == pytest.approx(175e9)
    assert ct.bus_bytes_per_s("allgather", 8, 1e9, 0.01) == pytest.approx(87.5e9)
    assert ct.bus_bytes_per_s("reducescatter", 2, 1e9, 0.01) == pytest.approx(50e9)


# The tables' own points at 8 ranks (µs): allreduce-nccl-h100-sxm.yaml row 8, allgather-nccl-h100-sxm.yaml row 8,
# allreduce-nccl-a100-sxm-80gb.yaml row 8, allgather-nccl-a100-sxm-80gb.yaml row 8: 1 MiB (column 12) and 64 MiB
# (column 18).
TABLE_POINTS = [
    ("allreduce", "h100-sxm", MIB, 25.41e-6), ("allreduce", "h100-sxm", 64 * MIB, 322.93e-6),
    ("allgather", "h100-sxm", MIB, 17.00e-6), ("allgather", "h100-sxm", 64 * MIB, 209.26e-6),
    ("allreduce", "a100-sxm-80gb", MIB, 38.85e-6), ("allreduce", "a100-sxm-80gb", 64 * MIB, 595.30e-6),
    ("allgather", "a100-sxm-80gb", MIB, 26.79e-6), ("allgather", "a100-sxm-80gb", 64 * MIB, 351.60e-6),
]


@pytest.mark.parametrize("op, device, size, published", TABLE_POINTS)
def test_8_gpus_match_the_tables_own_points(op, device, size, published):
    """At a table's own size the time is the table's point; at 1 MB and 64 MB (decimal, between two points) within
    15 % of the nearest point (log-log interpolation moves it by the size ratio at most)."""
    assert _seconds(op, device, 8, size) == pytest.approx(published, rel=1e-3)
    decimal = 1e6 if size == MIB else 64e6
    assert _seconds(op, device, 8, decimal) == pytest.approx(published, rel=0.15)


# Beyond the tables (1 GiB, 4 GiB): within 15 % of the published 8-GPU bus bandwidth, and of the table's 512 MiB
# point's (allreduce-nccl-h100-sxm.yaml 8 ranks 2111.72 µs: 444.9 GB/s; allgather 1398.89 µs: 335.8 GB/s;
# allreduce-nccl-h200.yaml 2042.92 µs: 459.9 GB/s; allreduce-nccl-a100-sxm-80gb.yaml 4225.9 µs: 222.3 GB/s;
# allgather-nccl-a100-sxm-80gb.yaml 2288.0 µs: 205.3 GB/s).
LARGE = [
    ("allreduce", "h100-sxm", 480e9, 2111.72e-6), ("allgather", "h100-sxm", 370e9, 1398.89e-6),
    ("allreduce", "h200", 475e9, 2042.92e-6),
    ("allreduce", "a100-sxm-80gb", 230e9, 4225.9e-6), ("allgather", "a100-sxm-80gb", 230e9, 2288.0e-6),
]


@pytest.mark.parametrize("op, device, published_bus, point_512mib", LARGE)
@pytest.mark.parametrize("size", [GIB, 4 * GIB])
def test_8_gpus_beyond_the_tables_match_published_bus_bandwidth(op, device, published_bus, point_512mib, size):
    bus = ct.bus_bytes_per_s(op, 8, size, _seconds(op, device, 8, size))
    assert bus == pytest.approx(published_bus, rel=0.15)
    assert bus == pytest.approx(ct.bus_bytes_per_s(op, 8, 512 * MIB, point_512mib), rel=0.15)
    # and the α–β line never runs faster than the last two points' gain: above the 512 MiB point's bandwidth
    assert bus >= ct.bus_bytes_per_s(op, 8, 512 * MIB, point_512mib) * (1 - 1e-9)


def test_counts_and_accelerators_without_a_table_take_the_modelled_time():
    """6 ranks (the tables hold 2, 4, 8), one rank, and an accelerator AIConfigurator did not measure: the α–β time
    passed in; arrays element by element."""
    import numpy as np

    h100 = ct.nccl_device_index("h100-sxm")
    assert ct.measured_or_modelled("allreduce", h100, 6, 64 * MIB, 1.25) == 1.25
    assert ct.measured_or_modelled("allreduce", h100, 1, 64 * MIB, 0.0) == 0.0
    assert ct.nccl_device_index("mi300x") == -1.0
    out = ct.measured_or_modelled("allreduce", np.array([h100, -1.0]), np.array([8.0, 8.0]), 64 * MIB, 2.0)
    assert out[0] == pytest.approx(322.93e-6, rel=1e-3) and out[1] == 2.0
    assert set(ct.nccl_devices()) >= {"a100-sxm-80gb", "h100-sxm", "h200", "b200"}


def _estimate(**strategy):
    from botec.api import estimate

    contract = {"schema_version": 1,
                "workload": {"model": "llama-2-7b", "tokens": "1B", "sequence_length": 4096},
                "supply": {"accelerator": "h100-sxm", "count": 8, "cluster": {"node": "dgx-h100"}},
                "strategy": {"micro_batch_size": 1, "global_batch_size": 8} | strategy}
    return estimate(contract)


def _value(result, name):
    return float(result.quantities[name].value)


def test_the_training_estimate_prices_tp_and_dp_from_the_tables():
    """Llama-2-7B (h = 4,096) on one DGX H100. TP 8, micro-batch 1 × 4,096 tokens: each TP all-reduce carries
    S = 4,096 · 4,096 · 2 B = 32 MiB, at 8 ranks 198.66 µs (allreduce-nccl-h100-sxm.yaml row 8, 32 MiB), so
    tp_communication_seconds = tp_collectives_per_step × 198.66 µs. DP 8 (no ZeRO, torchtitan's default stack: DDP):
    the BF16-trained gradients all-reduce once per step over 8 ranks in DDP's 25 MiB buckets (bucket_cap_mb 25):
    k = ⌈M / 25 MiB⌉ collectives, each at the table's time for M / k."""
    tp = _estimate(tensor_parallel=8)
    count = _value(tp, "tp_collectives_per_step")
    assert _value(tp, "tp_communication_seconds") == pytest.approx(count * 198.66e-6, rel=1e-3)
    dp = _estimate()
    message = _value(dp, "gradient_all_reduce_message_bytes")
    buckets = -(-message // (25 * MIB))
    assert _value(dp, "gradient_collectives_per_reduction") == buckets
    per_bucket = message / buckets
    assert 16 * MIB < per_bucket <= 32 * MIB          # between the table's 16 MiB and 32 MiB points, 8 ranks
    low, high = 122.29e-6, 198.66e-6                   # allreduce-nccl-h100-sxm.yaml row 8: 16 MiB, 32 MiB
    import math

    weight = math.log(per_bucket / (16 * MIB)) / math.log(2)
    expected = buckets * math.exp((1 - weight) * math.log(low) + weight * math.log(high))
    assert _value(dp, "gradient_all_reduce_seconds") == pytest.approx(expected, rel=1e-3)


def test_a_stated_link_or_a_group_across_nodes_keeps_the_alpha_beta_ring():
    """supply.network stated (100 GB/s, α = 0): the definition row's 2(n−1)/n · S / B, not the table; TP 8 over
    2 × 8 accelerators with DP 2 across nodes: the DP all-reduce on the NIC tier (α–β)."""
    from botec.api import estimate

    contract = {"schema_version": 1,
                "workload": {"model": "llama-2-7b", "tokens": "1B", "sequence_length": 4096},
                "supply": {"accelerator": "h100-sxm", "count": 8,
                           "network": {"bandwidth": "100 GB/s", "latency": "0 s"}},
                "strategy": {"micro_batch_size": 1, "global_batch_size": 8}}
    result = estimate(contract)
    message = _value(result, "gradient_all_reduce_message_bytes")
    assert _value(result, "gradient_all_reduce_seconds") == pytest.approx(2 * 7 / 8 * message / 100e9, rel=1e-9)
    across = estimate(contract | {"supply": {"accelerator": "h100-sxm", "count": 16,
                                             "cluster": {"node": "dgx-h100"}},
                                  "strategy": {"micro_batch_size": 1, "global_batch_size": 16,
                                               "tensor_parallel": 8}})
    assert _value(across, "dp_collective_table_index") == -1.0
    assert _value(across, "tp_collective_table_index") == ct.nccl_device_index("h100-sxm")
