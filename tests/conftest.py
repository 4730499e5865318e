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
    from botec.estimation import estimate_file

    return estimate_file(LESSON)


def write(tmp_path: Path, text: str, name: str = "contract.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# The tiny CPU contract the measuring tests run (and whose measurement `tests/data/measurement-tiny-cpu.json`
# holds): two layers of width 128 on "this CPU"; COUNT is the number of processes.
TINY_CPU_CONTRACT = """
name: tiny-cpu
workload:
  model: {layers: 2, hidden_size: 128, attention_heads: 4, kv_heads: 2, ffn_size: 344, vocab_size: 1024}
  tokens: 10M
  sequence_length: 128
supply:
  accelerator: {name: this CPU, peak_flops_per_s: 10 TFLOP/s, memory: 16 GB}   # above any CPU: an MFU below 1
  count: COUNT
  network: {bandwidth: 1 GB/s}
  storage: {write_bandwidth: 500 MB/s}
strategy:
  micro_batch_size: 4
  optimizer: adam-fp32
  checkpoint: {interval: 10 min}
assumptions:
  step_time_model: efficiency
  activation_model: saved_tensor_factor
  single_accelerator_mfu: 0.3
  scaling_efficiency: 0.9
"""


def tiny_cpu_contract(count: int = 1) -> str:
    """The tiny CPU contract's text for ``count`` accelerators (processes)."""
    return TINY_CPU_CONTRACT.replace("COUNT", str(count))


def key_paths(node, prefix=()):
    """Every key path of a contract's mapping, sections included (a fuzz may delete or rename a whole section)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from key_paths(value, prefix + (key,))


def parent_of(document, path):
    """The mapping that holds the last key of ``path``."""
    for key in path[:-1]:
        document = document[key]
    return document
