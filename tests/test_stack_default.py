"""The training stack a contract runs on when it names none: XLA on Google TPUs, torchtitan elsewhere
(catalog/stacks.yaml ``default_by_vendor``), and a finding that says it was assumed and what its choices weigh
(issue 30 item 4: a TPU contract that names no framework runs on the XLA stack, and a finding says so)."""

from __future__ import annotations

import copy

import pytest

import botec

TPU = {"workload": {"kind": "training", "model": "llama-3.1-8b", "tokens": "10B tokens", "sequence_length": 4096},
       "supply": {"accelerator": "tpu-v5p", "count": 64},
       "strategy": {"global_batch_size": 512, "micro_batch_size": 2, "zero_stage": 3}}


def _stack_finding(result) -> str:
    return next(f.message for f in result.findings if f.message.startswith("stack:"))


def test_a_tpu_contract_that_names_no_stack_runs_on_xla_and_says_so():
    """MaxText's defaults (configs/base.yml): XLA fuses the elementwise ops (traffic factor 1, 5 kernels a layer, as
    fused stacks), the FP32 loss keeps 4 B per logit, weights, gradients and AdamW's two moments in FP32: 16 B per
    parameter, none of it a master copy."""
    result = botec.estimate(TPU)
    q = result.quantities
    assert q["elementwise_traffic_factor"].value == 1 and q["elementwise_kernels_per_layer"].value == 5
    assert q["loss_activation_bytes_per_logit"].value == 4
    assert (q["weight_bytes_per_parameter"].value, q["gradient_bytes_per_parameter"].value,
            q["master_weight_bytes_per_parameter"].value, q["optimizer_state_bytes_per_parameter"].value) == \
        (4, 4, 0, 8)
    # XLA's latency-hiding scheduler: collectives launched asynchronously behind the compute (the share hidden is
    # derived from that schedule, not a preset)
    assert q["data_parallel_schedule"].value == 2   # during the backward, the weights' gather under the next forward
    message = _stack_finding(result)
    assert message.startswith("stack: xla (assumed, the default on Google accelerators: state strategy.framework)")
    share = 3 * q["elementwise_seconds"].value / q["layer_seconds"].value
    assert f"its fused elementwise ops take {share * 100:.0f} % of a layer's time" in message
    assert "its loss keeps 4 B per logit" in message and "torchtitan" in message


def test_a_stated_stack_wins_and_is_not_called_assumed():
    contract = copy.deepcopy(TPU)
    contract["strategy"]["framework"] = "torchtitan"
    result = botec.estimate(contract)
    message = _stack_finding(result)
    assert message.startswith("stack: torchtitan (strategy.framework)") and "assumed" not in message
    assert result.quantities["elementwise_traffic_factor"].value == 4   # eager PyTorch, on a TPU as stated


def test_on_an_nvidia_gpu_the_default_is_torchtitan_and_the_finding_weighs_its_eager_ops():
    contract = copy.deepcopy(TPU)
    contract["supply"] = {"accelerator": "h100-sxm", "count": 64}
    result = botec.estimate(contract)
    q = result.quantities
    message = _stack_finding(result)
    assert message.startswith("stack: torchtitan (assumed, the default on NVIDIA accelerators")
    share = 3 * q["elementwise_seconds"].value / q["layer_seconds"].value
    assert 0 < share < 1
    assert (f"its eager elementwise ops take {share * 100:.0f} % of a layer's time (fused kernels move a quarter "
            "of their bytes) and its loss keeps 10 B per logit") in message


def test_the_xla_stack_can_be_named_and_an_unknown_one_is_a_one_line_error():
    contract = copy.deepcopy(TPU)
    contract["supply"] = {"accelerator": "h100-sxm", "count": 64}
    contract["strategy"]["framework"] = "xla"
    assert _stack_finding(botec.estimate(contract)).startswith("stack: xla (strategy.framework)")
    contract["strategy"]["framework"] = "jax"
    from botec.errors import ContractError

    with pytest.raises(ContractError) as caught:
        botec.estimate(contract)
    assert "strategy.framework" in str(caught.value) and "\n" not in str(caught.value)


def test_sc21_rises_with_model_size_without_naming_a_stack():
    """Issue 30's done-when: Megatron-LM's SC21 weak-scaling case (Narayanan et al. 2021, Table 1: 137 → 163
    TFLOP/s per A100 from 1.7B to 1T) holds its rising trend with its `framework: megatron-2022` line removed (the
    default stack, torchtitan's eager element-wise ops, costs the small models most: 1.7B 147 → 123 TFLOP/s)."""
    from pathlib import Path

    import yaml

    from botec.validate import _rising

    case = yaml.safe_load((Path(botec.__file__).parent / "validate/cases/train-megatron-sc21-weak-scaling.yaml")
                          .read_text(encoding="utf-8"))
    def figure(row, named: bool) -> float:
        contract = copy.deepcopy(case["contract"])
        if not named:
            del contract["strategy"]["framework"]
        for path, value in (row.get("set") or {}).items():
            node = contract
            *parents, leaf = path.split(".")
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = value
        return botec.estimate(contract).quantities[case["metric"]].value

    figures = [figure(row, named=False) for row in case["rows"]]
    assert _rising(figures)
    first, last = case["rows"][0], case["rows"][-1]
    # the eager element-wise ops are memory-bound, the GEMMs grow with h²: the default costs 1.7B more than 1T
    assert figures[0] / figure(first, named=True) < figures[-1] / figure(last, named=True) < 1
