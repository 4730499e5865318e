"""The numbers behind an estimate's figures: the sweeps and the sensitivity that :mod:`botec.report.figures`
draws. They vary the estimate's own inputs (explore/'s job: nothing re-reads the contract) and are computed
here, by the API, the CLI and the web app, then handed to ``report/``, which only draws (issue 31: data flows
one way).

- training: run time and cost against the accelerator count, the plan's count × 2^k for k = −3 … 3;
- serving: TTFT and TPOT against the load on one replica (5 % … 95 % of its offline capacity), and the
  concurrency that fits against the mean cached context (512 … 131,072 tokens, up to the attention window);
- both: the sensitivity of the headline output to each ranged assumption (the tornado).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from botec.estimation import Estimate
from botec.explore.uncertainty import Swing, sensitivity
from botec.graph import Given

__all__ = ["FigureData", "Sweep", "Tornado", "figure_data", "tornado_data", "LOAD_FRACTIONS", "CONTEXT_TOKENS"]

LOAD_FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
"""The loads of the latency figure, as fractions of one replica's offline capacity (requests/s)."""
CONTEXT_TOKENS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
"""The mean cached contexts of the concurrency figure (tokens), those up to the attention window."""
LOAD_OUTPUTS = ("time_to_first_token_seconds", "time_to_first_token_percentile_seconds",
                "time_per_output_token_seconds", "time_per_output_token_percentile_seconds")


@dataclass(frozen=True)
class Sweep:
    """One input set to each of ``values``; ``outputs[name][i]`` is the output at ``values[i]`` and
    ``valid[i]`` whether that configuration is a valid layout (always true for a serving sweep)."""

    input: str
    values: list[float]
    outputs: dict[str, list[float]]
    valid: list[bool] = field(default_factory=list)


@dataclass(frozen=True)
class Tornado:
    """The headline output's swing under each ranged assumption, largest first (empty when none is ranged)."""

    output: str
    swings: list[Swing]


@dataclass(frozen=True)
class FigureData:
    """Everything the figures of one estimate draw beyond its own quantities."""

    scaling: Sweep | None = None    # training
    load: Sweep | None = None       # serving
    context: Sweep | None = None    # serving
    tornado: Tornado | None = None  # None when not asked for


def scaling_sweep(result: Estimate) -> Sweep:
    """Run time (and cost, when priced) at the plan's accelerator count × 2^k, k = −3 … 3 (at least 1)."""
    import numpy as np

    from botec.explore.space import Axis, Space, evaluate_space

    count = int(result.value("accelerators"))
    counts = sorted({max(1, int(count * 2 ** k)) for k in range(-3, 4)})
    wanted = ["run_seconds"] + (["training_cost_usd"] if "training_cost_usd" in result.quantities else [])
    columns, valid, _ = evaluate_space(Space(result.inputs, [Axis("supply.count", np.array(counts, float))]),
                                       wanted=wanted)
    return Sweep("supply.count", counts, {name: [float(v) for v in columns[name]] for name in wanted if name in columns},
                 [bool(v) for v in valid])


def _serving_sweep(result: Estimate, name: str, values: list[float], outputs: list[str]) -> Sweep:
    """The serving graph with one input (given or derived) pinned to each value."""
    inputs = result.inputs
    series = {output: [] for output in outputs}
    for value in values:
        changed = dict(inputs.given)
        changed[name] = Given(float(value), "assumed")
        quantities = inputs.graph.evaluate(changed, wanted=outputs, choices=inputs.choices)
        for output in outputs:
            series[output].append(quantities[output].value)
    return Sweep(name, list(values), series, [True] * len(values))


def load_sweep(result: Estimate) -> Sweep:
    """TTFT and TPOT (mean and at the targets' percentile) at :data:`LOAD_FRACTIONS` of one replica's capacity."""
    capacity = result.value("offline_requests_per_s_per_replica")
    return _serving_sweep(result, "requests_per_s_on_a_replica", [capacity * f for f in LOAD_FRACTIONS],
                          list(LOAD_OUTPUTS))


def context_sweep(result: Estimate) -> Sweep:
    """The concurrency that fits at each of :data:`CONTEXT_TOKENS` up to the attention window (at least 512)."""
    window = result.value("attention_window_tokens")
    contexts = [c for c in CONTEXT_TOKENS if c <= max(window, 512)]
    return _serving_sweep(result, "mean_kv_tokens_per_request", contexts, ["max_concurrent_requests"])


def tornado_output(result: Estimate) -> str:
    """The headline output the tornado ranks: run time (training); cost per million output tokens, else TPOT
    (serving)."""
    if result.kind == "serving":
        return "cost_per_million_output_tokens_usd" if "cost_per_million_output_tokens_usd" in result.quantities \
            else "time_per_output_token_seconds"
    return "run_seconds"


def tornado_data(result: Estimate) -> Tornado:
    """The headline output's sensitivity (two evaluations per ranged assumption: about 1 s for a serving
    contract, the costliest figure, so the web page asks for it after the rest)."""
    output = tornado_output(result)
    return Tornado(output, sensitivity(result, output))


def figure_data(result: Estimate, tornado: bool = True) -> FigureData:
    """The sweeps of the estimate's kind, and the tornado's swings unless ``tornado=False``."""
    swings = tornado_data(result) if tornado else None
    if result.kind == "serving":
        return FigureData(load=load_sweep(result), context=context_sweep(result), tornado=swings)
    return FigureData(scaling=scaling_sweep(result), tornado=swings)
