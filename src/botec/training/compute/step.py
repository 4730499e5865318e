"""Compute, the parts of a step: one micro-batch's compute and backward on the busiest stage, the optimizer step,
the CPU optimizer and the offloading not hidden, and the pipeline bubble of each schedule.
"""

from botec.graph import Formulas, maximum, where

formulas = Formulas(account="compute")


@formulas.formula(unit="1", meaning="the slowest pipeline stage's work over an even stage's (1 when p divides L)",
                  expression="pipeline_stage_layers × pipeline_parallel / layers", detail=True)
def pipeline_stage_imbalance(pipeline_stage_layers, pipeline_parallel, layers):
    return pipeline_stage_layers * pipeline_parallel / layers


@formulas.formula(unit="s", meaning="one micro-batch's forward, backward and recomputation on the busiest stage",
                  expression="max(pipeline_stage_layers × layer_seconds, last_stage_layers × layer_seconds"
                             " + output_layer_seconds)",
                  source="the op-level model (botec.training.ops); the last stage also runs the output layer",
                  choice=("compute", "op_level"))
def microbatch_compute_seconds(pipeline_stage_layers, layer_seconds, last_stage_layers, output_layer_seconds):
    return maximum(pipeline_stage_layers * layer_seconds, last_stage_layers * layer_seconds + output_layer_seconds)


@formulas.formula(unit="s", meaning="one micro-batch's compute on the busiest stage, from a stated MFU",
                  expression="model_flops_per_token × micro_batch_size × sequence_length × pipeline_stage_imbalance"
                             " / (tensor_parallel × pipeline_parallel × context_parallel × peak_flops_per_s"
                             " × single_accelerator_mfu)",
                  source="MFU: model FLOPs over the peak (PaLM App. B)", choice=("compute", "model_flops"))
def microbatch_compute_seconds(model_flops_per_token, micro_batch_size, sequence_length,  # noqa: F811
                               pipeline_stage_imbalance, tensor_parallel, pipeline_parallel, context_parallel,
                               peak_flops_per_s, single_accelerator_mfu):
    """Each rank executes 1/(t·p·cp) of a micro-batch's model FLOPs at MFU × peak; the stage with the most
    layers takes its imbalance longer."""
    return (model_flops_per_token * micro_batch_size * sequence_length * pipeline_stage_imbalance
            / (tensor_parallel * pipeline_parallel * context_parallel * peak_flops_per_s * single_accelerator_mfu))


@formulas.formula(unit="s", meaning="one micro-batch's compute on the busiest stage, from a stated HFU",
                  expression="hardware_flops_per_token × micro_batch_size × sequence_length × pipeline_stage_imbalance"
                             " / (tensor_parallel × pipeline_parallel × context_parallel × peak_flops_per_s"
                             " × single_accelerator_hfu)",
                  source="HFU: executed FLOPs, recomputation included, over the peak (Korthikanti et al. 2022 §5)",
                  choice=("compute", "hardware_flops"))
def microbatch_compute_seconds(hardware_flops_per_token, micro_batch_size, sequence_length,  # noqa: F811
                               pipeline_stage_imbalance, tensor_parallel, pipeline_parallel, context_parallel,
                               peak_flops_per_s, single_accelerator_hfu):
    return (hardware_flops_per_token * micro_batch_size * sequence_length * pipeline_stage_imbalance
            / (tensor_parallel * pipeline_parallel * context_parallel * peak_flops_per_s * single_accelerator_hfu))


@formulas.formula(unit="s", meaning="the backward pass of one micro-batch on the busiest stage (what can hide the "
                                    "data-parallel reduction)",
                  expression="pipeline_stage_layers × layer_backward_seconds", choice=("compute", "op_level"),
                  detail=True)
def microbatch_backward_seconds(pipeline_stage_layers, layer_backward_seconds):
    return pipeline_stage_layers * layer_backward_seconds


@formulas.formula(unit="s", meaning="the backward pass of one micro-batch on the busiest stage (what can hide the "
                                    "data-parallel reduction)",
                  expression="microbatch_compute_seconds × 2 / 3",
                  source="the backward is two thirds of a forward and backward (4 of 6 FLOPs per parameter)",
                  choice=("compute", "hardware_flops"), detail=True)
@formulas.formula(unit="s", meaning="the backward pass of one micro-batch on the busiest stage (what can hide the "
                                    "data-parallel reduction)",
                  expression="microbatch_compute_seconds × 2 / 3",
                  source="the backward is two thirds of a forward and backward (4 of 6 FLOPs per parameter)",
                  choice=("compute", "model_flops"), detail=True)
def microbatch_backward_seconds(microbatch_compute_seconds):  # noqa: F811
    return microbatch_compute_seconds * 2 / 3


@formulas.formula(unit="s", meaning="the optimizer step: its bytes at the sustained memory bandwidth",
                  expression="optimizer_step_bytes / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s)"
                             " + kernel_overhead_seconds",
                  source="Adam is memory-bound: it streams every state it updates; with the optimizer offloaded to "
                         "the CPU the device runs none (cpu_optimizer_step_seconds)", choice=("compute", "op_level"),
                  zero_when="optimizer_offload_cpu == 1")
def optimizer_step_seconds(optimizer_step_bytes, memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s,
                           kernel_overhead_seconds):
    return optimizer_step_bytes / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s) + kernel_overhead_seconds


@formulas.formula(unit="s", meaning="the optimizer step (inside the stated utilization)",
                  expression="0: a stated utilization already covers the optimizer", prose=True,
                  choice=("compute", "hardware_flops"))
@formulas.formula(unit="s", meaning="the optimizer step (inside the stated utilization)",
                  expression="0: a stated utilization already covers the optimizer", prose=True,
                  choice=("compute", "model_flops"))
def optimizer_step_seconds():  # noqa: F811
    return 0.0


@formulas.formula(unit="s",
                  meaning="compute time per step on the busiest accelerator: its micro-batches and the optimizer step",
                  expression="gradient_accumulation_steps × microbatch_compute_seconds + optimizer_step_seconds")
def compute_seconds_per_step(gradient_accumulation_steps, microbatch_compute_seconds, optimizer_step_seconds):
    return gradient_accumulation_steps * microbatch_compute_seconds + optimizer_step_seconds


@formulas.formula(unit="s", meaning="the optimizer step on the host CPUs (optimizer offloaded): the node's CPUs update "
                                    "the shards of all its accelerators",
                  expression="updated_parameters_per_device × accelerators_sharing_host / cpu_optimizer_parameters_per_s",
                  source="ZeRO-Offload (Ren et al. 2021 §5, CPU-Adam); the rate is assumptions.cpu_optimizer_rate",
                  zero_when="optimizer_offload_cpu == 0")
def cpu_optimizer_step_seconds(updated_parameters_per_device, accelerators_sharing_host,
                               cpu_optimizer_parameters_per_s):
    return updated_parameters_per_device * accelerators_sharing_host / cpu_optimizer_parameters_per_s


@formulas.formula(unit="s", meaning="offloading's time per step that compute does not hide: the CPU optimizer step and "
                                    "the host-link copies beyond what overlaps",
                  expression="cpu_optimizer_step_seconds + max(0, host_gradient_seconds − gradient_accumulation_steps"
                             " × microbatch_backward_seconds) + (max(0, host_weight_seconds − gradient_accumulation_steps"
                             " × microbatch_compute_seconds) if parameter_offload else host_weight_seconds)"
                             " + max(0, host_activation_seconds − gradient_accumulation_steps"
                             " × microbatch_compute_seconds) + paged_optimizer_seconds",
                  source="the overlap assumed: gradients stream to the host during the backward (ZeRO-Offload §4.1, "
                         "on a separate CUDA stream); activations move on a side stream during the forward and "
                         "backward (torchtune's activation offloading); offloaded weight shards are copied up ahead "
                         "of their gather, like the gathers themselves. On the critical path: the CPU optimizer step "
                         "and the upload of the updated 16-bit weights before the next forward (ZeRO-Offload without "
                         "its one-step delayed update, FSDP CPUOffload), and a paged optimizer's page migrations, "
                         "which fault on demand (QLoRA §3)")
def exposed_offload_seconds(cpu_optimizer_step_seconds, host_gradient_seconds, gradient_accumulation_steps,
                            microbatch_backward_seconds, host_weight_seconds, microbatch_compute_seconds,
                            parameter_offload, host_activation_seconds, paged_optimizer_seconds):
    gradients = maximum(host_gradient_seconds - gradient_accumulation_steps * microbatch_backward_seconds, 0.0)
    hidden_weights = maximum(host_weight_seconds - gradient_accumulation_steps * microbatch_compute_seconds, 0.0)
    weights = where(parameter_offload, hidden_weights, host_weight_seconds)
    activations = maximum(host_activation_seconds - gradient_accumulation_steps * microbatch_compute_seconds, 0.0)
    return cpu_optimizer_step_seconds + gradients + weights + activations + paged_optimizer_seconds


@formulas.formula(unit="s", meaning="the weight-gradient (W) part of one micro-batch's backward on the busiest stage",
                  expression="pipeline_stage_layers × layer_weight_gradient_seconds", choice=("compute", "op_level"),
                  source="Qi et al. 2023 (zero bubble) §2: the backward splits into B (input gradients) and W (weight "
                         "gradients), one GEMM each per forward GEMM", detail=True)
def microbatch_weight_gradient_seconds(pipeline_stage_layers, layer_weight_gradient_seconds):
    return pipeline_stage_layers * layer_weight_gradient_seconds


@formulas.formula(unit="s", meaning="the weight-gradient (W) part of one micro-batch's backward on the busiest stage",
                  expression="microbatch_compute_seconds × 2 × (1 − frozen_base) × matmul_parameters"
                             " / hardware_flops_per_token",
                  source="the weight gradients are 2 of the 6 FLOPs per parameter and token (Qi et al. 2023 §2), "
                         "none for a frozen base", choice=("compute", "hardware_flops"), detail=True)
@formulas.formula(unit="s", meaning="the weight-gradient (W) part of one micro-batch's backward on the busiest stage",
                  expression="microbatch_compute_seconds × 2 × (1 − frozen_base) × matmul_parameters"
                             " / hardware_flops_per_token",
                  source="the weight gradients are 2 of the 6 FLOPs per parameter and token (Qi et al. 2023 §2), "
                         "none for a frozen base", choice=("compute", "model_flops"), detail=True)
def microbatch_weight_gradient_seconds(microbatch_compute_seconds, frozen_base, matmul_parameters,  # noqa: F811
                                       hardware_flops_per_token):
    return microbatch_compute_seconds * 2 * (1 - frozen_base) * matmul_parameters / hardware_flops_per_token


@formulas.formula(unit="fraction", meaning="the largest model chunk's share of the fullest stage's layers (1/v when v "
                                           "divides them, 1 without interleaving)",
                  expression="pipeline_chunk_layers / pipeline_stage_layers", detail=True)
def pipeline_chunk_share(pipeline_chunk_layers, pipeline_stage_layers):
    return pipeline_chunk_layers / pipeline_stage_layers


@formulas.formula(unit="s",
                  meaning="idle time per step while the pipeline fills and drains",
                  expression="1F1B and interleaved: (p − 1) × pipeline_chunk_share × (t + c); zb-h1: (p − 1) × "
                             "(max(0, t − 2·W) + c); zb-h2: (p − 1) × (max(0, t − 3·W) + c); dualpipe: "
                             "(p/2 − 1) × (max(0, t + B − 3·W) + c)",
                  source="Narayanan et al. 2021 §2.2: 1F1B idles (p − 1) micro-batch times per step, the "
                         "interleaved schedule (p − 1) model-chunk times, (p − 1)/v of a stage's when the v chunks "
                         "are equal (Llama 3 §3.3.2: (PP − 1)/(V·M)); Qi et al. 2023 Table 1 (F + B + W = t): ZB-H1 "
                         "(p − 1)(F + B − W), ZB-H2 (p − 1)(F + B − 2W); DeepSeek-V3 Table 2: DualPipe (PP/2 − 1)"
                         "(F&B + B − 3W), B the full backward",
                  prose=True,
                  symbols={"p": "pipeline_parallel", "t": "microbatch_compute_seconds",
                           "c": "exposed_model_parallel_seconds / gradient_accumulation_steps",
                           "W": "microbatch_weight_gradient_seconds", "B": "microbatch_backward_seconds"})
def pipeline_bubble_seconds(pipeline_parallel, pipeline_chunk_share, pipeline_schedule, microbatch_compute_seconds,
                            microbatch_backward_seconds, microbatch_weight_gradient_seconds,
                            exposed_model_parallel_seconds, gradient_accumulation_steps):
    """The pipeline's fill and drain, in the busiest stage's micro-batch time t (forward, backward and
    recomputation: F + B + W in the zero-bubble papers' terms) plus its on-path communication c.

    - 1F1B: (p − 1) × (t + c) (Narayanan et al. 2021 §2.2.1).
    - Interleaved, v chunks per stage: (p − 1) × (t + c) × (the largest chunk's layers / the stage's). The
      fill and drain move one model chunk per hop (§2.2.2: t_pb = (p − 1)(t_f + t_b)/v for equal chunks);
      when v does not divide a stage's layers (Llama 3 405B: 7, 8 × 14, 7 layers) the chunks are as even
      as they split and each hop waits for the largest, ⌈L_max/v⌉ layers: the bound we charge.
    - ZB-H1 (Qi et al. 2023 §3.1, Table 1): the weight gradients W fill the bubble, leaving (p − 1)(F + B −
      W) = (p − 1)(t − 2W), a third of 1F1B's when F = B = W, at 1F1B's activation memory.
    - ZB-H2: (p − 1)(F + B − 2W) = (p − 1)(t − 3W), none when F = B = W, with 2p − 1 micro-batches of
      activations in flight instead of p (pipeline_activation_factor).
    - DualPipe (DeepSeek-V3 Table 2): (p/2 − 1)(F&B + B − 3W), F&B the overlapped forward and backward
      pair, which we charge as F + B (the overlap hides communication, not compute): (p/2 − 1)(t + B − 3W),
      with two copies of each stage's parameters and p + 1 micro-batches of activations.

    The on-path communication of a micro-batch, c = exposed_model_parallel_seconds / m, is charged once per
    hop like its compute (per chunk under interleaving). A negative remainder (W larger than the rest) counts
    as no bubble.
    """
    hops = pipeline_parallel - 1
    t = microbatch_compute_seconds
    w = microbatch_weight_gradient_seconds
    c = exposed_model_parallel_seconds / gradient_accumulation_steps
    one_f_one_b = hops * pipeline_chunk_share * (t + c)
    zb_h1 = hops * (maximum(t - 2 * w, 0.0) + c)
    zb_h2 = hops * (maximum(t - 3 * w, 0.0) + c)
    dualpipe = (pipeline_parallel / 2 - 1) * (maximum(t + microbatch_backward_seconds - 3 * w, 0.0) + c)
    return where(pipeline_schedule >= 3, dualpipe, where(pipeline_schedule >= 2, zb_h2,
                                                         where(pipeline_schedule >= 1, zb_h1, one_f_one_b)))


@formulas.formula(unit="1", meaning="the pipeline bubble over the compute time of a step (a ratio: above 1 the "
                                     "pipeline idles longer than it computes)",
                  expression="pipeline_bubble_seconds / compute_seconds_per_step", detail=True,
                  source="1F1B: (p − 1)(t + c) / (m·t) (Narayanan et al. 2021 §2.2.1): one micro-batch on p = 4 "
                         "stages idles 3 × its compute, more with on-path communication c; was pipeline_bubble_share, "
                         "labelled a fraction (issue 28)")
def pipeline_bubble_to_compute_ratio(pipeline_bubble_seconds, compute_seconds_per_step):
    return pipeline_bubble_seconds / compute_seconds_per_step
