"""`botec measure`: train the contract's model (or a stated proxy) for a few steps and record what happened.

Per step: input wait (time to get the next batch from a real DataLoader), forward + backward,
gradient synchronization (an explicit all-reduce of the flattened gradients, so it is timed on
its own), optimizer step, total. Once: the peak memory split into parameters, gradients,
optimizer state and activations (PyTorch's MemTracker), and a checkpoint saved with
torch.distributed.checkpoint (time and bytes). Under ``torchrun`` every rank trains its own
data-parallel replica (gloo on CPU, NCCL on CUDA); rank 0 writes the file.

With the contract's ``strategy.lora`` the model is fine-tuned as LoRA does it: the base held frozen in 16 bits
(BF16 in place of a quantized NF4, FP4 or INT8 base, which needs bitsandbytes' kernels: said in the
measurement's notes), adapters on the targeted linears, the optimizer over the adapters only, the step under
16-bit autocast on CPU as on CUDA, and the checkpoint of what a resume needs (adapters and optimizer state).
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from botec.architecture import Architecture, breakdown, lora_parameters
from botec.inputs.model import architecture_quantities
from botec.measure.measurement import (Checkpoint, Environment, MeasuredLora, MeasuredModel, MeasuredWorkload,
                                       Measurement, Memory, Sample, summarize)
from botec.measure.model import Proxy, Transformer, add_lora, choose_proxy, scaled, trainable_parameters

BASE_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}       # a frozen base the run can hold as stated
ADAPTER_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Options:
    steps: int = 10
    warmup: int = 2
    input_delay_seconds: float = 0.0       # sleep in the data loader per batch: a slow input pipeline on purpose
    max_parameters: float = 30e6           # larger models are measured as a proxy (CPU default)
    proxy: Proxy | None = None             # force a scale-down
    peak_flops_per_s: float | None = None  # the device's rated peak, for MFU
    checkpoint: bool = True
    track_memory: bool = True
    seed: int = 0


class TokenDataset(torch.utils.data.Dataset):
    """Random token sequences (the estimate's workload needs their shape, not their text)."""

    def __init__(self, vocab_size: int, sequence_length: int, length: int, delay_seconds: float, seed: int):
        self.vocab_size, self.sequence_length, self.length = vocab_size, sequence_length, length
        self.delay_seconds, self.seed = delay_seconds, seed

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        tokens = torch.randint(0, self.vocab_size, (self.sequence_length + 1,), generator=generator)
        return tokens[:-1], tokens[1:]


def _distributed() -> tuple[int, int, str | None]:
    """(rank, world size, backend), initializing the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, None
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size(), backend


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _optimizer(name: str, parameters) -> tuple[torch.optim.Optimizer, str]:
    if name.startswith("sgd"):
        return torch.optim.SGD(parameters, lr=1e-3, momentum=0.9), "SGD with momentum"
    note = "" if name in ("adam-mixed", "adam-fp32", "adam-bf16") else f" (in place of {name})"
    return torch.optim.AdamW(parameters, lr=1e-4), f"AdamW{note}"


def _track_memory(model, optimizer, batch, train_step) -> dict | None:
    """Peak memory of one training step by category (PyTorch's MemTracker); None where unavailable."""
    try:
        from torch.distributed._tools.mem_tracker import MemTracker
    except ImportError:
        return None

    class FrozenAwareMemTracker(MemTracker):
        """MemTracker that installs its gradient hooks only where every parameter takes a gradient: PyTorch 2.13's
        registers one on each parameter of each module it enters, which raises for LoRA's frozen base (the
        adapters are hooked when their own modules run)."""

        def _track_module_params_and_buffers(self, module, install_grad_hooks: bool = True):
            hooks = install_grad_hooks and all(p.requires_grad for p in module.parameters())
            return super()._track_module_params_and_buffers(module, hooks)

    tracker = FrozenAwareMemTracker()
    tracker.track_external(model, optimizer)
    try:
        with tracker:
            train_step(*batch)
        snapshot = tracker.get_tracker_snapshot("peak")
    except Exception:  # the tracker is a private tool: never let it break a measurement
        return None
    categories: dict[str, float] = {}
    for device_snapshot in snapshot.values():
        for key, value in device_snapshot.items():
            categories[str(key).split(".")[-1].upper()] = categories.get(str(key).split(".")[-1].upper(), 0) + value
    return categories


def _lora(model: Transformer, arch: Architecture, lora, notes: list[str]) -> tuple[MeasuredLora, torch.dtype, str]:
    """Freeze the base in its stated 16-bit precision (BF16 for a quantized one, noted), add the adapters; returns
    what was measured, the autocast dtype and the precision in words."""
    base = BASE_DTYPES.get(lora.base_weights)
    if base is None:
        base = torch.bfloat16
        notes.append(f"strategy.lora.base_weights is {lora.base_weights}: measured with the frozen base in BF16 (the "
                     f"{lora.base_weights} base needs bitsandbytes' kernels, not used here), so the parameters' memory "
                     "is a BF16 base's and the step has no dequantization (neither its time nor its 16-bit buffer); "
                     "the adapters, their gradients and optimizer state and the activations are as with the "
                     "quantized base")
    model.to(base)
    count = lora_parameters(arch, lora.rank, lora.target_modules)
    add_lora(model, tuple(dict.fromkeys(m.role for m in count.adapted)), lora.rank, lora.alpha,
             ADAPTER_DTYPES[lora.adapter_precision])
    measured_base = "bf16" if base == torch.bfloat16 else "fp16"
    measured = MeasuredLora(rank=lora.rank, target_modules=list(count.modules), alpha=lora.alpha,
                            base_weights=lora.base_weights, measured_base_weights=measured_base,
                            adapter_precision=lora.adapter_precision)
    words = f"{measured_base} frozen base, {lora.adapter_precision} LoRA adapters, {measured_base} autocast"
    return measured, base, words


def measure(arch: Architecture, micro_batch_size: int, sequence_length: int, optimizer_name: str,
            options: Options, progress: Callable[[int, int, float], None] | None = None,
            contract_name: str | None = None, attention_flops: str = "full",
            started: Callable[[str], None] | None = None, lora=None) -> Measurement | None:
    """Run the measurement; returns it on rank 0 (None on other ranks).

    FLOPs per token, one hidden state and the activations per unit of the saved-tensor factor are the
    training graph's own quantities for the measured architecture (``attention_flops``: the contract's
    convention), so measured and estimated MFU count the same work. ``started`` is told, once the
    model is built and the loop is about to run, what is being measured. ``lora``: the contract's
    :class:`botec.contract.training.LoraPolicy`, to fine-tune adapters on a frozen base.
    """
    rank, world, backend = _distributed()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if torch.cuda.is_available() else "cpu")
    proxy = options.proxy or choose_proxy(arch, options.max_parameters)
    measured_arch = scaled(arch, proxy)
    torch.manual_seed(options.seed)
    model = Transformer(measured_arch).to(device)
    notes: list[str] = []
    measured_lora, compute_dtype, autocast = None, torch.bfloat16, device.type == "cuda"
    precision = "fp32 weights, bf16 autocast" if device.type == "cuda" else "fp32 (CPU)"
    if lora is not None:
        measured_lora, compute_dtype, precision = _lora(model, measured_arch, lora, notes)
        autocast = True
    optimizer, optimizer_label = _optimizer(optimizer_name, [p for p in model.parameters() if p.requires_grad])
    element_bytes = float(torch.tensor([], dtype=compute_dtype).element_size()) if autocast else 4.0
    dataset = TokenDataset(measured_arch.vocab_size, sequence_length,
                           (options.steps + options.warmup + 2) * micro_batch_size * world,
                           options.input_delay_seconds, options.seed + rank)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, world, rank, shuffle=False) if world > 1 \
        else None
    loader = iter(torch.utils.data.DataLoader(dataset, batch_size=micro_batch_size, sampler=sampler, num_workers=0))

    def forward_backward(tokens, targets):
        with torch.autocast(device.type, dtype=compute_dtype, enabled=autocast):
            loss = model(tokens.to(device), targets.to(device))
        loss.backward()

    def synchronize_gradients():
        if world == 1:
            return
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def train_step(tokens, targets):
        forward_backward(tokens, targets)
        synchronize_gradients()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    counted = architecture_quantities(measured_arch, attention_flops, micro_batch_size, sequence_length, element_bytes,
                                      ("model_flops_per_token", "activation_bytes"), lora)
    gradient_bytes = float(sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad))
    samples: list[Sample] = []
    total = options.warmup + options.steps
    if started is not None and rank == 0:
        started(f"{measured_arch.name} on {world} × {device.type}, {total} steps")
    for index in range(total):
        start = time.perf_counter()
        tokens, targets = next(loader)
        fetched = time.perf_counter()
        forward_backward(tokens, targets)
        _synchronize(device)
        computed = time.perf_counter()
        synchronize_gradients()
        _synchronize(device)
        synced = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _synchronize(device)
        done = time.perf_counter()
        if index >= options.warmup:
            samples.append(Sample(step=index - options.warmup, input_wait_seconds=fetched - start,
                                  forward_backward_seconds=computed - fetched, sync_seconds=synced - computed,
                                  optimizer_seconds=done - synced, step_seconds=done - start))
        if progress is not None and rank == 0:
            progress(index + 1, total, done - start)

    memory = None
    if options.track_memory:
        batch = next(loader)
        categories = _track_memory(model, optimizer, batch, train_step)
        if categories:
            activations = categories.get("ACT", 0.0)
            memory = Memory(method="torch MemTracker, one step after warm-up",
                            parameters_bytes=categories.get("PARAM", 0.0), gradients_bytes=categories.get("GRAD", 0.0),
                            optimizer_bytes=categories.get("OPT", 0.0), activations_bytes=activations,
                            temporary_bytes=categories.get("TEMP", 0.0),
                            peak_bytes=categories.get("TOTAL", sum(categories.values())),
                            activation_bytes_per_element=element_bytes,
                            saved_tensor_factor=activations / counted["activation_bytes"])

    checkpoint = _checkpoint(model, optimizer, world, trainable_only=lora is not None) if options.checkpoint else None
    if world > 1:
        dist.barrier()
    if rank != 0:
        return None
    parts = breakdown(measured_arch)
    flops_per_token = counted["model_flops_per_token"]
    tokens_per_step = micro_batch_size * sequence_length * world
    workload = MeasuredWorkload(
        model=MeasuredModel(name=measured_arch.name, layers=measured_arch.layers,
                            hidden_size=measured_arch.hidden_size, attention_heads=measured_arch.attention_heads,
                            kv_heads=measured_arch.kv_heads, ffn_size=measured_arch.ffn_size,
                            vocab_size=measured_arch.vocab_size, parameters=parts.total,
                            trainable_parameters=trainable_parameters(model), model_flops_per_token=flops_per_token),
        micro_batch_size=micro_batch_size, sequence_length=sequence_length, data_parallel_degree=world,
        gradient_bytes=gradient_bytes, attention_flops=attention_flops,
        tokens_per_step=tokens_per_step, precision=precision, optimizer=optimizer_label,
        proxy_of=None if proxy.is_full_size else arch.name,
        proxy_scale=None if proxy.is_full_size else {"width_divisor": proxy.width_divisor,
                                                     "layer_divisor": proxy.layer_divisor},
        lora=measured_lora)
    environment = Environment(
        device=device.type, device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_name(),
        world_size=world, backend=backend, torch_version=torch.__version__, threads=torch.get_num_threads(),
        peak_flops_per_s=options.peak_flops_per_s)
    return Measurement(
        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), contract=contract_name,
        workload=workload, environment=environment, samples=samples,
        summary=summarize(samples, tokens_per_step, flops_per_token, world, options.peak_flops_per_s),
        memory=memory, checkpoint=checkpoint, notes=notes)


def _checkpoint(model, optimizer, world: int, trainable_only: bool = False) -> Checkpoint | None:
    """Save model and optimizer state with torch.distributed.checkpoint to a scratch folder; time and size it.
    ``trainable_only`` (LoRA): the adapters and their optimizer state, not the frozen base (as PEFT saves)."""
    import warnings

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    folder = Path(tempfile.mkdtemp(prefix="botec-checkpoint-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model_state, optimizer_state = get_state_dict(model, optimizer, options=StateDictOptions(
                ignore_frozen_params=trainable_only))
            if world > 1:
                dist.barrier()
            start = time.perf_counter()
            dcp.save({"model": model_state, "optim": optimizer_state}, checkpoint_id=str(folder))
            if world > 1:
                dist.barrier()
            seconds = time.perf_counter() - start
        written = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        return Checkpoint(seconds=seconds, bytes=float(written))
    except Exception:  # a checkpoint failure must not lose the step measurements
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "CPU"
