"""A Hugging Face ``config.json``, read offline, as an :class:`~botec.architecture.shape.Architecture`: the
families in :data:`SUPPORTED_FAMILIES`, each key it needs named when it is missing."""

from __future__ import annotations

import json
from pathlib import Path

from botec.architecture.shape import MLA, T5_FAMILIES, Architecture, MoE
from botec.errors import ContractError, read_text_file
from botec.jsonfile import load_json_text

__all__ = ["SUPPORTED_FAMILIES", "from_hf_config", "read_hf_config"]

SUPPORTED_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "gpt2", "gpt_neox", "deepseek_v3", "t5", "mt5")


def _require(config: dict, key: str, origin: str):
    if key not in config or config[key] is None:
        raise ContractError(f"config.json has no {key!r}, which a {config.get('model_type')} model needs",
                            origin=origin)
    return config[key]


def from_hf_config(config: dict, origin: str = "config.json", name: str | None = None) -> Architecture:
    """An :class:`Architecture` from the keys of a Hugging Face ``config.json`` (no network, no transformers)."""
    family = config.get("model_type")
    if family not in SUPPORTED_FAMILIES:
        raise ContractError(f"{family!r} is not a supported family (supported: {', '.join(SUPPORTED_FAMILIES)}); "
                            "describe the architecture in the contract instead", field="model_type", origin=origin)

    def get(key):
        return _require(config, key, origin)

    label = name or config.get("_name_or_path") or family
    if family in T5_FAMILIES:
        return _t5_architecture(config, label, origin)
    if family == "gpt2":
        h = get("n_embd")
        return Architecture(
            name=label, family=family, layers=get("n_layer"), hidden_size=h, attention_heads=get("n_head"),
            kv_heads=get("n_head"), ffn_size=config.get("n_inner") or 4 * h, vocab_size=get("vocab_size"),
            mlp="plain", tied_embeddings=config.get("tie_word_embeddings", True),
            position_embeddings=get("n_positions"), norm="layernorm", attention_bias="all", mlp_bias=True,
            max_sequence_length=get("n_positions"), source=origin)
    common = dict(
        name=label, family=family, layers=get("num_hidden_layers"), hidden_size=get("hidden_size"),
        attention_heads=get("num_attention_heads"),
        kv_heads=config.get("num_key_value_heads") or get("num_attention_heads"),
        vocab_size=get("vocab_size"), max_sequence_length=config.get("max_position_embeddings"), source=origin,
    )
    if family == "gpt_neox":
        return Architecture(**common, ffn_size=get("intermediate_size"), mlp="plain",
                            tied_embeddings=config.get("tie_word_embeddings", False), norm="layernorm",
                            attention_bias="all" if config.get("attention_bias", True) else "none", mlp_bias=True)
    head_dim = config.get("head_dim")
    if head_dim == common["hidden_size"] // common["attention_heads"]:
        head_dim = None
    tied = bool(config.get("tie_word_embeddings", False))
    if family in ("llama", "mistral", "mixtral", "qwen2"):
        bias = "qkv" if family == "qwen2" else ("all" if config.get("attention_bias") else "none")
        window = config.get("sliding_window")
        if family == "qwen2" and not config.get("use_sliding_window", False):
            window = None
        moe = None
        if family == "mixtral":
            moe = MoE(experts=get("num_local_experts"), experts_per_token=get("num_experts_per_tok"),
                      expert_ffn_size=get("intermediate_size"))
        return Architecture(**common, ffn_size=get("intermediate_size"), head_dim=head_dim, tied_embeddings=tied,
                            attention_bias=bias, mlp_bias=bool(config.get("mlp_bias", False)), moe=moe,
                            sliding_window=window)
    # deepseek_v3
    moe = MoE(experts=get("n_routed_experts"), experts_per_token=get("num_experts_per_tok"),
              expert_ffn_size=get("moe_intermediate_size"), shared_experts=config.get("n_shared_experts") or 0,
              first_dense_layers=config.get("first_k_dense_replace", 0),
              layer_frequency=config.get("moe_layer_freq", 1), router_bias=config.get("topk_method") == "noaux_tc")
    mla = MLA(q_lora_rank=config.get("q_lora_rank"), kv_lora_rank=get("kv_lora_rank"),
              qk_nope_head_dim=get("qk_nope_head_dim"), qk_rope_head_dim=get("qk_rope_head_dim"),
              v_head_dim=get("v_head_dim"))
    return Architecture(**common, ffn_size=get("intermediate_size"), tied_embeddings=tied, moe=moe, mla=mla,
                        mtp_layers=config.get("num_nextn_predict_layers", 0))


def _t5_architecture(config: dict, label: str, origin: str) -> Architecture:
    """T5 / mT5 (``T5Config``): d_model, d_ff, num_layers (encoder), num_decoder_layers (default num_layers),
    num_heads of d_kv, vocab_size, feed_forward_proj (relu | gated-gelu: wi or wi_0/wi_1), relative position
    buckets, tie_word_embeddings (default True: the original T5; False in T5 v1.1 and mT5)."""
    def get(key):
        return _require(config, key, origin)

    if config.get("is_encoder_decoder") is False:
        raise ContractError("a T5 config with is_encoder_decoder false (an encoder alone) is not a model botec "
                            "trains; give the encoder-decoder's config", field="is_encoder_decoder", origin=origin)
    projection = str(config.get("feed_forward_proj", "relu"))   # relu, gelu (wi) or gated-gelu, gated-silu (wi_0, wi_1)
    encoder, heads = get("num_layers"), get("num_heads")
    decoder = config.get("num_decoder_layers") or encoder
    return Architecture(
        name=label, family=config["model_type"], layers=encoder + decoder, decoder_layers=decoder,
        hidden_size=get("d_model"), attention_heads=heads, kv_heads=heads, head_dim=get("d_kv"),
        ffn_size=get("d_ff"), vocab_size=get("vocab_size"), mlp="gated" if projection.startswith("gated") else "plain",
        tied_embeddings=bool(config.get("tie_word_embeddings", True)), norm="rmsnorm",
        relative_attention_buckets=config.get("relative_attention_num_buckets", 32),
        source=origin)   # relative positions: no learned table bounds the length (n_positions is informational)


def read_hf_config(path: str | Path) -> Architecture:
    """Read a ``config.json`` file (or a folder holding one) into an :class:`Architecture`."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    origin = str(path)
    text = read_text_file(path)
    try:
        config = load_json_text(text, origin)
    except json.JSONDecodeError as error:
        raise ContractError(f"malformed JSON at line {error.lineno}, column {error.colno}: {error.msg}",
                            origin=origin) from None
    if not isinstance(config, dict):
        raise ContractError("a config.json is a JSON object", origin=origin)
    return from_hf_config(config, origin=origin, name=path.parent.name or None)

