"""Compute: useful work, sustained rate, run time, steps, and the parts of a step.

Two methods for time, chosen by ``assumptions.step_time_model``:

- ``efficiency`` (lesson 000): R_useful = N × peak × single-accelerator MFU × scaling efficiency
  (or × a measured end-to-end MFU); T = F / R; a step is T / steps. A stated utilization on the
  hardware-FLOPs basis (``end_to_end_hfu``, or ``single_accelerator_hfu`` × scaling efficiency) is the
  graph's option ``efficiency_hfu``: T = F_hardware / (N × peak × HFU), F_hardware the model's FLOPs
  plus the recomputation's; the MFU is then the achieved one, F / (T × N × peak).
- ``components`` (the default): a step is its micro-batches' compute on the busiest pipeline stage,
  the optimizer step, the pipeline bubble and the communication that is not overlapped (:mod:`botec.training.network`);
  T = steps × step.

The compute of one micro-batch on one rank, chosen by ``assumptions.compute_model``:

- ``op_level`` (the default when the architecture is known): every op of a layer on its roofline
  with the accelerator family's efficiency curve (:mod:`botec.training.ops`);
- ``model_flops``: model FLOPs at a stated model-FLOPs utilization (MFU, ``single_accelerator_mfu``);
- ``hardware_flops``: executed FLOPs, recomputation included, at a stated hardware-FLOPs
  utilization (HFU, ``single_accelerator_hfu``).

MFU counts the model's work (6·N per token + attention; PaLM App. B); HFU counts what the hardware
executes, recomputation included (Korthikanti et al. 2022 §5; Megatron-LM, BLOOM, MT-NLG and OPT
publish TFLOP/s on that basis: the 8·N rule with full recomputation). Both are reported.

Sources: lesson 000; Kaplan et al. 2020 (C ≈ 6ND); PaLM App. B (attention FLOPs);
Korthikanti et al. 2022 (recomputation; model vs hardware FLOPs); Narayanan et al. 2021
(1F1B bubble (p − 1)/m, interleaved (p − 1)/(v·m)); Qi et al. 2023, "Zero Bubble Pipeline Parallelism"
(arXiv:2401.10241; ZB-H1, ZB-H2); DeepSeek-V3 technical report (arXiv:2412.19437 §3.2.1, DualPipe).

The account's inputs are declared here; its formulas in three parts, listed in ``PARTS`` in the graph's order:
:mod:`.run` (tokens, steps, FLOPs, utilization, run and step time), :mod:`.step` (the parts of a step: micro-batch
compute, optimizer, offloading, pipeline bubble) and :mod:`.achieved` (achieved utilization, rates, accelerator-hours).
"""

from botec.graph import Formulas
from botec.layout import Recompute
from botec.training.compute.achieved import formulas as achieved_formulas
from botec.training.compute.run import formulas as run_formulas
from botec.training.compute.step import formulas as step_formulas

# The compute account's inputs: the parts below read them.
inputs = Formulas(account="compute")

inputs.input("accelerators", unit="accelerators",
             meaning="accelerators in the job (N)")
inputs.input("data_parallel_degree", unit="accelerators",
             meaning="model replicas that each process different examples: N / (TP × PP × CP)")
inputs.input("micro_batch_size", unit="sequences",
             meaning="sequences per accelerator per micro-step (B_local)")
inputs.input("gradient_accumulation_steps", unit="1",
             meaning="micro-batches per optimizer step on each data-parallel rank (m)")
inputs.input("virtual_pipeline_stages", unit="1",
             meaning="model chunks per pipeline stage (interleaved schedule: v > 1)")
inputs.input("pipeline_chunk_layers", unit="layers",
             meaning="layers of the largest model chunk: ⌈the fullest stage's layers / v⌉ (its layers in v chunks, "
                     "as even as they split)")
inputs.input("pipeline_schedule", unit="1",
             meaning="the pipeline schedule: 0 1F1B or interleaved, 1 zero bubble ZB-H1, 2 ZB-H2, 3 DualPipe")
inputs.input("context_parallel", unit="1",
             meaning="context-parallel degree (CP): ranks splitting each sequence")
inputs.input("recompute", unit="1", labels=[mode.label for mode in Recompute],
             meaning="activation recomputation: 0 none, 1 selective (the stack's: selective_recompute_policy), 2 "
                     "full layers")
inputs.input("selective_recompute_policy", unit="1", labels=["attention-core", "op-sac"], detail=True,
             meaning="what selective recomputation does in the stack: 0 Megatron's (the attention core), 1 "
                     "torchtitan's op-level SAC (every second matmul of a block and every non-matmul op)")
inputs.input("recompute_layer_fraction", unit="fraction",
             meaning="share of the layers full recomputation applies to (the rest keep all their activations)")
inputs.input("cpu_optimizer_parameters_per_s", unit="parameters/s",
             meaning="parameters per second the host CPUs of one node update when the optimizer is offloaded")
inputs.input("single_accelerator_mfu", unit="1",
             meaning="model-FLOPs utilization of one accelerator: its model FLOPs over its peak (MFU)")
inputs.input("single_accelerator_hfu", unit="1",
             meaning="hardware-FLOPs utilization of one accelerator: executed FLOPs, recomputation included, over "
                     "its peak (HFU)")
inputs.input("scaling_efficiency", unit="1",
             meaning="rate kept when the job is spread over N accelerators, relative to N single ones")


# The parts in the order the TRAINING graph lists them (a report lists the quantities in that order).
PARTS = (inputs, run_formulas, step_formulas, achieved_formulas)
