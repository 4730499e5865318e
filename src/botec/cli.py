"""The ``botec`` command line.

Every user error (a malformed contract, a unit that does not parse, an unknown field or
accelerator, a batch that does not fit) ends as one line on stderr naming the field and what
was expected, with exit code 2. Nothing else a user sees is a traceback.
"""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from botec import __version__
from botec.errors import UserError

app = typer.Typer(
    name="botec",
    help="Capacity planning for AI workloads: compute, accelerator memory, network, storage and cost, "
         "with every assumption named.\n\nStart with `botec estimate` (the lesson's reference workload) "
         "or `botec init` (a commented starter contract).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)


class Format(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class Units(str, enum.Enum):
    decimal = "decimal"
    binary = "binary"


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a failure leaves nothing half-written."""
    from botec.errors import write_text_atomically

    write_text_atomically(path, text)


def _emit(text: str, output: Optional[Path]) -> None:
    if output is None:
        typer.echo(text)
    else:
        _write_atomically(output, text if text.endswith("\n") else text + "\n")
        typer.echo(f"wrote {output}", err=True)


def _console(output_file=None):
    from rich.console import Console

    return Console(file=output_file, highlight=False, soft_wrap=False)


CONTRACT_HELP = "Workload contract (YAML or JSON). Default: the lesson's reference workload."
SET_HELP = "Override a contract field, e.g. `--set supply.count=8` (repeatable)."


@app.command()
def estimate(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text (rich), json or markdown."),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal (GB = 10^9 B) or binary (GiB = 2^30 B)."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the report to a file."),
    allow_misfit: bool = typer.Option(False, "--allow-misfit",
                                      help="Report a plan that does not fit in memory instead of failing."),
    details: bool = typer.Option(False, "--details", help="Text report: show the intermediate quantities too."),
    uncertainty: bool = typer.Option(False, "--uncertainty", help="Sample the stated ranges: P10/P50/P90."),
    samples: int = typer.Option(10_000, "--samples", min=1, help="Monte Carlo samples for --uncertainty."),
    seed: int = typer.Option(0, "--seed", help="Seed for --uncertainty (the same seed, the same figures)."),
    deadline: Optional[str] = typer.Option(None, "--deadline", help="With --uncertainty: the chance to finish by "
                                                                     "this, e.g. '7 d'."),
) -> None:
    """Estimate a training job in four accounts (compute, memory, network, storage) plus cost.

    Example: `botec estimate examples/llama2-70b-pretrain.yaml --set supply.count=2048 -f markdown`
    """
    from botec.estimate import check_fit, estimate_file

    result = estimate_file(contract, set_)
    if not allow_misfit:
        check_fit(result)
    system = units.value
    if uncertainty:
        _report_uncertainty(result, samples, seed, deadline, format, output, system)
        return
    if format is Format.json:
        from botec.report.json_report import render

        _emit(render(result), output)
    elif format is Format.markdown:
        from botec.report.markdown import render

        _emit(render(result, system), output)
    else:
        from botec.report.terminal import render

        if output is None:
            render(result, _console(), system, details)
        else:
            import io

            buffer = io.StringIO()
            render(result, _console(buffer), system, details)
            _emit(buffer.getvalue(), output)


def _report_uncertainty(result, samples: int, seed: int, deadline: Optional[str], format: "Format",
                        output: Optional[Path], system: str) -> None:
    _numpy_needed()
    from botec.explore.uncertainty import monte_carlo
    from botec.units import UnitError, format_quantity, parse_quantity

    try:
        deadline_seconds = parse_quantity(deadline, "seconds") if deadline else None
    except UnitError as error:
        raise UserError(f"--deadline: {error}") from None
    mc = monte_carlo(result, samples, seed, deadline_seconds)
    if format is Format.json:
        import json

        _emit(json.dumps({"samples": mc.samples, "seed": mc.seed, "varied": mc.varied,
                          "probability_fits": mc.probability_fits, "probability_deadline": mc.probability_deadline,
                          "percentiles": {k: {"p10": a, "p50": b, "p90": c} for k, (a, b, c) in
                                          mc.percentiles.items()}}, indent=2), output)
        return
    lines = [f"{mc.samples:,} samples (seed {mc.seed}) of {', '.join(mc.varied) or 'no ranged assumption'}:"]
    for name, (p10, p50, p90) in mc.percentiles.items():
        unit = result.quantities[name].unit
        lines.append(f"  {name}: P10 {format_quantity(p10, unit, system)}, P50 {format_quantity(p50, unit, system)}, "
                     f"P90 {format_quantity(p90, unit, system)}")
    if mc.probability_fits is not None:
        lines.append(f"chance it fits in memory: {mc.probability_fits:.1%}")
    if mc.probability_deadline is not None:
        lines.append(f"chance the run finishes within {deadline}: {mc.probability_deadline:.1%}")
    _emit("\n".join(lines), output)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port."),
) -> None:
    """Run the local web app: pick or paste a contract, edit its inputs, see accounts, findings and plots.

    Example: `botec serve --port 8765`, then open http://127.0.0.1:8765
    """
    try:
        import uvicorn

        from botec.web.app import app as web_app
    except ImportError:
        raise UserError("the web app needs FastAPI and uvicorn: pip install 'botec[web]'") from None
    typer.echo(f"botec serving on http://{host}:{port} (Ctrl-C to stop)", err=True)
    uvicorn.run(web_app, host=host, port=port, log_level="warning")


@app.command()
def report(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="report.html (or .md for Markdown)."),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal or binary."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Write a report to paste or share: one self-contained HTML file with plots (works offline), or Markdown.

    Example: `botec report examples/llama3.1-70b-pretrain.yaml -o review.html`
    """
    from botec.estimate import estimate_file

    result = estimate_file(contract, set_)
    if output.suffix.lower() in (".md", ".markdown"):
        from botec.report.markdown import render as render_markdown

        _write_atomically(output, render_markdown(result, units.value))
    else:
        try:
            import plotly  # noqa: F401
        except ImportError:
            raise UserError("the HTML report draws with plotly: pip install 'botec[report]'") from None
        from botec.report.html import render as render_html

        _write_atomically(output, render_html(result, units.value))
    typer.echo(f"wrote {output}", err=True)


@app.command()
def explain(
    contract_or_quantity: str = typer.Argument(..., metavar="[CONTRACT] QUANTITY",
                                               help="A contract file, then a quantity name (the contract may be "
                                                    "left out: the reference workload)."),
    quantity: Optional[str] = typer.Argument(None, hidden=True),
    units: Units = typer.Option(Units.decimal, "--units", help="decimal or binary."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Print how one quantity is derived, with the values substituted, down to the assumptions.

    Example: `botec explain examples/lesson-finetune-1b.yaml planned_device_bytes`
    """
    from botec.catalog import did_you_mean
    from botec.estimate import estimate_file
    from botec.quantities import explain as explain_chain

    contract: Optional[str] = contract_or_quantity if quantity is not None else None
    name = quantity if quantity is not None else contract_or_quantity
    result = estimate_file(contract, set_)
    if name not in result.quantities:
        from botec.quantities import definitions

        known = definitions()
        reason = "is not resolved by this contract" if name in known else "is not a quantity"
        hint = did_you_mean(name, result.quantities) or f" (known here: {', '.join(result.quantities)})"
        raise UserError(f"{name!r} {reason}{hint}")
    for depth, line in explain_chain(name, result.quantities, units.value):
        typer.echo("  " * depth + line)


@app.command()
def schema() -> None:
    """Print the JSON Schema of a workload contract (for editors and validators)."""
    import json

    from botec.contract import Contract

    typer.echo(json.dumps(Contract.model_json_schema(), indent=2, ensure_ascii=False))


@app.command()
def init(
    path: Path = typer.Argument(Path("botec.yaml"), help="Where to write the starter contract ('-' for stdout)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    serving: bool = typer.Option(False, "--serving", help="A serving contract (Llama 3.1-8B on H100s) instead."),
) -> None:
    """Write a commented starter contract to edit: training (the lesson's reference workload) or serving.

    Example: `botec init my-job.yaml && botec estimate my-job.yaml`
    """
    from importlib import resources

    from botec.estimate import REFERENCE_CONTRACT

    name = "serve-llama3.1-8b-h100.yaml" if serving else REFERENCE_CONTRACT
    text = resources.files("botec.contracts").joinpath(name).read_text(encoding="utf-8")
    if str(path) == "-":
        typer.echo(text, nl=False)
        return
    if path.exists() and not force:
        raise UserError(f"{path}: already exists; choose another path or pass --force")
    _write_atomically(path, text)
    typer.echo(f"wrote {path}: edit it, then run `botec estimate {path}`", err=True)


@app.command()
def catalog(
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
) -> None:
    """List the accelerator catalog (dense peaks, memory, links, power, sources), node presets and optimizer presets."""
    from botec.catalog import accelerators, node_presets, optimizer_presets
    from botec.units import format_number

    devices = accelerators()
    presets = optimizer_presets()
    nodes = node_presets()
    if format is Format.json:
        import dataclasses
        import json

        payload = {
            "accelerators": [dataclasses.asdict(d) for d in devices.values()],
            "optimizers": [dataclasses.asdict(p) | {"state_bytes_per_parameter": p.state_bytes_per_parameter}
                           for p in presets.values()],
            "nodes": [dataclasses.asdict(n) for n in nodes.values()],
        }
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return

    def fmt(value, scale=1.0):
        return "—" if value is None else format_number(value / scale)

    header = ["key", "name", "BF16 TFLOP/s", "FP8 TFLOP/s", "memory GB", "memory GB/s", "link GB/s", "TDP W",
              "source"]
    rows = [[d.key, d.name, fmt(d.peak_flops_per_s.get("bf16"), 1e12), fmt(d.peak_flops_per_s.get("fp8"), 1e12),
             fmt(d.memory_bytes, 1e9), fmt(d.memory_bandwidth_bytes_per_s, 1e9),
             fmt(d.link_bandwidth_bytes_per_s, 1e9), fmt(d.tdp_watts), f"{d.source} ({d.date})"]
            for d in devices.values()]
    if format is Format.markdown:
        typer.echo("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        for row in rows:
            typer.echo("| " + " | ".join(row) + " |")
        return
    from rich import box
    from rich.table import Table

    console = _console()
    wide = console.width >= 160
    table = Table(title="Accelerators (dense peaks; decimal units; link bandwidth per direction)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    shown = header if wide else [c for c in header if c not in ("name", "source")]
    for column in shown:
        label = column if column in ("key", "name", "source") else column.replace(" ", "\n", 1)
        table.add_column(label, justify="left" if column in ("key", "name", "source") else "right",
                         no_wrap=column not in ("name", "source"), overflow="fold")
    for row in rows:
        table.add_row(*(cell for column, cell in zip(header, row) if column in shown))
    console.print(table)
    console.print("Sources and notes per figure: `botec catalog -f json` or `-f markdown`.", style="dim")
    table = Table(title="Node presets (supply.cluster.node; bandwidth per accelerator per direction)",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("node", "accelerator", "per node", "intra GB/s", "intra α", "inter GB/s", "inter α"):
        table.add_column(column, no_wrap=column in ("node", "accelerator"),
                         justify="left" if column in ("node", "accelerator") else "right")
    from botec.units import format_quantity

    for node in nodes.values():
        table.add_row(node.key, node.accelerator, str(node.accelerators_per_node),
                      fmt(node.intra_node_bytes_per_s, 1e9), format_quantity(node.intra_node_latency_seconds, "s"),
                      fmt(node.inter_node_bytes_per_s, 1e9), format_quantity(node.inter_node_latency_seconds, "s"))
    console.print(table)
    table = Table(title="Optimizer presets (bytes per parameter)", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    for column in ("preset", "weights", "gradients", "master", "moments", "total", "description"):
        table.add_column(column, overflow="fold", no_wrap=column == "preset")
    for p in presets.values():
        table.add_row(p.key, *(f"{v:g}" for v in (p.weight_bytes_per_parameter, p.gradient_bytes_per_parameter,
                                                    p.master_weight_bytes_per_parameter,
                                                    p.optimizer_state_bytes_per_parameter,
                                                    p.state_bytes_per_parameter)), p.description)
    console.print(table)


@app.command()
def measure(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    output: Path = typer.Option(Path("measurement.json"), "--output", "-o", help="Where to write the measurement."),
    steps: int = typer.Option(10, "--steps", min=1, help="Measured steps (after the warm-up)."),
    warmup: int = typer.Option(2, "--warmup", min=0, help="Warm-up steps, not recorded."),
    input_delay: float = typer.Option(0.0, "--input-delay", min=0.0,
                                      help="Seconds the data loader sleeps per sequence (a slow input on purpose)."),
    max_parameters: str = typer.Option("30M", "--max-parameters",
                                       help="Larger models are measured as a proportionally scaled-down proxy."),
    peak_flops: Optional[str] = typer.Option(None, "--peak-flops",
                                             help="The device's rated peak (e.g. '2 TFLOP/s') for MFU; default: the "
                                                  "contract's accelerator on CUDA, unknown on CPU."),
    fake: bool = typer.Option(False, "--fake", help="Measure the full-size model's memory on fake tensors, no run."),
    no_checkpoint: bool = typer.Option(False, "--no-checkpoint", help="Skip the checkpoint save."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Train the contract's model for a few steps and record what happened (needs `botec[measure]`).

    Records input wait, forward+backward, gradient synchronization, optimizer and step time, tokens/s,
    achieved FLOP/s and MFU, peak memory by category and a checkpoint save. Under `torchrun
    --nproc_per_node=2 -m botec.cli measure ...` it measures data parallelism (gloo on CPU, NCCL on GPUs).

    Example: `botec measure examples/lesson-finetune-1b.yaml --steps 5 -o run.json`
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UserError("botec measure needs PyTorch: pip install 'botec[measure]' (here: pip install torch==2.13.0)")
    from botec.estimate import estimate_file
    from botec.units import parse_quantity, UnitError

    result = estimate_file(contract, set_)
    if result.contract.workload.kind != "training":
        raise UserError("botec measure runs training contracts")
    architecture = result.architecture
    if architecture is None:
        from botec.architecture import infer_from_count

        architecture = infer_from_count(result.value("parameters"), int(result.value("layers")),
                                        int(result.value("hidden_size")))
        typer.echo(f"the contract gives a bare parameter count: measuring {architecture.name} "
                   f"({architecture.attention_heads} heads, FFN {architecture.ffn_size:,}, vocabulary "
                   f"{architecture.vocab_size:,})", err=True)
    try:
        limit = parse_quantity(max_parameters, "count")
        peak = parse_quantity(peak_flops, "flop_rate") if peak_flops else None
    except UnitError as error:
        raise UserError(f"--max-parameters/--peak-flops: {error}") from None
    strategy = result.contract.strategy
    micro, sequence = int(result.value("micro_batch_size")), int(result.value("sequence_length"))
    if fake:
        _measure_fake(result, architecture, micro, sequence)
        return
    from botec.measure import measurement as files
    from botec.measure.harness import Options
    from botec.measure.harness import measure as run_measure

    if peak is None and torch.cuda.is_available():
        peak = result.value("peak_flops_per_s")
    optimizer = strategy.optimizer if isinstance(strategy.optimizer, str) else "adam-mixed"
    try:
        with _progress(steps + warmup) as report:
            measured = run_measure(architecture, micro, sequence, optimizer,
                                   Options(steps=steps, warmup=warmup, input_delay_seconds=input_delay,
                                           max_parameters=limit, peak_flops_per_s=peak,
                                           checkpoint=not no_checkpoint),
                                   progress=report, contract_name=str(contract) if contract else "reference workload")
    except KeyboardInterrupt:
        typer.echo(f"botec: interrupted: no measurement written ({output} untouched)", err=True)
        raise typer.Exit(code=130) from None
    if measured is None:  # not rank 0
        return
    files.write(measured, output)
    summary = measured.summary
    typer.echo(f"measured {measured.workload.model.name} on {measured.environment.world_size} × "
               f"{measured.environment.device_name}")
    from botec.units import format_quantity

    median = summary.median
    typer.echo(f"  step {format_quantity(median['step_seconds'], 's')} (p90 {format_quantity(summary.p90['step_seconds'], 's')}): "
               f"input wait {format_quantity(median['input_wait_seconds'], 's')}, forward+backward "
               f"{format_quantity(median['forward_backward_seconds'], 's')}, sync {format_quantity(median['sync_seconds'], 's')}, "
               f"optimizer {format_quantity(median['optimizer_seconds'], 's')}")
    mfu = f", MFU {summary.mfu:.3g}" if summary.mfu is not None else ""
    typer.echo(f"  {summary.tokens_per_s:,.0f} tokens/s, {format_quantity(summary.achieved_flops_per_s, 'FLOP/s')}{mfu}")
    if measured.memory:
        m = measured.memory
        typer.echo(f"  peak memory {format_quantity(m.peak_bytes, 'B')}: parameters {format_quantity(m.parameters_bytes, 'B')}, "
                   f"optimizer {format_quantity(m.optimizer_bytes, 'B')}, activations {format_quantity(m.activations_bytes, 'B')} "
                   f"(saved-tensor factor {m.saved_tensor_factor:.3g})")
    if measured.checkpoint:
        typer.echo(f"  checkpoint {format_quantity(measured.checkpoint.bytes, 'B')} in "
                   f"{format_quantity(measured.checkpoint.seconds, 's')}")
    typer.echo(f"wrote {output}", err=True)


def _progress(total: int):
    """A context manager yielding a callback (step, total, seconds) that shows progress on stderr."""
    import contextlib

    @contextlib.contextmanager
    def bar():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        with Progress(TextColumn("measuring"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[last]}"),
                      TimeElapsedColumn(), console=console, transient=True) as progress:
            task = progress.add_task("steps", total=total, last="")

            def report(step: int, steps: int, seconds: float) -> None:
                progress.update(task, completed=step, last=f"last step {seconds:.3g} s")

            yield report

    return bar()


def _measure_fake(result, arch, micro: int, sequence: int) -> None:
    """The full-size model's step memory and its saved-tensor factor, on fake tensors."""
    import torch

    from botec.measure.fake import layer_saved_tensor_factor, step_memory
    from botec.units import format_quantity

    if arch.moe or arch.mla:
        raise UserError("--fake measures dense architectures (the reference model has no experts or MLA)")
    factor = layer_saved_tensor_factor(arch, micro, sequence, dtype=torch.bfloat16)
    typer.echo(f"{arch.name}, micro-batch {micro} × {sequence:,} tokens, BF16, on fake tensors (nothing allocated):")
    typer.echo(f"  one layer keeps {format_quantity(factor['activation_bytes_per_layer'], 'B')} for the backward pass"
               f" = {factor['saved_tensor_factor']:.3g} hidden-state tensors of "
               f"{format_quantity(factor['hidden_state_bytes'], 'B')} (the lesson's placeholder: 8; this contract: "
               f"{result.value('saved_tensor_factor'):g})")
    try:
        categories = step_memory(arch, micro, sequence, dtype=torch.bfloat16)
    except Exception as error:  # MemTracker is a private PyTorch tool
        typer.echo(f"  (step memory not available: {error.__class__.__name__})")
        return
    typer.echo("  a training step's peak by category: " + ", ".join(
        f"{key.lower()} {format_quantity(value, 'B')}" for key, value in categories.items() if value))


@app.command()
def calibrate(
    contract: Path = typer.Argument(..., help="The contract that describes the measured run."),
    measurement_file: Path = typer.Argument(..., metavar="MEASUREMENT", help="A file written by `botec measure`."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the calibrated contract here."),
    allow_workload_change: bool = typer.Option(False, "--allow-workload-change",
                                               help="Calibrate even though the measured workload differs."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
) -> None:
    """Put the estimate beside a measurement, back-solve the assumptions it pins down, name the one that failed.

    Example: `botec calibrate job.yaml run.json -o job.calibrated.yaml`
    """
    from botec.estimate import estimate_file
    from botec.measure.calibrate import calibrate as run_calibration
    from botec.measure.calibrate import calibrated_contract
    from botec.measure.measurement import read
    from botec.units import format_quantity

    measured = read(measurement_file)
    result = estimate_file(contract)
    if result.contract.workload.kind != "training":
        raise UserError("botec calibrate compares training contracts with `botec measure` runs")
    source = f"{measurement_file.name} ({measured.created[:10]})"
    calibration = run_calibration(result, measured, source, allow_workload_change)
    if format is Format.json:
        import json

        typer.echo(json.dumps({
            "comparisons": [{"name": c.name, "unit": c.unit, "estimated": c.estimated, "measured": c.measured,
                             "ratio": c.ratio} for c in calibration.comparisons],
            "assumptions": {k: {"value": v, "source": n} for k, (v, n) in calibration.assumptions.items()},
            "diagnosis": calibration.diagnosis, "notes": calibration.notes}, indent=2))
    else:
        typer.echo(f"estimate ({contract}) beside measurement ({measurement_file}):")
        for c in calibration.comparisons:
            typer.echo(f"  {c.name}: estimated {format_quantity(c.estimated, c.unit)}, measured "
                       f"{format_quantity(c.measured, c.unit)} (× {c.ratio:.3g})")
        typer.echo("assumptions the measurement pins down:")
        for path, (value, note) in calibration.assumptions.items():
            typer.echo(f"  {path} = {value:.4g}  [{note}]")
        for note in calibration.notes:
            typer.echo(f"  note: {note}")
        typer.echo("diagnosis:")
        for line in calibration.diagnosis:
            typer.echo(f"  {line}")
    if output is not None:
        _write_atomically(output, calibrated_contract(contract, calibration, source))
        typer.echo(f"wrote {output}", err=True)


def _space_progress():
    """A context manager yielding a progress callback (done, total) shown on stderr for large spaces."""
    import contextlib

    @contextlib.contextmanager
    def bar():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("evaluating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task("space", total=None)

            def report(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            yield report

    return bar()


def _numpy_needed() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise UserError("this command evaluates the formulas on arrays: pip install 'botec[array]' (numpy)") from None


@app.command()
def sweep(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    axes: List[str] = typer.Option([], "--set", help="FIELD=VALUES: 4,8,16 or 1..8 or 0.2:0.5:4 (repeatable)."),
    outputs: List[str] = typer.Option(["run_seconds", "planned_device_bytes", "step_seconds"], "--output",
                                      help="Quantities to tabulate (repeatable)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text, json or markdown (csv: --csv)."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write the table as CSV."),
    cap: int = typer.Option(10_000_000, "--cap", help="Refuse spaces larger than this without --force."),
    force: bool = typer.Option(False, "--force", help="Evaluate a space larger than --cap."),
) -> None:
    """Evaluate the cross product of some fields through the same formulas, vectorized; feasible rows marked.

    Example: `botec sweep --set supply.count=4,8,16,32 --set strategy.micro_batch_size=1..8`
    """
    _numpy_needed()
    import numpy as np

    from botec.contract import load_contract
    from botec.estimate import given_quantities, reference_contract_path
    from botec.explore.space import Space, evaluate_space, parse_axis

    loaded = load_contract(contract or reference_contract_path())
    if loaded.workload.kind != "training":
        raise UserError("sweeps run over training contracts (serving: vary the traffic with --set on estimate)")
    base, _, _ = given_quantities(loaded)
    if not axes:
        raise UserError("--set: give at least one FIELD=VALUES to sweep")
    parsed = [parse_axis(a, base) for a in axes]
    space = Space(loaded, parsed)
    if space.size > cap and not force:
        raise UserError(f"--set: the space has {space.size:,} configurations, more than the cap of {cap:,}; "
                        "narrow it or pass --force")
    wanted = list(dict.fromkeys(outputs + ["memory_spare_bytes"]))
    with _space_progress() as progress:
        columns, valid, counts = evaluate_space(space, wanted=wanted, progress=progress)
    if counts.get("interrupted"):
        typer.echo(f"interrupted: showing the first {len(valid):,} of {space.size:,} configurations", err=True)
    size = len(valid)
    feasible = valid & (columns["memory_spare_bytes"] >= 0)
    header = [a.path for a in parsed] + outputs + ["feasible"]
    rows = []
    for i in range(size):
        rows.append([columns[a.path][i] for a in parsed] + [columns[o][i] for o in outputs]
                    + [bool(feasible[i]) if valid[i] else None])
    if csv_path is not None:
        import csv
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(header)
        writer.writerows([[("" if (isinstance(v, float) and v != v) else v) for v in row] for row in rows])
        _write_atomically(csv_path, buffer.getvalue())
    if format is Format.json:
        import json

        typer.echo(json.dumps({"counts": counts | {"feasible": int(feasible.sum())}, "columns": header,
                               "rows": [[None if isinstance(v, float) and not np.isfinite(v) else v for v in row]
                                        for row in rows]}, indent=1))
        return
    from botec.quantities import definitions
    from botec.units import format_number, format_quantity

    units = {name: d.unit for name, d in definitions().items()}

    def cell(name, value):
        if value is None or (isinstance(value, float) and not np.isfinite(value)):
            return "—"
        if isinstance(value, bool):
            return "yes" if value else "no"
        return format_quantity(float(value), units[name]) if name in units else format_number(float(value))

    names = [a.path for a in parsed] + outputs
    lines = []
    for row in rows[:200]:
        lines.append([cell(n, v) for n, v in zip(names, row[:-1])] + [cell("feasible", row[-1]) if row[-1] is not None
                                                                        else "invalid layout"])
    if format is Format.markdown:
        typer.echo("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
        for line in lines:
            typer.echo("| " + " | ".join(line) + " |")
    else:
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in header:
            table.add_column(column.split(".")[-1], justify="right")
        for line in lines:
            table.add_row(*line)
        _console().print(table)
    typer.echo(f"{counts['candidates']:,} configurations, {counts['evaluated']:,} valid layouts, "
               f"{int(feasible.sum()):,} fit" + (" (first 200 shown; --csv for all)" if len(rows) > 200 else ""),
               err=True)


@app.command()
def solve(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    minimize: Optional[str] = typer.Option(None, "--minimize", help="A field to make as small as possible."),
    maximize: Optional[str] = typer.Option(None, "--maximize", help="A field to make as large as possible."),
    subject_to: List[str] = typer.Option([], "--subject-to", help="'QUANTITY OP VALUE' (e.g. 'run_seconds <= 4 h') "
                                                                   "or 'fits' (repeatable)."),
    over: Optional[str] = typer.Option(None, "--over", help="The values to try, FIELD=1..64 (default: a wide range)."),
    find: Optional[str] = typer.Option(None, "--find", help="An assumption to back-solve, e.g. "
                                                           "assumptions.end_to_end_mfu."),
    given: Optional[str] = typer.Option(None, "--given", help="The observed figure for --find, e.g. "
                                                             "accelerator_hours=1.72M."),
) -> None:
    """Solve for a field under constraints, or back-solve an assumption from an observed figure.

    Examples: `botec solve --minimize supply.count --subject-to "run_seconds <= 4 h"`;
    `botec solve examples/llama2-70b-pretrain.yaml --find assumptions.end_to_end_mfu --given accelerator_hours=1.72M`
    """
    _numpy_needed()
    from botec.contract import load_contract
    from botec.estimate import reference_contract_path
    from botec.explore.solve import back_solve, optimize
    from botec.quantities import definitions
    from botec.units import format_number, format_quantity

    loaded = load_contract(contract or reference_contract_path())
    if find is not None:
        if given is None:
            raise UserError("--find needs --given QUANTITY=VALUE")
        value, reached = back_solve(loaded, find, given)
        quantity = given.partition("=")[0].strip()
        typer.echo(f"{find} = {value:.6g} gives {quantity} = {format_quantity(reached, definitions()[quantity].unit)}")
        return
    if (minimize is None) == (maximize is None):
        raise UserError("give one of --minimize FIELD or --maximize FIELD (or --find with --given)")
    variable = minimize or maximize
    if over is not None and over.partition("=")[0].strip() == "supply.accelerator":
        from botec.explore.solve import best_accelerator

        keys = [k.strip() for k in over.partition("=")[2].split(",") if k.strip()]
        rows = best_accelerator(loaded, variable, "min" if minimize else "max", subject_to, keys)
        unit = definitions()[variable].unit
        if rows[0][1] is None:
            raise UserError("no accelerator meets the constraints: " +
                            "; ".join(f"{key}: {why}" for key, _, why in rows))
        typer.echo(f"best: {rows[0][0]} ({variable} = {format_quantity(rows[0][1], unit)})")
        for key, value, why in rows:
            typer.echo(f"  {key}: {format_quantity(value, unit) if value is not None else why}")
        return
    solution = optimize(loaded, variable, "min" if minimize else "max", subject_to, over)
    if solution.value is None:
        raise UserError(f"no value of {variable} meets the constraints ({solution.evaluated:,} tried): "
                        f"{solution.closest}")
    typer.echo(f"{variable} = {format_number(solution.value)}  ({solution.feasible:,} of {solution.evaluated:,} "
               "values tried meet the constraints)")
    units = {name: d.unit for name, d in definitions().items()}
    for name, value in solution.row.items():
        if name in units:
            typer.echo(f"  {name} = {format_quantity(value, units[name])}")


@app.command()
def search(
    contract: Path = typer.Argument(..., help="A training contract (its layout is the starting point)."),
    top: int = typer.Option(10, "--top", min=1, help="How many layouts to show."),
    objective: str = typer.Option("step_seconds", "--objective", help="Quantity to minimize (step_seconds, "
                                                                      "training_cost_usd, ...)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
) -> None:
    """Search TP × PP × CP × DP (EP) × ZeRO × micro-batch × recomputation × SP × interleaving for the fastest
    layout that fits; for a serving contract, the accelerator and TP degree that meet the targets cheapest.

    Example: `botec search examples/gpt3-175b-search.yaml --top 5`
    """
    _numpy_needed()
    from botec.contract import load_contract
    from botec.explore.search import as_overrides, search as run_search
    from botec.units import format_quantity

    loaded = load_contract(contract)
    if loaded.workload.kind == "serving":
        from botec.explore.search import search_serving

        rows = search_serving(loaded, top)
        if format is Format.json:
            import json

            typer.echo(json.dumps(rows, indent=2))
            return
        if not rows:
            raise UserError("no accelerator and tensor-parallel degree holds a request and meets the latency targets")
        for rank, row in enumerate(rows, 1):
            cost = format_quantity(row["cost_per_day_usd"], "USD") + " per day" if row["cost_per_day_usd"] is not None \
                else "no price"
            typer.echo(f"{rank}. {row['accelerator']} TP {row['tensor_parallel']}: "
                       f"{format_quantity(row['replicas'], 'replicas')}, "
                       f"{format_quantity(row['accelerators'], 'accelerators')}, batch {row['batch']:.0f}, TPOT "
                       f"{format_quantity(row['tpot_seconds'], 's')}, TTFT {format_quantity(row['ttft_seconds'], 's')}, "
                       f"{cost}")
        return
    result = run_search(loaded, objective, top)
    if format is Format.json:
        import json

        typer.echo(json.dumps({"candidates": result.candidates, "evaluated": result.evaluated,
                               "feasible": result.feasible, "seconds": result.seconds,
                               "candidates_per_second": result.per_second, "best": result.best}, indent=2))
        return
    typer.echo(f"{result.candidates:,} candidate layouts, {result.evaluated:,} valid after pruning, "
               f"{result.feasible:,} fit; {result.seconds:.3g} s ({result.per_second:,.0f} candidates/s)")
    for rank, entry in enumerate(result.best, 1):
        layout, figures = entry["layout"], entry["figures"]
        typer.echo(f"{rank}. TP {layout['strategy.tensor_parallel']}{' + SP' if layout['strategy.sequence_parallel'] else ''}"
                   f" × CP {layout['strategy.context_parallel']} × PP {layout['strategy.pipeline_parallel']}"
                   f"{' (v ' + str(layout['strategy.virtual_pipeline_stages']) + ')' if layout['strategy.virtual_pipeline_stages'] > 1 else ''}"
                   f", EP {layout['strategy.expert_parallel']}, ZeRO-{layout['strategy.zero_stage']}, micro-batch "
                   f"{layout['strategy.micro_batch_size']}, recompute {layout['strategy.recompute']}: step "
                   f"{format_quantity(figures['step_seconds'], 's')}, run {format_quantity(figures['run_seconds'], 's')}, "
                   f"MFU {figures['end_to_end_mfu']:.3g}, {format_quantity(figures['planned_device_bytes'], 'B')} planned")
        typer.echo(f"   botec estimate {contract} " + " ".join(f"--set {o}" for o in as_overrides(layout)))


@app.command()
def sensitivity(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    output: str = typer.Option("run_seconds", "--output", help="The quantity whose swings to rank."),
) -> None:
    """Rank the ranged assumptions by how far each moves one output across its range (a tornado table).

    Example: `botec sensitivity examples/lesson-finetune-1b.yaml --output planned_device_bytes`
    """
    from botec.estimate import estimate_file
    from botec.explore.uncertainty import sensitivity as run_sensitivity
    from botec.quantities import definitions
    from botec.units import format_quantity

    result = estimate_file(contract)
    if output not in result.quantities:
        from botec.catalog import did_you_mean

        raise UserError(f"--output: {output!r} is not a quantity of this contract{did_you_mean(output, result.quantities)}")
    unit = definitions()[output].unit
    swings = run_sensitivity(result, output)
    if not swings:
        raise UserError("no assumption of this contract states a range (low/high)")
    typer.echo(f"{output} = {format_quantity(result.value(output), unit)}; each assumption from its low to its high end:")
    for s in swings:
        input_unit = definitions()[s.input].unit
        typer.echo(f"  {s.input} {format_quantity(s.low, input_unit)} → {format_quantity(s.high, input_unit)}: "
                   f"{format_quantity(s.output_at_low, unit)} → {format_quantity(s.output_at_high, unit)} "
                   f"(swing {format_quantity(s.swing, unit)})")


def _attention_kind(arch) -> str:
    if arch.mla:
        return f"MLA, KV latent {arch.mla.kv_lora_rank}"
    if arch.kv_heads == arch.attention_heads:
        return "MHA"
    return "MQA" if arch.kv_heads == 1 else "GQA"


@app.command()
def model(
    name: Optional[str] = typer.Argument(None, help="A catalog model (e.g. llama-3.1-8b) or a Hugging Face "
                                                    "config.json (or the folder holding one)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
    list_: bool = typer.Option(False, "--list", help="List the model catalog."),
) -> None:
    """Print a model's shape and its parameters by part: embeddings, attention, MLP, experts, norms.

    Example: `botec model mixtral-8x7b`, `botec model path/to/config.json`
    """
    from botec.architecture import as_dict, breakdown, model_catalog, read_hf_config
    from botec.catalog import did_you_mean
    from botec.units import format_number

    catalog = model_catalog()
    if list_ or name is None:
        def billions(count):
            return f"{format_number(count / 1e9)}B"

        rows = [(key, a.name, billions(breakdown(a).total), billions(breakdown(a).active),
                 billions(a.published_parameters) if a.published_parameters else "—")
                for key, a in catalog.items()]
        if format is Format.json:
            import json

            typer.echo(json.dumps([dict(zip(("key", "name", "parameters", "active", "published"), r))
                                   for r in rows], indent=2))
            return
        from rich import box
        from rich.table import Table

        table = Table(title="Model catalog (parameters counted from the architecture)", title_justify="left",
                      box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("key", "name", "parameters", "active per token", "published"):
            table.add_column(column, justify="left" if column in ("key", "name") else "right")
        for row in rows:
            table.add_row(*row)
        _console().print(table)
        return
    if name in catalog:
        arch = catalog[name]
    elif name.endswith(".json") or Path(name).is_dir():
        arch = read_hf_config(name)
    else:
        raise UserError(f"unknown model {name!r}{did_you_mean(name, catalog)} (see `botec model --list`, or give "
                        "a config.json path)")
    parts = breakdown(arch)
    lines = [
        ("embeddings (token + position)", parts.embeddings),
        ("LM head" + (" (tied to the embeddings)" if arch.tied_embeddings else ""), parts.lm_head),
        (f"attention ({arch.layers} layers × {parts.parts['attention_per_layer']:,})", parts.attention),
        (f"dense MLP ({parts.parts['dense_layers']} layers × {parts.parts['dense_mlp_per_layer']:,})", parts.mlp),
        ("routed experts" + (f" ({parts.parts['moe_layers']} layers × {arch.moe.experts} × "
                             f"{parts.parts['expert']:,})" if arch.moe else ""), parts.experts),
        ("shared experts", parts.shared_experts),
        ("routers", parts.routers),
        ("norms", parts.norms),
    ]
    if format is Format.json:
        import json

        payload = {"architecture": as_dict(arch), "parameters": {label: value for label, value in lines},
                   "total": parts.total, "active_per_token": parts.active,
                   "matmul_active_per_token": parts.matmul_active, "multi_token_prediction": parts.mtp}
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    shape = (f"{arch.layers} layers, hidden {arch.hidden_size:,}, {arch.attention_heads} heads "
             f"({_attention_kind(arch)}, {arch.kv_heads} KV heads, head dim "
             f"{arch.qk_head_dim if not arch.mla else f'{arch.qk_head_dim} (q·k) / {arch.v_head_dim} (v)'}), "
             f"FFN {arch.ffn_size:,} "
             f"({arch.mlp}), vocabulary {arch.vocab_size:,}")
    if arch.moe:
        shape += (f"; MoE: {arch.moe.experts} experts of FFN {arch.moe.expert_ffn_size:,}, {arch.moe.experts_per_token}"
                  f" per token, {arch.moe.shared_experts} shared, in {arch.moe_layers} of {arch.layers} layers")
    typer.echo(f"{arch.name} ({arch.family})")
    typer.echo(shape)
    if arch.source:
        typer.echo(f"source: {arch.source}")
    width = max(len(label) for label, _ in lines)
    for label, value in lines:
        if value:
            typer.echo(f"  {label:<{width}}  {value:>18,}")
    typer.echo(f"  {'total':<{width}}  {parts.total:>18,}  ({format_number(parts.total / 1e9)}B)")
    typer.echo(f"  {'active per token':<{width}}  {parts.active:>18,}  ({format_number(parts.active / 1e9)}B)")
    if parts.mtp:
        typer.echo(f"  {'multi-token prediction (not in total)':<{width}}  {parts.mtp:>18,}")
    if arch.published_parameters:
        typer.echo(f"published: {format_number(arch.published_parameters / 1e9)}B")


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"botec {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Capacity planning for AI workloads."""


def _one_line(text: str) -> str:
    """Control characters (a user's stray newline in a value) shown escaped, so an error stays one line."""
    import re

    return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group(0))[1:-1], text)


def main() -> None:
    """Console entry point: user errors become one line and exit code 2; nothing becomes a traceback."""
    try:
        app(standalone_mode=True)
    except UserError as error:
        typer.echo(f"botec: error: {_one_line(str(error))}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("botec: interrupted", err=True)
        sys.exit(130)
    except Exception as error:  # a bug in botec: say so in one line, keep the traceback for developers
        if os.environ.get("BOTEC_DEBUG"):
            raise
        typer.echo(f"botec: internal error: {error.__class__.__name__}: {error} "
                   "(set BOTEC_DEBUG=1 for the traceback, and please report it)", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
