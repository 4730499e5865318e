"""The training stack in force: the contract's ``strategy.framework`` (or the catalog's default for the accelerator's
vendor: XLA on Google TPUs, torchtitan elsewhere) and what it decides where the contract is silent.

A stack (``catalog/stacks.yaml``) fixes the attention kernel (flash or eager, and which fused kernel), fused or
eager elementwise ops, the loss kernel, the optimizer's storage, how much data-parallel communication hides
behind the backward, and what ``recompute: selective`` means there (:data:`SELECTIVE_RECOMPUTE_POLICY`). Whatever the contract states itself wins; every choice says whether it is the contract's
or the stack's, so the report can name the stack it assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from botec.graph import Given

__all__ = ["SELECTIVE_RECOMPUTE_POLICY", "Stack", "stack_of", "stack_given"]

# What `recompute: selective` does, per stack (stacks.yaml's selective_recompute), as the graph's
# ``selective_recompute_policy``:
#   0 attention-core: Megatron's --recompute-granularity selective (Korthikanti et al. 2022 §5): the attention core
#     is recomputed, which a fused (flash) kernel already does not store: nothing left to recompute;
#   1 op-sac: torchtitan's op-level selective activation checkpointing (activation_checkpoint selective, option
#     'op', its default): inside each block the outputs of the matmuls, SDPA and reduce-scatters are saved except
#     every second matmul, and every other op (norms, RoPE, SiLU, residual adds, casts) is recomputed in the
#     backward (torchtitan 9dec370 torchtitan/parallelisms/parallelize_llama.py `_save_list`, `_custom_policy`;
#     the same policy at b5bcd76 in torchtitan/distributed/activation_checkpoint.py SelectiveAC).
# torchtitan's layer-level SAC (selective_ac_option N: every N-th block fully checkpointed) is recompute: full with
# recompute_layer_fraction 1/N.
SELECTIVE_RECOMPUTE_POLICY = {"attention-core": 0.0, "op-sac": 1.0}


@dataclass(frozen=True)
class Stack:
    """The stack's choices after the contract's own: each ``(value, field, stated by the contract)``."""

    name: str
    named_by_contract: bool
    assumed_for: str              # why this default ("" when the contract names it): the accelerator's vendor
    attention_kernel: str
    training_attention: str
    elementwise: str
    loss: str
    optimizer: object              # a preset name, or the contract's inline bytes per parameter
    description: str
    selective_recompute: str = "attention-core"   # a key of SELECTIVE_RECOMPUTE_POLICY

    @property
    def how(self) -> str:
        """Who chose it: ``strategy.framework``, or the default assumed (for which accelerators)."""
        if self.named_by_contract:
            return "strategy.framework"
        return f"assumed, {self.assumed_for}: state strategy.framework"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.how}): {self.description}"


def stack_of(contract) -> Stack:
    """The stack of a training contract with the contract's own choices applied."""
    from botec.catalog import training_stacks

    catalog = training_stacks()
    strategy, assumptions = contract.strategy, contract.assumptions
    vendor = _vendor(contract.supply.accelerator)
    if strategy.framework is not None:
        name, assumed_for = strategy.framework, ""
    elif vendor in catalog.default_by_vendor:
        name, assumed_for = catalog.default_by_vendor[vendor], f"the default on {vendor} accelerators"
    else:
        name, assumed_for = catalog.default, "the default" + (f" on {vendor} accelerators" if vendor else "")
    preset = catalog.stacks[name]
    stated_strategy, stated_assumptions = strategy.model_fields_set, assumptions.model_fields_set
    return Stack(
        name=name, named_by_contract=strategy.framework is not None, assumed_for=assumed_for,
        attention_kernel=(assumptions.attention_kernel if "attention_kernel" in stated_assumptions
                          else preset.attention_kernel),
        training_attention=preset.training_attention,
        elementwise=strategy.elementwise or preset.elementwise,
        loss=strategy.loss or preset.loss,
        optimizer=strategy.optimizer if "optimizer" in stated_strategy else preset.optimizer,
        description=preset.description, selective_recompute=preset.selective_recompute)


def _vendor(accelerator) -> str:
    """The catalog accelerator's vendor (hardware.yaml), "" for an accelerator described inline."""
    if not isinstance(accelerator, str):
        return ""
    from botec.catalog import accelerators

    device = accelerators().get(accelerator)
    return "" if device is None else device.vendor


def stack_given(contract, stack: Stack, stated) -> dict[str, Given]:
    """The stack's inputs: the elementwise ops' traffic and kernel count, the loss's bytes per logit kept and
    moved, what selective recomputation does, and the data-parallel overlap where the contract states none."""
    from botec.catalog import training_stacks

    catalog = training_stacks()
    elementwise, loss = catalog.elementwise[stack.elementwise], catalog.loss[stack.loss]
    by = "strategy.elementwise" if contract.strategy.elementwise else "strategy.framework"
    loss_by = "strategy.loss" if contract.strategy.loss else "strategy.framework"
    given = {
        "elementwise_traffic_factor": Given(float(elementwise["traffic_factor"]), "catalog",
                                            f"{stack.elementwise} elementwise ops ({stack.name}): "
                                            f"{elementwise['source']}", by),
        "elementwise_kernels_per_layer": Given(float(elementwise["kernels_per_layer"]), "catalog",
                                               f"{stack.elementwise} elementwise ops ({stack.name})", by),
        "loss_activation_bytes_per_logit": Given(float(loss["kept_bytes_per_logit"]), "catalog",
                                                 f"{stack.loss} cross entropy ({stack.name}): {loss['source']}",
                                                 loss_by),
        "cross_entropy_bytes_per_logit": Given(float(loss["traffic_bytes_per_logit"]), "catalog",
                                               f"{stack.loss} cross entropy ({stack.name})", loss_by),
        "selective_recompute_policy": Given(SELECTIVE_RECOMPUTE_POLICY[stack.selective_recompute], "catalog",
                                            f"recompute: selective is {stack.selective_recompute} in {stack.name}",
                                            "strategy.framework"),
    }
    assumptions = contract.assumptions
    schedule = catalog.stacks[stack.name].data_parallel_schedule
    where = f"the {stack.name} stack's: {schedule['source']}"
    given |= {
        "data_parallel_schedule": Given(float(schedule["overlapped"]) * (1 + schedule["parameter_gather_overlap"]),
                                        "catalog", where, "strategy.framework"),
        "gradient_bucket_min_parameters": Given(schedule["bucket_min_parameters"], "catalog", where,
                                                "strategy.framework"),
        "gradient_bucket_parameters_per_dp_rank": Given(schedule["bucket_parameters_per_dp_rank"], "catalog", where,
                                                        "strategy.framework"),
        "gradient_bucket_bytes": Given(schedule["bucket_bytes"], "catalog", where, "strategy.framework"),
    }
    # a stated share overrides the schedule's derivation (still bounded by the compute it can hide behind)
    if "data_parallel_overlap" in assumptions.model_fields_set:
        given["data_parallel_overlap_stated"] = stated.given(
            "data_parallel_overlap_stated", assumptions.data_parallel_overlap, "assumptions.data_parallel_overlap")
    else:
        given["data_parallel_overlap_stated"] = Given(-1.0, "assumed", "not stated: derived from the schedule",
                                                      "assumptions.data_parallel_overlap")
    return given
