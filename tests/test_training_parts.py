"""The training accounts split into parts (compute, memory, network): every part is in the TRAINING graph, in the
order its package lists it, so that no quantity disappears when a module is split."""

import importlib
import pkgutil

import pytest

from botec.graph import Formulas
from botec.training import TRAINING, compute, memory, network


def _in_graph(definition) -> bool:
    return definition.name in TRAINING and (TRAINING.definitions()[definition.name] is definition
                                            or definition in TRAINING.variants(definition.name).values())


@pytest.mark.parametrize("package", [compute, memory, network], ids=lambda p: p.__name__.rpartition(".")[2])
def test_every_part_of_a_split_account_is_in_the_training_graph(package):
    modules = [importlib.import_module(f"{package.__name__}.{info.name}")
               for info in pkgutil.iter_modules(package.__path__)]
    parts = [module.formulas for module in modules if isinstance(getattr(module, "formulas", None), Formulas)]
    assert len(parts) == len(modules) >= 3   # each module of the package is one part
    assert set(map(id, parts)) == set(map(id, package.PARTS[1:])) and package.PARTS[0] is package.inputs
    missing = [d.name for part in package.PARTS for d in part.definitions if not _in_graph(d)]
    assert missing == []


def test_the_parts_keep_the_accounts_order():
    """Within an account the report lists quantities in definition order: the lesson's memory chain reads
    state, activations, the plan; the network's, the gradients before the totals."""
    names = list(TRAINING.definitions())
    assert names.index("state_bytes") < names.index("activation_bytes") < names.index("planned_device_bytes")
    assert names.index("gradient_bytes") < names.index("tp_bytes_sent_per_step") < names.index(
        "host_link_bytes_per_step") < names.index("collective_bytes_sent_per_step")
    assert names.index("global_tokens_per_step") < names.index("pipeline_bubble_seconds") < names.index(
        "accelerator_hours")
