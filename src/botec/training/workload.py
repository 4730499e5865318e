"""What the job is: the quantities the workload section of a contract states.

These are fixed when an estimate is compared with a measurement (lesson 000: "keep the
workload definition fixed while comparing estimate with measurement; otherwise, a faster
result might simply reflect less work"). For a bare parameter count (the lesson's way) the
active and matmul parameters equal the count and there is no attention term; for an
architecture they come from :mod:`botec.architecture`.
"""

from botec.quantities import declare_input, formula

declare_input("parameters", account="workload", unit="parameters",
              meaning="model parameters (P)")
declare_input("active_parameters", account="workload", unit="parameters",
              meaning="parameters one token passes through (MoE: the experts it is routed to)")
declare_input("matmul_parameters", account="workload", unit="parameters",
              meaning="active parameters used in matrix multiplies (all but the embedding lookup)")
declare_input("expert_parameters", account="workload", unit="parameters",
              meaning="parameters of the routed experts (0 for a dense model)")
declare_input("tokens", account="workload", unit="tokens",
              meaning="training tokens processed across the run (D)")
declare_input("sequence_length", account="workload", unit="tokens",
              meaning="tokens per sequence (S)")
declare_input("layers", account="workload", unit="layers",
              meaning="transformer layers (L)")
declare_input("moe_layers", account="workload", unit="layers",
              meaning="layers with a mixture-of-experts MLP")
declare_input("hidden_size", account="workload", unit="1",
              meaning="hidden width of the model (H)")
declare_input("attention_heads", account="workload", unit="1",
              meaning="attention heads (a)")
declare_input("kv_heads", account="workload", unit="1",
              meaning="key/value heads (MHA: a; GQA: fewer; MQA: 1)")
declare_input("qk_head_dim", account="workload", unit="1",
              meaning="width of one query/key head")
declare_input("v_head_dim", account="workload", unit="1",
              meaning="width of one value head")
declare_input("experts_per_token", account="workload", unit="1",
              meaning="routed experts each token visits (0 for a dense model)")
declare_input("token_bytes", account="workload", unit="B",
              meaning="bytes per stored token id in the prepared dataset")
declare_input("attention_flops_factor", account="workload", unit="1",
              meaning="attention-score work counted: 1 all of it (PaLM), 0.5 causal half (Megatron), 0 none")


@formula(account="workload", unit="FLOP",
         meaning="attention-score work per token, forward and backward (QKᵀ and attention × V)",
         expression="6 × layers × attention_heads × (qk_head_dim + v_head_dim) × sequence_length"
                    " × attention_flops_factor",
         source="PaLM (Chowdhery et al. 2022) App. B: 12·L·H·Q·T; Megatron counts the causal half")
def attention_flops_per_token(layers, attention_heads, qk_head_dim, v_head_dim, sequence_length,
                              attention_flops_factor):
    """Forward 2·S·a·(d_qk + d_v) per layer per token; backward twice that."""
    return 6 * layers * attention_heads * (qk_head_dim + v_head_dim) * sequence_length * attention_flops_factor
