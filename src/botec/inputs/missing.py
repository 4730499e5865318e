"""An input the contract does not state, and the field that would state it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Missing"]


@dataclass(frozen=True)
class Missing:
    field: str    # the contract field to state
    reason: str   # what needs it, in words

    def text(self) -> str:
        return f"{self.field} is needed: {self.reason}"
