"""`botec measure`, `botec calibrate`: a short real run, and the assumptions it pins down."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import CONTRACT_HELP, FORCE_HELP, SET_HELP, Format, emit, emit_text, load_estimate, app
from botec.errors import UserError


@app.command()
def measure(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", show_default=False,
                                          help="Where to write the measurement (default measurement.json; with "
                                               "--efficiency-curve, efficiency-curve.yaml)."),
    steps: int = typer.Option(10, "--steps", min=1, help="Measured steps (after the warm-up)."),
    warmup: int = typer.Option(2, "--warmup", min=0, help="Warm-up steps, not recorded."),
    input_delay: float = typer.Option(0.0, "--input-delay", min=0.0,
                                      help="Seconds the data loader sleeps per sequence (a slow input on purpose)."),
    max_parameters: str = typer.Option("30M", "--max-parameters",
                                       help="Larger models are measured as a proportionally scaled-down proxy."),
    peak_flops: Optional[str] = typer.Option(None, "--peak-flops",
                                             help="The device's rated peak (e.g. '2 TFLOP/s') for MFU (and the "
                                                  "--efficiency-curve denominator); default: the contract's "
                                                  "accelerator on CUDA, unknown on CPU."),
    fake: bool = typer.Option(False, "--fake", help="Measure the full-size model's memory on fake tensors, no run."),
    no_checkpoint: bool = typer.Option(False, "--no-checkpoint", help="Skip the checkpoint save."),
    efficiency_curve: bool = typer.Option(False, "--efficiency-curve",
                                          help="Instead of a run: time the model's GEMMs and memory-bound ops on "
                                               "this device and write its efficiency curves (YAML)."),
    budget_seconds: float = typer.Option(20.0, "--budget-seconds", min=0.1,
                                         help="--efficiency-curve: time to spend; larger shapes are skipped."),
    memory_bandwidth: Optional[str] = typer.Option(None, "--memory-bandwidth",
                                                   help="--efficiency-curve: the device's memory bandwidth (e.g. "
                                                        "'4.8 TB/s'); default: the catalog's on a matching CUDA "
                                                        "device, else the best measured."),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Train the contract's model for a few steps and record what happened (needs `botec[measure]`).

    Records input wait, forward+backward, gradient synchronization, optimizer and step time, tokens/s,
    achieved FLOP/s and MFU, peak memory by category and a checkpoint save. Under `torchrun
    --nproc_per_node=2 -m botec.cli measure ...` it measures data parallelism (gloo on CPU, NCCL on GPUs).
    With `strategy.lora` it trains LoRA adapters on a frozen 16-bit base (an NF4/FP4/INT8 base is held in BF16,
    said in the measurement's notes), the optimizer over the adapters only.

    With --efficiency-curve it times instead the GEMMs the model's layers run and memory-bound ops, and writes
    the device's efficiency curves: `botec measure job.yaml --efficiency-curve -o curve.yaml`.

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
        bandwidth = parse_quantity(memory_bandwidth, "byte_rate") if memory_bandwidth else None
    except UnitError as error:
        raise UserError(f"--max-parameters/--peak-flops/--memory-bandwidth: {error}") from None
    if efficiency_curve:
        if fake:
            raise UserError("--fake and --efficiency-curve are two modes: give one")
        from botec.measure import gemm_curve

        output = output or Path("efficiency-curve.yaml")
        try:
            lines = gemm_curve.command(result, arch, output, budget_seconds, peak, bandwidth)
        except KeyboardInterrupt:
            typer.echo(f"botec: interrupted: no curve written ({output} untouched)", err=True)
            raise typer.Exit(code=130) from None
        emit_text("\n".join(lines))
        typer.echo(f"wrote {output}", err=True)
        return
    if memory_bandwidth:
        raise UserError("--memory-bandwidth goes with --efficiency-curve")
    output = output or Path("measurement.json")
    if fake:
        emit_text("\n".join(command.fake(result, arch)))
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
    emit_text("\n".join(measurement_lines(measured)))
    typer.echo(f"wrote {output}", err=True)


@app.command()
def calibrate(
    contract: Path = typer.Argument(..., help="The contract that describes the measured run."),
    measurement_file: Path = typer.Argument(..., metavar="MEASUREMENT",
                                            help="A file written by `botec measure`, a Megatron-LM or torchtitan "
                                                 "training log, or a vLLM or SGLang serving-benchmark result "
                                                 "(detected from the file)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the calibrated contract here."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    allow_workload_change: bool = typer.Option(False, "--allow-workload-change",
                                               help="Calibrate even though the measured workload differs."),
    device_independent_only: bool = typer.Option(
        False, "--device-independent-only",
        help="The run was on another device than the contract's accelerator (a CPU for an H100 plan): take only "
             "the activation memory (saved_tensor_factor), the checkpoint write bandwidth and the input wait; no "
             "efficiency or step time. Without it such a measurement is refused."),
    log_format: Optional[str] = typer.Option(None, "--log-format",
                                             metavar="megatron|torchtitan|botec|vllm-bench|sglang-bench",
                                             help="Read MEASUREMENT as this (default: detected from the file)."),
    warmup: int = typer.Option(2, "--warmup", min=0,
                               help="Training logs: the logged iterations dropped as warm-up (besides any slower "
                                    "than 2× the median of the rest)."),
    run: Optional[int] = typer.Option(None, "--run", min=1,
                                      help="Serving results: which run of a JSON-lines file (1 = the first; "
                                           "default: the last)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
    set_: List[str] = typer.Option([], "--set", show_default=False,
                                   help=SET_HELP + " The calibrated contract (-o) keeps them."),
) -> None:
    """Put the estimate beside a measurement, back-solve the assumptions it pins down, name the one that failed.

    The measurement is a `botec measure` file or a training log: Megatron-LM (` iteration N/ M | ... |
    elapsed time per iteration (ms): T | ...`) or torchtitan (`step: N  loss: L  memory: M GiB(P%)  tps: T
    ...`). A log is compared on what it gives: step time, tokens/s, FLOP/s per accelerator (each side's FLOP
    count stated) and peak memory; the workload is the contract's, checked against what the log states.

    A serving contract is calibrated from a serving benchmark of one server: `vllm bench serve --save-result`
    (or vLLM's benchmarks/benchmark_serving.py) or `python -m sglang.bench_serving --output-file` (JSON lines:
    the last run, or --run N). The contract is estimated at the measured traffic on one replica; TTFT, TPOT
    (mean and percentile), end-to-end latency and output tokens/s are compared, and memory_bandwidth_efficiency
    (from TPOT) and matmul_efficiency (from TTFT) are back-solved.

    Examples: `botec calibrate job.yaml run.json -o job.calibrated.yaml`;
    `botec calibrate examples/gpt3-175b-search.yaml examples/logs/megatron-gpt3-175b.log`;
    `botec calibrate examples/serve-llama3.1-8b-h100.yaml examples/benchmarks/vllm-llama3.1-8b-h100.json`
    """
    try:
        import numpy  # noqa: F401   (the back-solver, botec.explore.solve, is the sweeps' module)
    except ImportError:
        raise UserError("botec calibrate back-solves with botec's solver, which needs numpy: pip install "
                        "'botec[array]' (numpy)") from None
    from botec.measure.calibrate import calibrate as run_calibration
    from botec.measure.calibrate import calibrate_serving, calibrated_contract
    from botec.measure.logs import LogMeasurement, read_measurement
    from botec.measure.serving_bench import ServingBenchmark
    from botec.report.measurement import calibration_json, calibration_lines

    formats = ("botec", "megatron", "torchtitan", "vllm-bench", "sglang-bench")
    if log_format is not None and log_format not in formats:
        raise UserError(f"--log-format: expected megatron, torchtitan or botec, not {log_format!r} (a serving "
                        "benchmark: vllm-bench or sglang-bench)")
    measured = read_measurement(measurement_file, log_format, warmup, run)
    result = load_estimate(contract, set_)
    if isinstance(measured, ServingBenchmark):
        if result.kind != "serving":
            raise UserError(f"{measurement_file}: a {measured.tool} serving benchmark calibrates a serving contract "
                            f"(workload.kind: serving); {contract} is a {result.kind} contract")
        if device_independent_only:
            raise UserError(f"--device-independent-only: a {measured.tool} serving benchmark gives only figures of "
                            "the device it ran on (latencies, throughput, the efficiencies they pin down): nothing "
                            "device-independent to take; calibrate a contract of that device")
        source = (f"{measurement_file.name} ({measured.tool} serving benchmark"
                  f"{', run ' + str(measured.run) if measured.runs > 1 else ''}"
                  f"{', ' + measured.date if measured.date else ''})")
        calibration = calibrate_serving(contract, measured, source, set_)
    else:
        if result.kind != "training":
            raise UserError(f"{measurement_file}: botec calibrate compares a serving contract with a vLLM or SGLang "
                            "serving benchmark result (`vllm bench serve --save-result`, `python -m "
                            "sglang.bench_serving --output-file`), and training contracts with `botec measure` runs "
                            "and training logs")
        if isinstance(measured, LogMeasurement):
            source = f"{measurement_file.name} ({measured.tool} log{', ' + measured.date if measured.date else ''})"
        else:
            source = f"{measurement_file.name} ({measured.created[:10]})"
        calibration = run_calibration(result, measured, source, allow_workload_change, device_independent_only)
    # the calibrated contract is built and estimated before anything is printed: a value it could not hold is
    # refused in one line, shown nowhere; its relative paths resolve from where it is written
    written = calibrated_contract(contract, calibration, source, set_, _folder_of(output))
    if format is Format.json:
        typer.echo(calibration_json(calibration))
    else:
        emit_text("\n".join(calibration_lines(calibration, contract, measurement_file)))
    if output is not None:
        if isinstance(measured, ServingBenchmark) and not calibration.assumptions:
            typer.echo(f"botec: no assumption could be back-solved from {measurement_file} (see the diagnosis): "
                       f"{output} not written", err=True)
            raise typer.Exit(code=1)
        emit(written, output, force=force)


def _folder_of(output: Optional[Path]) -> Optional[Path]:
    """The folder a calibrated contract's relative paths must resolve from: the output file's (a symlink's
    target's), the working directory for stdout or a device, the contract's own without -o (None)."""
    import os

    if output is None:
        return None
    if str(output) == "-" or str(output).startswith(("/dev/", "/proc/")):
        return Path.cwd()
    return Path(os.path.realpath(output)).parent
