"""Calibration: the estimate beside a measurement, the assumptions the measurement pins down, and
which assumption failed when the step time differs. Three kinds of measurement, a module each:

- a ``botec measure`` run (:mod:`.run`: compared part by part; MFU, collective and storage bandwidth
  back-solved through the graph's own formulas by :func:`botec.explore.solve.solve_for`; the saved-tensor
  factor measured; its docstring has the whole list);
- a Megatron-LM or torchtitan training log (:mod:`.training_log`);
- a vLLM or SGLang serving benchmark (:mod:`.serving`, its solver in :mod:`.serving_solver`).

The calibrated contract (:mod:`.written`) carries what was pinned down as ``provenance: measured`` with the
file and date; the workload must be the measured one unless overridden, and the device the contract's
accelerator (:func:`device_mismatch`): a measurement from another device is refused, or, with
``device_independent_only``, only what does not depend on the device is taken (never an efficiency).

A log that names its device (torchtitan's ``CUDA capacity: NAME``) is held to the same rule; with
``device_independent_only`` a log gives nothing to write (its figures all depend on the device). A log's
step must be one the contract's accelerators can run: an MFU above 1 or below :data:`~botec.measure.calibrate.
training_log.LEAST_PLAUSIBLE_MFU` on botec's count is refused as a figure in the wrong unit. Every value written
is one a contract accepts (:func:`~botec.measure.calibrate.written.calibrated_contract` estimates the result
before it is written), and a path the contract names is rewritten to resolve from the written contract's folder.

A Megatron-LM or torchtitan training log (:mod:`botec.measure.logs`) is a partial measurement: it is
compared on what it gives (step time, tokens/s, FLOP/s per accelerator in each side's FLOP count, peak
memory), the comparisons it cannot support are listed as missing, and the one assumption it pins down
is the efficiency that reproduces the measured step (the same back-solver, on ``step_seconds``). Its
workload is the contract's, checked against what the log states (global batch, sequence length, ...).

A vLLM or SGLang serving benchmark (:mod:`botec.measure.serving_bench`) is one server at one load: a
serving contract is estimated at the measured traffic on one replica (:func:`measured_contract_data`:
prompt and output tokens from the totals, the achieved request throughput as the load, no latency
targets, utilization cap 1) and compared on mean and percentile TTFT and TPOT, end-to-end latency and
output tokens/s per accelerator. The back-solver gives ``memory_bandwidth_efficiency`` from the mean
TPOT and ``matmul_efficiency`` from the mean TTFT, alternately until both settle; ``step_overhead``
from the TPOT when no efficiency in (0, 1] reproduces it; ``matmul_efficiency`` from the throughput
when the measured load is above botec's saturated capacity (:func:`calibrate_serving`).
"""
from __future__ import annotations

from botec.measure.calibrate.results import END_TO_END_NOTE, Calibration, Comparison, efficiency_assumption
from botec.measure.calibrate.run import calibrate_run, check_same_workload, device_mismatch, diagnose
from botec.measure.calibrate.serving import calibrate_serving, closed_loop_users, measured_contract_data
from botec.measure.calibrate.training_log import calibrate_log, check_log_workload, diagnose_log
from botec.measure.calibrate.written import calibrated_contract

__all__ = ["Comparison", "Calibration", "END_TO_END_NOTE", "efficiency_assumption", "calibrate", "calibrate_run",
           "check_same_workload", "device_mismatch", "diagnose", "calibrate_log", "check_log_workload",
           "diagnose_log", "calibrate_serving", "closed_loop_users", "measured_contract_data", "calibrated_contract"]


def calibrate(result, measurement, source: str, allow_workload_change: bool = False,
              device_independent_only: bool = False) -> Calibration:
    """Compare, back-solve and diagnose: a ``botec measure`` run (:func:`calibrate_run`) or a training log's
    partial measurement (:func:`calibrate_log`).

    ``device_independent_only``: take only what does not depend on the device (for a run on other hardware
    than the contract's accelerator, which is otherwise refused); never an efficiency."""
    from botec.measure.logs import LogMeasurement

    if isinstance(measurement, LogMeasurement):
        return calibrate_log(result, measurement, source, allow_workload_change, device_independent_only)
    return calibrate_run(result, measurement, source, allow_workload_change, device_independent_only)
