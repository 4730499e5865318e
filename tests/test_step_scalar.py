"""The simulator's scalar engine step (botec.serving.step.scalar_engine_step) is engine_step_seconds, to the bit."""

from __future__ import annotations

import random

import pytest

from botec.serving.step import STEP_INPUTS, StepModel, engine_step_seconds, scalar_engine_step


def _costs(rng: random.Random, moe: bool) -> dict:
    costs = {name: rng.choice([0.0, rng.uniform(1e-10, 1e-2), 10 ** rng.uniform(-12, -3)]) for name in STEP_INPUTS}
    costs["expert_pick_probability"] = rng.choice([1 / 8, 2 / 64, 8 / 256, rng.random()]) if moe else 0.0
    if not moe and rng.random() < 0.5:
        costs["expert_read_seconds"] = 0.0
    costs["gemm_knee_exponent"] = rng.choice([0.0, 0.5, 1.0, rng.uniform(1, 4), 32.0])   # 0: the max form
    costs["two_batch_overlap"] = rng.choice([0.0, 1.0])   # 1: two micro-batches, the all-to-all m of r overlapped
    costs["moe_exchange_seconds_per_token"] = costs["communication_seconds_per_token"] * rng.choice(
        [0.0, rng.random(), 1.0])
    costs["allreduce_knee_exponent"] = rng.choice([0.0, 1.0, 0.25, rng.uniform(0.25, 4), 4.0])   # 0: the α–β sum
    costs["attention_knee_exponent"] = rng.choice([0.0, 0.5, 1.0, rng.uniform(1, 8), 32.0])   # 0: the roofline
    return costs


def _batch(rng: random.Random) -> tuple:
    def number(high):
        return rng.choice([0, rng.randint(0, high), float(rng.randint(0, high)), rng.uniform(0, high)])

    return (number(2048), number(4_000_000), number(8192), number(30_000_000), number(2048),
            rng.choice([1.0, 1, 2, 4.0, rng.uniform(1, 9)]))


@pytest.mark.parametrize("moe", [False, True])
def test_the_scalar_step_is_engine_step_seconds_to_the_bit(moe):
    rng = random.Random(20 + moe)
    for _ in range(200):
        costs = _costs(rng, moe)
        step = scalar_engine_step(**costs)
        for _ in range(100):
            batch = _batch(rng)
            assert step(*batch) == engine_step_seconds(*batch, **costs), (costs, batch)
            assert step(*batch[:5]) == engine_step_seconds(*batch[:5], **costs)


def test_a_step_model_binds_its_costs_once():
    costs = {name: 1e-6 * (k + 1) for k, name in enumerate(STEP_INPUTS)}
    model = StepModel(**costs | {"allreduce_knee_exponent": 0.5})
    step = model.scalar_step()
    assert step(64, 64 * 1152, 512, 512 * 300, 65) == model.step(64, 64 * 1152, 512, 512 * 300, 65)
    assert step(320, 64 * 1152, 0, 0, 64, 5) == model.step(320, 64 * 1152, 0, 0, 64, 5)
