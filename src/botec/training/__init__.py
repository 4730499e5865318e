"""The training estimate's four accounts; importing this package registers their formulas."""

from botec.training import workload, compute, memory, network, storage  # noqa: F401
