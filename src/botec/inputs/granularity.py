"""How a stack splits the data-parallel collectives: one per FSDP unit, or per bucket of parameters.

A whole-model reduce-scatter, all-gather or all-reduce is never one collective: FSDP runs one per unit, DDP and
ZeRO one per bucket. Each is a message of its own with its own latency terms, which at hundreds of ranks outweigh
the bytes (NCCL's ring latency grows with the ranks: :mod:`botec.formulas.nccl_tuning`). Per stack (the framework's
default, each with its source):

    root units         one collective per transformer block, and these more (the root: embeddings, final norm, output)
    gradient_bucket    parameters per gradient bucket (the reduce-scatter or all-reduce)
    gather_bucket      parameters per weight all-gather bucket
    DDP                without ZeRO/FSDP the PyTorch stacks run DDP: 25 MiB of gradients per bucket

``None`` for a bucket: the whole message in one collective (no bucketing found in the stack's default).
"""

from __future__ import annotations

from botec.graph import Given, maximum

__all__ = ["GRANULARITY", "granularity_given"]

_WHOLE = 0.0   # one message: no bucket

_DDP_BUCKET_BYTES = 25 * 2 ** 20
"""PyTorch DDP's bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel): 25 MiB of gradients per bucket."""
_FSDP_DDP = "without ZeRO/FSDP (zero_stage 0) DDP's 25 MiB gradient buckets (torch.nn.parallel.DistributedDataParallel)"

GRANULARITY = {
    "torchtitan": (2, None, None,
                   "torchtitan's apply_fsdp (torchtitan/models/llama3/infra/parallelize.py) shards the token "
                   "embeddings, every TransformerBlock and the final norm with the output projection as units of "
                   f"their own, then the root: one all-gather and one reduce-scatter per block and two more; {_FSDP_DDP}"),
    "torchtune": (1, None, None,
                  "torchtune's shard_model (torchtune/training/_distributed.py) shards every decoder layer with "
                  f"fully_shard, then the root model: one collective per layer and one for the root; {_FSDP_DDP}"),
    "hf-trainer": (1, None, None,
                   "under FSDP accelerate wraps every decoder layer (transformer_based_wrap) and the root; "
                   f"{_FSDP_DDP}"),
    "deepspeed": (None, 5e8, 5e7,
                  "DeepSpeed's defaults (docs, config-json: reduce_bucket_size 5e8 elements per reduction; ZeRO-3 "
                  "stage3_prefetch_bucket_size 5e7 elements fetched at a time)"),
    "megatron-core": (None, "megatron", "megatron",
                      "Megatron-Core's distributed data parallel: bucket_size = max(40,000,000, 1,000,000 × DP) "
                      "parameters when --overlap-grad-reduce is on (megatron/core/distributed/"
                      "distributed_data_parallel_config.py: 'larger DP sizes need larger buckets to ensure "
                      "collectives do not become latency-bound'); the distributed optimizer gathers the parameters "
                      "in the same buckets"),
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
    from botec.graph import where

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
