"""The `--workers` and `--ray` options of the commands whose work fans out (:mod:`botec.fanout`), said once."""

from __future__ import annotations

import typer

__all__ = ["WORKERS_HELP", "RAY_HELP", "interrupted_note"]

WORKERS_HELP = ("Local processes to run on (default: the cores; below {threshold} {unit}, this process alone). "
                "The results are the same whatever the count.")
RAY_HELP = ("Run on a Ray cluster instead: its address (host:port), 'auto' (the cluster this machine belongs to) "
            "or 'local' (start one here); default: $RAY_ADDRESS above the size a local run takes. "
            "Needs pip install 'botec[ray]'.")


def interrupted_note(what: str) -> None:
    """One line on stderr when Ctrl-C stopped the work and what finished is reported."""
    typer.echo(f"interrupted: {what}", err=True)
