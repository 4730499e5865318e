"""Calibrating a serving contract from a vLLM or SGLang benchmark of one server at one load.

A vLLM or SGLang serving benchmark (:mod:`botec.measure.serving_bench`) is one server at one load: a
serving contract is estimated at the measured traffic on one replica (:func:`measured_contract_data`:
prompt and output tokens from the totals, the achieved request throughput as the load, no latency
targets, utilization cap 1) and compared on mean and percentile TTFT and TPOT, end-to-end latency and
output tokens/s per accelerator. The back-solver gives ``memory_bandwidth_efficiency`` from the mean
TPOT and ``matmul_efficiency`` from the mean TTFT, alternately until both settle; ``step_overhead``
from the TPOT when no efficiency in (0, 1] reproduces it; ``matmul_efficiency`` from the throughput
when the measured load is above botec's saturated capacity (:func:`calibrate_serving`).
"""

from __future__ import annotations

from pathlib import Path

from botec.inputs.serving import TABLE_ASIDE
from botec.measure.calibrate.results import Calibration, Comparison
from botec.measure.calibrate.serving_solver import SETTLED, SOLVE_ROUNDS, evaluate, misses, settle, solve
from botec.units import format_quantity

LENGTH_TOLERANCE = 0.10     # the contract's prompt/output lengths this far from the run's are pointed out
AGREEMENT = 0.05            # measured within this share of the estimate: no assumption failed
CROWDED = 0.9               # above this share of the capacity the queue dominates TTFT: the pair is loosely pinned
TPOT_NOTE = ("{tool}'s TPOT is per request (end-to-end − TTFT) / (output tokens − 1), the first token excluded, "
             "averaged over requests; botec's is the mean time per output token after the first (the mean engine "
             "step at this load over the tokens a step gives each request){itl}")
RATE_NOTE = ("at a given load botec's output rate is that load × its output tokens per request: agreement checks "
             "the traffic as read, not the step model; the step model's saturated capacity is {capacity} per "
             "accelerator")
CLOSED_RATE_NOTE = ("with {users:,} users in a closed loop botec's output rate is its own: X solving X × R(X) = "
                    "{users:,} with its response time R, so agreement checks the step model; its saturated capacity "
                    "is {capacity} per accelerator")
# The quantities compared, and where a serving run's figure of each is read.
_TTFT, _TPOT = "time_to_first_token_seconds", "time_per_output_token_seconds"
_TTFT_P, _TPOT_P = "time_to_first_token_percentile_seconds", "time_per_output_token_percentile_seconds"
_E2E, _RATE = "end_to_end_latency_seconds", "output_tokens_per_s_per_accelerator"
_CAPACITY = "offline_requests_per_s_per_replica"
_LOAD = "requests_per_s_on_a_replica"
_COMPARED = (_TTFT, _TPOT, _TTFT_P, _TPOT_P, _E2E, _RATE, "replica_accelerators",
             "offline_output_tokens_per_s_per_accelerator", _CAPACITY, _LOAD)


def closed_loop_users(run) -> int | None:
    """The users of a closed-loop run: ``max_concurrency`` when nothing else paced the requests (``request_rate``
    inf or not stated: each client sent its next request as its last returned); None for a run at a rate (a
    finite ``request_rate`` paces it, even under a concurrency cap)."""
    import math

    if run.max_concurrency is None or (run.request_rate is not None and math.isfinite(run.request_rate)):
        return None
    return int(run.max_concurrency)


def measured_contract_data(data: dict, run) -> dict:
    """A serving contract's data with its traffic replaced by a measured run's, on one replica.

    prompt_tokens = round(total_input_tokens / completed), output_tokens = round(total_output_tokens /
    completed) (each at least 1), the load: concurrency = max_concurrency for a closed-loop run
    (:func:`closed_loop_users`: the users, whose rate botec then derives), else requests_per_second =
    request_throughput (the achieved load); no latency targets (the percentile set to the one the run gives),
    utilization_cap = 1 (so one replica carries the load whenever botec's saturated capacity allows), no
    candidate accelerators. Everything else (model, accelerator, layout, engine, assumptions) is the contract's.
    """
    import copy

    from botec.contract import set_field

    data = copy.deepcopy(data)
    traffic = dict(data["workload"].get("traffic") or {})
    for key in ("requests_per_second", "requests_per_day", "concurrency", "think_time"):
        traffic.pop(key, None)
    users = closed_loop_users(run)
    traffic |= ({"concurrency": users} if users is not None else {"requests_per_second": float(run.requests_per_s)})
    traffic |= {"prompt_tokens": max(1, round(run.prompt_tokens)),
                "output_tokens": max(1, round(run.output_tokens))}
    data["workload"]["traffic"] = traffic
    latency = data["workload"].get("latency")
    percentile = run.percentile or (latency.get("percentile") if isinstance(latency, dict) else None)
    data["workload"]["latency"] = {"percentile": percentile} if percentile else {}
    set_field(data, "assumptions.utilization_cap", 1)
    if isinstance(data.get("supply"), dict):
        data["supply"].pop("candidates", None)
    return data




def _percent(share: float) -> str:
    """0.21 -> '21 %' (the report's way of writing a share)."""
    return f"{share * 100:.0f} %"


def _slower(measured: float, estimated: float) -> str:
    """'21 % slower than estimated' for measured / estimated = 1.21."""
    change = measured / estimated - 1
    return f"{_percent(abs(change))} {'slower' if change > 0 else 'faster'} than estimated"


def _arrivals(run) -> str:
    import math

    if run.max_concurrency is not None:
        rate = "" if run.request_rate is None or math.isinf(run.request_rate) else \
            f", sent at up to {run.request_rate:g} requests/s"
        return f"closed loop: at most {run.max_concurrency:,} requests in flight{rate}"
    if run.request_rate is None:
        return "arrivals not stated"
    if math.isinf(run.request_rate):
        return "every prompt sent at once (request_rate inf, no concurrency cap)"
    if run.burstiness is None or run.burstiness == 1:
        return f"Poisson arrivals at {run.request_rate:g} requests/s"
    return f"gamma arrivals at {run.request_rate:g} requests/s, burstiness {run.burstiness:g}"


def calibrate_serving(contract_path: str | Path, run, source: str, overrides: list[str] | tuple[str, ...] = ()
                      ) -> Calibration:
    """Compare a serving contract with a vLLM or SGLang benchmark of one server, back-solve the step model's
    efficiencies and name the one that failed.

    The estimate is the contract at the measured traffic on one replica (:func:`measured_contract_data`),
    its load per replica held at the measured ``request_throughput`` while solving. Then, by the back-solver
    (:func:`botec.explore.solve.solve_for`, the graph's own formulas read backwards):

    - ``memory_bandwidth_efficiency`` at which ``time_per_output_token_seconds`` equals the measured mean TPOT
      (when no value in (0, 1] does: ``step_overhead`` instead, seconds ≥ 0);
    - ``matmul_efficiency`` at which ``time_to_first_token_seconds`` equals the measured mean TTFT, the solved
      bandwidth efficiency held; the two alternate for :data:`SOLVE_ROUNDS` rounds, then, if the pair does not
      yet give both figures, Newton's method on the pair finishes (:func:`settle`);
    - when botec's saturated capacity (``offline_requests_per_s_per_replica``) is below the measured request
      throughput, the latencies cannot be reproduced at that load: ``matmul_efficiency`` at which the capacity
      equals the measured throughput instead.

    The failed assumption is the back-solved one farthest, as a ratio, from the contract's value. ``overrides``:
    ``--set FIELD=VALUE`` applied to the contract first.
    """
    import math

    from botec.contract import apply_overrides, parse_contract, read_contract_data
    from botec.estimation import estimate

    contract_path = Path(contract_path)
    data = read_contract_data(contract_path)
    if overrides:
        data = apply_overrides(data, list(overrides))
    measured_data = measured_contract_data(data, run)
    contract = parse_contract(measured_data, origin=f"{contract_path} at the load measured in {Path(run.path).name}")
    result = estimate(contract, base_dir=contract_path.resolve().parent, compare=False)
    q, inputs = result.quantities, result.inputs
    users = closed_loop_users(run)
    # a rate is held at the measured one; a closed loop's users on one replica give botec's own rate
    load = {_LOAD: run.requests_per_s} if users is None else {"replicas": 1.0}
    at_load = (f"at {run.requests_per_s:.4g} requests/s" if users is None
               else f"with {users:,} users in a closed loop")
    estimated = evaluate(inputs, load, _COMPARED)
    capacity = estimated[_CAPACITY]
    overloaded = capacity < run.requests_per_s
    accelerators = estimated["replica_accelerators"]
    prompt, output = measured_data["workload"]["traffic"]["prompt_tokens"], \
        measured_data["workload"]["traffic"]["output_tokens"]
    percentile = run.percentile
    tool = run.tool
    note = f"measured: {source}"

    measured_lines = [
        f"read as {'an' if tool[0] in 'AEIOS' else 'a'} {tool} serving benchmark"
        + (f" (run {run.run} of {run.runs})" if run.runs > 1 else "") + f": {run.completed:,} requests completed in "
        f"{format_quantity(run.duration_seconds, 's')}" + (f", model {run.model}" if run.model else "")
        + (f", backend {run.backend}" if run.backend else "") + (f", {run.date}" if run.date else ""),
        f"traffic: {run.prompt_tokens:,.1f} prompt + {run.output_tokens:,.1f} output tokens per request (the totals "
        f"over the completed requests), {run.requests_per_s:.4g} requests/s achieved, "
        f"{run.output_tokens_per_s:,.1f} output tokens/s; {_arrivals(run)}",
        f"estimated as one replica of {accelerators:g} accelerator(s) {at_load} of "
        f"{prompt:,} + {output:,} tokens" + (f", latencies at P{percentile}" if percentile else ""),
    ]
    if run.mean_itl_seconds is not None:
        measured_lines.append(f"mean ITL {format_quantity(run.mean_itl_seconds, 's')} (the gap between streamed "
                              "chunks, per token)")
    if run.concurrency is not None:
        measured_lines.append(f"mean requests in flight {run.concurrency:.3g} ({tool}'s concurrency: the requests' "
                              "latencies summed over the duration)")
    notes = list(run.notes)
    missing: list[str] = []
    contract_traffic = data["workload"].get("traffic") or {}
    for words, key, measured_mean in (("prompt", "prompt_tokens", run.prompt_tokens),
                                      ("output", "output_tokens", run.output_tokens)):
        stated = contract_traffic.get(key)
        stated = stated.get("value") if isinstance(stated, dict) else stated
        if isinstance(stated, (int, float)) and abs(stated - measured_mean) > LENGTH_TOLERANCE * measured_mean:
            notes.append(f"the contract's {words} length is {stated:,.0f} tokens, the run's {measured_mean:,.1f} "
                         f"(more than {_percent(LENGTH_TOLERANCE)} apart): the calibration is of the measured lengths")
    if users is not None:
        notes.append(f"a closed-loop run (max_concurrency {run.max_concurrency:,}): a client sends its next request "
                     f"when one returns; estimated as workload.traffic.concurrency {users:,}, botec's rate the root of "
                     "X × R(X) = users (botec.serving.closed), its prompts' queue still the M/G/1 of random arrivals "
                     "(which errs long for a closed loop's smoother ones)")
    elif run.closed_loop:
        notes.append(f"a closed-loop run (max_concurrency {run.max_concurrency:,}) paced by a request rate of "
                     f"{run.request_rate:g}/s: estimated at the rate it achieved, the load")
    if not overloaded and run.requests_per_s > CROWDED * capacity:
        notes.append(f"at {_percent(run.requests_per_s / capacity)} of botec's saturated capacity the prompt queue "
                     "dominates the TTFT and each efficiency moves both figures: other pairs may give the same means; "
                     "a run at a lighter load pins them better")
    if run.burst:
        notes.append("request_rate inf with no concurrency cap: every prompt was sent at once, so the TTFT includes "
                     "the wait of a queue being drained, which no steady load reproduces; matmul_efficiency is not "
                     "solved on it (run with a request rate or a max_concurrency)")

    itl = (f"; its mean ITL, {format_quantity(run.mean_itl_seconds, 's')}, is the gap between streamed chunks"
           if run.mean_itl_seconds is not None else "")
    comparisons: list[Comparison] = []
    if overloaded:
        missing.append(f"TTFT: botec's replica cannot carry {run.requests_per_s:.4g} requests/s (its saturated "
                       f"capacity is {capacity:.4g}): its prompt queue grows without bound")
    else:
        comparisons.append(Comparison(_TTFT, "s", estimated[_TTFT], run.mean_ttft_seconds))
        if percentile:
            comparisons.append(Comparison(f"{_TTFT_P} (P{percentile})", "s", estimated[_TTFT_P],
                                          run.percentiles["ttft"][percentile]))
    comparisons.append(Comparison(_TPOT, "s", estimated[_TPOT], run.mean_tpot_seconds,
                                  TPOT_NOTE.format(tool=tool, itl=itl)))
    if percentile:
        comparisons.append(Comparison(f"{_TPOT_P} (P{percentile})", "s", estimated[_TPOT_P],
                                      run.percentiles["tpot"][percentile]))
    else:
        missing.append("latency percentiles: the file gives no P99, P95, P90 or median of both TTFT and TPOT")
    if run.mean_e2e_seconds is not None and not overloaded:
        comparisons.append(Comparison(_E2E, "s", estimated[_E2E], run.mean_e2e_seconds))
    elif run.mean_e2e_seconds is None:
        missing.append("end_to_end_latency_seconds: no mean end-to-end latency in the file"
                       + (" (add e2el to --percentile-metrics)" if run.format == "vllm-bench" else ""))
    capacity_text = format_quantity(estimated["offline_output_tokens_per_s_per_accelerator"], "tokens/s")
    comparisons.append(Comparison(_RATE, "tokens/s", estimated[_RATE], run.output_tokens_per_s / accelerators,
                                  RATE_NOTE.format(capacity=capacity_text) if users is None
                                  else CLOSED_RATE_NOTE.format(users=users, capacity=capacity_text)))

    # back-solving: each solve holds the load and the other solved assumptions
    # a solved efficiency is the roofline's: the measured GEMM tables step aside, as when a contract states one
    # (botec.inputs.serving), so the calibrated contract it writes prices its step as solved
    held: dict[str, float] = dict(load) | TABLE_ASIDE
    solved: dict[str, tuple[float, str, float, float]] = {}   # path -> (value, figure, measured, estimated)
    unsolved: list[str] = []

    def name_of(path: str) -> str:
        return inputs.stated_fields[path][0]

    def at_one(path: str) -> dict[str, float]:
        return evaluate(inputs, {key: v for key, v in held.items() if key != name_of(path)} | {name_of(path): 1.0},
                         (_TTFT, _TPOT, _CAPACITY))

    if overloaded:
        path = "assumptions.matmul_efficiency"
        value = solve(inputs, _CAPACITY, run.requests_per_s, path, TABLE_ASIDE)   # the roofline
        if value is None:
            best = at_one(path)[_CAPACITY]
            unsolved.append(f"no matmul_efficiency in (0, 1] reproduces the measured {run.requests_per_s:.4g} "
                            f"requests/s: even at 1 botec's capacity is {best:.4g}; the step model charges a cost "
                            "this server does not pay (step overhead? a kernel?)")
        else:
            held[name_of(path)] = value
            solved[path] = (value, "the request throughput", run.requests_per_s, capacity)
    else:
        tpot_path: str | None = "assumptions.memory_bandwidth_efficiency"
        ttft_path: str | None = None if run.burst else "assumptions.matmul_efficiency"
        def targets(tpot_path, ttft_path) -> list[tuple[str, float, str, float]]:
            """(quantity, measured, graph input solved for it, its upper bound) of each solve in force."""
            return [(quantity, measured_value, name_of(path), 1.0 if "efficiency" in path else math.inf)
                    for quantity, measured_value, path in ((_TPOT, run.mean_tpot_seconds, tpot_path),
                                                           (_TTFT, run.mean_ttft_seconds, ttft_path)) if path]

        for _ in range(SOLVE_ROUNDS):
            if tpot_path is not None:
                value = solve(inputs, _TPOT, run.mean_tpot_seconds, tpot_path, held)
                if value is None and tpot_path == "assumptions.memory_bandwidth_efficiency":
                    best = at_one(tpot_path)[_TPOT]
                    unsolved.append(
                        f"no memory_bandwidth_efficiency in (0, 1] reproduces the measured mean TPOT of "
                        f"{format_quantity(run.mean_tpot_seconds, 's')}: even at 1 botec's is "
                        f"{format_quantity(best, 's')}; the step model charges a cost this server does not pay "
                        "(step overhead? a kernel?): solving assumptions.step_overhead instead")
                    tpot_path = "assumptions.step_overhead"
                    value = solve(inputs, _TPOT, run.mean_tpot_seconds, tpot_path, held)
                if value is None:
                    if tpot_path == "assumptions.step_overhead":
                        unsolved.append("no step_overhead ≥ 0 reproduces it either: botec's decode step is slower "
                                        "than measured without any fixed cost (check the model, the weight and KV "
                                        "precisions, prefix caching, speculative decoding)")
                    tpot_path = None
                else:
                    held[name_of(tpot_path)] = value
            if ttft_path is not None:
                value = solve(inputs, _TTFT, run.mean_ttft_seconds, ttft_path, held)
                if value is None:
                    best = at_one(ttft_path)[_TTFT]
                    unsolved.append(
                        f"no matmul_efficiency in (0, 1] reproduces the measured mean TTFT of "
                        f"{format_quantity(run.mean_ttft_seconds, 's')}: even at 1 botec's is "
                        f"{format_quantity(best, 's')}; the step model charges a cost this server does not pay "
                        "(step overhead? a kernel?)")
                    ttft_path = None
                else:
                    held[name_of(ttft_path)] = value
            if misses(inputs, held, targets(tpot_path, ttft_path)) <= SETTLED:
                break
        if tpot_path is not None and ttft_path is not None and \
                misses(inputs, held, targets(tpot_path, ttft_path)) > SETTLED:
            held |= settle(inputs, held, targets(tpot_path, ttft_path))
        if tpot_path is not None:
            solved[tpot_path] = (held[name_of(tpot_path)], "TPOT", run.mean_tpot_seconds, estimated[_TPOT])
        if ttft_path is not None:
            solved[ttft_path] = (held[name_of(ttft_path)], "TTFT", run.mean_ttft_seconds, estimated[_TTFT])
        if tpot_path == "assumptions.memory_bandwidth_efficiency":
            # one TPOT cannot tell a slower memory from a fixed cost per step: say what the other reading needs
            alternative = solve(inputs, _TPOT, run.mean_tpot_seconds, "assumptions.step_overhead",
                                 {key: v for key, v in held.items() if key != name_of(tpot_path)})
            if alternative is not None:
                notes.append(f"one load cannot tell a slower memory from a fixed cost per step: at the assumed "
                             f"memory_bandwidth_efficiency {q[name_of(tpot_path)].value:.3g}, a step_overhead of "
                             f"{format_quantity(alternative, 's')} (assumed "
                             f"{format_quantity(q['step_overhead_seconds'].value, 's')}) reproduces the TPOT as well; "
                             "runs at two loads separate them")

    assumptions: dict[str, tuple[float, str]] = {}
    for path, (value, figure, measured_value, _) in solved.items():
        what = {"TPOT": f"mean TPOT {format_quantity(measured_value, 's')}",
                "TTFT": f"mean TTFT {format_quantity(measured_value, 's')}"}.get(
            figure, f"{run.requests_per_s:.4g} requests/s at saturation")
        assumptions[path] = (value, f"{note}: {what} {at_load} of {prompt:,} + {output:,} tokens")
    if solved and not overloaded:
        after = evaluate(inputs, held, (_TTFT, _TPOT, _TTFT_P, _TPOT_P))
        parts = [f"TTFT {format_quantity(after[_TTFT], 's')} (measured {format_quantity(run.mean_ttft_seconds, 's')})",
                 f"TPOT {format_quantity(after[_TPOT], 's')} (measured {format_quantity(run.mean_tpot_seconds, 's')})"]
        if percentile:
            parts += [f"P{percentile} TTFT {format_quantity(after[_TTFT_P], 's')} (measured "
                      f"{format_quantity(run.percentiles['ttft'][percentile], 's')})",
                      f"P{percentile} TPOT {format_quantity(after[_TPOT_P], 's')} (measured "
                      f"{format_quantity(run.percentiles['tpot'][percentile], 's')})"]
        notes.append(f"with the back-solved assumptions at the measured {'load' if users is None else 'users'}: "
                     + ", ".join(parts))
        checked = [(name, target) for name, target, path in ((_TTFT, run.mean_ttft_seconds, ttft_path),
                                                             (_TPOT, run.mean_tpot_seconds, tpot_path)) if path]
        if any(abs(after[name] / target - 1) > 0.01 for name, target in checked):
            notes.append("the back-solved pair does not settle: it misses the measured figures by more than 1 % (see "
                         "above)")

    diagnosis = []
    if overloaded:
        diagnosis.append(f"botec's saturated capacity, {capacity:.4g} requests/s per replica, is below the measured "
                         f"{run.requests_per_s:.4g}: the estimate cannot carry the measured load on one replica; "
                         "botec's step model is too slow for this server, and matmul_efficiency is back-solved "
                         "from the throughput instead")
    else:
        diagnosis.append(f"load: {run.requests_per_s:.4g} requests/s on one replica"
                         + (f" ({users:,} users; botec's own rate with them {estimated[_LOAD]:.4g})" if users else "")
                         + f", {_percent(run.requests_per_s / capacity)} of botec's saturated capacity of "
                         f"{capacity:.4g} requests/s")
    if solved:
        def distance(item):
            path, (value, *_rest) = item
            return abs(math.log(value / q[name_of(path)].value))

        path, (value, figure, measured_value, estimated_value) = max(solved.items(), key=distance)
        assumed = q[name_of(path)].value

        def shown(v: float) -> str:
            return format_quantity(v, "s") if path == "assumptions.step_overhead" else f"{v:.3g}"

        if figure == "the request throughput":
            gap = f"the measured throughput is {_percent(measured_value / estimated_value - 1)} above botec's capacity"
        else:
            gap = f"{figure} {_slower(measured_value, estimated_value)}"
        latencies_agree = all(abs(c.ratio - 1) <= AGREEMENT for c in comparisons if c.name in (_TTFT, _TPOT))
        if latencies_agree and not overloaded:
            diagnosis.append(f"mean TTFT and TPOT within {_percent(AGREEMENT)} of the estimate: no assumption failed")
        else:
            diagnosis.append(f"the failed assumption: {path.removeprefix('assumptions.')}: {shown(assumed)} assumed, "
                             f"{shown(value)} measured ({gap})")
    diagnosis += unsolved
    context = {"format": run.format, "tool": tool, "run": run.run, "runs": run.runs,
               "requests_per_s": run.requests_per_s, "concurrency": users, "prompt_tokens": prompt,
               "output_tokens": output,
               "percentile": percentile, "replica_accelerators": accelerators,
               "capacity_requests_per_s_per_replica": capacity, "overloaded": overloaded}
    return Calibration(comparisons, assumptions, diagnosis, notes, measured_lines, missing, context)

