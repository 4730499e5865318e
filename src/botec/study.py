"""``botec study``: a grid of serving contracts × varied fields × rates × seeds, run as one job, one tidy table.

A study file (YAML) names the grid::

    study: llama-8b-accelerators
    contracts: [../serve-llama3.1-8b-h100.yaml]      # paths relative to the study file's folder
    vary:                                            # optional: dotted contract fields, each a list (their product)
      supply.accelerator: [h100-sxm, h200]
    rates: [10, 20]                                  # fleet arrivals per second (optional: the contract's traffic)
    seeds: 2                                         # runs per cell: seeds 0 … n − 1, or a list of seeds
    requests: 2000                                   # per run (default 10,000)
    replicas: 2                                      # optional: a fixed fleet (default: each estimate's replicas)
    measure: [ttft_p99, tpot_p99, throughput, goodput]   # optional: the simulated figures in the table

A **run** is one contract, one point of the ``vary`` grid, one rate and one seed: exactly
``botec simulate CONTRACT --set FIELD=VALUE … --rate RATE --seed SEED --requests N`` (the estimate of
:func:`botec.estimation.estimate_file` with the overrides, then :func:`botec.simulate.simulate`). Each run is one
task of :func:`botec.fanout.run_tasks` and carries its own seed, so the table is the same whatever the worker
count. A row holds the run's coordinates, then the simulated figures, the verdicts against the contract's
targets and the analytic model's figures at the same load beside them (:data:`COLUMNS`).

A rate is the fleet's: the fleet keeps the estimate's replicas (sized for the contract's traffic), so a higher
rate loads each replica more, as ``simulate --rate`` does. To size the fleet for each rate instead, vary
``workload.traffic.requests_per_second``.

Serving contracts only. A training contract has no simulation; a grid of training layouts is ``botec sweep``'s
work (vectorized over numpy arrays, a million configurations a minute), so a study refuses one and says so.

Everything in the file is checked before any run: unknown keys, empty lists, rates, seeds, the grid's size
(at most :data:`MAX_RUNS` runs), its work (at most :data:`MAX_STUDY_REQUESTS` simulated requests, runs × requests
per run, unless ``--max-requests`` raises it; :func:`check_work`) and every contract × vary point (each is
estimated once here, so a bad value names the vary field). A run that the simulator refuses (a fleet it cannot
size, a closed loop on disaggregated replicas) does not stop the study: its row says why in ``status``.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from botec.errors import ContractError, UserError
from botec.simulation_limits import MAX_STUDY_REQUESTS, SIMULATED_CPU_SECONDS_PER_REQUEST

__all__ = ["MAX_RUNS", "MAX_STUDY_REQUESTS", "MEASURES", "SIMULATED_CPU_SECONDS_PER_REQUEST", "Run", "Study",
           "StudyFile", "check_work", "columns_of", "load_study", "rows_of", "run_cell", "runs_of", "work_text"]

MAX_RUNS = 100_000
"""The most runs (contracts × vary points × rates × seeds) a study may hold: a larger grid is more likely a typo
than a plan (its work is bounded apart, by :data:`MAX_STUDY_REQUESTS`)."""
MAX_SEEDS = 100
"""The most seeds per cell (as ``simulate --seeds``)."""
MAX_STUDY_BYTES = 1024 * 1024

_FIELD_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _latency(attribute: str, statistic: str):
    """The figure ``statistic`` (mean, p50, p90, p99) of a simulation's latency ``attribute``, in seconds."""
    return lambda simulation: getattr(getattr(simulation, attribute), f"{statistic}_seconds")


# A measure's short name (the study file's ``measure``) -> (its column, the simulation's figure). Units in the names.
MEASURES: dict[str, tuple[str, Any]] = {
    **{f"{short}_{statistic}": (f"{short}_{statistic}_s", _latency(attribute, statistic))
       for short, attribute in (("ttft", "ttft"), ("tpot", "tpot"), ("e2e", "end_to_end"))
       for statistic in ("mean", "p50", "p90", "p99")},
    "throughput": ("throughput_requests_per_s", lambda s: s.throughput_requests_per_s),
    "output_tokens": ("output_tokens_per_s", lambda s: s.output_tokens_per_s),
    "goodput": ("goodput_requests_per_s", lambda s: s.goodput_requests_per_s),
    "share_meeting_targets": ("share_meeting_targets", lambda s: s.share_meeting_targets),
    "decode_batch": ("mean_decode_batch", lambda s: s.mean_decode_batch),
    "preemptions": ("preemptions", lambda s: s.preemptions),
}

RUN_COLUMNS = ("status", "replicas", "accelerators", "offered_requests_per_s", "measured_requests",
               "latency_percentile")
VERDICT_COLUMNS = ("ttft_target_s", "ttft_at_percentile_s", "ttft_target_met", "tpot_target_s",
                   "tpot_at_percentile_s", "tpot_target_met", "steady_state")
ANALYTIC_COLUMNS = ("analytic_ttft_mean_s", "analytic_ttft_percentile_s", "analytic_tpot_mean_s",
                    "analytic_tpot_percentile_s", "analytic_e2e_mean_s", "analytic_decode_batch",
                    "analytic_capacity_requests_per_s_per_replica")


class StudyFile(BaseModel):
    """The study file as written (paths still relative to its folder)."""

    model_config = ConfigDict(extra="forbid")

    study: str
    description: str = ""
    contracts: list[str]
    vary: dict[str, list[Any]] = {}
    rates: Optional[list[Any]] = None
    seeds: Any = 1
    requests: Any = 10_000
    replicas: Any = None
    measure: Optional[list[str]] = None

    @field_validator("study")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value.strip() or len(value) > 200:
            raise ValueError(f"expected a name of 1 to 200 characters, got {value[:40]!r}")
        return value

    @field_validator("contracts", "rates", "measure")
    @classmethod
    def _not_empty(cls, value):
        if value is not None and not value:
            raise ValueError("expected at least one entry, got an empty list")
        if value is not None and len(set(map(repr, value))) < len(value):
            raise ValueError(f"expected each entry once, got {_repeated(value)!r} twice")
        return value

    @field_validator("vary")
    @classmethod
    def _grid(cls, value: dict) -> dict:
        for path, values in value.items():
            if not _FIELD_PATH.fullmatch(path):
                raise ValueError(f"expected dotted contract fields such as supply.accelerator, got {path[:80]!r}")
            if not values:
                raise ValueError(f"{path}: expected at least one value, got an empty list")
            if len(set(map(repr, values))) < len(values):
                raise ValueError(f"{path}: expected each value once, got {_repeated(values)!r} twice")
        return value

    @field_validator("rates")
    @classmethod
    def _rates(cls, value):
        for index, rate in enumerate(value or []):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (0 < rate < math.inf):
                raise ValueError(f"[{index}]: expected a positive, finite number of requests per second, got {rate!r}")
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value):
        from botec.simulation_limits import MAX_SEED

        if _whole(value):
            if not 1 <= value <= MAX_SEEDS:
                raise ValueError(f"expected 1 to {MAX_SEEDS} runs per cell (seeds 0 … n − 1) or a list of seeds, "
                                 f"got {value}")
            return value
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_SEEDS:
            raise ValueError(f"expected a count of runs per cell or a list of 1 to {MAX_SEEDS} seeds, got {value!r}")
        for seed in value:
            if not _whole(seed) or not 0 <= seed <= MAX_SEED:
                raise ValueError(f"expected seeds from 0 to {MAX_SEED:,}, got {seed!r}")
        if len(set(value)) < len(value):
            raise ValueError(f"expected each seed once, got {_repeated(value)!r} twice")
        return value

    @field_validator("requests")
    @classmethod
    def _requests(cls, value):
        from botec.simulation_limits import MAX_REQUESTS

        if not _whole(value) or not 1 <= value <= MAX_REQUESTS:
            raise ValueError(f"expected a whole number of requests per run from 1 to {MAX_REQUESTS:,}, got {value!r}")
        return value

    @field_validator("replicas")
    @classmethod
    def _replicas(cls, value):
        from botec.simulation_limits import MAX_REPLICAS

        if value is not None and (not _whole(value) or not 1 <= value <= MAX_REPLICAS):
            raise ValueError(f"expected a whole number of replicas from 1 to {MAX_REPLICAS:,}, got {value!r}")
        return value

    @field_validator("measure")
    @classmethod
    def _measures(cls, value):
        from botec.catalog import did_you_mean

        for name in value or []:
            if name not in MEASURES:
                hint = did_you_mean(name, MEASURES) or f" (known: {', '.join(MEASURES)})"
                raise ValueError(f"unknown measure {name!r}{hint}")
        return value


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _repeated(values: list):
    seen = set()
    for value in values:
        if repr(value) in seen:
            return value
        seen.add(repr(value))
    return None


@dataclass(frozen=True)
class Run:
    """One run of the grid: what the worker needs (picklable) and the coordinates its row starts with."""

    contract_path: str                # absolute
    overrides: tuple[str, ...]        # FIELD=VALUE, as --set takes them
    rate_per_s: Optional[float]       # None: the contract's traffic
    seed: int
    requests: int
    replicas: Optional[int]
    coordinates: tuple                # (column, value) pairs


@dataclass(frozen=True)
class Study:
    """A checked study: its file, the runs of the grid in order, and the columns of its table."""

    name: str
    path: Path
    spec: StudyFile
    runs: tuple[Run, ...]
    columns: tuple[str, ...]

    @property
    def measures(self) -> list[str]:
        return list(self.spec.measure or MEASURES)


def load_study(path, max_requests: int = MAX_STUDY_REQUESTS) -> Study:
    """Read and check a study file (every contract × vary point estimated once), or a one-line UserError; a study
    of more than ``max_requests`` simulated requests is refused before any estimate (:func:`check_work`)."""
    from botec.yamlfile import load_user_yaml
    from botec.errors import read_text_file

    import yaml

    path = Path(path)
    text = read_text_file(path, "study file", max_bytes=MAX_STUDY_BYTES)
    try:
        data = load_user_yaml(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ContractError(f"malformed YAML{where}: {problem}", origin=str(path)) from None
    if not isinstance(data, dict):
        raise ContractError("a study file is a mapping with study, contracts and optionally vary, rates, seeds, "
                            "requests, replicas, measure", origin=str(path))
    try:
        spec = StudyFile.model_validate(data)
    except ValidationError as error:
        raise _one_line(error, path) from None
    runs = runs_of(spec, path, max_requests)
    return Study(spec.study, path, spec, runs, columns_of(spec))


def _one_line(error: ValidationError, path: Path) -> ContractError:
    """The first problem of the study file's validation, naming its key (``rates[1]``, ``vary``)."""
    from botec.catalog import did_you_mean

    first = error.errors()[0]
    key = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    if first["type"] == "extra_forbidden":
        known = list(StudyFile.model_fields)
        hint = did_you_mean(key, known) or f" (allowed: {', '.join(known)})"
        return ContractError(f"unknown key{hint}", field=key, origin=str(path))
    if first["type"] == "missing":
        return ContractError("required key is missing", field=key, origin=str(path))
    message = first["msg"].removeprefix("Value error, ")
    if message.startswith("["):   # an entry's own index: rates[1]
        index, _, message = message.partition(": ")
        key += index
    elif first["type"] in ("list_type", "dict_type", "string_type"):
        from botec.units import excerpt

        message = f"{message.lower()}, got {excerpt(first.get('input'))}"
    return ContractError(message, field=key, origin=str(path))


def work_text(runs: int, requests: int) -> str:
    """The study's work in one phrase: R runs × n requests = R·n simulated requests, about R·n·t_req of CPU
    (t_req = :data:`SIMULATED_CPU_SECONDS_PER_REQUEST`)."""
    from botec.units import format_quantity

    total = runs * requests
    return (f"{runs:,} runs × {requests:,} requests = {total:,} simulated requests, about "
            f"{format_quantity(total * SIMULATED_CPU_SECONDS_PER_REQUEST, 's')} of CPU at "
            f"{SIMULATED_CPU_SECONDS_PER_REQUEST * 1e6:g} µs a request")


def check_work(runs: int, requests: int, max_requests: int, path: Path) -> None:
    """A one-line UserError when ``runs`` × ``requests`` simulated requests exceed ``max_requests``, naming the
    figures and ``--max-requests`` (before any estimate or simulation: the grid's size alone decides)."""
    if runs * requests > max_requests:
        raise UserError(f"{path}: the study is {work_text(runs, requests)} (benchmarks/simulate_100k.py); above "
                        f"the cap of {max_requests:,} simulated requests: pass --max-requests {runs * requests} to "
                        "run it anyway, or give it fewer runs or requests")


def runs_of(spec: StudyFile, path: Path, max_requests: int = MAX_STUDY_REQUESTS) -> tuple[Run, ...]:
    """Every run of the grid, contracts outermost, then vary points, rates, seeds; the grid's size and work
    checked first (:func:`check_work`), then each configuration."""
    from botec.errors import check_user_path
    from botec.simulation_limits import check_arrival_span

    folder = path.resolve().parent
    fields = list(spec.vary)
    points = list(itertools.product(*(spec.vary[field] for field in fields)))
    rates = spec.rates or [None]
    seeds = list(range(spec.seeds)) if _whole(spec.seeds) else list(spec.seeds)
    count = len(spec.contracts) * len(points) * len(rates) * len(seeds)
    if count > MAX_RUNS:
        raise ContractError(f"the grid holds {count:,} runs ({len(spec.contracts)} contracts × {len(points)} vary "
                            f"points × {len(rates)} rates × {len(seeds)} seeds); expected at most {MAX_RUNS:,}",
                            field="vary" if len(points) > 1 else "seeds", origin=str(path))
    check_work(count, spec.requests, max_requests, path)
    for index, rate in enumerate(spec.rates or []):
        try:
            check_arrival_span(spec.requests, float(rate), f"rates[{index}]")
        except UserError as error:
            raise UserError(f"{path}: {error}") from None
    runs = []
    for index, written in enumerate(spec.contracts):
        check_user_path(written, field=f"contracts[{index}]", origin=str(path))   # (a NUL: resolve() would raise)
        contract = (folder / written).resolve()
        if not contract.is_file():
            raise ContractError(f"no such contract file: {written} (relative to {folder})",
                                field=f"contracts[{index}]", origin=str(path))
        for point in points:
            overrides = tuple(f"{field}={_yaml_value(value)}" for field, value in zip(fields, point))
            _check_configuration(path, index, written, contract, overrides)
            for rate, seed in itertools.product(rates, seeds):
                coordinates = (("study", spec.study), ("contract", written), *zip(fields, point),
                               ("rate_requests_per_s", rate), ("seed", seed), ("requests", spec.requests))
                runs.append(Run(str(contract), overrides, None if rate is None else float(rate), seed,
                                spec.requests, spec.replicas, coordinates))
    return tuple(runs)


def _yaml_value(value) -> str:
    """A vary value as ``--set`` reads it (YAML): JSON is YAML, so a string stays a string (``"8"`` is not 8)."""
    import json

    return json.dumps(value, ensure_ascii=False)


def _check_configuration(path: Path, index: int, written: str, contract: Path, overrides: tuple) -> None:
    """Estimate one contract × vary point (cached for the runs in this process), or a one-line error naming it."""
    try:
        result = _estimate(str(contract), overrides)
    except ContractError as error:
        text = str(error)
        blamed = re.match(r"--set ([^=]+)=", text)
        where = f"vary.{blamed.group(1)}" if blamed else f"contracts[{index}]"
        detail = error.detail if blamed or error.field is None else f"{error.field}: {error.detail}"
        point = f" with {', '.join(overrides)}" if overrides else ""
        raise UserError(f"{path}: {where}: {written}{point}: {detail}") from None
    if result.kind != "serving":
        raise ContractError(f"{written} is a {result.kind} contract; a study simulates serving contracts (a grid of "
                            "training layouts is `botec sweep`'s work)", field=f"contracts[{index}]", origin=str(path))


@lru_cache(maxsize=256)
def _estimate(contract_path: str, overrides: tuple):
    """The estimate of a contract with its overrides, once per process (a worker runs many seeds and rates of it)."""
    from botec.estimation import estimate_file

    return estimate_file(contract_path, list(overrides))


def columns_of(spec: StudyFile) -> tuple[str, ...]:
    """The table's columns: coordinates, the run, the chosen measures, the verdicts, the analytic figures."""
    coordinates = ("study", "contract", *spec.vary, "rate_requests_per_s", "seed", "requests")
    measures = tuple(MEASURES[name][0] for name in (spec.measure or MEASURES))
    return coordinates + ("contract_name",) + RUN_COLUMNS + measures + VERDICT_COLUMNS + ANALYTIC_COLUMNS


def run_cell(run: Run) -> dict:
    """One run's figures (every measure: the table keeps the chosen ones), or its ``status`` when the simulator
    refuses it; a finite float, an int, a bool or None (not measured) in each. Module-level: a worker imports it."""
    from botec.simulate import simulate

    result = _estimate(run.contract_path, run.overrides)
    try:
        sim = simulate(result, requests=run.requests, seed=run.seed, rate=run.rate_per_s, replicas=run.replicas)
    except UserError as error:
        return {"contract_name": result.inputs.name, "status": str(error)}
    verdicts = {v.metric.lower(): v for v in sim.verdicts}
    row = {"contract_name": sim.contract_name, "status": "ok", "replicas": sim.replicas,
           "accelerators": sim.accelerators, "offered_requests_per_s": sim.offered_requests_per_s,
           "measured_requests": sim.measured_requests, "latency_percentile": sim.latency_percentile}
    row.update({column: figure(sim) for column, figure in MEASURES.values()})
    for metric in ("ttft", "tpot"):
        verdict = verdicts.get(metric)
        row[f"{metric}_target_s"] = verdict.target_seconds if verdict else None
        row[f"{metric}_at_percentile_s"] = verdict.simulated_seconds if verdict else None
        row[f"{metric}_target_met"] = verdict.met if verdict and math.isfinite(verdict.simulated_seconds) else None
    row["steady_state"] = not sim.warnings
    a = sim.analytic
    row.update(analytic_ttft_mean_s=a.time_to_first_token_seconds,
               analytic_ttft_percentile_s=a.time_to_first_token_percentile_seconds,
               analytic_tpot_mean_s=a.time_per_output_token_seconds,
               analytic_tpot_percentile_s=a.time_per_output_token_percentile_seconds,
               analytic_e2e_mean_s=a.end_to_end_seconds, analytic_decode_batch=a.decode_batch_size,
               analytic_capacity_requests_per_s_per_replica=a.offline_requests_per_s_per_replica)
    return {key: _plain(value) for key, value in row.items()}


def _plain(value):
    """A value a table cell holds: a finite float, an int, a bool, a str, or None (NaN and infinity: not measured)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def rows_of(study: Study, results: list) -> list[dict]:
    """The table's rows: each finished run's coordinates and figures, in the grid's order (None: not finished)."""
    rows = []
    for run, figures in zip(study.runs, results):
        if figures is None:
            continue
        row = dict.fromkeys(study.columns)
        row.update(run.coordinates)
        row.update({key: value for key, value in figures.items() if key in row})
        rows.append(row)
    return rows
