"""From a contract to an estimate: its inputs, the evaluated graph, and what the figures mean.

    contract → inputs (layout, given values, methods: :mod:`botec.inputs`) → the kind's graph →
    quantities → findings

An :class:`Estimate` carries the inputs it was computed from, so that sweeps, solvers, Monte
Carlo, figures and the web app start from them instead of reading the contract again.

This module knows no screen: it imports neither :mod:`botec.report` nor :mod:`botec.api`. The
notebook API, ``botec.estimate("job.yaml", supply__count=8)``, is :func:`botec.api.estimate`, which
also gives an :class:`Estimate` its notebook display and ``to_dataframe``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from botec.errors import ContractError
from botec.findings import Finding, findings_for
from botec.findings.fit import FITS, FITS_DEVICE, plan_fits, spares_of
from botec.graph import Quantity
from botec.inputs import Inputs, build_inputs
from botec.units import format_number, format_quantity

__all__ = ["Estimate", "REFERENCE_CONTRACT", "check_fit", "estimate", "estimate_file", "estimate_inputs",
           "reference_contract_path", "unreachable_target"]

REFERENCE_CONTRACT = "lesson-finetune-1b.yaml"


def reference_contract_path():
    """The built-in reference workload (lesson 000), shipped inside the package."""
    return resources.files("botec.contracts").joinpath(REFERENCE_CONTRACT)


@dataclass(frozen=True)
class Estimate:
    """A contract's inputs, every quantity they resolve to, and what they mean.

    It shows itself in a notebook (``_repr_html_``, ``_repr_markdown_``) and as a table (``to_dataframe``),
    whatever was imported: report/ draws it (imported when first asked), and report/ knows the Estimate only as
    a type, so the two never import each other at run time.
    """

    inputs: Inputs
    quantities: dict[str, Quantity]
    findings: list[Finding]
    relief: str = ""  # for a training plan that does not fit: what would make it fit
    candidates: list = field(default_factory=list)  # serving: [(accelerator key, quantities or why it cannot serve)]

    @property
    def contract(self):
        return self.inputs.contract

    @property
    def kind(self) -> str:
        return self.inputs.kind

    @property
    def choices(self) -> dict[str, str]:
        return self.inputs.choices

    @property
    def architecture(self):
        return self.inputs.architecture

    def value(self, name: str) -> float:
        return self.quantities[name].value

    def findings_in(self, system: str = "decimal") -> list[Finding]:
        """The findings with their sizes in ``system``: ``decimal`` (GB, as :attr:`findings`) or ``binary`` (GiB)."""
        if system == "decimal":
            return self.findings
        relief = self.relief
        if relief and self.kind == "training":
            from botec.findings.relief import memory_relief

            relief = memory_relief(self.inputs, self.quantities, system)
        return findings_for(self.inputs, self.quantities, relief, system)

    @property
    def fits(self) -> bool:
        """Training: the plan fits with its headroom kept free, and the host's memory where it is stated
        (:func:`botec.findings.fit.plan_fits`, the rule every sweep, solver and search reads). Serving: a request
        fits, and the latency targets can be met."""
        return self.meets(FITS)

    @property
    def fits_device(self) -> bool:
        """Training: the plan's allocations fit the device with its headroom eaten (the host's memory as
        :attr:`fits`): the weaker verdict ``--subject-to fits_device`` names. Serving: as :attr:`fits` (a serving
        plan states no headroom)."""
        return self.meets(FITS_DEVICE)

    def meets(self, verdict: str) -> bool:
        """Whether the plan meets ``verdict``, ``fits`` or ``fits_device`` (:data:`botec.findings.fit.VERDICTS`)."""
        q = self.quantities
        if self.kind == "serving":
            return q["max_concurrent_requests"].value >= 1 and q["targets_reachable"].value >= 1
        return bool(plan_fits(spares_of(q), verdict))

    def to_dataframe(self):
        """Every quantity as a row of a pandas DataFrame indexed by name (value in base units, unit, meaning,
        formula, source; ``pip install 'botec[pandas]'``): :func:`botec.report.json_report.quantity_frame`."""
        from botec.report.json_report import quantity_frame

        return quantity_frame(self)

    def _repr_html_(self) -> str:
        """What Jupyter shows: the headline, the findings, then the accounts' tables."""
        from botec.report.html import notebook_html

        return notebook_html(self)

    def _repr_markdown_(self) -> str:
        """The estimate as Markdown (for front ends that render Markdown rather than HTML)."""
        from botec.report.markdown import render

        return render(self)

    def explain(self, name: str, system: str = "decimal") -> str:
        """How ``name`` is derived, with the values substituted, down to the assumptions (as ``botec explain``)."""
        from botec.graph.explain import explain as explain_chain

        if name not in self.quantities:
            from botec.catalog import did_you_mean
            from botec.errors import UserError

            if name in self.inputs.graph:
                raise UserError(f"{name!r} is not resolved by this contract: "
                                f"{self.inputs.why_absent(name, self.quantities)}")
            raise UserError(f"{name!r} is not a quantity{did_you_mean(name, self.quantities)}")
        return "\n".join("  " * depth + line for depth, line in explain_chain(name, self.quantities, system))


def _check_finite(quantities: dict[str, Quantity]) -> None:
    for quantity in quantities.values():
        value = quantity.value
        if isinstance(value, (int, float)) and not math.isfinite(value):
            inputs = ", ".join(quantity.inputs) or "its inputs"
            raise ContractError(f"not a finite number; check its inputs: {inputs}", field=quantity.name)


def _require(inputs: Inputs, quantities: dict[str, Quantity], required: tuple[str, ...]) -> None:
    """Raise a one-line error naming the contract field to state when a required quantity is absent."""
    for name in required:
        if name in quantities:
            continue
        known, _ = inputs.absence(name, quantities)
        if known:
            raise ContractError(f"needed for {name}: {known[0].reason}", field=known[0].field)
        raise ContractError(inputs.why_absent(name, quantities), field=name)


def evaluate_inputs(inputs: Inputs) -> dict[str, Quantity]:
    """Every quantity the inputs resolve to; a required one that cannot be names the field to state."""
    if inputs.kind == "serving":
        from botec.serving import REQUIRED
    else:
        from botec.training import REQUIRED
    quantities = inputs.graph.evaluate(inputs.given, choices=inputs.choices)
    _require(inputs, quantities, REQUIRED)
    _check_finite(quantities)
    return quantities


def estimate_inputs(inputs: Inputs, compare: bool = True) -> Estimate:
    """Evaluate the inputs and say what the figures mean (``compare``: also the serving candidates)."""
    quantities = evaluate_inputs(inputs)
    relief = ""
    if inputs.kind == "training" and not plan_fits(spares_of(quantities), FITS, host=False):
        from botec.findings.relief import memory_relief

        relief = memory_relief(inputs, quantities)
    candidates = []
    if compare and inputs.kind == "serving" and inputs.names_candidates:
        candidates = compare_accelerators(inputs, quantities)
    return Estimate(inputs, quantities, findings_for(inputs, quantities, relief), relief, candidates)


def estimate(contract, base_dir: Path | None = None, compare: bool = True) -> Estimate:
    """Evaluate every quantity the contract determines, and the findings they support."""
    return estimate_inputs(build_inputs(contract, base_dir), compare)


def check_fit(result: Estimate, system: str = "decimal") -> None:
    """Raise a :class:`ContractError` naming the batch when the plan does not fit (:attr:`Estimate.fits`: its
    headroom kept; sizes in ``system``: ``decimal`` GB or ``binary`` GiB, as ``--units``)."""
    if result.fits:
        return
    q = result.quantities
    relief = result.relief
    if relief and result.kind == "training" and system != "decimal":
        from botec.findings.relief import memory_relief

        relief = memory_relief(result.inputs, q, system)
    if result.kind == "serving" and q["max_concurrent_requests"].value >= 1:
        # the memory fits; a latency target no load can meet (its floor on an idle replica is above it)
        field = ("workload.latency.time_per_output_token" if "time_per_output_token_target_seconds" in q
                 and q["time_per_output_token_floor_seconds"].value > q["time_per_output_token_target_seconds"].value
                 else "workload.latency.time_to_first_token")
        raise ContractError(f"{unreachable_target(q, system)} on this replica: raise tensor_parallel, quantize, choose a faster "
                            "accelerator or relax the target (--allow-misfit reports it anyway, unpriced)", field=field)
    if result.kind == "training" and plan_fits(spares_of(q), FITS, host=False):
        # the device fits, its headroom kept; offloading's host memory does not
        raise ContractError(
            f"offloading needs {q['host_bytes_per_node'].formatted(system)} of host memory per node, more than its "
            f"{q['host_memory_bytes'].formatted(system)}: more host memory, more nodes, or offload less "
            "(--allow-misfit reports it anyway)", field="supply.host_memory")
    if result.kind == "serving":
        raise ContractError(
            f"weights take {q['weight_memory_bytes'].formatted(system)} per accelerator and the KV cache of one "
            f"request {q['kv_bytes_per_request'].formatted(system)}, beyond the "
            f"{q['usable_memory_bytes'].formatted(system)} usable (after the "
            f"{q['activation_reserve_bytes'].formatted(system)} reserve): raise tensor_parallel, quantize the "
            "weights or use a larger device", field="strategy.tensor_parallel")
    largest, batch = int(q["max_micro_batch_size"].value), int(q["micro_batch_size"].value)
    if largest >= 1:
        advice = f"at most {largest} fit{'s' if largest == 1 else ''}"
    else:
        advice = (f"not even 1 fits (state {q['state_bytes'].formatted(system)}, activations "
                  f"{q['activation_bytes'].formatted(system)})")
    eaten = ""
    if plan_fits(spares_of(q), FITS_DEVICE, host=False):
        needed = format_quantity(q["planned_device_bytes"].value / (1 + q["headroom"].value), "B", system)
        eaten = (f" (it fits the device only by eating the {format_number(100 * q['headroom'].value)} % headroom: "
                 f"{needed} without it; state a smaller assumptions.headroom, or --allow-misfit to report it anyway)")
    raise ContractError(
        f"{format_quantity(batch, 'sequences')} per accelerator need{'s' if batch == 1 else ''} "
        f"{q['planned_device_bytes'].formatted(system)} planned per accelerator, more than its "
        f"{q['device_memory_bytes'].formatted(system)}{eaten}; {advice}{relief}", field="strategy.micro_batch_size")


def compare_accelerators(inputs: Inputs, own: dict[str, Quantity] | None = None) -> list[tuple[str, dict | str]]:
    """The same serving contract on each candidate accelerator: (key, quantities) or (key, why it cannot). ``own``: the
    contract's quantities, already evaluated, which are its own accelerator's row (the same contract at the same price,
    less its candidates, which no formula reads), so that accelerator is not evaluated twice."""
    rows = []
    for key, price in inputs.options:
        if own is not None and key == inputs.accelerator:   # listed once, at the contract's own price
            rows.append((key, unreachable_target(own) or own))
            continue
        try:
            changed = inputs.rebuild(supply={"accelerator": key, "price_per_accelerator_hour": price,
                                             "candidates": None})
            quantities = evaluate_inputs(changed)
        except ContractError as error:
            rows.append((key, error.detail))
            continue
        rows.append((key, unreachable_target(quantities) or quantities))
    return rows


def unreachable_target(q: dict[str, Quantity], system: str = "decimal") -> str | None:
    """Why a serving replica cannot hold a request or meet its stated latency targets, or None."""
    if q["max_concurrent_requests"].value < 1:
        return (f"does not fit: weights {q['weight_memory_bytes'].formatted(system)} of "
                f"{q['usable_memory_bytes'].formatted(system)}")
    if "time_per_output_token_target_seconds" in q:
        floor, target = q["time_per_output_token_floor_seconds"], q["time_per_output_token_target_seconds"]
        if floor.value > target.value:
            return f"TPOT floor {floor.formatted()} exceeds the {target.formatted()} target"
    if "time_to_first_token_target_seconds" in q:
        floor, target = q["time_to_first_token_floor_seconds"], q["time_to_first_token_target_seconds"]
        if floor.value > target.value:
            return f"TTFT floor {floor.formatted()} exceeds the {target.formatted()} target"
    if "targets_reachable" in q and q["targets_reachable"].value < 1:
        return "no load meets the latency targets at their percentile"
    return None


def estimate_file(path=None, overrides: list[str] | None = None) -> Estimate:
    """Load a contract file (the reference workload when ``path`` is None) and estimate it."""
    from botec.contract import load_contract

    if path is None:
        with resources.as_file(reference_contract_path()) as reference:
            return estimate(load_contract(reference, overrides, origin=f"reference workload {REFERENCE_CONTRACT}"))
    return estimate(load_contract(path, overrides), base_dir=Path(path).resolve().parent)
