"""The ``botec`` command line: each command parses its options, calls botec, and hands the result to
:mod:`botec.report` to render (the commands live in the modules of this package, by what they do).

Every user error (a malformed contract, a unit that does not parse, an unknown field or
accelerator, a batch that does not fit) ends as one line on stderr naming the field and what
was expected, with exit code 2. Nothing else a user sees is a traceback.
"""

from __future__ import annotations

import os
import sys

from botec.errors import UserError

__all__ = ["app", "main"]


def __getattr__(name: str):
    """``botec.cli.app``, the typer app with every command, built when first asked for: ``botec estimate`` runs
    without typer (:mod:`botec.cli.quick`), and typer and the commands' modules are a third of its start-up."""
    if name == "app":
        from botec.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _one_line(text: str) -> str:
    """Control characters (a user's stray newline in a value) shown escaped, so an error stays one line."""
    import re

    return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group(0))[1:-1], text)


def main() -> None:
    """Console entry point: user errors become one line and exit code 2; nothing becomes a traceback."""
    from botec.cli.quick import Interrupted, echo, run

    # pydantic looks for plugins by scanning every installed distribution's entry points when it builds its
    # first validator (20 ms of every command's start-up); botec's validation has no use for one. A user who
    # sets the variable keeps their choice.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        code = run(sys.argv)  # `botec estimate` without typer; None: a command line it leaves to the typer app
        if code is None:
            from botec.cli.commands import invoked

            code = invoked(sys.argv)(standalone_mode=False)  # click's usage errors come here, not as its box
    except UserError as error:
        echo(f"botec: error: {_one_line(str(error))}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, Interrupted):
        echo("botec: interrupted", err=True)
        sys.exit(130)
    except Exception as error:
        usage_error, abort = _typer_errors()
        if isinstance(error, usage_error):  # a missing argument, an unknown option, a bad choice
            if error.format_message():  # (none when a bare `botec` printed the help instead)
                from botec.cli.commands import usage

                echo(f"botec: error: {usage(error)}", err=True)
            sys.exit(2)
        if isinstance(error, abort):
            echo("botec: interrupted", err=True)
            sys.exit(130)
        if os.environ.get("BOTEC_DEBUG"):  # a bug in botec: say so in one line, keep the traceback for developers
            raise
        echo(f"botec: internal error: {error.__class__.__name__}: {error} "
             "(set BOTEC_DEBUG=1 for the traceback, and please report it)", err=True)
        sys.exit(1)
    if isinstance(code, int) and code:  # typer.Exit(code) comes back as the code without standalone mode
        sys.exit(code)


def _typer_errors() -> tuple[type, type]:
    """click's UsageError and typer's Abort, or two classes nothing raises when typer was never imported."""
    if "typer" not in sys.modules:
        return _Never, _Never
    import typer

    # typer's click (its own copy in typer 0.29) names UsageError only as BadParameter's base
    return next(base for base in typer.BadParameter.__mro__ if base.__name__ == "UsageError"), typer.Abort


class _Never(Exception):
    """Raised by nothing."""


if __name__ == "__main__":
    main()
