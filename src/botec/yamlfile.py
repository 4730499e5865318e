"""YAML, parsed in one place: botec's own data files (:func:`load_yaml_text`) and a user's text
(:func:`load_user_yaml`, :func:`parse_user_yaml`), which no file can bomb.

Every YAML botec reads goes through this module, as every JSON goes through :mod:`botec.jsonfile`
(``tests/test_structure.py`` holds it: no ``yaml.*load`` anywhere else).

- :func:`load_yaml_text`: the catalogs botec ships (``hardware.yaml``, ``models.yaml``, ...), trusted, parsed with
  libyaml's C parser when PyYAML was built with it (several times faster; start-up reads them).
- :func:`load_user_yaml`: a contract, a ``--set`` value, a study, a launch file being imported (accelerate
  YAML, Helm values, TensorRT-LLM's LLM-API options), a measured curve. Safe like the first, and moreover it
  refuses a mapping that states a key twice (YAML would keep the last silently), anchors and aliases (a
  3 KB "billion laughs" of nested aliases expands to 9^10 values: refusing them is simpler and cheaper than
  expanding them under a budget), nesting deeper than :data:`MAX_YAML_DEPTH` levels, integers longer than
  :data:`MAX_INTEGER_DIGITS` characters and text longer than ``max_chars``. Each refusal is a
  ``yaml.MarkedYAMLError`` naming the line, as a syntax error is.
- :func:`parse_user_yaml`: the same, with any refusal or syntax error turned into one
  :class:`~botec.errors.ContractError` line naming the line and column.
"""

from __future__ import annotations

from functools import lru_cache

from botec.errors import ContractError

__all__ = ["MAX_YAML_DEPTH", "MAX_INTEGER_DIGITS", "MAX_YAML_CHARS", "load_yaml_text", "load_user_yaml",
           "parse_user_yaml", "compose_user_yaml", "yaml_error_text"]

MAX_YAML_DEPTH = 32          # nesting levels a user's YAML may have (contracts use at most 5, Helm values 6)
MAX_INTEGER_DIGITS = 100     # characters of a plain integer a user's YAML may have (Python refuses > 4,300)
MAX_YAML_CHARS = 16 * 1024 * 1024   # characters of a user's YAML text (readers cap their files lower still)


def load_yaml_text(text: str, unique_keys: bool = False):
    """Parse one of botec's own YAML files safely, with libyaml's C parser when PyYAML was built with it.

    ``unique_keys``: refuse a mapping that states a key twice (YAML would silently keep the last).
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if unique_keys:
        loader = _unique_key_loader(loader)
    return yaml.load(text, Loader=loader)


_YAML_STR = "tag:yaml.org,2002:str"


@lru_cache(maxsize=None)
def _unique_key_loader(base):
    import yaml

    class UniqueKeyLoader(base):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                # a plain string key is its text (what the constructor would make of it, without constructing
                # every key twice); any other key is constructed to compare
                key = key_node.value if key_node.tag == _YAML_STR else self.construct_object(key_node, deep=deep)
                if key != "<<" and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"{key!r} is stated twice in one mapping",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep)

    return UniqueKeyLoader


def load_user_yaml(text: str, max_chars: int = MAX_YAML_CHARS):
    """Parse a user's YAML that cannot be bombed (see the module docstring): the value (None for an empty
    document), or a ``yaml.YAMLError`` (a ``MarkedYAMLError`` naming the line for each refusal)."""
    import yaml

    if len(text) > max_chars:
        raise yaml.YAMLError(f"the text is longer than {max_chars:,} characters")
    loader = _unique_key_loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader))(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_nodes(root) -> None:
    """Walk the composed YAML once: each node seen once (an alias makes a node reachable twice), depth bounded,
    integers of bounded length."""
    import yaml

    def refuse(problem: str, mark) -> None:
        raise yaml.composer.ComposerError(None, None, problem, mark)

    seen: set[int] = set()
    stack = [(root, 1, root.start_mark)]
    while stack:
        node, depth, mark = stack.pop()
        if id(node) in seen:
            refuse("anchors and aliases (&name, *name) are not allowed in a file botec reads; write the value out", mark)
        seen.add(id(node))
        if depth > MAX_YAML_DEPTH:
            refuse(f"nested deeper than {MAX_YAML_DEPTH} levels", node.start_mark)
        if isinstance(node, yaml.MappingNode):  # pushed last to first: visited in the document's order
            for key, value in reversed(node.value):
                stack.append((value, depth + 1, key.start_mark))
                stack.append((key, depth + 1, key.start_mark))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1, node.start_mark) for item in reversed(node.value))
        elif node.tag == "tag:yaml.org,2002:int" and len(node.value) > MAX_INTEGER_DIGITS:
            refuse(f"a whole number of {len(node.value)} characters (at most {MAX_INTEGER_DIGITS})", node.start_mark)


def compose_user_yaml(text: str, max_chars: int = MAX_YAML_CHARS):
    """The node tree of a user's YAML (nothing constructed: each node keeps its marks in the text, for an edit
    in place), or None when it does not parse or is too long."""
    import yaml

    if len(text) > max_chars:
        return None
    try:
        return yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None


def yaml_error_text(error: Exception) -> str:
    """What a YAML error says, in one line: "at line L, column C: problem" (without the mark when it has none)."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(error, "problem", None) or (str(error).splitlines() or [error.__class__.__name__])[0]
    return f"{where}: {problem}"


def parse_user_yaml(text: str, origin: str | None = None, field: str | None = None,
                    max_chars: int = MAX_YAML_CHARS):
    """:func:`load_user_yaml`, with a syntax error or a refusal as one :class:`ContractError` line
    ("malformed YAML at line L, column C: problem") naming ``origin`` and ``field``."""
    import yaml

    try:
        return load_user_yaml(text, max_chars=max_chars)
    except yaml.YAMLError as error:
        raise ContractError(f"malformed YAML{yaml_error_text(error)}", field=field, origin=origin) from None
    except ValueError as error:   # a timestamp such as 2026-13-45 that the constructor cannot build
        raise ContractError(f"malformed YAML: {str(error)[:200]}", field=field, origin=origin) from None
