"""A training plan's memory verdicts: one rule each, the same on numbers and on numpy arrays.

    verdict       holds when                                                     reads
    fits          M_device − M_planned ≥ 0: the plan fits with its headroom    memory_spare_bytes
                  kept free (what ``botec estimate`` accepts; the largest
                  micro-batch it names keeps it)
    fits_device   M_device − M_planned / (1 + headroom) ≥ 0: the allocations    memory_spare_before_headroom_bytes
                  fit the device, the planning margin eaten (a weaker,
                  named constraint: ``--subject-to fits_device``)

Both also need the host's memory where the contract states it (offloading, a paged optimizer and asynchronous
checkpoints keep state there): ``host_memory_spare_bytes`` ≥ 0. The headroom is the lesson's planning margin
(× 1.25 for peaks and fragmentation); a plan "fits" only with it kept, so the solver, the sweep, the search, Monte
Carlo, the web and the estimate give one answer (issue 28).

A missing figure (NaN: a configuration the formulas cannot evaluate) never fits: ``NaN ≥ 0`` is false for a float
and for an array alike.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["FITS", "FITS_DEVICE", "VERDICTS", "DEVICE_SPARE", "HOST_SPARE", "SPARES", "plan_fits", "spares_of",
           "verdict_words"]

FITS, FITS_DEVICE = "fits", "fits_device"
VERDICTS = (FITS, FITS_DEVICE)
# The device's spare memory each verdict reads.
DEVICE_SPARE = {FITS: "memory_spare_bytes", FITS_DEVICE: "memory_spare_before_headroom_bytes"}
HOST_SPARE = "host_memory_spare_bytes"
SPARES = (*DEVICE_SPARE.values(), HOST_SPARE)


def plan_fits(spares: Mapping[str, Any], verdict: str = FITS, host: bool = True) -> Any:
    """Whether the plan meets ``verdict`` (``fits`` or ``fits_device``): the device's spare memory that verdict
    reads is ≥ 0 and, when ``host`` and ``spares`` holds it, the host's too. ``spares`` maps the names of
    :data:`SPARES` to numbers (a bool comes back) or numpy arrays (a boolean array). ``host=False``: the device's
    part of the verdict alone."""
    holds = spares[DEVICE_SPARE[verdict]] >= 0
    if host and HOST_SPARE in spares:
        holds = holds & (spares[HOST_SPARE] >= 0)
    return holds


def spares_of(quantities: Mapping[str, Any]) -> dict[str, Any]:
    """The values of the spares of :data:`SPARES` an estimate's quantities hold (name -> Quantity)."""
    return {name: quantities[name].value for name in SPARES if name in quantities}


def verdict_words(verdict: str) -> str:
    """The verdict in words, as the solver and the sweep say it."""
    return ("fits with the headroom kept" if verdict == FITS
            else "fits the device without the headroom (the planning margin eaten)")
