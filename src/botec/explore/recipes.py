"""Fine-tuning recipes side by side: which one fits the contract's accelerators, and at what time and cost.

A recipe is a set of strategy fields applied to the contract (the model, tokens, sequence, batch and
accelerators stay as stated):

=================  ===========================================================================
full               every parameter trained, the state as the optimizer keeps it (no adapters,
                   no offloading); ZeRO/FSDP as stated
full-offload       every parameter trained, the master weights and optimizer moments in host
                   memory (ZeRO-Offload; with more than one accelerator ZeRO-3 / FSDP
                   full_shard with the parameters offloaded too)
lora               LoRA adapters on a 16-bit frozen base (the contract's rank and targets, else
                   rank 16 on every linear layer)
qlora              the same adapters on an NF4 base with double quantization, the optimizer
                   state paged when the contract states the host memory it may page to (the
                   QLoRA recipe: Dettmers et al. 2023)
=================  ===========================================================================

Each recipe is tried with no recomputation, then selective, then full, and keeps the first that fits, its headroom
kept (the estimate's verdict, :mod:`botec.findings.fit`; recomputation costs time). If none fits and the contract
names no loss kernel, the recipe is tried once more with full recomputation and a fused linear cross entropy
(``strategy.loss: fused-linear``: Liger Kernel, Cut Cross-Entropy), which keeps no logits: at a 128k vocabulary
the unfused loss holds 10 B × V per token, 5 GB for 4,096 tokens. The recipes that fit are ranked by cost (then run
time).
"""

from __future__ import annotations

from dataclasses import dataclass

from botec.errors import ContractError, UserError
from botec.findings.fit import plan_fits, spares_of

__all__ = ["RECIPES", "RecipeResult", "compare_recipes"]

RECIPES = ("full", "full-offload", "lora", "qlora")
RECOMPUTE_ORDER = ("none", "selective", "full")
DEFAULT_ADAPTERS = {"rank": 16, "target_modules": "all-linear"}


@dataclass(frozen=True)
class RecipeResult:
    """One recipe on the contract: the estimate at the lightest recomputation that fits, or why none does."""

    recipe: str
    recompute: str | None
    estimate: object | None  # botec.estimation.Estimate
    why_not: str = ""
    loss: str | None = None  # the loss kernel the recipe switched to (fused-linear), or None: the contract's

    @property
    def fits(self) -> bool:
        return self.estimate is not None and self.estimate.fits

    def value(self, name: str) -> float | None:
        if self.estimate is None or name not in self.estimate.quantities:
            return None
        return float(self.estimate.quantities[name].value)


def _strategy_changes(recipe: str, stated_lora: dict, accelerators: int, host_memory: bool) -> dict:
    """The strategy fields ``recipe`` changes (None: the field's default again): no adapters and no offloading
    unless the recipe adds them; ``stated_lora``: the contract's adapters (their rank, targets and alpha kept)."""
    adapters = {key: stated_lora[key] for key in ("rank", "target_modules", "alpha") if key in stated_lora} \
        or dict(DEFAULT_ADAPTERS)
    adapters.setdefault("rank", DEFAULT_ADAPTERS["rank"])
    changes: dict = {"lora": None, "offload": None, "recompute_layer_fraction": None}
    if recipe == "full-offload":
        changes["offload"] = {"optimizer": "cpu"}
        if accelerators > 1:
            changes |= {"fsdp": None, "fsdp_prefetch": None, "zero_stage": 3}
            changes["offload"]["parameters"] = True
    elif recipe == "lora":
        changes["lora"] = adapters | {"base_weights": "bf16"}
    elif recipe == "qlora":
        changes["lora"] = adapters | {"base_weights": "nf4", "double_quantization": True}
        if host_memory:
            changes["offload"] = {"optimizer": "paged"}
    return changes


def compare_recipes(inputs, recipes: tuple[str, ...] = RECIPES) -> list[RecipeResult]:
    """Every recipe of ``recipes`` on the contract of ``inputs`` (its strategy changed through
    :meth:`botec.inputs.Inputs.rebuild`): the ones that fit first, cheapest (then fastest) first; the others
    after, with why not."""
    from botec.estimation import estimate_inputs

    if inputs.kind != "training":
        raise ContractError("recipes compare ways of training; this is a serving contract", field="workload.kind")
    unknown = [r for r in recipes if r not in RECIPES]
    if unknown:
        from botec.catalog import did_you_mean

        raise UserError(f"--recipes: unknown recipe {unknown[0]!r}{did_you_mean(unknown[0], RECIPES)} "
                        f"(recipes: {', '.join(RECIPES)})")
    lora = inputs.peft
    stated_lora = lora.model_dump(mode="json", exclude_unset=True) if lora is not None else {}
    accelerators = int(inputs.spec["supply.count"])
    results = []
    for recipe in recipes:
        strategy = _strategy_changes(recipe, stated_lora, accelerators, "host_memory_bytes" in inputs.fixed)
        last_error, tried = "", None
        loss = None
        attempts = [(recompute, {}) for recompute in RECOMPUTE_ORDER]
        if not inputs.stack.loss_stated:
            attempts.append(("full", {"loss": "fused-linear"}))
        for recompute, extra in attempts:
            if extra and tried is not None and tried[1].fits:
                break
            try:
                result = estimate_inputs(inputs.rebuild(strategy=strategy | {"recompute": recompute} | extra),
                                         compare=False)
            except ContractError as error:
                last_error = f"{error.field}: {error.detail}" if error.field else error.detail
                continue
            if extra and tried is not None and not plan_fits(spares_of(result.quantities), host=False):
                break   # the fused loss does not make the device fit either: report the plain recipe's plan
            tried, loss = (recompute, result), extra.get("loss")
            if result.fits:
                break
        if tried is None:
            results.append(RecipeResult(recipe, None, None, last_error))
        elif not tried[1].fits:
            q = tried[1].quantities
            if plan_fits(spares_of(q), host=False):  # the device fits, its headroom kept; offloading's host memory not
                why = (f"host memory: {q['host_bytes_per_node'].formatted()} per node needed, more than its "
                       f"{q['host_memory_bytes'].formatted()}")
            else:
                why = f"does not fit even with full recomputation ({q['planned_device_bytes'].formatted()} planned)"
            results.append(RecipeResult(recipe, tried[0], tried[1], why, loss))
        else:
            results.append(RecipeResult(recipe, tried[0], tried[1], loss=loss))

    def rank(result: RecipeResult):
        cost = result.value("training_cost_usd")
        return (not result.fits, cost if cost is not None else float("inf"), result.value("run_seconds") or 0.0)

    return sorted(results, key=rank)
