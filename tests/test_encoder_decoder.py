"""Encoder-decoder models (T5, mT5) from a Hugging Face config.json: parameters, FLOPs, activations, LoRA.

Sources: Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text Transformer"
(T5: an encoder and a decoder of L blocks each; each decoder block adds cross attention over the encoder's output;
relative position biases of 32 buckets per head in each stack's first layer; RMS-style norms without bias; no
biases in the projections); Xue et al. 2021 (mT5: T5 v1.1 with a 250,112-token vocabulary); the published counts
(T5-base 222.9M, t5-v1_1-base 247.6M, mT5-base 582.4M) and PEFT's print of LoRA r = 8 on q, v of t5-base
("trainable params: 884,736 || all params: 223,788,288"). The config files are in tests/data/hf (SOURCES.md).
"""

from __future__ import annotations

import pytest

from botec.architecture import breakdown, lora_parameters, read_hf_config
from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate

from conftest import REPO

HF = REPO / "tests" / "data" / "hf"
H, D_FF_BASE, D_FF_V11, HEADS, D_KV, L = 768, 3072, 2048, 12, 64, 12
ATTENTION = 4 * H * HEADS * D_KV            # q, k, v, o: 2,359,296
NORM = H                                    # T5's LayerNorm is a weight only


def _by_hand(vocabulary: int, d_ff: int, gated: bool, tied: bool) -> int:
    mlp = (3 if gated else 2) * H * d_ff
    encoder_block = ATTENTION + mlp + 2 * NORM               # self-attention, MLP, two norms
    decoder_block = 2 * ATTENTION + mlp + 3 * NORM           # + cross attention and its norm
    embeddings = vocabulary * H * (1 if tied else 2)         # shared by both stacks; the head untied or not
    position_bias = 2 * 32 * HEADS                           # one table of 32 buckets × heads per stack
    return L * encoder_block + L * decoder_block + embeddings + 2 * NORM + position_bias   # + two final norms


@pytest.mark.parametrize("name, vocabulary, d_ff, gated, tied, published", [
    ("t5-base", 32128, D_FF_BASE, False, True, 222_903_552),
    ("t5-v1_1-base", 32128, D_FF_V11, True, False, 247_577_856),
    ("mt5-base", 250112, D_FF_V11, True, False, 582_401_280),
])
def test_parameters_by_hand_and_published(name, vocabulary, d_ff, gated, tied, published):
    arch = read_hf_config(HF / name)
    assert (arch.layers, arch.decoder_layers, arch.encoder_layers) == (24, 12, 12)
    assert arch.mlp == ("gated" if gated else "plain") and arch.tied_embeddings == tied
    assert breakdown(arch).total == _by_hand(vocabulary, d_ff, gated, tied) == published


def test_lora_on_q_and_v_adapts_the_cross_attention_too():
    """PEFT's t5-base, r = 8 on q, v: 36 attention blocks (12 encoder self, 12 decoder self, 12 cross), two matrices
    of 768 → 768 each: 36 × 2 × 8 × (768 + 768) = 884,736 (+ 222,903,552 = 223,788,288 'all params')."""
    arch = read_hf_config(HF / "t5-base")
    count = lora_parameters(arch, 8, ["q", "v"])
    assert count.parameters == 36 * 2 * 8 * (768 + 768) == 884_736
    assert breakdown(arch).total + count.parameters == 223_788_288
    gated = lora_parameters(read_hf_config(HF / "mt5-base"), 8, ["wi_0", "wi_1", "wo"])
    assert gated.parameters == 24 * 8 * (2 * (768 + 2048) + (2048 + 768))
    with pytest.raises(ContractError) as error:
        lora_parameters(arch, 8, ["wi_0"])          # t5-base's MLP is not gated: wi, wo
    assert error.value.field == "strategy.lora.target_modules"


def _estimate(name: str, **assumptions):
    data = {"workload": {"model": {"config": str(HF / name / "config.json")}, "tokens": "1B", "sequence_length": 512},
            "supply": {"accelerator": "a100-sxm-80gb", "count": 1},
            "strategy": {"micro_batch_size": 8, "recompute": "none", "optimizer": "adam-mixed"},
            "assumptions": assumptions}
    return estimate(parse_contract(data))


def test_flops_count_both_stacks_and_the_cross_attention():
    """t5-base at 512 tokens: 6 FLOPs per matmul parameter (every parameter but the two position-bias lookups,
    222,902,784; the tied embedding does the head's matmul) and the attention scores, 2·a·(d_qk + d_v) per layer
    and context token, × 3 for the backward: the encoder's self-attention and the decoder's cross attention are
    bidirectional (all of the s × s scores), the decoder's self-attention causal (the convention's share)."""
    per_layer = 2 * HEADS * (D_KV + D_KV) * 512 * 3            # 4,718,592 per attention layer, full scores
    full = _estimate("t5-base")
    assert full.value("matmul_parameters") == 222_903_552 - 2 * 32 * HEADS == 222_902_784
    assert full.value("attention_flops_per_token") == pytest.approx(per_layer * (12 + 12 + 12))
    assert full.value("model_flops_per_token") == pytest.approx(6 * 222_902_784 + per_layer * 36) == 1_507_286_016
    causal = _estimate("t5-base", attention_flops="causal")
    assert causal.value("attention_flops_per_token") == pytest.approx(per_layer * (12 * 0.5 + 12 + 12))
    none = _estimate("t5-base", attention_flops="none")
    assert none.value("attention_flops_per_token") == 0


def test_activations_average_the_cross_attention_over_both_stacks():
    """Korthikanti et al. 2022 per layer, 16-bit, flash attention, no recomputation: s·b·(10h + 2·(attention width +
    MLP width)), 5sbh of the 10 per sub-block (its norm's and its projection's inputs, a dropout mask); a decoder block
    has three sub-blocks: + 5h × 12/24 averaged over the 24 blocks (12.5h); the attention width 4h of a self-attention
    block, × (1 + 12/24) for the cross attention (6h); the plain MLP 2f. s = 512, b = 8:
    4,096 × (9,600 + 2 × (4,608 + 6,144)) = 127,401,984."""
    result = _estimate("t5-base")
    assert result.value("activation_bytes_per_layer") == 512 * 8 * (12.5 * H + 2 * (6 * H + 2 * D_FF_BASE)) \
        == 127_401_984
    q = result.quantities
    assert all(q[name].value == q[name].value and abs(q[name].value) != float("inf") for name in q
               if isinstance(q[name].value, float))                                   # no NaN, no infinity
    assert result.fits


def test_zero3_gathers_a_decoder_block():
    """The largest unit FSDP wraps is a decoder block: self and cross attention, the MLP, three norms,
    2 × 2,359,296 + 2 × 768 × 3,072 + 3 × 768 = 9,439,488 parameters."""
    data = {"workload": {"model": {"config": str(HF / "t5-base")}, "tokens": "1B", "sequence_length": 512},
            "supply": {"accelerator": "a100-sxm-80gb", "count": 8},
            "strategy": {"micro_batch_size": 8, "fsdp": "full_shard", "optimizer": "adam-mixed"}}
    q = estimate(parse_contract(data)).quantities
    assert q["gathered_layer_parameters"].value == 2 * ATTENTION + 2 * H * D_FF_BASE + 3 * NORM == 9_439_488


def test_serving_an_encoder_decoder_is_refused_naming_the_model():
    data = {"workload": {"kind": "serving", "model": {"config": str(HF / "t5-base")},
                         "traffic": {"requests_per_second": 1, "prompt_tokens": 256, "output_tokens": 64}},
            "supply": {"accelerator": "a100-sxm-80gb"}}
    with pytest.raises(ContractError) as error:
        estimate(parse_contract(data))
    assert error.value.field == "workload.model" and "encoder-decoder" in error.value.detail


def test_an_encoder_alone_is_refused_naming_the_key(tmp_path):
    import json

    config = json.loads((HF / "t5-base" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"is_encoder_decoder": False}))
    with pytest.raises(ContractError) as error:
        read_hf_config(tmp_path)
    assert error.value.field == "is_encoder_decoder"
