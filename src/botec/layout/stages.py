"""How a pipeline splits the layers: the default rule, and the activations the 1F1B schedule keeps in flight."""

from __future__ import annotations

__all__ = ["default_stage_layers", "layers_in_flight"]


def default_stage_layers(layers: int, stages: int) -> tuple[int, ...] | None:
    """Transformer layers per pipeline stage under the default split, or None when none exists.

    ``p`` dividing ``L``: ``L/p`` each. Otherwise the embedding and the LM head count as one layer
    each on the first and last stages: S = L + 2 slots are spread as evenly as possible (the extra
    slots going to the middle stages first), and the first and last stages give one slot back.
    """
    if stages < 1 or stages > layers:
        return None
    if layers % stages == 0:
        return (layers // stages,) * stages
    slots, extra = divmod(layers + 2, stages)
    if stages < 2 or slots < 2:
        return None
    counts = [slots] * stages
    order = list(range(1, stages - 1)) + [0, stages - 1]  # middle stages take the remainder first
    for index in order[:extra]:
        counts[index] += 1
    counts[0] -= 1
    counts[-1] -= 1
    return tuple(counts)


def layers_in_flight(stage_layers: tuple[int, ...]) -> int:
    """Layers' worth of activations at the 1F1B peak: max over stages i of (p − i) · L_i (i from 0)."""
    stages = len(stage_layers)
    return max((stages - index) * count for index, count in enumerate(stage_layers))


