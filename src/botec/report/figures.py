"""The pictures of an estimate, as plotly figures (``pip install botec[report]``).

Each figure is computed through the quantity graph: the sweeps (run time against accelerator
count, TPOT against batch, concurrency against context length) re-evaluate the estimate's own
inputs with one of them changed; every bar is a named quantity; nothing here re-derives a number.
"""

from __future__ import annotations

from botec.estimate import Estimate
from botec.graph import Given

GB = 1e9


def _number(value: float) -> str:
    """A number as a reader writes it: ``4,713`` or ``0.316``, never ``4.7e+03``."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _layout(fig, title: str, y_title: str, x_title: str | None = None):
    """Titles with units; every linear axis of a quantity starts at zero (a log axis says so in its title)."""
    fig.update_layout(title=title, template="plotly_white", height=360, margin=dict(l=60, r=20, t=50, b=50),
                      legend=dict(orientation="h", y=-0.2))
    if y_title:
        fig.update_layout(yaxis_title=y_title)
    if x_title:
        fig.update_layout(xaxis_title=x_title)
    fig.for_each_xaxis(lambda axis: axis.update(rangemode="tozero") if axis.type in (None, "linear") else None)
    fig.for_each_yaxis(lambda axis: axis.update(rangemode="tozero") if axis.type in (None, "linear") else None)
    return fig


def _mark_current(fig, x: float, label: str):
    """A vertical line at this estimate's own configuration."""
    fig.add_vline(x=x, line_dash="dot", line_color="black", annotation_text=label, annotation_position="top")


def memory_figure(result: Estimate):
    """Per-device memory as a stacked bar against the device's capacity."""
    import plotly.graph_objects as go

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
    fig = go.Figure()
    for name, value in parts:
        fig.add_trace(go.Bar(name=name, x=["per accelerator"], y=[value / GB], hovertemplate="%{y:.3g} GB",
                             text=[f"{value / GB:.3g} GB"], textposition="inside"))
    fig.update_layout(barmode="stack")
    fig.add_hline(y=q["device_memory_bytes"].value / GB, line_dash="dash", line_color="crimson",
                  annotation_text=f"device memory {q['device_memory_bytes'].value / GB:.3g} GB")
    if limit is not None:
        fig.add_hline(y=limit / GB, line_dash="dot", line_color="gray", annotation_text=limit_name,
                      annotation_position="bottom right")
    return _layout(fig, "Memory per accelerator", "memory per accelerator (GB)")


def step_figure(result: Estimate):
    """Where a training step goes (compute, pipeline bubble, exposed communication), or a serving
    request (prefill, decode)."""
    import plotly.graph_objects as go

    q = result.quantities
    if result.kind == "serving":
        parts = [("time to first token", q["time_to_first_token_seconds"].value),
                 ("decode (output × TPOT)", q["output_tokens"].value * q["time_per_output_token_seconds"].value)]
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
    fig = go.Figure()
    for name, value in parts:
        fig.add_trace(go.Bar(name=name, y=["time"], x=[value], orientation="h", hovertemplate="%{x:.3g} s",
                             text=[f"{value:.3g} s"], textposition="inside"))
    fig.update_layout(barmode="stack")
    return _layout(fig, title, "", "time (s)")


def scaling_figure(result: Estimate):
    """Run time and cost against the number of accelerators (training)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    import numpy as np

    from botec.explore.space import Axis, Space, evaluate_space

    count = int(result.value("accelerators"))
    counts = sorted({max(1, int(count * 2 ** k)) for k in range(-3, 4)})
    wanted = ["run_seconds"] + (["training_cost_usd"] if "training_cost_usd" in result.quantities else [])
    columns, valid, _ = evaluate_space(Space(result.inputs, [Axis("supply.count", np.array(counts, float))]),
                                       wanted=wanted)
    shown = [i for i in range(len(counts)) if valid[i]]
    x = [counts[i] for i in shown]
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=x, y=[columns["run_seconds"][i] / 3600 for i in shown], name="run time (h)",
                             mode="lines+markers"), secondary_y=False)
    if "training_cost_usd" in columns:
        fig.add_trace(go.Scatter(x=x, y=[columns["training_cost_usd"][i] for i in shown], name="cost (USD)",
                                 mode="lines+markers"), secondary_y=True)
    fig.update_xaxes(type="log", title_text="accelerators (log scale)")
    fig.update_yaxes(title_text="run time (hours)", secondary_y=False)
    fig.update_yaxes(title_text="cost (USD)", secondary_y=True)
    _mark_current(fig, count, f"this plan: {count:,} accelerators")
    return _layout(fig, "Run time and cost against accelerator count", "run time (hours)")


def _serving_sweep(result: Estimate, name: str, values: list[float], outputs: list[str]) -> dict[str, list[float]]:
    """The serving graph with one input (given or derived) pinned to each value."""
    inputs = result.inputs
    series = {output: [] for output in outputs}
    for value in values:
        changed = dict(inputs.given)
        changed[name] = Given(float(value), "assumed")
        quantities = inputs.graph.evaluate(changed, wanted=outputs, choices=inputs.choices)
        for output in outputs:
            series[output].append(quantities[output].value)
    return series


def load_figure(result: Estimate):
    """Serving: TTFT and TPOT, mean and at the targets' percentile, against the load on one replica."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    capacity = result.value("offline_requests_per_s_per_replica")
    loads = [capacity * f for f in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)]
    outputs = ["time_to_first_token_seconds", "time_to_first_token_percentile_seconds",
               "time_per_output_token_seconds", "time_per_output_token_percentile_seconds"]
    series = _serving_sweep(result, "requests_per_s_on_a_replica", loads, outputs)
    percentile = f"P{round(result.value('latency_percentile') * 100)}"
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for name, label, secondary in (("time_to_first_token_seconds", "TTFT mean", False),
                                   ("time_to_first_token_percentile_seconds", f"TTFT {percentile}", False),
                                   ("time_per_output_token_seconds", "TPOT mean", True),
                                   ("time_per_output_token_percentile_seconds", f"TPOT {percentile}", True)):
        fig.add_trace(go.Scatter(x=loads, y=[t * 1e3 for t in series[name]], name=f"{label} (ms)",
                                 mode="lines+markers"), secondary_y=secondary)
    fig.update_xaxes(title_text="requests/s on one replica (saturation: {:.3g} requests/s)".format(capacity))
    fig.update_yaxes(title_text="TTFT (ms)", secondary_y=False)
    fig.update_yaxes(title_text="TPOT (ms per token)", secondary_y=True)
    q = result.quantities
    _mark_current(fig, result.value("requests_per_s_on_a_replica"),
                  f"this plan: {result.value('requests_per_s_on_a_replica'):.3g} requests/s")
    for name, label, axis in (("time_to_first_token_target_seconds", "TTFT target", "y"),
                              ("time_per_output_token_target_seconds", "TPOT target", "y2")):
        if name in q and q[name].value is not None and q[name].value > 0:
            fig.add_shape(type="line", xref="paper", x0=0, x1=1, yref=axis, y0=q[name].value * 1e3,
                          y1=q[name].value * 1e3, line=dict(dash="dash", color="crimson"), name=label)
            fig.add_annotation(xref="paper", x=1 if axis == "y2" else 0, yref=axis, y=q[name].value * 1e3,
                               text=f"{label} {q[name].value * 1e3:.3g} ms", showarrow=False, yshift=8,
                               xanchor="right" if axis == "y2" else "left")
    return _layout(fig, "Latency against load (one replica)", "TTFT (ms)")


def context_figure(result: Estimate):
    """Serving: the concurrency that fits against the context length."""
    import plotly.graph_objects as go

    window = result.value("attention_window_tokens")
    contexts = [c for c in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072) if c <= max(window, 512)]
    series = _serving_sweep(result, "mean_kv_tokens_per_request", contexts, ["max_concurrent_requests"])
    fig = go.Figure(go.Scatter(x=contexts, y=series["max_concurrent_requests"], mode="lines+markers",
                               name="concurrent requests"))
    fig.update_xaxes(type="log", title_text="mean cached tokens per running request (tokens, log scale)")
    mean = result.value("mean_kv_tokens_per_request")
    _mark_current(fig, mean, f"this plan: {mean:,.0f} tokens")
    return _layout(fig, "Concurrency that fits against context length", "concurrent requests (requests)")


def sensitivity_figure(result: Estimate, output: str):
    """A tornado: each ranged assumption from its low to its high end."""
    import plotly.graph_objects as go

    from botec.explore.uncertainty import sensitivity

    swings = sensitivity(result, output)
    if not swings:
        return None
    base = result.value(output)
    unit = result.quantities[output].unit
    scale, label = (3600.0, "hours") if unit == "s" and base > 7200 else (1.0, unit)
    fig = go.Figure()
    names = [s.input for s in reversed(swings)]
    for name, end in (("at low", "output_at_low"), ("at high", "output_at_high")):
        changes = [(getattr(s, end) - base) / scale for s in reversed(swings)]
        fig.add_trace(go.Bar(y=names, x=changes, orientation="h", name=name,
                             text=[f"{c:+,.3g} {label}" for c in changes], textposition="auto"))
    fig.update_layout(barmode="overlay")
    return _layout(fig, f"Sensitivity of {output} (change from {_number(base / scale)} {label})", "",
                   f"change in {output} ({label})")


def figures(result: Estimate) -> list:
    """Every figure that applies to the estimate, in reading order."""
    found = [memory_figure(result), step_figure(result)]
    if result.kind == "serving":
        found += [load_figure(result), context_figure(result)]
        output = "cost_per_million_output_tokens_usd" if "cost_per_million_output_tokens_usd" in result.quantities \
            else "time_per_output_token_seconds"
    else:
        found.append(scaling_figure(result))
        output = "run_seconds"
    tornado = sensitivity_figure(result, output)
    if tornado is not None:
        found.append(tornado)
    return found
