"""Compute, the run: tokens per step, steps, the work (model and hardware FLOPs), the utilization, the run time.

The ``efficiency`` methods (lesson 000) derive the run time from a stated utilization, the step from it; the
``components`` method builds the step from its parts (:mod:`botec.training.compute.step`) and the run from it.
"""

from botec.graph import Formulas, ceil, where
from botec.layout import Recompute

formulas = Formulas(account="compute")


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


@formulas.formula(unit="parameters",
                  meaning="weights of the GEMMs op-level selective checkpointing recomputes in one layer: every "
                          "second matmul of the block",
                  expression="kv_heads × qk_head_dim × hidden_size + attention_output_parameters_per_layer + "
                             "(layers − moe_layers) / layers × (mlp_up_parameters_per_layer / 2 if mlp_gated else "
                             "mlp_down_parameters_per_layer)",
                  source="torchtitan's SAC policy (9dec370 parallelize_llama.py `_custom_policy`; b5bcd76 "
                         "distributed/activation_checkpoint.py SelectiveAC): a block's matmuls run Q, K, V, O, then "
                         "gate, up, down (W1, W3, W2) and the even-numbered ones are recomputed: K, O and up (a "
                         "plain MLP: up, down: its down). Assumed: an MoE layer's experts are saved (grouped GEMMs), "
                         "its router, forced to recompute by the policy, is small", detail=True, prose=True)
def sac_recomputed_matmul_parameters_per_layer(kv_heads, qk_head_dim, hidden_size,
                                               attention_output_parameters_per_layer, layers, moe_layers, mlp_gated,
                                               mlp_up_parameters_per_layer, mlp_down_parameters_per_layer):
    mlp = where(mlp_gated, mlp_up_parameters_per_layer / 2, mlp_down_parameters_per_layer)
    return (kv_heads * qk_head_dim * hidden_size + attention_output_parameters_per_layer
            + (layers - moe_layers) / layers * mlp)


@formulas.formula(unit="FLOP",
                  meaning="forward work done again by activation recomputation, per token",
                  expression="full_recompute_share × (2 × (matmul_parameters − lm_head_matmul_parameters + "
                             "adapter_matmul_parameters) + attention_flops_per_token / 3) if recompute = full; if "
                             "selective: attention_flops_per_token / 3 with eager attention and 0 with a fused "
                             "kernel, plus 2 × layers × sac_recomputed_matmul_parameters_per_layer under op-level "
                             "SAC (selective_recompute_policy 1)",
                  source="Korthikanti et al. 2022 §5: full recompute repeats the forward of the transformer layers "
                         "(not the output layer: 96·B·s·l·h²(1 + s/6h + V/16lh)), LoRA adapters included, on the "
                         "share of the layers that recompute (Megatron --recompute-num-layers); Megatron's selective "
                         "only the attention core, and nothing under a fused (flash) kernel, which keeps no scores to "
                         "drop; torchtitan's selective (op-level SAC) every second matmul of a block and the "
                         "memory-bound ops, not the saved fused attention kernel (eager attention's batched "
                         "matmuls and softmax are not in its `_save_list`: recomputed)",
                  detail=True, prose=True)
def recompute_flops_per_token(recompute, matmul_parameters, lm_head_matmul_parameters, attention_flops_per_token,
                              adapter_matmul_parameters, full_recompute_share, fused_attention,
                              selective_recompute_policy, layers, sac_recomputed_matmul_parameters_per_layer):
    forward_attention = attention_flops_per_token / 3
    layers_forward = 2 * (matmul_parameters - lm_head_matmul_parameters + adapter_matmul_parameters)
    attention_core = where(fused_attention, 0.0, forward_attention)
    op_sac = 2 * layers * sac_recomputed_matmul_parameters_per_layer
    selective = attention_core + where(selective_recompute_policy >= 1, op_sac, 0.0)
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
