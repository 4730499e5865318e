"""Speculative decoding's inputs: the draft's tokens and acceptance, and its shape — what it keeps resident, what one
of its steps reads, its layers and its cache per token (the formulas are :mod:`botec.serving.speculation`'s).

Counts, from the architecture (:func:`botec.architecture.breakdown`; h hidden size, V vocabulary):

- draft_model: a separate model, all its parameters resident; a step reads all but its embedding lookup
  (its LM head included); its layers; its cache L_d × (its K/V elements per layer).
- eagle (EAGLE-1/2, Li et al. 2024): one decoder layer of the target's shape (attention, a dense MLP of
  the target's FFN width, two norms) and a 2h → h projection resident; a step reads them and the
  target's LM head (V·h, shared); one layer of cache.
- mtp (DeepSeek-V3 §2.2): the model's MTP module as :func:`~botec.architecture.breakdown` counts it (its
  layer with every expert, the 2h → h projection, three norms) resident; a step reads its attention,
  norms, router, shared and k routed experts, the projection and the shared LM head; one layer of cache.
- ngram: nothing.
"""

from __future__ import annotations

from pathlib import Path

from botec.architecture import Architecture, breakdown
from botec.contract.model import ModelSpec
from botec.contract.stated import default
from botec.errors import ContractError
from botec.graph import Given
from botec.graph.elementwise import minimum
from botec.inputs.stated import StatedInputs

__all__ = ["speculation_given", "draft_architecture", "draft_kv_split"]

FIELD = "assumptions.speculative_decoding"
UNNAMED_DRAFT_COST = 0.05
SHAPE = ("draft_parameters", "draft_read_parameters", "draft_layers", "draft_kv_elements_per_token")


def draft_architecture(speculative, base_dir: Path | None) -> Architecture | None:
    """The separate draft model a contract names (None when it names none)."""
    from botec.inputs.model import resolve_architecture

    if speculative is None or speculative.draft_model is None:
        return None
    name = speculative.draft_model
    spec = ModelSpec(config=name) if name.endswith(".json") else ModelSpec(catalog=name)
    try:
        return resolve_architecture(spec, base_dir)
    except ContractError as error:
        raise ContractError(error.detail, field=f"{FIELD}.draft_model") from None


def _shape(method: str, arch: Architecture, draft: Architecture | None) -> tuple[tuple[float, ...], str]:
    """(resident parameters, parameters a step reads, layers, K/V elements per token), and how they were counted."""
    h = arch.hidden_size
    if method == "draft_model":
        if draft is None:
            return (0.0, 0.0, 0.0, 0.0), "no draft model named: its weights and cache are not counted"
        counted, target = breakdown(draft), breakdown(arch)
        if counted.total >= target.total:
            raise ContractError(f"the draft {draft.name} ({counted.total:,} parameters) is not smaller than the target "
                                f"{arch.name} ({target.total:,}): a draft proposes tokens cheaply for a larger model",
                                field=f"{FIELD}.draft_model")
        return ((float(counted.total), float(counted.matmul_active), float(draft.layers),
                 float(draft.layers * draft.kv_elements_per_token_per_layer)),
                f"{draft.name}: all its parameters resident, a step reads all but its embedding lookup")
    if method == "ngram":
        return (0.0, 0.0, 0.0, 0.0), "prompt lookup (ngram): no weights, no cache"
    counted = breakdown(arch)
    parts, head = counted.parts, float(arch.vocab_size * h)
    if method == "eagle":
        layer = parts["attention_per_layer"] + parts["dense_mlp_per_layer"] + parts["norms_per_layer"] + 2 * h * h
        return ((float(layer), layer + head, 1.0, float(arch.kv_elements_per_token_per_layer)),
                "EAGLE head: one decoder layer of the target's shape + a 2h → h projection; the target's LM head "
                "shared (read, not held twice)")
    if not arch.mtp_layers:
        raise ContractError(f"{arch.name} has no multi-token-prediction module (mtp_layers: 0): method mtp drafts "
                            "with the model's own MTP layer (DeepSeek-V3); use eagle or draft_model",
                            field=f"{FIELD}.method")
    module = counted.mtp / arch.mtp_layers
    if arch.moe:
        unread = (arch.moe.experts - arch.moe.experts_per_token) * parts["expert"]
        read = module - unread + head
    else:
        read = module + head
    return ((float(module), float(read), 1.0, float(arch.kv_elements_per_token_per_layer)),
            "the model's MTP module (one layer + a 2h → h projection); the embeddings and LM head shared")


def speculation_given(speculative, arch: Architecture, base_dir: Path | None,
                      stated: StatedInputs) -> dict[str, Given]:
    """The speculation inputs of a serving estimate: its tokens, acceptance and the draft's shape; its cost when the
    contract states it (or names no draft model: the old 0.05 default), else left to the graph to derive."""
    if speculative is None:
        off = "no speculative decoding"
        return ({name: Given(0.0, "assumed", off, FIELD) for name in ("draft_tokens", "draft_acceptance_rate",
                                                                      "draft_step_cost")}
                | {name: Given(0.0, "assumed", off, FIELD) for name in SHAPE})
    given = {"draft_tokens": Given(float(speculative.draft_tokens), "assumed", None, f"{FIELD}.draft_tokens"),
             "draft_acceptance_rate": stated.given("draft_acceptance_rate", speculative.acceptance_rate,
                                                   f"{FIELD}.acceptance_rate")}
    draft = draft_architecture(speculative, base_dir)
    shape, how = _shape(speculative.method, arch, draft)
    given |= {name: Given(value, "derived", how, f"{FIELD}.method" if draft is None else f"{FIELD}.draft_model")
              for name, value in zip(SHAPE, shape)}
    if speculative.draft_cost is not None:
        given["draft_step_cost"] = stated.given("draft_step_cost", speculative.draft_cost, f"{FIELD}.draft_cost")
    elif speculative.method == "draft_model" and draft is None:
        unnamed = default(UNNAMED_DRAFT_COST, "a draft model about 1/20 of the target's size (name draft_model to "
                                              "derive its cost and count its memory)")
        given["draft_step_cost"] = stated.given("draft_step_cost", unnamed, f"{FIELD}.draft_cost")
    return given


def draft_kv_split(speculative, draft: Architecture | None, tensor_parallel, target_split):
    """Ways TP splits a token's draft KV: a separate draft's min(TP, its KV heads) (1 for an MLA latent); a head's
    as the target's layers (``target_split``); 1 without a draft."""
    if speculative is None or speculative.method == "ngram" or (speculative.method == "draft_model" and draft is None):
        return 1.0
    if speculative.method == "draft_model":
        return 1.0 if draft.mla else minimum(tensor_parallel, float(draft.kv_heads))
    return target_split
