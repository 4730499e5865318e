"""What the training job is: the quantities the workload section of a contract states.

These are fixed when an estimate is compared with a measurement (lesson 000: "keep the
workload definition fixed while comparing estimate with measurement; otherwise, a faster
result might simply reflect less work"). The model's shape is in :mod:`botec.formulas.transformer`.
"""

from botec.graph import Formulas

formulas = Formulas(account="workload")

formulas.input("tokens", unit="tokens", meaning="training tokens processed across the run (D)")
formulas.input("sequence_length", unit="tokens", meaning="tokens per sequence (S)")
formulas.input("token_bytes", unit="B", meaning="bytes per stored token id in the prepared dataset")


@formulas.formula(unit="FLOP", meaning="attention-score work per token, forward and backward (QKᵀ and attention × V)",
                  expression="3 × attention_forward_flops_per_context_token × sequence_length"
                             " × attention_flops_factor",
                  source="PaLM (Chowdhery et al. 2022) App. B: 12·L·H·Q·T; Megatron counts the causal half")
def attention_flops_per_token(attention_forward_flops_per_context_token, sequence_length, attention_flops_factor):
    """Forward: each token attends the S tokens of its sequence; backward twice the forward."""
    return 3 * attention_forward_flops_per_context_token * sequence_length * attention_flops_factor
