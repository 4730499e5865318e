"""Honest figures: the specs `botec report` and the web app draw, checked as data (plotly's dict)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("plotly")

from botec.estimation import estimate_file  # noqa: E402
from botec.explore.figure_data import figure_data, load_sweep  # noqa: E402
from botec.report.figures import figures  # noqa: E402

from conftest import EXAMPLES, LESSON  # noqa: E402


@pytest.fixture(scope="module")
def specs():
    """Each example's figures as plotly dicts, by figure title."""
    found = {}
    for path in (LESSON, EXAMPLES / "llama3.1-70b-pretrain.yaml", EXAMPLES / "serve-llama3.1-8b-h100.yaml"):
        result = estimate_file(path)
        found[path.stem] = {f["layout"]["title"]["text"]: f for f in figures(result, figure_data(result))}
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
    code = ("import sys; from botec.estimation import estimate_file; from botec.report.figures import figures; "
            "from botec.explore.figure_data import figure_data; "
            f"result = estimate_file({str(LESSON)!r}); specs = figures(result, figure_data(result)); "
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
    assert [s["x0"] for s in load["shapes"] if s.get("xref") != "paper"] == [10.0]   # 2 replicas carry 20 requests/s
    context = specs["serve-llama3.1-8b-h100"]["Concurrency that fits against context length"]["layout"]
    assert [s["x0"] for s in context["shapes"]] == [1152.0]                     # 1,024 prompt + 256 / 2 output


def test_the_tornado_title_reads_as_a_number_with_units(specs):
    titles = list(specs["llama3.1-70b-pretrain"])
    tornado = [t for t in titles if t.startswith("Sensitivity")][0]
    assert tornado == "Sensitivity of run_seconds (change from 4,212 hours)"    # was "4.22e+03 hours"
    assert not any("e+" in t for by_title in specs.values() for t in by_title)


def test_one_request_unloaded_draws_the_floors_not_the_latencies_under_load(specs):
    """The bars are the lone request's TTFT floor and (output − 1) × the TPOT floor, the house's end-to-end
    definition at an idle replica; the figure once drew the loaded latencies (2.6 s here, not 1.8 s)."""
    from botec.serving.latency import end_to_end_latency_seconds

    q = estimate_file(EXAMPLES / "serve-llama3.1-8b-h100.yaml").quantities
    bars = specs["serve-llama3.1-8b-h100"]["One request, unloaded"]["data"]
    assert [t["x"][0] for t in bars] == [q["time_to_first_token_floor_seconds"].value,
                                         255 * q["time_per_output_token_floor_seconds"].value]   # 256 outputs
    drawn = sum(t["x"][0] for t in bars)
    assert drawn == pytest.approx(end_to_end_latency_seconds(q["time_to_first_token_floor_seconds"].value, 256,
                                                              q["time_per_output_token_floor_seconds"].value))
    assert drawn < 0.75 * q["end_to_end_latency_seconds"].value    # the loaded request takes a third longer


def test_this_plan_sits_at_its_value_on_a_log_axis(specs):
    """plotly.js reads an annotation's position on a log axis as log10 of it (a shape's as the value): the label
    at 1,024 accelerators is written 3.01, else it would stretch the axis to 10^1024 and vanish from the plot."""
    import math

    scaling = specs["llama3.1-70b-pretrain"]["Run time and cost against accelerator count"]["layout"]
    assert scaling["xaxis"]["type"] == "log"
    assert [s["x0"] for s in scaling["shapes"]] == [1024]
    (label,) = scaling["annotations"]
    assert label["text"] == "this plan: 1,024 accelerators" and label["x"] == pytest.approx(math.log10(1024))
    context = specs["serve-llama3.1-8b-h100"]["Concurrency that fits against context length"]["layout"]
    assert [a["x"] for a in context["annotations"]] == [pytest.approx(math.log10(1152))]
    lesson = specs["lesson-finetune-1b"]["Run time and cost against accelerator count"]["layout"]
    assert lesson["annotations"][0]["x"] == pytest.approx(math.log10(4))   # 0.602: within the drawn 1 … 32
    load = specs["serve-llama3.1-8b-h100"]["Latency against load (one replica)"]["layout"]   # a linear axis
    assert [a["x"] for a in load["annotations"] if a["text"].startswith("this plan")] == [10.0]   # per replica


def test_the_tornado_labels_are_the_house_units_one_row_each(specs):
    from botec.report.figures import _change

    assert [_change(v, "s") for v in (2.0, -2.0, 0.0, 2000.0)] == ["+2 s", "−2 s", "no change", "+33.3 min"]
    for example in ("llama3.1-70b-pretrain", "serve-llama3.1-8b-h100"):
        tornado = next(s for t, s in specs[example].items() if t.startswith("Sensitivity"))
        layout, (low, high) = tornado["layout"], tornado["data"]
        assert layout["barmode"] == "group" and layout["yaxis"]["automargin"] is True   # ends side by side
        assert layout["height"] >= 40 * len(low["y"])                                  # 20 px a bar
        for trace in (low, high):
            assert trace["textposition"] == "outside"
            assert all(re.fullmatch(r"no change|[+−][\d,.]+( [^\d\s].*)?|[+−]\$[\d,.]+", t) for t in trace["text"]), \
                trace["text"]
            assert not any("e+" in t or "e-" in t for t in trace["text"])
    run = next(s for t, s in specs["llama3.1-70b-pretrain"].items() if t.startswith("Sensitivity"))["data"]
    matmul = run[0]["y"].index("assumptions.matmul_efficiency")
    assert run[0]["text"][matmul].endswith("days") and run[0]["x"][matmul] > 24    # the widest swing, in hours


def test_a_target_reads_in_the_house_units():
    """A 2 s TTFT target is labelled "2 s" (it once read "2e+03 ms")."""
    result = estimate_file(EXAMPLES / "serve-llama3.1-8b-h100.yaml", ["workload.latency.time_to_first_token=2 s"])
    from botec.report.figures import load_figure

    texts = [a["text"] for a in load_figure(result, load_sweep(result))["layout"]["annotations"]]
    assert "TTFT target 2 s" in texts and "TPOT target 40 ms" in texts
