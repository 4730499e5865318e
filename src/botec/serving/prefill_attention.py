"""Measured prefill (context) attention by engine, format and layout: the serving step's prefill attention from tables.

``catalog/measurements/operators/attention-context-<engine>-<accelerator>.yaml`` hold a grid of NVIDIA AIConfigurator's
measured context-attention tables (Apache-2.0, see ``catalog/measurements/NOTICE``), written by
``benchmarks/extract_operator_tables.py``: per engine (TensorRT-LLM 1.3.0rc20's FMHA, 1.0.0 on A100; vLLM 0.24's
FlashAttention 3, FlashInfer's TensorRT-LLM prefill on B200; SGLang 0.5.14's FA3, ``trtllm_mha`` on B200) and per
(attention, KV) format each measured, the latency L(b, s) of one layer's causal prefill attention on one rank, b
prompts of s tokens (b = 1 … 256, s = 16 … 16,384), for the per-rank layouts of Llama 3.1 8B and 70B, Mistral 7B
and Mixtral 8x7B at TP 1-8 (head dim 128). These are kernels timed one at a time, not the end-to-end runs
``botec validate`` grades.

The step prices prefill attention linearly in the pairs it attends (:func:`botec.serving.step.engine_step_seconds`:
a_p × prefill tokens × the context each attends, P/2 on average over a causal prompt of P). With a table, a_p is the
table's own cost per attended pair at the contract's prompt length P and the prompts a step holds,
b = min(max(⌊budget / P⌋, 1), 256):

    a_p = L_s · L(b, P) / (b · P² / 2)     (L_s the stage's layers)

exact for a step of b whole prompts of P, where throughput is decided. L(b, P) is the grid's log-bilinear value
between measured neighbours (:func:`botec.serving.attention_tables.log_bilinear`), and beyond the grid (P > 16,384)
the layout's closed form F + ‖σ·b·s, κ·b·s²/2‖_p fitted to its points (least squares in log; each file states
the misfit). The roofline it replaces, 2·a·(d_qk + d_v) per pair at e_attn × the 16-bit peak, misses both ways on
Hopper: short prompts run slower than e_attn = 0.43 of the peak (the 70B's 2,048-token prefill at TP 4: half
AIConfigurator's time), and long prompts with an FP8 cache faster (TensorRT-LLM's FP8 FMHA reaches 630-790 TFLOP/s
at s ≥ 8,192 on an H100, the roofline 425).

Which table: the contract's engine, its KV format, and the attention format the engine runs: TensorRT-LLM runs its
context FMHA in FP8 where the weights and the KV cache are both FP8 (``use_fp8_context_fmha``, what AIConfigurator
infers from an FP8 checkpoint), else in BF16 over the cache's format; vLLM in BF16 over the cache's format; SGLang
in FP8 with an FP8 cache (its FA3 quantizes the query), else BF16. An engine behaviour botec assumes: the reason in
``explain`` says so. MLA, sliding windows within the context, head dims other than 128, other engines and formats a
table lacks keep the roofline; a contract that states its own attention, memory or GEMM efficiency keeps it too.
Tables load once, lazily, only for a contract whose accelerator has one. No numpy here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from botec.catalog.root import catalog_cache

__all__ = ["ContextFit", "ContextSection", "table_names", "load_sections", "section_index", "section_by_index",
           "grid", "pair_seconds", "prompts_per_step", "prefill_table_given", "IN_FORCE_BY_DEFAULT"]

IN_FORCE_BY_DEFAULT = True
"""Whether a table that covers the contract prices its prefill attention by default: yes (issue 29, item 1)."""

SECTIONS_PER_FILE = 16
"""The graph names a section as one number: 16 × the file's position among :func:`table_names` + the section's."""

TABLE_BATCH = (1.0, 256.0)   # the prompts per step the tables measure


@dataclass(frozen=True)
class ContextFit:
    """A layout's closed form, seconds: L(b, s) = floor + ‖per_token·b·s, per_pair·b·s²/2‖_exponent."""

    floor: float
    per_token: float
    per_pair: float
    exponent: float
    misfit: tuple


@dataclass(frozen=True)
class ContextSection:
    """One (attention format, KV format) section of an engine's context-attention file: its axes, fits, rows."""

    name: str                 # the file's stem: attention-context-<engine>-<accelerator>
    position: int             # the section's place in the file
    engine: str
    attention_dtype: str
    kv_dtype: str
    measured_on: str
    measured_with: str
    kernel: str
    path: str
    batch: tuple
    prompt: tuple
    fits: dict                # (heads, kv_heads) -> ContextFit
    rows_text: dict           # (heads, kv_heads) -> the rows' text block (parsed by :func:`grid`, when needed)

    def describe(self) -> str:
        return (f"{self.name} ({self.engine}, {self.attention_dtype} attention over a {self.kv_dtype} cache): "
                f"AIConfigurator {self.measured_with} context attention, kernel {self.kernel}, {self.measured_on} "
                f"({self.path}, Apache-2.0)")


@catalog_cache
def table_names() -> tuple[str, ...]:
    """The file stems of ``catalog/measurements/operators/attention-context-*.yaml``, sorted (no file parsed): one
    file per engine and accelerator, a section per (attention, KV) format measured."""
    from botec.catalog.operator_files import operator_file_names

    return tuple(name for name in operator_file_names("attention") if name.startswith("attention-context-"))


@catalog_cache
def load_sections(name: str) -> tuple[ContextSection, ...]:
    """The file ``measurements/operators/<name>.yaml``: its sections, fits checked (rows kept as text)."""
    from botec.catalog.operator_files import read_operator_file
    from botec.serving.attention_tables import read_layouts

    data = read_operator_file(name)
    batch, prompt = tuple(float(v) for v in data["batch"]), tuple(float(v) for v in data["prompt"])
    source, engine = dict(data["source"]), str(data["engine"])
    sections = []
    for position, section in enumerate(data["sections"]):
        fits, rows = read_layouts(section["layouts"], ("floor_us", "per_token_us", "per_pair_us"), ContextFit, name)
        sections.append(ContextSection(name, position, engine, str(section["attention_dtype"]),
                                       str(section["kv_dtype"]), str(data["measured_on"]), str(source["engine"]),
                                       str(section["kernel"]), str(source["path"]), batch, prompt, fits, rows))
    if len(sections) > SECTIONS_PER_FILE:
        raise ValueError(f"measurements/operators/{name}.yaml: more than {SECTIONS_PER_FILE} sections")
    return tuple(sections)


@catalog_cache
def grid(name: str, position: int, heads: int, kv_heads: int) -> tuple:
    """A layout's latencies in seconds, [batch][prompt] (None where not measured), parsed once when first needed."""
    from botec.serving.attention_tables import parse_rows

    section = load_sections(name)[position]
    return parse_rows(section.rows_text[(heads, kv_heads)], section.batch, len(section.prompt),
                      f"measurements/operators/{name}.yaml: {section.engine} layout {heads}/{kv_heads}")


def section_index(section: ContextSection | None) -> float:
    """How the graph names a section as a number (−1 for none): the inverse of :func:`section_by_index`."""
    if section is None:
        return -1.0
    return float(SECTIONS_PER_FILE * table_names().index(section.name) + section.position)


def section_by_index(index) -> ContextSection | None:
    value = int(round(float(index)))
    if value < 0:
        return None
    return load_sections(table_names()[value // SECTIONS_PER_FILE])[value % SECTIONS_PER_FILE]


def prompts_per_step(prompt_tokens: float, budget_tokens: float) -> float:
    """b: the whole prompts of P tokens one step's budget holds, min(max(⌊budget / P⌋, 1), 256)."""
    return min(max(math.floor(budget_tokens / max(prompt_tokens, 1.0)), TABLE_BATCH[0]), TABLE_BATCH[1])


def closed_form_seconds(fit: ContextFit, batch: float, prompt: float) -> float:
    """One layer's prefill attention from the layout's closed form, F + ‖σ·b·s, κ·b·s²/2‖_p."""
    from botec.serving.step import gemm_term

    return fit.floor + float(gemm_term(fit.per_token * batch * prompt, fit.per_pair * batch * prompt * prompt / 2,
                                       fit.exponent))


def layer_seconds(section: ContextSection, key: tuple, batch: float, prompt: float) -> tuple[float, str]:
    """(L(b, s) in seconds, its reach: measured | interpolated | extrapolated) for the layout ``key``."""
    from botec.serving.attention_tables import grid_reach, log_bilinear

    points = grid(section.name, section.position, *key)
    value = log_bilinear(points, section.batch, section.prompt, batch, prompt)
    if value is None:
        return closed_form_seconds(section.fits[key], batch, prompt), "extrapolated"
    return value, grid_reach(points, section.batch, section.prompt, batch, prompt)


def pair_seconds(index, attention_heads, kv_heads, attention_tensor_parallel, prompt_tokens, budget_tokens) -> float:
    """a_p / L_s: seconds per attended pair per layer, L(b, P) / (b·P²/2), from the section ``index`` names at the
    rank's layout; 0 without a section or layout (the roofline then)."""
    from botec.serving.attention_tables import layout_on_rank

    section = section_by_index(index)
    key = layout_on_rank(attention_heads, kv_heads, attention_tensor_parallel)
    if section is None or key not in section.fits:
        return 0.0
    prompt = max(float(prompt_tokens), 1.0)
    batch = prompts_per_step(prompt, float(budget_tokens))
    return layer_seconds(section, key, batch, prompt)[0] / (batch * prompt * prompt / 2)


def _formats(engine: str, weight_precision: str, kv_precision: str) -> tuple[str, str] | None:
    """(attention format, KV format) the engine's prefill kernel runs for the contract's formats, or None."""
    from botec.serving.attention_tables import FORMAT_OF_KV

    kv = FORMAT_OF_KV.get(kv_precision)
    if kv is None or engine not in ("tensorrt-llm", "vllm", "sglang"):
        return None
    if engine == "tensorrt-llm":
        return ("fp8" if kv == "fp8" and weight_precision == "fp8" else "bf16"), kv
    if engine == "sglang":
        return kv, kv
    return "bf16", kv


ASSUMED = {"tensorrt-llm": "TensorRT-LLM runs its context FMHA in FP8 where the weights and the KV cache are both "
                           "FP8 (use_fp8_context_fmha, what AIConfigurator infers from an FP8 checkpoint), else BF16",
           "vllm": "vLLM prefills in BF16 over the cache's format",
           "sglang": "SGLang prefills in FP8 with an FP8 cache (FA3 quantizes the query), else BF16"}


def prefill_table_given(device, engine: str, weight_precision: str, kv_precision: str, arch, context_tokens: float,
                        prompt_tokens: float, budget_tokens: float, in_force: bool | None = None) -> dict:
    """The graph input ``prefill_attention_table_index``: the section that prices prefill attention, or −1 (the
    roofline 2·a·(d_qk + d_v) per pair at e_attn × the 16-bit peak), with the reason: which engine behaviour it
    assumes, and the cost per pair at the contract's P and its reach."""
    from botec.graph import Given
    from botec.serving.attention_tables import layout_on_rank

    roofline = "the roofline 2·a·(d_qk + d_v) per attended pair at e_attn × the 16-bit peak"
    key = getattr(device, "key", None)
    formats = _formats(engine, weight_precision, kv_precision)
    name = f"attention-context-{engine}-{key}"
    section, why = None, None
    if formats is None or arch is None or name not in table_names():
        why = f"no measured context-attention table for {engine} with a {kv_precision} cache on {key}: {roofline}"
    elif getattr(arch, "mla", None) or (getattr(arch, "sliding_window", None) or math.inf) < context_tokens or \
            arch.qk_head_dim != 128 or arch.v_head_dim != 128:
        why = (f"MLA, a sliding window within the request's context or a head dim other than 128: {roofline} (the "
               "tables measure full GQA/MHA attention at head dim 128)")
    else:
        section = next((s for s in load_sections(name) if (s.attention_dtype, s.kv_dtype) == formats), None)
        if section is None:
            why = f"{name} has no section for {formats[0]} attention over a {formats[1]} cache: {roofline}"
        elif not (IN_FORCE_BY_DEFAULT if in_force is None else in_force):
            section, why = None, f"{name} covers this contract but is set aside here: {roofline}"
    if section is None:
        return {"prefill_attention_table_index": Given(-1.0, "assumed", why, "supply.accelerator")}
    heads, kv = layout_on_rank(arch.attention_heads, arch.kv_heads, 1)
    if (heads, kv) in section.fits:
        batch = prompts_per_step(prompt_tokens, budget_tokens)
        seconds, reach = layer_seconds(section, (heads, kv), batch, prompt_tokens)
        pairs = batch * prompt_tokens * prompt_tokens / 2
        flops = 2 * pairs * heads * 2 * 128
        at_tp1 = (f"at TP 1 ({heads}/{kv}), {batch:g} prompt(s) of {prompt_tokens:,.0f} tokens a step: L = "
                  f"{seconds * 1e6:,.1f} µs per layer ({reach}), {seconds / pairs * 1e12:.3g} ps per attended pair, "
                  f"{flops / seconds / 1e12:,.0f} TFLOP/s")
    else:
        at_tp1 = f"no {heads}/{kv} layout at TP 1"
    layouts = ", ".join(f"{h}/{g}" for h, g in section.fits)
    return {"prefill_attention_table_index": Given(
        section_index(section), "measured",
        f"prefill attention priced from {section.describe()}: a_p = layers × L(b, P) / (b·P²/2), b the whole prompts "
        f"a step's budget holds (≤ 256), L the grid's log-bilinear value (beyond s = 16,384 the layout's fit "
        f"F + ‖σ·b·s, κ·b·s²/2‖_p); {at_tp1}; assumed: {ASSUMED[engine]}; layouts (heads/KV heads per rank): "
        f"{layouts} (another keeps the roofline)", "supply.accelerator")}
