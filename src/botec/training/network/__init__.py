"""Network: every recurring collective, its bytes per step, the link it crosses, its time.

Source: lesson 000 ("Network: count traffic at each synchronization boundary"): the ring
all-reduce sends 2(N−1)/N · M per participant. Beyond replicated data parallelism:

- data parallel: plain data parallelism all-reduces the gradients over the DP ranks once per
  step. ZeRO/FSDP reduce-scatters them over the shard group (and, with hybrid sharding,
  all-reduces the shards across the replicas): once per step for ZeRO-1 (Megatron's distributed
  optimizer), every micro-batch for ZeRO-2/3 and FSDP (DeepSpeed engine.allreduce_gradients). The
  weights are all-gathered once per step after the optimizer (ZeRO-1/2), before the forward and
  the backward of every micro-batch (ZeRO-3, FSDP full shard; Rajbhandari et al. 2020 §7), or once
  per micro-batch (FSDP shard_grad_op). Gradients travel in the optimizer preset's gradient bytes
  (FP32 for Megatron's). Expert gradients and weights do the same over the expert data-parallel
  group instead: the ranks that hold the same expert, EP apart (shard / EP of them under ZeRO, DP / EP
  without), at that group's own link (Megatron-Core's expert_data_parallel_group).
- tensor parallel: 2 all-reduces of the layer's output in the forward pass and 2 in the
  backward, per layer per micro-batch (Shoeybi et al. 2019); with sequence parallelism each is
  a reduce-scatter + all-gather of the same total size (Korthikanti et al. 2022), and the
  backward all-gathers the saved input again (one more all-reduce's bytes); full recomputation
  repeats the forward's 2.
- pipeline parallel: each stage sends a micro-batch's activations forward and their gradients
  backward (× v chunks when interleaved), 1/t of the hidden state per TP rank (scatter-gather).
- context parallel (ring attention): each layer all-gathers the K and V chunks of the sequence
  in the forward and again in the backward, and reduce-scatters their gradients.
- expert parallel: dispatch and combine all-to-alls per MoE layer, forward and backward.

Each collective is written once as *how many per step* × *one collective* (bytes, or time: inside one node of
an accelerator NCCL's tables were measured on, the tables' time at its message size and rank count,
:func:`botec.formulas.collective_tables.measured_or_modelled`; elsewhere the α–β model of
:mod:`botec.formulas.collectives`) over the link of the group it runs in
(:mod:`botec.formulas.links`; across nodes a group's ranks in one node pool their NICs,
:func:`botec.formulas.collectives.hierarchical_bytes_per_s`). A group of one rank sends nothing and
needs no link (``zero_when``). The stage with the most layers sets the per-layer counts. What compute
does not hide is exposed: the model-parallel share ``1 − model_parallel_overlap``; the data-parallel
share ``1 − data_parallel_overlap``, but never more hidden than the backward it overlaps, or, for
weights gathered per micro-batch (ZeRO-3, FSDP), than each layer's compute hides of the next layer's
gather and reduce-scatter (prefetch one layer ahead).

The account's inputs are declared here; its formulas in four parts, listed in ``PARTS`` in the graph's order:
:mod:`.data_parallel` (gradients and weight gathers), :mod:`.model_parallel` (TP, PP, CP, EP), :mod:`.host_link`
(offloading's copies) and :mod:`.exposed` (totals, the bandwidth floor, what compute does not hide).
"""

from botec.graph import Formulas
from botec.training.network.data_parallel import formulas as data_parallel_formulas
from botec.training.network.exposed import formulas as exposed_formulas
from botec.training.network.granularity import formulas as granularity_formulas
from botec.training.network.host_link import formulas as host_link_formulas
from botec.training.network.model_parallel import formulas as model_parallel_formulas

# The network account's inputs: the parts below read them.
inputs = Formulas(account="network")

inputs.input("collective_algorithm_tree", unit="1",
             meaning="all-reduce algorithm: 0 ring, 1 tree (fewer latency steps, same bytes)")
inputs.input("data_parallel_overlap_stated", unit="1", detail=True,
             meaning="the share of data-parallel communication the contract states hidden; −1 when none is stated "
                     "(derived from the schedule)")
inputs.input("data_parallel_schedule", unit="1", detail=True,
             labels=("after the backward", "during the backward", "during the backward, weights under the next forward"),
             meaning="when the stack runs its data-parallel collectives: 0 after the backward, 1 during it (buckets, "
                     "FSDP prefetch), 2 also ZeRO-1/2's weight all-gather under the next step's first forward")
inputs.input("model_parallel_overlap", unit="1", meaning="share of TP, CP, EP and PP communication hidden behind "
                                                         "compute")
inputs.input("tp_comm_overlap", unit="1", detail=True, meaning="1 when the TP collectives overlap the GEMMs they feed "
                                                  "(strategy.tp_comm_overlap), else 0")
inputs.input("tp_overlap_sm_share", unit="1", detail=True,
             meaning="share of the SMs an overlapped TP collective's kernels take from the GEMM beside it")
# Where a group's collectives are priced from NCCL's measured tables (written out: grep finds each name here).
_TABLE_INDEX = ("the accelerator whose measured NCCL tables price the {} (botec.formulas.collective_tables."
                "nccl_devices position; −1: none, the α–β ring of the group's link): set where the group sits in one "
                "node and its link is the catalog's, not stated")
inputs.input("tp_collective_table_index", unit="1", detail=True,
             meaning=_TABLE_INDEX.format("tensor-parallel collectives"))
inputs.input("dp_collective_table_index", unit="1", detail=True,
             meaning=_TABLE_INDEX.format("data-parallel gradient all-reduces"))
inputs.input("shard_collective_table_index", unit="1", detail=True,
             meaning=_TABLE_INDEX.format("ZeRO/FSDP shard group's reduce-scatters and all-gathers"))
inputs.input("replica_groups", unit="1", meaning="replicas of each ZeRO/FSDP shard group (hybrid sharding: > 1)")
inputs.input("expert_data_parallel_degree", unit="1", meaning="data-parallel replicas of each expert: DP / EP")
inputs.input("parameter_gathers_per_microbatch", unit="1", detail=True,
             meaning="weight all-gathers per micro-batch: 2 for ZeRO-3 / FSDP full shard (forward and backward), "
                     "1 for FSDP shard_grad_op, 0 otherwise")
inputs.input("post_step_parameter_gathers", unit="1", detail=True,
             meaning="weight all-gathers after the optimizer step: 1 for ZeRO-1/2 (the updated shards), 0 otherwise")


# The parts in the order the TRAINING graph lists them (a report lists the quantities in that order).
PARTS = (inputs, granularity_formulas, data_parallel_formulas, model_parallel_formulas, host_link_formulas, exposed_formulas)
