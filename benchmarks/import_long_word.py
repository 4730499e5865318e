"""How long `botec import` takes on a Megatron-LM launch script with one very long shell word: CPU seconds.

The script is ``botec export examples/llama3.1-70b-pretrain.yaml --to megatron`` with ``--x WORD`` added after
``--num-layers 80`` (reliability-3 D4: the old reader, ``shlex``, built each word a character at a time, so one
word was quadratic: 100 KB 0.50 CPU s, 300 KB 1.64 s, 900 KB 12.7 s). Shapes:

- ``word``: one word of letters, unquoted;
- ``quoted``: the same inside single quotes;
- ``short``: as many bytes of short options (``--x0 ab --x1 ab ...``: many words, each an option botec does not
  read, listed in a note);

Each row gives the CPU seconds (``time.process_time``) of the reader in this process (``botec.launch.megatron``'s
``read``, the tokenizer :func:`botec.launch.commandline.shell_commands` included) and of the whole command
``botec import SCRIPT`` in a fresh process (``resource.getrusage(RUSAGE_CHILDREN)``, start-up included). With
``--shlex`` it also times ``shlex.split`` on the same text, the old reader's core.

Issue 28's target: linear in the word's length, 900 KB well under 1 CPU s.

    .venv/bin/python benchmarks/import_long_word.py [--kilobytes 100 300 900] [--shape word quoted short] [--shlex]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONTRACT = REPO / "examples" / "llama3.1-70b-pretrain.yaml"

SHAPES = {
    "word": lambda n: "a" * n,
    "quoted": lambda n: "'" + "a" * n + "'",
    "short": lambda n: " ".join(f"--x{i} ab" for i in range(max(1, n // 12))),
}


def command_cpu_seconds(script: Path) -> tuple[float, int, str]:
    """CPU seconds of ``botec import SCRIPT`` in a fresh process, its exit code and its last stderr line."""
    botec = [sys.executable, "-c", "from botec.cli import main; main()"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(botec + ["import", str(script)], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def reader_cpu_seconds(text: str) -> tuple[float, str]:
    """CPU seconds of the Megatron reader on ``text`` in this process, and what it said ("ok" or the error)."""
    from botec.errors import ContractError
    from botec.launch.megatron import read

    start = time.process_time()
    try:
        read(text, "l.sh")
        said = "ok"
    except ContractError as error:
        said = str(error)[:60]
    return time.process_time() - start, said


def shlex_cpu_seconds(text: str) -> float:
    import shlex

    start = time.process_time()
    shlex.split(text.replace("\\\n", " "), comments=True)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilobytes", type=float, nargs="+", default=[100, 300, 900])
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=["word", "quoted", "short"])
    parser.add_argument("--shlex", action="store_true", help="also time shlex.split (the old reader's core)")
    arguments = parser.parse_args()
    from botec.estimation import estimate_file
    from botec.launch import launch_format

    exported = launch_format("megatron").export(estimate_file(CONTRACT))
    assert "--num-layers 80" in exported
    print(f"{'shape':<8} {'kB':>6} {'reader cpu s':>13} {'command cpu s':>14} {'exit':>5}"
          + (f" {'shlex cpu s':>12}" if arguments.shlex else "") + "  said")
    with tempfile.TemporaryDirectory() as folder:
        for shape in arguments.shape:
            for kilobytes in arguments.kilobytes:
                text = exported.replace("--num-layers 80", "--num-layers 80 --x " +
                                        SHAPES[shape](int(kilobytes * 1000)))
                script = Path(folder) / "l.sh"
                script.write_text(text)
                reader, said = reader_cpu_seconds(text)
                command, code, _ = command_cpu_seconds(script)
                old = f" {shlex_cpu_seconds(text):>12.2f}" if arguments.shlex else ""
                print(f"{shape:<8} {kilobytes:>6g} {reader:>13.3f} {command:>14.2f} {code:>5}{old}  {said}")


if __name__ == "__main__":
    main()
