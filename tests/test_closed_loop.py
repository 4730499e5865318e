"""Closed-loop load (issue 20, item 2): ``workload.traffic.concurrency`` N users in flight, each sending its next
request when its last one returns (after ``think_time``), as NVIDIA NIM's genai-perf, ``vllm bench serve
--max-concurrency`` and SGLang's bench_serving load a server.

The estimate solves X·(R(X) + Z) = N (:mod:`botec.serving.closed`); the simulator runs the loop request by request
(:mod:`botec.simulate.closed`); ``botec calibrate`` reads a closed-loop benchmark as users, not as a rate. The
hand-derivable cases: a server whose response time is the same at every load (no interference) gives
X = N / (S + Z) exactly, in the solver and in the simulator. The published sweep: NVIDIA NIM 1.8.0,
Llama-3.1-8B-Instruct on one H100 (see :data:`NIM_SWEEP`). No number below is copied from a run of the code under
test: each is derived by hand, published, or botec's own estimate of a contract edited here."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from conftest import EXAMPLES

H100 = EXAMPLES / "serve-llama3.1-8b-h100.yaml"


def closed_contract(users: int, think: str | None = None, **traffic) -> dict:
    """The H100 example with its rate replaced by ``users`` in a closed loop (no candidates)."""
    from botec.contract import read_contract_data

    data = read_contract_data(H100)
    data["workload"]["traffic"].pop("requests_per_second")
    data["workload"]["traffic"] |= {"concurrency": users} | ({"think_time": think} if think else {}) | traffic
    data["supply"].pop("candidates", None)
    return data


def estimated(data: dict):
    from botec.contract import parse_contract
    from botec.estimation import estimate

    return estimate(parse_contract(data, origin="test"), base_dir=EXAMPLES, compare=False)


def values(result, pinned: dict | None = None, wanted=None) -> dict[str, float]:
    """The estimate's quantities (base units), re-evaluated with ``pinned`` quantities held (as calibrate does)."""
    from botec.graph import Given

    inputs = result.inputs
    if not pinned:
        return {name: q.value for name, q in result.quantities.items()}
    given = dict(inputs.given) | {name: Given(float(v), "measured") for name, v in pinned.items()}
    resolved = inputs.graph.evaluate(given, wanted=wanted, choices=inputs.choices)
    return {name: q.value for name, q in resolved.items()}


# --- the contract ------------------------------------------------------------------------------

@pytest.mark.parametrize("traffic, field, words", [
    ({"requests_per_second": 5, "concurrency": 8}, "workload.traffic.concurrency", "got requests_per_second and "
                                                                                   "concurrency"),
    ({"requests_per_day": "1M", "concurrency": 8}, "workload.traffic.concurrency", "exactly one of them"),
    ({}, "workload.traffic.requests_per_second", "exactly one of them"),
    ({"requests_per_second": 5, "think_time": "2 s"}, "workload.traffic.think_time", "it needs concurrency"),
    ({"concurrency": 0}, "concurrency", "at least 1"),
    ({"concurrency": 2.5}, "concurrency", "whole number"),
    ({"concurrency": 4, "think_time": "-1 s"}, "think_time", "at least 0"),
])
def test_the_load_is_a_rate_or_users_exactly_one(traffic, field, words):
    from botec.contract import parse_contract, read_contract_data
    from botec.errors import ContractError

    data = read_contract_data(H100)
    data["workload"]["traffic"] = {"prompt_tokens": 512, "output_tokens": 128} | traffic
    with pytest.raises(ContractError) as error:
        parse_contract(data, origin="test")
    message = str(error.value)
    assert field in message and words in message and "\n" not in message


def test_an_open_contract_is_unchanged():
    """A rate gives the graph's default methods: no closed-loop quantity, the rate as stated."""
    from botec.estimation import estimate_file

    result = estimate_file(H100, ["supply.candidates=[]"])
    q = result.quantities
    assert "load" not in result.inputs.choices
    assert "concurrency" not in q and "concurrency_per_replica" not in q and "closed_loop_wait_seconds" not in q
    assert q["requests_per_s"].value == 20 and q["requests_per_s"].provenance == "assumed"


# --- (a) the hand-derivable cases ----------------------------------------------------------------

@pytest.mark.parametrize("users, service, think", [(1, 0.5, 0.0), (10, 0.5, 1.5), (64, 0.125, 2.0), (250, 3.0, 0.0)])
def test_without_interference_the_loop_gives_n_over_s_plus_z(users, service, think):
    """A server that runs every request in parallel in S seconds, whatever the load (R(X) = S): each user sends a
    request every S + Z seconds, so X = N / (S + Z) (the interactive response-time law)."""
    from botec.serving.closed import closed_loop_throughput

    rate, wait = closed_loop_throughput(lambda x: service + 0.0 * x, users, think, 1e6)
    assert rate == pytest.approx(users / (service + think), rel=1e-11)
    assert wait == 0.0


def test_the_solver_is_elementwise_and_saturates():
    """Arrays solve row by row; above the ceiling the server runs at it and the users beyond wait, by the loop's
    Little's law: W = N / X_sat − Z − S. With R(X) = S + X/100 (interference growing with the load) the root of
    X·(S + X/100 + Z) = N is the positive root of the quadratic."""
    from botec.serving.closed import closed_loop_throughput

    users = np.array([1.0, 10.0, 40.0])
    rate, wait = closed_loop_throughput(lambda x: 0.5 + 0.0 * x, users, 0.5, 20.0)
    assert rate == pytest.approx([1.0, 10.0, 20.0], rel=1e-11)             # N / (0.5 + 0.5), capped at 20
    assert wait == pytest.approx([0.0, 0.0, 40 / 20 - 0.5 - 0.5])           # 1 s for the 40 users' surplus
    service, think, n = 0.5, 1.0, 30.0
    root = (-(service + think) + math.sqrt((service + think) ** 2 + 4 * n / 100)) / (2 / 100)
    rate, wait = closed_loop_throughput(lambda x: service + x / 100, n, think, 1e3)
    assert rate == pytest.approx(root, rel=1e-11) and wait == 0.0


def constant_step_engine(step_seconds: float):
    """The H100 example's engine with every step taking ``step_seconds``, whatever it carries (all per-unit costs 0
    but the fixed cost per step), room for every prompt in a step and every request in the batch."""
    from botec.estimation import estimate_file
    from botec.serving.step import StepModel
    from botec.simulate.engine import Engine

    engine = Engine.from_estimate(estimate_file(H100, ["supply.candidates=[]"]))
    costs = {f.name: 0.0 for f in dataclasses.fields(StepModel)} | {"fixed_seconds_per_step": step_seconds}
    return dataclasses.replace(engine, step_model=StepModel(**costs), max_batch_size=1024, max_batched_tokens=1 << 20,
                               prefix_cache_hit_rate=0.0, draft_tokens=0, chunked_prefill=True)


def stream_ledger(engine, prompts, outputs, records: int = 1_000):
    """A :class:`StreamLedger` of requests of the given lengths (sent in that order), with a tally keeping the
    first ``records`` requests' times."""
    from botec.simulate.ledger import StreamLedger
    from botec.simulate.tally import Tally
    from botec.simulate.workload import RequestStream

    prompts, outputs = np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64)
    stream = RequestStream(len(prompts), "test", math.inf, lambda: iter([(np.zeros(len(prompts)), prompts,
                                                                          outputs)]))
    return StreamLedger(stream, engine, None, Tally(len(prompts), 90, records=records))


def loop_records(engine, users, think, count, prompt, output, replicas=1, ramp=0.0):
    """Run a closed loop of ``count`` requests of equal lengths; (replicas, arrival, first token, finish) arrays."""
    from botec.simulate.closed import run_closed_loop

    ledger = stream_ledger(engine, np.full(count, prompt), np.full(count, output))
    fleet, _ = run_closed_loop(engine, ledger, replicas, users, think, ramp_seconds=ramp)
    kept = ledger.tally.records
    return fleet, kept["arrival_s"], kept["first_token_s"], kept["finish_s"], kept["replica"]


@pytest.mark.parametrize("think", [0.0, 0.25])
def test_the_simulated_loop_is_exact_on_a_constant_step(think):
    """Steps of t = 1/16 s whatever they carry: a request sent at a step boundary joins the next step, which
    prefills its prompt and samples its first token (TTFT = t), then decodes one token a step (TPOT = t): it ends
    O·t after it was sent, and its user sends the next Z later. With t and Z binary fractions every time is exact:
    user u's k-th request is sent at k·(O·t + Z), and 3 users on 1 replica complete N / (O·t + Z) per second."""
    step, output, users, count = 1 / 16, 4, 3, 60
    fleet, arrival, first, finish, _ = loop_records(constant_step_engine(step), users, think, count, 64, output)
    cycle = output * step + think
    assert arrival.tolist() == [cycle * (k // users) for k in range(count)]          # three at a time, each cycle
    assert (first - arrival).tolist() == [step] * count
    assert (finish - arrival).tolist() == [output * step] * count
    assert count / (finish.max() - arrival.min() + think) == pytest.approx(users / cycle)
    assert fleet[0].stats.max_running == users and fleet[0].stats.preemptions == 0


def test_users_stay_on_their_replica_and_requests_are_numbered_in_time():
    """5 users on 2 replicas: users 0, 2, 4 on the first, 1 and 3 on the second (⌈5/2⌉ and ⌊5/2⌋), each replica
    its own closed loop; requests are numbered in the order they are sent."""
    fleet, arrival, _, _, replica = loop_records(constant_step_engine(1 / 16), 5, 0.0, 50, 32, 8, replicas=2)
    assert np.all(np.diff(arrival) >= 0)
    assert [r.stats.max_running for r in fleet] == [3, 2]
    assert sorted(set(replica.tolist())) == [0, 1]


def prefill_bound_engine():
    """Steps of max(w, g·T) seconds for T tokens (the weight read or the GEMMs, nothing else): w = 1/16 s, g = 2⁻¹⁵
    s a token, so a decode-only step of two requests takes w, a step with one 4,096-token prompt (P·g = 1/8 s) and
    d decoding requests (P + d)·g, with two prompts 2P·g = 1/4 s; binary fractions, exact."""
    from botec.serving.step import StepModel

    engine = constant_step_engine(0.0)
    costs = {f.name: 0.0 for f in dataclasses.fields(StepModel)} | {"weight_read_seconds": 1 / 16,
                                                                      "gemm_seconds_per_token": 2.0 ** -15}
    return dataclasses.replace(engine, step_model=StepModel(**costs))


def test_staggered_users_prefill_alone_where_users_started_at_once_move_in_waves():
    """2 users, 4,096-token prompts, 4 output tokens, no think time, on :func:`prefill_bound_engine`.

    - At once (ramp 0): both prompts share the first step, 2P·g = 1/4 s, so both TTFTs are 1/4 s; three decode steps
      of w follow (finish at 1/4 + 3/16 = 7/16 s), both send again together, and every round repeats it: TTFT 1/4.
    - Staggered over D = 1/4 s (user u starts at u·D/N: user 1 at 1/8 s): user 0's prompt runs alone, P·g = 1/8 s
      (TTFT 1/8); user 1's joins the next step beside user 0's second token, (P + 1)·g; from then on each prompt
      shares its step with the other user's decode: every later TTFT is (P + 1)·g = 1/8 + 2⁻¹⁵ s, and a request's
      end to end is 2·(P + 1)·g + 2w (its prefill, two decode steps and the other user's prefill beside its last
      token), but for the run's last request, after which no prompt comes."""
    engine, prompt, g, w = prefill_bound_engine(), 4096, 2.0 ** -15, 1 / 16
    _, arrival, first, finish, _ = loop_records(engine, 2, 0.0, 12, prompt, 4)
    assert (first - arrival).tolist() == [2 * prompt * g] * 12
    assert (finish - arrival).tolist() == [2 * prompt * g + 3 * w] * 12
    _, arrival, first, finish, _ = loop_records(engine, 2, 0.0, 12, prompt, 4, ramp=1 / 4)
    assert arrival[:2].tolist() == [0.0, 1 / 8]
    assert (first - arrival).tolist() == [prompt * g] + [(prompt + 1) * g] * 11
    assert (finish - arrival)[2:-1].tolist() == [2 * (prompt + 1) * g + 2 * w] * 9   # the last: no prompt after it


def test_the_loop_draws_the_stated_lengths():
    """A seeded closed loop's requests take the open loop's drawn lengths: uniform on [1, 2m − 1] has mean m and
    standard deviation (2m − 1)/√12 (a discrete uniform of n = 2m − 1 values: √((n² − 1)/12)); 4,000 requests hold
    the mean within 2 % and the spread within 5 % (the sample mean's standard error is 0.9 %)."""
    from botec.simulate import simulate

    run = simulate(estimated(closed_contract(16, length_distribution="uniform")), requests=4_000, replicas=1)
    prompts, outputs = (np.asarray(run.records[k], dtype=float) for k in ("prompt_tokens", "output_tokens"))
    for lengths, mean in ((prompts, 1024), (outputs, 256)):
        count = 2 * mean - 1
        assert lengths.min() >= 1 and lengths.max() <= count
        assert lengths.mean() == pytest.approx(mean, rel=0.02)
        assert lengths.std() == pytest.approx(math.sqrt((count ** 2 - 1) / 12), rel=0.05)
    assert "uniform lengths around 1,024 prompt and 256 output tokens" in run.workload


def test_the_default_start_spreads_the_users_over_one_cycle():
    """By default the users start over one cycle of the loop, D = N / X (the analytic fleet rate X): the first N
    requests' sends are D/N apart, and the report says so."""
    from botec.simulate import simulate

    run = simulate(estimated(closed_contract(8)), requests=200, replicas=1)
    cycle = 8 / run.analytic.requests_per_s_per_replica
    sends = run.records["arrival_s"][:8]
    assert np.diff(sends) == pytest.approx([cycle / 8] * 7, rel=1e-9)
    assert "started over" in run.workload


# --- a pinned fleet: supply.replicas ---------------------------------------------------------------

@pytest.mark.parametrize("closed", [False, True])
def test_pinned_replicas_are_the_fleet_in_estimate_and_simulate(closed):
    """``supply.replicas: 3`` is the fleet: the estimate does not size it (3 replicas, 3 accelerators, the load
    spread over them) and the simulator runs 3."""
    from botec.contract import read_contract_data
    from botec.simulate import simulate

    data = closed_contract(24) if closed else read_contract_data(H100)
    data["supply"].pop("candidates", None)
    data["supply"]["replicas"] = 3
    result = estimated(data)
    q = values(result)
    assert q["replicas"] == 3 and q["serving_accelerators"] == 3
    share = q["concurrency_per_replica"] if closed else q["requests_per_s_on_a_replica"]
    assert share == pytest.approx((24 if closed else 20) / 3)
    finding = next(f for f in result.findings if f.account == "capacity")
    assert finding.message.startswith("3 replicas pinned (supply.replicas)")
    assert simulate(result, requests=300).replicas == 3


@pytest.mark.parametrize("raw", [0, -1, "x", 1.5])
def test_a_bad_replica_count_is_one_line_naming_supply_replicas(raw):
    from botec.contract import parse_contract, read_contract_data
    from botec.errors import ContractError

    data = read_contract_data(H100)
    data["supply"]["replicas"] = raw
    with pytest.raises(ContractError) as error:
        parse_contract(data, origin="test")
    assert "supply.replicas" in str(error.value) and "\n" not in str(error.value)


# --- the estimate ----------------------------------------------------------------------------------

@pytest.mark.parametrize("users, think", [(1, None), (16, None), (64, "1 s"), (300, None)])
def test_the_estimate_solves_the_loop(users, think):
    """The rate the estimate reports satisfies the loop's Little's law with its own latencies: X·(TTFT + (O − 1)·
    TPOT + Z) = N / r (the TTFT holding any wait for a slot); the fleet's rate is r·X."""
    result = estimated(closed_contract(users, think))
    q = values(result)
    z = q["think_time_seconds"]
    assert z == (1.0 if think else 0.0)
    per_replica = q["concurrency"] / q["replicas"]
    assert q["concurrency_per_replica"] == pytest.approx(per_replica)
    assert q["requests_per_s_on_a_replica"] * (q["end_to_end_latency_seconds"] + z) == pytest.approx(per_replica,
                                                                                                    rel=1e-9)
    assert q["requests_per_s"] == pytest.approx(q["replicas"] * q["requests_per_s_on_a_replica"])
    assert q["requests_per_s_on_a_replica"] <= q["requests_per_s_per_replica"] * (1 + 1e-9)
    assert result.inputs.choices["load"] == "closed"


def test_the_fleet_is_the_fewest_replicas_that_hold_the_users_within_the_targets():
    """Each replica holds at most n_max = λ_max·(R(λ_max) + Z) users within the targets; r = ⌈N / n_max⌉, and one
    replica fewer would put more users on each than n_max, its rate above λ_max."""
    result = estimated(closed_contract(200, "2 s"))
    q = values(result)
    n_max = q["users_per_replica_within_targets"]
    assert q["replicas"] == math.ceil(200 / n_max) and q["replicas"] >= 2
    fewer = values(result, {"replicas": q["replicas"] - 1}, ["requests_per_s_on_a_replica", "concurrency_per_replica"])
    assert fewer["concurrency_per_replica"] > n_max
    assert fewer["requests_per_s_on_a_replica"] > q["requests_per_s_per_replica"]
    limit = values(result, {"requests_per_s_on_a_replica": q["requests_per_s_per_replica"]},
                   ["end_to_end_latency_seconds"])
    assert n_max == pytest.approx(q["requests_per_s_per_replica"] * (limit["end_to_end_latency_seconds"] + 2.0))
    finding = next(f for f in result.findings if f.account == "capacity")
    assert "200 users in flight (a closed loop; concurrency counts users across the whole fleet" in finding.message


def test_users_beyond_saturation_wait_for_a_slot():
    """On one replica, twice the users its saturated batch holds (and no think time): it runs at its capacity, and
    the loop's Little's law puts the surplus in the TTFT: W = n / X_sat − R(X_sat)."""
    data = closed_contract(32)
    data["strategy"]["max_batch_size"] = 16
    result = estimated(data)
    capacity = result.quantities["offline_requests_per_s_per_replica"].value
    wanted = ["requests_per_s_on_a_replica", "closed_loop_wait_seconds", "end_to_end_latency_seconds",
              "time_to_first_token_seconds"]
    at_32 = values(result, {"replicas": 1}, wanted)
    assert at_32["requests_per_s_on_a_replica"] == pytest.approx(capacity)
    assert at_32["closed_loop_wait_seconds"] > 0
    assert at_32["requests_per_s_on_a_replica"] * at_32["end_to_end_latency_seconds"] == pytest.approx(32)


def test_more_users_more_throughput_and_slower_tokens():
    rows = [values(estimated(closed_contract(n)), {"replicas": 1}) for n in (1, 4, 16, 64, 128)]
    for name in ("requests_per_s_on_a_replica", "time_to_first_token_seconds", "time_per_output_token_seconds"):
        series = [row[name] for row in rows]
        assert series == sorted(series) and series[0] < series[-1], name
    per_user = [row["requests_per_s_on_a_replica"] / n for row, n in zip(rows, (1, 4, 16, 64, 128))]
    assert per_user == sorted(per_user, reverse=True)        # each user is served more slowly


# --- (b) a published concurrency sweep ---------------------------------------------------------------

NIM_SWEEP = {   # concurrency: (TTFT ms, ITL ms, throughput output tokens/s)
    1: (10.26, 4.63, 214.56), 5: (16.81, 4.58, 1076.88), 25: (36.34, 5.19, 4678.88), 50: (67.41, 5.91, 8018.23),
    100: (119.97, 7.57, 12214.97), 150: (346.53, 9.81, 12988.89), 200: (465.18, 12.65, 13348.4),
    250: (605.6, 16.14, 12964.72)}
"""NVIDIA NIM for LLMs benchmarking guide, Performance, "Llama-3.1-8b-instruct Results", Version 1.8.0
(https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance, as stored by the docs search, read 2026-12):
genai-perf concurrency sweep on one H100 80 GB. What was checked: the output length is 200 tokens (at each
concurrency the throughput is N·200 / (TTFT + 199·ITL) within 1.1 %, e.g. 200 / (10.26 ms + 199 × 4.63 ms) =
214.7 tokens/s at N = 1); the weights are 8-bit (the ITL at N = 1, 4.63 ms, is below the 4.8 ms a 16 GB BF16
read takes at the H100's full 3.35 TB/s, while 8 GB of FP8 takes 2.4 ms), as the page's other tables state fp8
for their H100 runs; the backend is TensorRT-LLM (NIM for LLMs' optimization page: "The optimized TensorRT-LLM
profiles are preferred over vLLM when available"). The input length, 200 tokens, is the issue's (not re-read
from the page's table header): a 200-token prefill fits the 10.26 ms TTFT at N = 1 where 1,000 would not."""

NIM_CONTRACT = {
    "name": "nim-1.8.0-llama-3.1-8b-h100",
    "workload": {"kind": "serving", "model": "llama-3.1-8b",
                 "traffic": {"concurrency": 1, "prompt_tokens": 200, "output_tokens": 200}},
    "supply": {"accelerator": "h100-sxm", "replicas": 1},
    "strategy": {"engine": "tensorrt-llm", "weight_precision": "fp8"},
    "assumptions": {"utilization_cap": 1},
}
WITHIN_15 = {("simulate", 5, "ttft")} | {(source, users, "tpot") for source in ("estimate", "simulate")
                                          for users in (1, 25, 50, 100, 150)}
"""The (source, N, metric) rows botec gets within 15 % of the sweep, source ``estimate`` or ``simulate``: see
:func:`test_the_nim_sweep_shape` for why the others miss."""


def nim_contract(users: int) -> dict:
    contract = json.loads(json.dumps(NIM_CONTRACT))
    contract["workload"]["traffic"]["concurrency"] = users
    return contract


def nim_comparison() -> dict[int, dict[str, float]]:
    """botec's estimate of each row, one replica (the benchmark's one H100)."""
    rows = {}
    for users in NIM_SWEEP:
        q = values(estimated(nim_contract(users)), None,
                   ["requests_per_s_on_a_replica", "time_to_first_token_seconds", "time_per_output_token_seconds",
                    "end_to_end_latency_seconds"])
        rows[users] = q
    return rows


def nim_simulation() -> dict[int, tuple[float, float]]:
    """``botec simulate --concurrency N --ramp 0`` of each row, one replica: (mean TTFT, mean TPOT), seconds; 2,000
    requests (8·N at N = 250: eight rounds of the users). Ramp 0: every user starts at once, as genai-perf's
    ``--concurrency N`` starts them (the default, a ramp over one cycle, gives the steady state's TTFT instead)."""
    from botec.simulate import simulate

    rows = {}
    for users in NIM_SWEEP:
        run = simulate(estimated(nim_contract(users)), requests=max(2_000, 8 * users), concurrency=users, ramp=0.0)
        rows[users] = (run.ttft.mean_seconds, run.tpot.mean_seconds)
    return rows


def test_the_published_sweep_is_what_the_test_says():
    """The fixture's own shape: TTFT rises at every step; ITL rises from N = 5 on (N = 1 and 5 are within
    1 %); throughput is output length × N / (TTFT + 199·ITL) within 1.5 % (the output length is 200)."""
    ttft = [row[0] for row in NIM_SWEEP.values()]
    itl = [row[1] for row in NIM_SWEEP.values()][1:]
    assert ttft == sorted(ttft) and itl == sorted(itl)
    for users, (first, gap, tokens_per_s) in NIM_SWEEP.items():
        assert tokens_per_s == pytest.approx(users * 200 / ((first + 199 * gap) / 1e3), rel=0.015)


def test_the_nim_sweep_shape():
    """botec against NIM 1.8.0's sweep (:data:`NIM_SWEEP`), each concurrency on one H100 with the catalog's and
    the TensorRT-LLM preset's defaults (a prediction: nothing fitted to it), from the estimate and from
    ``simulate --concurrency N``. What holds: the estimate's shape, TTFT, TPOT and the throughput rising with the
    users, each user served more slowly, and the loop's Little's law at every row. The issue's target, within 15 %
    for TTFT and TPOT at each N, holds only at the rows in :data:`WITHIN_15`. Why the others miss (measured when the
    front-end's ``request_overhead``, 2 ms, was added):

    - TPOT, with the GEMMs, all-reduces and decode attention priced from the measured FP8 tables: within 15 % at
      N = 1, 25, 50, 100 and 150 in both (estimate / simulate: +12.6/+12.1 % at N = 1, +13.2/+9.6 % at 25,
      +9.1/+3.8 % at 100); at N = 5 +16.1/+15.0 % (the published ITL is flat from N = 1 to 5, 4.63 and 4.58 ms;
      botec's step grows by each sequence's attention and the GEMMs' slope), short at 200 (−9/−13 %) and 250
      (−26/−21 %), where the server saturates near 13,000 tokens/s and botec's engine reaches ~16,700: the step at
      250 users is the term still missing (no published per-step figure to add).
    - TTFT: the users start together with equal lengths and no think time, so the simulator runs them in waves
      (all N prompts in one TensorRT-LLM step, no chunking): +100 % at N = 25, +66 % at 100. The published TTFT
      cannot be full waves: 25 × 200 FP8 prefill tokens take ≥ 61 ms of GEMMs at botec's efficiency, the published
      mean is 36 ms; the estimate's steady state, prompts arriving one at a time, is −52 % to −92 % from N = 5 to
      150. The server runs partial waves (the users' phases drift apart), between the two; neither model is fitted
      to it. Above N = 150 the server saturates near 13,000 tokens/s where botec's engine reaches ~17,900."""
    rows = nim_comparison()
    series = {name: [rows[n][name] for n in NIM_SWEEP] for name in
              ("requests_per_s_on_a_replica", "time_to_first_token_seconds", "time_per_output_token_seconds")}
    for name, values_ in series.items():
        assert values_ == sorted(values_) and values_[0] < values_[-1], name
    per_user = [rows[n]["requests_per_s_on_a_replica"] / n for n in NIM_SWEEP]
    assert per_user == sorted(per_user, reverse=True)
    for users, row in rows.items():
        assert row["requests_per_s_on_a_replica"] * row["end_to_end_latency_seconds"] == pytest.approx(users, rel=1e-9)
    simulated = nim_simulation()
    within = set()
    for users, (ttft_ms, itl_ms, _) in NIM_SWEEP.items():
        for source, (ttft, tpot) in (("estimate", (rows[users]["time_to_first_token_seconds"],
                                                   rows[users]["time_per_output_token_seconds"])),
                                     ("simulate", simulated[users])):
            if abs(ttft * 1e3 / ttft_ms - 1) <= 0.15:
                within.add((source, users, "ttft"))
            if abs(tpot * 1e3 / itl_ms - 1) <= 0.15:
                within.add((source, users, "tpot"))
    assert within >= WITHIN_15


# --- the simulator and the CLI -----------------------------------------------------------------------

def test_simulated_loop_agrees_with_the_estimate_when_users_desynchronise():
    """Exponential lengths and a 1 s think time spread the users out (equal lengths sent together would move in
    waves, which no steady-state mean holds): the simulated throughput is within 10 % of the estimate's closed-loop
    rate, and its mean TPOT within 10 %."""
    from botec.simulate import simulate

    result = estimated(closed_contract(48, "1 s", length_distribution="exponential"))
    run = simulate(result, requests=6_000, replicas=1)
    analytic = run.analytic
    assert "6,000 requests from 48 users in a closed loop (think time 1 s, started over " in run.workload
    assert run.balancer == "user-affinity"
    assert analytic.requests_per_s_per_replica == pytest.approx(
        result.quantities["requests_per_s_on_a_replica"].value, rel=1e-9)
    assert run.throughput_requests_per_s == pytest.approx(analytic.requests_per_s_per_replica, rel=0.10)
    assert run.tpot.mean_seconds == pytest.approx(analytic.time_per_output_token_seconds, rel=0.10)
    assert run.max_running_batch <= 48


def test_simulate_cli_takes_concurrency(cli, tmp_path):
    code, out, err = cli("simulate", str(H100), "--concurrency", "8", "--think-time", "500 ms", "--requests", "400",
                         "--replicas", "1", "-f", "json", "--set", "supply.candidates=[]")
    assert code == 0, err
    data = json.loads(out)
    assert data["workload"].startswith("400 requests from 8 users in a closed loop (think time 0.5 s, started over ")
    for args, words in ((("--concurrency", "8", "--rate", "3"), "--concurrency and --rate exclude each other"),
                        (("--concurrency", "0"), "--concurrency: expected at least 1"),
                        (("--think-time", "2 s"), "--think-time is a closed loop's pause")):
        code, out, err = cli("simulate", str(H100), *args, "--requests", "50")
        assert code != 0 and words in err, err


def test_a_closed_contract_simulates_its_own_users():
    from botec.simulate import simulate

    run = simulate(estimated(closed_contract(6, "250 ms")), requests=300)
    assert run.workload.startswith("300 requests from 6 users in a closed loop (think time 0.25 s, started over ")


# --- calibrate -----------------------------------------------------------------------------------

def test_calibrate_reads_a_closed_loop_benchmark_as_users(tmp_path, cli):
    """A `vllm bench serve --max-concurrency 32 --request-rate inf` result whose latencies are botec's own with 32
    users at known efficiencies: estimated as 32 users (not the achieved rate), the efficiencies come back."""
    from test_calibrate_serving import figures, vllm_result

    from botec.measure.calibrate import measured_contract_data

    truth = {"memory_bandwidth_efficiency": 0.6, "matmul_efficiency": 0.5}
    data = closed_contract(32)
    data["workload"]["latency"] = {"percentile": 99}
    data["assumptions"] |= {"utilization_cap": 1} | truth
    q = values(estimated(data), {"replicas": 1})
    f = figures(q)
    run = vllm_result(q["requests_per_s_on_a_replica"], f, request_rate="inf", max_concurrency=32)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    result = json.loads(cli("calibrate", str(H100), str(path), "-f", "json")[1])
    for key, value in truth.items():
        assert result["assumptions"][f"assumptions.{key}"]["value"] == pytest.approx(value, rel=0.01)
    assert result["serving"]["concurrency"] == 32
    assert any(note.startswith("a closed-loop run (max_concurrency 32): a client sends its next request when one "
                               "returns; estimated as workload.traffic.concurrency 32") for note in result["notes"])

    from botec.contract import read_contract_data
    from botec.measure.serving_bench import parse

    closed = measured_contract_data(read_contract_data(H100), parse(json.dumps(run), "run.json"))
    assert closed["workload"]["traffic"]["concurrency"] == 32 and "requests_per_second" not in closed["workload"][
        "traffic"]
    paced = parse(json.dumps(run | {"request_rate": 4.0}), "run.json")      # a rate paces it: still a rate
    assert measured_contract_data(read_contract_data(H100), paced)["workload"]["traffic"]["requests_per_second"] == \
        pytest.approx(q["requests_per_s_on_a_replica"])
