"""The serving-engine presets of ``engines.yaml``: vLLM, TensorRT-LLM and SGLang.

A step-level model of in-flight batching runs, each engine step, the decode tokens of the running requests plus
a chunk of prefill tokens; the engine's own settings shape the result. Each preset names them, every figure with
a value, an optional range (low, high), a basis (documented, measured, assumed) and a source:

- ``memory_fraction``     the share of device memory the engine lets itself use;
- ``kv_budget_rule``      how that share becomes a KV budget: ``of_total`` (KV = f·M − W − R) or ``of_free``
                          (KV = f·(M − W − R)), M the device memory, W the weights, R the reserve below;
- ``activation_reserve``  non-KV memory per device counted against the budget (activations, CUDA graphs,
                          communication buffers), bytes;
- ``kv_reservation``      the KV cache a running request holds: ``incremental`` (blocks as it grows, preempting
                          when they run out: the prompt and half the output on average) or ``full`` (its whole
                          prompt + output reserved when admitted, so it is never evicted);
- ``max_batch_size``      the default cap on running sequences;
- ``max_batched_tokens``  the token budget of an engine step (what it bounds: ``token_budget_counts``);
- ``chunked_prefill``     whether prefills are split across steps by default;
- ``token_budget_counts`` what the token budget bounds: ``all_tokens`` (the decode tokens and the prefill chunk:
                          vLLM's max_num_batched_tokens, TensorRT-LLM's max_num_tokens) or ``prefill_tokens``
                          (the prefill chunk only: SGLang's chunked_prefill_size; the decode batch is every
                          running request);
- ``cuda_graph_max_batch`` the largest decode batch the engine captures in CUDA graphs (stated, not modelled:
                          larger batches run eagerly);
- ``step_overhead``       CPU time per step not overlapped with the GPU, seconds;
- ``request_overhead``    time a request spends outside the engine's steps before its first token reaches the
                          client, seconds: the HTTP round trip, the prompt's tokenization, the first token's
                          detokenization and streaming (what a client-side TTFT, e.g. genai-perf's, holds beyond
                          the engine's queue and prefill); added once to every request's TTFT;
- ``kernel_overhead``     fixed GPU time per kernel of a CUDA-graph-captured decode step, seconds;
- ``allreduce_latency``   one small-message tensor-parallel all-reduce inside a node, seconds;
- ``prefix_caching``      whether the engine reuses cached prefixes by default.

Beside the figures, a preset may state ``launches_as``: the preset whose program it runs, for a variant of an
engine (a tuned vLLM: its own figures, vLLM's program and options). `botec export` writes a contract of the
preset with the launch formats of that engine (each format names the engines it serves: ``LaunchFormat.engines``).
Absent, a preset launches as itself.

Where an engine counts a limit. The limits (:data:`LIMIT_FIGURES`: ``max_batch_size``, ``max_batched_tokens``,
``cuda_graph_max_batch``, ``kv_reservation``) each state ``per`` (with its ``per_source``), the unit the engine
counts the default in: ``replica`` (one figure for the whole replica), ``dp_rank`` (each data-parallel attention
rank schedules its own requests: vLLM's DP engine cores, SGLang's DP-attention workers, TensorRT-LLM under
enable_attention_dp; without data-parallel attention a replica is one rank) or ``gpu``. A default then holds
``n`` times per replica, ``n`` = :func:`counting_units` (1; the DP ranks D = TP / t_a; the accelerators). A value a
contract states is the replica's total, as the engines read a stated value (SGLang divides a set
max_running_requests by attn_dp_size; botec's exporters divide it where the engine counts per rank).

A contract picks one with ``strategy.engine`` (:data:`DEFAULT_ENGINE` when it names none).
"""

from __future__ import annotations

from dataclasses import dataclass

from botec.catalog import CatalogError
from botec.catalog.root import catalog_cache, catalog_root
from botec.units import UnitError, parse_quantity

__all__ = ["DEFAULT_ENGINE", "ENGINE_FIGURES", "BASES", "KV_BUDGET_RULES", "KV_RESERVATIONS", "EngineFigure", "EnginePreset",
           "LIMIT_FIGURES", "COUNTED_PER", "TOKEN_BUDGET_COUNTS", "counting_units", "engine_presets", "engine_preset",
           "parse_engines"]

DEFAULT_ENGINE = "vllm"
"""The preset a serving contract gets when ``strategy.engine`` names none."""

ENGINE_FIGURES = {
    "memory_fraction": "ratio",
    "kv_budget_rule": "rule",
    "activation_reserve": "bytes",
    "kv_reservation": "reservation",
    "max_batch_size": "count",
    "max_batched_tokens": "count",
    "chunked_prefill": "flag",
    "token_budget_counts": "budget",
    "cuda_graph_max_batch": "count",
    "step_overhead": "seconds",
    "request_overhead": "seconds",
    "kernel_overhead": "seconds",
    "allreduce_latency": "seconds",
    "prefix_caching": "flag",
}
"""Every figure a preset must state, with the kind of value it takes (a unit dimension, ``rule`` or ``flag``)."""

BASES = ("documented", "measured", "assumed")
KV_BUDGET_RULES = ("of_total", "of_free")
KV_RESERVATIONS = ("incremental", "full")
TOKEN_BUDGET_COUNTS = ("all_tokens", "prefill_tokens")
COUNTED_PER = ("replica", "dp_rank", "gpu")
LIMIT_FIGURES = ("max_batch_size", "max_batched_tokens", "cuda_graph_max_batch", "kv_reservation")
"""The limits whose preset states ``per``: the unit the engine counts its default in (:data:`COUNTED_PER`)."""
_CHOICES = {"rule": KV_BUDGET_RULES, "reservation": KV_RESERVATIONS, "budget": TOKEN_BUDGET_COUNTS}


def counting_units(per: str, data_parallel_ranks, accelerators):
    """n: how many times a limit counted ``per`` unit holds in one replica (instance): 1 for ``replica``, D (the
    data-parallel attention ranks, TP / t_a; 1 without data-parallel attention) for ``dp_rank``, the accelerators
    for ``gpu``. The replica's limit is then n × the engine's default."""
    if per not in COUNTED_PER:
        raise ValueError(f"a limit counts per {', '.join(COUNTED_PER)} (got {per!r})")
    return {"replica": 1.0, "dp_rank": data_parallel_ranks, "gpu": accelerators}[per]
_FILE = "engines.yaml"


@dataclass(frozen=True)
class EngineFigure:
    """One figure: a number in base units (with its range), a KV-budget rule, or a flag."""

    value: float | str | bool
    low: float | None      # numbers only; equal to value when no range is given
    high: float | None
    basis: str             # documented | measured | assumed
    source: str
    per: str | None = None       # limits only: the unit the engine counts it in (COUNTED_PER)
    per_source: str = ""         # where the engine's code or docs say so

    @property
    def has_range(self) -> bool:
        return self.low is not None and (self.low != self.value or self.high != self.value)


@dataclass(frozen=True)
class EnginePreset:
    key: str
    name: str
    figures: dict[str, EngineFigure]
    launches_as: str = ""        # the preset whose program this one runs (its launch formats'); "" is the key

    @property
    def program(self) -> str:
        """The preset whose launch formats write this one's files: ``launches_as``, else the preset itself."""
        return self.launches_as or self.key

    def __getitem__(self, name: str) -> EngineFigure:
        return self.figures[name]

    def value(self, name: str) -> float | str | bool:
        return self.figures[name].value


def _number(raw, dimension: str, where: str) -> float:
    try:
        return parse_quantity(raw, dimension)
    except UnitError as error:
        raise CatalogError(f"{where}: {error}") from None


def _figure(kind: str, raw, where: str, limit: bool = False) -> EngineFigure:
    if not isinstance(raw, dict) or "value" not in raw:
        raise CatalogError(f"{where} needs a mapping with a value, a basis and a source")
    unknown = sorted(set(raw) - {"value", "low", "high", "basis", "source"} - ({"per", "per_source"} if limit else set()))
    if unknown:
        raise CatalogError(f"{where}.{unknown[0]} is not a key of a figure")
    per, per_source = raw.get("per"), " ".join(str(raw.get("per_source") or "").split())
    if limit and (per not in COUNTED_PER or not per_source):
        raise CatalogError(f"{where} is a limit: it needs per (one of {', '.join(COUNTED_PER)}, got {per!r}) and a "
                           "per_source (where the engine says what it counts it in)")
    basis, source = raw.get("basis"), " ".join(str(raw.get("source") or "").split())
    if basis not in BASES:
        raise CatalogError(f"{where}.basis must be one of {', '.join(BASES)} (got {basis!r})")
    if not source:
        raise CatalogError(f"{where} needs a source (document, version or commit, date)")
    value = raw["value"]
    if kind in ("rule", "reservation", "budget", "flag"):
        if "low" in raw or "high" in raw:
            raise CatalogError(f"{where} takes no low/high (a {'true/false' if kind == 'flag' else kind} figure)")
        if kind in _CHOICES and value not in _CHOICES[kind]:
            raise CatalogError(f"{where}.value must be one of {', '.join(_CHOICES[kind])} (got {value!r})")
        if kind == "flag" and not isinstance(value, bool):
            raise CatalogError(f"{where}.value must be true or false (got {value!r})")
        return EngineFigure(value=value, low=None, high=None, basis=basis, source=source, per=per,
                            per_source=per_source)
    number = _number(value, kind, f"{where}.value")
    low = _number(raw["low"], kind, f"{where}.low") if raw.get("low") is not None else number
    high = _number(raw["high"], kind, f"{where}.high") if raw.get("high") is not None else number
    if not low <= number <= high:
        raise CatalogError(f"{where} needs low <= value <= high (got {low:g}, {number:g}, {high:g})")
    if number < 0 or (kind == "ratio" and high > 1):
        raise CatalogError(f"{where} is out of range (got {number:g}{', at most 1' if kind == 'ratio' else ''})")
    return EngineFigure(value=number, low=low, high=high, basis=basis, source=source, per=per, per_source=per_source)


def parse_engines(data, file: str = _FILE) -> dict[str, EnginePreset]:
    """The presets of a parsed ``engines.yaml``, every figure checked; a :class:`CatalogError` naming
    ``file``, the preset and the key otherwise."""
    engines = data.get("engines") if isinstance(data, dict) else None
    if not isinstance(engines, dict) or not engines:
        raise CatalogError(f"{file}: needs an 'engines' mapping of presets")
    out = {}
    for key, entry in engines.items():
        if not isinstance(entry, dict):
            raise CatalogError(f"{file}: {key} must be a mapping of figures")
        unknown = sorted(set(entry) - set(ENGINE_FIGURES) - {"name", "launches_as"})
        if unknown:
            raise CatalogError(f"{file}: {key}.{unknown[0]} is not a figure (expected {', '.join(ENGINE_FIGURES)})")
        missing = [name for name in ENGINE_FIGURES if name not in entry]
        if missing:
            raise CatalogError(f"{file}: {key}.{missing[0]} is missing (every preset states "
                               f"{', '.join(ENGINE_FIGURES)})")
        figures = {name: _figure(kind, entry[name], f"{file}: {key}.{name}", name in LIMIT_FIGURES)
                   for name, kind in ENGINE_FIGURES.items()}
        launches_as = "" if entry.get("launches_as") in (None, key) else str(entry["launches_as"])
        out[str(key)] = EnginePreset(key=str(key), name=str(entry.get("name") or key), figures=figures,
                                     launches_as=launches_as)
    if DEFAULT_ENGINE not in out:
        raise CatalogError(f"{file}: the default engine {DEFAULT_ENGINE!r} has no preset")
    for preset in out.values():
        target = out.get(preset.launches_as)
        if preset.launches_as and (target is None or target.launches_as):
            raise CatalogError(f"{file}: {preset.key}.launches_as must name a preset that launches as itself "
                               f"(one of {', '.join(k for k, p in out.items() if not p.launches_as)}), got "
                               f"{preset.launches_as[:40]!r}")
    return out


@catalog_cache
def engine_presets() -> dict[str, EnginePreset]:
    """Every serving-engine preset of ``engines.yaml``, parsed and checked, keyed as a contract names it."""
    from botec.yamlfile import load_yaml_text

    text = catalog_root().joinpath(_FILE).read_text(encoding="utf-8")
    return parse_engines(load_yaml_text(text, unique_keys=True))


def engine_preset(key: str | None = None) -> EnginePreset:
    """The preset ``key`` names (the default engine's when ``None``); a :class:`CatalogError` with a
    suggestion for an unknown one."""
    from botec.catalog import did_you_mean

    table = engine_presets()
    name = DEFAULT_ENGINE if key is None else key
    if name not in table:
        raise CatalogError(f"unknown serving engine {name!r}{did_you_mean(name, table)} "
                           f"(known: {', '.join(table)})")
    return table[name]
