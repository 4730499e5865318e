"""Collective times with the α–β model: latency per step + bytes / bandwidth.

Sizes follow NCCL's convention (NVIDIA/nccl-tests, doc/PERFORMANCE.md): ``message_bytes`` is the
full buffer (the all-reduced tensor; the gathered result of an all-gather; the scattered input of
a reduce-scatter; the per-rank buffer of an all-to-all). For n ranks, the bus bandwidth of a
collective is its algorithm bandwidth S / t times a factor — all-reduce 2(n−1)/n, reduce-scatter,
all-gather and all-to-all (n−1)/n — so at a link bandwidth B a ring needs

    all-reduce       t = 2(n−1)·α + 2(n−1)/n · S / B
    reduce-scatter   t =  (n−1)·α +  (n−1)/n · S / B
    all-gather       t =  (n−1)·α +  (n−1)/n · S / B
    all-to-all       t =  (n−1)·α +  (n−1)/n · S / B
    send/receive     t =        α +            S / B

and a (double binary) tree all-reduce 2⌈log₂ n⌉·α + 2(n−1)/n · S / B: fewer latency steps, the
same bytes. B is the bandwidth per rank per direction of the tier the group crosses; α the
per-step latency of that tier. Every function is elementwise (floats or numpy arrays); n = 1
costs nothing. The formulas of :mod:`botec.training.network` write each collective's time as its
latency steps × α plus the bytes it sends (a quantity of its own) over B.
"""

from __future__ import annotations

from botec.graph.elementwise import ceil, log2, maximum, minimum, where

__all__ = ["all_reduce_bytes_sent", "gather_bytes_sent", "all_reduce_latency_steps", "all_reduce_seconds",
           "ring_collectives_seconds", "hierarchical_bytes_per_s", "all_to_all_bytes_per_s"]


def all_reduce_bytes_sent(message_bytes, ranks):
    """Bytes each rank sends in a ring all-reduce: 2(n−1)/n · S."""
    return 2 * (ranks - 1) / ranks * message_bytes


def gather_bytes_sent(message_bytes, ranks):
    """Bytes each rank sends in a ring reduce-scatter, all-gather or all-to-all: (n−1)/n · S."""
    return (ranks - 1) / ranks * message_bytes


def all_reduce_latency_steps(ranks, tree=0):
    """Latency steps of an all-reduce: 2(n − 1) for a ring (tree=0), 2⌈log₂ n⌉ for a tree (tree=1)."""
    ring_steps = 2 * (ranks - 1)
    tree_steps = where(ranks > 1, 2 * ceil(log2(maximum(ranks, 1))), 0)
    return where(tree, tree_steps, ring_steps)


def all_reduce_seconds(message_bytes, ranks, bytes_per_s, latency_seconds, tree=0):
    """Ring (tree=0) or tree (tree=1) all-reduce of ``message_bytes`` over ``ranks``."""
    return (all_reduce_latency_steps(ranks, tree) * latency_seconds
            + all_reduce_bytes_sent(message_bytes, ranks) / bytes_per_s)


def ring_collectives_seconds(collectives, ranks, latency_seconds, bytes_sent, bytes_per_s):
    """Time of ``collectives`` ring reduce-scatters, all-gathers or all-to-alls over ``ranks`` that together send
    ``bytes_sent`` per rank: c·(n − 1)·α + bytes_sent / B."""
    return collectives * (ranks - 1) * latency_seconds + bytes_sent / bytes_per_s


def hierarchical_bytes_per_s(ranks_per_node, intra_bytes_per_s, inter_bytes_per_s):
    """Per-rank bandwidth of a ring collective (all-reduce, reduce-scatter, all-gather) over several nodes.

    A group with l ranks in each node runs l rings at once (NCCL builds one channel per NIC, or
    reduce-scatters inside the node, reduces across nodes and gathers inside the node): each rank
    sends (l − 1)/l of its bytes over the intra-node links and 1/l through its own NIC, the two
    concurrently. Its B in t = bytes_sent / B is then

        B = min(l · B_inter, l / (l − 1) · B_intra)      (B_inter for l = 1)

    Sources: NCCL's multi-rail rings (one per NIC); hierarchical all-reduce (Jia et al. 2018,
    "Highly Scalable Deep Learning Training System with Mixed-Precision"); formula-audit row 17.
    """
    through_nics = ranks_per_node * inter_bytes_per_s
    through_links = where(ranks_per_node > 1, intra_bytes_per_s * ranks_per_node / maximum(ranks_per_node - 1, 1),
                          through_nics)
    return minimum(through_nics, through_links)


def all_to_all_bytes_per_s(ranks, ranks_per_node, intra_bytes_per_s, inter_bytes_per_s):
    """Per-rank bandwidth of an all-to-all over several nodes, l ranks in each.

    Each rank sends (n − l)/n of its buffer to other nodes through its NIC and (l − 1)/n to its own
    node's ranks over the intra-node links, concurrently; with bytes_sent = (n − 1)/n · S,

        B = ((n − 1)/n) / max((n − l)/(n · B_inter), (l − 1)/(n · B_intra))
    """
    off_node = (ranks - ranks_per_node) / (ranks * inter_bytes_per_s)
    on_node = (ranks_per_node - 1) / (ranks * intra_bytes_per_s)
    return ((ranks - 1) / ranks) / maximum(maximum(off_node, on_node), 1e-300)
