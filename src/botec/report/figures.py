"""The pictures of an estimate, as plotly figure specs: plain dicts of plotly's JSON schema
(``{"data": [...], "layout": {...}}``), built without importing plotly, so the web app serves them
cheaply and plotly.js draws them as they are; ``botec report`` hands them to plotly to write HTML.

Every bar is a named quantity of the estimate; the sweeps (run time against accelerator count, latency
against load, concurrency against context length) and the tornado's swings are computed by
:mod:`botec.explore.figure_data` and handed in: this module only draws, nothing here re-derives a number.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Optional

from botec.units import format_quantity

if TYPE_CHECKING:   # types only: report/ draws what it is handed and imports no estimate
    from botec.estimation import Estimate
    from botec.explore.figure_data import FigureData, Sweep, Tornado

GB = 1e9
Spec = dict[str, Any]   # {"data": [trace, ...], "layout": {...}}: what plotly.js's newPlot takes

# plotly's "plotly_white" template, the part these figures use (plotly.js knows no template by name)
TEMPLATE: dict = {
    "layout": {
        "colorway": ["#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692", "#B6E880",
                     "#FF97FF", "#FECB52"],
        "font": {"color": "#2a3f5f"}, "paper_bgcolor": "white", "plot_bgcolor": "white", "hovermode": "closest",
        "hoverlabel": {"align": "left"}, "title": {"x": 0.05},
        "xaxis": {"gridcolor": "#EBF0F8", "linecolor": "#EBF0F8", "ticks": "", "title": {"standoff": 15},
                  "zerolinecolor": "#EBF0F8", "automargin": True, "zerolinewidth": 2},
        "yaxis": {"gridcolor": "#EBF0F8", "linecolor": "#EBF0F8", "ticks": "", "title": {"standoff": 15},
                  "zerolinecolor": "#EBF0F8", "automargin": True, "zerolinewidth": 2},
        "annotationdefaults": {"arrowcolor": "#2a3f5f", "arrowhead": 0, "arrowwidth": 1},
        "shapedefaults": {"line": {"color": "#2a3f5f"}},
    },
    "data": {"bar": [{"marker": {"line": {"color": "white", "width": 0.5}}}]},
}
TWO_Y_AXES = {"xaxis": {"anchor": "y", "domain": [0.0, 0.94]}, "yaxis": {"anchor": "x", "domain": [0.0, 1.0]},
              "yaxis2": {"anchor": "x", "overlaying": "y", "side": "right"}}   # plotly's make_subplots(secondary_y)


def _finite(value: float) -> Optional[float]:
    """A plain float for the spec, or None (a gap plotly.js draws as such) where not finite."""
    value = float(value)
    return value if math.isfinite(value) else None


def _number(value: float) -> str:
    """A number as a reader writes it: ``4,713`` or ``0.316``, never ``4.7e+03``."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _spec(data: list[dict], layout: dict, title: str, y_title: str, x_title: str | None = None) -> Spec:
    """Titles with units; every linear axis of a quantity starts at zero (a log axis says so in its title)."""
    layout = {"title": {"text": title}, "template": TEMPLATE, "height": 360,
              "margin": {"l": 60, "r": 20, "t": 50, "b": 50}, "legend": {"orientation": "h", "y": -0.2}, **layout}
    layout["xaxis"], layout["yaxis"] = dict(layout.get("xaxis", {})), dict(layout.get("yaxis", {}))
    if y_title:
        layout["yaxis"]["title"] = {"text": y_title}
    if x_title:
        layout["xaxis"]["title"] = {"text": x_title}
    for name in [k for k in layout if re.fullmatch(r"[xy]axis\d*", k)]:
        layout[name] = dict(layout[name])
        if layout[name].get("type", "linear") == "linear":
            layout[name]["rangemode"] = "tozero"
    return {"data": data, "layout": layout}


def _mark_current(layout: dict, x: float, label: str) -> None:
    """A vertical line at this estimate's own configuration (plotly's ``add_vline``, annotation on top).

    On a log x axis plotly.js places a shape at the data value but an annotation at log10 of its position
    (plotly.js #1258, kept for compatibility): the label gets log10(x), else it would sit at 10^x and stretch the
    axis's autorange to it."""
    layout.setdefault("shapes", []).append({"type": "line", "xref": "x", "x0": x, "x1": x, "yref": "y domain",
                                            "y0": 0, "y1": 1, "line": {"dash": "dot", "color": "black"}})
    on_log_axis = layout.get("xaxis", {}).get("type") == "log"
    label_x = math.log10(x) if on_log_axis and x is not None and x > 0 else x
    layout.setdefault("annotations", []).append({"text": label, "showarrow": False, "xref": "x", "x": label_x,
                                                 "xanchor": "center", "yref": "y domain", "y": 1,
                                                 "yanchor": "bottom"})


def _line_across(layout: dict, y: float, dash: str, color: str, label: str, below: bool = False) -> None:
    """A horizontal line at ``y`` with its label at the right (plotly's ``add_hline``)."""
    layout.setdefault("shapes", []).append({"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y",
                                            "y0": y, "y1": y, "line": {"dash": dash, "color": color}})
    layout.setdefault("annotations", []).append({"text": label, "showarrow": False, "xref": "x domain", "x": 1,
                                                 "xanchor": "right", "yref": "y", "y": y,
                                                 "yanchor": "top" if below else "bottom"})


def _bars(parts: list[tuple[str, float]], unit: str, horizontal: bool, scale: float = 1.0) -> list[dict]:
    """One stacked bar per part, its value written on it."""
    traces = []
    for name, value in parts:
        shown = _finite(value / scale)
        trace = {"type": "bar", "name": name, "text": [f"{_number(value / scale)} {unit}"], "textposition": "inside"}
        if horizontal:
            trace |= {"orientation": "h", "y": ["time"], "x": [shown], "hovertemplate": f"%{{x:.3g}} {unit}"}
        else:
            trace |= {"x": ["per accelerator"], "y": [shown], "hovertemplate": f"%{{y:.3g}} {unit}"}
        traces.append(trace)
    return traces


def memory_figure(result: Estimate) -> Spec:
    """Per-device memory as a stacked bar against the device's capacity."""
    q = result.quantities
    if result.kind == "serving":
        parts = [("weights", q["weight_memory_bytes"].value),
                 (f"KV cache at batch {q['decode_batch_size'].value:.0f}", q["kv_cache_bytes"].value),
                 ("activation reserve", q["activation_reserve_bytes"].value)]
        limit, limit_name = q["usable_memory_bytes"].value, "usable (memory fraction)"
    else:
        # what stays on the device: offloaded state, offloaded activations and paged-out optimizer state do not
        on_host = 1 - q["optimizer_offload_cpu"].value
        parts = [("weights", q["weight_memory_bytes"].value * (1 - q["parameter_offload"].value)),
                 ("gradients", q["gradient_memory_bytes"].value * on_host),
                 ("optimizer state", q["optimizer_memory_bytes"].value * on_host
                  - q["paged_optimizer_spill_bytes"].value),
                 ("activations", q["activation_bytes"].value - q["offloaded_activation_bytes"].value),
                 ("FSDP gather buffers", q["fsdp_gather_buffer_bytes"].value),
                 ("runtime buffers", q["runtime_buffer_bytes"].value),
                 ("allocator reserve", q["allocator_reserve_bytes"].value),
                 ("headroom", q["memory_headroom_bytes"].value)]
        limit, limit_name = None, None
    layout: dict = {"barmode": "stack"}
    device = q["device_memory_bytes"].value / GB
    _line_across(layout, _finite(device), "dash", "crimson", f"device memory {device:.3g} GB")
    if limit is not None:
        _line_across(layout, _finite(limit / GB), "dot", "gray", limit_name, below=True)
    return _spec(_bars(parts, "GB", horizontal=False, scale=GB), layout, "Memory per accelerator",
                 "memory per accelerator (GB)")


def step_figure(result: Estimate) -> Spec:
    """Where a training step goes (compute, pipeline bubble, exposed communication), or a serving
    request (prefill, decode)."""
    q = result.quantities
    if result.kind == "serving":
        # alone on an idle replica: the floors, not the latencies under the contract's load
        parts = [("time to first token, alone", q["time_to_first_token_floor_seconds"].value),
                 ("decode ((output − 1) × TPOT floor)",
                  (q["output_tokens"].value - 1) * q["time_per_output_token_floor_seconds"].value)]
        title = "One request, unloaded"
    elif "exposed_communication_seconds" in q and result.choices.get("step_time") == "components":
        parts = [("compute", q["compute_seconds_per_step"].value), ("pipeline bubble", q["pipeline_bubble_seconds"].value),
                 ("exposed communication", q["exposed_communication_seconds"].value),
                 ("exposed offloading", q["exposed_offload_seconds"].value)]
        title = "Step time"
    else:
        compute = q["compute_seconds_per_step"].value if "compute_seconds_per_step" in q else q["step_seconds"].value
        parts = [("compute at the single-accelerator MFU", compute),
                 ("scaling loss (1 − scaling efficiency)", max(q["step_seconds"].value - compute, 0.0))]
        title = "Step time"
    return _spec(_bars(parts, "s", horizontal=True), {"barmode": "stack"}, title, "", "time (s)")


def scaling_figure(result: Estimate, sweep: Sweep) -> Spec:
    """Run time and cost against the number of accelerators (training; ``sweep``:
    :func:`botec.explore.figure_data.scaling_sweep`)."""
    count = int(result.value("accelerators"))
    counts, columns, valid = sweep.values, sweep.outputs, sweep.valid
    shown = [i for i in range(len(counts)) if valid[i]]
    x = [counts[i] for i in shown]
    data = [{"type": "scatter", "x": x, "y": [_finite(columns["run_seconds"][i] / 3600) for i in shown],
             "name": "run time (h)", "mode": "lines+markers", "xaxis": "x", "yaxis": "y"}]
    if "training_cost_usd" in columns:
        data.append({"type": "scatter", "x": x, "y": [_finite(columns["training_cost_usd"][i]) for i in shown],
                     "name": "cost (USD)", "mode": "lines+markers", "xaxis": "x", "yaxis": "y2"})
    layout = {**TWO_Y_AXES, "xaxis": {**TWO_Y_AXES["xaxis"], "type": "log"},
              "yaxis2": {**TWO_Y_AXES["yaxis2"], "title": {"text": "cost (USD)"}}}
    _mark_current(layout, count, f"this plan: {count:,} accelerators")
    return _spec(data, layout, "Run time and cost against accelerator count", "run time (hours)",
                 "accelerators (log scale)")


def load_figure(result: Estimate, sweep: Sweep) -> Spec:
    """Serving: TTFT and TPOT, mean and at the targets' percentile, against the load on one replica
    (``sweep``: :func:`botec.explore.figure_data.load_sweep`)."""
    capacity = result.value("offline_requests_per_s_per_replica")
    loads, series = sweep.values, sweep.outputs
    percentile = f"P{round(result.value('latency_percentile') * 100)}"
    data = [{"type": "scatter", "x": [_finite(x) for x in loads], "y": [_finite(t * 1e3) for t in series[name]],
             "name": f"{label} (ms)", "mode": "lines+markers", "xaxis": "x", "yaxis": "y2" if secondary else "y"}
            for name, label, secondary in (("time_to_first_token_seconds", "TTFT mean", False),
                                           ("time_to_first_token_percentile_seconds", f"TTFT {percentile}", False),
                                           ("time_per_output_token_seconds", "TPOT mean", True),
                                           ("time_per_output_token_percentile_seconds", f"TPOT {percentile}", True))]
    layout = {**TWO_Y_AXES, "yaxis2": {**TWO_Y_AXES["yaxis2"], "title": {"text": "TPOT (ms per token)"}}}
    q = result.quantities
    _mark_current(layout, _finite(result.value("requests_per_s_on_a_replica")),
                  f"this plan: {result.value('requests_per_s_on_a_replica'):.3g} requests/s")
    for name, label, axis in (("time_to_first_token_target_seconds", "TTFT target", "y"),
                              ("time_per_output_token_target_seconds", "TPOT target", "y2")):
        if name in q and q[name].value is not None and q[name].value > 0:
            target = _finite(q[name].value * 1e3)
            layout["shapes"].append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": axis, "y0": target,
                                     "y1": target, "line": {"dash": "dash", "color": "crimson"}, "name": label})
            layout["annotations"].append({"xref": "paper", "x": 1 if axis == "y2" else 0, "yref": axis, "y": target,
                                          "text": f"{label} {format_quantity(q[name].value, 's')}",
                                          "showarrow": False,
                                          "yshift": 8, "xanchor": "right" if axis == "y2" else "left"})
    return _spec(data, layout, "Latency against load (one replica)", "TTFT (ms)",
                 "requests/s on one replica (saturation: {:.3g} requests/s)".format(capacity))


def context_figure(result: Estimate, sweep: Sweep) -> Spec:
    """Serving: the concurrency that fits against the context length (``sweep``:
    :func:`botec.explore.figure_data.context_sweep`)."""
    contexts, series = sweep.values, sweep.outputs
    data = [{"type": "scatter", "x": contexts, "y": [_finite(v) for v in series["max_concurrent_requests"]],
             "mode": "lines+markers", "name": "concurrent requests"}]
    layout: dict = {"xaxis": {"type": "log"}}
    mean = result.value("mean_kv_tokens_per_request")
    _mark_current(layout, _finite(mean), f"this plan: {mean:,.0f} tokens")
    return _spec(data, layout, "Concurrency that fits against context length", "concurrent requests (requests)",
                 "mean cached tokens per running request (tokens, log scale)")


def _change(value: float, unit: str) -> str:
    """A signed change in the house's units: ``+2 s``, ``−12 days``, ``no change``."""
    if value == 0 or not math.isfinite(value):
        return "no change" if value == 0 else "not finite"
    return ("+" if value > 0 else "−") + format_quantity(abs(value), unit)


def sensitivity_figure(result: Estimate, tornado: Tornado) -> Optional[Spec]:
    """A tornado: each ranged assumption from its low to its high end, the two ends side by side on the
    assumption's row (each with its own label, so a label never lies on another), one row per assumption
    (20 pixels each, so the names on the category axis never overprint). ``tornado``:
    :func:`botec.explore.figure_data.tornado_data`."""
    output, swings = tornado.output, tornado.swings
    if not swings:
        return None
    base = result.value(output)
    unit = result.quantities[output].unit
    scale, label = (3600.0, "hours") if unit == "s" and base > 7200 else (1.0, unit)
    names = [s.input for s in reversed(swings)]
    data = []
    for name, end in (("at low", "output_at_low"), ("at high", "output_at_high")):
        changes = [getattr(s, end) - base for s in reversed(swings)]
        data.append({"type": "bar", "y": names, "x": [_finite(c / scale) for c in changes], "orientation": "h",
                     "name": name, "text": [_change(c, unit) for c in changes], "textposition": "outside",
                     "cliponaxis": False})
    layout = {"barmode": "group", "height": max(360, 140 + 2 * 20 * len(names)),
              "yaxis": {"automargin": True, "type": "category"}}
    return _spec(data, layout, f"Sensitivity of {output} (change from {_number(base / scale)} {label})", "",
                 f"change in {output} ({label})")


def figures(result: Estimate, data: FigureData) -> list[Spec]:
    """Every figure that applies to the estimate, in reading order, as plotly figure specs (plain dicts), from
    the sweeps ``data`` holds (:func:`botec.explore.figure_data.figure_data`); the sensitivity tornado when
    ``data.tornado`` is there and an assumption is ranged."""
    found = [memory_figure(result), step_figure(result)]
    if result.kind == "serving":
        found += [load_figure(result, data.load), context_figure(result, data.context)]
    else:
        found.append(scaling_figure(result, data.scaling))
    sensitivity = sensitivity_figure(result, data.tornado) if data.tornado is not None else None
    return found + ([sensitivity] if sensitivity is not None else [])
