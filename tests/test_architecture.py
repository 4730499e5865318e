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
    """By hand, from config.json (h 7,168; 128 heads; MLA q-rank 1,536, kv-rank 512, nope 128 + rope 64, v 128;
    3 dense layers of FFN 18,432 and 58 MoE layers of 256 routed + 1 shared experts of FFN 2,048, 8 routed per token;
    vocabulary 129,280, untied):

    attention per layer = q (7,168·1,536 + 1,536 + 1,536·128·192) + kv (7,168·576 + 512 + 512·128·256)
                          + out (128·128·7,168) = 48,760,320 + 20,906,496 + 117,440,512 = 187,107,328
    norms per layer     = 2 · 7,168 = 14,336
    dense MLP           = 3 · 7,168 · 18,432 = 396,361,728;   one expert = 3 · 7,168 · 2,048 = 44,040,192
    MoE layer           = 257 experts + router 7,168·256 + its bias 256 (e_score_correction_bias, noaux_tc)
                        = 11,318,329,344 + 1,835,008 + 256
    total = 61 · (187,107,328 + 14,336) + 3 · 396,361,728 + 58 · 11,320,164,608 + 2 · 129,280·7,168 + 7,168
          = 671,026,419,200
    active: the MoE layers count 8 + 1 experts instead of 257: total − 58 · 248 · 44,040,192 = 37,552,297,472.
    """
    arch = model_catalog()["deepseek-v3"] if source == "catalog" else read_hf_config(HF / "deepseek-v3")
    parts = breakdown(arch)
    assert parts.total == pytest.approx(671e9, rel=0.01)             # DeepSeek-V3 report: 671B
    assert parts.total == 61 * (187_107_328 + 14_336) + 3 * 396_361_728 + 58 * 11_320_164_608 \
        + 2 * 129_280 * 7_168 + 7_168 == 671_026_419_200
    assert parts.active == 671_026_419_200 - 58 * 248 * 44_040_192 == 37_552_297_472
    # The report's "37B activated": 37.55B counts the embedding rows whole (1.5 % above 37B); the
    # active parameters used in matmuls (without the input-embedding lookup) are 36.63B.
    assert parts.active == pytest.approx(37e9, rel=0.016)
    assert parts.matmul_active == pytest.approx(37e9, rel=0.011)
    # the multi-token-prediction module is reported apart: one MoE layer, a 2h → h projection and three norms
    layer = 187_107_328 + 14_336 + 11_320_164_608
    assert parts.mtp == layer + 2 * 7_168 * 7_168 + 3 * 7_168 == 11_610_068_224


def test_bloom_matches_its_published_count():
    """BLOOM's README: 176,247,271,424 = 70 × (12h² + 13h) + V·h + 2h (final norm) + 2h (embedding norm),
    h = 14,336, V = 250,880 (tied, ALiBi: no position parameters)."""
    h = 14_336
    assert breakdown(model_catalog()["bloom-176b"]).total == 70 * (12 * h * h + 13 * h) + 250_880 * h + 4 * h \
        == 176_247_271_424


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
