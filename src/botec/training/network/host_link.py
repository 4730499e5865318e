"""Network, the host link (PCIe): what offloading copies between device and host memory, bytes and time.

The gradients down and the updated weights up (optimizer offloaded), the weight shards before every gather
(parameters offloaded), the activations down and back (activation offloading) and a paged optimizer's pages.
"""

from botec.graph import Formulas, where

formulas = Formulas(account="network")


# --- the host link (PCIe): what offloading copies between device and host memory ------------------------
#
# Each accelerator has its own host link, host_link_bytes_per_s per direction. What of these copies compute hides
# is :func:`botec.training.compute.step.exposed_offload_seconds`.

@formulas.formula(unit="B", meaning="gradients each accelerator copies to host memory per step (optimizer offloaded)",
                  expression="gradient_reduce_rounds × gradient_bytes_per_parameter × updated_parameters_per_device",
                  source="ZeRO-Offload (Ren et al. 2021 §4): the reduced 16-bit gradients of the shard the rank "
                         "updates go down to the CPU as the backward produces them, at every reduction",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_gradient_bytes_per_step(gradient_reduce_rounds, gradient_bytes_per_parameter, updated_parameters_per_device):
    return gradient_reduce_rounds * gradient_bytes_per_parameter * updated_parameters_per_device


@formulas.formula(unit="B", meaning="weights each accelerator copies up from host memory per step: the updated 16-bit "
                                    "weights (optimizer offloaded), or the weight shard before every gather (parameters "
                                    "offloaded)",
                  expression="parameter_gathers_per_microbatch × gradient_accumulation_steps × weight_memory_bytes if "
                             "parameter_offload else weight_bytes_per_parameter × updated_parameters_per_device",
                  source="ZeRO-Offload §4: the CPU's updated FP16 parameters are copied back to the GPU; ZeRO-3 "
                         "offload_param / FSDP CPUOffload: each all-gather first moves the host-resident shard up",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_weight_bytes_per_step(parameter_gathers_per_microbatch, gradient_accumulation_steps, weight_memory_bytes,
                               parameter_offload, weight_bytes_per_parameter, updated_parameters_per_device):
    gathered = parameter_gathers_per_microbatch * gradient_accumulation_steps * weight_memory_bytes
    return where(parameter_offload, gathered, weight_bytes_per_parameter * updated_parameters_per_device)


@formulas.formula(unit="B", meaning="activations each accelerator copies to host memory and back per step",
                  expression="2 × gradient_accumulation_steps × offloaded_activation_bytes_per_microbatch",
                  source="torchtune's activation offloading: down in the forward, up for the backward, per "
                         "micro-batch (the blocks' saved tensors only: the output layer and the recomputation stay "
                         "on the device)",
                  zero_when="activation_offload == 0", detail=True)
def host_activation_bytes_per_step(gradient_accumulation_steps, offloaded_activation_bytes_per_microbatch):
    return 2 * gradient_accumulation_steps * offloaded_activation_bytes_per_microbatch


@formulas.formula(unit="B", meaning="optimizer pages a paged optimizer moves per step: out at the activation peak, "
                                    "back for the update",
                  expression="2 × paged_optimizer_spill_bytes",
                  source="QLoRA §3 (Paged Optimizers): pages are evicted to CPU RAM and paged back when the "
                         "optimizer update needs them", zero_when="optimizer_offload_paged == 0", detail=True)
def paged_optimizer_bytes_per_step(paged_optimizer_spill_bytes):
    return 2 * paged_optimizer_spill_bytes


@formulas.formula(unit="B", meaning="bytes crossing each accelerator's host link per step, both directions",
                  expression="host_gradient_bytes_per_step + host_weight_bytes_per_step"
                             " + host_activation_bytes_per_step + paged_optimizer_bytes_per_step")
def host_link_bytes_per_step(host_gradient_bytes_per_step, host_weight_bytes_per_step, host_activation_bytes_per_step,
                             paged_optimizer_bytes_per_step):
    return (host_gradient_bytes_per_step + host_weight_bytes_per_step + host_activation_bytes_per_step
            + paged_optimizer_bytes_per_step)


@formulas.formula(unit="s", meaning="time per step of the gradients' copy to the host",
                  expression="host_gradient_bytes_per_step / host_link_bytes_per_s",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_gradient_seconds(host_gradient_bytes_per_step, host_link_bytes_per_s):
    return host_gradient_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of the weights' copy from the host",
                  expression="host_weight_bytes_per_step / host_link_bytes_per_s",
                  zero_when="optimizer_offload_cpu == 0", detail=True)
def host_weight_seconds(host_weight_bytes_per_step, host_link_bytes_per_s):
    return host_weight_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of the activations' copies (one direction at a time)",
                  expression="host_activation_bytes_per_step / host_link_bytes_per_s",
                  zero_when="activation_offload == 0", detail=True)
def host_activation_seconds(host_activation_bytes_per_step, host_link_bytes_per_s):
    return host_activation_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of a paged optimizer's page migrations",
                  expression="paged_optimizer_bytes_per_step / host_link_bytes_per_s",
                  zero_when="optimizer_offload_paged == 0", detail=True)
def paged_optimizer_seconds(paged_optimizer_bytes_per_step, host_link_bytes_per_s):
    return paged_optimizer_bytes_per_step / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time per step of all host-link copies, before overlap",
                  expression="host_gradient_seconds + host_weight_seconds + host_activation_seconds"
                             " + paged_optimizer_seconds")
def host_link_seconds(host_gradient_seconds, host_weight_seconds, host_activation_seconds, paged_optimizer_seconds):
    return host_gradient_seconds + host_weight_seconds + host_activation_seconds + paged_optimizer_seconds
