"""Recomputation as the training stack does it: torchtitan's op-level selective checkpointing against Megatron's
selective recomputation, and `botec init`'s layouts past one node.

Hand-derived figures use Llama 3.1 8B: h = 4,096, 32 layers, 32 query heads and 8 KV heads of 128, a gated MLP of
f = 14,336 (Meta's config.json, the catalog's llama-3.1-8b).
"""

from __future__ import annotations

import pytest
import yaml

import botec

H, LAYERS, KV_WIDTH, FFN = 4096, 32, 8 * 128, 14336


def _contract(framework: str | None, recompute: str, **strategy) -> dict:
    return {
        "name": "sac", "workload": {"model": "llama-3.1-8b", "tokens": "1B", "sequence_length": 8192},
        "supply": {"accelerator": "h100-sxm", "count": 8, "cluster": {"node": "dgx-h100"}},
        "strategy": {"fsdp": "full_shard", "micro_batch_size": 1, "recompute": recompute,
                     **({"framework": framework} if framework else {}), **strategy},
    }


def _run(framework, recompute, **strategy):
    return botec.estimate(_contract(framework, recompute, **strategy))


def test_torchtitan_selective_recomputes_every_second_matmul():
    """torchtitan's op-level SAC (its `_save_list` policy) recomputes the 2nd, 4th and 6th of a Llama block's seven
    matmuls (Q, K, V, O, W1, W3, W2): K (h × 1,024), O (h × h) and W3 (h × f), 2 FLOPs per weight per token."""
    result = _run(None, "selective")            # the default stack is torchtitan
    per_layer = H * KV_WIDTH + H * H + H * FFN
    assert per_layer == 79_691_776
    assert result.value("sac_recomputed_matmul_parameters_per_layer") == per_layer
    assert result.value("recompute_flops_per_token") == 2 * LAYERS * per_layer          # 5.10 GFLOP per token
    assert result.value("hardware_flops_per_token") - result.value("model_flops_per_token") == 5_100_273_664
    # the layer's repeated work: those three GEMMs (compute-bound here: FLOPs at e_mm × peak, plus t0 each) and
    # every memory-bound op of its forward
    tokens = 8192
    gemms = (2 * tokens * per_layer / (result.value("matmul_efficiency") * result.value("peak_flops_per_s"))
             + 3 * result.value("kernel_overhead_seconds"))
    assert result.value("sac_recompute_gemm_seconds") == pytest.approx(gemms, rel=1e-9)
    assert result.value("layer_recompute_seconds") == pytest.approx(gemms + result.value("elementwise_seconds"),
                                                                    rel=1e-9)
    # it does something, so the "selective buys nothing" note is gone
    assert not any("buys nothing" in finding.message for finding in result.findings)


def test_torchtitan_selective_keeps_the_saved_outputs():
    """Kept per token and layer: the block's input (h), the outputs of Q (h), V (1,024), the attention kernel (h),
    W1 (f) and W2 (h): 31,744 elements, 2 B each: 63.5 kB; at 8,192 tokens 520 MB per layer against the 1.21 GB
    a layer keeps without recomputation (Korthikanti et al.'s 10·h whole + 2 × (10,240 + 43,008) split, 16-bit)."""
    result = _run("torchtitan", "selective")
    kept = 2 * 8192 * (H + H + KV_WIDTH + H + FFN + H)
    assert kept == 520_093_696
    assert result.value("activation_bytes_per_layer") == kept
    everything = 8192 * (10 * H + 2 * ((32 * 128 + 2 * KV_WIDTH + 32 * 128) + 3 * FFN))
    assert everything == 1_207_959_552
    assert result.value("layer_linear_activation_bytes") == everything
    # during a layer's backward its recomputed tensors exist at once: what was not saved
    assert result.value("rematerialized_layer_bytes") == everything - kept


def test_megatron_selective_keeps_its_meaning():
    """Megatron's selective recomputes the attention core only (Korthikanti et al. 2022 §5): under a fused kernel
    nothing, so it costs no FLOPs, keeps every linear activation, and the note says so."""
    result = _run("megatron-core", "selective")
    assert result.value("selective_recompute_policy") == 0
    assert result.value("recompute_flops_per_token") == 0
    assert result.value("layer_recompute_seconds") == 0
    assert result.value("activation_bytes_per_layer") == 1_207_959_552
    assert any("buys nothing" in finding.message for finding in result.findings)


def test_torchtitan_layer_sac_is_full_on_a_share_of_the_layers():
    """torchtitan's layer-level SAC (selective_ac_option 2: every second block fully checkpointed) is recompute:
    full with recompute_layer_fraction 1/2: half the layers repeat their forward, 2·(N − V·h)/2 per token plus
    a sixth of the attention term (PaLM's 12·L·H·Q·T counts it forward and backward)."""
    result = _run("torchtitan", "full", recompute_layer_fraction=0.5)
    layers_forward = 2 * (result.value("matmul_parameters") - result.value("lm_head_matmul_parameters"))
    attention = 12 * LAYERS * H * 8192 / 3            # the forward's share of 12·L·h·s
    assert result.value("recompute_flops_per_token") == pytest.approx(0.5 * (layers_forward + attention), rel=1e-12)


def _init(cli, tmp_path, model, count):
    path = tmp_path / f"{model}-{count}.yaml"
    code, out, err = cli("init", str(path), "--model", model, "--accelerator", "h100-sxm", "--count", str(count))
    assert code == 0, err
    return path


TORCHTITAN_EAGER_TFLOPS = 5762 * 57.91e9 / 1e12      # 334 TFLOP/s per GPU


@pytest.mark.xfail(strict=True, reason="op-level SAC counted, the estimate is 465 TFLOP/s per GPU, 39 % above the "
                                       "published run: the rest is not recomputation (the published H100s are 500 W "
                                       "HBM2e parts, 2.4 TB/s; the catalog's h100-sxm is the 700 W, 3.35 TB/s SXM5)")
def test_init_llama_8b_on_8_h100_at_8k_matches_torchtitans_eager_run(cli, tmp_path):
    """torchtitan's published eager run (benchmarks/llama3_h100_202412_torchtitan.md, Table 1, torchtitan 9dec370:
    Llama 3.1 8B, 8 H100s, FSDP, local batch 2, sequence 8,192 (train_configs/llama3_8b.toml), selective activation
    checkpointing with selective_ac_option 'op'): 5,762 tokens/s per GPU. At torchtitan's own 6·N_non-embedding +
    12·L·h·s = 57.9 GFLOP per token (botec's model_flops_per_token with attention counted full), 334 TFLOP/s per
    GPU. botec init's contract, at that sequence length, within 15 %."""
    path = _init(cli, tmp_path, "llama-3.1-8b", 8)
    assert yaml.safe_load(path.read_text())["strategy"]["recompute"] == "selective"
    result = botec.estimate(path, {"workload.sequence_length": 8192})
    assert result.value("model_flops_per_token") == pytest.approx(57.91e9, rel=1e-3)
    tflops = result.value("model_flops_per_s_per_accelerator") / 1e12
    assert tflops == pytest.approx(TORCHTITAN_EAGER_TFLOPS, rel=0.15)


def test_init_llama_8b_on_8_h100_at_8k_counts_torchtitans_recompute(cli, tmp_path):
    """The contract init writes states recompute: selective for torchtitan, which its estimate now counts: 5.10
    GFLOP per token recomputed (above), so the hardware FLOPs are 8.8 % over the model's; the published run's
    334 TFLOP/s per GPU (above) is below the estimate, whose H100 SXM5 is the faster part."""
    path = _init(cli, tmp_path, "llama-3.1-8b", 8)
    result = botec.estimate(path, {"workload.sequence_length": 8192})
    assert result.value("recompute_flops_per_token") == 5_100_273_664
    assert result.value("hardware_flops_per_token") / result.value("model_flops_per_token") == pytest.approx(
        1 + 5_100_273_664 / 57_914_449_920, rel=1e-12)
    assert result.value("model_flops_per_s_per_accelerator") / 1e12 > TORCHTITAN_EAGER_TFLOPS


def _flags(result) -> list[str]:
    return [f"{finding.account}: {finding.message}" for finding in result.findings if finding.level in ("warn", "fail")]


def test_init_70b_past_one_node_hybrid_shards_over_the_fewest_nodes_and_flags_nothing(cli, tmp_path):
    """Llama 3.1 70B on 1,024 H100s: its state needs more than one node's ranks, so init writes hybrid shard groups of
    the fewest whole nodes it fits in (64 ranks, 8 nodes); the gathers then cross nodes, which its estimate says
    (information: the advice, hybrid sharding, is already taken) without a warning it could not act on."""
    path = _init(cli, tmp_path, "llama-3.1-70b", 1024)
    strategy = yaml.safe_load(path.read_text())["strategy"]
    assert strategy["fsdp"] == "hybrid_shard" and strategy["sharding_group"] == 64
    result = botec.estimate(path)
    assert result.value("sharding_degree") == 64
    assert _flags(result) == []
    crossing = [x for x in result.findings if "shard group's collectives cross" in x.message]
    assert len(crossing) == 1 and crossing[0].level == "info" and "hybrid shard groups of 64" in crossing[0].message


def test_init_past_one_node_shards_within_a_node(cli, tmp_path):
    """1,024 H100s (128 nodes of 8): hybrid sharding, FSDP within each node and replicas across nodes (torchtitan's
    dp_shard 8 × dp_replicate 128), not one shard group over every rank; its own estimate flags nothing."""
    path = _init(cli, tmp_path, "llama-3.1-8b", 1024)
    strategy = yaml.safe_load(path.read_text())["strategy"]
    assert strategy["fsdp"] == "hybrid_shard" and "sharding_group" not in strategy
    result = botec.estimate(path)
    assert result.value("sharding_degree") == 8
    assert _flags(result) == []


def test_init_saves_asynchronously_where_synchronous_saves_are_flagged(cli, tmp_path):
    """Llama 3.1 70B on 1,024 H100s: a checkpoint of 70.6B × 14 B = 988 GB at the starter's 2 GB/s blocks training
    8.2 min per hourly save (12.1 % of the wall time, over the 2 % threshold): init writes asynchronous saves
    (PyTorch DCP async_save), and its estimate flags no checkpoint pause."""
    path = _init(cli, tmp_path, "llama-3.1-70b", 1024)
    checkpoint = yaml.safe_load(path.read_text())["strategy"]["checkpoint"]
    assert checkpoint["mode"] == "async"
    result = botec.estimate(path)
    assert result.value("checkpoint_pause_share") < result.value("checkpoint_pause_share_threshold")
    assert not [flag for flag in _flags(result) if flag.startswith("storage")]
