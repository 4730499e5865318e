"""Changing a raw contract mapping's fields by their dotted paths: the one setter every caller uses.

A field's path is its sections and its name joined by dots, as errors name it and ``--set`` takes it
(``strategy.lora.rank``). :func:`set_field` writes one value at a path, creating the sections on the
way; :func:`remove_field` takes a field out (its default applies again); :func:`apply_overrides` reads
``FIELD=VALUE`` lines (``botec --set``, the Python API's keywords, the web app's edits, a calibration's
overrides), each value read as YAML. The validation cases' changes and the calibrated contract's
measured assumptions are written with the same :func:`set_field`.
"""

from __future__ import annotations

from typing import Any

from botec.errors import ContractError

__all__ = ["apply_overrides", "remove_field", "set_field"]


def _section_of(data: dict, path: str, create: bool) -> tuple[dict | None, str]:
    """(the mapping that holds the field at ``path``, the field's own name); the sections on the way are made
    when ``create`` (an absent or null one becomes an empty mapping), else a missing one gives (None, name).
    A value on the way that is not a section is a :class:`ContractError` naming ``path``."""
    *sections, name = path.split(".")
    target = data
    for key in sections:
        node = target.get(key)
        if node is None:
            if not create:
                return None, name
            node = target[key] = {}
        if not isinstance(node, dict):
            raise ContractError(f"{key!r} is not a section", field=path)
        target = node
    return target, name


def set_field(data: dict, path: str, value: Any) -> None:
    """Set the field at the dotted ``path`` of the raw mapping ``data`` to ``value``, in place."""
    section, name = _section_of(data, path, create=True)
    section[name] = value


def remove_field(data: dict, path: str) -> None:
    """Take the field at the dotted ``path`` out of the raw mapping ``data`` (in place; absent already: nothing)."""
    section, name = _section_of(data, path, create=False)
    if section is not None:
        section.pop(name, None)


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """A copy of the raw contract mapping with ``section.field=value`` overrides applied (values read as YAML)."""
    import copy

    import yaml

    from botec.yamlfile import load_user_yaml
    from botec.units import excerpt

    data = copy.deepcopy(data)
    for override in overrides:
        path, sep, text = override.partition("=")
        path = path.strip()
        if not sep or not path:
            raise ContractError(f"expected FIELD=VALUE such as supply.count=8, got {excerpt(override)}", field="--set")
        if any("\ud800" <= character <= "\udfff" for character in text):  # not text a file or a form can hold
            raise ContractError(f"the value is not valid text (a lone surrogate): {text!a}", field=path)
        try:
            value = load_user_yaml(text)
        except yaml.YAMLError:
            value = text
        set_field(data, path, value)
    return data
