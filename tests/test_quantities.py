"""The quantity graph: one definition per formula, evaluated on floats and on numpy arrays."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from botec.errors import ContractError
from botec.estimation import estimate_file
from botec.graph import Formulas, Given, Graph
from botec.graph.explain import explain
from botec.serving import SERVING
from botec.training import TRAINING

from conftest import EXAMPLES


def test_a_graph_is_built_from_the_formulas_it_is_given():
    """Two formulas in a graph of their own: the engine needs no global registry and imports no formula."""
    part = Formulas(account="compute")
    part.input("tokens", unit="tokens", meaning="tokens")
    part.input("tokens_per_step", unit="tokens", meaning="tokens per step")

    @part.formula(unit="steps", meaning="steps", expression="tokens / tokens_per_step")
    def steps(tokens, tokens_per_step):
        return tokens / tokens_per_step

    graph = Graph("two formulas", part)
    result = graph.evaluate({"tokens": Given(1e9), "tokens_per_step": Given(16_384.0)})
    assert result["steps"].value == pytest.approx(61_035.15625)
    assert set(graph.definitions()) == {"tokens", "tokens_per_step", "steps"}
    with pytest.raises(ValueError, match="defined twice"):
        Graph("twice", part, part)


def test_every_definition_has_its_metadata_and_reads_declared_inputs():
    for graph in (TRAINING, SERVING):
        for choices in [{}] + [{choice: option} for choice, options in graph.choices.items() for option in options]:
            registry = graph.definitions(choices)
            for name, definition in registry.items():
                assert definition.meaning and definition.unit, name
                if not definition.is_input:
                    assert definition.expression, name
                    for input_name in definition.inputs + tuple(c.name for c in definition.zero_when):
                        assert input_name in registry, f"{graph.name}: {name} reads undeclared {input_name}"


def _python(expression: str) -> str:
    """A formula's written expression as Python: × − ⌈⌉ ⌊⌋ ² ≥ ≤ = and thousands separators."""
    text = re.sub(r"(\d),(\d{3})", r"\1\2", expression)
    text = re.sub(r"(\d),(\d{3})", r"\1\2", text)
    for written, python in (("×", "*"), ("−", "-"), ("⌈", "ceil("), ("⌉", ")"), ("⌊", "floor("), ("⌋", ")"),
                            ("²", "**2"), ("≥", ">="), ("≤", "<="), (" = ", " == ")):
        text = text.replace(written, python)
    return text


@pytest.mark.parametrize("name", ["lesson-finetune-1b.yaml", "llama3.1-70b-pretrain.yaml", "llama2-7b-fsdp-finetune.yaml",
                                  "mixtral-8x7b-finetune.yaml", "gpt3-175b-search.yaml", "serve-llama3.1-8b-h100.yaml",
                                  "serve-deepseek-v3-h200.yaml", "serve-llama2-70b-a100-tp4.yaml",
                                  "llama3-405b-16k-gpu-failures.yaml", "llama3.1-8b-qlora-rtx4090.yaml"])
def test_each_written_expression_computes_what_its_function_does(name):
    """The expression a report prints is a second statement of the formula: it must agree with the code.

    Each non-prose expression is read as Python over the resolved values and compared with the
    function's value (formulas that say ``prose=True`` are words, and skipped)."""
    result = estimate_file(EXAMPLES / name)
    values = {n: q.value for n, q in result.quantities.items()}
    checked = 0
    for quantity in result.quantities.values():
        definition = quantity.definition
        if definition.is_input or quantity.provenance != "derived" or definition.prose or quantity.condition:
            continue
        computed = eval(_python(definition.expression), {"ceil": math.ceil, "floor": math.floor, "min": min,
                                                         "max": max, "maximum": max, "minimum": min}, values)
        assert float(computed) == pytest.approx(quantity.value, rel=1e-9, abs=1e-12), (quantity.name,
                                                                                       definition.expression)
        checked += 1
    assert checked > 40


def test_the_same_definitions_evaluate_elementwise_on_arrays(lesson):
    counts = np.array([1.0, 2.0, 4.0, 8.0, 64.0])
    batches = np.array([1.0, 2.0, 2.0, 4.0, 8.0])
    inputs = lesson.inputs
    arrays = inputs.graph.evaluate(inputs.vary({"supply.count": counts, "strategy.micro_batch_size": batches}).given,
                                   choices=inputs.choices)
    for i, (count, batch) in enumerate(zip(counts, batches)):
        varied = inputs.vary({"supply.count": float(count), "strategy.micro_batch_size": float(batch)})
        scalars = inputs.graph.evaluate(varied.given, choices=inputs.choices)
        for name, quantity in scalars.items():
            value = arrays[name].value
            element = value[i] if isinstance(value, np.ndarray) else value
            assert element == pytest.approx(quantity.value), name
    # spot check against the lesson: element 2 is the reference workload
    assert arrays["steps"].value[2] == 61_036
    assert arrays["planned_device_bytes"].value[2] == pytest.approx(25.1836e9, rel=1e-4)


def test_a_given_value_wins_over_the_formula(lesson):
    given = dict(lesson.inputs.given)
    given["step_seconds"] = Given(0.8, "measured", "trial run", None)
    result = TRAINING.evaluate(given, choices=lesson.choices)
    assert result["step_seconds"].provenance == "measured"
    # the network share now uses the measured step: 0.12 s / 0.8 s
    assert result["collective_floor_share"].value == pytest.approx(0.12 / 0.8)


def test_formulas_with_missing_inputs_are_left_out_and_name_what_they_miss(lesson):
    given = {k: v for k, v in lesson.inputs.given.items() if k != "storage_write_bytes_per_s"}
    result = TRAINING.evaluate(given, choices=lesson.choices)
    assert "checkpoint_bytes" in result
    assert "checkpoint_write_seconds" not in result and "checkpoint_pause_share" not in result
    assert TRAINING.blocking_inputs(given, result, "checkpoint_pause_share") == ["storage_write_bytes_per_s"]
    assert "training_cost_usd" not in result        # no price in the lesson
    assert lesson.inputs.why_absent("training_cost_usd", result) == (
        "training_cost_usd needs supply.price_per_accelerator_hour: cost needs a price per accelerator-hour")


def test_undeclared_inputs_are_refused():
    with pytest.raises(KeyError, match="does not declare: paramters"):
        TRAINING.evaluate({"paramters": Given(1e9)})
    with pytest.raises(KeyError, match="serving graph does not declare: zero_stage"):
        SERVING.evaluate({"zero_stage": Given(0.0)})


def test_a_group_of_one_rank_communicates_nothing_and_needs_no_link(lesson):
    """``zero_when``: TP 1 has no tensor-parallel collectives, whatever the link; nothing stands in for it."""
    given = {k: v for k, v in lesson.inputs.given.items() if not k.startswith("tp_link")}
    result = TRAINING.evaluate(given, choices={"step_time": "components", "activations": "saved_tensor_factor"})
    assert result["tp_communication_seconds"].value == 0.0
    assert result["tp_communication_seconds"].condition == "tensor_parallel = 1"
    line = dict((text.split(" = ")[0], text) for _, text in explain("tp_communication_seconds", result))
    assert line["tp_communication_seconds"] == "tp_communication_seconds = 0 s  [as tensor_parallel = 1]"


def test_explain_substitutes_shared_units_and_folds_numbers(lesson):
    lines = dict((line.split(" = ")[0].strip(), line) for _, line in explain("ring_bytes_sent_per_step",
                                                                             lesson.quantities))
    assert lines["ring_bytes_sent_per_step"] == ("ring_bytes_sent_per_step = gradient_sync_bytes_sent_per_step "
                                                 "= 3 GB")
    assert lines["gradient_all_reduce_bytes_sent_per_step"].endswith(
        "= 1 × 2 × 3 / 4 × 2 GB = 3 GB")
    assert lines["gradient_all_reduce_ranks"].endswith("= 4  [as zero_stage = 0]")
    assert lines["gradient_bytes"].endswith("= 1 × 10⁹ × 2 B/parameter = 2 GB")
    assert lines["data_parallel_degree"].startswith("data_parallel_degree = 4 accelerators  [derived, "
                                                    "strategy.data_parallel: accelerators / (TP × PP × CP)]")


def test_explain_in_binary_units(lesson):
    lines = explain("planned_device_bytes", lesson.quantities, "binary")
    assert lines[0][1].endswith("= (16.9 + 0 + 1.86 − 0) GiB × 1.25 = 23.5 GiB")
    assert lines[1][1].endswith("= 14.9 GiB + 2 GiB + 0 B + 0 B − 0 B − 0 B − 0 B = 16.9 GiB")


def test_a_contract_field_that_is_not_a_number_cannot_be_varied(lesson):
    with pytest.raises(ContractError, match="not a number this contract states"):
        lesson.inputs.vary({"supply.accelerator": 1.0})
