"""Issue 28, items 4 and 6 for `botec import` and `botec export` (reliability-3 D4, D6, D14, D15, D16, cosmetic 19):
the shell reader reads POSIX words in one linear pass (its speed: benchmarks/import_long_word.py), every count is
checked against the contract's bound before any arithmetic, an option stated twice is refused, no reader crashes
on deep nesting or 5,000 digits, `--to all` writes every file or none, botec's own files import without --from,
and `export --list` names the formats."""

from __future__ import annotations

import os
import shlex
import stat

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES

from botec.errors import ContractError
from botec.launch import FORMAT_MODULES, launch_format, launch_formats
from botec.launch.commandline import shell_commands, whole_number
from botec.launch.importing import detect_format

H100 = EXAMPLES / "llama3.1-8b-finetune-h100.yaml"
MEGATRON = "torchrun --nproc-per-node 8 --nnodes {nodes} pretrain_gpt.py --num-layers 80 {extra}\n"
DEEP = "[" * 100_000 + "]" * 100_000
DIGITS = "9" * 5000


def one_line_error(result) -> str:
    code, out, err = result
    assert code == 2, (code, out[:200], err)
    assert err.count("\n") == 1 and err.startswith("botec: error: ") and "Traceback" not in err, err
    return err


# --- the shell reader -----------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.text(min_size=1, max_size=12).filter(lambda w: "\x00" not in w), min_size=1, max_size=6))
def test_any_words_botec_quotes_read_back_as_themselves(words):
    """shlex.quote (the writer) then the reader: the same words, whatever they hold (newlines, quotes, $, #)."""
    text = "run " + " ".join(shlex.quote(word) for word in words) + "  # a comment\n"
    assert [command.words for command in shell_commands(text, "t")] == [["run", *words]]


def test_the_reader_follows_posix_quoting_continuations_comments_and_separators():
    text = ("#!/bin/bash\nexport A=1; B=2 torchrun \\\n  --x 'a b'\"c\\\"d\"e\\ f \\$g $HOME $(echo 1 \"(2)\") `id` "
            "a#b # gone\nnext 2>/dev/null && last <<'END' | tail\nbody $(not run)\nEND\n")
    commands = shell_commands(text, "t")
    assert [c.words for c in commands] == [
        ["export", "A=1"], ["B=2", "torchrun", "--x", 'a bc"de f', "$g", "$HOME", '$(echo 1 "(2)")', "`id`", "a#b"],
        ["next"], ["last"], ["tail"]]
    assert commands[1].line == 2 and commands[2].redirects == [(">", "/dev/null")]
    assert commands[3].here_documents == ["body $(not run)\n"]


@pytest.mark.parametrize(("text", "message"), [
    ("run 'open\n", "line 1: cannot read the shell syntax at \"'open\\n\""),
    ("a\nrun --x \"open\n", "line 2: cannot read the shell syntax"),
    ("run $(a $(b $(c)))\n", "$( nested more than two deep"),
    ("cat <<EOF\nbody\n", "line 1: the here-document <<EOF is not closed by a line EOF"),
    ("run >\n", "line 1: > names no file"),
])
def test_what_the_reader_cannot_read_is_one_line_naming_the_line(text, message):
    with pytest.raises(ContractError) as error:
        shell_commands(text, "s.sh")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_shell_syntax_is_named_as_not_expanded(cli, tmp_path):
    """reliability-3 cosmetic 19: `$NL` is not "a whole number", and botec says it does not expand it."""
    script = tmp_path / "m.sh"
    for value in ("$NL", "$(echo 80)", "`echo 80`"):
        script.write_text(f"NL=80\ntorchrun --nproc-per-node 8 pretrain_gpt.py --num-layers {shlex.quote(value)}\n")
        err = one_line_error(cli("import", str(script)))
        assert f"--num-layers: expected a whole number, got {value!r}: botec reads the file's text and expands no " \
               "shell syntax" in err


def test_two_commands_of_the_program_are_refused(cli, tmp_path):
    script = tmp_path / "m.sh"
    script.write_text(MEGATRON.format(nodes=1, extra="") + MEGATRON.format(nodes=2, extra=""))
    assert "lines 1 and 2 both run pretrain_gpt.py" in one_line_error(cli("import", str(script)))


# --- counts and repeated options (D16) ----------------------------------------------------------------------------

@pytest.mark.parametrize(("nodes", "extra", "message"), [
    (1, "--tensor-model-parallel-size 99999999999999999999",
     "--tensor-model-parallel-size: expected a whole number below 10^18 (the contract's bound), got one of 20 digits"),
    ("1:99999999999999999999", "", "torchrun --nnodes: expected a whole number below 10^18"),
    (1, "--tensor-model-parallel-size 1000000000000000000", "below 10^18 (the contract's bound), got "
                                                            "1000000000000000000"),
    (1, f"--hidden-size {DIGITS}", "--hidden-size: expected a whole number below 10^18 (the contract's bound), got "
                                   "one of 5,000 digits"),
    (200_000_000_000_000_000, "", "torchrun --nproc-per-node × torchrun --nnodes = 1.6e+18, at or above the "
                                  "contract's bound"),
    (1, "--global-batch-size 1000000 --seq-length 1000000 --train-iters 1000000",
     "--train-iters: --train-iters × --global-batch-size × --seq-length = 1e+18, at or above the contract's bound"),
    (1, "--num-layers 8000", "--num-layers: stated twice ('80' and '8000'); state it once"),
])
def test_every_count_is_bounded_before_arithmetic_and_stated_once(cli, tmp_path, nodes, extra, message):
    script = tmp_path / "m.sh"
    script.write_text(MEGATRON.format(nodes=nodes, extra=extra))
    assert message in one_line_error(cli("import", str(script), "-o", str(tmp_path / "out.yaml")))
    assert not (tmp_path / "out.yaml").exists()


def test_a_count_just_below_the_bound_makes_a_contract_that_reads(cli, tmp_path):
    """What import accepts, the contract accepts, and the reverse: the contract compares a count's float with
    10^18, so 10^18 − 1 (1e18 as a float) is refused by both and 999,999,999,999,999,872 (the largest double below
    10^18) passes both (estimate then judges the layout)."""
    from botec.contract import parse_contract

    script = tmp_path / "m.sh"
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --micro-batch-size 999999999999999999\n")
    assert "--micro-batch-size: expected a whole number below 10^18" in one_line_error(
        cli("import", str(script), "--base", str(H100)))
    script.write_text("torchrun --nproc-per-node 8 pretrain_gpt.py --micro-batch-size 999999999999999872 "
                      "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params\n")
    code, out, err = cli("import", str(script), "--base", str(H100))
    assert code == 0, err
    data = yaml.safe_load(out)
    assert data["strategy"]["micro_batch_size"] == 999_999_999_999_999_872
    parse_contract(data)


def test_whole_number_refuses_without_converting_a_huge_text():
    with pytest.raises(ContractError, match="got one of 5,000 digits"):
        whole_number(DIGITS, "f", "o")
    assert whole_number("+0008", "f", "o") == 8 and whole_number(2**53, "f", "o") == 2**53
    for bad in ("٣٢", "5_000", "8.0", True, "1e3"):
        with pytest.raises(ContractError, match="f: expected a whole number"):
            whole_number(bad, "f", "o")


@pytest.mark.parametrize(("name", "text", "message"), [
    ("vllm", "vllm serve m -tp 2 --tensor-parallel-size 4\n", "--tensor-parallel-size: stated twice ('2' and '4')"),
    ("sglang", "python -m sglang.launch_server --tp-size 2 --tensor-parallel-size 4\n", "--tp-size: stated twice"),
    ("trtllm", "trtllm-serve m --tp_size 2 --tp_size 2\n", "--tp_size: stated twice"),
    ("torchtitan", "torchrun --nproc-per-node 8 --nproc_per_node 4 -m torchtitan.train\n",
     "--nproc-per-node: stated twice"),
    ("torchtitan", "torchrun -m torchtitan.train activation-checkpoint:full activation-checkpoint:none\n",
     "activation-checkpoint: stated twice"),
])
def test_a_repeated_option_is_refused_naming_it(name, text, message):
    with pytest.raises(ContractError) as error:
        launch_format(name).read(text, "f")
    assert str(error.value).startswith(f"f: {message}") and str(error.value).endswith("; state it once")


# --- deep nesting and 5,000 digits to every reader (D6) -----------------------------------------------------------

TRTLLM = "cat > o.yaml <<'EOF'\n{body}\nEOF\ntrtllm-serve m --extra_llm_api_options o.yaml {extra}\n"
HOSTILE_FILES = {
    "deepspeed": ['{"zero_optimization": ' + DEEP + "}", '{"train_batch_size": ' + DIGITS + "}",
                  '{"train_micro_batch_size_per_gpu": "' + DIGITS + '"}'],
    "accelerate": ["distributed_type: FSDP\nfsdp_config: " + DEEP, "num_processes: " + DIGITS,
                   "num_processes: '" + DIGITS + "'", "distributed_type: FSDP\nfsdp_config: 3"],
    "kubernetes": ["servingEngineSpec: {modelSpec: " + DEEP + "}",
                   "servingEngineSpec:\n  modelSpec:\n  - {name: a, replicaCount: " + DIGITS + "}",
                   "servingEngineSpec:\n  modelSpec:\n  - {name: a, vllmConfig: {tensorParallelSize: '"
                   + DIGITS + "'}}",
                   "servingEngineSpec: [1]"],
    "trtllm": [TRTLLM.format(body="kv_cache_config: " + DEEP, extra=""),
               TRTLLM.format(body="speculative_config: {decoding_type: MTP, num_nextn_predict_layers: " + DIGITS + "}",
                             extra=""), TRTLLM.format(body="a: 1", extra="--tp_size " + DIGITS),
               TRTLLM.format(body="scheduler_config: [1]\nspeculative_config: {decoding_type: MTP, "
                                  "num_nextn_predict_layers: '3'}", extra="")],
    "vllm": ["vllm serve m --speculative-config '" + DEEP + "'",
             "vllm serve m --speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": " + DIGITS + "}'",
             "vllm serve m --eplb-config '" + DEEP + "'", "vllm serve m --eplb-config '{\"num_redundant_experts\": "
             + DIGITS + "}'", "vllm serve m --tensor-parallel-size " + DIGITS],
    "sglang": ["python -m sglang.launch_server --tp-size " + DIGITS, "python -m sglang.launch_server --tp-size '"
               + DEEP + "'"],
    "megatron": [MEGATRON.format(nodes=1, extra="--hidden-size '" + DEEP + "'"),
                 MEGATRON.format(nodes=DIGITS, extra="")],
    "torchtitan": ["torchrun --nproc-per-node 8 -m torchtitan.train --training.seq_len " + DIGITS,
                   "torchrun --nproc-per-node 8 -m torchtitan.train --training.seq_len '" + DEEP + "'"],
}


@pytest.mark.parametrize(("name", "index"), [(n, i) for n, files in HOSTILE_FILES.items() for i in range(len(files))])
def test_deep_nesting_and_huge_numbers_are_one_line_in_every_reader(cli, tmp_path, name, index):
    path = tmp_path / f"hostile{launch_format(name).suffix}"
    path.write_text(HOSTILE_FILES[name][index] + "\n")
    one_line_error(cli("import", str(path), "--from", name))


# --- export --to all: every file or none (D14) --------------------------------------------------------------------

def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("blocker", ["read-only", "directory"])
def test_export_all_writes_no_file_when_one_target_is_refused(cli, tmp_path, blocker):
    folder = tmp_path / "launch"
    folder.mkdir()
    target = folder / "megatron.sh"
    if blocker == "read-only":
        target.write_text("kept\n")
        target.chmod(0o444)
    else:
        target.mkdir()
    err = one_line_error(cli("export", str(H100), "--to", "all", "-o", str(folder)))
    assert f"{target}: " in err and ("read-only" in err if blocker == "read-only" else "it is a directory" in err)
    assert sorted(os.listdir(folder)) == ["megatron.sh"] and _leftovers(folder) == []
    if blocker == "read-only":
        assert target.read_text() == "kept\n" and not stat.S_IMODE(target.stat().st_mode) & 0o222
        assert cli("export", str(H100), "--to", "all", "-o", str(folder), "--force")[0] == 0
        assert sorted(os.listdir(folder)) == ["accelerate.yaml", "deepspeed.json", "megatron.sh", "torchtitan.sh"]
        assert target.read_text().startswith("#!/usr/bin/env bash\n# Megatron-LM")


# --- botec's own files, told without --from (D15) -----------------------------------------------------------------

def _kind(path) -> str:
    return (yaml.safe_load(path.read_text()).get("workload") or {}).get("kind", "training")


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_every_export_of_every_example_is_told_without_from(example):
    from botec.estimation import estimate_file

    result = estimate_file(EXAMPLES / example)
    formats = launch_formats(result.kind)
    assert len(formats) == 4
    for name, f in formats.items():
        assert detect_format(EXAMPLES / f"{name}{f.suffix}", f.export(result), None) == name, (example, name)


@pytest.mark.parametrize("name", ["vllm", "sglang", "trtllm", "kubernetes"])
def test_botec_import_reads_each_serving_export_without_from(cli, tmp_path, name):
    f = launch_format(name)
    exported = tmp_path / f"{name}{f.suffix}"
    engine = f.engines[0]   # a format writes only its own engine's contracts (tests/test_launch_engines.py)
    assert cli("export", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"), "--set", f"strategy.engine={engine}",
               "--to", name, "-o", str(exported))[0] == 0
    code, out, err = cli("import", str(exported))
    assert code == 0, err
    assert f"({name})" in out.splitlines()[0] and yaml.safe_load(out)["workload"]["model"] == "llama-3.1-8b"


@pytest.mark.parametrize(("text", "suffix", "name"), [
    ("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2\n", ".sh", "vllm"),
    ("python3 -m sglang.launch_server --model-path m --tp-size 2\n", ".sh", "sglang"),
    ("trtllm-serve m --tp_size 2\n", ".sh", "trtllm"),
    ("servingEngineSpec:\n  modelSpec:\n  - {name: m, modelURL: m}\n", ".yaml", "kubernetes"),
    ("distributed_type: FSDP\nnum_processes: 8\n", ".yaml", "accelerate"),
])
def test_hand_written_files_are_told_by_their_content(tmp_path, text, suffix, name):
    assert detect_format(tmp_path / f"job{suffix}", text, None) == name


# --- export --list and its help -----------------------------------------------------------------------------------

def test_export_list_names_every_format_with_its_kind_tool_and_version(cli):
    code, out, err = cli("export", "--list")
    assert code == 0, err
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    for name, f in launch_formats().items():
        assert any(line.split()[:2] == [name, f.kind] and f"{f.tool} {f.version} ({f.suffix})" in line
                   for line in lines), name
    assert "vllm        serving   vLLM 0.33.0 (.sh)" in lines
    assert "megatron    training  Megatron-LM core_v0.19.2 (.sh)" in lines


def test_export_help_names_the_formats_and_the_list(cli):
    code, out, _ = cli("export", "-h")
    flat = " ".join(out.replace("│", " ").split())
    assert code == 0 and "--list" in flat
    assert all(name in flat for name in FORMAT_MODULES)


def test_export_without_to_is_one_line_naming_the_formats(cli):
    err = one_line_error(cli("export", str(H100)))
    assert "--to: name the launch format (torchtitan, megatron, deepspeed, accelerate, vllm, sglang, trtllm, " \
           "kubernetes, or all); `botec export --list` describes them" in err
