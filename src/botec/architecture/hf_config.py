"""A Hugging Face ``config.json``, read offline, as an :class:`~botec.architecture.shape.Architecture`: the
families in :data:`SUPPORTED_FAMILIES`, each key it needs named when it is missing.

Every key botec reads is checked before it is used (:class:`_Keys`): its type (a whole number, a bool, a
string), its range (:mod:`botec.architecture.bounds`, the table a contract's architecture fields use too) and
the relations the formulas need (:func:`~botec.architecture.bounds.shape_problem`); each refusal is one line
naming the key and what was expected. A key that is absent or ``null`` takes transformers' default where it has
one (``num_key_value_heads``: the attention heads; ``tie_word_embeddings``: the family's). Keys botec does not
read (dropout, ``rope_theta``, ``rope_scaling``, token ids, ``torch_dtype``, ...) are not checked: they change
no figure botec gives.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from botec.architecture.bounds import (EXPERTS, HEADS, LAYERS, POSITIONS, VOCABULARY, WIDTH, Bound, shape_problem,
                                       whole_number)
from botec.architecture.shape import MLA, T5_FAMILIES, Architecture, MoE
from botec.errors import ContractError, read_text_file
from botec.units import excerpt

__all__ = ["SUPPORTED_FAMILIES", "from_hf_config", "read_hf_config"]

SUPPORTED_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "gpt2", "gpt_neox", "deepseek_v3", "t5", "mt5")
MAX_CONFIG_BYTES = 16 * 1024 * 1024
"""A config.json larger than this is refused before it is read whole (published ones are a few KB; a classifier's
id2label table, the largest part of any, a few hundred KB)."""
_REQUIRED = object()
# T5's feed_forward_proj: an activation, or gated- and an activation (transformers' T5Config refuses the rest)
_T5_PROJECTION = re.compile(r"(gated-)?[A-Za-z0-9_]+")


class _Keys:
    """The keys of one ``config.json``, each read with its type and range checked: a one-line
    :class:`ContractError` whose field is the key. ``null`` is read as absent (transformers writes it for an
    unset optional key)."""

    def __init__(self, config: dict, origin: str, family: str):
        self.config, self.origin, self.family = config, origin, family

    def _value(self, key: str, default):
        value = self.config.get(key)
        if value is None and default is _REQUIRED:
            raise ContractError(f"config.json has no {key!r}, which a {self.family} model needs", origin=self.origin)
        return value

    def refuse(self, key: str, expected: str, got=None):
        raise ContractError(f"expected {expected}" + ("" if got is None else f", got {excerpt(got)}"),
                            field=key, origin=self.origin)

    def whole(self, key: str, bound: Bound, default=_REQUIRED):
        """A whole number within ``bound`` (:func:`~botec.architecture.bounds.whole_number`), or ``default``."""
        value = self._value(key, default)
        if value is None:
            return default
        number = whole_number(value, bound)
        if number is None:
            self.refuse(key, bound.expected, value)
        return number

    def flag(self, key: str, default: bool) -> bool:
        """``true`` or ``false`` (not 0 or 1, not ``"false"``), or ``default``."""
        value = self._value(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.refuse(key, "true or false", value)
        return value

    def text(self, key: str, default: str | None = None) -> str | None:
        """A string, or ``default``."""
        value = self._value(key, default)
        if value is None:
            return default
        if not isinstance(value, str):
            self.refuse(key, "a string", value)
        return value

    def relations(self, keys: dict[str, str], **shape) -> None:
        """Refuse the first relation of :func:`~botec.architecture.bounds.shape_problem` the shape breaks, naming
        this family's key for the role it blames (``keys``: role -> key)."""
        problem = shape_problem(**shape)
        if problem is not None:
            role, expected = problem
            self.refuse(keys[role], expected)


def from_hf_config(config: dict, origin: str = "config.json", name: str | None = None) -> Architecture:
    """An :class:`Architecture` from the keys of a Hugging Face ``config.json`` (no network, no transformers)."""
    family = config.get("model_type")
    if family not in SUPPORTED_FAMILIES:   # (a list or a dict is in no tuple of strings)
        raise ContractError(f"{excerpt(family)} is not a supported family (supported: "
                            f"{', '.join(SUPPORTED_FAMILIES)}); describe the architecture in the contract instead",
                            field="model_type", origin=origin)
    keys = _Keys(config, origin, family)
    label = name or keys.text("_name_or_path") or family
    if family in T5_FAMILIES:
        return _t5_architecture(keys, label)
    if family == "gpt2":
        return _gpt2_architecture(keys, label)
    layers, h, heads = (keys.whole("num_hidden_layers", LAYERS), keys.whole("hidden_size", WIDTH),
                        keys.whole("num_attention_heads", HEADS))
    kv_heads = keys.whole("num_key_value_heads", HEADS, default=heads)
    common = dict(name=label, family=family, layers=layers, hidden_size=h, attention_heads=heads, kv_heads=kv_heads,
                  vocab_size=keys.whole("vocab_size", VOCABULARY),
                  max_sequence_length=keys.whole("max_position_embeddings", POSITIONS, default=None), source=origin)
    ffn = keys.whole("intermediate_size", WIDTH)
    names = {"kv_heads": "num_key_value_heads", "attention_heads": "num_attention_heads"}
    if family == "gpt_neox":
        keys.relations(names, hidden_size=h, attention_heads=heads, kv_heads=kv_heads, head_dim=None, layers=layers)
        return Architecture(**common, ffn_size=ffn, mlp="plain",
                            tied_embeddings=keys.flag("tie_word_embeddings", False), norm="layernorm",
                            attention_bias="all" if keys.flag("attention_bias", True) else "none", mlp_bias=True)
    tied = keys.flag("tie_word_embeddings", False)
    if family == "deepseek_v3":
        return _deepseek_architecture(keys, common, ffn, tied, names)
    head_dim = keys.whole("head_dim", WIDTH, default=None)
    moe = None
    if family == "mixtral":
        moe = MoE(experts=keys.whole("num_local_experts", EXPERTS),
                  experts_per_token=keys.whole("num_experts_per_tok", EXPERTS), expert_ffn_size=ffn)
    keys.relations(names | {"experts_per_token": "num_experts_per_tok"}, hidden_size=h, attention_heads=heads,
                   kv_heads=kv_heads, head_dim=head_dim, layers=layers, experts=moe and moe.experts,
                   experts_per_token=moe and moe.experts_per_token)
    if head_dim == h // heads:
        head_dim = None
    bias = "qkv" if family == "qwen2" else ("all" if keys.flag("attention_bias", False) else "none")
    window = keys.whole("sliding_window", POSITIONS, default=None)
    if family == "qwen2" and not keys.flag("use_sliding_window", False):
        window = None
    return Architecture(**common, ffn_size=ffn, head_dim=head_dim, tied_embeddings=tied, attention_bias=bias,
                        mlp_bias=keys.flag("mlp_bias", False), moe=moe, sliding_window=window)


def _gpt2_architecture(keys: _Keys, label: str) -> Architecture:
    """GPT-2 (``GPT2Config``): n_layer, n_embd, n_head (no GQA), n_inner (default 4·n_embd), learned positions
    n_positions, embeddings tied unless stated otherwise."""
    layers, h, heads = keys.whole("n_layer", LAYERS), keys.whole("n_embd", WIDTH), keys.whole("n_head", HEADS)
    keys.relations({"attention_heads": "n_head"}, hidden_size=h, attention_heads=heads, kv_heads=heads,
                   head_dim=None, layers=layers)
    positions = keys.whole("n_positions", POSITIONS)
    return Architecture(
        name=label, family="gpt2", layers=layers, hidden_size=h, attention_heads=heads, kv_heads=heads,
        ffn_size=keys.whole("n_inner", WIDTH, default=4 * h), vocab_size=keys.whole("vocab_size", VOCABULARY),
        mlp="plain", tied_embeddings=keys.flag("tie_word_embeddings", True), position_embeddings=positions,
        norm="layernorm", attention_bias="all", mlp_bias=True, max_sequence_length=positions, source=keys.origin)


def _deepseek_architecture(keys: _Keys, common: dict, ffn: int, tied: bool, names: dict) -> Architecture:
    """DeepSeek-V3 (``DeepseekV3Config``): routed and shared experts after ``first_k_dense_replace`` dense
    layers, every ``moe_layer_freq``-th layer; multi-head latent attention; ``num_nextn_predict_layers`` MTP
    modules."""
    layers = common["layers"]
    experts = keys.whole("n_routed_experts", EXPERTS)
    moe = MoE(experts=experts, experts_per_token=keys.whole("num_experts_per_tok", EXPERTS),
              expert_ffn_size=keys.whole("moe_intermediate_size", WIDTH),
              shared_experts=keys.whole("n_shared_experts", EXPERTS.from_zero, default=0),
              first_dense_layers=keys.whole("first_k_dense_replace", LAYERS.from_zero, default=0),
              layer_frequency=keys.whole("moe_layer_freq", LAYERS, default=1),
              router_bias=keys.text("topk_method") == "noaux_tc")
    keys.relations(names | {"experts_per_token": "num_experts_per_tok", "first_dense_layers": "first_k_dense_replace"},
                   hidden_size=common["hidden_size"], attention_heads=common["attention_heads"],
                   kv_heads=common["kv_heads"], head_dim=None, layers=layers, experts=experts,
                   experts_per_token=moe.experts_per_token, first_dense_layers=moe.first_dense_layers,
                   latent_attention=True)
    mla = MLA(q_lora_rank=keys.whole("q_lora_rank", WIDTH, default=None),
              kv_lora_rank=keys.whole("kv_lora_rank", WIDTH), qk_nope_head_dim=keys.whole("qk_nope_head_dim", WIDTH),
              qk_rope_head_dim=keys.whole("qk_rope_head_dim", WIDTH), v_head_dim=keys.whole("v_head_dim", WIDTH))
    return Architecture(**common, ffn_size=ffn, tied_embeddings=tied, moe=moe, mla=mla,
                        mtp_layers=keys.whole("num_nextn_predict_layers", LAYERS.from_zero, default=0))


def _t5_architecture(keys: _Keys, label: str) -> Architecture:
    """T5 / mT5 (``T5Config``): d_model, d_ff, num_layers (encoder), num_decoder_layers (default num_layers),
    num_heads of d_kv, vocab_size, feed_forward_proj (relu | gated-gelu: wi or wi_0/wi_1), relative position
    buckets, tie_word_embeddings (default True: the original T5; False in T5 v1.1 and mT5)."""
    if not keys.flag("is_encoder_decoder", True):
        raise ContractError("a T5 config with is_encoder_decoder false (an encoder alone) is not a model botec "
                            "trains; give the encoder-decoder's config", field="is_encoder_decoder", origin=keys.origin)
    projection = keys.text("feed_forward_proj", "relu")   # relu, gelu (wi) or gated-gelu, gated-silu (wi_0, wi_1)
    if not _T5_PROJECTION.fullmatch(projection):
        keys.refuse("feed_forward_proj", "an activation such as 'relu', or 'gated-' and one such as 'gated-gelu'",
                    projection)
    encoder, heads = keys.whole("num_layers", LAYERS), keys.whole("num_heads", HEADS)
    decoder = keys.whole("num_decoder_layers", LAYERS, default=encoder)
    return Architecture(
        name=label, family=keys.family, layers=encoder + decoder, decoder_layers=decoder,
        hidden_size=keys.whole("d_model", WIDTH), attention_heads=heads, kv_heads=heads,
        head_dim=keys.whole("d_kv", WIDTH), ffn_size=keys.whole("d_ff", WIDTH),
        vocab_size=keys.whole("vocab_size", VOCABULARY), mlp="gated" if projection.startswith("gated") else "plain",
        tied_embeddings=keys.flag("tie_word_embeddings", True), norm="rmsnorm",
        relative_attention_buckets=keys.whole("relative_attention_num_buckets", POSITIONS, default=32),
        source=keys.origin)   # relative positions: no learned table bounds the length (n_positions is informational)


def read_hf_config(path: str | Path) -> Architecture:
    """Read a ``config.json`` file (or a folder holding one) into an :class:`Architecture`."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    origin = str(path)
    text = read_text_file(path, "config.json", max_bytes=MAX_CONFIG_BYTES)
    from botec.jsonfile import load_json_text   # here: a contract naming no config.json never needs it

    try:
        config = load_json_text(text, origin)
    except json.JSONDecodeError as error:
        raise ContractError(f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                            origin=origin) from None
    if not isinstance(config, dict):
        raise ContractError("a config.json is a JSON object", origin=origin)
    return from_hf_config(config, origin=origin, name=path.parent.name or None)

