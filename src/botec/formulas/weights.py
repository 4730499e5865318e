"""The parameters one accelerator holds: split over tensor (t), pipeline and expert (e) ranks.

Megatron splits every matrix over the TP ranks and the layers over the pipeline stages; the stage
with the most layers (``pipeline_stage_layers``) holds the most. Experts are split over the EP
ranks (whole experts) and over the expert tensor-parallel ranks. Training shards the state on top
of this (ZeRO, :mod:`botec.training.memory`); serving keeps the weights resident as they are. The
state per parameter before sharding (:func:`unsharded_state_bytes_per_parameter`) is a plain formula the
training graph and the catalog's listing of optimizer presets share.
"""

from botec.graph import Formulas, maximum, where

formulas = Formulas(account="memory")

formulas.input("tensor_parallel", unit="1", meaning="tensor-parallel degree (TP, t)", account="compute")
formulas.input("pipeline_parallel", unit="1", meaning="pipeline-parallel stages (PP, p)", account="compute")
formulas.input("pipeline_stage_layers", unit="layers", account="compute",
               meaning="transformer layers of the stage with the most (L/p when p divides L)")
formulas.input("first_stage_layers", unit="layers", detail=True, account="compute",
               meaning="transformer layers of the first pipeline stage (it also holds the input embeddings)")
formulas.input("last_stage_layers", unit="layers", detail=True, account="compute",
               meaning="transformer layers of the last pipeline stage (it also holds the LM head and the loss)")
formulas.input("expert_parallel", unit="1", account="compute",
               meaning="expert-parallel degree (EP): ranks the routed experts are spread over")
formulas.input("expert_tensor_parallel", unit="1",
               meaning="ways each expert's matrices are split (training: TP, Megatron's default; serving: TP / EP)")


@formulas.formula(unit="parameters", meaning="non-expert parameters of one transformer layer",
                  expression="(parameters − expert_parameters − embedding_parameters − lm_head_parameters) / layers",
                  detail=True)
def dense_parameters_per_layer(parameters, expert_parameters, embedding_parameters, lm_head_parameters, layers):
    return (parameters - expert_parameters - embedding_parameters - lm_head_parameters) / layers


@formulas.formula(unit="parameters", meaning="the output layer's matrix the last stage holds: the LM head, or a copy "
                                             "of tied embeddings when the stages are more than one",
                  expression="vocab_size × hidden_size if pipeline_parallel > 1 else lm_head_parameters",
                  source="Megatron-LM keeps a copy of tied embeddings on the last stage and syncs its gradient",
                  detail=True, prose=True)
def output_layer_parameters(vocab_size, hidden_size, pipeline_parallel, lm_head_parameters):
    return where(pipeline_parallel > 1, vocab_size * hidden_size, lm_head_parameters)


@formulas.formula(unit="parameters", meaning="non-expert parameters held by one accelerator (the fullest stage)",
                  expression="max(dense_parameters_per_layer × pipeline_stage_layers, dense_parameters_per_layer"
                             " × first_stage_layers + embedding_parameters + (output_layer_parameters if"
                             " pipeline_parallel = 1 else 0), dense_parameters_per_layer × last_stage_layers"
                             " + output_layer_parameters) / tensor_parallel",
                  source="Megatron-LM theoretical_memory_usage.py: the most loaded shard is (its layers + the "
                         "embedding) / t; the first stage holds the embeddings, the last the head",
                  detail=True, prose=True)
def dense_parameters_per_device(dense_parameters_per_layer, pipeline_stage_layers, first_stage_layers,
                                embedding_parameters, output_layer_parameters, pipeline_parallel, last_stage_layers,
                                tensor_parallel):
    """The fullest stage's non-expert parameters, split over TP (P/t when there is one stage)."""
    first = (dense_parameters_per_layer * first_stage_layers + embedding_parameters
             + where(pipeline_parallel == 1, output_layer_parameters, 0.0))
    last = dense_parameters_per_layer * last_stage_layers + output_layer_parameters
    middle = dense_parameters_per_layer * pipeline_stage_layers
    return maximum(maximum(first, last), middle) / tensor_parallel


@formulas.formula(unit="experts", meaning="routed experts one accelerator holds per MoE layer",
                  expression="experts / expert_parallel", choice=("expert_placement", "even"), detail=True)
def routed_experts_per_device(experts, expert_parallel):
    """EP divides the E experts evenly (training's rule); serving's placement with redundant experts, and uneven,
    is :func:`botec.serving.experts.routed_experts_per_device`."""
    return experts / expert_parallel


@formulas.formula(unit="parameters", meaning="expert parameters held by one accelerator (the fullest stage)",
                  expression="expert_parameters × routed_experts_per_device / experts × pipeline_stage_layers"
                             " / (layers × expert_tensor_parallel)", zero_when="experts == 0", detail=True)
def expert_parameters_per_device(expert_parameters, routed_experts_per_device, experts, pipeline_stage_layers, layers,
                                 expert_tensor_parallel):
    """Experts are split over EP (whole experts: the rank's share of the E experts' parameters), expert tensor
    parallelism and the stages."""
    return expert_parameters * routed_experts_per_device / experts * pipeline_stage_layers / (
        layers * expert_tensor_parallel)


@formulas.formula(unit="parameters", meaning="parameters held by one accelerator before any sharding",
                  expression="dense_parameters_per_device + expert_parameters_per_device")
def parameters_per_device(dense_parameters_per_device, expert_parameters_per_device):
    return dense_parameters_per_device + expert_parameters_per_device


def unsharded_state_bytes_per_parameter(weight_bytes_per_parameter, gradient_bytes_per_parameter,
                                        master_weight_bytes_per_parameter, optimizer_state_bytes_per_parameter):
    """Training state per parameter before any sharding: b_weights + b_gradients + b_master + b_moments.

    Lesson 000's table: 2 + 2 + 4 + 4 + 4 = 16 B for Adam in mixed precision. Training's memory account defines the
    quantity with it (:mod:`botec.training.memory.state`); the optimizer presets' listing applies it to the
    catalog's bytes (the catalog holds the data, not the formula)."""
    return (weight_bytes_per_parameter + gradient_bytes_per_parameter + master_weight_bytes_per_parameter
            + optimizer_state_bytes_per_parameter)
