"""``botec import``: a launch file (or a Hugging Face ``config.json``) into a contract's YAML.

1. The format: ``--from``, else botec's own header (every file ``botec export`` writes names its format:
   :func:`botec.launch.commandline.written_format`, DeepSpeed's ``_comment.format``), else the file's content
   (each format's ``markers``; a Hugging Face config is a JSON object with ``model_type`` or ``architectures``),
   else its suffix when one format alone has it.
2. The fields: the format's ``read`` (a partial contract); a ``config.json`` gives ``workload.model.config``, its
   path relative to the written contract.
3. The contract: the fields set on ``--base``'s mapping (a field the file carries wins; ``workload.model`` is
   replaced whole), else on an empty contract of the format's kind. What a contract needs and neither gives is
   listed in the file's header as comments, and ``botec estimate`` names the first missing field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from botec.errors import ContractError, UserError, read_text_file

__all__ = ["HF_CONFIG", "REQUIRED", "available_formats", "detect_format", "import_contract"]

HF_CONFIG = "hf-config"
"""The ``--from`` name of a Hugging Face ``config.json`` (a model, not a launch format)."""

MAX_LAUNCH_BYTES = 1024 * 1024

REQUIRED = {
    "training": ("workload.model", "workload.tokens", "workload.sequence_length", "supply.accelerator",
                 "supply.count", "strategy.micro_batch_size"),
    "serving": ("workload.model", "workload.traffic", "supply.accelerator"),
}
"""The fields a contract of each kind cannot do without (the rest have defaults)."""


def _json_object(text: str) -> Optional[dict]:
    """The JSON object ``text`` holds, or None (not JSON, nested too deep, not an object)."""
    from botec.jsonfile import load_json_text

    try:
        data = load_json_text(text)
    except (ValueError, ContractError):
        return None
    return data if isinstance(data, dict) else None


def _is_hf_config(text: str) -> bool:
    data = _json_object(text)
    return data is not None and ("model_type" in data or "architectures" in data)


def _botec_format(path: Path, text: str) -> Optional[str]:
    """The format a file botec exported names: its header line, or a JSON file's ``_comment.format``."""
    from botec.launch.commandline import written_format

    named = written_format(text)
    if named is None and path.suffix.lower() == ".json":
        comment = (_json_object(text) or {}).get("_comment")
        if isinstance(comment, dict) and comment.get("written_by") == "botec":
            named = comment.get("format")
    return named if isinstance(named, str) else None


def detect_format(path: Path, text: str, chosen: Optional[str]) -> str:
    """The format name of ``path`` (``chosen`` when given, checked)."""
    from botec.launch import FORMAT_MODULES, launch_format

    if chosen is not None:
        if chosen != HF_CONFIG:
            launch_format(chosen)   # an unknown name: the registry's one-line error
        return chosen
    formats = {name: launch_format(name) for name in available_formats(FORMAT_MODULES)}
    own = _botec_format(path, text)
    if own in formats and formats[own].read is not None:
        return own
    if path.suffix.lower() == ".json" and _is_hf_config(text):
        return HF_CONFIG
    marked = [name for name, f in formats.items() if f.read and any(m in text for m in f.markers)]
    if len(marked) == 1:
        return marked[0]
    by_suffix = [name for name, f in formats.items() if f.read and f.suffix == path.suffix.lower()]
    if not marked and len(by_suffix) == 1:
        return by_suffix[0]
    candidates = marked or by_suffix or list(formats)
    raise UserError(f"{path}: cannot tell which launch format this is (it could be {', '.join(candidates)}); "
                    f"pass --from FORMAT")


def available_formats(modules: dict) -> list[str]:
    """The registered formats whose module is installed (a format still being written is left out)."""
    import importlib.util

    return [name for name, module in modules.items() if importlib.util.find_spec(module) is not None]


def import_contract(path: Path, chosen: Optional[str] = None, base: Optional[Path] = None,
                    output: Optional[Path] = None, overrides: list[str] = ()) -> str:
    """The YAML text of the contract that ``path`` (with ``base``) describes, written for the folder of ``output``
    (the current folder when it is stdout)."""
    from botec.contract import apply_overrides, read_contract_data, set_field
    from botec.launch.commandline import comment_line, yaml_document

    text = read_text_file(path, "launch file", max_bytes=MAX_LAUNCH_BYTES)
    name = detect_format(path, text, chosen)
    target = (output.resolve().parent if output is not None and str(output) != "-" else Path.cwd())
    if name == HF_CONFIG:
        if not _is_hf_config(text):
            raise ContractError("expected a Hugging Face config.json (a JSON object with model_type or architectures)",
                                origin=str(path))
        fields: dict = {"workload": {"model": {"config": _relative(path.resolve(), target)}}}
        described = "a Hugging Face config.json"
    else:
        from botec.launch import launch_format

        launch = launch_format(name)
        if launch.read is None:
            raise UserError(f"--from {name}: botec writes {launch.tool} files but does not read them")
        fields = launch.read(text, str(path))
        described = f"{launch.tool} {launch.version} ({name})"
    notes = list(fields.pop("_notes", []))
    data = read_contract_data(base) if base is not None else {}
    if base is not None:
        _rebase_model_config(data, base.resolve().parent, target)
    kind = _kind(data, name)
    if base is None or kind == "serving":   # a contract from nothing says its kind (and so names what it misses)
        set_field(data, "workload.kind", kind)
    for field, value in _leaves(fields).items():
        set_field(data, field, value)
    if overrides:
        data = apply_overrides(data, list(overrides))
    data.setdefault("name", path.stem)
    missing = [field for field in REQUIRED[kind] if _absent(data, field)]
    if not missing:   # complete: it must be a contract botec can read
        from botec.contract import parse_contract

        parse_contract(data, origin=f"{path} imported")
    header = [f"botec contract imported from {path} ({described})"]
    if base is not None:
        header.append(f"fields the file does not carry come from {base}")
    header += [f"note: {note}" for note in notes]
    for field in missing:
        header.append(f"missing: {field} (the file does not carry it): add it, or import with --base CONTRACT")
    header = [comment_line(line) for line in header]   # a path or an option name cannot end its comment
    ordered = {key: data[key] for key in ("name", "description", "workload", "supply", "strategy", "assumptions")
               if key in data}
    ordered.update({key: value for key, value in data.items() if key not in ordered})
    return yaml_document(header, ordered)


def _kind(base_data: dict, name: str) -> str:
    workload = base_data.get("workload")
    if isinstance(workload, dict) and workload.get("kind") in ("training", "serving"):
        return workload["kind"]
    if name == HF_CONFIG:
        return "training"
    from botec.launch import launch_format

    return launch_format(name).kind


def _leaves(fields: dict, prefix: str = "") -> dict:
    """The dotted paths of a partial contract; ``workload.model`` is one leaf (it replaces the base's model)."""
    flat: dict = {}
    for key, value in fields.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path != "workload.model":
            flat.update(_leaves(value, path + "."))
        else:
            flat[path] = value
    return flat


def _absent(data: dict, field: str) -> bool:
    node = data
    for key in field.split("."):
        if not isinstance(node, dict) or node.get(key) is None:
            return True
        node = node[key]
    return False


def _relative(path: Path, folder: Path) -> str:
    """``path`` relative to ``folder`` when they share a folder below the root (a project), else absolute."""
    try:
        common = Path(os.path.commonpath([path, folder]))
    except ValueError:   # another drive (Windows)
        return str(path)
    return str(path) if common == Path(common.anchor) else os.path.relpath(path, folder)


def _rebase_model_config(data: dict, base_folder: Path, target: Path) -> None:
    """A relative ``workload.model.config`` of the base, made relative to the written contract's folder."""
    model = (data.get("workload") or {}).get("model") if isinstance(data.get("workload"), dict) else None
    if isinstance(model, dict) and isinstance(model.get("config"), str) and not os.path.isabs(model["config"]):
        model["config"] = _relative(base_folder / model["config"], target)
