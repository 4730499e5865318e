"""Invariants over many valid contracts (hypothesis): bare parameter counts with the lesson's methods, and
real models on real layouts (TP, PP with uneven stages, CP, EP, ZeRO) with the component step model and
Korthikanti's activations, the compute both flat (a stated MFU) and op-level (the default for a known
architecture: every op on its roofline with the family's efficiency figures, measured or a named calibration)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate
from botec.inputs import build_inputs

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.filter_too_much])


def bare(parameters, tokens, count, micro_batch, accumulation, sequence, layers, hidden, zero, mfu, scaling,
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


bare_contracts = st.builds(
    bare, parameters=st.floats(1e6, 2e12), tokens=st.floats(1e6, 1e14), count=st.integers(1, 100_000),
    micro_batch=st.integers(1, 64), accumulation=st.integers(1, 64), sequence=st.integers(1, 131_072),
    layers=st.integers(1, 200), hidden=st.integers(1, 65_536), zero=st.sampled_from([0, 1, 2, 3]),
    mfu=st.floats(0.01, 1.0), scaling=st.floats(0.01, 1.0), factor=st.floats(0.01, 64), headroom=st.floats(0, 2),
    optimizer=st.sampled_from(["adam-mixed", "adam-bf16", "adam-fp32", "sgd-momentum", "adam-8bit"]))

MODELS = {"llama-2-7b": (32, 32, 32, None), "llama-3.1-8b": (32, 32, 8, None), "qwen2.5-7b": (28, 28, 4, None),
          "mixtral-8x7b": (32, 32, 8, 8), "llama-2-13b": (40, 40, 40, None)}


@st.composite
def layouts(draw, compute: str | None = None):
    """A valid layout of a real model, built so: TP divides the heads (and the KV rule holds), EP divides DP.

    ``compute``: op_level (the default compute model of a known architecture: no MFU stated), flat (a stated
    single-accelerator MFU) or None to draw either (and the lesson's efficiency method beside them)."""
    name = draw(st.sampled_from(list(MODELS)))
    layers, heads, kv_heads, experts = MODELS[name]
    tp = draw(st.sampled_from([t for t in (1, 2, 4, 8) if heads % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0)]))
    pp = draw(st.sampled_from([1, 2, 3, 4]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4, 8]))
    ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if experts and experts % e == 0 and dp % e == 0] or [1]))
    strategy = {"tensor_parallel": tp, "pipeline_parallel": pp, "context_parallel": cp, "expert_parallel": ep,
                "zero_stage": draw(st.integers(0, 3)), "micro_batch_size": draw(st.integers(1, 2)),
                "gradient_accumulation_steps": draw(st.integers(1, 4)),
                "recompute": draw(st.sampled_from(["none", "selective", "full"])),
                "sequence_parallel": tp > 1 and draw(st.booleans())}
    if pp > 1 and draw(st.booleans()):
        strategy |= {"pipeline_schedule": "interleaved", "virtual_pipeline_stages": 2}
    step_time = "components" if compute else draw(st.sampled_from(["components", "efficiency"]))
    compute = compute or ("flat" if step_time == "efficiency" else draw(st.sampled_from(["op_level", "flat"])))
    assumptions = {"step_time_model": step_time,
                   "activation_model": draw(st.sampled_from(["korthikanti", "saved_tensor_factor"]))}
    if compute == "flat":
        assumptions["single_accelerator_mfu"] = draw(st.floats(0.1, 0.7))
    else:   # the op-level model, left to the default; the measured figures or the named calibration
        assumptions |= {"attention_kernel": draw(st.sampled_from(["flash", "eager"]))}
        if draw(st.booleans()):
            assumptions["efficiency_set"] = "megatron-2022-fit"
    if step_time == "efficiency":
        assumptions["scaling_efficiency"] = 0.9
    data = {"workload": {"model": name, "tokens": "10B", "sequence_length": 4096},
            "supply": {"accelerator": draw(st.sampled_from(["h100-sxm", "a100-sxm-80gb", "mi300x"])),
                       "count": tp * pp * cp * dp, "cluster": {"node": "dgx-h100"},
                       "storage": {"write_bandwidth": "10 GB/s"}, "price_per_accelerator_hour": 2.0, "pue": 1.2},
            "strategy": strategy, "assumptions": assumptions}
    try:
        build_inputs(parse_contract(data))
    except ContractError:
        assume(False)  # e.g. interleaving whose chunks do not divide an uneven stage
    return data


def evaluate(data):
    return estimate(parse_contract(data)).quantities


def with_strategy(data, **changes):
    return {**data, "strategy": {**data["strategy"], **changes}}


@SETTINGS
@given(st.one_of(bare_contracts, layouts()))
def test_no_valid_contract_yields_nan_or_infinity(data):
    for name, quantity in evaluate(data).items():
        assert math.isfinite(quantity.value), (name, quantity.value)


@SETTINGS
@given(layouts(), st.integers(1, 4))
def test_a_larger_micro_batch_never_lowers_planned_memory(data, extra):
    smaller = evaluate(data)["planned_device_bytes"].value
    larger = evaluate(with_strategy(data, micro_batch_size=data["strategy"]["micro_batch_size"] + extra))
    assert larger["planned_device_bytes"].value >= smaller


@SETTINGS
@given(layouts())
def test_more_recomputation_never_needs_more_activations_and_never_less_work(data):
    assume(data["assumptions"]["activation_model"] == "korthikanti")
    runs = [evaluate(with_strategy(data, recompute=r)) for r in ("none", "selective", "full")]
    activations = [q["activation_bytes"].value for q in runs]
    flops = [q["hardware_flops_per_token"].value for q in runs]
    assert activations == sorted(activations, reverse=True)
    assert flops == sorted(flops)


@SETTINGS
@given(layouts())
def test_sharding_never_raises_the_state(data):
    states = [evaluate(with_strategy(data, zero_stage=stage))["state_bytes"].value for stage in (0, 1, 2, 3)]
    assert states == sorted(states, reverse=True)


@SETTINGS
@given(layouts())
def test_more_data_parallel_replicas_never_lengthen_the_compute_per_step(data):
    """The same global batch over twice the replicas: each accelerator computes half as much per step."""
    global_batch = data["strategy"]["micro_batch_size"] * data["strategy"]["gradient_accumulation_steps"] * 8 * \
        data["supply"]["count"]
    one = with_strategy(data, global_batch_size=global_batch, gradient_accumulation_steps=None)
    two = {**one, "supply": {**one["supply"], "count": 2 * one["supply"]["count"]}}
    assert evaluate(two)["compute_seconds_per_step"].value <= evaluate(one)["compute_seconds_per_step"].value


@SETTINGS
@given(layouts(), st.sampled_from(["strategy.micro_batch_size", "strategy.zero_stage", "strategy.recompute",
                                   "assumptions.single_accelerator_mfu"]))
def test_a_sweep_row_is_the_estimate_of_that_configuration(data, path):
    """The vectorized path (arrays through vary and the graph) and the single estimate agree on every quantity."""
    if path == "assumptions.single_accelerator_mfu" and "single_accelerator_mfu" not in data["assumptions"]:
        path = "assumptions.matmul_efficiency"   # the op-level model's efficiency in its place
    inputs = build_inputs(parse_contract(data))
    values = {"strategy.micro_batch_size": [1.0, 3.0], "strategy.zero_stage": [0.0, 3.0],
              "strategy.recompute": [0.0, 2.0], "assumptions.single_accelerator_mfu": [0.25, 0.55],
              "assumptions.matmul_efficiency": [0.6, 0.8]}[path]
    varied = inputs.vary({path: np.array(values)})
    assume(varied.valid.all() and not varied.unplaced)
    arrays = inputs.graph.evaluate(varied.given, choices=inputs.choices)
    words = {0.0: "none", 2.0: "full"}
    for row, value in enumerate(values):
        section, field = path.split(".")
        written = words[value] if field == "recompute" else value
        single = evaluate({**data, section: {**data[section], field: written}})
        # every quantity, not a chosen few: the collective floor of a group of one rank spanning nodes was NaN
        # in a sweep (its pooled link 0 B/s) and a number in the estimate
        assert set(single) <= set(arrays), (set(single) - set(arrays), path)
        for name, quantity in single.items():
            element = float(np.broadcast_to(arrays[name].value, (2,))[row])
            assert element == float(quantity.value) or math.isclose(element, quantity.value, rel_tol=1e-12,
                                                                     abs_tol=1e-300), (name, path, element)


@settings(SETTINGS, max_examples=30)
@given(layouts(compute="op_level"), st.integers(1, 3))
def test_the_op_level_model_keeps_the_invariants(data, extra):
    """The default compute model of a known architecture (op-level: every op on its roofline), every draw:
    finite quantities, more data-parallel replicas never lengthen the compute per step, a larger micro-batch
    never needs less memory."""
    one = evaluate(data)
    assert "layer_seconds" in one                    # the op-level model is the one in force
    for name, quantity in one.items():
        assert math.isfinite(quantity.value), (name, quantity.value)
    larger = evaluate(with_strategy(data, micro_batch_size=data["strategy"]["micro_batch_size"] + extra))
    assert larger["planned_device_bytes"].value >= one["planned_device_bytes"].value
    global_batch = data["strategy"]["micro_batch_size"] * data["strategy"]["gradient_accumulation_steps"] * 8 * \
        data["supply"]["count"]
    fixed = with_strategy(data, global_batch_size=global_batch, gradient_accumulation_steps=None)
    doubled = {**fixed, "supply": {**fixed["supply"], "count": 2 * fixed["supply"]["count"]}}
    assert evaluate(doubled)["compute_seconds_per_step"].value <= evaluate(fixed)["compute_seconds_per_step"].value


@SETTINGS
@given(bare_contracts)
def test_the_largest_fitting_batch_fits_and_one_more_does_not(data):
    q = evaluate(data)
    largest = q["max_micro_batch_size"].value
    if largest < 1 or largest > 10_000:
        return
    data["strategy"]["micro_batch_size"] = int(largest)
    assert evaluate(data)["memory_spare_bytes"].value >= -1e-6 * q["device_memory_bytes"].value
    data["strategy"]["micro_batch_size"] = int(largest) + 1
    assert evaluate(data)["memory_spare_bytes"].value < 0
