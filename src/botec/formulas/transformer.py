"""The model's shape, as both kinds of estimate read it, and the work of attention.

For a bare parameter count (the lesson's way) the active and matmul parameters equal the count
and there is no attention term; for an architecture they come from :mod:`botec.architecture`.

Attention scores: one token attending one earlier token costs, per layer and head, 2·d_qk FLOPs
for the score q·k and 2·d_v for the weighted value, forward. Over the layers:

    attention_forward_flops_per_context_token = 2 · L · a · (d_qk + d_v)

Training counts it over the sequence, forward and backward (× 3), prefill over the prompt, and a
decode step over the context it reads; the convention (``attention_flops_factor``) says whether
the full s × s score matrix is counted (PaLM App. B: 12·L·H·Q·T; nanoGPT) or its causal half
(Megatron).
"""

from botec.graph import Formulas, where

formulas = Formulas(account="workload")

formulas.input("parameters", unit="parameters", meaning="model parameters (P)")
formulas.input("active_parameters", unit="parameters",
               meaning="parameters one token passes through (MoE: the experts it is routed to)")
formulas.input("matmul_parameters", unit="parameters",
               meaning="active parameters used in matrix multiplies (all but the embedding lookup)")
formulas.input("expert_parameters", unit="parameters", meaning="parameters of the routed experts (0 for a dense model)")
formulas.input("layers", unit="layers", meaning="transformer layers (L)")
formulas.input("moe_layers", unit="layers", meaning="layers with a mixture-of-experts MLP")
formulas.input("hidden_size", unit="1", meaning="hidden width of the model (H)")
formulas.input("attention_heads", unit="1", meaning="attention heads (a)")
formulas.input("kv_heads", unit="1", meaning="key/value heads (MHA: a; GQA: fewer; MQA: 1)")
formulas.input("qk_head_dim", unit="1", meaning="width of one query/key head")
formulas.input("v_head_dim", unit="1", meaning="width of one value head")
formulas.input("experts_per_token", unit="1", meaning="routed experts each token visits (0 for a dense model)")
formulas.input("encoder_layers", unit="layers", detail=True,
               meaning="blocks of an encoder stack (encoder-decoder models such as T5: bidirectional self-attention; "
                       "0 for a decoder-only model)")
formulas.input("cross_attention_layers", unit="layers", detail=True,
               meaning="decoder blocks that also attend the encoder's output (cross attention; 0 for a decoder-only "
                       "model)")
formulas.input("attention_flops_factor", unit="1",
               meaning="attention-score work counted: 1 all of it (PaLM), 0.5 the causal half (Megatron), 0 none")

# Megatron's tensor parallelism all-reduces each layer's output twice in the forward pass: after the
# attention block and after the MLP (Shoeybi et al. 2019, §3).
TP_ALL_REDUCES_PER_LAYER_FORWARD = 2


@formulas.formula(unit="FLOP", meaning="forward attention-score work of one token attending one context token, "
                                       "all layers", detail=True,
                  expression="2 × layers × attention_heads × (qk_head_dim + v_head_dim)",
                  source="PaLM (Chowdhery et al. 2022) App. B: 12·L·H·Q·T is 6 × this × T, forward and backward")
def attention_forward_flops_per_context_token(layers, attention_heads, qk_head_dim, v_head_dim):
    """QKᵀ: 2·d_qk per head per layer; attention × V: 2·d_v."""
    return 2 * layers * attention_heads * (qk_head_dim + v_head_dim)


# The shapes the op-level step model (:mod:`botec.training.ops`) and the activation formulas read:
# per-layer matrix sizes, widths of what a layer keeps for its backward pass, and the output layer.
# A bare parameter count has no shape: those models get a GPT layer's widths (MHA, 4h plain MLP),
# stated as such, or leave the op-level inputs absent.
formulas.input("ffn_size", unit="1", detail=True, meaning="width of a dense MLP's hidden layer (f)")
formulas.input("vocab_size", unit="1", detail=True, meaning="vocabulary size (V)")
formulas.input("mlp_gated", unit="1", detail=True, meaning="1 when the MLP is gated (SwiGLU: three matrices), 0 when plain")
formulas.input("experts", unit="1", detail=True, meaning="routed experts per MoE layer (E; 0 for a dense model)")
formulas.input("shared_experts", unit="1", detail=True, meaning="shared experts every token passes through, per MoE layer")
formulas.input("expert_ffn_size", unit="1", detail=True, meaning="width of one expert's hidden layer (f_e)")
formulas.input("embedding_parameters", unit="parameters", detail=True,
               meaning="input embeddings (tokens and learned positions): on the first pipeline stage")
formulas.input("lm_head_parameters", unit="parameters", detail=True,
               meaning="the LM head's own matrix (0 when tied to the embeddings): on the last pipeline stage")
formulas.input("attention_projection_parameters_per_layer", unit="parameters", detail=True,
               meaning="weights of one layer's Q, K, V projections (MLA: with its low-rank bottlenecks)")
formulas.input("attention_output_parameters_per_layer", unit="parameters", detail=True,
               meaning="weights of one layer's attention output projection (a·d_v·h)")
formulas.input("mlp_up_parameters_per_layer", unit="parameters", detail=True,
               meaning="weights of one dense layer's up (and gate) projections")
formulas.input("mlp_down_parameters_per_layer", unit="parameters", detail=True,
               meaning="weights of one dense layer's down projection")
formulas.input("expert_up_parameters", unit="parameters", detail=True, meaning="weights of one expert's up (and gate) projections")
formulas.input("expert_down_parameters", unit="parameters", detail=True, meaning="weights of one expert's down projection")
formulas.input("attention_activation_width", unit="1", detail=True,
               meaning="elements per token one layer keeps of Q, K, V and the attention output: "
                       "a·d_qk + k·d_qk + k·d_v + a·d_v (4h for multi-head attention)")
formulas.input("mlp_activation_width", unit="1", detail=True,
               meaning="elements per token one layer's MLP keeps inside the TP region, averaged over the layers: "
                       "2f plain, 3f gated, k_e·(h + 3f_e) + S·3f_e for an MoE layer")
formulas.input("mtp_layers", unit="layers", detail=True, meaning="multi-token-prediction modules (DeepSeek-V3: 1)")
formulas.input("mtp_matmul_parameters", unit="parameters", detail=True,
               meaning="active matmul parameters of the multi-token-prediction modules, their LM head included")
formulas.input("lm_head_matmul_parameters", unit="parameters", detail=True,
               meaning="the output layer's matmul parameters (V·h, tied or not): the one matmul full recomputation "
                       "does not repeat")
formulas.input("dense_block_parameters", unit="parameters", detail=True,
               meaning="parameters of one dense transformer block: attention, its norms and the MLP (0 when every "
                       "block is MoE)")
formulas.input("moe_block_parameters", unit="parameters", detail=True,
               meaning="parameters of one MoE block apart from its routed experts: attention, norms, router, shared "
                       "experts (0 without MoE)")


@formulas.formula(unit="1", meaning="elements per token the activation function reads and writes per layer, "
                                    "averaged over dense and MoE layers, before the TP split",
                  expression="(3 if mlp_gated else 2) × ((layers − moe_layers) × ffn_size + moe_layers × "
                             "(experts_per_token + shared_experts) × expert_ffn_size) / layers", detail=True,
                  prose=True)
def activation_function_elements(mlp_gated, layers, moe_layers, ffn_size, experts_per_token, shared_experts,
                                 expert_ffn_size):
    touched = where(mlp_gated, 3, 2)  # gated: read gate and up, write their product; plain: read, write
    return touched * ((layers - moe_layers) * ffn_size
                      + moe_layers * (experts_per_token + shared_experts) * expert_ffn_size) / layers


def memory_bound_elements_per_token(hidden_size, activation_function_elements, tensor_parallel, experts_per_token,
                                    moe_layers, layers, norm_share=1.0):
    """Elements one token's memory-bound ops read and write in one layer on one TP rank, forward: two norms
    (read h, write h) and two residual adds (read 2h, write h) on the hidden state, 10·h (× ``norm_share``:
    1/t with sequence parallelism, 1 without); the activation function on the MLP's width, split over the TP
    ranks; and the MoE token permutation (scatter to and gather from k experts, 4·k·h, averaged over the layers).
    Training's op-level model and the serving step both count these (:mod:`botec.training.ops`,
    :mod:`botec.serving.step`)."""
    return (10 * hidden_size * norm_share + activation_function_elements / tensor_parallel
            + 4 * experts_per_token * hidden_size * moe_layers / layers)
