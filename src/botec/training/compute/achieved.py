"""Compute, what the run achieves: the hardware-FLOPs utilization, FLOP/s per accelerator, tokens per second and the
accelerator-hours.
"""

from botec.graph import Formulas

formulas = Formulas(account="compute")


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
