"""Bounds before arithmetic (issue 28, reliability-3 D7 and D8): every count field of a contract, whatever form the
count takes (an int, a quoted string of digits, a float), is checked against the contract's one bound (below
10^18) and named when it is past it; a histogram whose weights overflow a float sum is still a histogram."""

from __future__ import annotations

import copy
import typing
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import BaseModel

from conftest import EXAMPLES, LESSON, run_cli

from botec.contract.serving import ServingContract
from botec.contract.training import TrainingContract

HUGE_STRING = "9" * 400          # D7: quoted in YAML, pydantic made it an int of 400 digits (OverflowError later)
HUGE_FLOAT = 1e300               # a whole float, 10^300: as far past the bound
ARCHITECTURE = {                 # an inline model with every optional architecture section, for its count fields
    "layers": 4, "hidden_size": 512, "attention_heads": 8, "kv_heads": 8, "head_dim": 64, "ffn_size": 1024,
    "vocab_size": 1000, "position_embeddings": 0, "mtp_layers": 0,
    "moe": {"experts": 8, "experts_per_token": 2, "expert_ffn_size": 256, "shared_experts": 0,
            "first_dense_layers": 0, "layer_frequency": 1},
    "mla": {"q_lora_rank": 64, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32},
}


def _leaves(annotation, in_list: bool = False):
    """(type, inside a list) for each type an annotation can hold (Optional, Union, Annotated, list unwrapped)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _leaves(args[0], in_list)
    elif origin is list:
        yield from _leaves(args[0], True)
    elif origin is dict:
        yield from _leaves(args[1], in_list)
    elif args and origin is not typing.Literal:
        for arg in args:
            yield from _leaves(arg, in_list)
    else:
        yield annotation, in_list


def integer_fields(model: type[BaseModel], prefix: str = "") -> set[tuple[str, bool]]:
    """(dotted path, is a list) of every field of ``model`` that holds a plain int, its sections walked."""
    found = set()
    for name, info in model.model_fields.items():
        for leaf, in_list in _leaves(info.annotation):
            if isinstance(leaf, type) and issubclass(leaf, BaseModel):
                found |= integer_fields(leaf, f"{prefix}{name}.")
            elif leaf is int:
                found.add((f"{prefix}{name}", in_list))
    return found


TRAINING_FIELDS = sorted(integer_fields(TrainingContract))
SERVING_FIELDS = sorted(integer_fields(ServingContract))


def test_the_walk_finds_the_count_fields_the_defects_named():
    """The fields of reliability-3 D7 and the fuzz are among those walked (a walk that found none would pass)."""
    training = {path for path, _ in TRAINING_FIELDS}
    serving = {path for path, _ in SERVING_FIELDS}
    assert {"strategy.context_parallel", "strategy.data_parallel", "strategy.lora.rank",
            "workload.model.moe.experts", "strategy.pipeline_stage_layers"} <= training
    assert {"strategy.disaggregation.prefill_instances", "strategy.disaggregation.prefill.expert_parallel",
            "assumptions.speculative_decoding.draft_tokens", "workload.traffic.burst_size"} <= serving
    assert len(training) >= 25 and len(serving) >= 30


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _bases(kind: str) -> list[dict]:
    """Contracts of ``kind`` whose sections hold every count field's parent: examples, one with the inline
    architecture above (MoE and MLA), one speculating."""
    if kind == "training":
        lesson = _load(LESSON)
        lesson["workload"]["model"] = copy.deepcopy(ARCHITECTURE)
        return [lesson, _load(EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml"), _load(EXAMPLES / "gpt3-175b-search.yaml")]
    serving = _load(EXAMPLES / "serve-deepseek-v3-sglang-96-h100.yaml")
    serving["workload"]["model"] = copy.deepcopy(ARCHITECTURE)
    serving.setdefault("assumptions", {})["speculative_decoding"] = {"draft_tokens": 4, "acceptance_rate": 0.7,
                                                                     "method": "ngram"}
    return [serving]


def _with(kind: str, path: str, value) -> dict:
    """The first base contract of ``kind`` holding ``path``'s section, with ``value`` at ``path``."""
    *parents, leaf = path.split(".")
    for base in _bases(kind):
        section = base
        for part in parents:
            section = section.get(part) if isinstance(section, dict) else None
        if isinstance(section, dict):
            section[leaf] = value
            return base
    raise AssertionError(f"no base contract holds the section of {path}")


CASES = [(kind, path, in_list, value) for kind, fields in (("training", TRAINING_FIELDS), ("serving", SERVING_FIELDS))
         for path, in_list in fields for value in (HUGE_STRING, HUGE_FLOAT)]


@pytest.mark.parametrize("kind, path, in_list, value", CASES,
                         ids=[f"{kind}-{path}-{'string' if isinstance(value, str) else 'float'}"
                              for kind, path, in_list, value in CASES])
def test_every_count_field_refuses_a_count_past_the_bound(kind, path, in_list, value, tmp_path, capsys):
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(_with(kind, path, [value] if in_list else value)), encoding="utf-8")
    code, out, err = run_cli(["estimate", str(contract)], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and "internal error" not in err, err
    # an architecture's counts have tighter bounds of their own, shared with config.json (botec.architecture.bounds)
    expected = "a whole number from " if path.startswith("workload.model.") else "a whole number below 10^18"
    assert f"{contract}: {path}" in err and expected in err, err


def test_a_count_just_below_the_bound_is_read_as_a_count_not_refused_by_it(tmp_path, capsys):
    """10^18 − 1, quoted: past the bound check (and refused later, by the layout, as no lesson divides it)."""
    data = _load(LESSON)
    data["strategy"]["tensor_parallel"] = str(10**18 - 1)
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, _, err = run_cli(["estimate", str(contract)], capsys)
    assert code == 2 and "below 10^18" not in err and "internal error" not in err, err


@pytest.mark.parametrize("example, path", [
    ("llama3-405b-16k-gpu-failures.yaml", "strategy.context_parallel"),     # reliability-3 D7, as it was found
    ("llama3.1-70b-pretrain.yaml", "strategy.pipeline_parallel"),
])
def test_a_sweep_refuses_a_quoted_huge_count_naming_it(example, path, tmp_path, capsys):
    data = _load(EXAMPLES / example)
    section, leaf = path.split(".")
    data[section][leaf] = HUGE_STRING
    contract = tmp_path / "contract.yaml"
    contract.write_text(yaml.safe_dump(data), encoding="utf-8")
    code, out, err = run_cli(["sweep", str(contract), "--set", "strategy.micro_batch_size=1,2"], capsys)
    assert code == 2 and out == "", err
    assert f"{contract}: {path}: expected a whole number below 10^18, got '999" in err and err.count("\n") == 1


def test_the_web_sweep_answers_422_naming_the_field_not_500():
    """The web fuzz's only HTTP 500 (reliability-3 D7): /api/sweep of the 405B contract with a quoted huge CP."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from botec.web.app import app

    text = (EXAMPLES / "llama3-405b-16k-gpu-failures.yaml").read_text(encoding="utf-8")
    assert "  context_parallel: 1\n" in text
    text = text.replace("  context_parallel: 1\n", f"  context_parallel: '{HUGE_STRING}'\n")
    response = TestClient(app, base_url="http://127.0.0.1").post(
        "/api/sweep", json={"contract": text, "axes": ["strategy.micro_batch_size=1,2"]})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "strategy.context_parallel" and error["message"].startswith(
        "expected a whole number below 10^18, got '999")


# ------------------------------------------------------------------------------------------------ D8: histograms

def test_weights_whose_sum_overflows_a_float_are_relative_weights(tmp_path):
    """Two weights of 1e308 (reliability-3 D8: OverflowError in math.fsum) are one half each, as 1 and 1 are."""
    from botec.simulate.workload import read_histogram

    huge, small = tmp_path / "huge.csv", tmp_path / "small.csv"
    huge.write_text("tokens,weight\n100,1e308\n200,1e308\n300,5e307\n", encoding="utf-8")
    small.write_text("tokens,weight\n100,2\n200,2\n300,1\n", encoding="utf-8")
    tokens, probabilities = read_histogram(huge)
    assert tokens.tolist() == [100, 200, 300]
    assert probabilities.tolist() == pytest.approx([0.4, 0.4, 0.2], rel=1e-15)
    assert np.array_equal(probabilities, read_histogram(small)[1])


def test_a_simulation_with_overflowing_histogram_weights_runs(tmp_path, capsys):
    histogram = tmp_path / "h.csv"
    histogram.write_text("tokens,weight\n100,1e308\n200,1e308\n", encoding="utf-8")
    code, out, err = run_cli(["simulate", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"), "--prompt-histogram",
                              str(histogram), "-n", "200", "-f", "json"], capsys)
    assert code == 0, err
    assert "Infinity" not in out and "NaN" not in out


@pytest.mark.parametrize("rows, words", [
    ("100,0\n200,0\n", ["needs at least one row with a positive weight"]),
    ("100,1e309\n", ["line 2: weight", "expected a finite number"]),
])
def test_a_histogram_without_a_usable_weight_is_one_line(rows, words, tmp_path, capsys):
    histogram = tmp_path / "h.csv"
    histogram.write_text("tokens,weight\n" + rows, encoding="utf-8")
    code, _, err = run_cli(["simulate", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"), "--prompt-histogram",
                            str(histogram), "-n", "20"], capsys)
    assert code == 2 and err.count("\n") == 1 and str(histogram) in err, err
    for word in words:
        assert word in err, err
