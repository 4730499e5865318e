"""Network, the granularity of the data-parallel collectives: how many each whole-model message is split into.

FSDP runs one all-gather and one reduce-scatter per unit (a transformer block, and the root's units); DDP, ZeRO and
Megatron's distributed optimizer one per bucket of parameters. Each is a collective of its own, priced at its own
size (:mod:`botec.training.network.data_parallel`): at hundreds of ranks the latency of many small collectives, not
the bytes, sets the time. The stacks' defaults and their sources: :mod:`botec.inputs.granularity`.
"""

from botec.graph import Formulas, ceil, maximum, where

formulas = Formulas(account="network")

formulas.input("collective_root_units", unit="1", detail=True,
               meaning="FSDP units besides the transformer blocks (the root's: embeddings, final norm, output); −1 "
                       "where the stack buckets by parameters instead")
formulas.input("gradient_bucket_parameters", unit="parameters", detail=True,
               meaning="parameters per gradient reduction bucket (0: the whole gradient in one collective)")
formulas.input("gradient_bucket_bytes", unit="B", detail=True,
               meaning="gradient bytes per bucket where the stack buckets by bytes (PyTorch DDP: 25 MiB); 0: none")
formulas.input("gather_bucket_parameters", unit="parameters", detail=True,
               meaning="parameters per weight all-gather bucket (0: every weight in one collective)")


def _units(collective_root_units, pipeline_stage_layers, trainable_dense_parameters_per_device, bucket_parameters,
           message_bytes=0.0, bucket_bytes=0.0):
    """k = L_stage + root units for FSDP (root units ≥ 0), else max(1, ⌈P / bucket⌉, ⌈M / bucket bytes⌉) (a bucket
    of 0: none)."""
    by_parameters = where(bucket_parameters > 0,
                          ceil(trainable_dense_parameters_per_device / maximum(bucket_parameters, 1.0)), 1.0)
    by_bytes = where(bucket_bytes > 0, ceil(message_bytes / maximum(bucket_bytes, 1.0)), 1.0)
    buckets = maximum(maximum(by_parameters, by_bytes), 1.0)
    return where(collective_root_units >= 0, pipeline_stage_layers + collective_root_units, buckets)


@formulas.formula(unit="1", meaning="collectives each gradient reduction is split into: FSDP units or buckets",
                  expression="pipeline_stage_layers + collective_root_units if collective_root_units ≥ 0 else "
                             "max(1, ⌈trainable_dense_parameters_per_device / gradient_bucket_parameters⌉, "
                             "⌈dense_gradient_bytes / gradient_bucket_bytes⌉) (a bucket of 0: none): the non-expert "
                             "gradients, the expert ones reduce over their own group",
                  source="FSDP2 reduce-scatters per unit (torchtitan, torchtune); DDP (25 MiB), DeepSpeed and "
                         "Megatron-Core per bucket (botec.inputs.granularity)", detail=True)
def gradient_collectives_per_reduction(collective_root_units, pipeline_stage_layers,
                                       trainable_dense_parameters_per_device, gradient_bucket_parameters,
                                       dense_gradient_bytes, gradient_bucket_bytes):
    return _units(collective_root_units, pipeline_stage_layers, trainable_dense_parameters_per_device,
                  gradient_bucket_parameters, dense_gradient_bytes, gradient_bucket_bytes)


@formulas.formula(unit="1", meaning="collectives each weight all-gather is split into: FSDP units or buckets",
                  expression="pipeline_stage_layers + collective_root_units if collective_root_units ≥ 0 else "
                             "max(1, ⌈trainable_dense_parameters_per_device / gather_bucket_parameters⌉) (a bucket "
                             "of 0: none): the non-expert weights, the expert ones gather over their own group",
                  source="FSDP2 all-gathers per unit (torchtitan, torchtune); DeepSpeed ZeRO-3 per prefetch bucket, "
                         "Megatron's distributed optimizer per bucket (botec.inputs.granularity)", detail=True)
def parameter_collectives_per_gather(collective_root_units, pipeline_stage_layers,
                                     trainable_dense_parameters_per_device, gather_bucket_parameters):
    return _units(collective_root_units, pipeline_stage_layers, trainable_dense_parameters_per_device,
                  gather_bucket_parameters)
