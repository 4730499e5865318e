"""The README says what botec prints: its quick commands run, their shown outputs and the figures in
their comments are what botec prints now, it cites only files in the repository, and its Python
snippet runs (issue 14, item 7). Findings are compared line by line, whitespace normalized; the
tables' layout is left to the report's own tests."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from pathlib import PurePath

import pytest

from conftest import REPO, run_cli

README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(heading: str) -> str:
    """The README's text from ``heading`` to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = README.index(f"\n{heading}\n")
    following = re.search(rf"\n#{{1,{len(level)}}} ", README[start + 1:])
    return README[start: start + 1 + following.start()] if following else README[start:]


def _blocks(text: str, language: str = "") -> list[str]:
    """The fenced blocks of ``text`` opened with ```` ```language ````, in order."""
    blocks, current, opened = [], None, None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, opened = [], line[3:].strip()
            else:
                if opened == language:
                    blocks.append("\n".join(current) + "\n")
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _squash(text: str) -> str:
    return " ".join(text.split())


# The first five minutes and the fine-tuning commands, up to the step model's details.
QUICK = README[README.index("\n## Five minutes with botec\n"): README.index("\n### How a training step is predicted")]


def _commands() -> list[tuple[str, str]]:
    """(command, its comment) for every ``botec ...`` line of the quick sections' shell blocks."""
    found = []
    for block in _blocks(QUICK, "sh"):
        lines = block.replace("\\\n", " ").splitlines()
        for line in lines:
            command, _, comment = line.partition("#")
            if command.startswith("botec "):
                found.append((_squash(command), comment.strip()))
            elif line.lstrip().startswith("#") and found:  # what the command above prints, shown below it
                found[-1] = (found[-1][0], f"{found[-1][1]} {comment.strip()}")
    return found


# Figures the README's comments claim, checked in what the command prints (each must be in the comment too).
CLAIMS = {
    "botec estimate examples/llama2-70b-pretrain.yaml": ["1.72M A100-hours"],
    "botec estimate examples/llama2-70b-pretrain.yaml --set supply.count=10000": ["7.16 days", "9.27 days expected"],
    "botec estimate -f json | jq '.quantities[] | select(.name==\"run_seconds\").value'": ["31250.0"],
    "botec estimate --set strategy.micro_batch_size=16": ["at most 7 fit"],
    "botec model deepseek-v3": ["671B total", "37.6B active per token"],
    "botec estimate examples/llama3.1-70b-pretrain.yaml": ["TP 8 + SP × CP 1 × PP 4 × DP 32", "128 DGX H100 nodes"],
    "botec estimate examples/llama3.1-70b-pretrain.yaml --set strategy.tensor_parallel=16":
        ["the tensor-parallel collectives cross the inter-node tier", "keep TP within a node"],
    "botec explain planned_device_bytes": ["25.2 GB"],
    "botec estimate examples/llama3.1-70b-pretrain.yaml --set workload.model=llama-3.1-405b --set supply.count=16384 "
    "--set strategy.pipeline_parallel=16 --allow-misfit": ["7, 8 × 14, 7"],
    "botec model llama-3.1-8b --lora-rank 16 --lora-targets all-linear":
        ["trainable params: 41,943,040 || all params: 8,072,204,288 || trainable%: 0.5196"],
}
# How a claim reads in botec's output when the comment words it for people.
SAID_AS = {"9.27 days expected": "expected wall time 9.27 days", "671B total": "(671B)",
           "1.72M A100-hours": "1.72M accelerator-hours",
           "37.6B active per token": "active per token 37,552,297,472 (37.6B)"}
SKIPPED = ("botec measure", "botec serve", "botec model path/to/")  # their own tests; a placeholder path


@pytest.fixture
def in_scratch(tmp_path, monkeypatch):
    """Run where the README's relative paths resolve, writing files into a scratch folder."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_quick_sections_have_the_commands_the_test_checks():
    commands = dict(_commands())
    assert len(commands) >= 15
    for command, claims in CLAIMS.items():
        assert command in commands, command
        for claim in claims:
            assert claim in _squash(commands[command].replace("#", "")), (command, claim)


@pytest.mark.parametrize("command, comment", [c for c in _commands() if not c[0].startswith(SKIPPED)],
                         ids=lambda value: value[:70] if isinstance(value, str) else value)
def test_quick_command_runs_and_prints_what_its_comment_says(command, comment, in_scratch, capsys):
    out = ""
    for part in command.split(" && "):
        part = part.split(" | ")[0].split(" > ")[0]  # jq and redirections: botec's own output is checked
        code, stdout, stderr = run_cli(shlex.split(part)[1:], capsys)
        expected = 2 if "exit 2" in comment else 0
        assert code == expected, f"{part}: exit {code}\n{stderr[-2000:]}"
        out += stdout + stderr
    for claim in CLAIMS.get(command, []):
        assert _squash(SAID_AS.get(claim, claim)) in _squash(out), (command, claim)


def test_explain_block_is_what_botec_explain_prints(capsys):
    shown = _blocks(_section("## Five minutes with botec"))[0]
    code, out, err = run_cli(["explain", "planned_device_bytes"], capsys)
    assert code == 0, err
    printed = [_squash(line) for line in out.splitlines()]
    position = 0
    for line in shown.splitlines():
        if line.strip() == "...":
            continue
        assert _squash(line) in printed[position:], line
        position = printed.index(_squash(line), position) + 1


def test_findings_block_is_what_botec_estimate_prints(capsys):
    section = _section("## Five minutes with botec")
    shown = _blocks(section[section.index("Its findings"):])[0]
    code, out, err = run_cli(["estimate"], capsys)
    assert code == 0, err
    findings = [line for line in shown.splitlines() if line.strip() and line.strip() != "Findings"]
    assert len(findings) == 8
    printed = _squash(out)
    for line in findings:
        assert _squash(line) in printed, line


def test_readme_cites_only_files_in_the_repository():
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
                  .stdout.splitlines())
    folders = {str(parent) for name in tracked for parent in PurePath(name).parents}
    assert "shared/" not in README
    cited = set(re.findall(r"`((?:examples|src|tests|benchmarks|seeds|shared|docs)/[^`\s]*)`", README))
    assert cited, "the README cites repository files"
    missing = [path for path in cited if path.rstrip("/") not in tracked | folders and "*" not in path]
    assert missing == []


def test_python_snippet_runs_and_prints_what_its_comments_say(monkeypatch, capsys):
    pytest.importorskip("pandas")
    monkeypatch.chdir(REPO)
    source = _blocks(_section("### From Python and notebooks"), "python")[0]
    lines = source.splitlines()
    namespace: dict = {}
    checked = 0
    for statement in ast.parse(source).body:
        code = ast.get_source_segment(source, statement)
        if not isinstance(statement, ast.Expr):
            exec(compile(code, "README.md", "exec"), namespace)
            continue
        value = eval(compile(code, "README.md", "eval"), namespace)
        comment = lines[statement.end_lineno - 1].partition("  # ")[2]
        for candidate in (comment, comment.split(": ")[0], comment.split(" (")[0]):
            try:
                claimed = ast.literal_eval(candidate)
            except (ValueError, SyntaxError):
                continue
            assert value == claimed, code
            checked += 1
            break
    assert checked >= 5
    assert "planned_device_bytes = (allocated_device_bytes" in capsys.readouterr().out  # the explain line printed


# Every quoted output block of the README (a fence with no language), in order, and the command whose run it
# quotes (the one shown above it), or why it is not a run's output. A block added to the README must be added here.
QUOTED_OUTPUTS = [
    ("explain", "planned_device_bytes"),                                 # test_explain_block_is_what_botec_explain_prints
    ("estimate",),                                                       # the lesson's findings
    ("estimate", "examples/serve-llama3.1-8b-h100.yaml"),                 # the serving findings
    ("simulate", "examples/serve-llama3.1-8b-h100.yaml"),                 # the verdicts, seeded
    "an error's wording for a contract the README does not show (tests/test_errors*.py hold the wording)",
    "errors of a hypothetical job.yaml (the misfit line is the --set strategy.micro_batch_size=16 command's)",
    "the source tree, not an output",
]
# Numbers in a quoted output may drift this far from a run before the README must be regenerated: the words and
# the units must be the same (a prefix that changes, 980 ms for 1.02 s, is a difference).
RELATIVE_TOLERANCE = 0.02
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _drift(shown: str, printed: str) -> str | None:
    """None when the ``shown`` line (whitespace squashed) is in ``printed`` (squashed) with its words and units as
    they are and every number within :data:`RELATIVE_TOLERANCE`; else what differs."""
    shown = _squash(shown)
    pattern = "".join(re.escape(text) + (r"(\d[\d,]*(?:\.\d+)?)" if index < len(numbers) else "")
                      for numbers in [_NUMBER.findall(shown)]
                      for index, text in enumerate(_NUMBER.split(shown)))
    match = re.search(pattern, printed)
    if match is None:
        return f"no line of this shape: {shown}"
    for claimed, ran in zip(_NUMBER.findall(shown), match.groups()):
        a, b = float(claimed.replace(",", "")), float(ran.replace(",", ""))
        if abs(a - b) > RELATIVE_TOLERANCE * max(abs(a), abs(b)):
            return f"{claimed} shown, {ran} printed: {shown}"
    return None


def test_drift_compares_numbers_within_the_tolerance_and_words_exactly():
    printed = _squash("  ✔ serving: TTFT 88.9 ms (P90) at the fleet's load, target 0.5 s;\n      floor 24.2 ms")
    assert _drift("✔ serving: TTFT 88.9 ms (P90) at the fleet's load, target 0.5 s; floor 24.2 ms", printed) is None
    assert _drift("✔ serving: TTFT 88 ms (P90) at the fleet's load, target 0.5 s; floor 24.2 ms", printed) is None
    assert _drift("✔ serving: TTFT 51 ms (P90) at the fleet's load", printed) == \
        "51 shown, 88.9 printed: ✔ serving: TTFT 51 ms (P90) at the fleet's load"
    assert _drift("✔ serving: TTFT 88.9 s (P90)", printed).startswith("no line of this shape")
    assert _drift("21 requests fit", _squash("20 requests fit")) == "21 shown, 20 printed: 21 requests fit"


def test_every_quoted_output_block_is_registered():
    assert len(_blocks(README)) == len(QUOTED_OUTPUTS)


@pytest.mark.parametrize("index", [i for i, entry in enumerate(QUOTED_OUTPUTS) if isinstance(entry, tuple)])
def test_a_quoted_output_is_what_its_command_prints(index, in_scratch, capsys):
    """Each line of the block (but "..." and the titles) appears in the run's output: the same words, numbers
    within 2 %; the command is the one shown above the block."""
    args = QUOTED_OUTPUTS[index]
    block = _blocks(README)[index]
    above = README[:README.index(block)]
    assert re.search(r"botec " + re.escape(" ".join(args)) + r"(\s|$)", above[-3000:]), "shown above the block"
    code, out, err = run_cli(list(args), capsys)
    assert code == 0, err[-2000:]
    printed = _squash(out + err)
    shown = [line for line in block.splitlines() if line.strip() and line.strip() not in ("...", "Findings")]
    # a finding or a derivation wraps over lines: a line that hangs further in continues the one above it
    joined: list[str] = []
    for line in shown:
        if joined and index != 0 and len(line) - len(line.lstrip()) > 2:
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    assert [_drift(line, printed) for line in joined] == [None] * len(joined)
