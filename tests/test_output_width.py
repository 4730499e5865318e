"""Every command's text output fits 100 columns, piped or on a terminal, and a narrower width (COLUMNS, a
terminal's own) wraps it at word boundaries: never inside a word, never inside a number (issue 28, item 6).

One mechanism serves them all (:mod:`botec.report.width`): each command is run in-process the way a pipe gets it
(capsys is not a terminal: :func:`botec.report.width.report_width` gives 100), at ``COLUMNS=80``, and unwrapped
(``REPORT_WIDTH`` raised to 10,000: the text before any line is broken), and the words of the 80-column run must
be the unwrapped run's words."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES, REPO, run_cli

SERVE = str(EXAMPLES / "serve-llama3.1-8b-h100.yaml")
FINETUNE = str(EXAMPLES / "llama3.1-8b-finetune-h100.yaml")
LOG = str(EXAMPLES / "logs" / "megatron-gpt3-175b.log")
BENCH = str(EXAMPLES / "benchmarks" / "vllm-llama3.1-8b-h100.json")

# Every command with a text output (the widest of each before this test: in the comment).
COMMANDS = {
    "estimate": ["estimate"],
    "estimate --details": ["estimate", str(EXAMPLES / "llama3.1-70b-pretrain.yaml"), "--details"],
    "estimate serving": ["estimate", SERVE],
    "estimate --uncertainty": ["estimate", "--uncertainty", "--deadline", "10 h", "--samples", "2000"],   # 250
    "explain": ["explain", "planned_device_bytes"],                                                      # 434
    "explain deep": ["explain", str(EXAMPLES / "llama3.1-70b-pretrain.yaml"), "step_seconds"],           # 1,015
    "explain --depth": ["explain", "planned_device_bytes", "--depth", "1"],
    "validate": ["validate"],                                                                             # 500
    "validate --list": ["validate", "--list"],
    "search": ["search", str(EXAMPLES / "gpt3-175b-search.yaml"), "--top", "3"],                         # 404
    "search serving": ["search", SERVE],
    "solve": ["solve", "--minimize", "supply.count", "--subject-to", "run_seconds <= 4 h"],
    "solve --find": ["solve", str(EXAMPLES / "llama2-70b-pretrain.yaml"), "--find", "assumptions.end_to_end_mfu",
                     "--given", "accelerator_hours=1.72M"],
    "sweep": ["sweep", "--set", "supply.count=4,8,16,32", "--set", "strategy.micro_batch_size=1..8"],
    "sensitivity": ["sensitivity", "-q", "run_seconds"],
    "calibrate log": ["calibrate", str(EXAMPLES / "gpt3-175b-search.yaml"), LOG],                       # 296
    "calibrate serving": ["calibrate", SERVE, BENCH],                                                    # 342
    "catalog": ["catalog"],                                                                               # 296
    "model --list": ["model", "--list"],
    "model": ["model", "deepseek-v3"],                                                                    # 213
    "model --lora-rank": ["model", "llama-3.1-8b", "--lora-rank", "16", "--lora-targets", "all-linear"],
    "simulate": ["simulate", SERVE, "--requests", "2000"],                                                # 165
    "simulate --seeds": ["simulate", SERVE, "--requests", "1000", "--seeds", "2", "--workers", "1"],
    "recipes": ["recipes", str(EXAMPLES / "llama2-7b-fsdp-offload-a10g.yaml")],
    "study": ["study", str(EXAMPLES / "studies" / "llama-8b-accelerators.yaml"), "-o", "{tmp}/runs.csv",
              "--workers", "1"],
    "export": ["export", FINETUNE, "--to", "all", "-o", "{tmp}/launch", "--force"],
    "import": ["import", "{tmp}/launch/megatron.sh", "--base", FINETUNE, "-o", "{tmp}/job.yaml"],
    "init": ["init", "{tmp}/my-job.yaml", "--model", "llama-3.1-8b", "--count", "8", "--force"],
}
# What changes from one run to the next, left out of the comparison of words: a search's own speed.
VOLATILE = re.compile(r"; [\d.,]+ (?:ms|µs|s) \([\d,]+ candidates/s\)")
# A rule under a table's header: as long as the table, which the width sets.
_RULE = re.compile(r"^[─━═\-]+$")


def _run(args, capsys, tmp_path, monkeypatch, columns: str | None, unwrapped: bool = False):
    import botec.report.width as width

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(width, "REPORT_WIDTH", 10_000 if unwrapped else 100)
    monkeypatch.chdir(tmp_path)   # the files a command writes, named relative to here
    if args[0] == "import":   # its input is what export writes
        run_cli(["export", FINETUNE, "--to", "all", "-o", "launch", "--force"], capsys)
    code, out, err = run_cli([a.replace("{tmp}/", "") for a in args], capsys)
    assert code == 0, err[-2000:]
    # a note or an error on stderr is one line whatever its length (the house rule: grep finds it whole)
    return out, "\n".join(line for line in err.splitlines() if not line.startswith("botec: "))


def _words(text: str) -> list[str]:
    """The words of ``text``: what whitespace separates, a table's rules, a shell line's ``\\`` continuation and the
    punctuation a row of a table too narrow for its words joins its cells with (``column: cell;``) left out, a
    search's speed too."""
    words = VOLATILE.sub("", " ".join(text.split())).split()
    return [word.rstrip(";:") for word in words if not _RULE.match(word) and word not in ("\\", ";", ":")]


@pytest.mark.parametrize("name", COMMANDS)
def test_piped_output_is_at_most_100_columns_and_80_wraps_at_words(name, capsys, tmp_path, monkeypatch):
    args = COMMANDS[name]
    piped, piped_err = _run(args, capsys, tmp_path, monkeypatch, None)
    narrow, narrow_err = _run(args, capsys, tmp_path, monkeypatch, "80")
    whole, _ = _run(args, capsys, tmp_path, monkeypatch, None, unwrapped=True)
    if name in ("study", "export", "import", "init"):   # files written; their messages are what a user reads
        piped, narrow, whole = piped_err, narrow_err, whole + _
    assert piped.strip(), "prints something"
    assert [line for line in piped.splitlines() if len(line) > 100] == []
    assert [line for line in narrow.splitlines() if len(line) > 80] == []
    known = set(_words(whole))
    too_long = [word for word in known if len(word) > 70]   # a URL longer than a line: the one word cut
    assert [word for word in _words(narrow) if word not in known and not any(word in w for w in too_long)] == []
    lines = narrow.splitlines()
    broken = [(a, b) for a, b in zip(lines, lines[1:]) if a.split() and b.split()
              and (a.split()[-1] + b.split()[0]) in known and (a.split()[-1] + b.split()[0]) not in too_long
              and not (a.split()[-1] in known and b.split()[0] in known)]
    assert broken == []


def test_the_word_check_catches_a_number_broken_over_two_lines():
    """The check above on the defect it is for: ``simulate`` once printed ``5,\\n223 tokens/s``."""
    known = set(_words("throughput: 5,223 tokens/s output"))
    lines = ["throughput: 5,", "223 tokens/s output"]
    assert "223" not in known
    assert (lines[0].split()[-1] + lines[1].split()[0]) in known


def test_a_line_wraps_at_spaces_and_hangs_four_columns_deeper():
    from botec.report.width import wrap

    line = "  ✔ serving: TTFT 88.9 ms (P90) at the fleet's load, target 0.5 s; floor 24.2 ms"
    assert wrap(line, 40).splitlines() == ["  ✔ serving: TTFT 88.9 ms (P90) at the",
                                           "      fleet's load, target 0.5 s; floor", "      24.2 ms"]
    assert wrap("throughput 5,223 tokens/s", 20).splitlines() == ["throughput", "    5,223 tokens/s"]
    assert wrap("short\n\n  kept", 20) == "short\n\n  kept"
    # a word longer than a whole line (a URL) is the one thing cut, at the width
    assert wrap("see https://example.com/" + "x" * 30, 20).splitlines() == [
        "see https://example.", "    com/xxxxxxxxxxxx", "    xxxxxxxxxxxxxxxx", "    xx"]


def test_a_number_keeps_its_unit_on_its_line():
    from botec.report.width import wrap

    assert wrap("= 16 GB + 2.15 GB + 2 GB = 20.1 GB", 16).splitlines() == [
        "= 16 GB +", "    2.15 GB +", "    2 GB =", "    20.1 GB"]   # not "= 16 GB + 2.15" over "GB + 2 GB ="
    assert wrap("the share is 23.4 % of the step", 16).splitlines() == ["the share is", "    23.4 % of", "    the step"]


def test_the_width_is_100_at_most_and_a_narrow_terminal_its_own(monkeypatch):
    from botec.report.width import report_width

    monkeypatch.delenv("COLUMNS", raising=False)
    assert report_width() == 100 and report_width(sys.stdout) == 100        # a pipe (capsys is not a terminal)
    for columns, width in (("80", 80), ("250", 100), ("12", 40), ("", 100), ("wide", 100)):
        monkeypatch.setenv("COLUMNS", columns)
        assert report_width() == width, columns


def test_a_table_too_narrow_for_its_words_is_printed_a_row_a_line():
    import io

    from rich.console import Console

    from botec.report.tables import rich_table
    from botec.report.width import print_table

    table = rich_table("Cases")
    for column in ("case", "metric", "targets"):
        table.add_column(column)
    table.add_row("serve-mlperf-v41-llama2-70b-offline", "offline_output_tokens_per_s_per_accelerator", "met")
    for width, expected in ((100, ["Cases", "", " case" + " " * 34 + "metric" + " " * 40 + "targets"]),
                            (72, ["Cases", "  case: serve-mlperf-v41-llama2-70b-offline",
                                  "      metric: offline_output_tokens_per_s_per_accelerator; targets: met"])):
        buffer = io.StringIO()
        console = Console(file=buffer, width=width, highlight=False, color_system=None)
        print_table(console, table if width == 100 else _copy(table))   # (print_table fits the table it prints)
        assert [line.rstrip() for line in buffer.getvalue().splitlines()][:len(expected)] == expected


def _copy(table):
    from botec.report.tables import rich_table

    again = rich_table("Cases")
    for column in table.columns:
        again.add_column(column.header)
    again.add_row(*(list(column.cells)[0] for column in table.columns))
    return again


@pytest.mark.parametrize("columns, widest", [(200, 100), (70, 70)])
def test_on_a_terminal_the_output_takes_its_width_up_to_100(columns, widest, tmp_path):
    """Through a pseudo-terminal of ``columns``: `botec explain` (plain text) and `botec catalog` (tables)."""
    import fcntl
    import pty
    import struct
    import termios

    environment = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    for command in (["explain", "planned_device_bytes"], ["catalog"]):
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        process = subprocess.Popen([sys.executable, "-m", "botec.cli", *command], stdin=subprocess.DEVNULL,
                                   stdout=follower, stderr=subprocess.PIPE, cwd=REPO, env=environment)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert process.wait(timeout=120) == 0, process.stderr.read()
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8"))
        lines = text.replace("\r\n", "\n").splitlines()
        assert max(map(len, lines)) <= widest and max(map(len, lines)) >= widest - 25, command
