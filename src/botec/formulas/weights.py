"""The parameters one accelerator holds: split over tensor (t), pipeline and expert (e) ranks.

Megatron splits every matrix over the TP ranks and the layers over the pipeline stages; the stage
with the most layers (``pipeline_stage_layers``) holds the most. Experts are split over the EP
ranks (whole experts) and over the expert tensor-parallel ranks. Training shards the state on top
of this (ZeRO, :mod:`botec.training.memory`); serving keeps the weights resident as they are.
"""

from botec.graph import Formulas

formulas = Formulas(account="memory")

formulas.input("tensor_parallel", unit="1", meaning="tensor-parallel degree (TP, t)", account="compute")
formulas.input("pipeline_parallel", unit="1", meaning="pipeline-parallel stages (PP, p)", account="compute")
formulas.input("pipeline_stage_layers", unit="layers", account="compute",
               meaning="transformer layers of the stage with the most (L/p when p divides L)")
formulas.input("expert_parallel", unit="1", account="compute",
               meaning="expert-parallel degree (EP): ranks the routed experts are spread over")
formulas.input("expert_tensor_parallel", unit="1",
               meaning="ways each expert's matrices are split (training: TP, Megatron's default; serving: TP / EP)")


@formulas.formula(unit="parameters", meaning="non-expert parameters held by one accelerator (the fullest stage)",
                  expression="(parameters − expert_parameters) × pipeline_stage_layers / (layers × tensor_parallel)",
                  detail=True)
def dense_parameters_per_device(parameters, expert_parameters, pipeline_stage_layers, layers, tensor_parallel):
    """The fullest stage's share of the layers, split over TP; (P − E)/(t·p) when p divides L."""
    return (parameters - expert_parameters) * pipeline_stage_layers / (layers * tensor_parallel)


@formulas.formula(unit="parameters", meaning="expert parameters held by one accelerator (the fullest stage)",
                  expression="expert_parameters × pipeline_stage_layers / (layers × expert_parallel"
                             " × expert_tensor_parallel)", detail=True)
def expert_parameters_per_device(expert_parameters, pipeline_stage_layers, layers, expert_parallel,
                                 expert_tensor_parallel):
    """Experts are split over EP (whole experts), expert tensor parallelism and the stages."""
    return expert_parameters * pipeline_stage_layers / (layers * expert_parallel * expert_tensor_parallel)


@formulas.formula(unit="parameters", meaning="parameters held by one accelerator before any sharding",
                  expression="dense_parameters_per_device + expert_parameters_per_device")
def parameters_per_device(dense_parameters_per_device, expert_parameters_per_device):
    return dense_parameters_per_device + expert_parameters_per_device
