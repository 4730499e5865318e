"""`botec schema`, `botec init`, `botec catalog`, `botec model`: what a contract can say and name."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from botec.cli.common import Format, emit, emit_text, app
from botec.errors import ContractError, UserError
from botec.units import excerpt


@app.command()
def schema() -> None:
    """Print the JSON Schema of a workload contract, both kinds (for editors and validators)."""
    import json

    from botec.contract import contract_schema

    typer.echo(json.dumps(contract_schema(), indent=2, ensure_ascii=False))


@app.command()
def init(
    path: Path = typer.Argument(Path("botec.yaml"), help="Where to write the starter contract ('-' for stdout)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    serving: bool = typer.Option(False, "--serving", help="A serving contract (default: Llama 3.1-8B on H100s)."),
    model: Optional[str] = typer.Option(None, "--model", help="A catalog model (botec model --list; e.g. "
                                                              "llama-3.1-8b) or a Hugging Face config.json path."),
    accelerator: Optional[str] = typer.Option(None, "--accelerator", help="A catalog accelerator (botec catalog; "
                                                                          "e.g. h100-sxm). Default: h100-sxm."),
    count: Optional[int] = typer.Option(None, "--count", min=1, help="Training: accelerators in the job (default "
                                                                     "8). Serving: accelerators per replica "
                                                                     "(tensor_parallel; default: the fewest that fit)."),
) -> None:
    """Write a commented starter contract to edit: for a model and accelerator, training or serving.

    With --model, --accelerator or --count (or --serving), the contract names that model and accelerator, spells
    out the modelling choices that change the answer, and takes the first standard layout that fits in memory.
    Without them it is the lesson's reference workload (a hypothetical 32 GB accelerator).

    Example: `botec init job.yaml --model llama-3.1-8b --accelerator h100-sxm --count 8 && botec estimate job.yaml`
    """
    if str(path) != "-" and path.exists() and not force:
        raise UserError(f"{path}: already exists; choose another path or pass --force")
    shown = "job.yaml" if str(path) == "-" else str(path)
    why = None
    if serving or model is not None or accelerator is not None or count is not None:
        from botec.starters import starter_text

        text, why = starter_text(path, model, accelerator, count, serving)
    else:
        from importlib import resources

        from botec.estimation import REFERENCE_CONTRACT

        text = resources.files("botec.contracts").joinpath(REFERENCE_CONTRACT).read_text(encoding="utf-8")
        text = text.replace(f"botec estimate {REFERENCE_CONTRACT}", f"botec estimate {shown}").replace(
            f"botec explain {REFERENCE_CONTRACT}", f"botec explain {shown}")
    if str(path) == "-":
        typer.echo(text, nl=False)
    else:
        emit(text, path, force=force)
    if why is not None:
        typer.echo(f"botec: note: no standard layout fits, the contract is written as the last one tried: {why}; "
                   f"try more accelerators, a larger one, or `botec search {shown}`", err=True)
    elif str(path) != "-":
        typer.echo(f"edit it, then run `botec estimate {path}`", err=True)


@app.command()
def catalog(format: Format = typer.Option(Format.text, "--format", "-f", help="text, json or markdown.")) -> None:
    """List the accelerator catalog, node presets, optimizer presets and serving-engine presets.

    Accelerators: family, dense peaks (BF16/FP16/FP8/FP4 FLOP/s, INT8 OP/s; GeForce cards at their FP32-accumulate
    rate), memory, links (to other accelerators, and the PCIe host link to the CPU), power and the published price
    range per accelerator-hour with the month it was read. Nodes: NICs × rate, NVLink (or ICI)
    domain, nominal and achieved bandwidth per tier. Serving engines (strategy.engine: vllm, tensorrt-llm,
    sglang): memory share and rule, batch caps, chunked prefill, step and kernel overheads, all-reduce latency,
    prefix caching, each with its range and basis. `-f json` and `-f markdown` add every source.
    """
    from botec.report import listings
    from botec.report.tables import console

    if format is Format.json:
        typer.echo(listings.catalog_json())
    elif format is Format.markdown:
        typer.echo(listings.catalog_markdown())
    else:
        listings.catalog_text(console())


@app.command()
def model(
    name: Optional[str] = typer.Argument(None, help="A catalog model (e.g. llama-3.1-8b) or a Hugging Face "
                                                    "config.json (or the folder holding one)."),
    format: Format = typer.Option(Format.text, "--format", "-f", help="text or json."),
    list_: bool = typer.Option(False, "--list", help="List the model catalog."),
    lora_rank: Optional[int] = typer.Option(None, "--lora-rank", min=1,
                                            help="Add LoRA adapters of this rank: trainable vs all parameters."),
    lora_targets: str = typer.Option("q_proj,v_proj", "--lora-targets",
                                     help="Modules the adapters target: comma-separated Hugging Face names, or "
                                          "all-linear / attention (default: q_proj,v_proj, as PEFT for Llama)."),
) -> None:
    """Print a model's shape and its parameters by part: embeddings, attention, MLP, experts, norms.

    Example: `botec model mixtral-8x7b`, `botec model path/to/config.json`,
    `botec model llama-3.1-8b --lora-rank 16 --lora-targets all-linear`
    """
    from botec.architecture import lora_parameters, model_catalog, read_hf_config
    from botec.catalog import did_you_mean
    from botec.report import listings
    from botec.report.tables import console

    models = model_catalog()
    if list_ or name is None:
        text = listings.model_list(format.value, console())
        if text is not None:
            typer.echo(text)
        return
    if name in models:
        arch = models[name]
    elif name.endswith(".json") or _is_folder(name):
        arch = read_hf_config(name)
    else:
        raise UserError(f"unknown model {excerpt(name)}{did_you_mean(name, models)} (see `botec model --list`, or "
                        "give a config.json path)")
    lora = None
    if lora_rank is not None:
        targets = lora_targets.strip()
        names = targets if targets in ("all-linear", "attention") else [
            t.strip() for t in targets.split(",") if t.strip()]
        if not names:
            raise UserError("--lora-targets: name at least one module (or all-linear)")
        try:
            lora = lora_parameters(arch, lora_rank, names)
        except ContractError as error:
            raise UserError(f"--lora-targets: {error.detail}") from None
    if format is Format.json:
        typer.echo(listings.model_json(arch, lora))
    else:
        emit_text("\n".join(listings.model_text(arch, lora)))


def _is_folder(name: str) -> bool:
    """Whether ``name`` is a folder (a Hugging Face model's); a name the system cannot look up (too long) is not."""
    try:
        return Path(name).is_dir()
    except OSError:
        return False
