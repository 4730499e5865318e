"""The typer app with every command registered (imported by :func:`botec.cli.main` only for a command line
that :mod:`botec.cli.quick` leaves to it, and by ``botec.cli.app``)."""

from __future__ import annotations

import sys

import typer

from botec import __version__
from botec.cli.common import app

# The commands register themselves on import, and `botec --help` lists them in this order.
from botec.cli import estimating, serving_app, simulating, studying, launching, catalogs, measuring, exploring, validating  # noqa: E402,F401,I001
from botec.cli import _one_line  # noqa: E402

__all__ = ["app", "invoked", "usage"]


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


def invoked(argv: list[str]) -> typer.Typer:
    """The app with only the command ``argv`` names (all of them for ``--help`` or an unknown name): click builds
    every registered command's parser up front, a tenth of a short command's start-up."""
    name = argv[1] if len(argv) > 1 else None
    chosen = [info for info in app.registered_commands
              if (info.name or info.callback.__name__.replace("_", "-")) == name]
    if not chosen:
        return app
    import copy

    single = copy.copy(app)  # the same settings and root callback, one command
    single.registered_commands = chosen
    return single


def usage(error) -> str:
    """``sweep: No such option: -x (`botec sweep -h` shows its usage)``: click's message on one line."""
    message = _one_line(error.format_message())
    context = error.ctx
    if context is not None and context.parent is not None:
        command = context.info_name
    else:  # click's parser raises some (an option's missing value) without its context
        command = sys.argv[1] if len(sys.argv) > 1 and invoked(sys.argv) is not app else None
    if command is None:  # the app itself: no command named or an unknown one
        return f"{message} (`botec -h` lists the commands)"
    return f"{command}: {message} (`botec {command} -h` shows its usage)"
