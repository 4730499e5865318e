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
    gradients: str = "kept"                        # freed | kept between steps (stacks.yaml)
    loss_stated: bool = False                      # strategy.loss named by the contract (not the stack's default)

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
        description=preset.description, selective_recompute=preset.selective_recompute,
        gradients=preset.gradients, loss_stated=strategy.loss is not None)


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
        "loss_activation_bytes_per_logit": _loss_kept(stack, loss, loss_by),
        "cross_entropy_bytes_per_logit": Given(float(loss["traffic_bytes_per_logit"]), "catalog",
                                               f"{stack.loss} cross entropy ({stack.name})", loss_by),
        "gradients_freed_between_steps": Given(float(stack.gradients == "freed"), "catalog",
                                               f"{stack.name} {'frees' if stack.gradients == 'freed' else 'keeps'} "
                                               "the gradients between steps (stacks.yaml gradients)",
                                               "strategy.framework"),
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
    }
    # a stated share overrides the schedule's derivation (still bounded by the compute it can hide behind)
    if "data_parallel_overlap" in assumptions.model_fields_set:
        given["data_parallel_overlap_stated"] = stated.given(
            "data_parallel_overlap_stated", assumptions.data_parallel_overlap, "assumptions.data_parallel_overlap")
    else:
        given["data_parallel_overlap_stated"] = Given(-1.0, "assumed", "not stated: derived from the schedule",
                                                      "assumptions.data_parallel_overlap")
    return given


def _loss_kept(stack: Stack, loss: dict, by: str) -> Given:
    """Bytes per logit the loss holds at its peak: the compiled figure where the loss kind has one and the stack runs
    its elementwise ops fused (torch.compile on a PyTorch stack, which compiles the loss with them), else the eager
    one.

    torchtune's CEWithChunkedOutputLoss (num_output_chunks 8; torchtune 1814feb17
    torchtune/modules/loss/ce_chunked_output_loss.py and TransformerDecoder.chunked_output): the output projection
    returns the BF16 logits in 8 chunks (2 B per logit, held by the recipe until the loss is computed, then
    ``del logits``).

    - eager: each chunk is up-cast to FP32 (transient) and F.cross_entropy keeps its FP32 log-softmax output for
      the backward (4 B): at the last chunk 2 + 4 + 4/8 = 6.5 B per logit;
    - compiled (torch.compile on compute_cross_entropy, which the recipes apply with ``compile: True``;
      torchtune#1390: the up-cast belongs inside the compiled cross entropy): up-cast, log-softmax and loss are one
      graph whose backward re-reads its BF16 input, so the BF16 chunks are what is kept (2 B), plus one chunk's
      BF16 gradient in the backward (2/8 B): 2.25 B per logit."""
    compiled = stack.elementwise == "fused" and "compiled_kept_bytes_per_logit" in loss
    value = loss["compiled_kept_bytes_per_logit"] if compiled else loss["kept_bytes_per_logit"]
    how = " compiled (elementwise fused)" if compiled else ""
    return Given(float(value), "catalog", f"{stack.loss} cross entropy{how} ({stack.name}): {loss['source']}", by)
