"""Findings: what the numbers mean, in plain words, each tied to its account.

A finding has a level: ``ok`` (a check passed), ``warn`` (holds only under a condition the
text names), ``fail`` (the plan does not hold) or ``info`` (a headline figure). The thresholds
that decide the level are named assumptions of the contract; every share a finding prints is a
named quantity. A finding whose quantity is absent (no storage bandwidth stated, no price) says
which field to state instead.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Finding", "findings_for"]


@dataclass(frozen=True)
class Finding:
    account: str
    level: str  # ok | warn | fail | info
    message: str
    quantities: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"account": self.account, "level": self.level, "message": self.message,
                "quantities": list(self.quantities)}


def findings_for(inputs, quantities: dict, relief: str = "", system: str = "decimal") -> list[Finding]:
    """The findings of an estimate's quantities (``relief``: what would make a misfit fit, if found)."""
    if inputs.kind == "serving":
        from botec.findings.serving import serving_findings

        return serving_findings(quantities, system)
    from botec.findings.training import training_findings

    return training_findings(inputs, quantities, relief, system)
