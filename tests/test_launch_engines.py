"""Each serving launch format names the engines it serves (issue 31): `botec export` refuses, in one line, a
contract of another engine, and a preset of engines.yaml that ``launches_as`` an engine exports with its formats.

The format modules' ``export`` functions still write any serving estimate (tests/test_launch_serving.py checks
every exporter's options on every example that way); the refusal is the dispatcher's (:func:`export_text`)."""

from __future__ import annotations

import copy
import os

import pytest

from conftest import EXAMPLES

from botec.catalog import CatalogError
from botec.catalog import engines as engine_catalog
from botec.contract import parse_contract, read_contract_data
from botec.errors import ContractError
from botec.estimation import estimate
from botec.launch import export_text, launch_format, launch_formats, serves

SGLANG_EXAMPLE = EXAMPLES / "serve-deepseek-v3-sglang-96-h100.yaml"


def test_each_serving_format_names_the_engines_it_serves_and_training_formats_none():
    assert {name: f.engines for name, f in launch_formats("serving").items()} == {
        "vllm": ("vllm",), "sglang": ("sglang",), "trtllm": ("tensorrt-llm",),
        "kubernetes": ("vllm",)}   # the production stack's pods run vllm serve
    assert all(f.engines == () for f in launch_formats("training").values())
    presets = engine_catalog.engine_presets()
    served = {engine for f in launch_formats("serving").values() for engine in f.engines}
    assert served == {key for key, preset in presets.items() if not preset.launches_as}   # each engine a format


def test_export_of_another_engines_contract_is_refused_in_one_line_and_writes_nothing(cli, tmp_path):
    target = tmp_path / "vllm.sh"
    code, out, err = cli("export", str(SGLANG_EXAMPLE), "--to", "vllm", "-o", str(target))
    assert code == 2 and out == "" and not target.exists()
    assert err == ("botec: error: strategy.engine: --to vllm writes vLLM launch files, for the engine vllm, and "
                   "this contract's engine is 'sglang' (the formats of 'sglang': sglang)\n")
    code, _, err = cli("export", str(SGLANG_EXAMPLE), "--to", "kubernetes")
    assert code == 2 and "for the engine vllm, and this contract's engine is 'sglang'" in err
    assert cli("export", str(SGLANG_EXAMPLE), "--to", "sglang", "-o", str(tmp_path / "s.sh"))[0] == 0


def test_export_all_writes_the_formats_of_the_contracts_engine(cli, tmp_path):
    folder = tmp_path / "launch"
    code, _, err = cli("export", str(SGLANG_EXAMPLE), "--to", "all", "-o", str(folder))
    assert code == 0, err
    assert os.listdir(folder) == ["sglang.sh"]
    assert "vllm, trtllm, kubernetes serve other engines than this contract's 'sglang': not written" in err
    vllm_folder = tmp_path / "vllm"
    assert cli("export", str(EXAMPLES / "serve-llama3.1-8b-h100.yaml"), "--to", "all", "-o", str(vllm_folder))[0] == 0
    assert sorted(os.listdir(vllm_folder)) == ["kubernetes.yaml", "vllm.sh"]


@pytest.fixture()
def tuned_vllm(monkeypatch):
    """engines.yaml with one more block: vLLM's, copied, as 'vllm-tuned' (512 sequences) launching as vllm."""
    from importlib import resources

    from botec.yamlfile import load_yaml_text

    data = load_yaml_text(resources.files("botec.catalog").joinpath("engines.yaml").read_text(encoding="utf-8"))
    block = copy.deepcopy(data["engines"]["vllm"])
    block.update(name="vLLM (tuned)", launches_as="vllm")
    block["max_batch_size"]["value"] = 512
    data["engines"]["vllm-tuned"] = block
    presets = engine_catalog.parse_engines(data)
    monkeypatch.setattr(engine_catalog, "engine_presets", lambda: presets)
    monkeypatch.setattr("botec.inputs.serving.engine_presets", lambda: presets)
    return presets


def test_a_preset_that_launches_as_vllm_exports_with_the_vllm_formats(tuned_vllm):
    assert tuned_vllm["vllm-tuned"].program == "vllm" and tuned_vllm["sglang"].program == "sglang"
    data = read_contract_data(EXAMPLES / "serve-llama3.1-8b-h100.yaml")
    data["strategy"]["engine"] = "vllm-tuned"
    result = estimate(parse_contract(data), compare=False)
    assert [name for name, f in launch_formats("serving").items() if serves(f, "vllm-tuned")] == \
        ["vllm", "kubernetes"]
    assert "  --max-num-seqs 512 \\\n" in export_text(launch_format("vllm"), result)   # the preset's own limit
    with pytest.raises(ContractError) as refused:
        export_text(launch_format("sglang"), result)
    assert str(refused.value).endswith("this contract's engine is 'vllm-tuned' (the formats of 'vllm-tuned': "
                                       "vllm, kubernetes)")


@pytest.mark.parametrize("target", ["vllm-2", "vllm-variant"])   # unknown; itself a variant
def test_launches_as_must_name_an_engine_that_launches_as_itself(target):
    from importlib import resources

    from botec.yamlfile import load_yaml_text

    data = load_yaml_text(resources.files("botec.catalog").joinpath("engines.yaml").read_text(encoding="utf-8"))
    data["engines"]["vllm-variant"] = dict(copy.deepcopy(data["engines"]["vllm"]), launches_as="vllm")
    data["engines"]["vllm-tuned"] = dict(copy.deepcopy(data["engines"]["vllm"]), launches_as=target)
    with pytest.raises(CatalogError, match=r"^engines\.yaml: vllm-tuned\.launches_as must name a preset that "
                                           r"launches as itself \(one of vllm, tensorrt-llm, sglang\), got "
                                           f"'{target}'$"):
        engine_catalog.parse_engines(data)
    data["engines"]["vllm-tuned"]["launches_as"] = "vllm-tuned"   # itself: an engine of its own
    assert engine_catalog.parse_engines(data)["vllm-tuned"].program == "vllm-tuned"
