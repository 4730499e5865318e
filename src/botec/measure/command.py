"""What `botec measure` does with an estimate: pick the architecture to run, run it with a progress bar,
or measure the full-size model's memory on fake tensors. Needs PyTorch (``botec[measure]``)."""

from __future__ import annotations

import sys
from typing import Callable

from botec.errors import UserError

__all__ = ["architecture_of", "run", "fake"]


def architecture_of(result, say: Callable[[str], None]):
    """The contract's architecture, or for a bare parameter count a stated guess at one."""
    if result.architecture is not None:
        return result.architecture
    from botec.architecture import infer_from_count

    arch = infer_from_count(result.value("parameters"), int(result.value("layers")), int(result.value("hidden_size")))
    say(f"the contract gives a bare parameter count: measuring {arch.name} ({arch.attention_heads} heads, FFN "
        f"{arch.ffn_size:,}, vocabulary {arch.vocab_size:,})")
    return arch


def run(result, arch, options, contract_name: str):
    """Measure; the measurement on rank 0, None elsewhere. Says on stderr when the loop starts."""
    import torch

    from botec.measure.harness import measure
    from botec.report.progress import steps_progress

    if options.peak_flops_per_s is None and torch.cuda.is_available():
        options.peak_flops_per_s = result.value("peak_flops_per_s")
    strategy = result.contract.strategy
    optimizer = strategy.optimizer if isinstance(strategy.optimizer, str) else "adam-mixed"

    def started(what: str) -> None:
        print(f"botec: measuring {what}", file=sys.stderr, flush=True)

    with steps_progress(options.steps + options.warmup) as report:
        return measure(arch, int(result.value("micro_batch_size")), int(result.value("sequence_length")), optimizer,
                       options, progress=report, contract_name=contract_name,
                       attention_flops=result.contract.assumptions.attention_flops, started=started,
                       lora=result.inputs.peft)


def fake(result, arch) -> list[str]:
    """The full-size model's step memory and its saved-tensor factor, on fake tensors."""
    import torch

    from botec.measure.fake import layer_saved_tensor_factor, step_memory
    from botec.report.measurement import fake_lines

    if arch.moe or arch.mla:
        raise UserError("--fake measures dense architectures (the reference model has no experts or MLA)")
    if result.inputs.peft is not None:
        raise UserError("--fake measures full training; a contract with strategy.lora is measured by a run "
                        "(botec measure without --fake)")
    micro, sequence = int(result.value("micro_batch_size")), int(result.value("sequence_length"))
    factor = layer_saved_tensor_factor(arch, micro, sequence, dtype=torch.bfloat16)
    categories, error = None, None
    try:
        categories = step_memory(arch, micro, sequence, dtype=torch.bfloat16)
    except Exception as failure:  # MemTracker is a private PyTorch tool
        error = failure.__class__.__name__
    return fake_lines(arch.name, micro, sequence, factor, result.value("saved_tensor_factor"), categories, error)
