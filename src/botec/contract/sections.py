"""What every section of a contract shares: unknown fields are refused (and named)."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from botec.contract.stated import PositiveCount

__all__ = ["Section", "ContractBase", "BY_NAME", "INLINE", "by_name_or_inline"]


class Section(BaseModel):
    # defer_build: a class's validator is built the first time it validates, so a training estimate never
    # builds the serving sections' (pydantic's class creation is much of a contract's import time).
    model_config = ConfigDict(extra="forbid", defer_build=True)


class ContractBase(Section):
    """What both kinds of contract carry besides their sections: the notes of loading them."""

    model_config = ConfigDict(extra="forbid", defer_build=True, title="botec workload contract")
    _notes: list = PrivateAttr(default_factory=list)
    _overrides: tuple = PrivateAttr(default=())

    name: Optional[str] = Field(None, description="a short name for the job")
    description: Optional[str] = Field(None, description="what the job is for")
    schema_version: Optional[PositiveCount] = Field(None, description="the contract schema version it was written for")

    @property
    def notes(self) -> list[str]:
        """What loading the contract ignored or moved, one line each."""
        return list(self._notes)

    @property
    def overrides(self) -> tuple[str, ...]:
        """The ``--set FIELD=VALUE`` overrides applied on loading, in order (a report says the description
        predates them)."""
        return self._overrides


BY_NAME, INLINE = "by name", "inline"


def by_name_or_inline(raw) -> str:
    """Catalog entries are named by a string; anything else is validated as an inline description."""
    return BY_NAME if isinstance(raw, str) else INLINE
