"""Invariants over many valid contracts (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botec.contract import parse_contract
from botec.estimate import estimate


def contract(parameters, tokens, count, micro_batch, accumulation, sequence, layers, hidden, zero, mfu, scaling,
             factor, headroom, optimizer):
    return {
        "workload": {"model": {"parameters": parameters, "layers": layers, "hidden_size": hidden},
                     "tokens": tokens, "sequence_length": sequence},
        "supply": {"accelerator": {"name": "x", "peak_flops_per_s": "200 TFLOP/s", "memory": "80 GB"},
                   "count": count, "network": {"bandwidth": "25 GB/s"}, "storage": {"write_bandwidth": "1 GB/s"},
                   "price_per_accelerator_hour": 2.0, "power_per_accelerator": "700 W", "pue": 1.2},
        "strategy": {"micro_batch_size": micro_batch, "gradient_accumulation_steps": accumulation,
                     "zero_stage": zero, "optimizer": optimizer},
        "assumptions": {"single_accelerator_mfu": mfu, "scaling_efficiency": scaling,
                        "saved_tensor_factor": factor, "headroom": headroom},
    }


contracts = st.builds(
    contract,
    parameters=st.floats(1e6, 2e12),
    tokens=st.floats(1e6, 1e14),
    count=st.integers(1, 100_000),
    micro_batch=st.integers(1, 64),
    accumulation=st.integers(1, 64),
    sequence=st.integers(1, 131_072),
    layers=st.integers(1, 200),
    hidden=st.integers(1, 65_536),
    zero=st.sampled_from([0, 1, 2, 3]),
    mfu=st.floats(0.01, 1.0),
    scaling=st.floats(0.01, 1.0),
    factor=st.floats(0.01, 64),
    headroom=st.floats(0, 2),
    optimizer=st.sampled_from(["adam-mixed", "adam-bf16", "adam-fp32", "sgd-momentum", "adam-8bit"]),
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def evaluate(data):
    return estimate(parse_contract(data)).quantities


@SETTINGS
@given(contracts)
def test_no_valid_contract_yields_nan_or_infinity(data):
    for name, quantity in evaluate(data).items():
        assert math.isfinite(quantity.value), (name, quantity.value)


@SETTINGS
@given(contracts, st.integers(1, 1000))
def test_more_accelerators_never_lengthen_the_run(data, extra):
    fewer = evaluate(data)["run_seconds"].value
    data["supply"]["count"] += extra
    more = evaluate(data)["run_seconds"].value
    assert more <= fewer


@SETTINGS
@given(contracts, st.integers(1, 64))
def test_a_larger_micro_batch_never_lowers_planned_memory(data, extra):
    smaller = evaluate(data)["planned_device_bytes"].value
    data["strategy"]["micro_batch_size"] += extra
    larger = evaluate(data)["planned_device_bytes"].value
    assert larger >= smaller


@SETTINGS
@given(contracts)
def test_the_largest_fitting_batch_fits_and_one_more_does_not(data):
    q = evaluate(data)
    largest = q["max_micro_batch_size"].value
    if largest < 1 or largest > 10_000:
        return
    data["strategy"]["micro_batch_size"] = int(largest)
    assert evaluate(data)["memory_spare_bytes"].value >= -1e-6 * q["device_memory_bytes"].value
    data["strategy"]["micro_batch_size"] = int(largest) + 1
    assert evaluate(data)["memory_spare_bytes"].value < 0


@SETTINGS
@given(contracts)
def test_sharding_never_raises_the_state(data):
    states = []
    for stage in (0, 1, 2, 3):
        data["strategy"]["zero_stage"] = stage
        states.append(evaluate(data)["state_bytes"].value)
    assert states == sorted(states, reverse=True)
