"""Training logs as measurements: a Megatron-LM or torchtitan log read into a partial measurement.

A log gives what the training loop printed: the time (or the tokens/s) of each logged interval, the
per-accelerator FLOP/s in the tool's own FLOP count, the peak memory, and sometimes the batch it ran.
It gives no model shape, no per-phase times of botec's own (input wait, synchronization) and no
activations apart, so it becomes a :class:`LogMeasurement`, a partial measurement that
:func:`botec.measure.calibrate.calibrate` compares on what it has: step time, tokens/s, FLOP/s per
accelerator and peak memory. The workload itself comes from the contract, checked against what the
log states.

Formats, as the tools print them (checked against their sources), are described where each is read:
:mod:`botec.measure.logs.megatron` (Megatron-LM and its forks) and :mod:`botec.measure.logs.torchtitan`.
What a log becomes is in :mod:`~botec.measure.logs.records`; detection, the warm-up and outlier rules and the
file reading in :mod:`~botec.measure.logs.reading`.

Warm-up: the logged iterations before the third (``warmup=2``) are dropped, and so is any whose time
is more than twice the median of the others (a checkpoint save, a recompilation). The median of the
rest is the measured step; its spread (p90, min, max) is kept. Each logged line of Megatron-LM and
torchtitan is already an average over its log interval.

Example (``botec calibrate examples/gpt3-175b-search.yaml examples/logs/megatron-gpt3-175b.log`` does
this, then compares)::

    >>> from botec.measure.logs import parse
    >>> lines = [f" iteration {n:8d}/     100 | elapsed time per iteration (ms): {ms:.1f} | global batch size:    64 |"
    ...          for n, ms in [(10, 3000), (20, 1250), (30, 1200), (40, 1210), (50, 4000), (60, 1190)]]
    >>> log = parse("\\n".join(lines), "run.log")
    >>> log.format, log.step_seconds.median, log.used, log.stated["global_batch_size"]
    ('megatron', 1.2, (30, 40, 60), 64.0)
    >>> log.dropped
    ((10, 'warm-up'), (20, 'warm-up'), (50, 'slower than 2× the median of the rest'))
"""

from botec.measure.logs.reading import (MAX_LOG_BYTES, detect, median_without, parse, read, read_measurement,
                                        summarize)
from botec.measure.logs.records import (EXPECTED, FLOP_CONVENTIONS, FORMATS, OUTLIER_FACTOR, TOOL_NAMES, WARMUP,
                                        LoggedStep, LogMeasurement, Spread)

__all__ = ["Spread", "LoggedStep", "LogMeasurement", "FORMATS", "TOOL_NAMES", "FLOP_CONVENTIONS", "EXPECTED",
           "WARMUP", "OUTLIER_FACTOR", "MAX_LOG_BYTES", "detect", "parse", "read", "read_measurement", "summarize",
           "median_without"]
