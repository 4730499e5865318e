"""Memory, the persistent training state: weights, gradients, master weights and optimizer moments, as sharded.

ZeRO stage s shards the optimizer state (s ≥ 1), the gradients (s ≥ 2) and the weights (s = 3) over the sharding
group, the experts' over that group / EP (Rajbhandari et al. 2020 §5).
"""

from botec.formulas.weights import unsharded_state_bytes_per_parameter
from botec.graph import Formulas, maximum, where

formulas = Formulas(account="memory")


def _held(bytes_per_parameter, dense_parameters, dense_shards, expert_parameters, expert_shards):
    """Bytes one accelerator holds of one kind of state: b × (dense / its shards + experts / theirs)."""
    return bytes_per_parameter * (dense_parameters / dense_shards + expert_parameters / expert_shards)


def _shards(zero_stage, stage, degree):
    """Ways a state is split: ``degree`` once the ZeRO stage reaches ``stage``, else 1."""
    return where(zero_stage >= stage, degree, 1)


@formulas.formula(unit="1", meaning="ways the working weights are split (ZeRO-3 / FSDP full shard)",
                  expression="sharding_degree if zero_stage ≥ 3 else 1", detail=True)
def weight_shards(zero_stage, sharding_degree):
    return _shards(zero_stage, 3, sharding_degree)


@formulas.formula(unit="1", meaning="ways the gradients are split (ZeRO-2 and up)",
                  expression="sharding_degree if zero_stage ≥ 2 else 1", detail=True)
def gradient_shards(zero_stage, sharding_degree):
    return _shards(zero_stage, 2, sharding_degree)


@formulas.formula(unit="1", meaning="ways master weights and optimizer moments are split (ZeRO-1 and up)",
                  expression="sharding_degree if zero_stage ≥ 1 else 1", detail=True)
def optimizer_shards(zero_stage, sharding_degree):
    return _shards(zero_stage, 1, sharding_degree)


@formulas.formula(unit="1", meaning="ranks an expert's ZeRO shard group spans",
                  expression="max(sharding_degree / expert_parallel, 1)", detail=True)
def expert_sharding_degree(sharding_degree, expert_parallel):
    """Each expert lives on DP / EP data-parallel ranks; its state is sharded over those."""
    return maximum(sharding_degree / expert_parallel, 1)


@formulas.formula(unit="1", meaning="copies of a stage's parameters one accelerator holds: 2 under DualPipe, else 1",
                  expression="2 if pipeline_schedule ≥ 3 else 1",
                  source="DeepSeek-V3 Table 2: DualPipe keeps 2× the parameters (each rank runs stage i in one "
                         "direction and stage p − 1 − i in the other; deepseek-ai/DualPipe holds two modules per "
                         "rank, each with its gradients and optimizer state)", detail=True)
def pipeline_parameter_copies(pipeline_schedule):
    return where(pipeline_schedule >= 3, 2.0, 1.0)


@formulas.formula(unit="B", meaning="working weights held by one accelerator (under LoRA: the adapters, and the "
                                    "frozen base in its own format)",
                  expression="(weight_bytes_per_parameter × (trainable_dense_parameters_per_device / weight_shards"
                             " + trainable_expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 3"
                             " else 1)) + frozen_weight_memory_bytes) × pipeline_parameter_copies")
def weight_memory_bytes(weight_bytes_per_parameter, trainable_dense_parameters_per_device, weight_shards,
                        trainable_expert_parameters_per_device, expert_sharding_degree, zero_stage,
                        frozen_weight_memory_bytes, pipeline_parameter_copies):
    return (_held(weight_bytes_per_parameter, trainable_dense_parameters_per_device, weight_shards,
                  trainable_expert_parameters_per_device, _shards(zero_stage, 3, expert_sharding_degree))
            + frozen_weight_memory_bytes) * pipeline_parameter_copies


@formulas.formula(unit="B", meaning="gradients held by one accelerator (trainable parameters only)",
                  expression="gradient_bytes_per_parameter × (trainable_dense_parameters_per_device / gradient_shards"
                             " + trainable_expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 2"
                             " else 1)) × pipeline_parameter_copies")
def gradient_memory_bytes(gradient_bytes_per_parameter, trainable_dense_parameters_per_device, gradient_shards,
                          trainable_expert_parameters_per_device, expert_sharding_degree, zero_stage,
                          pipeline_parameter_copies):
    return _held(gradient_bytes_per_parameter, trainable_dense_parameters_per_device, gradient_shards,
                 trainable_expert_parameters_per_device, _shards(zero_stage, 2, expert_sharding_degree)) \
        * pipeline_parameter_copies


@formulas.formula(unit="B", meaning="master weights and optimizer moments held by one accelerator (trainable "
                                    "parameters only)",
                  expression="(master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter)"
                             " × (trainable_dense_parameters_per_device / optimizer_shards"
                             " + trainable_expert_parameters_per_device / (expert_sharding_degree if zero_stage ≥ 1"
                             " else 1)) × pipeline_parameter_copies")
def optimizer_memory_bytes(master_weight_bytes_per_parameter, optimizer_state_bytes_per_parameter,
                           trainable_dense_parameters_per_device, optimizer_shards,
                           trainable_expert_parameters_per_device, expert_sharding_degree, zero_stage,
                           pipeline_parameter_copies):
    return _held(master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter,
                 trainable_dense_parameters_per_device, optimizer_shards, trainable_expert_parameters_per_device,
                 _shards(zero_stage, 1, expert_sharding_degree)) * pipeline_parameter_copies


@formulas.formula(unit="B", meaning="persistent training state per accelerator",
                  expression="weight_memory_bytes + gradient_memory_bytes + optimizer_memory_bytes",
                  source="lesson 000: 10⁹ × (2 + 2 + 4 + 4 + 4) B = 16 GB")
def state_bytes(weight_memory_bytes, gradient_memory_bytes, optimizer_memory_bytes):
    """M_state = weights + gradients + (master weights + moments), each as sharded."""
    return weight_memory_bytes + gradient_memory_bytes + optimizer_memory_bytes


# The shared formula (botec.formulas.weights; the catalog's listing of the optimizer presets applies it too).
formulas.formula(unit="B/parameter", meaning="training state per parameter before any sharding",
                 expression="weight_bytes_per_parameter + gradient_bytes_per_parameter"
                            " + master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter",
                 source="lesson 000 table: 2 + 2 + 4 + 4 + 4 = 16 for Adam in mixed precision",
                 detail=True)(unsharded_state_bytes_per_parameter)


@formulas.formula(unit="B/parameter",
                  meaning="persistent training state per parameter held on one accelerator (after sharding)",
                  expression="state_bytes / parameters_per_device",
                  source="lesson 000 table: 2 + 2 + 4 + 4 + 4 = 16 for Adam in mixed precision")
def state_bytes_per_parameter(state_bytes, parameters_per_device):
    return state_bytes / parameters_per_device
