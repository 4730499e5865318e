"""What every command shares: the typer app, the output formats, loading a contract, writing a file."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import List, Optional

import typer

from botec.errors import UserError

app = typer.Typer(
    name="botec",
    help="Capacity planning for AI workloads: compute, accelerator memory, network, storage and cost, "
         "with every assumption named.\n\nStart with `botec estimate` (the lesson's reference workload) "
         "or `botec init` (a commented starter contract).",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Format(str, enum.Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class TableFormat(str, enum.Enum):
    """The formats of a command whose result is one table (csv too)."""

    text = "text"
    json = "json"
    markdown = "markdown"
    csv = "csv"


class Units(str, enum.Enum):
    decimal = "decimal"
    binary = "binary"


CONTRACT_HELP = "Workload contract (YAML or JSON). Default: the lesson's reference workload."
SET_HELP = "Override a contract field, e.g. `--set supply.count=8` (repeatable)."
OUTPUT_HELP = "Write the result to this file instead of stdout (`-`: stdout)."
FORCE_HELP = "Replace the -o/--output file even when it is read-only."


# Printing, writing a file and loading an estimate need no typer (``botec estimate``'s quick path uses them too).
from botec.cli.quick import emit, emit_drawn, emit_text, is_stdout, load_estimate, print_notes  # noqa: E402,F401


def load_inputs(contract: Optional[Path], overrides: List[str] = ()):
    """The inputs of a contract (the reference workload when None), for the exploring commands."""
    from botec.contract import load_contract
    from botec.estimation import REFERENCE_CONTRACT, reference_contract_path
    from botec.inputs import build_inputs

    if contract is None:
        from importlib import resources

        with resources.as_file(reference_contract_path()) as path:
            loaded = load_contract(path, list(overrides), origin=f"reference workload {REFERENCE_CONTRACT}")
        base = None
    else:
        loaded, base = load_contract(contract, list(overrides)), contract.resolve().parent
    print_notes(loaded.notes)
    return build_inputs(loaded, base)


def numpy_needed() -> None:
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise UserError("this command evaluates the formulas on arrays: pip install 'botec[array]' (numpy)") from None


def units_of(result) -> dict[str, str]:
    return {name: d.unit for name, d in result.graph.definitions(result.choices).items()}
