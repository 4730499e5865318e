"""Memory, the activations: what the busiest pipeline stage retains for the backward pass.

Two methods (``assumptions.activation_model``): the lesson's saved-tensor factor × the hidden state × the layers in
flight, or Korthikanti et al. 2022's per-layer count (table 2) with the schedule's micro-batches in flight, the
last stage's output layer and the layer full recomputation rematerializes.
"""

from botec.graph import Formulas, maximum, minimum, where
from botec.layout import Recompute

formulas = Formulas(account="memory")


@formulas.formula(unit="tokens", meaning="tokens of one sequence held by one context-parallel rank",
                  expression="sequence_length / context_parallel", detail=True)
def local_sequence_length(sequence_length, context_parallel):
    return sequence_length / context_parallel


@formulas.formula(unit="B", meaning="one micro-batch's activation tensor at a layer boundary, whole",
                  expression="micro_batch_size × local_sequence_length × hidden_size × activation_bytes_per_element",
                  source="lesson 000: 2 × 2,048 × 2,048 × 2 ≈ 16.8 MB", detail=True)
def layer_activation_bytes(micro_batch_size, local_sequence_length, hidden_size, activation_bytes_per_element):
    """B_local × S × H × b (S split by CP): what a TP all-reduce carries and a pipeline stage hands on."""
    return micro_batch_size * local_sequence_length * hidden_size * activation_bytes_per_element


@formulas.formula(unit="B", meaning="one hidden-state tensor at one layer, as one accelerator holds it",
                  expression="layer_activation_bytes / (tensor_parallel if sequence_parallel else 1)",
                  source="lesson 000: 2 × 2,048 × 2,048 × 2 ≈ 16.8 MB")
def hidden_state_bytes(layer_activation_bytes, tensor_parallel, sequence_parallel):
    """M_hidden = B_local × S × H × b, split over the TP ranks when sequence parallel."""
    return layer_activation_bytes / where(sequence_parallel, tensor_parallel, 1)


@formulas.formula(unit="1",
                  meaning="activations the schedule keeps in flight on the first stage, relative to its 1F1B peak",
                  expression="(1 + (pipeline_parallel − 1) / (pipeline_parallel × virtual_pipeline_stages) if "
                             "virtual_pipeline_stages > 1 else 1) × min(k, gradient_accumulation_steps) / "
                             "pipeline_parallel, k = the micro-batches in flight: p (1F1B, ZB-H1), 2p − 1 (ZB-H2), "
                             "p + 1 (DualPipe)",
                  source="Korthikanti et al. 2022 §4.2 (interleaved 1F1B); Megatron-LM theoretical_memory_usage.py: "
                         "× min(1, m/p) when fewer micro-batches than stages are in flight; Qi et al. 2023 Table 1: "
                         "ZB-H1 p·M_B, ZB-H2 (2p − 1)·M_B; DeepSeek-V3 Table 2: DualPipe PP + 1",
                  detail=True, prose=True)
def pipeline_activation_factor(pipeline_parallel, virtual_pipeline_stages, gradient_accumulation_steps,
                               pipeline_schedule):
    interleaved = 1 + (pipeline_parallel - 1) / (pipeline_parallel * virtual_pipeline_stages)
    most = where(pipeline_schedule >= 3, pipeline_parallel + 1,
                 where(pipeline_schedule >= 2, 2 * pipeline_parallel - 1, pipeline_parallel))
    in_flight = minimum(most, gradient_accumulation_steps) / pipeline_parallel
    return where(virtual_pipeline_stages > 1, interleaved, 1.0) * in_flight


@formulas.formula(unit="layers",
                  meaning="layers' worth of activations the busiest pipeline stage holds at its peak",
                  expression="pipeline_activation_layers × pipeline_activation_factor",
                  source="Korthikanti et al. 2022 §4.2: 1F1B keeps p micro-batches of L/p layers on the first stage")
def activation_layers_in_flight(pipeline_activation_layers, pipeline_activation_factor):
    return pipeline_activation_layers * pipeline_activation_factor


@formulas.formula(unit="B", meaning="activations retained for the backward pass",
                  expression="activation_layers_in_flight × saved_tensor_factor × hidden_state_bytes",
                  source="lesson 000: 16 × 8 × 16.8 MB ≈ 2.15 GB (the factor 8 is a placeholder)",
                  choice=("activations", "saved_tensor_factor"))
def activation_bytes(activation_layers_in_flight, saved_tensor_factor, hidden_state_bytes):
    """M_act = L × k × M_hidden, k the saved-tensor factor (replace with a measured peak)."""
    return activation_layers_in_flight * saved_tensor_factor * hidden_state_bytes


@formulas.formula(unit="B", meaning="what one layer keeps of its linear parts for one micro-batch (everything but "
                                    "the attention scores)",
                  expression="activation_bytes_per_element / 2 × local_sequence_length × micro_batch_size × ((10 + "
                             "5 × cross_attention_layers / layers) × hidden_size / (tensor_parallel if "
                             "sequence_parallel else 1) + 2 × (attention_activation_width + mlp_activation_width) / "
                             "tensor_parallel) + adapter_activation_bytes_per_layer",
                  source="Korthikanti et al. 2022 §4.1 (16-bit activations): norms 4sbh, the inputs of QKV and MLP "
                         "4sbh and two dropout masks 2sbh stay whole without sequence parallelism (10sbh, 5sbh per "
                         "sub-block: an encoder-decoder's cross-attention sub-block adds its own 5sbh, averaged over "
                         "the layers); Q, K, V, the attention output and the MLP's hidden layer are split over TP "
                         "(24sbh/t for a GPT layer: widths 4h and 2 × 4h); GQA, gated and MoE MLPs by their own "
                         "widths; LoRA adds its adapters' x·A (botec.training.adapters)",
                  detail=True, prose=True)
def layer_linear_activation_bytes(activation_bytes_per_element, local_sequence_length, micro_batch_size, hidden_size,
                                  tensor_parallel, sequence_parallel, attention_activation_width,
                                  mlp_activation_width, adapter_activation_bytes_per_layer, cross_attention_layers,
                                  layers):
    whole = (10 + 5 * cross_attention_layers / layers) * hidden_size / where(sequence_parallel, tensor_parallel, 1)
    split = 2 * (attention_activation_width + mlp_activation_width) / tensor_parallel
    return (activation_bytes_per_element / 2 * local_sequence_length * micro_batch_size * (whole + split)
            + adapter_activation_bytes_per_layer)


@formulas.formula(unit="B", meaning="what one layer keeps of the attention scores (eager attention only)",
                  expression="activation_bytes_per_element / 2 × 5 × attention_heads × local_sequence_length"
                             " × sequence_length × micro_batch_size / tensor_parallel",
                  source="Korthikanti et al. 2022 §4.1: softmax output 2as²b, its dropout mask as²b and output "
                         "2as²b; a fused (flash) kernel keeps none of them (Dao et al. 2022)",
                  zero_when="fused_attention == 1", detail=True)
def attention_score_activation_bytes(activation_bytes_per_element, attention_heads, local_sequence_length,
                                     sequence_length, micro_batch_size, tensor_parallel):
    return (activation_bytes_per_element / 2 * 5 * attention_heads * local_sequence_length * sequence_length
            * micro_batch_size / tensor_parallel)


@formulas.formula(unit="1", meaning="elements per token one layer keeps inside the TP region under op-level selective "
                                    "checkpointing: the saved matmul and attention outputs",
                  expression="a·d_qk + k·d_v + a·d_v + (L − M) / L × f + (mlp_activation_width − (L − M) / L × "
                             "(3 if gated else 2) × f)",
                  source="torchtitan's op-level SAC (9dec370 parallelize_llama.py `_save_list`, `_custom_policy`) "
                         "saves the outputs of Q and V (the odd matmuls of Q, K, V, O), of the attention kernel "
                         "and of the MLP's first matmul (W1; a plain MLP's up); the rest is recomputed. Assumed: an "
                         "MoE layer's MLP keeps what it keeps without recomputation (the second term)",
                  detail=True, prose=True,
                  symbols={"a": "attention_heads", "d_qk": "qk_head_dim", "k": "kv_heads", "d_v": "v_head_dim",
                           "a·d_v": "attention_output_parameters_per_layer / hidden_size", "f": "ffn_size",
                           "L": "layers", "M": "moe_layers", "gated": "mlp_gated"})
def sac_activation_width(attention_heads, qk_head_dim, kv_heads, v_head_dim, attention_output_parameters_per_layer,
                         hidden_size, layers, moe_layers, ffn_size, mlp_gated, mlp_activation_width):
    dense = (layers - moe_layers) / layers
    moe_kept = mlp_activation_width - dense * where(mlp_gated, 3, 2) * ffn_size
    return (attention_heads * qk_head_dim + kv_heads * v_head_dim
            + attention_output_parameters_per_layer / hidden_size + dense * ffn_size + moe_kept)


@formulas.formula(unit="B", meaning="what one layer keeps for one micro-batch under op-level selective checkpointing",
                  expression="b × s × B × (h / (t if SP else 1) + (L − M) / L × h × mlp_gated + (2 × h / t if SP "
                             "else 0) + sac_activation_width / t) + adapter_activation_bytes_per_layer",
                  source="torchtitan's SAC policy: the block's input (what the checkpoint re-runs from), the saved "
                         "outputs of sac_activation_width split over TP, the down projection's output (W2, the "
                         "seventh matmul: whole on each rank) and with sequence parallelism the two reduce-scatters' "
                         "outputs (in `_save_list`); Llama 3.1 8B: 15.5·h·2 B = 63.5 kB per token per layer. The "
                         "attention kernel's FP32 log-sum-exp (4·a B per token) is left out",
                  detail=True, prose=True,
                  symbols={"b": "activation_bytes_per_element", "s": "local_sequence_length", "B": "micro_batch_size",
                           "h": "hidden_size", "t": "tensor_parallel", "SP": "sequence_parallel", "L": "layers",
                           "M": "moe_layers"})
def sac_activation_bytes_per_layer(activation_bytes_per_element, local_sequence_length, micro_batch_size,
                                   hidden_size, tensor_parallel, sequence_parallel, layers, moe_layers, mlp_gated,
                                   sac_activation_width, adapter_activation_bytes_per_layer):
    whole = (hidden_size / where(sequence_parallel, tensor_parallel, 1)
             + (layers - moe_layers) / layers * hidden_size * mlp_gated
             + where(sequence_parallel, 2 * hidden_size / tensor_parallel, 0.0))
    return (activation_bytes_per_element * local_sequence_length * micro_batch_size
            * (whole + sac_activation_width / tensor_parallel) + adapter_activation_bytes_per_layer)


@formulas.formula(unit="B", meaning="activations one transformer layer keeps for one micro-batch (averaged over the "
                                    "layers when only some recompute)",
                  expression="with full recompute, full_recompute_share × 2·s·b·h / (t if SP else 1) × "
                             "(activation_bytes_per_element / 2) + (1 − full_recompute_share) × "
                             "(layer_linear_activation_bytes + attention_score_activation_bytes); selective under "
                             "op-level SAC (selective_recompute_policy 1): sac_activation_bytes_per_layer; otherwise "
                             "layer_linear_activation_bytes + attention_score_activation_bytes unless selective "
                             "recompute",
                  source="Korthikanti et al. 2022, table 2 (16-bit activations, 4h MLP): s·b·h·(10 + 24/t + 5as/ht); "
                         "with SP 34/t; Megatron's selective drops the scores; full keeps the layer's input 2sbh; "
                         "Megatron's --recompute-num-layers: the layers that do not recompute keep everything; "
                         "torchtitan's selective keeps what its op-level policy saves",
                  prose=True,
                  symbols={"s": "local_sequence_length", "b": "micro_batch_size", "h": "hidden_size",
                           "t": "tensor_parallel", "SP": "sequence_parallel"})
def activation_bytes_per_layer(local_sequence_length, micro_batch_size, hidden_size, tensor_parallel,
                               sequence_parallel, recompute, activation_bytes_per_element,
                               layer_linear_activation_bytes, attention_score_activation_bytes,
                               full_recompute_share, selective_recompute_policy, sac_activation_bytes_per_layer):
    """Korthikanti et al. 2022 per-layer activations (bytes), GPT layer shown:

    ====================  =====================================
    no recompute          s·b·h·(10 + 24/t + 5·a·s/(h·t))
    + sequence parallel   s·b·h·(34/t + 5·a·s/(h·t))
    selective recompute   s·b·h·(10 + 24/t)
    + sequence parallel   s·b·h·34/t
    full recompute        2·s·b·h  (÷ t with sequence parallel)
    ====================  =====================================

    That selective row is Megatron's; torchtitan's selective (op-level SAC) keeps
    ``sac_activation_bytes_per_layer`` instead. A fused attention kernel (the default) keeps no scores: the
    (Megatron) selective row. The constants assume
    16-bit activations; other widths scale them by b_act / 2. Under full recomputation of a share φ of the
    layers (``recompute_layer_fraction``), φ·L layers keep the full-recompute row and the rest the
    no-recompute row: φ × full + (1 − φ) × none, per layer on average.
    """
    sbh = local_sequence_length * micro_batch_size * hidden_size
    full = activation_bytes_per_element / 2 * 2 * sbh / where(sequence_parallel, tensor_parallel, 1)
    everything = layer_linear_activation_bytes + attention_score_activation_bytes
    kept = layer_linear_activation_bytes + where(recompute >= Recompute.SELECTIVE, 0.0,
                                                 attention_score_activation_bytes)
    selective = where(selective_recompute_policy >= 1, sac_activation_bytes_per_layer, kept)
    partial = full_recompute_share * full + (1 - full_recompute_share) * everything
    return where(recompute >= Recompute.FULL, partial, where(recompute >= Recompute.SELECTIVE, selective, kept))


@formulas.formula(unit="B", meaning="the one layer recomputation rematerializes at a time, during its backward",
                  expression="layer_linear_activation_bytes + attention_score_activation_bytes under full recompute; "
                             "what op-level SAC did not save, max(layer_linear_activation_bytes − "
                             "sac_activation_bytes_per_layer, 0) + attention_score_activation_bytes, under "
                             "torchtitan's selective; else 0",
                  source="Korthikanti et al. 2022 §5: recomputing a layer rebuilds all its activations; op-level SAC "
                         "rebuilds the tensors it did not save (eager attention's scores among them)",
                  zero_when="recompute < 1", detail=True, prose=True)
def rematerialized_layer_bytes(recompute, layer_linear_activation_bytes, attention_score_activation_bytes,
                               selective_recompute_policy, sac_activation_bytes_per_layer):
    op_sac = where(selective_recompute_policy >= 1,
                   maximum(layer_linear_activation_bytes - sac_activation_bytes_per_layer, 0.0)
                   + attention_score_activation_bytes, 0.0)
    return where(recompute >= Recompute.FULL, layer_linear_activation_bytes + attention_score_activation_bytes,
                 op_sac)


@formulas.formula(unit="B", meaning="the output layer's activations on the last stage: its input and the logits the "
                                    "cross entropy keeps",
                  expression="local_sequence_length × micro_batch_size × (4 × hidden_size + loss_activation_bytes_per_logit"
                             " × vocab_size) / tensor_parallel",
                  source="Korthikanti et al. 2022 §4.3: 4·s·b·h·(1 + V/h)/t for the vocabulary-parallel cross entropy "
                         "(4 B per FP32 logit); the unfused Hugging Face / torchtitan loss keeps 10 B per logit, torchtune's "
                         "chunked one 6.5 (2.25 compiled), a fused-linear one none (catalog/stacks.yaml)",
                  detail=True)
def output_layer_activation_bytes(local_sequence_length, micro_batch_size, hidden_size, vocab_size, tensor_parallel,
                                  loss_activation_bytes_per_logit):
    return (local_sequence_length * micro_batch_size
            * (4 * hidden_size + loss_activation_bytes_per_logit * vocab_size) / tensor_parallel)


@formulas.formula(unit="B", meaning="activations retained for the backward pass on the busiest stage, at its peak",
                  expression="max(activation_layers_in_flight × activation_bytes_per_layer + "
                             "rematerialized_layer_bytes, last_stage_layers × activation_bytes_per_layer"
                             " + max(output_layer_activation_bytes, rematerialized_layer_bytes))",
                  source="Korthikanti et al. 2022: the first stage holds p micro-batches of its layers under 1F1B, "
                         "the last one micro-batch and the output layer. The output layer's tensors (the loss's "
                         "logits, the LM head's input) are freed by the loss's and the head's backward, which run "
                         "before any layer's, so the layer a recomputation rebuilds is never alive with them "
                         "(torch.autograd.backward, retain_graph=False: a node's saved tensors are freed once its "
                         "backward has run)", choice=("activations", "korthikanti"))
def activation_bytes(activation_layers_in_flight, activation_bytes_per_layer, last_stage_layers,  # noqa: F811
                     output_layer_activation_bytes, rematerialized_layer_bytes):
    return _stage_peak(activation_layers_in_flight * activation_bytes_per_layer,
                       last_stage_layers * activation_bytes_per_layer, output_layer_activation_bytes,
                       rematerialized_layer_bytes)


def _stage_peak(first_stage, last_stage, output_layer, rematerialized):
    """The busier stage's activation peak: the first stage's layers and the layer being rebuilt, or the last stage's
    layers and the larger of its output layer and the rebuilt layer (the two are never alive together)."""
    return maximum(first_stage + rematerialized, last_stage + maximum(output_layer, rematerialized))
