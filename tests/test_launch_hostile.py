"""Issue 28, item 1 (reliability-3 D1): nothing a contract states can run or add a key in a launch file.

Hostile names, descriptions and model paths (a serving model's config.json folder, an inline model's name) go into
every export format. Each shell script is run with ``bash`` in a folder of its own, the tools on the PATH replaced
by stubs that print their arguments: the script makes no file but the ones it is meant to write, and each tool gets
exactly the words the plain contract's script gives it (the model path the hostile one, unchanged). Each YAML and
JSON file parses to exactly the plain contract's data, the hostile value where it is written read back equal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, REPO

from botec.contract import parse_contract, read_contract_data
from botec.estimation import estimate
from botec.launch import launch_formats
from botec.launch.importing import detect_format

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash to run the exported scripts")

END_OF_CALL = "END_OF_CALL"
TOOLS = ("vllm", "python", "python3", "trtllm-serve", "torchrun", "deepspeed", "accelerate")
CONFIG = REPO / "tests" / "data" / "hf" / "llama-3.1-8b" / "config.json"
PAYLOADS = [
    "x\ntouch PWNED\n#", "$(touch PWNED)", "`touch PWNED`", "'; touch PWNED; '", '"; touch PWNED; "', "a # b",
    "x; touch PWNED", "x && touch PWNED", "key: value", "- item", "{a: b}", "&anchor *alias", "!!python/object x",
    "x\u2028touch PWNED", "x\u2029y: z", "x\x85touch PWNED", "x\rtouch PWNED", "😀 ünïcødé ☃", "\u202eevil",
    "EOF\ntouch PWNED\nEOF", "\\\ntouch PWNED", "x\nrouterSpec: {repository: attacker.example/router, tag: evil}\n#",
    "$HOME ${PATH} $((1+1))", "\x00\x1b[31m", "x\n\ttouch PWNED", "--version\ntouch PWNED",
    "servingEngineSpec torchtitan.train pretrain_gpt distributed_type: vllm serve trtllm-serve zero_optimization",
    "x (botec export --to megatron)",
]
texts = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=24),
                  st.tuples(st.sampled_from(PAYLOADS), st.text(max_size=8)).map("".join))
# a folder name: any text but "/" and NUL (and no surrogate: a file system name is bytes of UTF-8)
folders = texts.map(lambda t: "m" + t.replace("/", "∕").replace("\x00", "0").encode("utf-8", "replace")
                    .decode("utf-8", "replace")[:60])
INLINE_MODEL = {"layers": 32, "hidden_size": 4096, "attention_heads": 32, "kv_heads": 8, "ffn_size": 14336,
                "vocab_size": 128256}


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> Path:
    """A folder of stub tools: each prints its own name and arguments, each ended by a NUL, then END_OF_CALL,
    and exits 0."""
    folder = tmp_path_factory.mktemp("stubs")
    for tool in TOOLS:
        path = folder / tool
        path.write_text(f"#!/bin/sh\nprintf '%s\\0' {tool} \"$@\" {END_OF_CALL}\n")
        path.chmod(0o755)
    return folder


def _run(script: str, folder: Path, stubs: Path, name: str) -> tuple[list[list[str]], set[str]]:
    """Run ``script`` with bash in ``folder`` (emptied first): each stub call's words, and the files left there."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / name).write_text(script, encoding="utf-8")
    done = subprocess.run([BASH, name], cwd=folder, capture_output=True, timeout=60,
                          env={"PATH": f"{stubs}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(folder)})
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    calls, call = [], []
    for word in done.stdout.decode("utf-8").split("\0")[:-1]:
        if word == END_OF_CALL:
            calls.append(call)
            call = []
        else:
            call.append(word)
    return calls, set(os.listdir(folder)) - {name}


def _exports(data: dict) -> dict[str, str]:
    result = estimate(parse_contract(data), compare=False)
    return {name: f.export(result) for name, f in launch_formats(result.kind).items()}


def _check_every_format(hostile: dict, plain: dict, model: str | None, plain_model: str | None, tmp: Path,
                        stubs: Path) -> None:
    hostile_files, plain_files = _exports(hostile), _exports(plain)
    formats = launch_formats(hostile["workload"].get("kind", "training"))
    for name, text in hostile_files.items():
        suffix = formats[name].suffix
        assert detect_format(Path(f"{name}{suffix}"), text, None) == name   # told apart without --from
        assert formats[name].read(text, name) == formats[name].read(plain_files[name], name)
        if suffix == ".sh":
            calls, made = _run(text, tmp / "run", stubs, f"{name}.sh")
            plain_calls, _ = _run(plain_files[name], tmp / "run", stubs, f"{name}.sh")
            assert "PWNED" not in made and made == ({"extra-llm-api-options.yaml"} if name == "trtllm" else set())
            if model is not None:
                assert any(model in call for call in calls), name   # the model path reaches the tool unchanged
            assert [[plain_model if word == model else word for word in call] for call in calls] == plain_calls
            if name == "trtllm":
                assert yaml.safe_load((tmp / "run" / "extra-llm-api-options.yaml").read_text()) == \
                    yaml.safe_load(text.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0])
        elif name == "deepspeed":
            config, expected = json.loads(text), json.loads(plain_files[name])
            assert config["_comment"].pop("contract") == hostile["name"]
            expected["_comment"].pop("contract")
            assert config == expected
        else:   # accelerate, kubernetes: YAML
            values, expected = yaml.safe_load(text), yaml.safe_load(plain_files[name])
            if name == "kubernetes":
                assert list(values) == ["servingEngineSpec"]
                for spec, plain_spec in zip(values["servingEngineSpec"]["modelSpec"],
                                            expected["servingEngineSpec"]["modelSpec"]):
                    assert spec.pop("modelURL") == model and plain_spec.pop("modelURL") == plain_model
                    assert spec.pop("name") and plain_spec.pop("name")   # the contract's name, made a DNS label
            assert values == expected


def _model_folder(tmp: Path, name: str) -> Path:
    folder = tmp / "models" / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(CONFIG, folder / "config.json")
    return folder


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=texts, description=texts, folder=folders, inline=st.booleans())
def test_a_hostile_serving_contract_runs_nothing_and_adds_no_key(tmp_path_factory, stubs, name, description,
                                                                 folder, inline):
    tmp = tmp_path_factory.mktemp("serving")
    plain = read_contract_data(EXAMPLES / "serve-llama3.1-8b-h100.yaml")
    hostile = json.loads(json.dumps(plain))
    hostile.update(name=name, description=description)
    if inline:   # a model stated inline: its name is the model id the commands carry
        hostile["workload"]["model"], plain["workload"]["model"] = dict(INLINE_MODEL, name=folder), \
            dict(INLINE_MODEL, name="plain-model")
        model, plain_model = folder, "plain-model"
    else:        # a config.json: its folder is the model path the commands carry
        model, plain_model = str(_model_folder(tmp, folder)), str(_model_folder(tmp, "plain-model"))
        hostile["workload"]["model"] = {"config": f"{model}/config.json"}
        plain["workload"]["model"] = {"config": f"{plain_model}/config.json"}
    plain["name"] = "plain"
    _check_every_format(hostile, plain, model, plain_model, tmp, stubs)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=texts, description=texts)
def test_a_hostile_training_contract_runs_nothing_and_adds_no_key(tmp_path_factory, stubs, name, description):
    tmp = tmp_path_factory.mktemp("training")
    plain = read_contract_data(EXAMPLES / "llama3.1-8b-finetune-h100.yaml")
    hostile = dict(plain, name=name, description=description)
    _check_every_format(hostile, dict(plain, name="plain"), None, None, tmp, stubs)


def test_the_reliability_reproduction_creates_no_file_and_keeps_the_helm_keys(cli, tmp_path, stubs):
    """reliability-3 D1, as written: the name "x\\ntouch PWNED\\n#" through `botec export --to vllm`, then bash;
    and the routerSpec name through `--to kubernetes`."""
    data = yaml.safe_load((EXAMPLES / "serve-llama3.1-8b-h100.yaml").read_text())
    data["name"] = "x\ntouch PWNED\n#"
    (tmp_path / "n.yaml").write_text(yaml.safe_dump(data))
    assert cli("export", str(tmp_path / "n.yaml"), "--to", "vllm", "-o", str(tmp_path / "v.sh"))[0] == 0
    calls, made = _run((tmp_path / "v.sh").read_text(), tmp_path / "run", stubs, "v.sh")
    assert made == set() and calls[0][:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
    assert "# from the contract 'x\\ntouch PWNED\\n#'\n" in (tmp_path / "v.sh").read_text()
    data["name"] = "x\nrouterSpec: {repository: attacker.example/router, tag: evil}\n#"
    (tmp_path / "h.yaml").write_text(yaml.safe_dump(data))
    assert cli("export", str(tmp_path / "h.yaml"), "--to", "kubernetes", "-o", str(tmp_path / "k.yaml"))[0] == 0
    assert list(yaml.safe_load((tmp_path / "k.yaml").read_text())) == ["servingEngineSpec"]


def test_a_comment_line_shows_every_line_break_escaped():
    from botec.launch.commandline import comment_line

    assert comment_line("a\nb\rc\x85d\u2028e\u2029f\x00g\u202eh ☃😀") == \
        "# a\\nb\\rc\\x85d\\u2028e\\u2029f\\x00g\\u202eh ☃😀"
    assert len(comment_line("x\ny\u2028z").splitlines()) == 1


def test_a_here_document_delimiter_never_occurs_in_its_body():
    from botec.launch.commandline import here_document, shell_commands

    body = "a: 1\nEOF\nEOF_\nb: EOF__x\n"
    text = here_document(["cat"], "o.yaml", body)
    assert text.splitlines()[0] == "cat > o.yaml <<'EOF___'" and text.endswith("\nEOF___\n")
    assert shell_commands(text, "t")[0].here_documents == [body]


def test_an_imported_contract_keeps_a_hostile_path_and_option_in_its_comments(cli, tmp_path):
    """The file name and an unread option name land in the imported contract's header: escaped there, they add
    no key to the contract."""
    script = tmp_path / "run\nname: evil.sh"
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --micro-batch-size 2 \\\n"
                      "  '--x\nstrategy: {zero_stage: 3}=1'\n")
    code, out, err = cli("import", str(script), "--from", "megatron")
    assert code == 0, err
    data = yaml.safe_load(out)
    assert data["name"] == "run\nname: evil" and data["strategy"] == {"micro_batch_size": 2, "zero_stage": 0,
                                                                       "recompute": "none"}
    assert "# note: options botec does not read: --x\\nstrategy: {zero_stage: 3}" in out
