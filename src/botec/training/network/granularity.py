"""Network, the granularity of the data-parallel collectives: how many each whole-model message is split into.

FSDP runs one all-gather and one reduce-scatter per unit (a transformer block, and the root's units); DDP, ZeRO and
Megatron's distributed optimizer one per bucket of parameters. Each is a collective of its own, priced at its own
size (:mod:`botec.training.network.data_parallel`): at hundreds of ranks the latency of many small collectives, not
the bytes, sets the time. The stacks' defaults and their sources: :data:`GRANULARITY` (read by
:func:`granularity_given` into the inputs below).
"""

from botec.graph import Formulas, Given, ceil, maximum, where

__all__ = ["GRANULARITY", "granularity_given", "formulas"]

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
           virtual_pipeline_stages, message_bytes=0.0, bucket_bytes=0.0):
    """k = L_stage + root units for FSDP (root units ≥ 0); else max(1, ⌈P / v / bucket⌉ + v − 1, ⌈M / bucket bytes⌉)
    (a bucket of 0: none; v model chunks, only the first bucketed)."""
    by_parameters = where(bucket_parameters > 0,
                          ceil(trainable_dense_parameters_per_device / virtual_pipeline_stages
                               / maximum(bucket_parameters, 1.0)) + virtual_pipeline_stages - 1, 1.0)
    by_bytes = where(bucket_bytes > 0, ceil(message_bytes / maximum(bucket_bytes, 1.0)), 1.0)
    buckets = maximum(maximum(by_parameters, by_bytes), 1.0)
    return where(collective_root_units >= 0, pipeline_stage_layers + collective_root_units, buckets)


_CHUNKS = ("; with v interleaved model chunks Megatron-LM buckets only the first (get_model: disable_bucketing = "
           "model_chunk_idx > 0), the others reduce in one collective each")


@formulas.formula(unit="1", meaning="collectives each gradient reduction is split into: FSDP units or buckets",
                  expression="pipeline_stage_layers + collective_root_units if collective_root_units ≥ 0 else "
                             "max(1, ⌈trainable_dense_parameters_per_device / virtual_pipeline_stages / "
                             "gradient_bucket_parameters⌉ + virtual_pipeline_stages − 1, ⌈dense_gradient_bytes / "
                             "gradient_bucket_bytes⌉) (a bucket of 0: none): the non-expert gradients, the expert "
                             "ones reduce over their own group",
                  source="FSDP2 reduce-scatters per unit (torchtitan, torchtune); DDP (25 MiB), DeepSpeed and "
                         "Megatron-Core per bucket (GRANULARITY)" + _CHUNKS, detail=True, prose=True)
def gradient_collectives_per_reduction(collective_root_units, pipeline_stage_layers,
                                       trainable_dense_parameters_per_device, gradient_bucket_parameters,
                                       virtual_pipeline_stages, dense_gradient_bytes, gradient_bucket_bytes):
    return _units(collective_root_units, pipeline_stage_layers, trainable_dense_parameters_per_device,
                  gradient_bucket_parameters, virtual_pipeline_stages, dense_gradient_bytes, gradient_bucket_bytes)


@formulas.formula(unit="1", meaning="collectives each weight all-gather is split into: FSDP units or buckets",
                  expression="pipeline_stage_layers + collective_root_units if collective_root_units ≥ 0 else "
                             "max(1, ⌈trainable_dense_parameters_per_device / virtual_pipeline_stages / "
                             "gather_bucket_parameters⌉ + virtual_pipeline_stages − 1) (a bucket of 0: none): the "
                             "non-expert weights, the expert ones gather over their own group",
                  source="FSDP2 all-gathers per unit (torchtitan, torchtune); DeepSpeed ZeRO-3 per prefetch bucket, "
                         "Megatron's distributed optimizer per bucket (GRANULARITY)" + _CHUNKS, detail=True,
                  prose=True)
def parameter_collectives_per_gather(collective_root_units, pipeline_stage_layers,
                                     trainable_dense_parameters_per_device, gather_bucket_parameters,
                                     virtual_pipeline_stages):
    return _units(collective_root_units, pipeline_stage_layers, trainable_dense_parameters_per_device,
                  gather_bucket_parameters, virtual_pipeline_stages)


# --- the stacks' defaults ----------------------------------------------------------------------------------

_WHOLE = 0.0   # one message: no bucket

_DDP_BUCKET_BYTES = 25 * 2 ** 20
"""PyTorch DDP's bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel): 25 MiB of gradients per bucket."""
_FSDP_DDP = "without ZeRO/FSDP (zero_stage 0) DDP's 25 MiB gradient buckets (torch.nn.parallel.DistributedDataParallel)"

GRANULARITY = {
    "torchtitan": (2, None, None,
                   "torchtitan's apply_fsdp (models/llama3/infra/parallelize.py) shards the token "
                   "embeddings, every TransformerBlock and the final norm with the output projection as units of "
                   f"their own, then the root: one all-gather and one reduce-scatter per block and two more; {_FSDP_DDP}"),
    "torchtune": (1, None, None,
                  "torchtune's shard_model (training/_distributed.py) shards every decoder layer with "
                  f"fully_shard, then the root model: one collective per layer and one for the root; {_FSDP_DDP}"),
    "hf-trainer": (1, None, None,
                   "under FSDP accelerate wraps every decoder layer (transformer_based_wrap) and the root; "
                   f"{_FSDP_DDP}"),
    "deepspeed": (None, 5e8, 5e7,
                  "DeepSpeed's defaults (docs, config-json: reduce_bucket_size 5e8 elements per reduction; ZeRO-3 "
                  "stage3_prefetch_bucket_size 5e7 elements fetched at a time)"),
    "megatron-core": (None, "megatron", "megatron",
                      "Megatron-Core's distributed data parallel: bucket_size = max(40,000,000, 1,000,000 × DP) "
                      "parameters when --overlap-grad-reduce is on (Megatron-Core's DistributedDataParallelConfig "
                      "bucket_size: 'larger DP sizes need larger buckets to ensure collectives do not become "
                      "latency-bound'); the distributed optimizer gathers the parameters in the same buckets"),
    "megatron-2022": (None, None, None,
                      "Megatron-LM 2021-22 all-reduced the contiguous gradient buffer in one call after the "
                      "backward (its local DDP, no buckets)"),
    "xla": (None, None, None, "XLA schedules and combines its own collectives; one message assumed"),
}
"""Per stack: FSDP units besides the layers (None: the stack buckets instead; a number: per layer plus these under
ZeRO/FSDP, DDP's byte buckets without), parameters per gradient bucket and per gather bucket (None: one message),
the source."""


def granularity_given(stack_name: str, layout) -> dict[str, Given]:
    """``collective_root_units`` (FSDP units besides the layers; −1: not per layer), ``gradient_bucket_parameters``,
    ``gather_bucket_parameters`` (0: one message) and ``gradient_bucket_bytes`` (DDP's; 0: none) for the stack
    ``stack_name``."""
    root, gradient, gather, source = GRANULARITY.get(stack_name, (None, None, None, "no bucketing known"))
    fsdp = root is not None
    root = where(layout.zero_stage >= 1, float(root), -1.0) if fsdp else -1.0
    ddp_bytes = where(layout.zero_stage >= 1, 0.0, float(_DDP_BUCKET_BYTES)) if fsdp else 0.0

    def bucket(value):
        if value == "megatron":
            return maximum(40e6, 1e6 * layout.data_parallel)
        return _WHOLE if value is None else float(value)

    text = f"{stack_name}: {source}"
    return {"collective_root_units": Given(root, "catalog", text, "strategy.framework"),
            "gradient_bucket_parameters": Given(bucket(gradient), "catalog", text, "strategy.framework"),
            "gather_bucket_parameters": Given(bucket(gather), "catalog", text, "strategy.framework"),
            "gradient_bucket_bytes": Given(ddp_bytes, "catalog", text, "strategy.framework")}
