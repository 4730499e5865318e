"""Honest figures: the specs `botec report` and the web app draw, checked as data (plotly's dict)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("plotly")

from botec.estimate import estimate_file  # noqa: E402
from botec.report.figures import figures  # noqa: E402

from conftest import EXAMPLES, LESSON  # noqa: E402


@pytest.fixture(scope="module")
def specs():
    """Each example's figures as plotly dicts, by figure title."""
    found = {}
    for path in (LESSON, EXAMPLES / "llama3.1-70b-pretrain.yaml", EXAMPLES / "serve-llama3.1-8b-h100.yaml"):
        found[path.stem] = {f["layout"]["title"]["text"]: f for f in figures(estimate_file(path))}
    return found


def test_specs_are_plain_json_that_plotly_accepts(specs):
    """The figures are plain dicts (JSON as they are, no plotly object), and plotly's own schema accepts each."""
    import plotly.graph_objects as go

    assert [len(by_title) for by_title in specs.values()] == [4, 4, 5]
    for by_title in specs.values():
        for title, spec in by_title.items():
            assert json.loads(json.dumps(spec, allow_nan=False)) == spec, title
            figure = go.Figure(spec)                                 # raises on an unknown or misspelt property
            assert figure.layout.title.text == title
            assert figure.layout.template.layout.plot_bgcolor == "white"   # drawn in plotly_white, as before
    scaling = specs["llama3.1-70b-pretrain"]["Run time and cost against accelerator count"]   # cost on a 2nd y axis
    assert [t["yaxis"] for t in scaling["data"]] == ["y", "y2"] and scaling["layout"]["yaxis2"]["overlaying"] == "y"


def test_figures_import_no_plotly():
    """The web app builds the figures on every page request: plotly (a 100 ms figure build) stays out of it."""
    code = ("import sys; from botec.estimate import estimate_file; from botec.report.figures import figures; "
            f"specs = figures(estimate_file({str(LESSON)!r})); "
            "print(len(specs), sorted(m for m in sys.modules if m.split('.')[0] == 'plotly'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "4 []"


def _axes(layout: dict) -> dict:
    return {k: v for k, v in layout.items() if re.fullmatch(r"[xy]axis\d*", k)}


def test_every_value_axis_has_a_unit_starts_at_zero_or_says_log(specs):
    for example, by_title in specs.items():
        for title, spec in by_title.items():
            for name, axis in _axes(spec["layout"]).items():
                text = (axis.get("title") or {}).get("text")
                if not text:                     # a category axis (bar names) has no values to title
                    continue
                assert re.search(r"\(.+\)$", text), (example, title, name, text)        # "... (hours)"
                if axis.get("type") == "log":
                    assert "log scale" in text, (example, title, name, text)
                else:
                    assert axis.get("rangemode") == "tozero", (example, title, name)
    scaling = specs["llama3.1-70b-pretrain"]["Run time and cost against accelerator count"]["layout"]
    assert scaling["yaxis2"]["title"]["text"] == "cost (USD)" and scaling["yaxis2"]["rangemode"] == "tozero"
    assert scaling["xaxis"]["title"]["text"] == "accelerators (log scale)"


def test_values_on_bars(specs):
    memory = specs["lesson-finetune-1b"]["Memory per accelerator"]["data"]
    assert [(t["name"], t["text"][0]) for t in memory][:3] == [("weights", "2 GB"), ("gradients", "2 GB"),
                                                               ("optimizer state", "12 GB")]
    for by_title in specs.values():
        for spec in by_title.values():
            for trace in spec["data"]:
                if trace["type"] == "bar":
                    assert all(trace["text"]), trace["name"]


def test_the_current_configuration_and_every_target_are_drawn(specs):
    scaling = specs["lesson-finetune-1b"]["Run time and cost against accelerator count"]["layout"]
    assert [s["x0"] for s in scaling["shapes"]] == [4]                          # the lesson's 4 accelerators
    assert "this plan: 4 accelerators" in [a["text"] for a in scaling["annotations"]]
    load = specs["serve-llama3.1-8b-h100"]["Latency against load (one replica)"]["layout"]
    lines = {(s.get("yref"), s["y0"]) for s in load["shapes"] if s.get("xref") == "paper"}
    assert lines == {("y", 500.0), ("y2", 40.0)}                                # TTFT 500 ms, TPOT 40 ms targets
    assert [s["x0"] for s in load["shapes"] if s.get("xref") != "paper"] == [20.0]   # one replica carries all 20 requests/s
    context = specs["serve-llama3.1-8b-h100"]["Concurrency that fits against context length"]["layout"]
    assert [s["x0"] for s in context["shapes"]] == [1152.0]                     # 1,024 prompt + 256 / 2 output


def test_the_tornado_title_reads_as_a_number_with_units(specs):
    titles = list(specs["llama3.1-70b-pretrain"])
    tornado = [t for t in titles if t.startswith("Sensitivity")][0]
    assert tornado == "Sensitivity of run_seconds (change from 4,068 hours)"    # was "4.07e+03 hours"
    assert not any("e+" in t for by_title in specs.values() for t in by_title)
