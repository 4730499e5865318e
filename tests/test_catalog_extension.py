"""A new accelerator family, training stack and serving engine are each one YAML block, no code edit (issue 31,
item 2): a copy of the catalog (``BOTEC_CATALOG``) with a family ``newgen`` (Hopper's figures, efficiency.yaml),
an accelerator ``x100`` of that family (the H100 SXM's datasheet row, hardware.yaml), a stack ``house-stack``
(torchtitan's behaviour with fused elementwise kernels, stacks.yaml) and an engine ``house-vllm`` (vLLM's
defaults at 512 sequences, launching as vLLM, engines.yaml). Each goes through ``estimate``, ``simulate`` and
``export`` from the YAML alone."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLES

import botec.catalog
from botec.catalog.root import CATALOG_VARIABLE, clear_catalog_caches
from botec.contract import parse_contract, read_contract_data
from botec.errors import ContractError, UserError
from botec.estimation import estimate


def _dump(path: Path, data: dict) -> None:
    import yaml

    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _load(path: Path) -> dict:
    from botec.yamlfile import load_yaml_text

    return load_yaml_text(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def extended_folder(tmp_path_factory) -> Path:
    """The packaged catalog copied, with one family, accelerator, stack and engine added as YAML blocks."""
    from importlib import resources

    folder = tmp_path_factory.mktemp("catalog")
    with resources.as_file(resources.files("botec.catalog")) as packaged:
        shutil.copytree(packaged, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    efficiency = _load(folder / "efficiency.yaml")
    efficiency["families"]["newgen"] = copy.deepcopy(efficiency["families"]["hopper"])
    _dump(folder / "efficiency.yaml", efficiency)
    hardware = _load(folder / "hardware.yaml")
    hardware["accelerators"]["x100"] = dict(copy.deepcopy(hardware["accelerators"]["h100-sxm"]),
                                            name="House X100 80 GB", family="newgen")
    _dump(folder / "hardware.yaml", hardware)
    stacks = _load(folder / "stacks.yaml")
    stacks["stacks"]["house-stack"] = dict(copy.deepcopy(stacks["stacks"]["torchtitan"]), elementwise="fused",
                                           description="the house's torchtitan fork with fused norms and RoPE")
    _dump(folder / "stacks.yaml", stacks)
    engines = _load(folder / "engines.yaml")
    block = dict(copy.deepcopy(engines["engines"]["vllm"]), name="House vLLM", launches_as="vllm")
    block["max_batch_size"]["value"] = 512
    engines["engines"]["house-vllm"] = block
    _dump(folder / "engines.yaml", engines)
    return folder


@pytest.fixture()
def extended_catalog(extended_folder, monkeypatch):
    """``BOTEC_CATALOG`` naming the extended copy for one test, every catalog cache emptied before and after."""
    monkeypatch.setenv(CATALOG_VARIABLE, str(extended_folder))
    clear_catalog_caches()
    yield extended_folder
    monkeypatch.delenv(CATALOG_VARIABLE)
    clear_catalog_caches()


def _training(accelerator: str, framework: str):
    data = read_contract_data(EXAMPLES / "llama3.1-8b-finetune-h100.yaml")
    data["supply"]["accelerator"] = accelerator
    data["supply"]["cluster"] = {"accelerators_per_node": 8}
    data["strategy"]["framework"] = framework
    return estimate(parse_contract(data))


def _serving(accelerator: str, engine: str):
    data = read_contract_data(EXAMPLES / "serve-llama3.1-8b-h100.yaml")
    data["supply"]["accelerator"] = accelerator
    data["supply"].pop("candidates")
    data["strategy"]["engine"] = engine
    return estimate(parse_contract(data))


def test_a_new_family_and_stack_estimate_as_the_ones_they_copy(extended_catalog):
    assert botec.catalog.accelerators()["x100"].family == "newgen"
    assert "newgen" in botec.catalog.FAMILIES
    house, reference = _training("x100", "house-stack"), _training("h100-sxm", "torchtitan")
    assert house.inputs.stack.name == "house-stack" and house.inputs.stack.elementwise == "fused"
    # the same datasheet row and efficiency figures: the same peak and matmul share, one family apart
    assert house.value("peak_flops_per_s") == reference.value("peak_flops_per_s") == 989.4e12
    assert house.value("matmul_efficiency") == pytest.approx(reference.value("matmul_efficiency"))
    # fused norms and RoPE move fewer bytes than eager ones: the step is shorter, the FLOPs the same
    assert house.value("model_flops_per_token") == reference.value("model_flops_per_token")
    assert house.value("step_seconds") < reference.value("step_seconds")


def test_a_new_stack_exports_as_the_training_tools_do(extended_catalog):
    from botec.launch import export_text, launch_format

    text = export_text(launch_format("torchtitan"), _training("x100", "house-stack"))
    assert "--parallelism.data_parallel_shard_degree" in text


def test_a_new_engine_estimates_simulates_and_exports_from_yaml_alone(extended_catalog):
    from botec.launch import export_text, launch_format
    from botec.simulate import simulate

    result = _serving("x100", "house-vllm")
    assert result.inputs.engine.name == "House vLLM"
    assert result.value("max_batch_size") == 512
    run = simulate(result, requests=400, seed=1)
    assert run.engine == "house-vllm" and run.measured_requests > 0
    assert "  --max-num-seqs 512 \\\n" in export_text(launch_format("vllm"), result)


def test_the_packaged_catalog_knows_none_of_them():
    clear_catalog_caches()
    assert "x100" not in botec.catalog.accelerators()
    with pytest.raises(ContractError, match=r"^strategy\.framework: unknown framework 'house-stack' \(one of: "):
        _training("h100-sxm", "house-stack")


def test_a_catalog_variable_that_names_no_folder_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(CATALOG_VARIABLE, str(tmp_path / "nowhere"))
    clear_catalog_caches()
    try:
        with pytest.raises(UserError, match=r"^BOTEC_CATALOG='.*nowhere' is not a folder \(expected a catalog "):
            botec.catalog.accelerators()
    finally:
        monkeypatch.delenv(CATALOG_VARIABLE)
        clear_catalog_caches()
