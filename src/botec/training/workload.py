"""What the training job is: the quantities the workload section of a contract states.

These are fixed when an estimate is compared with a measurement (lesson 000: "keep the
workload definition fixed while comparing estimate with measurement; otherwise, a faster
result might simply reflect less work"). The model's shape is in :mod:`botec.formulas.transformer`.
"""

from botec.graph import Formulas, minimum

formulas = Formulas(account="workload")

formulas.input("tokens", unit="tokens", meaning="training tokens processed across the run (D)")
formulas.input("sequence_length", unit="tokens", meaning="tokens per sequence (S)")
formulas.input("token_bytes", unit="B", meaning="bytes per stored token id in the prepared dataset")


@formulas.formula(unit="FLOP", meaning="attention-score work per token, forward and backward (QKᵀ and attention × V)",
                  expression="3 × attention_forward_flops_per_context_token × sequence_length × ((layers − "
                             "encoder_layers) × attention_flops_factor + (encoder_layers + cross_attention_layers) × "
                             "min(1, 2 × attention_flops_factor)) / layers",
                  source="PaLM (Chowdhery et al. 2022) App. B: 12·L·H·Q·T; Megatron counts the causal half; an "
                         "encoder's self-attention and a decoder's cross attention see the whole sequence (T5, Raffel "
                         "et al. 2020): no causal half to leave out")
def attention_flops_per_token(attention_forward_flops_per_context_token, sequence_length, attention_flops_factor,
                              layers, encoder_layers, cross_attention_layers):
    """Forward: each token attends the S tokens of its sequence; backward twice the forward. A causal layer does
    the convention's share of the s × s scores (the causal half: 0.5, all: 1); a bidirectional one (an encoder's
    self-attention, a decoder's cross attention over the encoder's S tokens) all of them unless none are counted:
    min(1, 2 × factor). Decoder-only models: encoder_layers = cross_attention_layers = 0, the plain term."""
    bidirectional = minimum(1.0, 2 * attention_flops_factor)
    share = ((layers - encoder_layers) * attention_flops_factor
             + (encoder_layers + cross_attention_layers) * bidirectional) / layers
    return 3 * attention_forward_flops_per_context_token * sequence_length * share
