"""Compute: useful work, sustained rate, run time, steps.

Source: lesson 000 ("Compute: estimate useful work, then elapsed time"); Kaplan et al. 2020
for C ≈ 6·N·D (2 FLOPs per parameter per token forward, 4 backward).
"""

from botec.quantities import ceil, declare_input, formula

declare_input("accelerators", account="compute", unit="accelerators",
              meaning="accelerators in the job (N)")
declare_input("peak_flops_per_s", account="compute", unit="FLOP/s",
              meaning="theoretical dense peak of one accelerator at the training precision")
declare_input("micro_batch_size", account="compute", unit="sequences",
              meaning="sequences per accelerator per micro-step (B_local)")
declare_input("gradient_accumulation_steps", account="compute", unit="1",
              meaning="micro-steps whose gradients are summed before one optimizer step")
declare_input("single_accelerator_mfu", account="compute", unit="1",
              meaning="share of peak one accelerator sustains as useful model FLOPs")
declare_input("scaling_efficiency", account="compute", unit="1",
              meaning="rate kept when the job is spread over N accelerators, relative to N single ones")


@formula(account="compute", unit="accelerators",
         meaning="model replicas that each process different examples",
         expression="accelerators",
         source="replicated data parallelism: every accelerator holds one replica")
def data_parallel_degree(accelerators):
    """DP = N: with no tensor or pipeline parallelism every accelerator is a data-parallel rank."""
    return accelerators


@formula(account="compute", unit="tokens",
         meaning="tokens consumed by one optimizer step across all replicas",
         expression="data_parallel_degree × micro_batch_size × gradient_accumulation_steps × sequence_length",
         source="lesson 000: 4 × 2 × 2,048 = 16,384")
def global_tokens_per_step(data_parallel_degree, micro_batch_size, gradient_accumulation_steps, sequence_length):
    """Global batch in tokens: DP × B_local × accumulation × S."""
    return data_parallel_degree * micro_batch_size * gradient_accumulation_steps * sequence_length


@formula(account="compute", unit="steps",
         meaning="optimizer steps to process the training tokens",
         expression="⌈tokens / global_tokens_per_step⌉",
         source="lesson 000: ⌈10⁹ / 16,384⌉ = 61,036")
def steps(tokens, global_tokens_per_step):
    """Steps = ⌈D / tokens per step⌉ (the last step may be partial)."""
    return ceil(tokens / global_tokens_per_step)


@formula(account="compute", unit="FLOP",
         meaning="useful model work for the whole run (forward + backward matrix work)",
         expression="6 × parameters × tokens",
         source="lesson 000; Kaplan et al. 2020, C ≈ 6ND")
def training_flops(parameters, tokens):
    """F_train ≈ 6·P·D: 2 FLOPs per parameter per token forward, 4 backward.

    Excludes attention-score work, recomputation and data preparation: useful model work,
    not what the hardware executes.
    """
    return 6 * parameters * tokens


@formula(account="compute", unit="1",
         meaning="share of the N accelerators' peak delivered as useful model FLOPs",
         expression="single_accelerator_mfu × scaling_efficiency",
         source="lesson 000: 0.30 × 0.80")
def end_to_end_mfu(single_accelerator_mfu, scaling_efficiency):
    """MFU of the whole job = single-accelerator MFU × scaling efficiency.

    A measured end-to-end MFU already includes the scaling losses; when the contract states
    one it replaces this product (multiplying it by a scaling factor would count them twice).
    """
    return single_accelerator_mfu * scaling_efficiency


@formula(account="compute", unit="FLOP/s",
         meaning="sustained useful compute rate of the whole job",
         expression="accelerators × peak_flops_per_s × end_to_end_mfu",
         source="lesson 000: 4 × 200 TFLOP/s × 0.30 × 0.80 = 192 TFLOP/s")
def useful_flops_per_s(accelerators, peak_flops_per_s, end_to_end_mfu):
    """R_useful = N × peak × MFU_end-to-end."""
    return accelerators * peak_flops_per_s * end_to_end_mfu


@formula(account="compute", unit="s",
         meaning="first-pass run time, excluding checkpoint pauses and failures",
         expression="training_flops / useful_flops_per_s",
         source="lesson 000: 6 × 10¹⁸ / 192 × 10¹² = 31,250 s")
def run_seconds(training_flops, useful_flops_per_s):
    """T_train ≈ F_train / R_useful."""
    return training_flops / useful_flops_per_s


@formula(account="compute", unit="s",
         meaning="average time per optimizer step",
         expression="run_seconds / steps",
         source="lesson 000: ≈ 0.51 s")
def step_seconds(run_seconds, steps):
    """Step time = T_train / steps."""
    return run_seconds / steps


@formula(account="compute", unit="tokens/s",
         meaning="training throughput of the whole job",
         expression="tokens / run_seconds")
def tokens_per_s(tokens, run_seconds):
    """Throughput = D / T_train; a short run measures it directly."""
    return tokens / run_seconds


@formula(account="compute", unit="accelerator-hours",
         meaning="accelerator-hours the run occupies (GPU-hours)",
         expression="accelerators × run_seconds / 3600")
def accelerator_hours(accelerators, run_seconds):
    """Accelerator-hours = N × T_train / 3600 s/h."""
    return accelerators * run_seconds / 3600
