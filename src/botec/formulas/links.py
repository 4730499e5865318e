"""The links each parallel group's collectives cross: inputs placed by :mod:`botec.inputs.cluster`.

A group stays on the intra-node tier while the accelerators it spans fit in one node, and crosses
the inter-node tier otherwise (ranks in Megatron's order: TP, CP, DP ⊃ EP, PP). Which tier a group
crosses is a fact of the layout placed on the cluster, decided where the layout is: the graph
receives each group's bandwidth and latency per step, with the tier named in its source.
"""

from botec.graph import Formulas

formulas = Formulas(account="network")

formulas.input("accelerators_per_node", unit="accelerators", meaning="accelerators sharing the fast intra-node links")
formulas.input("intra_node_bytes_per_s", unit="B/s",
               meaning="usable bandwidth per accelerator per direction inside a node (NVLink-class)")
formulas.input("inter_node_bytes_per_s", unit="B/s",
               meaning="usable bandwidth per accelerator per direction across nodes (its NIC share)")
formulas.input("intra_node_latency_seconds", unit="s", meaning="latency per collective step inside a node (α)")
formulas.input("inter_node_latency_seconds", unit="s", meaning="latency per collective step across nodes (α)")

# Each group's link, written out (grep finds each name here).
formulas.input("tp_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the tensor-parallel collectives cross")
formulas.input("tp_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the tensor-parallel collectives cross")
formulas.input("cp_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the context-parallel exchanges cross")
formulas.input("cp_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the context-parallel exchanges cross")
formulas.input("ep_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the expert all-to-alls cross")
formulas.input("ep_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the expert all-to-alls cross")
formulas.input("dp_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the data-parallel gradient all-reduces cross")
formulas.input("dp_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the data-parallel gradient all-reduces cross")
formulas.input("shard_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the ZeRO/FSDP shard group's collectives cross")
formulas.input("shard_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the ZeRO/FSDP shard group's collectives cross")
formulas.input("edp_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the expert data-parallel group's reductions and gathers cross (its "
                       "ranks sit EP apart)")
formulas.input("edp_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the expert data-parallel group's reductions and gathers cross")
formulas.input("pp_link_bytes_per_s", unit="B/s",
               meaning="bandwidth of the tier the pipeline sends cross")
formulas.input("pp_link_latency_seconds", unit="s",
               meaning="latency per step of the tier the pipeline sends cross")

# Collectives across nodes: what NCCL's cost model needs besides each group's link (botec.formulas.nccl_tuning).
formulas.input("dp_ranks_per_node", unit="ranks", detail=True,
               meaning="ranks of one data-parallel gradient all-reduce inside one node (fewer than its ranks: it "
                       "crosses nodes)")
formulas.input("shard_ranks_per_node", unit="ranks", detail=True,
               meaning="ranks of one ZeRO/FSDP shard-group collective inside one node (fewer than its ranks: it "
                       "crosses nodes)")
formulas.input("collective_nvlink_bytes_per_s", unit="B/s", detail=True,
               meaning="one accelerator's NVLink bandwidth (the intra-node tier), the cap of NCCL's NVLS tree")
formulas.input("collective_node_kind", unit="1", detail=True, labels=("PCIe", "NVLink", "NVLink with NVLS"),
               meaning="how a node's accelerators talk, for NCCL's model: 0 PCIe, 1 NVLink, 2 NVLink with an NVSwitch "
                       "that reduces (NVLS: Hopper and later)")
