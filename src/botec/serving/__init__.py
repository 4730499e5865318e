"""The serving estimate: weights and KV cache, prefill and decode by roofline, replicas for a
traffic target, unit economics. Importing this package registers its formulas."""

from botec.serving import memory, latency, capacity  # noqa: F401
