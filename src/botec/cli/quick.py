"""What the commands share that needs no typer, and ``botec estimate`` without typer (the common invocations).

``botec estimate [CONTRACT] [-f text|json|markdown] [--units decimal|binary] [--set F=V]... [-o FILE]
[--allow-misfit] [--details]`` is parsed here with the standard library: typer, click and the other commands'
modules are a third of the command's start-up. Anything else (``-h``, ``--uncertainty``, an unknown option, a
repeated one, a value that looks like an option) returns None from :func:`estimate_args`, and
:func:`botec.cli.main` hands the command line to the typer app unchanged, so its errors and help stay as they are.
The output and the exit codes are the typer command's, byte for byte (``tests/test_cli_quick.py``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

__all__ = ["Interrupted", "echo", "emit", "emit_drawn", "emit_text", "estimate_args", "estimate_report", "is_stdout", "load_estimate", "print_notes", "run"]

FORMATS = ("text", "json", "markdown")
UNIT_SYSTEMS = ("decimal", "binary")
_VALUED = {"-f": "format", "--format": "format", "--units": "units", "--set": "set", "-o": "output",
           "--output": "output"}
_FLAGS = {"--allow-misfit": "allow_misfit", "--details": "details", "--force": "force"}


def echo(text: str, err: bool = False) -> None:
    """``text`` and a newline on stdout (stderr with ``err``), flushed; ANSI codes dropped unless the stream is a
    terminal: what ``typer.echo`` (click's ``echo``) does with a string on a UTF-8 stream."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if not _utf8(stream):  # click rewraps a stream it finds misconfigured (ASCII): let it
        import typer

        typer.echo(text, err=err)
        return
    out = text + "\n"
    if "\x1b" in out and not _is_terminal(stream):
        import re

        out = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", out)
    stream.write(out)
    stream.flush()


def _is_terminal(stream) -> bool:
    try:
        if stream.isatty():
            return True
    except Exception:
        return False
    return type(stream).__module__.startswith("ipykernel.")  # click keeps the codes for a Jupyter kernel too


def is_stdout(output: Optional[Path]) -> bool:
    """Whether an ``-o/--output`` (or ``--csv``) path means stdout: not given, or ``-``."""
    return output is None or str(output) == "-"


def emit(text: str, output: Optional[Path] = None, option: str = "-o/--output", force: bool = False) -> None:
    """Print ``text``, or write it whole to ``output`` (atomically: nothing half-written; a symlink, a device
    or a FIFO written through; a read-only file only with ``force``); ``-`` is stdout. ``option`` names the option
    in an error. Either way the text ends in one newline (a CSV's own last line end is not doubled)."""
    if is_stdout(output):
        echo(text[:-1] if text.endswith("\n") else text)
        return
    from botec.errors import write_text_atomically

    write_text_atomically(output, text if text.endswith("\n") else text + "\n", option, force)
    echo(f"wrote {output}", err=True)


def emit_text(text: str, output: Optional[Path] = None, force: bool = False) -> None:
    """A text report (lines of sentences) printed or written like :func:`emit`, each line wrapped at spaces to the
    width of where it goes (:func:`botec.report.width.report_width`: at most 100 columns, a narrower terminal's own),
    its further lines hanging 4 columns deeper. JSON, Markdown and CSV go through :func:`emit` unwrapped."""
    from botec.report.width import report_width, wrap

    emit(wrap(text, report_width(sys.stdout if is_stdout(output) else None)), output, force=force)


def emit_drawn(draw, output: Optional[Path] = None, force: bool = False) -> None:
    """``draw(console)`` on a rich console (:func:`botec.report.tables.console`): the terminal's, or one writing into
    a buffer that :func:`emit` writes whole to ``output``."""
    import io

    from botec.report.tables import console

    buffer = None if is_stdout(output) else io.StringIO()
    draw(console(buffer))
    if buffer is not None:
        emit(buffer.getvalue(), output, force=force)


def print_notes(notes) -> None:
    for note in notes:
        echo(f"botec: note: {note}", err=True)


def load_estimate(contract: Optional[Path], overrides: list[str]):
    from botec.estimation import estimate_file

    result = estimate_file(contract, overrides)
    print_notes(result.inputs.notes)
    return result


def estimate_report(contract: Optional[Path], format: str = "text", system: str = "decimal",
                    overrides: list[str] = (), output: Optional[Path] = None, allow_misfit: bool = False,
                    details: bool = False, force: bool = False) -> None:
    """``botec estimate`` without ``--uncertainty``: the report in ``format`` (text, json or markdown), sizes in
    ``system`` (decimal or binary), on stdout or written to ``output``."""
    from botec.estimation import check_fit

    result = load_estimate(contract, list(overrides))
    if not allow_misfit:
        check_fit(result, system)
    if format == "json":
        from botec.report.json_report import render

        emit(render(result), output, force=force)
    elif format == "markdown":
        from botec.report.markdown import render

        emit(render(result, system), output, force=force)
    else:
        from botec.report.terminal import render

        emit_drawn(lambda console: render(result, console, system, details), output, force)


def estimate_args(argv: list[str]) -> Optional[dict]:
    """The keyword arguments of :func:`estimate_report` for ``botec estimate ...`` (``argv`` as ``sys.argv``), or
    None for anything this parser leaves to the typer app."""
    if len(argv) < 2 or argv[1] != "estimate" or not _plain_streams():
        return None
    if any(key.startswith("_") and key.endswith("_COMPLETE") for key in os.environ):  # click's shell completion
        return None
    found: dict = {"overrides": []}
    contract = None
    args = argv[2:]
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg in _FLAGS:
            if _FLAGS[arg] in found:
                return None
            found[_FLAGS[arg]] = True
            continue
        name, sep, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in _VALUED:
            if not sep:
                if index >= len(args):
                    return None
                value = args[index]
                index += 1
            if not value or (value.startswith("-") and value != "-"):  # click's own reading of these: typer
                return None
            key = _VALUED[name]
            if key == "set":
                found["overrides"].append(value)
                continue
            if key in found:
                return None
            found[key] = value
            continue
        if arg.startswith("-") or contract is not None or not arg:  # -h, --uncertainty, -fjson, a second argument
            return None
        contract = arg
    if found.get("format", "text") not in FORMATS or found.get("units", "decimal") not in UNIT_SYSTEMS:
        return None
    return {"contract": Path(contract) if contract is not None else None, "format": found.get("format", "text"),
            "system": found.pop("units", "decimal"), "overrides": found["overrides"],
            "output": Path(found["output"]) if "output" in found else None,
            "allow_misfit": found.get("allow_misfit", False), "details": found.get("details", False),
            "force": found.get("force", False)}


def _plain_streams() -> bool:
    """Whether stdout and stderr are UTF-8 text streams, which click's echo writes to as they are (it rewraps
    others)."""
    return _utf8(sys.stdout) and _utf8(sys.stderr)


def _utf8(stream) -> bool:
    import codecs

    try:
        return codecs.lookup(stream.encoding).name == "utf-8"
    except (AttributeError, LookupError, TypeError):
        return False


def run(argv: list[str]) -> Optional[int]:
    """Run ``botec estimate`` as the typer command would and return its exit code, or None (nothing done) when
    :func:`estimate_args` leaves the command line to typer. A :class:`botec.errors.UserError` propagates, for
    :func:`botec.cli.main` to print."""
    kwargs = estimate_args(argv)
    if kwargs is None:
        return None
    try:
        estimate_report(**kwargs)
    except KeyboardInterrupt:  # as typer: exit 130, nothing printed
        return 130
    except EOFError:
        echo("", err=True)
        raise Interrupted() from None
    except OSError as error:
        import errno

        if error.errno != errno.EPIPE:
            raise
        sys.stdout, sys.stderr = _Pacified(sys.stdout), _Pacified(sys.stderr)
        return 1
    return 0


class Interrupted(Exception):
    """End of input inside the command: :func:`botec.cli.main` says "interrupted" (typer raises its Abort)."""


class _Pacified:
    """A stream whose flush ignores a broken pipe (click's PacifyFlushWrapper): the interpreter's last flush of
    stdout into a closed pipe must not print a traceback."""

    def __init__(self, wrapped) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()
        except OSError as error:
            import errno

            if error.errno != errno.EPIPE:
                raise

    def __getattr__(self, name):
        return getattr(self.wrapped, name)
