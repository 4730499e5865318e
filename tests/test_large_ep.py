"""Large expert-parallel serving (issue 20, item 4): EP beyond the expert count with EPLB's redundant experts,
uneven placements, data-parallel attention over many nodes with the all-to-all on the NICs, and prefill instances of
their own layout, each checked against a hand derivation.

DeepSeek-V3's shape (catalog/models.yaml): 61 layers, the first 3 dense, 58 MoE layers of 256 routed experts and
1 shared, each expert 3 × 7,168 × 2,048 = 44,040,192 parameters; 671,026,419,200 parameters in all.
"""

import pytest

from botec.contract import parse_contract
from botec.errors import ContractError
from botec.estimation import estimate
from botec.serving import instances

PER_EXPERT = 3 * 7168 * 2048                       # one expert's parameters in one layer
ROUTED = 256 * 58 * PER_EXPERT                      # 653,908,770,816
SHARED = 58 * PER_EXPERT
ATTENTION = 11_413_547_008                          # 61 × 187,107,328 (MLA's projections)
PARAMETERS = 671_026_419_200


def contract(strategy=None, supply=None, model="deepseek-v3", traffic=None):
    return {
        "workload": {"kind": "serving", "model": model,
                     "traffic": {"requests_per_second": 20, "prompt_tokens": 2000, "output_tokens": 200,
                                 **(traffic or {})}},
        "supply": {"accelerator": "h100-sxm", "cluster": {"node": "dgx-h100"}, **(supply or {})},
        "strategy": {"engine": "sglang", "weight_precision": "fp8", **(strategy or {})},
        "assumptions": {"attention_flops": "causal"},
    }


def run(data):
    return estimate(parse_contract(data))


def value(result, name):
    return float(result.quantities[name].value)


DECODE_144 = {"tensor_parallel": 144, "expert_parallel": 144, "data_parallel_attention": True,
              "redundant_experts": 32, "max_batch_size": 18432, "max_batched_tokens": 18432}


def test_ep144_with_32_redundant_experts_holds_two_routed_experts_per_gpu():
    """DeepSeek's decode instance (open-infra-index day 6, 2025-02-28): (256 + 32)/144 = 2 routed experts per GPU,
    and 1 shared; FP8 weights, one byte each."""
    result = run(contract(DECODE_144))
    assert value(result, "routed_experts_per_device") == 2
    assert value(result, "expert_placement_imbalance") == 1
    assert value(result, "expert_weight_bytes") == 2 * 58 * PER_EXPERT          # 5,108,662,272 B
    # the rest split over 144 ranks, attention and the shared expert whole on each (143/144 beyond its share)
    by_hand = (PARAMETERS - ROUTED) / 144 + (ATTENTION + SHARED) * 143 / 144 + 2 * 58 * PER_EXPERT
    assert value(result, "weight_memory_bytes") == pytest.approx(by_hand, rel=1e-12)   # 19.10 GB
    # a token is read by a physical expert with probability k/(E + N)
    assert value(result, "expert_pick_probability") == pytest.approx(8 / 288)
    assert not [f for f in result.findings if "uneven" in f.message]


def test_the_all_to_all_of_a_replica_across_nodes_crosses_the_nics():
    """EP 144 on 8-GPU nodes: each rank sends (n − l)/n of its copies through its own NIC and (l − 1)/n over NVLink,
    B = ((n − 1)/n) / max((n − l)/(n·B_nic), (l − 1)/(n·B_nvl)) (formulas/collectives.all_to_all_bytes_per_s)."""
    result = run(contract(DECODE_144))
    nic, nvlink = value(result, "inter_node_bytes_per_s"), value(result, "intra_node_bytes_per_s")
    n, l = 144, 8
    assert value(result, "ep_link_bytes_per_s") == pytest.approx(((n - 1) / n) / max((n - l) / (n * nic),
                                                                                       (l - 1) / (n * nvlink)))
    # the exchange per token: 58 MoE layers × 8·(n − 1)/n copies (decode's low-latency kernels: one message per token
    # and expert, DeepEP internode_ll.cu) × 7,168 × (1 + 4/128 B FP8 and scales out + 2 B BF16 back) / (t · B_ep), the
    # 3 dense layers' gather over the TP ring
    ranks = value(result, "expert_destination_ranks")
    assert ranks == pytest.approx(n * (1 - (1 - 1 / n) ** 8) * (n - 1) / n)
    assert value(result, "expert_remote_copies") == pytest.approx(8 * (n - 1) / n)
    all_to_all = 58 * 8 * (n - 1) / n * 7168 * (1 + 4 / 128 + 2) / (144 * value(result, "ep_link_bytes_per_s"))
    gathered = 3 * 2 * 143 / 144 * 7168 * 2 / value(result, "tp_link_bytes_per_s")
    assert value(result, "communication_seconds_per_token") == pytest.approx(all_to_all + gathered, rel=1e-12)


def test_an_uneven_placement_is_bound_by_its_busiest_rank():
    """EP 144 without redundant experts: 256/144 = 1.78 experts per rank on average, the busiest holds 2; its
    memory and its expert read count 2, and a finding says so."""
    even = run(contract(DECODE_144))
    uneven = run(contract(DECODE_144 | {"redundant_experts": 0}))
    assert value(uneven, "routed_experts_per_device") == 2
    assert value(uneven, "expert_placement_imbalance") == pytest.approx(2 * 144 / 256)
    assert value(uneven, "expert_weight_bytes") == value(even, "expert_weight_bytes")
    assert value(uneven, "expert_pick_probability") == pytest.approx(8 / 256)
    warned = [f for f in uneven.findings if "uneven expert placement" in f.message]
    assert warned and warned[0].level == "warn" and "busiest rank 2" in warned[0].message
    # EP 3 does not divide the 256 experts: ⌈256/3⌉ = 86 on the busiest rank (Mixtral-style rules no longer refuse)
    odd = run(contract({"tensor_parallel": 24, "expert_parallel": 3, "data_parallel_attention": True}))
    assert value(odd, "routed_experts_per_device") == 86
    assert value(odd, "expert_weight_bytes") == 86 * 58 * PER_EXPERT / 8   # each expert split TP/EP = 8 ways


PREFILL_8 = {"tensor_parallel": 8, "expert_parallel": 8, "data_parallel_attention": True}


def disaggregated(prefill=None, instances_=1):
    strategy = {"tensor_parallel": 16, "expert_parallel": 16, "data_parallel_attention": True,
                "disaggregation": {"prefill_instances": instances_} | ({"prefill": prefill} if prefill else {})}
    return contract(strategy, supply={"accelerator": "h200", "cluster": {"node": "dgx-h200"}})


def test_a_prefill_instance_of_its_own_layout_is_priced_at_that_layout():
    """Decode on 2 nodes (TP/EP 16), prefill on one (TP/EP 8): the prefill instance's step costs are those of a
    replica laid out as it is, its GEMMs per token twice the decode instance's (16/8), and the replica counts
    16 + 2 × 8 accelerators. Its all-to-all alone differs: a prefill instance runs DeepEP's normal kernels, one copy
    per destination rank, 8 × (1 − (7/8)^8) × 7/8 = 4.594737 a token, where a replica that decodes sends one per
    token and expert, 8 × 7/8 = 7 (the low-latency kernels)."""
    same = run(disaggregated(instances_=2))
    own = run(disaggregated(PREFILL_8, instances_=2))
    alone = run(contract(PREFILL_8, supply={"accelerator": "h200", "cluster": {"node": "dgx-h200"}}))
    exchange = ("communication_seconds_per_token", "moe_exchange_seconds_per_token")
    for name in instances.INSTANCE_FIELDS:
        if name not in exchange:
            assert value(own, instances.mirror_name(name)) == pytest.approx(value(alone, name), rel=1e-12), name
    assert value(own, "prefill_instance_moe_exchange_seconds_per_token") == pytest.approx(
        value(alone, "moe_exchange_seconds_per_token") * 8 * (1 - (7 / 8) ** 8) * 7 / 8 / 7, rel=1e-12)
    assert value(own, "prefill_instance_gemm_seconds_per_token") == pytest.approx(
        2 * value(own, "gemm_seconds_per_token"), rel=1e-12)
    assert value(own, "replica_accelerators") == 16 + 2 * 8
    assert value(same, "replica_accelerators") == 16 + 2 * 16
    # the decode side is the same; half the prefill accelerators prefill fewer prompts a second, by the ratio of the
    # two instances' full-budget steps: n·b/(P·t_b)
    assert value(own, "decode_requests_per_s_per_replica") == pytest.approx(
        value(same, "decode_requests_per_s_per_replica"), rel=1e-12)
    replica = instances.replica_of({name: q.value for name, q in own.quantities.items()})
    assert replica.prefill_instance is not None
    budget = value(own, "max_batched_tokens")
    step_own = replica.prefill_instance.stage_step(0.0, budget)
    step_same = instances.replica_of({name: q.value for name, q in same.quantities.items()}).stage_step(0.0, budget)
    ratio = value(own, "prefill_pool_requests_per_s") / value(same, "prefill_pool_requests_per_s")
    assert ratio == pytest.approx(step_same / step_own, rel=1e-9)
    assert 0.4 < ratio < 1
    # a lone prompt runs on the prefill instance: its TTFT floor is that of a replica laid out as the prefill
    # instance, less what the normal kernels' fewer copies save (4.59 a token, not 7), plus the KV transfer to the
    # decode instance (here lower than the 2-node instance's: one node's all-to-all stays on NVLink, where the
    # 2-node one crosses the NICs)
    assert value(own, "time_to_first_token_floor_seconds") < (
        value(alone, "time_to_first_token_floor_seconds") + value(own, "kv_transfer_seconds"))
    assert value(own, "prefill_instance_ep_link_bytes_per_s") > value(own, "ep_link_bytes_per_s")
    assert value(own, "lone_prompt_excess_seconds") == value(own, "prefill_instance_prompt_excess_seconds")
    assert any("prefill instance (8 accelerators" in f.message and f.level == "ok" for f in own.findings)


def test_without_a_prefill_layout_the_prefill_instances_are_the_replicas():
    result = run(disaggregated(instances_=1))
    assert value(result, "prefill_instance_layout") == 0
    assert value(result, "prefill_instance_gemm_seconds_per_token") == 0
    assert instances.replica_of({n: q.value for n, q in result.quantities.items()}).prefill_instance is None


def test_a_prefill_instance_that_does_not_fit_is_a_finding_not_a_crash():
    """DeepSeek-V3 in FP8 (671 GB) on a single-GPU prefill instance of an H200 (141 GB) cannot hold its weights."""
    result = run(disaggregated({"tensor_parallel": 1, "expert_parallel": 1, "data_parallel_attention": False}))
    failed = [f for f in result.findings if f.message.startswith("prefill instance") and f.level == "fail"]
    assert failed and "does not fit" in failed[0].message
    assert value(result, "prefill_instance_weight_memory_bytes") > value(result, "usable_memory_bytes")


@pytest.mark.parametrize("strategy, model, field", [
    ({"tensor_parallel": 8, "redundant_experts": 32}, "llama-3.1-8b", "strategy.redundant_experts"),
    ({"tensor_parallel": 8, "expert_parallel": 3}, "deepseek-v3", "strategy.expert_parallel"),
    ({"tensor_parallel": 288, "expert_parallel": 288, "data_parallel_attention": True}, "deepseek-v3",
     "strategy.expert_parallel"),
    ({"tensor_parallel": 16, "expert_parallel": 16, "data_parallel_attention": True,
      "disaggregation": {"prefill": {"tensor_parallel": 8, "expert_parallel": 3}}}, "deepseek-v3",
     "strategy.disaggregation.prefill.expert_parallel"),
    ({"tensor_parallel": 16, "expert_parallel": 16, "data_parallel_attention": True,
      "disaggregation": {"prefill": {"tensor_parallel": 8, "data_parallel_attention": False,
                                     "attention_tensor_parallel": 2}}}, "deepseek-v3",
     "strategy.disaggregation.prefill.attention_tensor_parallel"),
    ({"tensor_parallel": 16, "expert_parallel": 16, "data_parallel_attention": True,
      "disaggregation": {"prefill": {"tensor_parallel": 4, "expert_parallel": 4, "redundant_experts": 4}}},
     "llama-3.1-8b", "strategy.expert_parallel"),
])
def test_bad_layouts_name_their_field(strategy, model, field):
    with pytest.raises(ContractError) as error:
        run(contract(strategy, model=model))
    assert error.value.field == field
    assert "\n" not in str(error.value)


def test_redundant_experts_on_a_dense_prefill_instance_name_the_prefill_field():
    data = contract({"tensor_parallel": 2, "disaggregation": {"prefill": {"redundant_experts": 8}}},
                    model="llama-3.1-8b")
    with pytest.raises(ContractError) as error:
        run(data)
    assert error.value.field == "strategy.disaggregation.prefill.redundant_experts"
