"""Contract fields that name a key of ``catalog/stacks.yaml`` (``strategy.framework``, ``elementwise``, ``loss``):
checked against the catalog when a contract is validated, so a stack added to the YAML needs no code edit."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from botec.errors import ContractError

__all__ = ["ElementwiseName", "LossName", "StackName", "known_stack_key", "stack_keys_enum"]


def _stack_keys(table: str) -> list[str]:
    """The keys of one table of ``catalog/stacks.yaml`` (stacks, elementwise, loss): the one list of them."""
    from botec.catalog import training_stacks

    return list(getattr(training_stacks(), table))


def known_stack_key(table: str, field_path: str):
    """A validator: the value, checked against ``stacks.yaml``'s ``table`` when the catalog is first needed."""

    def check(name: Any) -> Any:
        if name is None:
            return None
        from botec.catalog import did_you_mean
        from botec.units import excerpt

        keys = _stack_keys(table)
        if not isinstance(name, str) or name not in keys:
            raise ContractError(f"unknown {field_path.rsplit('.', 1)[-1]} {excerpt(name)}"
                                f"{did_you_mean(str(name), keys)} (one of: {', '.join(keys)})",
                                field=field_path)
        return name

    return check


def stack_keys_enum(table: str):
    """``json_schema_extra`` for a field naming a ``stacks.yaml`` key: its allowed values, read at schema time."""

    def extra(schema: dict) -> None:
        schema["enum"] = [*_stack_keys(table), None]
        schema.pop("anyOf", None)

    return extra


def _stack_key_field(table: str, field_path: str) -> Any:
    return Annotated[str | None, BeforeValidator(known_stack_key(table, field_path)),
                     Field(json_schema_extra=stack_keys_enum(table))]


StackName = _stack_key_field("stacks", "strategy.framework")
ElementwiseName = _stack_key_field("elementwise", "strategy.elementwise")
LossName = _stack_key_field("loss", "strategy.loss")
