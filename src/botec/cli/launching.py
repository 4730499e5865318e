"""`botec export` and `botec import`: a contract's plan as launch configs, and launch configs into a contract."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from botec.cli.common import CONTRACT_HELP, FORCE_HELP, SET_HELP, app, emit, load_estimate
from botec.errors import UserError


def _format_names() -> str:
    from botec.launch import FORMAT_MODULES

    return ", ".join(FORMAT_MODULES)


@app.command("export")
def export_(
    contract: Optional[Path] = typer.Argument(None, help=CONTRACT_HELP, show_default=False),
    to: Optional[str] = typer.Option(None, "--to", "-t", show_default=False,
                                     help=f"The launch format: {_format_names()} (`botec export --list` describes "
                                          "each); or `all`: every format of the contract's kind, a file each in -o "
                                          "DIR."),
    list_: bool = typer.Option(False, "--list", help="List the launch formats (name, kind, tool and version, what "
                                                     "the file is) and exit."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", show_default=False,
                                          help="The file (default: stdout); with --to all, the folder (made if "
                                               "absent), each file named FORMAT + its suffix."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
    best: bool = typer.Option(False, "--best", help="Export the best plan `botec search` finds instead of the "
                                                    "contract's: the fastest layout that fits (training, by "
                                                    "--objective), the cheapest accelerator and TP that meet the "
                                                    "targets (serving)."),
    objective: str = typer.Option("step_seconds", "--objective", help="With --best, training: the quantity the "
                                                                      "search minimizes."),
) -> None:
    """Write the estimate's plan (layout, batch, recomputation, precision, offload) as a launch config.

    Only options of the pinned tool version are written; what the file cannot express is listed in its header.
    Example: `botec export examples/llama3.1-8b-finetune-h100.yaml --to torchtitan -o train.sh`;
    `--best` exports the layout `botec search` ranks first; `botec export --list` describes the formats.
    """
    from botec.launch import export_text, launch_format

    if list_:
        emit(_format_list(), output, force=force)
        return
    if to is None:
        raise UserError(f"--to: name the launch format ({_format_names()}, or all); `botec export --list` "
                        "describes them")
    if best:
        set_ = list(set_) + _best_plan(contract, set_, objective)
    if to != "all":
        chosen = launch_format(to)   # an unknown name fails before the estimate runs
        result = load_estimate(contract, set_)
        if chosen.kind != result.kind:
            raise UserError(f"--to {to}: a {chosen.kind} format, and this is a {result.kind} contract (its formats: "
                            f"{', '.join(_formats_of(result.kind)) or 'none installed'})")
        emit(export_text(chosen, result), output, force=force)
        return
    if output is None or str(output) == "-":
        raise UserError("--to all writes one file per format: name a folder with -o/--output")
    if output.exists() and not output.is_dir():
        raise UserError(f"-o/--output: {output}: --to all needs a folder, and this is a file")
    result = load_estimate(contract, set_)
    formats = {name: launch_format(name) for name in _formats_of(result.kind, result)}   # of its kind and engine
    skipped = [name for name in _formats_of(result.kind) if name not in formats]
    if skipped:
        typer.echo(f"botec: note: --to all: {', '.join(skipped)} serve other engines than this contract's "
                   f"{result.inputs.engine.key!r}: not written", err=True)
    # every file's text, before any is written
    written = {f"{name}{f.suffix}": export_text(f, result) for name, f in formats.items()}
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"-o/--output: {output}: cannot make the folder ({error.strerror or error})") from None
    from botec.errors import write_texts_atomically

    # every file or none: each target checked, each written to a temporary, then all renamed into place
    write_texts_atomically({output / name: text for name, text in written.items()}, force=force)
    for name in written:
        typer.echo(f"wrote {output / name}", err=True)


def _format_list() -> str:
    """The launch formats, one line each (name, kind, tool and version) and its description below it."""
    import textwrap

    from botec.launch import FORMAT_MODULES, launch_format
    from botec.launch.importing import available_formats

    formats = [launch_format(name) for name in available_formats(FORMAT_MODULES)]
    width = max(len(f.name) for f in formats)
    lines = [f"{'format':<{width}}  {'kind':<8}  tool and version (file suffix)"]
    for f in formats:
        lines.append(f"{f.name:<{width}}  {f.kind:<8}  {f.tool} {f.version} ({f.suffix})")
        lines += textwrap.wrap(f.description, 100, initial_indent=" " * (width + 2),
                               subsequent_indent=" " * (width + 4))
    lines.append("botec export CONTRACT --to FORMAT writes one; botec import FILE reads it back.")
    return "\n".join(lines) + "\n"


def _best_plan(contract: Optional[Path], overrides: List[str], objective: str) -> list[str]:
    """The ``--set`` overrides of the plan ``botec search`` ranks first (a one-line error when none is found)."""
    from botec.cli.common import load_inputs, numpy_needed
    from botec.explore.search import LAYOUT_FIELDS, as_overrides, search, search_serving

    numpy_needed()
    inputs = load_inputs(contract, overrides)
    if inputs.kind == "serving":
        rows = search_serving(inputs, 1)
        if not rows:
            raise UserError("--best: no accelerator and tensor-parallel degree holds a request and meets the "
                            "latency targets")
        chosen = [f"supply.accelerator={rows[0]['accelerator']}",
                  f"strategy.tensor_parallel={rows[0]['tensor_parallel']}"]
    else:
        found = search(inputs, objective, 1)
        if not found.best:
            raise UserError("--best: no layout of this model fits these accelerators (see `botec search`)")
        layout = found.best[0]["layout"]
        chosen = as_overrides({path: layout[path] for path in LAYOUT_FIELDS if path in layout})
    typer.echo("botec: note: --best: the plan `botec search` ranks first: " + " ".join(f"--set {o}" for o in chosen),
               err=True)
    return chosen


def _formats_of(kind: str, result=None) -> list[str]:
    """The installed formats of ``kind``, by name (of a serving ``result``: those that serve its engine)."""
    from botec.launch import FORMAT_MODULES, launch_format, serves
    from botec.launch.importing import available_formats

    formats = [name for name in available_formats(FORMAT_MODULES) if launch_format(name).kind == kind]
    if result is not None and kind == "serving":
        formats = [name for name in formats if serves(launch_format(name), result.inputs.engine.key)]
    return formats


@app.command("import")
def import_(
    file: Path = typer.Argument(..., help="A launch config (torchtitan or Megatron-LM launch script, DeepSpeed JSON, "
                                          "accelerate YAML, ...) or a Hugging Face config.json.", show_default=False),
    from_: Optional[str] = typer.Option(None, "--from", help="The file's format (default: told from its content and "
                                                             "suffix); `hf-config` for a config.json.",
                                        show_default=False),
    base: Optional[Path] = typer.Option(None, "--base", help="A contract that gives the fields the file does not "
                                                             "carry (the accelerator, the tokens, ...).",
                                        show_default=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", show_default=False,
                                          help="The contract file to write (default: stdout)."),
    force: bool = typer.Option(False, "--force", help=FORCE_HELP),
    set_: List[str] = typer.Option([], "--set", help=SET_HELP, show_default=False),
) -> None:
    """Read a launch config into a contract: the layout, batch, sequence length, steps, precision it states.

    What the file does not carry comes from --base; without one, the contract lists it as missing.
    Example: `botec import train.sh --base examples/llama3.1-8b-finetune-h100.yaml -o job.yaml`
    """
    from botec.launch.importing import import_contract

    emit(import_contract(file, from_, base, output, set_), output, force=force)

