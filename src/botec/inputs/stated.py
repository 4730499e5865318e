"""Stated numbers as graph inputs, remembering which contract field states which input.

Every number a contract states becomes a :class:`Given` carrying its field, range, source and
distribution. The record of field → inputs is what lets sweeps, solvers and Monte Carlo vary a
contract field without reading the contract again (:meth:`botec.inputs.Inputs.vary`).
"""

from __future__ import annotations

from botec.contract.stated import Stated
from botec.graph import Given
from botec.inputs.missing import Missing

__all__ = ["StatedInputs", "given_of"]


def given_of(stated: Stated, field: str, source: str | None = None) -> Given:
    """A stated number as an input: its value, provenance, source, range and distribution."""
    return Given(stated.value, stated.provenance, stated.source if source is None else source, field, stated.low,
                 stated.high, stated.distribution)


class StatedInputs:
    """Makes inputs of stated numbers and records which contract field states which input."""

    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}
        self.absent: dict[str, Missing] = {}

    def given(self, name: str, stated: Stated, field: str, source: str | None = None) -> Given:
        self.fields.setdefault(field, []).append(name)
        return given_of(stated, field, source)

    def optional(self, name: str, stated: Stated | None, field: str, why: str) -> dict[str, Given]:
        """``{name: input}`` when the contract states ``field``, else nothing, and the absence recorded."""
        if stated is None:
            self.absent[name] = Missing(field, why)
            return {}
        return {name: self.given(name, stated, field)}
