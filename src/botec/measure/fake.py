"""Memory without the hardware: the real PyTorch footprint of a training step, on fake tensors.

Under ``FakeTensorMode`` tensors carry shapes and dtypes but no storage, so a full-size layer
stack (a 70B model's layers on a laptop) runs its forward, backward and optimizer step in
seconds without allocating it; PyTorch's ``MemTracker`` records what each category would hold.
The per-layer activation bytes (the difference between two depths, so embeddings and logits
cancel) divided by one hidden-state tensor is the lesson's saved-tensor factor, measured.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from botec.architecture import Architecture
from botec.measure.model import Transformer


def step_memory(arch: Architecture, micro_batch_size: int, sequence_length: int, fake: bool = True,
                dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Peak bytes by category (PARAM, GRAD, OPT, ACT, TEMP, TOTAL) of the second training step."""
    from contextlib import nullcontext

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    torch.manual_seed(0)
    default_dtype = torch.get_default_dtype()
    with FakeTensorMode() if fake else nullcontext():
        torch.set_default_dtype(dtype)  # (`.to(dtype)` cannot swap fake parameters)
        try:
            model = Transformer(arch)
        finally:
            torch.set_default_dtype(default_dtype)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        tokens = torch.randint(0, arch.vocab_size, (micro_batch_size, sequence_length))

        def train_step():
            model(tokens, tokens).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        train_step()  # the first step creates the optimizer state; measure the second, as a real run would
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            train_step()
        snapshot = tracker.get_tracker_snapshot("peak")
    categories: dict[str, float] = {}
    for device_snapshot in snapshot.values():
        for key, value in device_snapshot.items():
            name = str(key).split(".")[-1].upper()
            categories[name] = categories.get(name, 0.0) + float(value)
    return categories


def saved_activation_bytes(arch: Architecture, micro_batch_size: int, sequence_length: int,
                           dtype: torch.dtype = torch.float32, fake: bool = True) -> float:
    """Bytes autograd keeps for the backward pass during one forward (each storage once, weights excluded)."""
    from contextlib import nullcontext

    from torch._subclasses.fake_tensor import FakeTensorMode

    default_dtype = torch.get_default_dtype()
    seen: dict[int, int] = {}
    with FakeTensorMode() if fake else nullcontext():
        torch.set_default_dtype(dtype)
        try:
            model = Transformer(arch)
        finally:
            torch.set_default_dtype(default_dtype)
        weights = {p.untyped_storage()._cdata for p in model.parameters()}
        tokens = torch.randint(0, arch.vocab_size, (micro_batch_size, sequence_length))

        def pack(tensor):
            storage = tensor.untyped_storage()
            if storage._cdata not in weights:
                seen[storage._cdata] = max(seen.get(storage._cdata, 0), storage.nbytes())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(tokens, tokens)
    return float(sum(seen.values()))


def layer_saved_tensor_factor(arch: Architecture, micro_batch_size: int, sequence_length: int,
                              dtype: torch.dtype = torch.float32) -> dict[str, float]:
    """Activations one transformer layer keeps for the backward pass, as hidden-state-sized tensors.

    factor = (saved(2 layers) − saved(1 layer)) / (b · s · h · bytes per element): the difference of
    two depths cancels the embeddings and the logits.
    """
    from botec.inputs.model import architecture_quantities

    one = saved_activation_bytes(replace(arch, layers=1), micro_batch_size, sequence_length, dtype)
    two = saved_activation_bytes(replace(arch, layers=2), micro_batch_size, sequence_length, dtype)
    element = torch.tensor([], dtype=dtype).element_size()
    per_layer = two - one
    one_layer = replace(arch, layers=1)
    counted = architecture_quantities(one_layer, "full", micro_batch_size, sequence_length, element,
                                      ("hidden_state_bytes", "activation_bytes"))
    return {"activation_bytes_per_layer": per_layer, "hidden_state_bytes": counted["hidden_state_bytes"],
            "saved_tensor_factor": per_layer / counted["activation_bytes"]}
