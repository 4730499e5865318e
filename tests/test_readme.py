"""The README runs as written (issue 28, item 6): every command of its shell blocks runs (each file it only names
stood in for by a stated placeholder), every figure its comments quote is what the command prints, every quoted
output block is what its ``$ botec ...`` lines print (the same words, each number within the rounding shown),
every YAML block is a whole contract that estimates (its quoted figures checked) or a fragment marked as one on
its first line (``# a fragment of examples/X.yaml``: estimated merged into X), its Python snippet prints what its
comments say, and it cites only files in the repository.

What may not run here is a short, named list (:data:`SKIPPED`), each with the reason."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path, PurePath

import pytest

from conftest import REPO, run_cli, tiny_cpu_contract

README = (REPO / "README.md").read_text(encoding="utf-8")


# --- reading the README ---------------------------------------------------------------------------------------

def _fences(text: str = README) -> list[tuple[str, str, int]]:
    """Every fenced block of ``text``: (its language, its text, the offset of its opening fence), in order."""
    found, current, language, start = [], None, "", 0
    offset = 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, language, start = [], line[3:].strip(), offset
            else:
                found.append((language, "".join(current), start))
                current = None
        elif current is not None:
            current.append(line)
        offset += len(line)
    return found


def _section(heading: str) -> str:
    """The README's text from ``heading`` to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    start = README.index(f"\n{heading}\n")
    following = re.search(rf"\n#{{1,{len(level)}}} ", README[start + 1:])
    return README[start: start + 1 + following.start()] if following else README[start:]


def _squash(text: str) -> str:
    return " ".join(text.split())


def _commands() -> list[tuple[str, str]]:
    """(command, its comment) for every command line of the README's shell blocks, continuations joined; a
    comment line under a command continues its comment."""
    found: list[list[str]] = []
    for language, block, _ in _fences():
        if language != "sh":
            continue
        for line in block.replace("\\\n", " ").splitlines():
            command, _, comment = line.partition("#")
            if command.strip():
                found.append([_squash(command), comment.strip()])
            elif line.lstrip().startswith("#") and found:
                found[-1][1] = f"{found[-1][1]} {comment.strip()}".strip()
    return [(command, comment) for command, comment in found]


# --- what may not run here, and the files the README only names --------------------------------------------------

SKIPPED = {
    "source .venv/bin/activate": "the shell's own command (this test runs in that environment)",
    "make demo": "makes a virtual environment and installs botec (what `.ci/run` does)",
    "make test": "the whole suite, this test included",
    "torchrun --nproc_per_node=2": "two processes over gloo; tests/test_measure.py runs the data-parallel measure",
    "botec serve": "a web server: tests/test_web.py and tests/test_web_server.py drive it",
}
# A file a command reads that the README names without shipping it: what this test puts there.
PLACEHOLDERS = {
    "job.yaml": lambda: tiny_cpu_contract(1),           # "your contract": the tiny CPU one, fast to measure
    "run.json": lambda: (REPO / "tests/data/measurement-tiny-cpu.json").read_text(),   # `botec measure job.yaml`'s
    "serve.yaml": None,                                  # written first by `botec init serve.yaml --serving`
    "my-run.json": lambda: (REPO / "examples/benchmarks/vllm-llama3.1-8b-h100.json").read_text(),
    "path/to/config.json": lambda: (REPO / "tests/data/hf/llama-3.1-8b/config.json").read_text(),
    "typo.yaml": lambda: (REPO / "examples/lesson-finetune-1b.yaml").read_text().replace("memory: 32 GB",
                                                                                          "memory: 32 GX"),
}
_WRITES = {"-o", "--output", "--html", "--csv", ">"}


def _scratch(tmp_path: Path, command: str) -> Path:
    """A folder where the README's relative paths resolve (``examples/``) and its placeholders are in place (those
    the command reads, not those it writes)."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "benchmarks").symlink_to(REPO / "benchmarks")
    words = shlex.split(command.replace(" && ", " ; "))
    written = {word for before, word in zip(words, words[1:]) if before in _WRITES}
    written |= {words[i + 2] for i, word in enumerate(words[:-2]) if word == "botec" and words[i + 1] == "init"}
    for name, content in PLACEHOLDERS.items():
        if name in words and name not in written:
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if content is None:   # written by botec itself
                run_cli(["init", str(path), "--serving"], _Quiet())
            else:
                path.write_text(content(), encoding="utf-8")
    return tmp_path


class _Quiet:
    """A capsys stand-in for a set-up call whose output no test reads."""

    def readouterr(self):
        import collections

        return collections.namedtuple("Captured", "out err")("", "")


# --- comparing what the README shows with what botec prints ---------------------------------------------------------

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _half_step(number: str) -> float:
    """Half the last shown digit's step: ``25.2`` is 25.15 to 25.25, ``61,036`` ± 0.5."""
    return 0.5 * 10 ** -len(number.partition(".")[2])


def _drift(shown: str, printed: str, whole: bool = False) -> str | None:
    """None when ``shown`` (whitespace squashed) is in ``printed`` (or, ``whole``, is all of it) with the same words
    and units and each number the other rounded (to the fewer digits either shows); else what differs."""
    shown = _squash(shown)
    numbers = _NUMBER.findall(shown)
    pattern = "".join(re.escape(text) + (r"(\d[\d,]*(?:\.\d+)?)" if index < len(numbers) else "")
                      for index, text in enumerate(_NUMBER.split(shown)))
    matches = [re.fullmatch(pattern, printed)] if whole else list(re.finditer(pattern, printed))
    if not any(matches):
        return f"no line of this shape: {shown}"
    differences = []
    for match in filter(None, matches):   # the first place of this shape whose numbers agree
        for claimed, ran in zip(numbers, match.groups()):
            a, b = float(claimed.replace(",", "")), float(ran.replace(",", ""))
            if abs(a - b) > max(_half_step(claimed), _half_step(ran)) * (1 + 1e-9):   # one is the other rounded
                differences.append(f"{claimed} shown, {ran} printed: {shown}")
                break
        else:
            return None
    return differences[0]


def test_drift_compares_numbers_within_their_rounding_and_words_exactly():
    printed = _squash("  ✔ serving: TTFT 88.9 ms (P90) at the fleet's load, target 0.5 s;\n      floor 24.2 ms")
    assert _drift("✔ serving: TTFT 88.9 ms (P90) at the fleet's load, target 0.5 s; floor 24.2 ms", printed) is None
    assert _drift("✔ serving: TTFT 89 ms (P90) at the fleet's load", printed) is None        # 88.9 rounds to 89
    assert _drift("✔ serving: TTFT 88 ms (P90)", printed) == "88 shown, 88.9 printed: ✔ serving: TTFT 88 ms (P90)"
    assert _drift("✔ serving: TTFT 88.9 s (P90)", printed).startswith("no line of this shape")
    assert _drift("21 requests fit", _squash("20 requests fit")) == "21 shown, 20 printed: 21 requests fit"
    assert _drift("fits: 25.2 GB", "fits: 25.2 GB planned", whole=True).startswith("no line")


def _logical_lines(text: str) -> list[str]:
    """The lines of an output with each wrapped line joined to the one it continues (a line that starts 4 or more
    columns deeper than the line it follows: botec's hanging indent), whitespace squashed."""
    joined: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if joined and indent >= joined[-1][0] + 4:
            joined[-1] = (joined[-1][0], f"{joined[-1][1]} {line.strip()}")
        else:
            joined.append((indent, line.strip()))
    return [_squash(text) for _, text in joined]


def _run(command: str, scratch: Path, capsys, expected: int = 0) -> str:
    """Run a README command line (``a && b``, a pipe into ``jq`` or a ``> file`` included) in ``scratch``; return
    what it printed, stdout then stderr, and the text of the files it wrote with -o."""
    out = ""
    for part in command.split(" && "):
        botec_part, _, piped = part.partition(" | ")
        botec_part, _, redirected = botec_part.partition(" > ")
        words = shlex.split(botec_part)
        assert words[0] == "botec", part
        code, stdout, stderr = run_cli(words[1:], capsys)
        assert code == expected, f"{part}: exit {code}, expected {expected}\n{stderr[-2000:]}"
        if redirected:
            (scratch / redirected.strip()).write_text(stdout, encoding="utf-8")
        if piped:
            stdout = _jq(piped, stdout)
        out += stdout + stderr
        for before, word in zip(words, words[1:]):
            target = scratch / word
            if before in ("-o", "--output") and target.is_file():
                out += target.read_text(encoding="utf-8", errors="replace")
    return out


def _jq(filter_command: str, stdout: str) -> str:
    """``jq FILTER`` on the output, as the README pipes it; where jq is not installed, the filter the README uses
    (a quantity's value) taken from the JSON and printed as jq prints a number (31250.0 as 31250)."""
    words = shlex.split(filter_command)
    assert words[0] == "jq"
    if shutil.which("jq"):
        return subprocess.run(words, input=stdout, capture_output=True, text=True, check=True).stdout
    from botec.jsonfile import load_json_text

    name = re.search(r'select\(\.name=="(\w+)"\)\.value', words[1]).group(1)
    value = next(q["value"] for q in load_json_text(stdout, "botec estimate -f json")["quantities"]
                 if q["name"] == name)
    return (f"{int(value)}" if float(value).is_integer() else repr(value)) + "\n"


# --- the shell blocks: every command runs, and prints what its comment says -----------------------------------------

# The figures a command's comment quotes, each as botec prints it (a list: every item is checked in the output, its
# numbers within the rounding shown; a function: given the output and the folder, whether it holds).
CLAIMS = {
    "botec estimate": {"1B params": ["1B parameters"], "1B tokens": ["tokens 1B tokens"],
                       "4 × 32 GB": ["lesson accelerator × 4", "device_memory_bytes 32 GB"]},
    "botec explain planned_device_bytes": {"25.2 GB": ["= 25.2 GB"]},
    "botec estimate examples/llama2-70b-pretrain.yaml": {"1.72M A100-hours": ["1.72M accelerator-hours"]},
    "botec estimate examples/llama2-70b-pretrain.yaml --set supply.count=10000":
        {"7.16 days": ["7.16 days on 10,000 accelerators"], "10.2 days expected": ["expected wall time 10.2 days"]},
    "botec estimate -f json | jq '.quantities[] | select(.name==\"run_seconds\").value'":
        {"31250": lambda out, _: out.split("\n")[0] == "31250"},
    "botec estimate --set strategy.micro_batch_size=16": {"at most 7 fit": ["at most 7 fit"]},
    "botec model deepseek-v3": {"671B total": ["(671B)"], "37.6B active per token": ["active per token "
                                                                                    "37,552,297,472 (37.6B)"]},
    "botec estimate examples/llama3.1-70b-pretrain.yaml": {"TP 8 + SP × CP 1 × PP 4 × DP 32":
                                                           ["TP 8 + SP × CP 1 × PP 4 × DP 32"],
                                                           "128 DGX H100 nodes": ["128 DGX H100 nodes"]},
    "botec estimate examples/llama3.1-8b-finetune-h100.yaml": {
        "8 × H100": ["(h100-sxm) × 8"], "413 TFLOP/s per GPU": ["model_flops_per_s_per_accelerator 413 TFLOP/s"],
        "MFU 0.42": ["achieved MFU 0.418"]},
    "botec estimate examples/llama3.1-70b-pretrain.yaml --set strategy.tensor_parallel=16":
        {"the tensor-parallel collectives cross the inter-node tier": ["the tensor-parallel collectives cross the "
                                                                        "inter-node tier"],
         "keep TP within a node": ["keep TP within a node"]},
    "botec estimate examples/llama3.1-70b-pretrain.yaml --set workload.model=llama-3.1-405b --set supply.count=16384 "
    "--set strategy.pipeline_parallel=16 --allow-misfit": {"126 layers": ["126 layers"],
                                                          "16 stages: 7, 8 × 14, 7": ["PP 16 (stages of 7, 8 × 14, 7 "
                                                                                      "layers)"]},
    "botec export examples/llama3.1-8b-finetune-h100.yaml --to torchtitan -o train.sh":
        {"torchtitan 0.3.0": ["torchtitan 0.3.0"]},
    "botec export examples/serve-llama3.1-8b-h100.yaml --to vllm": {"`vllm serve` (0.33.0)": ["vLLM 0.33.0",
                                                                                             "vllm serve"]},
    "botec study examples/studies/llama-8b-accelerators.yaml -o runs.csv --html summary.html": {
        "18 simulations": lambda out, folder: len((folder / "runs.csv").read_text().splitlines()) == 1 + 18,
        "H100, H200 × 10, 20, 30 requests/s × 3 seeds": lambda out, folder: _study_grid(folder / "runs.csv") == (
            {"h100-sxm", "h200"}, {10.0, 20.0, 30.0}, 3),
        "95 % CI": lambda out, folder: "95 %" in (folder / "summary.html").read_text()},
    "botec estimate examples/llama3.1-8b-qlora-rtx4090.yaml": {"24 GB RTX 4090": ["RTX 4090 24 GB (rtx-4090) × 1"],
                                                               "4,096 tokens": ["4,096 tokens"]},
    "botec model llama-3.1-8b --lora-rank 16 --lora-targets all-linear":
        {"trainable params: 41,943,040 || all params: 8,072,204,288 || trainable%: 0.5196":
         ["trainable params: 41,943,040 || all params: 8,072,204,288 || trainable%: 0.5196"]},
    "botec estimate examples/llama2-7b-fsdp-offload-a10g.yaml": {"8 × A10G": ["(a10g) × 8"]},
    "botec estimate examples/llama3-405b-16k-gpu-failures.yaml": {"16,384 H100s": ["(h100-sxm) × 16,384"]},
    "botec estimate examples/serve-lesson-7b.yaml": {"14.5 GB of weights fit": ["weights take 14.5 GB"],
                                                     "at 4k contexts 20 requests do": [
                                                         "at 4,096 cached tokens held per running request 20 "
                                                         "requests fit"]},
    "botec simulate examples/serve-llama3.1-8b-h100.yaml": {"10,000 requests": ["10,000 requests"]},
    "botec simulate examples/serve-llama3.1-8b-h100.yaml --concurrency 64 --replicas 1": {
        "64 users": ["10,000 requests from 64 users in a closed loop"]},
    "botec solve --minimize supply.count --subject-to \"run_seconds <= 4 h\"": {"9 accelerators":
                                                                               ["supply.count = 9"]},
    "botec solve --maximize strategy.micro_batch_size --subject-to fits": {"7 sequences":
                                                                          ["strategy.micro_batch_size = 7"]},
    "botec search examples/gpt3-175b-search.yaml --top 5": {"161,280 candidate layouts": ["161,280 candidate layouts"],
                                                            "each with its command": ["botec estimate "
                                                                                      "examples/gpt3-175b-search.yaml"]},
    "botec estimate --uncertainty --deadline \"10 h\"": {"P10/P50/P90": ["P10", "P50", "P90"],
                                                        "chance to finish in time": ["chance the run finishes within "
                                                                                     "10 h"]},
}
# Numbers in comments that are not figures botec prints: what each is.
NOT_FIGURES = {
    "botec estimate examples/llama2-70b-pretrain.yaml": ["lesson 004"],                          # a lesson's number
    "botec model path/to/config.json": ["Qwen2", "GPT-2", "DeepSeek-V3"],                         # models' names
    "botec estimate examples/llama3.1-8b-qlora-rtx4090.yaml": ["Llama-3.1-8B"],
    "botec model deepseek-v3": ["MTP apart"],
    "botec solve examples/llama3.1-8b-qlora-rtx4090.yaml --maximize workload.sequence_length --subject-to fits":
        ["multiples of 128", "1024..65536/64"],                                                   # the grid tried
    "botec simulate examples/serve-llama3.1-8b-h100.yaml --rate inf --replicas 1 -f json": ["t = 0"],
    "botec simulate examples/serve-llama3.1-8b-h100.yaml --seeds 4 --workers 2": [],
    "botec serve": ["127.0.0.1:8765"],
}


def _study_grid(path: Path) -> tuple[set, set, int]:
    """The accelerators, rates and seeds per cell of a study's tidy CSV."""
    import csv

    rows = list(csv.DictReader(path.open()))
    cells = {(row["supply.accelerator"], row["rate_requests_per_s"]) for row in rows}
    return ({row["supply.accelerator"] for row in rows}, {float(row["rate_requests_per_s"]) for row in rows},
            len(rows) // len(cells))


def _expected_code(comment: str) -> int:
    found = re.search(r"\bexit (\d)\b", comment)
    return int(found.group(1)) if found else 0


def _skipped(command: str) -> str | None:
    return next((why for prefix, why in SKIPPED.items() if command.startswith(prefix)), None)


def test_the_shell_blocks_hold_the_commands_the_claims_name():
    commands = dict(_commands())
    assert len(commands) >= 60
    for command, claims in CLAIMS.items():
        assert command in commands, command
        for claim in claims:
            assert claim in _squash(commands[command]), (command, claim)


def test_every_figure_in_a_comment_is_checked_or_said_not_to_be_one():
    """A number in a command's comment is part of a claim checked against the output, the exit code the comment
    names, or a stated non-figure (a lesson's number, a model name, the grid a solver tries)."""
    unchecked = []
    for command, comment in _commands():
        covered = list(CLAIMS.get(command, {})) + NOT_FIGURES.get(command, [])
        text = re.sub(r"\bexit \d\b", "", comment)
        for span in covered:
            text = text.replace(span, "")
        if _skipped(command) is None and _NUMBER.search(text):
            unchecked.append((command, text))
    assert unchecked == []


@pytest.mark.parametrize("command, comment", [c for c in _commands() if _skipped(c[0]) is None],
                         ids=lambda value: value[:70] if isinstance(value, str) else value)
def test_a_command_runs_and_prints_what_its_comment_says(command, comment, tmp_path, monkeypatch, capsys):
    assert command.startswith("botec "), f"{command}: neither run here nor in SKIPPED"
    if command.startswith("botec calibrate") or command.startswith("botec measure"):
        pytest.importorskip("numpy")
    if command.startswith("botec measure"):
        pytest.importorskip("torch")
    scratch = _scratch(tmp_path, command)
    monkeypatch.chdir(scratch)
    out = _run(command, scratch, capsys, _expected_code(comment))
    for claim, said in CLAIMS.get(command, {}).items():
        if callable(said):
            assert said(out, scratch), (command, claim)
            continue
        for text in said:
            assert _drift(text, _squash(out)) is None, (command, claim, _drift(text, _squash(out)))


def test_the_skipped_commands_are_in_the_readme():
    shown = [command for command, _ in _commands()]
    for prefix in SKIPPED:
        assert any(command.startswith(prefix) for command in shown), prefix


# --- the quoted outputs: each `$ botec ...` line's output, as shown -------------------------------------------------

# A fence with no language that is not an output: what it is instead.
NOT_OUTPUTS = {"src/botec/": "the source tree"}


def _quoted_runs() -> list[tuple[int, str, list[str]]]:
    """(block, command, its shown lines) for every ``$ botec ...`` line of the quoted output blocks."""
    runs = []
    for index, (language, block, _) in enumerate(_fences()):
        if language or any(block.startswith(start) for start in NOT_OUTPUTS):
            continue
        assert block.startswith("$ botec "), f"an output block opens with its command: {block[:80]}"
        for part in re.split(r"^\$ ", block.replace("\\\n", ""), flags=re.M)[1:]:
            command, _, shown = part.partition("\n")
            runs.append((index, _squash(command), shown.splitlines()))
    return runs


def test_every_quoted_output_block_names_its_command():
    assert len(_quoted_runs()) >= 8


@pytest.mark.parametrize("index, command, shown", _quoted_runs(), ids=lambda value: value[:60]
                         if isinstance(value, str) else None)
def test_a_quoted_output_is_what_its_command_prints(index, command, shown, tmp_path, monkeypatch, capsys):
    """Each shown line (a wrapped line joined to the one it continues) is a line of the run's output, in order, with
    the same words and each number within the rounding shown; ``...`` stands for lines left out, and where it is
    absent the lines follow each other."""
    if command.startswith("botec simulate"):
        pytest.importorskip("numpy")
    scratch = _scratch(tmp_path, command)
    monkeypatch.chdir(scratch)
    error = "botec: error:" in "\n".join(shown)
    printed = _logical_lines(_run(command, scratch, capsys, 2 if error else 0))
    position, adjacent = 0, True
    for line in _logical_lines("\n".join(shown)):
        if line == "...":
            adjacent = False
            continue
        where = [i for i in range(position, len(printed)) if _drift(line, printed[i], whole=True) is None]
        assert where, f"{command}: {line}\n  nearest: {[_drift(line, p, whole=True) for p in printed[position:]][:3]}"
        assert adjacent is False or position == 0 or where[0] == position, f"{command}: a line left out before {line}"
        position, adjacent = where[0] + 1, True


# --- the YAML blocks: a contract estimates, a fragment says it is one ------------------------------------------------

# The figures the sentence introducing a whole contract quotes, by the contract's name: as its estimate prints them.
CONTRACT_CLAIMS = {
    "lesson-finetune-1b": {"25.2 GB planned per accelerator": ["fits: 25.2 GB of 32 GB planned"],
                           "8.68 h on 4 accelerators": ["run: 8.68 h on 4 accelerators"]},
    "serve-llama3.1-8b-h100": {"2 replicas × 1 accelerator for 20 requests/s": [
        "2 replicas × 1 accelerator = 2 accelerators for 20 requests/s"], "$120 per day": ["$120 per day"]},
}
_FRAGMENT = re.compile(r"# a fragment of (examples/\S+\.yaml)")


def _yaml_blocks() -> list[tuple[str, str]]:
    """(the text before the block since the paragraph above it, the block) for every YAML block."""
    blocks = []
    for language, block, start in _fences():
        if language == "yaml":
            blocks.append((README[README.rindex("\n\n", 0, start - 1): start], block))
    return blocks


def _merged(base: dict, fragment: dict) -> dict:
    out = dict(base)
    for key, value in fragment.items():
        out[key] = _merged(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


@pytest.mark.parametrize("intro, block", _yaml_blocks(), ids=lambda value: value.strip()[:40])
def test_a_yaml_block_is_a_contract_that_estimates_or_a_marked_fragment(intro, block, tmp_path, capsys):
    from botec.yamlfile import parse_user_yaml

    fragment = _FRAGMENT.match(block)
    path = tmp_path / "contract.yaml"
    if fragment:
        base = parse_user_yaml((REPO / fragment.group(1)).read_text(encoding="utf-8"), fragment.group(1))
        merged = _merged(base, parse_user_yaml(block, "README.md"))
        path.write_text(json.dumps(merged), encoding="utf-8")
        path = path.rename(tmp_path / "contract.json")
    else:
        path.write_text(block, encoding="utf-8")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    code, out, err = run_cli(["estimate", str(path)], capsys)
    assert code == 0, err[-2000:]
    if fragment:
        return
    name = parse_user_yaml(block, "README.md")["name"]
    assert name in CONTRACT_CLAIMS, f"the figures around the contract {name} are checked: add them to CONTRACT_CLAIMS"
    for claim, said in CONTRACT_CLAIMS[name].items():
        assert claim in _squash(intro), (name, claim)
        for text in said:
            assert _drift(text, _squash(out)) is None, (name, _drift(text, _squash(out)))


def test_the_lesson_block_is_the_reference_contract():
    """The README's lesson contract is `examples/lesson-finetune-1b.yaml` field for field (it once lacked the
    lesson's step-time and activation methods and gave 28.2 GB, not 25.2 GB)."""
    from botec.yamlfile import parse_user_yaml

    block = next(block for _, block in _yaml_blocks() if block.startswith("name: lesson-finetune-1b"))
    shipped = (REPO / "examples/lesson-finetune-1b.yaml").read_text(encoding="utf-8")
    assert parse_user_yaml(block, "README.md") == parse_user_yaml(shipped, "examples/lesson-finetune-1b.yaml")


def test_every_yaml_block_is_checked():
    blocks = _yaml_blocks()
    assert len(blocks) == 3
    assert sum(bool(_FRAGMENT.match(block)) for _, block in blocks) == 1


# --- the Python snippet and the files cited -------------------------------------------------------------------------

def test_python_snippet_runs_and_prints_what_its_comments_say(monkeypatch, capsys):
    """Each expression's repr is its comment's literal, as a notebook or a REPL prints it (``np.float64(...)`` is
    not ``25184354560.0``)."""
    pytest.importorskip("pandas")
    monkeypatch.chdir(REPO)
    source = next(block for language, block, _ in _fences() if language == "python")
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
            assert repr(value) == repr(claimed), code
            checked += 1
            break
    assert checked >= 5
    assert "planned_device_bytes = (allocated_device_bytes" in capsys.readouterr().out  # the explain line printed


def test_readme_cites_only_files_in_the_repository():
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
                  .stdout.splitlines())
    tracked |= {str(path.relative_to(REPO)) for path in (REPO / "src").rglob("*.py")}   # written, not yet committed
    folders = {str(parent) for name in tracked for parent in PurePath(name).parents}
    assert "shared/" not in README
    cited = set(re.findall(r"`((?:examples|src|tests|benchmarks|seeds|shared|docs)/[^`\s]*)`", README))
    assert cited, "the README cites repository files"
    missing = [path for path in cited if path.rstrip("/") not in tracked | folders and "*" not in path]
    assert missing == []
