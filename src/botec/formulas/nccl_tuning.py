"""Collectives across nodes as NCCL's own cost model prices them: the algorithm and protocol it would pick.

Source: NVIDIA/nccl 2.30.7 (commit 5067397, 2026-06-11), ``src/graph/tuning.cc`` — the default tuner constants
(``ncclTunerConstantsDefaults``: base latencies per algorithm and protocol, hardware latencies per link type, the
LL/LL128 bandwidth caps), ``ncclTopoTuneModel`` (bandwidth and latency per collective, algorithm and protocol) and
``ncclTopoGetAlgoTime`` (time = latency + bytes / bandwidth, the tree's correction by size).
The figures are NCCL's; the code is botec's own (nothing copied). NCCL enqueues each collective on the
(algorithm, protocol) of least modelled time; botec does the same over the candidates that exist across nodes:

    t(a, p) = L(a, p) + S / A(a, p)                       t = min over the enabled (a, p)

S: the message (nccl-tests' convention: the all-reduced tensor, the gathered result, the scattered input);
n ranks, l of them per node, N = n / l nodes. Bandwidths, nccl-tests' bus bandwidth before NCCL's ratio:

    B        the ring's bus bandwidth over the group's links (the caller's: l NICs pooled, capped by NVLink,
             :func:`botec.formulas.collectives.hierarchical_bytes_per_s`); NCCL's nChannels × bwInter
    Ring     Simple B;  LL128 0.92·B;  LL min(0.5·B, LL cap)
    Tree     (all-reduce) Simple 0.92·B;  LL128 0.92·B·120/128;  LL min(0.92·B / 3.8, LL cap); × the size
             correction of ``treeCorrectionFactor`` (64 B … 512 MiB)
    NVLSTree (all-reduce, Hopper NVSwitch nodes, l > 1) min(2 × η_NVLS × B_NVLink, B × (2 if N ≤ 2 else 1)): NCCL's
             bwInter is the node's NICs, l·B_NIC, which B is wherever the NICs, not NVLink, bind the ring
    PAT      (all-gather, reduce-scatter, one rank per node) 0.75·B

and A = bus × n / steps (ring, NVLSTree: steps 2(n − 1) for all-reduce, n − 1 otherwise), bus × 0.5 (tree),
bus (PAT). Latencies (µs; NCCL's base and hardware terms; α_net the network step):

    Ring     base_p + steps · max(α_link,p, overhead_p, α_net)
    Tree     base_p + 2·((l − 1)·α_link,tree,p + ⌊log₂ N⌋·α_net)
    NVLSTree α_link,NVLS + 2·⌊log₂ N⌋·α_net                                   (α_link,NVLS = 25 µs)
    PAT      8 + ⌊log₂ N⌋·α_net / 3.5 + 2.8·n

Two departures from tuning.cc, both from the published tables (tests/test_cross_node_collectives.py):

- α_net is the fabric's measured latency per network step (the tier's α: catalog/nodes.yaml), for every protocol,
  where NCCL's table gives 2.7 / 4.0 / 14 µs (LL / LL128 / Simple) on any network. On AWS EFA the 16-GPU all-gather
  sets it at 9.2 µs, and at 256 GPUs a 32 MiB all-gather takes 2.7 ms (≈ 10.5 µs per step, LL128's 4 µs nowhere);
  NVIDIA/nccl#1218's 256-GPU IB all-gather (~200 GB/s at 2 GiB) is within 14 % only with 14 µs per step.
- A ring step lasts as long as its slowest hop (the ranks move in lockstep), so every one of the ring's steps is
  priced at the network's α_net: NCCL's sum of intra-node and network steps (and its 1.4 "plateau" factor) comes out
  2-3× too fast for those same all-gathers at 64-256 GPUs.

Left out (stated, not modelled): CollNet / SHARP and NVLS across nodes (they need a SHARP-enabled fabric, which no
node preset states); the per-channel caps (above the NIC figure on 8-NIC Hopper nodes); an external tuner plugin's
choice (AWS's, for one, replaces NCCL's). LL's cap is the Intel-host row (AMD hosts: 19.0 GB/s, against 20.4).
Elementwise: floats for one estimate, numpy arrays for a sweep.
"""

from __future__ import annotations

from functools import lru_cache

from botec.graph.elementwise import floor, is_scalar, log2, maximum, minimum, where

__all__ = ["NCCL_TUNING_SOURCE", "cross_node_seconds", "cross_node_choice", "CANDIDATES"]

NCCL_TUNING_SOURCE = ("NCCL's cost model (NVIDIA/nccl 2.30.7, src/graph/tuning.cc: ncclTunerConstantsDefaults, "
                      "ncclTopoTuneModel, ncclTopoGetAlgoTime): the least modelled time over ring, tree, NVLS tree "
                      "and PAT with the LL, LL128 and Simple protocols")

PROTOCOLS = ("LL", "LL128", "Simple")
_BASE_US = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4), "NVLSTree": (0.0, 0.0, 0.0),
            "PAT": (8.0, 8.0, 8.0)}
"""baseLatencies (µs) per algorithm, (LL, LL128, Simple)."""
_LINK_US = {"nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4), "NVLSTree": (0.0, 0.0, 25.0)},
            "pci": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7), "NVLSTree": (0.0, 0.0, 0.0)}}
"""hwLatencies (µs) inside a node: NVLINK and PCI rows."""
_NET_US = {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0), "NVLSTree": (0.0, 0.0, 20.9)}
"""hwLatencies (µs) across nodes: the NET row."""
_NET_OVERHEAD_US = 1.0
"""getNetOverhead: 1 µs per network post on x86 Intel hosts (2 on AMD), × 3 for Simple."""
_LL_CAP_BYTES_PER_S = {2: 39.0e9, 3: 20.4e9}
"""llMaxBws, multi-node Intel row: 2 nodes 39.0 GB/s, more 20.4 GB/s."""
_NVLS_EFFICIENCY = 0.85
"""nvlsEfficiency, Hopper."""
_TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9)}
"""treeCorrectionFactor by ⌊log₂(S / 64)⌋; NCCL applies it to the tree all-reduce for indices 0 … 22 (64 B up to
512 MiB), 1 outside."""
_TREE_CORRECTED = 23

CANDIDATES = {"allreduce": (("Ring", "LL"), ("Ring", "LL128"), ("Ring", "Simple"), ("Tree", "LL"),
                            ("Tree", "LL128"), ("Tree", "Simple"), ("NVLSTree", "Simple")),
              "allgather": (("Ring", "LL"), ("Ring", "LL128"), ("Ring", "Simple"), ("PAT", "Simple")),
              "reducescatter": (("Ring", "LL"), ("Ring", "LL128"), ("Ring", "Simple"), ("PAT", "Simple"))}
"""The (algorithm, protocol) pairs NCCL enables across nodes without CollNet/SHARP, per collective."""


def _tree_correction(protocol: str, message_bytes):
    table = _TREE_CORRECTION[protocol]
    if is_scalar(message_bytes):
        index = int(floor(log2(max(message_bytes / 64.0, 1.0)))) if message_bytes >= 64 else -1
        return table[index] if 0 <= index < _TREE_CORRECTED else 1.0
    import numpy as np

    size = np.asarray(message_bytes, dtype=float)
    index = np.floor(np.log2(np.maximum(size / 64.0, 1.0))).astype(int)
    inside = (size >= 64) & (index < _TREE_CORRECTED)
    return np.where(inside, np.asarray(table)[np.clip(index, 0, len(table) - 1)], 1.0)


def _one(op, algorithm, protocol, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls,
         nvlink, net_step_seconds):
    """Seconds of one (algorithm, protocol), or +inf where NCCL does not enable it."""
    p = PROTOCOLS.index(protocol)
    ranks = maximum(ranks, 2.0)   # a group of one rank sends nothing (its callers' zero); no division by zero here

    def link_row(algorithm_row):
        return where(nvlink > 0, _LINK_US["nvlink"][algorithm_row][p], _LINK_US["pci"][algorithm_row][p])

    nodes = ranks / ranks_per_node
    log_nodes = floor(log2(maximum(nodes, 1.0)) + 1e-9)
    measured = net_step_seconds is not None   # a fabric's measured step stands for every protocol's NET figure

    def net(algorithm_row):
        return net_step_seconds * 1e6 if measured else _NET_US[algorithm_row][p]
    ll_cap = where(nodes <= 2, _LL_CAP_BYTES_PER_S[2], _LL_CAP_BYTES_PER_S[3])
    all_reduce = op == "allreduce"
    steps = 2 * (ranks - 1) if all_reduce else ranks - 1
    disabled = 0.0
    if algorithm == "Ring":
        bus = {"LL": minimum(0.5 * ring_bytes_per_s, ll_cap), "LL128": 0.92 * ring_bytes_per_s,
               "Simple": ring_bytes_per_s}[protocol]
        algorithm_bytes_per_s = bus * ranks / steps
        overhead = _NET_OVERHEAD_US * (3 if protocol == "Simple" else 1)
        intra = maximum(link_row("Ring"), overhead)
        inter = where(ranks_per_node > 1, net("Ring"), net("Tree"))
        latency = _BASE_US["Ring"][p] + steps * maximum(intra, inter)
    elif algorithm == "Tree":
        bus = {"LL": minimum(0.92 * ring_bytes_per_s / 3.8, ll_cap), "LL128": 0.92 * ring_bytes_per_s * 120 / 128,
               "Simple": 0.92 * ring_bytes_per_s}[protocol]
        algorithm_bytes_per_s = bus * 0.5 * _tree_correction(protocol, message_bytes)
        latency = _BASE_US["Tree"][p] + 2 * ((ranks_per_node - 1) * link_row("Tree")
                                             + log_nodes * net("Tree"))
    elif algorithm == "NVLSTree":
        bus = minimum(2 * _NVLS_EFFICIENCY * nvlink_bytes_per_s, ring_bytes_per_s * where(nodes <= 2, 2.0, 1.0))
        algorithm_bytes_per_s = bus * ranks / steps
        latency = _LINK_US["nvlink"]["NVLSTree"][p] + 2 * log_nodes * net("NVLSTree")
        disabled = where((nvls > 0) & (nvlink > 0) & (ranks_per_node > 1), 0.0, float("inf"))
    else:  # PAT: all-gather and reduce-scatter with one rank per node
        algorithm_bytes_per_s = 0.75 * ring_bytes_per_s
        latency = _BASE_US["PAT"][p] + log_nodes * net("Tree") / 3.5 + 2.8 * ranks
        disabled = where(ranks_per_node == 1, 0.0, float("inf"))
    return latency * 1e-6 + message_bytes / algorithm_bytes_per_s + disabled


def cross_node_seconds(op: str, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls,
                       nvlink=1.0, net_step_seconds=None):
    """Seconds of one ``op`` (allreduce, allgather, reducescatter) of ``message_bytes`` over ``ranks`` in nodes of
    ``ranks_per_node`` of them: the least of NCCL's modelled times (the module docstring).

    ``ring_bytes_per_s``: the ring's bus bandwidth per rank over the group's links (l NICs pooled, capped by the
    NVLink share); ``nvlink_bytes_per_s``: the NVLink
    bandwidth per GPU (per direction); ``nvls``: the node's NVSwitch can reduce (Hopper and later: NVLS tree
    enabled; true where > 0); ``nvlink``: the GPUs of a node talk over NVLink (> 0) or PCIe (0), the hardware row
    of the intra-node latencies; ``net_step_seconds``: the fabric's latency per network step for every protocol
    (the tier's α), or None for NCCL's own NET row per protocol."""
    values = (message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls, nvlink)
    if is_scalar(*values) and (net_step_seconds is None or is_scalar(net_step_seconds)):
        return _scalar_seconds(op, *(float(v) for v in values), net_step_seconds)
    return _least(op, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls, nvlink,
                  net_step_seconds)


@lru_cache(maxsize=4096)
def _scalar_seconds(op, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls, nvlink,
                    net_step_seconds):
    """One estimate's collective (plain floats), cached: an estimate's findings re-evaluate the same ones."""
    return _least(op, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls, nvlink,
                  net_step_seconds)


def _least(op, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s, nvls, nvlink,
           net_step_seconds):
    best = None
    for algorithm, protocol in CANDIDATES[op]:
        t = _one(op, algorithm, protocol, message_bytes, ranks, ranks_per_node, ring_bytes_per_s, nvlink_bytes_per_s,
                 nvls, nvlink, net_step_seconds)
        best = t if best is None else minimum(best, t)
    return best


def cross_node_choice(op: str, message_bytes: float, ranks: float, ranks_per_node: float, ring_bytes_per_s: float,
                      nvlink_bytes_per_s: float, nvls: bool, nvlink: float = 1.0,
                      net_step_seconds: float | None = None) -> tuple[str, str, float]:
    """(algorithm, protocol, seconds) NCCL's model would pick, for one scalar collective (reports, tests)."""
    times = {(a, p): _one(op, a, p, message_bytes, ranks, ranks_per_node, ring_bytes_per_s,
                          nvlink_bytes_per_s, nvls, nvlink, net_step_seconds) for a, p in CANDIDATES[op]}
    (algorithm, protocol), seconds = min(times.items(), key=lambda item: item[1])
    return algorithm, protocol, seconds
