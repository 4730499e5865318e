"""`make demo` installs the core only (pydantic, PyYAML, typer, rich): numpy is an extra for sweeps and Monte
Carlo. Every example must estimate without it; a multi-node layout and a serving load once imported numpy for
one scalar (a `floor` and an `exp`), which a core install turned into an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.yaml"))

# numpy made unimportable (as in a core install), then each example estimated and explained in this process
SCRIPT = """
import sys
sys.modules["numpy"] = None
from botec.estimation import estimate_file
from botec.graph.explain import explain
failed = []
for path in sys.argv[1:]:
    try:
        result = estimate_file(path)
        name = "run_seconds" if result.kind == "training" else "replicas"
        assert result.quantities[name].value > 0
        assert explain(name, result.quantities)
    except Exception as error:
        failed.append(f"{path}: {error.__class__.__name__}: {error}")
print("\\n".join(failed) or "all estimated")
assert "numpy" not in {m for m, v in sys.modules.items() if v is not None}
sys.exit(1 if failed else 0)
"""


def test_every_example_estimates_without_numpy():
    done = subprocess.run([sys.executable, "-c", SCRIPT, *map(str, EXAMPLES)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "all estimated"


# The commands that need numpy (or plotly) on a core install: one line naming the extra, exit 2, never an internal
# error (sensitivity and the HTML report ended in ModuleNotFoundError).
COMMAND_WITHOUT_NUMPY = """
import sys
sys.modules["numpy"] = None
sys.argv = ["botec"] + sys.argv[1:]
from botec.cli import main
main()
"""


@pytest.mark.parametrize("args, extra", [
    (["sensitivity", "examples/lesson-finetune-1b.yaml"], "botec[array]"),
    (["sensitivity", "examples/serve-llama3.1-8b-l4.yaml", "-q", "replicas"], "botec[array]"),
    (["sweep", "examples/lesson-finetune-1b.yaml", "--set", "supply.count=2,4"], "botec[array]"),
    (["estimate", "examples/lesson-finetune-1b.yaml", "--uncertainty"], "botec[array]"),
    (["report", "examples/lesson-finetune-1b.yaml", "-o", "-"], "botec[report]"),
], ids=["sensitivity", "sensitivity-serving", "sweep", "uncertainty", "report"])
def test_array_commands_name_their_extra_on_a_core_install(args, extra):
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", COMMAND_WITHOUT_NUMPY, *args], capture_output=True, text=True,
                          timeout=300, cwd=repo)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("botec: error: ") and f"pip install '{extra}'" in lines[0]
    assert "internal error" not in done.stderr
