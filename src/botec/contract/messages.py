"""One line per contract error: the first problem pydantic found, named by its field.

A misspelt field gets a did-you-mean; a field of the other kind of contract says so; union
members (training/serving, by name/inline) never appear in a path, since a user never wrote them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from botec.contract.sections import BY_NAME, INLINE, Section
from botec.errors import ContractError
from botec.units import excerpt

__all__ = ["one_line", "fields_at", "KINDS"]

KINDS = ("training", "serving")


def _contract_class(kind: str) -> type[BaseModel]:
    from botec.contract.serving import ServingContract
    from botec.contract.training import TrainingContract

    return TrainingContract if kind == "training" else ServingContract


def _section_type(annotation: Any) -> Any:
    for candidate in getattr(annotation, "__args__", ()) or ():
        found = _section_type(candidate)
        if isinstance(found, type) and issubclass(found, Section):
            return found
    return annotation


def section_class(kind: str, location: tuple) -> type[BaseModel] | None:
    """The section class at ``location`` of a contract of ``kind`` (None when it is not a section)."""
    current: Any = _contract_class(kind)
    for part in location:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(part)
        if info is None:
            return None
        current = _section_type(info.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def fields_at(kind: str, location: tuple) -> list[str]:
    """Field names of the section at ``location`` (for 'did you mean')."""
    found = section_class(kind, location)
    return list(found.model_fields) if found is not None else []


def one_line(error: ValidationError, kind: str | None = None) -> ContractError:
    """The first problem of a pydantic error as one line naming the field (``kind``: the contract's, when the
    error's path does not carry it)."""
    from botec.catalog import did_you_mean

    errors = error.errors()
    # A misspelt field also shows up as a missing one; the misspelling is the useful report.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    raw_location = tuple(p for p in first["loc"] if isinstance(p, (str, int)))
    kind = next((p for p in raw_location if p in KINDS), kind or "training")
    location = tuple(p for p in raw_location if p not in (BY_NAME, INLINE, *KINDS)
                     and not str(p).startswith("function-"))   # pydantic's name of a wrapping validator
    field = ".".join(str(p) for p in location)
    field = field if len(field) <= 120 else field[:119] + "…"  # an unknown key may be a user's megabyte
    problem = first["type"]
    context = first.get("ctx") or {}
    if isinstance(context.get("error"), ContractError):
        inner = context["error"]
        return ContractError(inner.detail, field=inner.field or field)
    if problem == "extra_forbidden":
        other = "serving" if kind == "training" else "training"
        if location[-1] in fields_at(other, location[:-1]):
            return ContractError(f"applies to {other} contracts (workload.kind: {other})", field=field)
        known = fields_at(kind, location[:-1])
        hint = did_you_mean(location[-1], known)
        allowed = f" (allowed: {', '.join(known)})" if known and not hint else ""
        return ContractError(f"unknown field{hint}{allowed}", field=field)
    if problem == "missing":
        return ContractError("required field is missing", field=field)
    message = first["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if problem == "literal_error":
        message = f"{message}, got {excerpt(first.get('input'))}"
    if problem == "union_tag_invalid":
        expected = context.get("expected_tags", "")
        message = f"expected one of {expected}, got {excerpt(context.get('tag', first.get('input')))}"
        field = f"{field}.kind" if field else "workload.kind"
    if problem in ("model_type", "dict_type"):
        message = f"expected a mapping of fields, got {excerpt(first.get('input'))}"
    return ContractError(message, field=field)
