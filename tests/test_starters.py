"""A newcomer's starting points: `botec init` for a named model and accelerator, and a schema that describes
every field."""

from __future__ import annotations

import json

import pytest
import yaml

import botec

from conftest import REPO, write


def _quantity(out: str, name: str) -> float:
    return next(q for q in json.loads(out)["quantities"] if q["name"] == name)["value"]


@pytest.mark.parametrize("model, accelerator, count", [
    ("llama-3.1-8b", "h100-sxm", 8),
    ("mistral-7b", "a100-sxm-80gb", 4),
    ("llama-3.1-8b", "l4", 8),          # 24 GB: only tensor parallelism with full recomputation fits
])
def test_init_training_starter_names_the_model_and_accelerator_and_estimates(cli, tmp_path, model, accelerator,
                                                                             count):
    path = tmp_path / "job.yaml"
    code, out, err = cli("init", str(path), "--model", model, "--accelerator", accelerator, "--count", str(count))
    assert code == 0, err
    text = path.read_text()
    data = yaml.safe_load(text)
    assert data["workload"]["model"] == model
    assert data["supply"]["accelerator"] == accelerator and data["supply"]["count"] == count
    # the choices that change the answer are stated, each with what it does
    assert data["assumptions"]["step_time_model"] == "components"
    assert data["assumptions"]["compute_model"] == "op_level"
    assert data["assumptions"]["activation_model"] == "korthikanti"
    assert data["assumptions"]["attention_kernel"] == "flash"
    assert data["strategy"]["recompute"] in ("selective", "full")
    lines = text.splitlines()
    for choice in ("step_time_model", "compute_model", "activation_model", "attention_kernel", "recompute"):
        at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{choice}:"))
        assert "#" in lines[at], lines[at]
        # what each choice does, and its alternatives, in the comment lines above it
        assert lines[at - 2].strip().startswith(f"# {choice}: ") and lines[at - 1].strip().startswith("#   ")
    # the header names the file the user asked for, not the lesson's
    assert f"Run it:   botec estimate {path}" in text and "lesson-finetune-1b" not in text
    code, out, err = cli("estimate", str(path), "-f", "json")
    assert code == 0, err
    assert _quantity(out, "accelerators") == count
    assert _quantity(out, "run_seconds") > 0


def test_init_picks_the_first_layout_that_fits(cli, tmp_path):
    """Llama 3.1-8B on 8 H100s fits without tensor parallelism; on 8 L4s (24 GB) TP 2 with full recompute fits with
    its headroom kept: the state 16.06 GB (16 B per parameter of the 8.03B over TP 2 × ZeRO-3 over 4), activations
    3.73 GB, the workspaces inside the allocator and, outside it, the CUDA context's 0.4 GB (catalog/runtime.yaml, no
    longer the 3 GB init once wrote): planned 22.9 GB with the 10 % headroom."""
    big, small = tmp_path / "h100.yaml", tmp_path / "l4.yaml"
    assert cli("init", str(big), "--model", "llama-3.1-8b", "--accelerator", "h100-sxm")[0] == 0
    assert cli("init", str(small), "--model", "llama-3.1-8b", "--accelerator", "l4")[0] == 0
    h100, l4 = yaml.safe_load(big.read_text())["strategy"], yaml.safe_load(small.read_text())["strategy"]
    assert (h100["tensor_parallel"], h100["recompute"]) == (1, "selective")
    assert (l4["tensor_parallel"], l4["recompute"]) == (2, "full")
    result = botec.estimate(small)
    assert result.value("runtime_buffer_bytes") == 400e6
    assert result.value("planned_device_bytes") == pytest.approx(
        (result.value("allocated_device_bytes") + 400e6) * 1.10, rel=1e-9)
    assert result.value("planned_device_bytes") <= 24e9


@pytest.mark.parametrize("model, accelerator, tensor_parallel", [
    ("llama-3.1-8b", "h100-sxm", 1),
    ("mistral-7b", "l4", 2),
    ("llama-3.1-70b", "a100-sxm-80gb", 4),
])
def test_init_serving_starter_estimates(cli, tmp_path, model, accelerator, tensor_parallel):
    path = tmp_path / "serve.yaml"
    code, out, err = cli("init", str(path), "--serving", "--model", model, "--accelerator", accelerator)
    assert code == 0, err
    text = path.read_text()
    data = yaml.safe_load(text)
    assert data["workload"]["kind"] == "serving" and data["workload"]["model"] == model
    assert data["supply"]["accelerator"] == accelerator
    assert data["strategy"]["tensor_parallel"] == tensor_parallel      # the fewest accelerators per replica that fit
    assert data["strategy"]["engine"] == "vllm"
    assert data["workload"]["latency"] == {"time_to_first_token": "1 s", "time_per_output_token": "50 ms"}
    for choice in ("engine", "weight_precision", "kv_cache_precision", "time_per_output_token"):
        assert any(line.strip().startswith(f"{choice}:") and "#" in line for line in text.splitlines()), choice
    assert f"Run it:   botec estimate {path}" in text and "examples/" not in text
    code, out, err = cli("estimate", str(path), "-f", "json")
    assert code == 0, err
    assert _quantity(out, "tensor_parallel") == tensor_parallel


def test_init_accepts_a_hugging_face_config_and_id(cli, tmp_path):
    config = REPO / "tests" / "data" / "hf" / "llama-2-7b" / "config.json"
    path = tmp_path / "hf.yaml"
    code, out, err = cli("init", str(path), "--model", str(config), "--accelerator", "a100-sxm-80gb")
    assert code == 0, err
    assert (tmp_path / yaml.safe_load(path.read_text())["workload"]["model"]["config"]).resolve() == config
    assert cli("estimate", str(path))[0] == 0
    # a Hugging Face id whose name is a catalog model is that model
    path = tmp_path / "id.yaml"
    assert cli("init", str(path), "--model", "meta-llama/Llama-3.1-8B")[0] == 0
    assert yaml.safe_load(path.read_text())["workload"]["model"] == "llama-3.1-8b"


@pytest.mark.parametrize("args, message", [
    (["--model", "llama-3.1-8"], "--model: unknown model 'llama-3.1-8'; did you mean 'llama-3.1-8b'?"),
    (["--accelerator", "h100-sxn"], "--accelerator: unknown accelerator 'h100-sxn'; did you mean 'h100-sxm'"),
])
def test_init_names_an_unknown_model_or_accelerator(cli, tmp_path, args, message):
    path = tmp_path / "job.yaml"
    code, out, err = cli("init", str(path), *args)
    assert code == 2 and out == "" and err.startswith(f"botec: error: {message}") and err.count("\n") == 1, err
    assert not path.exists()


def test_init_refuses_to_overwrite_with_one_line(cli, tmp_path):
    path = write(tmp_path, "keep me\n", name="job.yaml")
    code, out, err = cli("init", str(path), "--model", "llama-3.1-8b", "--accelerator", "h100-sxm")
    assert code == 2 and out == ""
    assert err == f"botec: error: {path}: already exists; choose another path or pass --force\n"
    assert path.read_text() == "keep me\n"


def test_init_without_options_names_the_users_file(cli, tmp_path):
    """The lesson starter's "Run it:" line used to say `botec estimate lesson-finetune-1b.yaml`."""
    path = tmp_path / "my-job.yaml"
    assert cli("init", str(path))[0] == 0
    text = path.read_text()
    assert f"Run it:   botec estimate {path}" in text
    assert f"Explain:  botec explain {path} planned_device_bytes" in text
    assert "botec estimate lesson-finetune-1b.yaml" not in text


def test_init_that_cannot_fit_says_so(cli, tmp_path):
    """70B with Adam needs 1.13 TB of training state: 16 × 80 GB cannot hold it in any standard layout."""
    path = tmp_path / "big.yaml"
    code, out, err = cli("init", str(path), "--model", "llama-3.1-70b", "--accelerator", "h100-sxm", "--count", "16")
    assert code == 0 and path.exists()
    assert "no standard layout fits" in err and "botec search" in err


# --- the schema -------------------------------------------------------------------------------------------------

def _undescribed(schema: dict) -> list[str]:
    missing = []

    def walk(node, where):
        if isinstance(node, dict):
            for name, prop in (node.get("properties") or {}).items():
                if not prop.get("description"):
                    missing.append(f"{where}.{name}")
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{where}[{i}]")

    walk(schema, "")
    return missing


def test_schema_describes_every_property(cli):
    code, out, err = cli("schema")
    assert code == 0, err
    schema = json.loads(out)
    assert _undescribed(schema) == []
    strategy = schema["$defs"]["TrainingStrategy"]["properties"]
    assert strategy["micro_batch_size"]["description"].startswith("Sequences per accelerator per micro-step")
    assert strategy["global_batch_size"]["description"].startswith("Sequences per optimizer step")
    assert strategy["gradient_accumulation_steps"]["description"].startswith("Micro-batches per optimizer step")
    assert "saves" in strategy["checkpoint"]["description"]


def test_schema_states_the_ranged_number_once(cli):
    """The {value, low, high, source, ...} mapping was inlined in each of ~100 number fields (213 KB of JSON)."""
    out = cli("schema")[1]
    schema = json.loads(out)
    assert out.count('"distribution": {') == 1
    stated = schema["$defs"]["StatedNumber"]
    assert set(stated["properties"]) == {"value", "low", "high", "source", "provenance", "distribution"}
    mfu = schema["$defs"]["TrainingAssumptions"]["properties"]["single_accelerator_mfu"]
    assert {"$ref": "#/$defs/StatedNumber"} in mfu["anyOf"][0]["anyOf"]
    assert len(out) < 130_000   # ~122 KB with 0.7's fields; the inlined form was 213 KB
