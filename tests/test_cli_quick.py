"""`botec estimate` without typer (botec.cli.quick): the same bytes and exit codes as the typer command, and what
it leaves to typer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import LESSON, LLAMA, REPO, run_cli

from botec.cli import quick

# (arguments after `estimate`, expected exit code): every one read by the quick path
CASES = [
    ([], 0),
    (["-f", "json"], 0),
    (["--format=markdown", "--units", "binary"], 0),
    ([str(LESSON), "--set", "supply.count=8", "--set=strategy.micro_batch_size=1", "-f", "json"], 0),
    (["--details", "--units=binary"], 0),
    ([str(LLAMA), "-f", "markdown"], 0),
    (["--set", "strategy.micro_batch_size=64"], 2),  # does not fit
    (["--set", "strategy.micro_batch_size=64", "--allow-misfit", "-f", "json"], 0),
    (["--set", "supply.count=abc"], 2),  # a bad --set
    (["no-such-contract.yaml"], 2),
]


def _both(args, capsys, monkeypatch):
    """(exit code, stdout, stderr) of `botec estimate ARGS` by the quick path and by the typer command."""
    assert quick.estimate_args(["botec", "estimate", *args]) is not None  # the quick path reads it
    fast = run_cli(["estimate", *args], capsys)
    with monkeypatch.context() as patch:
        patch.setattr(quick, "estimate_args", lambda argv: None)
        typer_path = run_cli(["estimate", *args], capsys)
    return fast, typer_path


@pytest.mark.parametrize("args,code", CASES, ids=[" ".join(args) or "(none)" for args, _ in CASES])
def test_quick_path_prints_what_the_typer_command_prints(args, code, capsys, monkeypatch):
    fast, typer_path = _both(args, capsys, monkeypatch)
    assert fast == typer_path
    assert fast[0] == code
    if code:
        assert fast[1] == "" and fast[2].startswith("botec: error: ") and fast[2].count("\n") == 1
    else:
        assert len(fast[1]) > 1000


def test_quick_path_writes_the_same_file(tmp_path, capsys, monkeypatch):
    target = tmp_path / "e.md"
    args = ["-f", "markdown", "-o", str(target), "--set", "supply.count=8"]
    assert quick.estimate_args(["botec", "estimate", *args]) is not None
    fast = run_cli(["estimate", *args], capsys)
    written_fast = target.read_text(encoding="utf-8")
    target.unlink()
    with monkeypatch.context() as patch:
        patch.setattr(quick, "estimate_args", lambda argv: None)
        typer_path = run_cli(["estimate", *args], capsys)
    assert fast == typer_path == (0, "", f"wrote {target}\n")
    assert target.read_text(encoding="utf-8") == written_fast
    assert "8 accelerators" in written_fast or "× 8" in written_fast


def test_quick_path_reads_the_options():
    read = quick.estimate_args(["botec", "estimate", "job.yaml", "-f", "json", "--units=binary", "--set", "a.b=1",
                                "--set=c.d=2", "-o", "-", "--allow-misfit", "--details", "--force"])
    assert read == {"contract": quick.Path("job.yaml"), "format": "json", "system": "binary",
                    "overrides": ["a.b=1", "c.d=2"], "output": quick.Path("-"), "allow_misfit": True,
                    "details": True, "force": True}
    assert quick.estimate_args(["botec", "estimate"]) == {
        "contract": None, "format": "text", "system": "decimal", "overrides": [], "output": None,
        "allow_misfit": False, "details": False, "force": False}


@pytest.mark.parametrize("args", [
    ["-h"], ["--help"], ["--uncertainty"], ["--bogus"], ["-f", "json", "-f", "text"], ["-fjson"], ["-f", "JSON"],
    ["--units", "metric"], ["a.yaml", "b.yaml"], ["--set"], ["-o"], ["--set", "--details"], ["--details=yes"],
    ["--"], ["-"], ["--seed", "1"], ["--output="],
])
def test_anything_else_is_left_to_typer(args):
    assert quick.estimate_args(["botec", "estimate", *args]) is None


def test_left_to_typer_keeps_its_help_and_errors(capsys):
    code, out, err = run_cli(["estimate", "-h"], capsys)
    assert code == 0 and "--uncertainty" in out and err == ""
    code, out, err = run_cli(["estimate", "-f", "json", "-f", "yaml"], capsys)
    assert (code, out) == (2, "") and err.startswith("botec: error: estimate: ") and "yaml" in err
    assert quick.estimate_args(["botec", "report"]) is None and quick.estimate_args(["botec"]) is None


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)


def test_import_botec_cli_does_not_import_typer():
    done = _python("import sys, botec.cli; print(sorted(m for m in ('typer', 'click', 'rich', 'botec.cli.common',"
                   " 'botec.cli.commands', 'pydantic') if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[]\n"
    done = _python("import botec.cli, typer; print(isinstance(botec.cli.app, typer.Typer))")
    assert done.stdout == "True\n", done.stderr


MAIN = ("import sys; sys.argv = ['botec', *sys.argv[1:]]\n"
        "if sys.argv[-1] == 'TYPER':\n"
        "    import botec.cli.quick as quick; quick.estimate_args = lambda argv: None; sys.argv.pop()\n"
        "from botec.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    print('typer imported' if 'typer' in sys.modules else 'no typer', file=sys.stderr)\n")


@pytest.mark.parametrize("args", [["estimate"], ["estimate", "-f", "json", "--set", "supply.count=16"]])
def test_a_whole_process_prints_the_same_without_typer(args):
    fast, slow = _python(MAIN, *args), _python(MAIN, *args, "TYPER")
    assert (fast.returncode, fast.stdout) == (slow.returncode, slow.stdout) == (0, slow.stdout)
    assert fast.stderr == "no typer\n" and slow.stderr == "typer imported\n"
    assert len(fast.stdout) > 1000
