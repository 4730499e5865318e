"""`botec measure`, `botec calibrate`: a short real run, and the assumptions it pins down."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import CONTRACT_HELP, SET_HELP, Format, emit, load_estimate, app
from botec.errors import UserError


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
        raise UserError("botec measure needs PyTorch: pip install 'botec[measure]'") from None
    from botec.measure import command
    from botec.units import UnitError, parse_quantity

    result = load_estimate(contract, set_)
    if result.kind != "training":
        raise UserError("botec measure runs training contracts")
    arch = command.architecture_of(result, lambda text: typer.echo(text, err=True))
    try:
        limit = parse_quantity(max_parameters, "count")
        peak = parse_quantity(peak_flops, "flop_rate") if peak_flops else None
    except UnitError as error:
        raise UserError(f"--max-parameters/--peak-flops: {error}") from None
    if fake:
        typer.echo("\n".join(command.fake(result, arch)))
        return
    from botec.measure import measurement as files
    from botec.measure.harness import Options
    from botec.report.measurement import measurement_lines

    options = Options(steps=steps, warmup=warmup, input_delay_seconds=input_delay, max_parameters=limit,
                      peak_flops_per_s=peak, checkpoint=not no_checkpoint)
    try:
        measured = command.run(result, arch, options, str(contract) if contract else "reference workload")
    except KeyboardInterrupt:
        typer.echo(f"botec: interrupted: no measurement written ({output} untouched)", err=True)
        raise typer.Exit(code=130) from None
    if measured is None:  # not rank 0
        return
    files.write(measured, output)
    typer.echo("\n".join(measurement_lines(measured)))
    typer.echo(f"wrote {output}", err=True)


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
    from botec.measure.calibrate import calibrate as run_calibration
    from botec.measure.calibrate import calibrated_contract
    from botec.measure.measurement import read
    from botec.report.measurement import calibration_json, calibration_lines

    measured = read(measurement_file)
    result = load_estimate(contract, [])
    if result.kind != "training":
        raise UserError("botec calibrate compares training contracts with `botec measure` runs")
    source = f"{measurement_file.name} ({measured.created[:10]})"
    calibration = run_calibration(result, measured, source, allow_workload_change)
    typer.echo(calibration_json(calibration) if format is Format.json
               else "\n".join(calibration_lines(calibration, contract, measurement_file)))
    if output is not None:
        emit(calibrated_contract(contract, calibration, source), output)
