"""What would make a plan that does not fit in memory fit (its headroom kept: :mod:`botec.findings.fit`): the
cheapest ZeRO stage and recomputation.

Each option (a higher ZeRO stage, more recomputation, or both) is the same estimate with those
two layout fields varied. Among the options that fit, the cheapest is the one whose step is
shortest under the component step model (it counts the recomputed work and the extra gathers);
under the efficiency model, whose step time does not see them, the one that recomputes least,
then sends the fewest bytes.
"""

from __future__ import annotations

from botec.errors import ContractError
from botec.findings.fit import plan_fits, spares_of
from botec.layout import Recompute
from botec.units import format_number, format_quantity

__all__ = ["memory_relief"]

_COSTS = ("step_seconds", "hardware_flops_per_token", "collective_bytes_sent_per_step")


def memory_relief(inputs, quantities: dict, system: str = "decimal") -> str:
    """``"; ZeRO-1 over 4 ranks with selective recomputation frees 9 GB and fits (31 GB planned)"``, or why none."""
    zero, recompute = int(quantities["zero_stage"].value), int(quantities["recompute"].value)
    components = inputs.choices.get("step_time") == "components"
    options = []
    for new_zero in range(zero, 4):
        for new_recompute in range(recompute, len(Recompute)):
            if (new_zero, new_recompute) == (zero, recompute):
                continue
            try:
                varied = inputs.vary({"strategy.zero_stage": new_zero, "strategy.recompute": float(new_recompute)})
            except ContractError:
                continue  # a rule of the layout (EP and the shard group) refuses this stage
            q = inputs.graph.evaluate(varied.given, wanted=("memory_spare_bytes", "planned_device_bytes") + _COSTS,
                                      choices=inputs.choices)
            if not plan_fits(spares_of(q), host=False):   # the device's part of the estimate's verdict
                continue
            costs = [q[name].value for name in _COSTS if name in q]
            rank = costs[:1] if components and "step_seconds" in q else costs[1:]
            options.append((rank, new_zero, new_recompute, q["planned_device_bytes"].value,
                            varied.layout.sharding_degree))
    if not options:
        adapters = "" if inputs.peft is not None else \
            ", or train adapters or offload state (`botec recipes CONTRACT` compares LoRA, QLoRA and CPU offload)"
        return ("; no ZeRO stage or recomputation makes it fit: add tensor or pipeline parallelism, more accelerators "
                f"or a larger device{adapters}")
    _, new_zero, new_recompute, planned, sharding = min(options, key=lambda option: (option[0], option[1:3]))
    changes = []
    if new_zero != zero:
        changes.append(f"ZeRO-{new_zero} over {format_number(sharding)} ranks")
    if new_recompute != recompute:
        changes.append(f"{Recompute(new_recompute).label} recomputation")
    freed = format_quantity(quantities["planned_device_bytes"].value - planned, "B", system)
    return f"; {' with '.join(changes)} frees {freed} and fits ({format_quantity(planned, 'B', system)} planned)"
