"""The training stack in force: the contract's ``strategy.framework`` (or the catalog's default for the accelerator's
vendor: XLA on Google TPUs, torchtitan elsewhere) and what it decides where the contract is silent.

A stack (``catalog/stacks.yaml``) fixes the attention kernel (flash or eager, and which fused kernel), fused or
eager elementwise ops, the loss kernel, the optimizer's storage and how much data-parallel communication hides
behind the backward. Whatever the contract states itself wins; every choice says whether it is the contract's
or the stack's, so the report can name the stack it assumed.
"""

from __future__ import annotations

from dataclasses import dataclass

from botec.graph import Given

__all__ = ["Stack", "stack_of", "stack_given"]


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
        description=preset.description)


def _vendor(accelerator) -> str:
    """The catalog accelerator's vendor (hardware.yaml), "" for an accelerator described inline."""
    if not isinstance(accelerator, str):
        return ""
    from botec.catalog import accelerators

    device = accelerators().get(accelerator)
    return "" if device is None else device.vendor


def stack_given(contract, stack: Stack, stated) -> dict[str, Given]:
    """The stack's inputs: the elementwise ops' traffic and kernel count, the loss's bytes per logit kept and
    moved, and the data-parallel overlap where the contract states none."""
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
    }
    assumptions = contract.assumptions
    if "data_parallel_overlap" in assumptions.model_fields_set:
        given["data_parallel_overlap"] = stated.given("data_parallel_overlap", assumptions.data_parallel_overlap,
                                                      "assumptions.data_parallel_overlap")
    else:
        value, low, high, source = catalog.stacks[stack.name].data_parallel_overlap
        given["data_parallel_overlap"] = Given(value, "catalog", f"the {stack.name} stack's: {source}",
                                               "assumptions.data_parallel_overlap", low, high)
        stated.fields.setdefault("assumptions.data_parallel_overlap", []).append("data_parallel_overlap")
    return given
