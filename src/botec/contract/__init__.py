"""The workload contract: what the job is, what it runs on, how, and what is assumed.

A contract has four sections (the application / system / execution split of Calculon, plus
named assumptions), and two kinds, chosen by ``workload.kind``:

- a training contract (:class:`TrainingContract`, :mod:`.training`): the model, the tokens, the
  sequence length; the accelerators and their count, links and storage; the parallel layout,
  batch, precision, optimizer, checkpoint and retention policy; efficiencies and placeholder
  factors, and the thresholds of the findings;
- a serving contract (:class:`ServingContract`, :mod:`.serving`): the model, its traffic and
  latency targets; the accelerator (the count follows from the traffic) and candidates; one
  replica's layout and formats; the roofline's efficiencies.

Every number accepts units (``32 GB``, ``200 TFLOP/s``, ``1 h``, ``7B``) or a plain number in
base units, and may be written as a mapping with an uncertainty range and a source note
(:mod:`.stated`). :func:`load_contract` reads YAML or JSON and raises :class:`ContractError`
with one line that names the field and what was expected.

Contracts written for an earlier botec keep working: a field of the other kind that botec used
to ignore in silence (``assumptions.headroom`` in a serving contract) is ignored with a one-line
note (``contract.notes``) instead of refused.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Discriminator, Tag, TypeAdapter, ValidationError

from botec.contract.messages import KINDS, one_line, section_class
from botec.contract.overrides import apply_overrides, remove_field, set_field
from botec.contract.serving import ServingContract
from botec.contract.stated import STATED_SCHEMA, STATED_SCHEMA_NAME, Stated
from botec.contract.training import TrainingContract
from botec.errors import ContractError, read_text_file

__all__ = ["Contract", "ContractError", "ServingContract", "Stated", "TrainingContract", "SCHEMA_VERSION",
           "apply_overrides", "contract_schema", "load_contract", "parse_contract", "read_contract_data", "remove_field",
           "set_field"]

SCHEMA_VERSION = 1  # the contract schema this botec reads; a contract may state the one it was written for
MAX_CONTRACT_BYTES = 1024 * 1024  # a contract file larger than this is refused before it is read whole


def _kind(raw: Any) -> str:
    if isinstance(raw, dict):
        workload = raw.get("workload")
        return workload.get("kind", "training") if isinstance(workload, dict) else "training"
    return getattr(raw, "kind", "training")


Contract = Annotated[Union[Annotated[TrainingContract, Tag("training")], Annotated[ServingContract, Tag("serving")]],
                     Discriminator(_kind)]


@lru_cache(maxsize=1)
def _adapter() -> TypeAdapter:
    return TypeAdapter(Contract)


def contract_schema() -> dict:
    """The JSON Schema of a contract (both kinds), for editors and validators."""
    schema = _adapter().json_schema()
    schema["title"] = "botec workload contract"
    schema = _refer_to_stated(schema)
    schema.setdefault("$defs", {})[STATED_SCHEMA_NAME] = STATED_SCHEMA
    _describe_properties(schema, schema["$defs"])
    return schema


def _refer_to_stated(node: Any) -> Any:
    """The schema with each inline copy of the stated-number mapping replaced by a reference to one definition."""
    if node == STATED_SCHEMA:
        return {"$ref": f"#/$defs/{STATED_SCHEMA_NAME}"}
    if isinstance(node, dict):
        return {key: _refer_to_stated(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_refer_to_stated(item) for item in node]
    return node


def _describe_properties(node: Any, defs: dict) -> None:
    """Give every property its description where pydantic put it one level down.

    An optional field's description lands inside its ``anyOf`` (on the non-null member), and a field whose
    type is a section is a bare ``$ref``: the description is lifted up, or taken from the section's docstring.
    """
    if isinstance(node, list):
        for item in node:
            _describe_properties(item, defs)
        return
    if not isinstance(node, dict):
        return
    for prop in (node.get("properties") or {}).values():
        if not isinstance(prop, dict) or "description" in prop:
            continue
        for member in prop.get("anyOf", ()):
            if isinstance(member, dict) and "description" in member:
                prop["description"] = member.pop("description")
                break
        else:
            refs = [prop] + [m for m in prop.get("anyOf", ()) if isinstance(m, dict)]
            for member in refs:
                target = defs.get(str(member.get("$ref", "")).rpartition("/")[2], {})
                if "description" in target:
                    prop["description"] = target["description"]
                    break
    for key, value in node.items():
        if key != "$defs" or node is not defs:
            _describe_properties(value, defs)


def _is_default(section: type, name: str, raw: Any) -> bool:
    """Whether ``raw`` states the default of field ``name`` of ``section``."""
    default = section.model_fields[name].get_default(call_default_factory=True)
    if isinstance(default, Stated):
        value = raw.get("value") if isinstance(raw, dict) else raw
        return isinstance(value, (int, float)) and float(value) == default.value
    return raw == default


# Fields of the other kind earlier botec refused, and refuses still (with a message of their own).
_REFUSED_FOREIGN = {("supply", "count")}


def _other_kind_fields(data: dict, kind: str) -> tuple[dict, list[str]]:
    """Leave out the fields of the other kind of contract that earlier botec ignored, with a note each.

    Strategy fields of the other kind are ignored only when they state that kind's default
    (as before); any other value is refused by validation ("applies to serving contracts").
    """
    other = "serving" if kind == "training" else "training"
    notes: list[str] = []
    cleaned = dict(data)
    for section_name in ("supply", "strategy", "assumptions"):
        section = data.get(section_name)
        mine, theirs = section_class(kind, (section_name,)), section_class(other, (section_name,))
        if not isinstance(section, dict) or mine is None or theirs is None:
            continue
        kept = {}
        for name, raw in section.items():
            foreign = name not in mine.model_fields and name in theirs.model_fields and (section_name, name) not in \
                _REFUSED_FOREIGN
            if foreign and (section_name != "strategy" or _is_default(theirs, name, raw)):
                notes.append(f"{section_name}.{name} applies to {other} contracts: ignored")
                continue
            kept[name] = raw
        cleaned[section_name] = kept
    return cleaned, notes


def parse_contract(data: Any, origin: str | None = None) -> TrainingContract | ServingContract:
    """Validate already-loaded data (a dict) as a contract of its kind; ``contract.notes`` says what was ignored."""
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            origin=origin)
    _refuse_huge_whole_numbers(data, origin)
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise ContractError(f"written for contract schema {version}; this botec reads schema {SCHEMA_VERSION} "
                            "(upgrade botec)", field="schema_version", origin=origin)
    kind = _kind(data)
    notes: list[str] = []
    if kind not in KINDS:
        raise ContractError(f"expected {' or '.join(KINDS)}, got {kind!r}", field="workload.kind", origin=origin)
    data, notes = _other_kind_fields(data, kind)
    data, notes = _hugging_face_model(data, notes)
    try:
        contract = (ServingContract if kind == "serving" else TrainingContract).model_validate(data)
    except ValidationError as error:
        problem = one_line(error, kind)
        raise ContractError(problem.detail, field=problem.field, origin=origin) from None
    except ContractError as error:
        raise ContractError(error.detail, field=error.field, origin=origin) from None
    contract._notes = notes
    return contract


def _refuse_huge_whole_numbers(data: dict, origin: str | None) -> None:
    """A ContractError naming the first whole number of 10^18 or more (a plain-int field would take it as it is, and
    it would overflow a float or an int64 in the formulas); larger magnitudes are written as floats (``1e20``),
    which each number field bounds (:data:`botec.contract.stated.LARGEST_MAGNITUDE`)."""
    from botec.contract.stated import MAX_WHOLE_NUMBER
    from botec.units import excerpt

    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{path}.{key}" if path else str(key), value) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((f"{path}[{index}]", value) for index, value in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) >= MAX_WHOLE_NUMBER:
            raise ContractError(f"a whole number must be below 10^18 (write larger magnitudes as 1e20), got "
                                f"{excerpt(node)}", field=path, origin=origin)


def _hugging_face_model(data: dict, notes: list[str]) -> tuple[dict, list[str]]:
    """``model: meta-llama/Llama-3.1-8B`` read as the catalog's ``llama-3.1-8b`` (the name after the slash, any
    case), with a note; any other model is left for validation to judge."""
    workload = data.get("workload")
    model = workload.get("model") if isinstance(workload, dict) else None
    name = model.get("catalog") if isinstance(model, dict) else model
    if not isinstance(name, str) or "/" not in name:
        return data, notes
    from botec.architecture import model_catalog

    key = name.rsplit("/", 1)[1].strip().lower()
    if key not in model_catalog():
        return data, notes
    model = dict(model, catalog=key) if isinstance(model, dict) else key
    return dict(data, workload=dict(workload, model=model)), notes + [
        f"workload.model: the Hugging Face id {name!r} read as the catalog model {key!r}"]


def read_contract_data(path: str | Path) -> dict:
    """The raw mapping of a YAML or JSON contract file, or a :class:`ContractError` saying what is wrong."""
    import yaml

    path = Path(path)
    origin = str(path)
    text = read_text_file(path, max_bytes=MAX_CONTRACT_BYTES)
    try:
        if path.suffix.lower() == ".json":
            from botec.jsonfile import load_json_text

            data = load_json_text(text, origin, unique_keys=True)
        else:
            from botec.yamlfile import load_user_yaml

            data = load_user_yaml(text)
    except json.JSONDecodeError as error:
        raise ContractError(f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                            origin=origin) from None
    except ContractError:
        raise
    except ValueError as error:  # YAML: a date such as 2026-13-45 that the constructor cannot build
        raise ContractError(f"malformed YAML: {str(error)[:200]}", origin=origin) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ContractError(f"malformed YAML{where}: {problem}", origin=origin) from None
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            origin=origin)
    return data


def load_contract(path: str | Path, overrides: list[str] | None = None, origin: str | None = None) -> Contract:
    """Read, override and validate a contract file; errors name ``origin`` (default: the path)."""
    try:
        data = read_contract_data(path)
    except ContractError as error:
        raise ContractError(error.detail, field=error.field, origin=origin or error.origin) from None
    if overrides:
        data = apply_overrides(data, overrides)
    try:
        contract = parse_contract(data, origin=origin or str(path))
    except ContractError as error:
        raise _blame_override(error, overrides or []) from None
    contract._overrides = tuple(overrides or ())
    return contract


def _blame_override(error: ContractError, overrides: list[str]) -> ContractError:
    """The error blamed on the ``--set`` that wrote the field it names (the last such), else unchanged."""
    field = error.field or ""
    for override in reversed(overrides):
        path = override.partition("=")[0].strip()
        if field and (field == path or field.startswith(path + ".") or path.startswith(field + ".")):
            shown = override if len(override) <= 100 else override[:99] + "…"   # a --set value may be huge
            return ContractError(error.detail, field=None if field == path else field, origin=f"--set {shown}")
    return error
