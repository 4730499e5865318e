"""Compute: useful work, sustained rate, run time, steps, and the parts of a step.

Two methods for time, chosen by ``assumptions.step_time_model``:

- ``efficiency`` (lesson 000): R_useful = N × peak × single-accelerator MFU × scaling efficiency
  (or × a measured end-to-end MFU); T = F / R; a step is T / steps. A stated utilization on the
  hardware-FLOPs basis (``end_to_end_hfu``, or ``single_accelerator_hfu`` × scaling efficiency) is the
  graph's option ``efficiency_hfu``: T = F_hardware / (N × peak × HFU), F_hardware the model's FLOPs
  plus the recomputation's; the MFU is then the achieved one, F / (T × N × peak).
- ``components`` (the default): a step is its micro-batches' compute on the busiest pipeline stage,
  the optimizer step, the pipeline bubble and the communication that is not overlapped (network.py);
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
"""

from botec.graph import Formulas, ceil, maximum, where
from botec.layout import Recompute

formulas = Formulas(account="compute")

formulas.input("accelerators", unit="accelerators",
               meaning="accelerators in the job (N)")
formulas.input("data_parallel_degree", unit="accelerators",
               meaning="model replicas that each process different examples: N / (TP × PP × CP)")
formulas.input("micro_batch_size", unit="sequences",
               meaning="sequences per accelerator per micro-step (B_local)")
formulas.input("gradient_accumulation_steps", unit="1",
               meaning="micro-batches per optimizer step on each data-parallel rank (m)")
formulas.input("virtual_pipeline_stages", unit="1",
               meaning="model chunks per pipeline stage (interleaved schedule: v > 1)")
formulas.input("pipeline_chunk_layers", unit="layers",
               meaning="layers of the largest model chunk: ⌈the fullest stage's layers / v⌉ (its layers in v chunks, "
                       "as even as they split)")
formulas.input("pipeline_schedule", unit="1",
               meaning="the pipeline schedule: 0 1F1B or interleaved, 1 zero bubble ZB-H1, 2 ZB-H2, 3 DualPipe")
formulas.input("context_parallel", unit="1",
               meaning="context-parallel degree (CP): ranks splitting each sequence")
formulas.input("recompute", unit="1",
               meaning="activation recomputation: 0 none, 1 selective (attention core), 2 full layers")
formulas.input("recompute_layer_fraction", unit="fraction",
               meaning="share of the layers full recomputation applies to (the rest keep all their activations)")
formulas.input("cpu_optimizer_parameters_per_s", unit="parameters/s",
               meaning="parameters per second the host CPUs of one node update when the optimizer is offloaded")
formulas.input("single_accelerator_mfu", unit="1",
               meaning="model-FLOPs utilization of one accelerator: its model FLOPs over its peak (MFU)")
formulas.input("single_accelerator_hfu", unit="1",
               meaning="hardware-FLOPs utilization of one accelerator: executed FLOPs, recomputation included, over "
                       "its peak (HFU)")
formulas.input("scaling_efficiency", unit="1",
               meaning="rate kept when the job is spread over N accelerators, relative to N single ones")


@formulas.formula(unit="tokens",
                  meaning="tokens consumed by one optimizer step across all replicas",
                  expression="data_parallel_degree × micro_batch_size × gradient_accumulation_steps × sequence_length",
                  source="lesson 000: 4 × 2 × 2,048 = 16,384")
def global_tokens_per_step(data_parallel_degree, micro_batch_size, gradient_accumulation_steps, sequence_length):
    """Global batch in tokens: DP × B_local × accumulation × S."""
    return data_parallel_degree * micro_batch_size * gradient_accumulation_steps * sequence_length


@formulas.formula(unit="steps",
                  meaning="optimizer steps to process the training tokens",
                  expression="⌈tokens / global_tokens_per_step⌉",
                  source="lesson 000: ⌈10⁹ / 16,384⌉ = 61,036")
def steps(tokens, global_tokens_per_step):
    """Steps = ⌈D / tokens per step⌉ (the last step may be partial)."""
    return ceil(tokens / global_tokens_per_step)


@formulas.formula(unit="FLOP",
                  meaning="useful model work per token, forward + backward (model FLOPs: the basis of MFU); under "
                          "LoRA the work a LoRA step needs: 4 per frozen parameter, 6 per adapter parameter",
                  expression="(6 − 2 × frozen_base) × (matmul_parameters + mtp_matmul_parameters) + 6 × "
                             "adapter_matmul_parameters + attention_flops_per_token",
                  source="lesson 000 and Kaplan et al. 2020: 6 FLOPs per parameter per token; PaLM App. B; "
                         "DeepSeek-V3's multi-token-prediction modules add theirs; a frozen (LoRA) matrix needs no "
                         "weight gradient: 2 forward + 2 backward (Hu et al. 2021)")
def model_flops_per_token(matmul_parameters, mtp_matmul_parameters, attention_flops_per_token, frozen_base,
                          adapter_matmul_parameters):
    """6·N (2 forward, 4 backward per parameter) plus the attention-score term of the stated convention. Under
    LoRA the frozen base does 2·N forward and 2·N backward (input gradients only) and the adapters 6·N_A: the
    MFU basis is the work a LoRA step needs, without recomputation."""
    return ((6 - 2 * frozen_base) * (matmul_parameters + mtp_matmul_parameters) + 6 * adapter_matmul_parameters
            + attention_flops_per_token)


@formulas.formula(unit="fraction", meaning="share of the layers under full recomputation (0 unless recompute is full)",
                  expression="recompute_layer_fraction", zero_when="recompute < 2",
                  source="Megatron-LM --recompute-granularity full --recompute-num-layers: φ·L layers checkpoint "
                         "their input, the rest keep every activation", detail=True)
def full_recompute_share(recompute_layer_fraction):
    return recompute_layer_fraction


@formulas.formula(unit="FLOP",
                  meaning="forward work done again by activation recomputation, per token",
                  expression="full_recompute_share × (2 × (matmul_parameters − lm_head_matmul_parameters + "
                             "adapter_matmul_parameters) + attention_flops_per_token / 3) if recompute = full; "
                             "attention_flops_per_token / 3 if selective with eager attention; else 0",
                  source="Korthikanti et al. 2022 §5: full recompute repeats the forward of the transformer layers "
                         "(not the output layer: 96·B·s·l·h²(1 + s/6h + V/16lh)), LoRA adapters included, on the "
                         "share of the layers that recompute (Megatron --recompute-num-layers); selective only the "
                         "attention core, and nothing under a fused (flash) kernel, which keeps no scores to drop",
                  detail=True, prose=True)
def recompute_flops_per_token(recompute, matmul_parameters, lm_head_matmul_parameters, attention_flops_per_token,
                              adapter_matmul_parameters, full_recompute_share, fused_attention):
    forward_attention = attention_flops_per_token / 3
    layers_forward = 2 * (matmul_parameters - lm_head_matmul_parameters + adapter_matmul_parameters)
    selective = where(fused_attention, 0.0, forward_attention)
    return where(recompute >= Recompute.FULL, full_recompute_share * (layers_forward + forward_attention),
                 where(recompute >= Recompute.SELECTIVE, selective, 0.0))


@formulas.formula(unit="FLOP",
                  meaning="work the hardware executes per token (model + recomputation: the basis of HFU)",
                  expression="model_flops_per_token + recompute_flops_per_token")
def hardware_flops_per_token(model_flops_per_token, recompute_flops_per_token):
    return model_flops_per_token + recompute_flops_per_token


@formulas.formula(unit="FLOP",
                  meaning="useful model work for the whole run",
                  expression="model_flops_per_token × tokens",
                  source="lesson 000: 6PD = 6 × 10⁹ × 10⁹ = 6 × 10¹⁸")
def training_flops(model_flops_per_token, tokens):
    """F_train ≈ 6·P·D (+ attention): useful model work, not what the hardware executes."""
    return model_flops_per_token * tokens


@formulas.formula(unit="FLOP",
                  meaning="work the hardware executes over the run, recomputation included",
                  expression="hardware_flops_per_token × tokens")
def hardware_training_flops(hardware_flops_per_token, tokens):
    return hardware_flops_per_token * tokens


@formulas.formula(unit="1",
                  meaning="share of the N accelerators' peak delivered as useful model FLOPs",
                  expression="single_accelerator_mfu × scaling_efficiency",
                  source="lesson 000: 0.30 × 0.80", choice=("step_time", "efficiency"))
def end_to_end_mfu(single_accelerator_mfu, scaling_efficiency):
    """MFU of the whole job = single-accelerator MFU × scaling efficiency.

    A measured end-to-end MFU already includes the scaling losses; when the contract states
    one it replaces this product (multiplying it by a scaling factor would count them twice).
    """
    return single_accelerator_mfu * scaling_efficiency


@formulas.formula(unit="1",
                  meaning="share of the N accelerators' peak delivered as useful model FLOPs (achieved MFU)",
                  expression="training_flops / (run_seconds × accelerators × peak_flops_per_s)",
                  choice=("step_time", "components"))
@formulas.formula(unit="1",
                  meaning="share of the N accelerators' peak delivered as useful model FLOPs (the MFU of the stated "
                          "HFU: recomputation is work the model did not need)",
                  expression="training_flops / (run_seconds × accelerators × peak_flops_per_s)",
                  source="PaLM App. B: MFU counts the model's FLOPs, HFU the executed ones",
                  choice=("step_time", "efficiency_hfu"))
def end_to_end_mfu(training_flops, run_seconds, accelerators, peak_flops_per_s):  # noqa: F811
    """MFU implied by the component step time, or by a stated hardware-FLOPs utilization."""
    return training_flops / (run_seconds * accelerators * peak_flops_per_s)


@formulas.formula(unit="FLOP/s",
                  meaning="sustained useful compute rate of the whole job",
                  expression="accelerators × peak_flops_per_s × end_to_end_mfu",
                  source="lesson 000: 4 × 200 TFLOP/s × 0.30 × 0.80 = 192 TFLOP/s")
def useful_flops_per_s(accelerators, peak_flops_per_s, end_to_end_mfu):
    """R_useful = N × peak × MFU_end-to-end."""
    return accelerators * peak_flops_per_s * end_to_end_mfu


@formulas.formula(unit="s",
                  meaning="first-pass run time, excluding checkpoint pauses and failures",
                  expression="training_flops / useful_flops_per_s",
                  source="lesson 000: 6 × 10¹⁸ / 192 × 10¹² = 31,250 s", choice=("step_time", "efficiency"))
def run_seconds(training_flops, useful_flops_per_s):
    """T_train ≈ F_train / R_useful."""
    return training_flops / useful_flops_per_s


@formulas.formula(unit="1",
                  meaning="share of the N accelerators' peak the hardware executes as FLOPs, recomputation included "
                          "(end-to-end HFU)",
                  expression="single_accelerator_hfu × scaling_efficiency",
                  source="the lesson's product with hardware FLOPs (Korthikanti et al. 2022 §5: HFU counts the "
                         "recomputation); a measured end-to-end HFU (assumptions.end_to_end_hfu) replaces it",
                  choice=("step_time", "efficiency_hfu"))
def end_to_end_hfu(single_accelerator_hfu, scaling_efficiency):
    """HFU of the whole job = single-accelerator HFU × scaling efficiency; a stated end-to-end HFU replaces it."""
    return single_accelerator_hfu * scaling_efficiency


@formulas.formula(unit="s",
                  meaning="first-pass run time from a stated hardware-FLOPs utilization, excluding checkpoint pauses "
                          "and failures",
                  expression="hardware_training_flops / (accelerators × peak_flops_per_s × end_to_end_hfu)",
                  source="T = executed FLOPs / (N × peak × HFU): the lesson's method on the HFU basis (Korthikanti "
                         "et al. 2022 §5; PaLM App. B)", choice=("step_time", "efficiency_hfu"))
def run_seconds(hardware_training_flops, accelerators, peak_flops_per_s, end_to_end_hfu):  # noqa: F811
    """T_train ≈ F_hardware / (N × peak × HFU): F_hardware the model's FLOPs plus the recomputation's."""
    return hardware_training_flops / (accelerators * peak_flops_per_s * end_to_end_hfu)


@formulas.formula(unit="s",
                  meaning="run time: steps × step time, excluding checkpoint pauses and failures",
                  expression="steps × step_seconds", choice=("step_time", "components"))
def run_seconds(steps, step_seconds):  # noqa: F811
    return steps * step_seconds


@formulas.formula(unit="s",
                  meaning="average time per optimizer step",
                  expression="run_seconds / steps",
                  source="lesson 000: ≈ 0.51 s", choice=("step_time", "efficiency"))
@formulas.formula(unit="s",
                  meaning="average time per optimizer step",
                  expression="run_seconds / steps", choice=("step_time", "efficiency_hfu"))
def step_seconds(run_seconds, steps):
    """Step time = T_train / steps."""
    return run_seconds / steps


@formulas.formula(unit="s",
                  meaning="time per optimizer step: compute + pipeline bubble + exposed communication + exposed "
                          "offloading",
                  expression="compute_seconds_per_step + pipeline_bubble_seconds + exposed_communication_seconds"
                             " + exposed_offload_seconds",
                  choice=("step_time", "components"))
def step_seconds(compute_seconds_per_step, pipeline_bubble_seconds, exposed_communication_seconds,  # noqa: F811
                 exposed_offload_seconds):
    return compute_seconds_per_step + pipeline_bubble_seconds + exposed_communication_seconds + exposed_offload_seconds


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


@formulas.formula(unit="fraction", meaning="the pipeline bubble as a share of the compute time",
                  expression="pipeline_bubble_seconds / compute_seconds_per_step", detail=True)
def pipeline_bubble_share(pipeline_bubble_seconds, compute_seconds_per_step):
    return pipeline_bubble_seconds / compute_seconds_per_step


@formulas.formula(unit="1",
                  meaning="hardware FLOPs utilization: executed work over the peak of the run",
                  expression="hardware_training_flops / (run_seconds × accelerators × peak_flops_per_s)")
def hardware_flops_utilization(hardware_training_flops, run_seconds, accelerators, peak_flops_per_s):
    return hardware_training_flops / (run_seconds * accelerators * peak_flops_per_s)


@formulas.formula(unit="FLOP/s", meaning="model FLOPs per second per accelerator (the basis of MFU)",
                  expression="training_flops / (run_seconds × accelerators)")
def model_flops_per_s_per_accelerator(training_flops, run_seconds, accelerators):
    return training_flops / (run_seconds * accelerators)


@formulas.formula(unit="FLOP/s", meaning="executed FLOPs per second per accelerator, recomputation included (the "
                                         "basis of HFU; what Megatron-LM logs as TFLOP/s per GPU)",
                  expression="hardware_training_flops / (run_seconds × accelerators)")
def hardware_flops_per_s_per_accelerator(hardware_training_flops, run_seconds, accelerators):
    return hardware_training_flops / (run_seconds * accelerators)


@formulas.formula(unit="tokens/s",
                  meaning="training throughput of the whole job",
                  expression="tokens / run_seconds")
def tokens_per_s(tokens, run_seconds):
    """Throughput = D / T_train; a short run measures it directly."""
    return tokens / run_seconds


@formulas.formula(unit="accelerator-hours",
                  meaning="accelerator-hours the run occupies (GPU-hours)",
                  expression="accelerators × run_seconds / 3600")
def accelerator_hours(accelerators, run_seconds):
    """Accelerator-hours = N × T_train / 3600 s/h."""
    return accelerators * run_seconds / 3600
