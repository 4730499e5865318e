"""The fine-tuning questions of issue 13, answered by solvers: the longest sequence and the largest micro-batch
that fit a card, and the cheapest recipe (full, full with offload, LoRA, QLoRA) side by side.

Each answer is checked against the estimate itself, one value on either side of it, and against the closed
form where there is one (``max_micro_batch_size``): two routes to the same number."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botec.contract import load_contract
from botec.estimation import estimate_file
from botec.explore.recipes import RECIPES, compare_recipes
from botec.explore.solve import SEQUENCE_STEP, optimize
from botec.inputs import build_inputs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
QLORA = EXAMPLES / "llama3.1-8b-qlora-rtx4090.yaml"
OFFLOAD = EXAMPLES / "llama2-7b-fsdp-offload-a10g.yaml"


def inputs_of(path: Path, overrides: list[str] | None = None):
    return build_inputs(load_contract(path, overrides or []), path.parent)


def fits(path: Path, overrides: list[str]) -> bool:
    return estimate_file(path, overrides).fits


def test_the_longest_sequence_that_fits_a_24_gb_card():
    """QLoRA of Llama-3.1-8B on an RTX 4090: the longest multiple of 128 tokens that fits, and the next does not."""
    solution = optimize(inputs_of(QLORA), "workload.sequence_length", "max", ["fits"])
    longest = int(solution.value)
    assert longest % SEQUENCE_STEP == 0 and longest > 4096  # the example's own 4,096 tokens fit
    assert fits(QLORA, [f"workload.sequence_length={longest}"])
    assert not fits(QLORA, [f"workload.sequence_length={longest + SEQUENCE_STEP}"])
    assert solution.row["memory_spare_bytes"] >= 0   # fits with the headroom kept (issue 28: the estimate's verdict)


def test_the_largest_micro_batch_by_the_solver_and_by_the_closed_form():
    solution = optimize(inputs_of(QLORA), "strategy.micro_batch_size", "max", ["fits"])
    largest = int(solution.value)
    assert largest >= 1
    assert fits(QLORA, [f"strategy.micro_batch_size={largest}"])
    assert not fits(QLORA, [f"strategy.micro_batch_size={largest + 1}"])
    assert estimate_file(QLORA).value("max_micro_batch_size") == largest


def test_the_longest_sequence_from_the_command_line(cli):
    code, out, err = cli("solve", str(QLORA), "--maximize", "workload.sequence_length", "--subject-to", "fits")
    assert code == 0, err
    longest = optimize(inputs_of(QLORA), "workload.sequence_length", "max", ["fits"]).value
    assert out.startswith(f"workload.sequence_length = {longest:,.0f}")


def test_a_range_with_a_step():
    from botec.explore.space import parse_axis

    axis = parse_axis("workload.sequence_length=1024..4096/1024", inputs_of(QLORA))
    assert axis.values.tolist() == [1024, 2048, 3072, 4096]


def recipe_estimate(path: Path, overrides: list[str]):
    return estimate_file(path, overrides)


def test_recipes_on_one_consumer_card_match_their_own_estimates():
    """Full fine-tuning of an 8B model cannot fit 24 GB; LoRA and QLoRA can, and each row is the estimate of
    the contract with that recipe's fields."""
    results = {r.recipe: r for r in compare_recipes(inputs_of(QLORA, ["supply.price_per_accelerator_hour=0.74"]))}
    assert set(results) == set(RECIPES)
    assert not results["full"].fits  # 8B × 16 B/parameter of state alone is 128 GB
    assert results["full"].value("planned_device_bytes") > 128e9
    assert results["qlora"].fits and results["lora"].fits
    # the Hugging Face loss keeps 10 B per logit: 4,096 × 128,256 × 10 B = 5.25 GB, which a 16-bit base cannot
    # afford on 24 GB; LoRA fits once a fused linear cross entropy keeps none, QLoRA without it
    assert results["lora"].loss == "fused-linear" and results["qlora"].loss is None
    # QLoRA's base is NF4: its plan is the smaller one
    assert results["qlora"].value("planned_device_bytes") < results["lora"].value("planned_device_bytes")
    for name in ("lora", "qlora"):
        base = "bf16" if name == "lora" else "nf4"
        loss = [f"strategy.loss={results[name].loss}"] if results[name].loss else []
        direct = recipe_estimate(QLORA, ["supply.price_per_accelerator_hour=0.74", f"strategy.lora.base_weights={base}",
                                         f"strategy.recompute={results[name].recompute}", *loss])
        for quantity in ("planned_device_bytes", "step_seconds", "training_cost_usd", "trainable_parameters"):
            assert results[name].value(quantity) == pytest.approx(direct.value(quantity), rel=1e-12)
    # without host memory stated, full fine-tuning with offload names the field to state
    assert "supply.host_memory" in results["full-offload"].why_not


def test_recipes_are_ranked_fits_first_then_by_cost():
    ranked = compare_recipes(inputs_of(OFFLOAD, ["supply.price_per_accelerator_hour=1.42"]))
    fitting = [r for r in ranked if r.fits]
    assert [r.fits for r in ranked] == sorted((r.fits for r in ranked), reverse=True)
    costs = [r.value("training_cost_usd") for r in fitting]
    assert costs == sorted(costs)
    # 8 × A10G: full fine-tuning with offload fits, and keeps less on the device than full fine-tuning without it
    by_name = {r.recipe: r for r in ranked}
    assert by_name["full-offload"].fits
    assert by_name["full-offload"].value("planned_device_bytes") < by_name["full"].value("planned_device_bytes")
    # cost = accelerator-hours × price, the same definition as the estimate's
    for r in fitting:
        assert r.value("training_cost_usd") == pytest.approx(
            r.value("run_seconds") / 3600 * 8 * 1.42, rel=1e-9)


def test_recipes_command(cli):
    code, out, err = cli("recipes", str(QLORA), "--recipes", "lora,qlora", "-f", "json")
    assert code == 0, err
    rows = json.loads(out)["recipes"]
    assert [r["recipe"] for r in rows] and {r["recipe"] for r in rows} == {"lora", "qlora"}
    assert all(r["fits"] for r in rows)
    code, out, err = cli("recipes", str(QLORA))
    assert code == 0, err
    assert "fastest that fits" in out and "supply.price_per_accelerator_hour" in out
    code, out, err = cli("recipes", str(QLORA), "--recipes", "qlora,dora")
    assert code != 0 and "--recipes: unknown recipe 'dora'" in err


def test_recipes_refuse_a_serving_contract(cli):
    code, out, err = cli("recipes", str(EXAMPLES / "serve-lesson-7b.yaml"))
    assert code == 2 and "workload.kind" in err and "Traceback" not in err


def test_offloading_past_the_host_memory_does_not_fit(cli):
    """Full fine-tuning with CPU offload of an 8B model keeps 16 B per parameter on the host (≈ 128 GB): with 16 GB
    of host memory the device fits and the host does not. The estimate refuses naming supply.host_memory (it used
    to exit 0, and the finding's formatting raised NameError), and the recipe says why."""
    code, out, err = cli("estimate", str(OFFLOAD), "--set", "supply.host_memory=64 GB")
    assert code == 2 and "supply.host_memory: offloading needs 121 GB of host memory per node, more than its 64 GB" \
        in err
    code, out, err = cli("estimate", str(OFFLOAD), "--set", "supply.host_memory=64 GB", "--allow-misfit",
                         "--units", "binary")
    assert code == 0 and "host memory does not fit" in out and "GiB short" in out
    results = {r.recipe: r for r in compare_recipes(inputs_of(QLORA, ["supply.host_memory=16 GB"]))}
    offload = results["full-offload"]
    assert not offload.fits and offload.value("memory_spare_bytes") >= 0   # the device fits, its headroom kept
    assert offload.why_not.startswith("host memory:") and "more than its 16 GB" in offload.why_not


def test_sweeps_and_solvers_count_the_host_memory_too():
    """With CPU offload, the host holds 16 B per parameter per node's share: on 8 × A10G the Llama-2-7B offload
    example needs 121 GB of host memory per node. A sweep of the host memory marks the rows below that infeasible
    (they counted only the device's memory), and the solver's smallest host memory that fits is the first above."""
    import numpy as np

    from botec.explore.space import Space, evaluate_space, fit_quantities, fits_mask, parse_axis

    inputs = inputs_of(OFFLOAD)
    assert fit_quantities(inputs) == ["memory_spare_bytes", "memory_spare_before_headroom_bytes",
                                      "host_memory_spare_bytes"]
    needed = estimate_file(OFFLOAD).value("host_bytes_per_node")
    axis = parse_axis("supply.host_memory=64 GB,128 GB,256 GB", inputs)
    columns, valid, _ = evaluate_space(Space(inputs, [axis]), wanted=fit_quantities(inputs))
    assert (columns["memory_spare_bytes"] >= 0).all()  # the device fits at every host memory
    assert fits_mask(columns, valid).tolist() == [bool(v >= needed) for v in (64e9, 128e9, 256e9)] == \
        [False, True, True]
    solution = optimize(inputs, "supply.host_memory", "min", ["fits"], over="supply.host_memory=64 GB,128 GB,256 GB")
    assert solution.value == 128e9
    # without a host memory stated (no offloading), the fit reads the device alone, as before
    assert fit_quantities(inputs_of(QLORA)) == ["memory_spare_bytes", "memory_spare_before_headroom_bytes"]
    assert np.isfinite(needed)


def test_a_full_fine_tune_that_cannot_fit_points_to_the_recipes(cli):
    """Full fine-tuning of an 8B model on one 24 GB card does not fit at any ZeRO stage or recomputation (128 GB of state);
    the error says
    what would (adapters, offloading) and which command compares them."""
    code, out, err = cli("estimate", str(QLORA), "--set", "strategy.lora=null")
    assert code == 2 and "no ZeRO stage or recomputation makes it fit" in err
    assert "`botec recipes CONTRACT` compares LoRA, QLoRA and CPU offload" in err
