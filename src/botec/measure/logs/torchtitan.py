"""torchtitan's training log, line by line, into the steps it printed (:func:`parse_torchtitan`).

torchtitan (``torchtitan/components/metrics.py`` ``MetricsProcessor.log``; ``train.py`` before
2025), with ANSI colours and the ``[titan] DATE - root - INFO -`` prefix:

- 2024: ``step: N  loss: L  memory: M GiB(P%)  wps: W  mfu: U%``;
- late 2024: ``tps:`` (tokens per second per accelerator) in place of ``wps:``;
- 2025-02 (PR #847): ``tflops: X`` (with thousands separators, like ``tps``);
- 2025-06 (PR #1339, v0.1.0 on): ``grad_norm: G`` after the loss;
- main (2026): ``mfu: N/A`` when training quantized;
- ``validate step: N  loss: ...  tps: ...`` lines are evaluation, not training steps;
- configuration where printed: ``Trainer is initialized with local batch size B, global batch size
  G, gradient accumulation steps A, sequence length S, ...`` (v0.1.0 to v0.2.2) or ``... with T
  tokens per DP rank, U tokens per train step, gradient accumulation steps A, maximum context length
  S, ...`` (main); ``Building device mesh with parallelism: pp=.., dp_replicate=.., dp_shard=..,
  cp=.., tp=..`` or ``Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]``; ``CUDA capacity:
  NAME with X GiB memory``.

torchtitan's ``memory`` is the allocator's max reserved in GiB since the previous logged step, its
``tps`` the tokens per second per accelerator, its ``tflops`` the model FLOPs per accelerator
(6 × the non-embedding parameters + attention 12·L·H·d·S per token up to v0.2.0, 6·L·H·d·S from
PR #1923, recomputation not counted) and its ``mfu`` those FLOPs over its own peak table.
"""

from __future__ import annotations

import math
import re

from botec.measure.logs.records import GIBIBYTE, LoggedStep, Parsed, clean, first_number, positive

# torchtitan
_STEP = re.compile(r"(?<!validate )(?<![\w-])step:\s*(\d+)\s+loss:\s*(\S+)(.*)$")
_TT_MEMORY = re.compile(r"\bmemory:\s*(\d+(?:\.\d+)?)\s*GiB\s*\(\s*(\d+(?:\.\d+)?)\s*%\s*\)")
# the rates and the MFU read with a sign, so that a negative one is refused (records.positive), not passed over
_TT_TPS = re.compile(r"\b([tw]ps):\s*(-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?))")
_TT_TFLOPS = re.compile(r"\btflops:\s*(-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?))")
_TT_MFU = re.compile(r"\bmfu:\s*(-?\d+(?:\.\d+)?)\s*%")
_TT_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})[ T]\d{2}:\d{2}:\d{2}")
_TT_MESH = re.compile(r"Building device mesh with parallelism:\s*(.*)$")
# Linear in a line's length (a log may hold a 1 MB line): the mesh's lists and the device's name are bounded
# (LIST_CHARACTERS), where an unbounded ``[^\]]*`` or ``.+?`` after each of many repeated prefixes scanned to the
# end of the line from every one of them (quadratic).
LIST_CHARACTERS = 200
"""The most characters of a device mesh's list of names or sizes, and of a device's name."""
_TT_MESH_OLD = re.compile(r"Building \d+-D device mesh with \[([^\]]{0,%d})\],\s*\[([^\]]{0,%d})\]"
                          % (LIST_CHARACTERS, LIST_CHARACTERS))
_TT_CAPACITY = re.compile(r"\b(?:CUDA|GPU|ROCM|XPU|NPU) capacity:\s*(.{1,%d}?) with (\d+(?:\.\d+)?)\s*GiB memory"
                          % LIST_CHARACTERS)
_TT_CONFIG = {
    "local_batch_size": re.compile(r"local batch size (\d+)"),
    "global_batch_size": re.compile(r"global batch size (\d+)"),
    "gradient_accumulation_steps": re.compile(r"gradient accumulation steps (\d+)"),
    "sequence_length": re.compile(r"(?:sequence length|maximum context length) (\d+)"),
    "tokens_per_step": re.compile(r"(\d+) tokens per train step"),
}
EXAMPLE_LINE = "'step: N  loss: L  memory: M GiB(P%)  tps: T ...'"
START_HINTS = ("[titan] ", "Trainer is initialized with", "Training starts at step")   # stopped before step 1


def is_step_line(raw: str) -> bool:
    """Whether a raw line is a torchtitan training step line with a rate (for detecting the format)."""
    if "step:" not in raw:
        return False
    match = _STEP.search(clean(raw))
    return match is not None and _TT_TPS.search(match.group(3)) is not None


def parse_torchtitan(lines: list[str]) -> Parsed:
    """The training steps, configuration, device mesh and device name of a torchtitan log's lines (the first
    line of a repeated step kept; ``validate step`` lines are evaluation, not steps)."""
    steps: list[LoggedStep] = []
    seen: set[int] = set()
    stated: dict = {}
    duplicates = 0
    device_name = None
    for number, raw in enumerate(lines, start=1):
        line = clean(raw)
        match = _STEP.search(line)
        if match:
            rest = match.group(3)
            rate = _TT_TPS.search(rest)
            if rate is None:
                continue
            step_number = int(match.group(1))
            if step_number in seen:
                duplicates += 1
                continue
            seen.add(step_number)
            # the step time is the tokens per step over the rate; the TFLOP/s and MFU are compared as ratios
            tokens_per_s = positive(float(rate.group(2).replace(",", "")), number, rate.group(2), rate.group(1),
                                    "number of tokens per second per accelerator (a step that processed no tokens?)")
            memory, tflops, mfu = _TT_MEMORY.search(rest), _TT_TFLOPS.search(rest), _TT_MFU.search(rest)
            date = _TT_DATE.search(line[:match.start()])
            steps.append(LoggedStep(
                step_number, number,
                tokens_per_s_per_device=tokens_per_s,
                flops_per_s_per_device=positive(float(tflops.group(1).replace(",", "")), number, tflops.group(1),
                                                "tflops", "rate in TFLOP/s") * 1e12 if tflops else None,
                mfu=positive(float(mfu.group(1)), number, mfu.group(1), "mfu", "share in %") / 100.0 if mfu else None,
                memory_reserved_bytes=float(memory.group(1)) * GIBIBYTE if memory else None,
                date=date.group(1) if date else None))
            continue
        if "Trainer is initialized with" in line:
            for name, pattern in _TT_CONFIG.items():
                found = pattern.search(line)
                if found:
                    stated[name] = float(found.group(1))
            continue
        match = _TT_MESH.search(line)
        if match:
            degrees = {key: first_number(value) for key, _, value in
                       (part.strip().partition("=") for part in match.group(1).split(","))}
            world = [degrees.get(k) for k in ("pp", "dp_replicate", "dp_shard", "cp", "tp")]
            if all(d is not None and d >= 1 for d in world):
                stated["accelerators"] = float(math.prod(world))
            for key, name in (("tp", "tensor_parallel"), ("pp", "pipeline_parallel")):
                if degrees.get(key) is not None and degrees[key] >= 1:
                    stated[name] = degrees[key]
            continue
        match = _TT_MESH_OLD.search(line)
        if match:
            names = [n.strip().strip("'\"") for n in match.group(1).split(",") if n.strip()]
            sizes = [first_number(s) for s in match.group(2).split(",") if s.strip()]
            if sizes and all(s is not None and s >= 1 for s in sizes) and len(names) == len(sizes):
                stated["accelerators"] = float(math.prod(sizes))
                for key, name in (("tp", "tensor_parallel"), ("pp", "pipeline_parallel")):
                    if key in names:
                        stated[name] = sizes[names.index(key)]
            continue
        match = _TT_CAPACITY.search(line)
        if match:
            device_name = match.group(1).strip()
    return Parsed("torchtitan", steps, stated, device_name=device_name, duplicates=duplicates)

