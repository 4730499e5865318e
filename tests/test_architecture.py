"""Model shapes: parameter counts from architectures, shipped config.json files and the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from botec.architecture import breakdown, model_catalog, read_hf_config
from botec.errors import ContractError

HF = Path(__file__).parent / "data" / "hf"


@pytest.mark.parametrize("source", ["catalog", "config"])
def test_llama_2_7b_exactly(source):
    arch = model_catalog()["llama-2-7b"] if source == "catalog" else read_hf_config(HF / "llama-2-7b" / "config.json")
    # 32 × (4·4096² + 3·4096·11008 + 2·4096) + 2·32000·4096 + 4096
    assert breakdown(arch).total == 6_738_415_616


@pytest.mark.parametrize("source", ["catalog", "config"])
def test_llama_3_1_8b_exactly(source):
    arch = model_catalog()["llama-3.1-8b"] if source == "catalog" else read_hf_config(HF / "llama-3.1-8b")
    # GQA: K and V are 4096 × 1024; vocabulary 128,256, untied
    assert breakdown(arch).total == 8_030_261_248


@pytest.mark.parametrize("source", ["catalog", "config"])
def test_mixtral_total_and_active(source):
    arch = model_catalog()["mixtral-8x7b"] if source == "catalog" else read_hf_config(HF / "mixtral-8x7b")
    parts = breakdown(arch)
    assert parts.total == pytest.approx(46.70e9, rel=0.005)          # Mistral AI: 46.7B
    assert parts.active == pytest.approx(12.88e9, rel=0.005)         # 12.9B per token (top-2 of 8)
    # hand-derived: 32 × (41,943,040 + 8 × 176,160,768 + 32,768 + 8,192) + 262,144,000 + 4,096
    assert parts.total == 46_702_792_704


@pytest.mark.parametrize("source", ["catalog", "config"])
def test_deepseek_v3_total_active_and_mtp(source):
    arch = model_catalog()["deepseek-v3"] if source == "catalog" else read_hf_config(HF / "deepseek-v3")
    parts = breakdown(arch)
    assert parts.total == pytest.approx(671e9, rel=0.01)             # DeepSeek-V3 report: 671B
    # Hand-derived with MLA and 3 dense + 58 MoE layers (8 of 256 routed + 1 shared expert active):
    assert parts.total == 671_026_404_352
    assert parts.active == 37_552_282_624
    # The report's "37B activated": 37.55B counts the embedding rows whole (1.5 % above 37B); the
    # active parameters used in matmuls (without the input-embedding lookup) are 36.63B.
    assert parts.active == pytest.approx(37e9, rel=0.016)
    assert parts.matmul_active == pytest.approx(37e9, rel=0.011)
    # the multi-token-prediction module is reported apart: 11.6B of its own (+ shared embeddings and head)
    assert parts.mtp == 11_610_067_968


def test_gpt2_small_and_pythia():
    assert breakdown(model_catalog()["gpt2"]).total == 124_439_808           # tied, learned positions, biases
    assert breakdown(read_hf_config(HF / "gpt2")).total == 124_439_808
    assert breakdown(read_hf_config(HF / "pythia-160m")).total == 162_322_944  # untied embed_out


def test_qwen_has_qkv_bias():
    arch = read_hf_config(HF / "qwen2.5-7b")
    assert arch.attention_bias == "qkv"
    assert breakdown(arch).total == pytest.approx(7.61e9, rel=0.001)


@pytest.mark.parametrize("key", ["llama-2-7b", "llama-3.1-8b", "mistral-7b", "mixtral-8x7b", "qwen2.5-7b", "gpt2",
                                 "pythia-160m", "deepseek-v3"])
def test_config_and_catalog_agree(key):
    assert breakdown(read_hf_config(HF / key)).total == breakdown(model_catalog()[key]).total


@pytest.mark.parametrize("key, published", [
    ("llama-2-13b", 13.0e9), ("llama-2-70b", 69.0e9), ("llama-3.1-70b", 70.6e9), ("llama-3.1-405b", 405.9e9),
    ("mistral-7b", 7.24e9), ("qwen2.5-72b", 72.7e9), ("gpt3-175b", 175e9)])
def test_catalog_counts_near_published(key, published):
    assert breakdown(model_catalog()[key]).total == pytest.approx(published, rel=0.01)


def test_every_catalog_model_has_a_source():
    for key, arch in model_catalog().items():
        assert arch.source and "(" in arch.source, key


def test_unsupported_family_and_missing_keys():
    with pytest.raises(ContractError, match="'mamba' is not a supported family"):
        read_hf_config(HF / "unsupported")
    with pytest.raises(ContractError, match="no 'num_hidden_layers'"):
        read_hf_config(HF / "missing-keys")


def test_model_command(cli):
    code, out, err = cli("model", "mixtral-8x7b")
    assert code == 0, err
    assert "46,702,792,704" in out and "12,879,925,248" in out and "routed experts" in out
    code, out, err = cli("model", str(HF / "llama-2-7b" / "config.json"), "-f", "json")
    import json

    assert code == 0 and json.loads(out)["total"] == 6_738_415_616
    code, out, err = cli("model", "lama-2-7b")
    assert code == 2 and "did you mean 'llama-2-7b'?" in err
    code, out, err = cli("model", str(HF / "unsupported" / "config.json"))
    assert code == 2 and err.count("\n") == 1
