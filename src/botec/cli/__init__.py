"""The ``botec`` command line: each command parses its options, calls botec, and hands the result to
:mod:`botec.report` to render (the commands live in the modules of this package, by what they do).

Every user error (a malformed contract, a unit that does not parse, an unknown field or
accelerator, a batch that does not fit) ends as one line on stderr naming the field and what
was expected, with exit code 2. Nothing else a user sees is a traceback.
"""

from __future__ import annotations

import os
import sys

import typer

from botec import __version__
from botec.cli.common import app
from botec.errors import UserError

# The commands register themselves on import, and `botec --help` lists them in this order.
from botec.cli import estimating, serving_app, simulating, catalogs, measuring, exploring, validating  # noqa: E402,F401,I001

__all__ = ["app", "main"]


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


def _invoked(argv: list[str]) -> typer.Typer:
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


def main() -> None:
    """Console entry point: user errors become one line and exit code 2; nothing becomes a traceback."""
    try:
        _invoked(sys.argv)(standalone_mode=True)
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
