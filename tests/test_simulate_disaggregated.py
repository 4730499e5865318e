"""`botec simulate` of disaggregated serving: n prefill instances and a decode instance per replica
(botec.simulate.disaggregated; DistServe, Zhong et al. 2024; Splitwise, Patel et al. 2024).

What is checked, and against what:

- light load: a request alone, its TTFT the prefill of its prompt on a prefill instance plus the KV transfer,
  derived by hand from the replica's stage step (⌈P/b⌉ × p × t(0 decoding, min(P, b) prompt tokens) + X, and the
  front-end's request overhead o the simulator adds to every TTFT), and its TPOT the decode-only step floor
  (p × t(1 decoding request) / E): both to 2 %;
- the analytic model (botec.serving.load.at_load, its disaggregated branch) at half the prefill instance's capacity:
  mean TTFT to 15 %, mean TPOT to 10 %;
- more prefill instances at one rate: a shorter prefill queue, a shorter TTFT; a prefill instance of its own, twice
  as slow (or fast) per token, moves TTFT up (down) by its prefill, in the simulation and the analytic model alike;
- the streaming books: every slot given back, the slots as many as the requests in the system at once, not the run;
  a StreamLedger and a whole Ledger give the same times to the bit (evictions on the decode instance included);
- the CLI end to end, and bad input as one-line errors.

Every run is seeded and a few thousand requests long.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import lru_cache

import pytest

from conftest import EXAMPLES

H100 = EXAMPLES / "serve-llama3.1-8b-h100.yaml"   # Llama 3.1-8B, 1,024 prompt + 256 output tokens (fixed)
DISAGGREGATED = "strategy.disaggregation={prefill_instances: %d}"


@lru_cache(maxsize=None)
def estimated(instances: int = 1):
    from botec.estimation import estimate_file

    overrides = ["supply.candidates=[]"] + ([DISAGGREGATED % instances] if instances else [])
    return estimate_file(H100, overrides)


def quantity(result, name):
    return float(result.quantities[name].value)


def outside(result):
    """The TTFT spent outside the prefill: X (the KV transfer) + o (the front-end, the engine preset's
    request_overhead, when the estimate has one)."""
    q = result.quantities
    front = quantity(result, "request_overhead_seconds") if "request_overhead_seconds" in q else 0.0
    return quantity(result, "kv_transfer_seconds") + front


def hand_ttft(replica, x):
    """A lone prompt on a prefill instance: its chunks, each p stage steps of min(P, b) tokens, then ``x``."""
    prompt, budget, stages = (replica.prefill_tokens_per_request, replica.max_batched_tokens,
                              replica.pipeline_parallel)
    return math.ceil(prompt / budget) * stages * float(replica.stage_step(0.0, min(prompt, budget))) + x


def test_the_estimate_is_disaggregated():
    result = estimated(2)
    assert quantity(result, "prefill_instances") == 2
    assert quantity(result, "kv_transfer_seconds") > 0
    assert quantity(result, "replica_accelerators") == 3        # 2 prefill + 1 decode instance of TP 1


def test_light_load_is_the_prefill_plus_the_transfer_and_the_decode_floor():
    from botec.simulate import simulate
    from botec.simulate.disaggregated import analytic_replica

    result = estimated(2)
    replica = analytic_replica(result)
    sim = simulate(result, requests=1_000, rate=0.05, replicas=1, seed=3)
    assert sim.disaggregated and sim.prefill_instances == 2 and sim.unfinished_requests == 0
    ttft = hand_ttft(replica, outside(result))
    assert sim.ttft.mean_seconds == pytest.approx(ttft, rel=0.02)
    assert sim.ttft.p50_seconds == pytest.approx(ttft, rel=0.002)          # most prompts find the instance idle
    floor = replica.pipeline_parallel * float(replica.stage_step(1.0, 0.0)) / replica.tokens_per_step
    assert floor == pytest.approx(quantity(result, "time_per_output_token_floor_seconds"), rel=1e-9)
    assert sim.tpot.mean_seconds == pytest.approx(floor, rel=0.02)
    assert sim.preemptions == 0


def test_half_the_prefill_capacity_agrees_with_the_analytic_model():
    from botec.simulate import simulate

    result = estimated(1)
    # the replica's capacity: its one prefill instance's or its decode instance's, whichever is less (46.2 and 45.2
    # requests/s with the measured decode-attention table; on the roofline the prefill instance was the less)
    capacity = min(quantity(result, "prefill_pool_requests_per_s"), quantity(result, "decode_requests_per_s_per_replica"))
    sim = simulate(result, requests=4_000, rate=0.5 * capacity, replicas=1, seed=0)
    analytic = sim.analytic
    assert not analytic.over_capacity and sim.unfinished_requests == 0
    assert sim.ttft.mean_seconds == pytest.approx(analytic.time_to_first_token_seconds, rel=0.15)
    assert sim.tpot.mean_seconds == pytest.approx(analytic.time_per_output_token_seconds, rel=0.10)
    assert sim.mean_decode_batch == pytest.approx(analytic.decode_batch_size, rel=0.10)
    assert sim.throughput_requests_per_s == pytest.approx(0.5 * capacity, rel=0.05)


def test_more_prefill_instances_shorten_the_time_to_first_token():
    from botec.simulate import simulate

    rate = 0.7 * quantity(estimated(1), "prefill_pool_requests_per_s")
    ttft = [simulate(estimated(n), requests=2_000, rate=rate, replicas=1, seed=1).ttft.mean_seconds for n in (1, 2, 4)]
    assert ttft[0] > ttft[1] > ttft[2]
    assert ttft[0] > 1.3 * ttft[1]                      # at 70 % of one instance the queue is much of the wait
    # TPOT is the decode instance's, the same whatever the prefill pool
    tpot = [simulate(estimated(n), requests=2_000, rate=rate, replicas=1, seed=1).tpot.mean_seconds for n in (1, 4)]
    assert tpot[0] == pytest.approx(tpot[1], rel=0.05)


@pytest.mark.parametrize("factor", [2.0, 0.5])
def test_a_prefill_instance_of_its_own_moves_the_time_to_first_token(factor):
    from botec.simulate import simulate
    from botec.simulate.disaggregated import analytic_replica

    result = estimated(2)
    base = analytic_replica(result)
    own = dataclasses.replace(base, gemm_seconds_per_token=base.gemm_seconds_per_token * factor)
    x = outside(result)
    same = simulate(result, requests=500, rate=0.05, replicas=1, seed=2)
    moved = simulate(result, requests=500, rate=0.05, replicas=1, seed=2, prefill_instance=own)
    assert moved.ttft.mean_seconds == pytest.approx(hand_ttft(own, x), rel=0.02)
    assert (moved.ttft.mean_seconds > same.ttft.mean_seconds) == (factor > 1)
    # a prompt of 1,024 tokens is mostly compute-bound: its prefill scales with the GEMM cost, less the weight read's
    # share at the measured table's knee (halving g moves it by 0.60, doubling by 1.9: ‖g·T, w‖_p, not g·T alone)
    assert (moved.ttft.mean_seconds - x) / (same.ttft.mean_seconds - x) == pytest.approx(factor, rel=0.25)
    assert moved.tpot.mean_seconds == pytest.approx(same.tpot.mean_seconds, rel=1e-9)    # decode untouched
    # the analytic figures beside it use the same prefill instance
    assert (moved.analytic.time_to_first_token_seconds > same.analytic.time_to_first_token_seconds) == (factor > 1)
    assert moved.analytic.time_to_first_token_seconds == pytest.approx(moved.ttft.mean_seconds, rel=0.03)


def test_streaming_gives_every_slot_back_on_a_fleet():
    from botec.simulate import _tally
    from botec.simulate.disaggregated import run_disaggregated
    from botec.simulate.engine import Engine
    from botec.simulate.ledger import StreamLedger
    from botec.simulate.workload import synthetic_stream

    result = estimated(2)
    engine = Engine.from_estimate(result)
    rate = 60.0                                            # two replicas, each at about 60 % of its capacity
    stream = synthetic_stream(result.contract.workload.traffic, 3_000, rate, 1024, 256, 0)
    tally = _tally(result, stream.count)
    ledger = StreamLedger(stream, engine, None, tally)
    fleet = run_disaggregated(result, engine, ledger, 2, "least-outstanding", 0)
    assert tally.finished == 3_000 and ledger.in_system() == 0
    assert ledger.slots < 600                              # the requests in the system at once, not the run
    assigned = [replica.assigned for replica in fleet]
    assert sum(assigned) == 3_000 and min(assigned) > 1_300     # the balancer shares them out
    for replica in fleet:
        assert replica.stats.idle_state == {"blocks": 0, "decoding": 0, "context": 0, "growers": 0,
                                             "committed": 0}
        assert not replica.pending and not any(replica.prefilling)
        assert replica.stats.prefill_instance_steps > 0


def test_streamed_equals_whole_arrays():
    """The same requests through a StreamLedger (slots reused) and a whole Ledger: the same times to the bit, on
    lognormal lengths with prefix caching and a small KV cache (evictions on the decode instance)."""
    import numpy as np

    from botec.estimation import estimate_file
    from botec.simulate import _tally
    from botec.simulate.disaggregated import DisaggregatedReplica, run_disaggregated
    from botec.simulate.fleet import run_fleet
    from botec.simulate.engine import Engine
    from botec.simulate.ledger import Ledger, StreamLedger
    from botec.simulate.workload import synthetic_stream, synthetic_workload

    result = estimate_file(H100, ["supply.candidates=[]", DISAGGREGATED % 2,
                                  "workload.traffic.length_distribution=lognormal",
                                  "assumptions.prefix_cache_hit_rate=0.3"])
    engine = dataclasses.replace(Engine.from_estimate(result), kv_capacity_blocks=3_000)
    traffic, count, rate = result.contract.workload.traffic, 1_500, 40.0
    workload = synthetic_workload(traffic, count, rate, 1024, 256, 5)
    keep = engine.footprint_blocks(workload.prompt_tokens, workload.output_tokens) <= engine.kv_capacity_blocks
    whole = Ledger(workload.arrival_seconds, workload.prompt_tokens, workload.output_tokens,
                   engine.cached_tokens(workload.prompt_tokens))
    per_token = float(result.quantities["kv_transfer_seconds"].value) / 1024

    def replica(engine_, ledger_, index, rng):
        return DisaggregatedReplica(engine_, engine_, ledger_, index, rng, 2, per_token)

    whole_fleet = run_fleet(engine, whole, 2, "least-outstanding", 5, keep.tolist(), replica_type=replica)
    tally = _tally(result, count)
    ledger = StreamLedger(synthetic_stream(traffic, count, rate, 1024, 256, 5), engine, None, tally)
    fleet = run_disaggregated(result, engine, ledger, 2, "least-outstanding", 5)
    assert sum(r.decode.stats.preemptions for r in fleet) > 0          # evictions, recomputed on the decode instance
    assert sum(r.stats.preemptions for r in whole_fleet) == sum(r.stats.preemptions for r in fleet)
    assert ledger.in_system() == 0
    finish = np.array(whole.finish_s)
    assert np.array_equal(tally.records["finish_s"], finish, equal_nan=True)
    assert np.array_equal(np.isfinite(finish), keep)


def test_the_cli_simulates_a_disaggregated_contract(cli):
    code, out, err = cli("simulate", str(H100), "-n", "600", "--rate", "10", "--replicas", "1", "--set",
                         "supply.candidates=[]", "--set", DISAGGREGATED % 2, "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["disaggregated"] is True and data["prefill_instances_per_replica"] == 2
    assert data["unfinished_requests"] == 0 and data["accelerators"] == 3
    assert data["time_to_first_token"]["mean_seconds"] > 0
    code, out, err = cli("simulate", str(H100), "-n", "300", "--rate", "10", "--set", "supply.candidates=[]",
                         "--set", DISAGGREGATED % 2)
    assert code == 0, err
    assert "disaggregated: 2 prefill instances" in " ".join(out.split())


def test_bad_input_is_one_line():
    from botec.errors import UserError
    from botec.simulate import simulate
    from botec.simulate.disaggregated import analytic_replica

    with pytest.raises(UserError, match="strategy.disaggregation"):
        simulate(estimated(0), requests=10, rate=1.0, prefill_instance=analytic_replica(estimated(0)))
    with pytest.raises(UserError, match="prefill_instance"):
        simulate(estimated(2), requests=10, rate=1.0, prefill_instance="fast")
    bad = dataclasses.replace(analytic_replica(estimated(2)), max_batched_tokens=0)
    with pytest.raises(UserError, match="max_batched_tokens"):
        simulate(estimated(2), requests=10, rate=1.0, prefill_instance=bad)
    with pytest.raises(UserError, match="--concurrency"):
        simulate(estimated(2), requests=10, concurrency=4)


def test_the_contracts_own_prefill_layout_is_simulated():
    pytest.importorskip("botec.serving.instances")          # strategy.disaggregation.prefill (large-EP serving)
    from botec.estimation import estimate_file
    from botec.simulate import simulate
    from botec.simulate.disaggregated import analytic_replica

    own = estimate_file(H100, ["supply.candidates=[]",
                               "strategy.disaggregation={prefill_instances: 2, prefill: {tensor_parallel: 2}}"])
    replica = analytic_replica(own)
    assert replica.prefill_instance is not None
    same, faster = (simulate(result, requests=500, rate=0.05, replicas=1, seed=4) for result in (estimated(2), own))
    assert faster.ttft.mean_seconds < 0.8 * same.ttft.mean_seconds          # TP 2 prefills a prompt faster
    assert faster.ttft.mean_seconds == pytest.approx(hand_ttft(replica.prefill_instance, outside(own)), rel=0.02)
    assert faster.analytic.time_to_first_token_seconds == pytest.approx(faster.ttft.mean_seconds, rel=0.03)
    assert faster.tpot.mean_seconds == pytest.approx(same.tpot.mean_seconds, rel=1e-9)
