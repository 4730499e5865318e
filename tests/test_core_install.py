"""`make demo` installs the core only (pydantic, PyYAML, typer, rich): numpy is an extra for sweeps and Monte
Carlo. Every example must estimate without it; a multi-node layout and a serving load once imported numpy for
one scalar (a `floor` and an `exp`), which a core install turned into an internal error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.yaml"))

# numpy made unimportable (as in a core install), then each example estimated and explained in this process
SCRIPT = """
import sys
sys.modules["numpy"] = None
from botec.estimate import estimate_file
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
