"""The page's one state, the contract text: parse it, write the form's edits into it (comments kept), and list
its form fields and the fields it may add (``/api/contract``).

A form edit is written in place where the field is a scalar of the text, added as new lines at the end of its
section where the text lacks it, and only else is the whole contract rewritten (YAML, or JSON where the text was
JSON). Every edit is checked first as ``--set`` checks it (:func:`botec.contract.apply_overrides`), so an edit
that cannot apply (a field inside a value, an empty path) is a 422 naming the field, never a 500.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Optional

from botec.errors import ContractError

def parse_text(text: str) -> dict:
    """The raw mapping of a contract's text (YAML or JSON), or a ContractError naming the line."""
    from botec.yamlfile import load_user_yaml

    try:
        data = load_user_yaml(text)   # the loader contract files go through (no aliases, depth bounded)
    except Exception as error:  # yaml.YAMLError and its C-loader cousins
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ContractError(f"malformed YAML{where}: {getattr(error, 'problem', None) or error}",
                            field="contract") from None
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            field="contract")
    return data



def _choices() -> dict[str, list[str]]:
    """The catalog names a field may take, by field path (shown as a select)."""
    from botec.architecture import model_catalog
    from botec.catalog import accelerators, node_presets

    return {"supply.accelerator": sorted(accelerators()), "workload.model": sorted(model_catalog()),
            "supply.cluster.node": sorted(node_presets())}


def form_fields(data: dict, prefix: str = "", choices: Optional[dict] = None) -> list[dict]:
    """The contract's editable leaves, as form fields (path, value, and the catalog's names where it has
    them)."""
    choices = _choices() if choices is None else choices
    fields = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            fields += form_fields(value, path + ".", choices)
        elif isinstance(value, (str, int, float, bool)) and key not in ("name", "description"):
            field = {"path": path, "value": value}
            if path in choices and isinstance(value, str):
                field["choices"] = choices[path] if value in choices[path] else [value] + choices[path]
            fields.append(field)
    return fields


@lru_cache(maxsize=2)
def schema_fields(kind: str) -> tuple[dict, ...]:
    """Every field a contract of ``kind`` may hold (path and description), from the contract's JSON Schema:
    the form's "add a field" list. A stated number (value or {value, low, high, source}) is one field."""
    from botec.contract import contract_schema

    schema = contract_schema()
    definitions = schema["$defs"]
    found: list[dict] = []

    def resolve(node: dict) -> list[dict]:
        if "$ref" in node:
            return [definitions[node["$ref"].rsplit("/", 1)[1]]]
        return [n for option in node.get("anyOf", []) for n in resolve(option)] or [node]

    def walk(definition: dict, prefix: str, depth: int) -> None:
        for name, node in definition.get("properties", {}).items():
            path = f"{prefix}{name}"
            sections = [n for n in resolve(node) if "properties" in n and n is not definitions["StatedNumber"]]
            if sections and depth < 4 and not any(n is definitions["StatedNumber"] for n in resolve(node)):
                walk(sections[0], path + ".", depth + 1)
            elif name not in ("kind", "name", "description"):
                found.append({"path": path, "description": node.get("description", "")})

    walk(definitions["ServingContract" if kind == "serving" else "TrainingContract"], "", 0)
    return tuple(found)


def _scalar(value: Any) -> tuple[str, Any]:
    """A form's value as YAML text, and the value a contract reads from it (as ``--set`` does)."""
    from botec.yamlfile import load_user_yaml

    if not isinstance(value, str):
        return json.dumps(value), value
    try:
        parsed = load_user_yaml(value)
    except Exception:  # yaml.YAMLError and its C-loader cousins
        parsed = value
    if isinstance(parsed, (dict, list)) or "\n" in value:
        return json.dumps(value), value
    return value, parsed


def _set_in_text(text: str, path: str, value: Any) -> Optional[str]:
    """``text`` with the scalar at ``path`` replaced in place (comments and layout kept), or None
    where the path is not a scalar of the text or the edit would not read back as ``value``."""
    import yaml

    from botec.yamlfile import compose_user_yaml, load_user_yaml

    node = compose_user_yaml(text)
    if node is None:
        return None
    for key in path.split("."):
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
        if node is None:
            return None
    if not isinstance(node, yaml.ScalarNode):
        return None
    before = load_user_yaml(text)
    plain, parsed = _scalar(value)
    expected = _assign(before, path, parsed)
    quoted = json.dumps(parsed) if isinstance(parsed, str) else plain
    for written in (quoted, plain) if node.style in ('"', "'") else (plain, quoted):
        edited = text[:node.start_mark.index] + written + text[node.end_mark.index:]
        try:
            if load_user_yaml(edited) == expected:
                return edited
        except Exception:  # yaml.YAMLError and its C-loader cousins
            continue
    return None


def _add_to_text(text: str, path: str, value: Any) -> Optional[str]:
    """``text`` with a field it lacks written as new lines at the end of the deepest block section it has
    (comments and layout kept), or None where that cannot be done exactly."""
    import yaml

    from botec.contract import apply_overrides
    from botec.yamlfile import compose_user_yaml, load_user_yaml

    node = compose_user_yaml(text)
    if node is None:
        return None
    keys = path.split(".")
    depth = 0
    while depth < len(keys) - 1 and isinstance(node, yaml.MappingNode):
        child = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == keys[depth]), None)
        if not isinstance(child, yaml.MappingNode) or child.flow_style or not child.value:
            break
        node, depth = child, depth + 1
    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        return None
    first_key, (_, last_value) = node.value[0][0], node.value[-1]
    indent, step = " " * first_key.start_mark.column, "  "
    plain, _ = _scalar(value)
    lines = [f"{indent}{step * i}{key}:" for i, key in enumerate(keys[depth:-1])]
    lines.append(f"{indent}{step * (len(keys) - 1 - depth)}{keys[-1]}: {plain}")
    at = last_value.end_mark.index
    if at > 0 and text[at - 1] != "\n":
        at = text.find("\n", at)
        at = len(text) if at < 0 else at + 1
    while at >= 2 and text[at - 2] == "\n":         # before the blank lines that close the section
        at -= 1
    block = "\n".join(lines) + "\n"
    edited = text[:at] + ("" if at == 0 or text[at - 1] == "\n" else "\n") + block + text[at:]
    try:
        expected = apply_overrides(load_user_yaml(text), [f"{path}={plain}"])
        # unique keys: a section written again at the end would read back as the last one stated
        return edited if load_user_yaml(edited) == expected else None
    except Exception:  # yaml.YAMLError and its C-loader cousins, a path through a scalar, a key stated twice
        return None


def _assign(data: dict, path: str, value: Any) -> dict:
    """A copy of ``data`` with the field at ``path`` set to ``value`` (the contract's one setter)."""
    import copy

    from botec.contract import set_field

    data = copy.deepcopy(data)
    set_field(data, path, value)
    return data


def edit_text(text: str, edits: dict[str, Any]) -> str:
    """The contract text with the form's edits written into it: in place where the field is in the
    text, else the whole contract rewritten (YAML, or JSON where the text was JSON). An edit that cannot
    apply (an empty path, a field inside a value) is a ContractError naming it, as ``--set`` gives."""
    import yaml

    from botec.contract import apply_overrides

    for path, value in edits.items():
        if not all(path.split(".")):
            raise ContractError(f"{path!r}: expected a field's dotted path, such as strategy.micro_batch_size",
                                field="overrides")
        data = apply_overrides(parse_text(text), [f"{path}={_scalar(value)[0]}"])
        edited = _set_in_text(text, path, value)
        if edited is None:
            edited = _add_to_text(text, path, value)
        if edited is None:
            edited = json.dumps(data, indent=2, default=str) + "\n" if text.lstrip().startswith("{") else \
                yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        text = edited
    return text


def contract_form(text: str, edits: dict[str, Any]) -> dict:
    """What ``/api/contract`` answers: the text with the form's ``edits`` written into it, its form fields, and
    the schema's fields it may add (not given yet, and not inside a field given as one value)."""
    text = edit_text(text, edits)
    data = parse_text(text)
    kind = (data.get("workload") or {}).get("kind") if isinstance(data.get("workload"), dict) else None
    present = {f["path"] for f in form_fields(data, choices={})}
    taken = present | {p.rsplit(".", n)[0] for p in present for n in range(1, p.count(".") + 1)}

    def addable(path: str) -> bool:
        prefixes = {path.rsplit(".", n)[0] for n in range(1, path.count(".") + 1)}
        return path not in taken and not prefixes & present and path != "workload.model.config"

    return {"contract": text, "fields": form_fields(data),
            "addable": [f for f in schema_fields(str(kind)) if addable(f["path"])]}
