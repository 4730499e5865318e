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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (a block that never runs: an import an annotation needs is
    no dependency; report/ knows the Estimate that way, so the Estimate can show itself through report/)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
            else:
                stack.append(child)


def _imports(module: str, source: str | None = None) -> set[str]:
    """botec modules that ``module`` imports at run time (``from p import m`` counts as p.m when m is a module)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    source = path.read_text(encoding="utf-8") if source is None else source
    for node in _run_time_nodes(ast.parse(source)):
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
    (("botec.estimate", "botec.estimation"), ("botec.api", "botec.cli", "botec.web"),
     "an estimate knows no front end (it shows itself through report/)"),
    (("botec.report",), ("botec.estimation", "botec.explore"),
     "report/ draws what it is handed: the Estimate is a type to it, the figures' sweeps are explore/'s"),
]


def test_an_import_only_for_types_is_no_dependency():
    """The check can fail: a run-time import counts, the same import under ``if TYPE_CHECKING:`` does not (and
    one in its ``else`` does)."""
    planted = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from botec.estimation import Estimate\n"
               "else:\n    from botec.units import format_number\n\ndef draw():\n    import botec.explore.space\n")
    assert _imports("botec.report.markdown", planted) == {"botec.units", "botec.explore.space"}


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


MAX_FUNCTION_LINES = 80
_IN_FLIGHT = "in flight, issue 31: split per contract section / per step"
# Today's long functions, each with its length now as its ceiling: the list only shrinks (issue 31).
LONG_FUNCTIONS_ALLOWED = {
    "botec.simulate.replica:Replica._run": (376, _IN_FLIGHT),
    "botec.measure.calibrate.serving:calibrate_serving": (269, _IN_FLIGHT),
    "botec.inputs.serving:build": (140, _IN_FLIGHT),
    "botec.measure.calibrate.training_log:calibrate_log": (143, _IN_FLIGHT),
    "botec.measure.harness:measure": (128, _IN_FLIGHT),
    "botec.cli.simulating:simulate": (120, _IN_FLIGHT),
    "botec.serving.step:scalar_engine_step": (116, _IN_FLIGHT),
    "botec.web.app:create_app": (115, _IN_FLIGHT),
    "botec.findings.training:training_findings": (115, _IN_FLIGHT),
    "botec.findings.serving:serving_findings": (112, _IN_FLIGHT),
    "botec.measure.gemm_curve:measure": (103, _IN_FLIGHT),
    "botec.cli.measuring:calibrate": (98, _IN_FLIGHT),
    "botec.cli.measuring:measure": (94, _IN_FLIGHT),
    "botec.simulate:simulate": (93, _IN_FLIGHT),
    "botec.cli.exploring:solve": (91, _IN_FLIGHT),
    "botec.serving.step:engine_step_seconds": (82, _IN_FLIGHT),
}


def function_lengths(module: str, source: str) -> dict[str, int]:
    """Each function's and method's length in lines, ``end_lineno - lineno + 1`` (its ``def`` line on: the
    decorators are not counted), keyed ``module:qualname`` (a nested one under ``<locals>``)."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths[f"{module}:{prefix}{child.name}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def long_function_problems(lengths: dict[str, int], allowed: dict[str, tuple[int, str]]) -> list[str]:
    """What breaks the length rule: an unlisted function over the limit, a listed one past its ceiling, and a
    listed one at the limit or below (then it leaves the list) or gone."""
    problems = [f"{name}: {length} lines (at most {MAX_FUNCTION_LINES}; split it)"
                for name, length in lengths.items() if length > MAX_FUNCTION_LINES and name not in allowed]
    for name, (ceiling, _reason) in allowed.items():
        length = lengths.get(name)
        if length is None or length <= MAX_FUNCTION_LINES:
            problems.append(f"{name}: {length or 'gone'} now: take it off LONG_FUNCTIONS_ALLOWED")
        elif length > ceiling:
            problems.append(f"{name}: {length} lines, past its ceiling of {ceiling}")
    return problems


def test_no_function_over_80_lines_but_the_listed_ones():
    lengths: dict[str, int] = {}
    for module, path in MODULES.items():
        lengths.update(function_lengths(module, path.read_text(encoding="utf-8")))
    assert long_function_problems(lengths, LONG_FUNCTIONS_ALLOWED) == []


def test_the_length_rule_finds_growth_new_and_shrunk():
    body = "def f():\n" + "    x = 1\n" * 90 + "class C:\n    @property\n    def g(self):\n        return 1\n"
    lengths = function_lengths("m", body)
    assert lengths == {"m:f": 91, "m:C.g": 2}
    assert long_function_problems(lengths, {}) == ["m:f: 91 lines (at most 80; split it)"]
    assert long_function_problems(lengths, {"m:f": (91, "")}) == []
    assert "past its ceiling" in long_function_problems(lengths, {"m:f": (90, "")})[0]
    assert long_function_problems(lengths, {"m:f": (91, ""), "m:C.g": (2, "")}) == [
        "m:C.g: 2 now: take it off LONG_FUNCTIONS_ALLOWED"]


def readme_map_names(readme: str) -> set[str]:
    """The top-level entries of src/botec/ that the README's development map names (``name.py`` or ``name/``)."""
    block = readme.split("## Development", 1)[1].split("```", 2)[1]
    lines = block.split("src/botec/", 1)[1].splitlines()
    return {line.split()[0] for line in lines if line.startswith("  ") and not line.startswith("   ")}


def test_the_readme_map_names_every_top_level_module_and_package():
    readme = (SRC.parent / "README.md").read_text(encoding="utf-8")
    entries = {path.name + ("/" if path.is_dir() else "") for path in PACKAGE.iterdir()
               if (path.suffix == ".py" and not path.name.startswith("__")) or (path / "__init__.py").exists()}
    named = readme_map_names(readme)
    assert "units.py" in named and "cli/" in named   # the map was found and read
    assert sorted(entries - named) == []


# Issue 31, "one way through": outside contract/ and inputs/ nothing reads the raw contract; the Inputs carry what
# was resolved from it (stack, engine preset, traffic, PEFT, options, name, notes). Each reader left is named here
# with its count as its ceiling and why: the list only shrinks.
_AS_WRITTEN = "the report's 'as written' header: the contract's own fields, quoted as the user wrote them"
_ISSUE_32 = "launch/ is rewritten by issue 32 (each degree written and read through its layout record)"
_MEASURE = "a measurement repeats the contract's stated choices (optimizer as named, attention count): in flight"
RAW_CONTRACT_READS_ALLOWED = {
    "botec.report": (1, _AS_WRITTEN),
    "botec.report.terminal": (1, _AS_WRITTEN),
    "botec.report.markdown": (1, _AS_WRITTEN),
    "botec.report.html": (2, _AS_WRITTEN),
    "botec.report.json_report": (2, "the JSON report carries the contract as written and the loader's notes"),
    "botec.estimation": (1, "Estimate.contract: the API's one view of the contract as written"),
    "botec.explore.space": (1, "hands the contract back to inputs.build_inputs in a worker process (Rebuilt)"),
    "botec.simulate.replications": (1, "hands the contract back to the estimate in a worker process (Rebuilt)"),
    "botec.web.answers": (2, "the request body's contract text (request.contract), before anything is loaded"),
    "botec.validate": (1, "a validation case's contract data (case.contract), before it is loaded"),
    "botec.measure.command": (2, _MEASURE),
    "botec.measure.calibrate.training_log": (1, _MEASURE),
    "botec.measure.gemm_curve": (1, _MEASURE),
    "botec.launch.plan": (3, _ISSUE_32),
    "botec.launch.serving_plan": (5, _ISSUE_32),
    "botec.launch.torchtitan": (1, _ISSUE_32),
    "botec.launch.megatron": (1, _ISSUE_32),
    "botec.launch.deepspeed": (1, _ISSUE_32),
    "botec.launch.accelerate": (1, _ISSUE_32),
    "botec.launch.kubernetes": (1, _ISSUE_32),
}
_CONTRACT_OWNERS = ("botec.contract", "botec.inputs")


def raw_contract_reads(source: str) -> list[int]:
    """The lines where ``source`` reads an attribute named ``contract`` (``result.contract``,
    ``self.inputs.contract``, an alias ``contract = estimate.contract``), run-time code only; ``botec.contract`` the
    module is no read."""
    return sorted(node.lineno for node in _run_time_nodes(ast.parse(source))
                  if isinstance(node, ast.Attribute) and node.attr == "contract"
                  and not (isinstance(node.value, ast.Name) and node.value.id == "botec"))


def raw_contract_problems(reads: dict[str, list[int]], allowed: dict[str, tuple[int, str]]) -> list[str]:
    """What breaks the one-way rule: an unlisted module that reads the raw contract, a listed one past its ceiling,
    and a listed one that reads it less than listed (then lower the ceiling, or take it off)."""
    problems = [f"{module}: reads the raw contract at lines {lines} (read it from result.inputs)"
                for module, lines in reads.items() if lines and module not in allowed]
    for module, (ceiling, _why) in allowed.items():
        count = len(reads.get(module, []))
        if count > ceiling:
            problems.append(f"{module}: {count} raw-contract reads, past its ceiling of {ceiling}")
        elif count < ceiling:
            problems.append(f"{module}: {count} raw-contract reads now: lower RAW_CONTRACT_READS_ALLOWED")
    return problems


def test_nothing_outside_contract_and_inputs_reads_the_raw_contract():
    reads = {module: raw_contract_reads(path.read_text(encoding="utf-8")) for module, path in MODULES.items()
             if not module.startswith(_CONTRACT_OWNERS)}
    assert raw_contract_problems(reads, RAW_CONTRACT_READS_ALLOWED) == []


def test_the_one_way_rule_finds_a_planted_read():
    planted = ("import botec.contract\nfrom typing import TYPE_CHECKING\n"
               "def f(result, self):\n    contract = result.contract\n    return self.inputs.contract.strategy\n"
               "if TYPE_CHECKING:\n    x = result.contract\n")
    assert raw_contract_reads(planted) == [4, 5]
    assert raw_contract_problems({"m": [4, 5]}, {}) == ["m: reads the raw contract at lines [4, 5] (read it from "
                                                        "result.inputs)"]
    assert raw_contract_problems({"m": [4, 5]}, {"m": (2, "")}) == []
    assert "past its ceiling" in raw_contract_problems({"m": [4, 5]}, {"m": (1, "")})[0]
    assert "lower" in raw_contract_problems({"m": [4]}, {"m": (2, "")})[0]
