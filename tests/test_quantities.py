"""The quantity graph: one definition per formula, evaluated on floats and on numpy arrays."""

from __future__ import annotations

import numpy as np
import pytest

from botec.estimate import given_quantities
from botec.quantities import Given, definitions, evaluate, explain


def test_every_formula_is_registered_once_with_its_metadata():
    registry = definitions()
    assert len(registry) == len(set(registry))
    for name, definition in registry.items():
        assert definition.meaning, name
        assert definition.unit, name
        if definition.function is not None:
            assert definition.expression, name
            for input_name in definition.inputs:
                assert input_name in registry, f"{name} reads undeclared {input_name}"


def test_the_same_definitions_evaluate_elementwise_on_arrays(lesson):
    given, _, _ = given_quantities(lesson.contract)
    counts = np.array([1.0, 2.0, 4.0, 8.0, 64.0])
    batches = np.array([1.0, 2.0, 2.0, 4.0, 8.0])
    swept = dict(given)
    swept["accelerators"] = Given(counts)
    swept["micro_batch_size"] = Given(batches)
    arrays = evaluate(swept)
    for i, (count, batch) in enumerate(zip(counts, batches)):
        single = dict(given)
        single["accelerators"] = Given(float(count))
        single["micro_batch_size"] = Given(float(batch))
        scalars = evaluate(single)
        for name, quantity in scalars.items():
            value = arrays[name].value
            element = value[i] if isinstance(value, np.ndarray) else value
            assert element == pytest.approx(quantity.value), name
    # spot check against the lesson: element 2 is the reference workload
    assert arrays["steps"].value[2] == 61_036
    assert arrays["planned_device_bytes"].value[2] == pytest.approx(25.1836e9, rel=1e-4)


def test_a_given_value_wins_over_the_formula(lesson):
    given, _, _ = given_quantities(lesson.contract)
    given = dict(given)
    given["step_seconds"] = Given(0.8, "measured", "trial run", None)
    result = evaluate(given)
    assert result["step_seconds"].provenance == "measured"
    # the network share now uses the measured step: 0.12 s / 0.8 s
    assert result["collective_floor_share"].value == pytest.approx(0.12 / 0.8)


def test_formulas_with_missing_inputs_are_left_out(lesson):
    given, _, _ = given_quantities(lesson.contract)
    given = {k: v for k, v in given.items() if k != "storage_write_bytes_per_s"}
    result = evaluate(given)
    assert "checkpoint_bytes" in result
    assert "checkpoint_write_seconds" not in result
    assert "checkpoint_pause_share" not in result
    assert "training_cost_usd" not in result        # no price in the lesson


def test_undeclared_inputs_are_refused():
    with pytest.raises(KeyError, match="undeclared"):
        evaluate({"paramters": Given(1e9)})


def test_explain_substitutes_shared_units_and_folds_numbers(lesson):
    lines = dict((line.split(" = ")[0].strip(), line) for _, line in explain("ring_bytes_sent_per_step",
                                                                             lesson.quantities))
    # the conditional formula shows the branch its values take (no ZeRO-3 here)
    assert lines["ring_bytes_sent_per_step"].startswith(
        "ring_bytes_sent_per_step = 2 × (data_parallel_degree − 1) / data_parallel_degree × dense_gradient_bytes + ")
    assert lines["ring_bytes_sent_per_step"].endswith("= 2 × 3 / 4 × 2 GB + 2 × 3 / 4 × 0 B = 3 GB  [as zero_stage = 0]")
    assert lines["gradient_bytes"].endswith("= 1 × 10⁹ × 2 B/parameter = 2 GB")
    assert lines["data_parallel_degree"] == ("data_parallel_degree = accelerators / (tensor_parallel × pipeline_parallel"
                                             " × context_parallel) = 4 / (1 × 1 × 1) = 4 accelerators")


def test_explain_in_binary_units(lesson):
    first = explain("planned_device_bytes", lesson.quantities, "binary")[0][1]
    assert first.endswith("= (14.9 + 2 + 1.86) GiB × 1.25 = 23.5 GiB")
