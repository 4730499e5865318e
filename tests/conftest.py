"""Shared helpers: run the CLI in-process, load the examples, evaluate the reference workload."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
LESSON = EXAMPLES / "lesson-finetune-1b.yaml"
LLAMA = EXAMPLES / "llama2-70b-pretrain.yaml"


def run_cli(args: list[str], capsys, monkeypatch=None) -> tuple[int, str, str]:
    """Run ``botec ARGS`` through the real entry point; return (exit code, stdout, stderr)."""
    from botec.cli import main

    old_argv = sys.argv
    sys.argv = ["botec", *args]
    code = 0
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = old_argv
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def cli(capsys):
    return lambda *args: run_cli(list(args), capsys)


@pytest.fixture(scope="session")
def lesson():
    from botec.estimate import estimate_file

    return estimate_file(LESSON)


def write(tmp_path: Path, text: str, name: str = "contract.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path
