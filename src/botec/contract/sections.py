"""What every section of a contract shares: unknown fields are refused (and named)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, PrivateAttr

__all__ = ["Section", "ContractBase", "BY_NAME", "INLINE", "by_name_or_inline"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContractBase(Section):
    """What both kinds of contract carry besides their sections: the notes of loading them."""

    model_config = ConfigDict(extra="forbid", title="botec workload contract")
    _notes: list = PrivateAttr(default_factory=list)

    @property
    def notes(self) -> list[str]:
        """What loading the contract ignored or moved, one line each."""
        return list(self._notes)


BY_NAME, INLINE = "by name", "inline"


def by_name_or_inline(raw) -> str:
    """Catalog entries are named by a string; anything else is validated as an inline description."""
    return BY_NAME if isinstance(raw, str) else INLINE
