"""The training estimate's accounts, composed into the ``TRAINING`` graph.

The graph reads the model's shape and weights (:mod:`botec.formulas`), the workload, compute,
accelerator memory, network and storage accounts of a training job, the facility's and the run's
cost and energy (:mod:`botec.economics`), and the thresholds of its findings.
"""

from botec import economics
from botec.formulas import device, links, transformer, weights
from botec.graph import Formulas, Graph
from botec.training import adapters, compute, goodput, memory, network, ops, storage, workload

thresholds = Formulas(account="findings")
thresholds.input("collective_overlap_share_threshold", unit="fraction",
                 meaning="collective floor share of the step above which communication must overlap with compute")
thresholds.input("checkpoint_pause_share_threshold", unit="fraction",
                 meaning="share of wall time lost to checkpoint writes above which it is a problem")
thresholds.input("goodput_threshold", unit="fraction",
                 meaning="goodput (useful training time over expected wall time) below which it is worth fixing")
thresholds.input("pipeline_bubble_share_threshold", unit="1",
                 meaning="pipeline bubble over the compute time (pipeline_bubble_to_compute_ratio) above which it is "
                         "worth shrinking")

# Each account split into parts (compute, memory, network) lists them in their order: a report lists the quantities
# in the order they are defined.
TRAINING = Graph("training", transformer.formulas, workload.formulas, device.formulas, weights.formulas,
                 *compute.PARTS, ops.formulas, *memory.PARTS, adapters.formulas, links.formulas, *network.PARTS,
                 storage.formulas,
                 goodput.formulas,
                 economics.facility, economics.training, thresholds)

# What every training estimate must resolve; a missing one names the contract field to state.
REQUIRED = ("steps", "training_flops", "step_seconds", "run_seconds", "accelerator_hours", "planned_device_bytes",
            "memory_spare_bytes", "max_micro_batch_size", "checkpoint_bytes", "retained_storage_bytes",
            "input_bytes_per_s", "collective_bytes_sent_per_step")
