"""The house's shape (../shared/DESIGN.md): no module over 450 lines, no import circle, and the imports that
never happen. Read from the source with :mod:`ast` (every ``import`` counts, a lazy one inside a function too:
it is a dependency all the same; a package's ``__init__`` importing its own modules is not counted, as it
only presents them)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "botec"
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The module file an imported name lands in: the longest known module prefix of ``name``."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> set[str]:
    """botec modules that ``module`` imports (``from p import m`` counts as p.m when m is a module)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
            names = [name for name in names if name in MODULES] or [base]
        else:
            continue
        for name in names:
            target = _resolve(name) if name.startswith("botec") else None
            if target and target != module and not (path.name == "__init__.py" and target.startswith(module + ".")):
                found.add(target)   # a package's __init__ presenting its own modules is containment, not a circle
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def test_no_module_over_450_lines():
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {module: lines for module, lines in sizes.items() if lines > MAX_LINES} == {}


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, circles, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(GRAPH[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circle():
    assert _circles() == []


def test_the_circle_finder_finds_a_circle():
    """The check can fail: an edge back from the units module to the first module that imports it closes a circle."""
    importer = next(module for module in sorted(GRAPH) if "botec.units" in GRAPH[module])
    GRAPH["botec.units"] = GRAPH["botec.units"] | {importer}
    try:
        assert any({importer, "botec.units"} <= set(circle) for circle in _circles())
    finally:
        GRAPH["botec.units"] = GRAPH["botec.units"] - {importer}


def _in(module: str, *areas: str) -> bool:
    return any(module == area or module.startswith(area + ".") for area in areas)


NEVERS = [
    # (who, whom it never imports, why: ../shared/DESIGN.md "Imports that never happen")
    (("botec.graph",), ("botec.formulas", "botec.training", "botec.serving", "botec.layout"),
     "the engine knows no formula; a label mapping travels with the definition"),
    (("botec.serving",), ("botec.training",), "shared formulas live in formulas/"),
    (("botec.catalog",), ("botec.formulas", "botec.training", "botec.serving"), "data knows no formula"),
    (("botec.contract",), ("botec.estimate", "botec.estimation", "botec.api"), "the contract knows no estimate"),
    (("botec.training", "botec.serving"), ("botec.report", "botec.cli", "botec.web", "botec.measure"),
     "formulas know no screen; the core never imports torch"),
    (("botec.inputs",), ("botec.measure",), "the curve file's format lives in catalog/"),
    (("botec.report",), ("botec.cli", "botec.web"), "a report knows no front-end"),
    (("botec.estimate", "botec.estimation"), ("botec.report", "botec.api"), "display lives in the API"),
]


@pytest.mark.parametrize("who, whom, why", NEVERS, ids=[f"{n[0][0]}-never-{n[1][0]}" for n in NEVERS])
def test_imports_that_never_happen(who, whom, why):
    broken = sorted(f"{module} -> {target}" for module, targets in GRAPH.items() if _in(module, *who)
                    for target in targets if _in(target, *whom))
    assert broken == [], why


# One reader per format: every JSON a user hands botec goes through botec.jsonfile (nesting, 4,300-digit integers),
# every YAML through botec.yamlfile (aliases, nesting, integer length, duplicate keys). Nowhere else may call the
# parsers directly, lazily or through an alias (``from json import loads``, ``loads = json.loads``).
READERS = {"json": ("botec.jsonfile", {"load", "loads"}), "yaml": ("botec.yamlfile", None)}


def _is_parse(module: str, name: str) -> bool:
    """``json.load``/``json.loads``, or any ``yaml`` function that loads (load, safe_load, full_load, load_all,
    CSafeLoader...)."""
    names = READERS[module][1]
    return name in names if names is not None else "load" in name.lower()


def direct_parser_calls(source: str) -> list[str]:
    """Where ``source`` reaches a JSON or YAML parser directly ("line 12: json.loads"): an attribute of the
    ``json``/``yaml`` module (under any name it was imported as), or a name imported from it."""
    tree = ast.parse(source)
    aliases = {}   # the local name of an imported json/yaml module -> the module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in READERS:
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module in READERS:
            found += [f"line {node.lineno}: from {node.module} import {alias.name}" for alias in node.names
                      if _is_parse(node.module, alias.name)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if _is_parse(module, node.attr):
                found.append(f"line {node.lineno}: {module}.{node.attr}")
    return sorted(found)


def test_every_json_and_yaml_goes_through_its_one_reader():
    exempt = {module for module, _ in READERS.values()}
    broken = {module: calls for module, path in MODULES.items() if module not in exempt
              for calls in [direct_parser_calls(path.read_text(encoding="utf-8"))] if calls}
    assert broken == {}


def test_the_reader_rule_finds_a_planted_parser():
    """The check can fail: each way of reaching a parser directly is found, and dumping is not a parse."""
    planted = ("import json\nimport yaml as y\nfrom json import loads\n\n"
               "def read(text):\n    return json.loads(text), y.safe_load(text), y.load_all(text)\n"
               "def lazily(text):\n    import json as j\n    parse = j.load\n    return json.dumps(text), y.safe_dump({})\n")
    assert direct_parser_calls(planted) == ["line 3: from json import loads", "line 6: json.loads",
                                            "line 6: yaml.load_all", "line 6: yaml.safe_load", "line 9: json.load"]


PROCESS_WIDE = {"mallopt", "freeze", "set_threshold"}   # glibc's allocator; the garbage collector (gc.*)


def _process_wide_calls(source: str) -> list[str]:
    """The process-wide settings a module's source makes: calls of ``mallopt``, ``gc.freeze``, ``gc.set_threshold``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            if name == "mallopt" or (name in PROCESS_WIDE and owner == "gc"):
                found.append(name)
    return found


def test_process_wide_settings_only_at_entry_points():
    planted = "import gc, ctypes\ngc.freeze()\ngc.set_threshold(1)\nctypes.CDLL('libc.so.6').mallopt(-1, 2)\n"
    assert sorted(_process_wide_calls(planted)) == ["freeze", "mallopt", "set_threshold"]
    root = Path(__file__).resolve().parents[1] / "src" / "botec"
    offenders = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                       if path.parent != root / "cli" and _process_wide_calls(path.read_text(encoding="utf-8")))
    assert offenders == [], "library code sets what belongs to the process: make it in src/botec/cli/"
    assert sorted(_process_wide_calls((root / "cli" / "_process.py").read_text(encoding="utf-8"))) == \
        ["freeze", "mallopt", "mallopt", "set_threshold"]
