"""The serving estimate: weights and KV cache, the engine step of in-flight batching on the rooflines, a
replica at saturation and under load, replicas for a traffic target (a rate, or users in a closed loop:
:mod:`botec.serving.closed`) within its latency targets, unit economics, composed into the ``SERVING`` graph."""

from botec import economics
from botec.formulas import device, links, transformer, weights
from botec.graph import Graph
from botec.serving import (allreduce, attention, capacity, closed, expert_gemms, experts, instances, latency, memory,
                           speculation, step_costs)

_PARTS = [transformer.formulas, device.formulas, weights.formulas, links.formulas, memory.formulas, expert_gemms.formulas,
          experts.formulas, attention.formulas, step_costs.formulas, allreduce.formulas, latency.formulas,
          speculation.formulas, capacity.formulas, closed.formulas, instances.formulas, economics.facility,
          economics.serving]
# the prefill instance's own layout: the formulas above that read the layout, a second time under its names
SERVING = Graph("serving", *_PARTS, instances.mirrored(_PARTS))

# What every serving estimate must resolve; a missing one names the contract field to state.
REQUIRED = ("weight_memory_bytes", "kv_bytes_per_request", "max_concurrent_requests", "time_to_first_token_seconds",
            "time_per_output_token_floor_seconds", "time_per_output_token_seconds", "decode_batch_size",
            "offline_output_tokens_per_s_per_accelerator", "requests_per_s_per_replica", "replicas",
            "serving_accelerators")
