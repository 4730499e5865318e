"""Cross-check botec's serving step against NVIDIA AIConfigurator 0.12.0, op by op, on five configurations.

AIConfigurator (the peer; ``pip install aiconfigurator==0.12.0``) runs in its own virtual environment as a
subprocess: it is never a dependency of botec or of its tests. Its default SILICON mode prices each op from
measured per-operator tables (TensorRT-LLM 1.3.0rc20 on Hopper): ``EngineHandle.decode_step_per_op`` for a
decode step (every sequence's context s = isl + osl//2 + 1) and ``run_static_per_op(mode="static_ctx")`` for
a prefill. botec runs in this process: ``botec.estimate`` of a serving contract with the same model,
accelerator, parallelism and formats, then the step's own terms (:func:`botec.serving.step.engine_step_seconds`
with every other cost set to zero isolates each term; its fixed cost is split with
:func:`botec.serving.step_costs.fixed_seconds_per_step`; the all-reduces are the step's own term). The weight-GEMM term is
split over the layer's GEMMs (QKV, O, gate/up, down of :func:`botec.serving.operators.layer_gemm_shapes`) by
the per-GEMM price of the path the step takes (the roofline of ``step_costs._roofline``, or the measured table
where the step is table-priced; the step then fits its GEMM term to the table, and a row shows the fit's
difference from the table at the step's tokens); the ``tbl`` column prices the same GEMM from botec's table
(:func:`botec.serving.operators.gemm_seconds` at m = the step's tokens), which is AIConfigurator's data
extracted: on identical data the two should agree op by op. Differences above 10 % are explained where the
cause is known. Nothing here reimplements a formula: the script sums botec's own terms.

    .venv/bin/python benchmarks/aiconfigurator_crosscheck.py [--aic /work/peers/aic/bin/python] [--repeats 20]

CPU time per prediction (``time.process_time``): botec's in this process (one estimate, warm, and the step
terms); AIConfigurator's inside its process (engine compile, first call with the tables' load, warm call).
Exits 0 either way (a benchmark, not a test); skips with one line when the peer's venv is absent.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json   # dumping only: AIConfigurator's answer is read through botec.jsonfile
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

AIC_PYTHON = Path("/work/peers/aic/bin/python")
INSTALL = "python3 -m venv /work/peers/aic && /work/peers/aic/bin/pip install aiconfigurator==0.12.0"
ESTIMATE_REPEATS = 5       # botec estimates timed per prediction (the median is kept)
DIFFERENCE_NOTED = 0.10     # |botec / AIC − 1| above which a row's cause is printed
DECODE_ISL, DECODE_OSL = 1000, 2   # AIConfigurator's decode step attends s = isl + osl//2 + 1 = 1,002 tokens


def decode_context_tokens() -> int:
    """Tokens each decoding sequence attends in AIConfigurator's decode step (``decode_step_latency``'s
    docstring: s = isl + osl//2 + 1); botec's step is given the same."""
    return DECODE_ISL + DECODE_OSL // 2 + 1


@dataclass(frozen=True)
class Case:
    """One configuration, as each tool spells it."""

    label: str
    contract: dict            # botec serving contract (what a YAML file holds)
    aic: dict                 # EngineHandle.compile arguments (model path, system, backend, keywords)
    phase: str                # decode | prefill
    batches: tuple = (1,)     # decode: sequences per step, botec's replica-wide count
    aic_batch_divisor: int = 1  # AIConfigurator's batch is per attention-DP rank
    prefill_tokens: int = 0
    mla: bool = False         # multi-head latent attention (the GEMMs are not split per op)
    moe: bool = False         # routed experts
    note: str = ""


def _contract(model, accelerator, tp, weights, kv, prompt=DECODE_ISL, node=None, **strategy):
    supply = {"accelerator": accelerator} | ({"cluster": {"node": node}} if node else {})
    return {"workload": {"kind": "serving", "model": model,
                         "traffic": {"requests_per_second": 1, "prompt_tokens": prompt, "output_tokens": DECODE_OSL}},
            "supply": supply,
            "strategy": {"engine": "tensorrt-llm", "tensor_parallel": tp, "weight_precision": weights,
                         "kv_cache_precision": kv} | strategy,
            "assumptions": {"attention_flops": "causal"}}


FP8 = {"gemm_quant_mode": "fp8", "kvcache_quant_mode": "fp8", "fmha_quant_mode": "fp8"}
CASES = (
    Case("1. Llama-3.1-8B, 1 x H100 SXM, FP8, decode (NIM 1.8.0 sweep)",
         _contract("llama-3.1-8b", "h100-sxm", 1, "fp8", "fp8"),
         {"model": "meta-llama/Meta-Llama-3.1-8B", "system": "h100_sxm", "tp_size": 1} | FP8,
         "decode", (1, 25, 100)),
    Case("2. Llama-3.1-70B, 1 x H200, FP8, decode",
         _contract("llama-3.1-70b", "h200", 1, "fp8", "fp8"),
         {"model": "meta-llama/Meta-Llama-3.1-70B", "system": "h200_sxm", "tp_size": 1} | FP8,
         "decode", (64,)),
    Case("3. Llama-3.1-70B, 4 x H100 SXM TP 4, FP8, prefill of 2,048 tokens",
         _contract("llama-3.1-70b", "h100-sxm", 4, "fp8", "fp8", prompt=2048, node="dgx-h100"),
         {"model": "meta-llama/Meta-Llama-3.1-70B", "system": "h100_sxm", "tp_size": 4} | FP8,
         "prefill", prefill_tokens=2048),
    Case("4. Mixtral-8x7B, 2 x H100 SXM TP 2 (EP 2), FP8, decode",
         _contract("mixtral-8x7b", "h100-sxm", 2, "fp8", "fp8", node="dgx-h100", expert_parallel=2),
         {"model": "mistralai/Mixtral-8x7B-v0.1", "system": "h100_sxm", "tp_size": 2, "moe_tp_size": 1,
          "moe_ep_size": 2, "moe_quant_mode": "fp8"} | FP8,
         "decode", (128,), moe=True),
    Case("5. DeepSeek-V3, 8 x H200, attention DP 8 + EP 8, FP8 block, decode",
         _contract("deepseek-v3", "h200", 8, "fp8", "bf16", node="dgx-h200", expert_parallel=8,
                   data_parallel_attention=True),
         {"model": "deepseek-ai/DeepSeek-V3", "system": "h200_sxm", "tp_size": 1, "attention_dp_size": 8,
          "moe_tp_size": 1, "moe_ep_size": 8, "kvcache_quant_mode": "bfloat16"},
         "decode", (256,), aic_batch_divisor=8, mla=True, moe=True,
         note="256 sequences per replica = 32 per attention-DP rank (AIConfigurator's batch is per rank)"),
)

# The program run under AIConfigurator's own python: argv[1] is a JSON list of requests, stdout one JSON object.
CHILD = r'''
import json, logging, os, shutil, sys, tempfile, time
logging.disable(logging.WARNING)
from importlib import resources
from aiconfigurator_core.sdk.common import DefaultHFModels
from aiconfigurator_core.sdk.engine import EngineHandle

def model_path(hf_id, scratch):
    """A cached config AIConfigurator does not list by name (Mixtral) is read as a local folder."""
    if hf_id in DefaultHFModels:
        return hf_id
    folder = os.path.join(scratch, hf_id.replace("/", "--"))
    os.makedirs(folder, exist_ok=True)
    shutil.copy(resources.files("aiconfigurator_core") / "model_configs" / (hf_id.replace("/", "--") + "_config.json"),
                os.path.join(folder, "config.json"))
    return folder

out, scratch = [], tempfile.mkdtemp()
for request in json.loads(sys.argv[1]):
    kw = dict(request["aic"])
    hf_id, system = kw.pop("model"), kw.pop("system")
    try:
        start = time.process_time()
        handle = EngineHandle.compile(model_path(hf_id, scratch), system, "trtllm", **kw)
        compile_s = time.process_time() - start
        results = []
        for batch in request["batches"]:
            def call():
                if request["phase"] == "decode":
                    return handle.decode_step_per_op(gen_tokens=batch, isl=request["isl"], osl=request["osl"])
                ctx, _ = handle.run_static_per_op(batch_size=1, beam_width=1, isl=request["prefill_tokens"], osl=1,
                                                  prefix=0, seq_imbalance_correction_scale=1.0,
                                                  gen_seq_imbalance_correction_scale=1.0, mode="static_ctx")
                return ctx
            start = time.process_time(); ops = call(); first_s = time.process_time() - start
            warm = []
            for _ in range(request["repeats"]):
                start = time.process_time(); call(); warm.append(time.process_time() - start)
            results.append({"batch": batch, "ops": [[o[0], o[1], o[3]] for o in ops], "first_s": first_s,
                            "warm_s": sorted(warm)[len(warm) // 2] if warm else first_s})
        out.append({"compile_s": compile_s, "results": results})
    except Exception as error:  # the peer's own refusal, reported per case
        out.append({"error": f"{type(error).__name__}: {str(error)[:300]}"})
shutil.rmtree(scratch, ignore_errors=True)
print(json.dumps(out))
'''


def run_aic(python: Path, cases, repeats: int) -> list[dict]:
    """Every case through AIConfigurator in one subprocess of its own venv."""
    from botec.jsonfile import load_json_text

    requests = [{"aic": c.aic, "phase": c.phase, "isl": DECODE_ISL, "osl": DECODE_OSL, "repeats": repeats,
                 "prefill_tokens": c.prefill_tokens,
                 "batches": [b // c.aic_batch_divisor for b in c.batches] if c.phase == "decode" else [1]}
                for c in cases]
    done = subprocess.run([str(python), "-c", CHILD, json.dumps(requests)], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"AIConfigurator subprocess failed (exit {done.returncode}): {tail[:200]}")
    return load_json_text(done.stdout.strip().splitlines()[-1], origin="AIConfigurator's output")


# --- AIConfigurator's op names -> the rows of the table -------------------------------------------

ROWS = ("qkv", "o", "gate_up", "down", "router", "experts", "mla", "moe", "other weights", "table fit",
        "GEMM term", "logits", "attention", "communication", "blocks", "other", "overhead", "total")
LABELS = {"qkv": "QKV GEMM", "o": "O (proj) GEMM", "gate_up": "gate/up (ffn1) GEMM", "down": "down (ffn2) GEMM",
          "router": "MoE router GEMM", "experts": "MoE experts (grouped)", "mla": "MLA block (attn+proj)",
          "moe": "MoE block (overlapped)", "other weights": "other weight reads",
          "table fit": "step's GEMM fit − table",
          "GEMM term": "= botec's GEMM term", "logits": "LM head (logits)", "attention": "attention",
          "communication": "communication",
          "blocks": "attn + MoE + comm", "other": "norms, act., embed", "overhead": "kernel + engine fixed",
          "total": "step total"}
GEMM_ROWS = ("qkv", "o", "gate_up", "down", "router", "experts", "moe", "other weights")


def aic_row(name: str) -> str:
    """The table row of one of AIConfigurator's op names (context_/generation_ prefixes dropped)."""
    op = name.split("_", 1)[1] if name.startswith(("context_", "generation_")) else name
    table = {"qkv_gemm": "qkv", "proj_gemm": "o", "gate_ffn1_gemm": "gate_up", "ffn2_gemm": "down",
             "router_gemm": "router", "moe": "experts", "mla_block": "mla", "moe_overlap": "moe",
             "logits_gemm": "logits", "attention": "attention"}
    if op in table:
        return table[op]
    if op.endswith("_ar") or op.startswith(("ar_", "p2p", "moe_pre_dispatch", "moe_post_dispatch", "allreduce",
                                            "alltoall", "all_gather", "reduce_scatter")):
        return "communication"
    return "other"


def aic_rows(ops) -> dict[str, float]:
    """Seconds per row from AIConfigurator's ``(name, ms, source)`` entries; the GEMM term sums the weight GEMMs
    (the LM head apart, as botec's term has it apart)."""
    rows: dict[str, float] = {}
    for name, ms, _ in ops:
        row = aic_row(name)
        rows[row] = rows.get(row, 0.0) + ms * 1e-3
    rows["GEMM term"] = sum(rows.get(r, 0.0) for r in GEMM_ROWS)
    rows["total"] = sum(ms for _, ms, _ in ops) * 1e-3
    return rows


# --- botec's step, term by term -------------------------------------------------------------------

def _call_with(function, quantities, **given):
    """``function`` called with its arguments read from an estimate's quantities (``given`` overriding)."""
    names = inspect.signature(function).parameters
    return function(**{n: given[n] if n in given else float(quantities[n].value) for n in names})


def botec_step_terms(quantities, decode_tokens, decode_context, prefill_tokens, prefill_context, sampled):
    """botec's step as the sum of its own terms: each isolated by calling engine_step_seconds with the others
    zero (its GEMM term is max(g·T, w + x·share), attention max(compute, KV read)); the fixed cost split by
    fixed_seconds_per_step (kernels and the engine; the all-reduces are their own term)."""
    from botec.serving.step import StepModel

    model = StepModel.from_quantities(quantities)
    # the costs (seconds) are zeroed; shape figures (expert pick probability, a GEMM knee exponent) kept
    zero = {f.name: 0.0 for f in dataclasses.fields(model) if "seconds" in f.name}

    def only(*names):
        kept = dataclasses.replace(model, **{n: v for n, v in zero.items() if n not in names})
        return float(kept.step(decode_tokens, decode_context, prefill_tokens, prefill_context, sampled))

    terms = {"GEMM term": only("gemm_seconds_per_token", "weight_read_seconds", "expert_read_seconds"),
             "attention": only("attention_seconds_per_context_token", "prefill_attention_seconds_per_context_token",
                               "kv_read_seconds_per_context_token", "attention_table_floor_seconds",
                               "attention_table_seconds_per_sequence", "attention_table_seconds_per_context_token"),
             "logits": only("logit_seconds_per_token"),
             "other": only("elementwise_seconds_per_token"),
             "communication": only("communication_seconds_per_token")
             + only("allreduce_seconds_per_step", "allreduce_seconds_per_token"),
             "overhead": only("fixed_seconds_per_step")}
    terms["total"] = float(model.step(decode_tokens, decode_context, prefill_tokens, prefill_context, sampled))
    terms["attention_knee"] = model.attention_knee_exponent   # not a row: says which attention form the step took
    return terms


@dataclass
class GemmSplit:
    """botec's layer GEMMs at m = the step's tokens, over the stage's layers."""

    step: dict = field(default_factory=dict)      # row -> seconds, as the step prices it
    table: dict = field(default_factory=dict)     # row -> seconds, from botec's measured table
    reach: dict = field(default_factory=dict)     # row -> measured | interpolated | extrapolated | roofline
    shape: dict = field(default_factory=dict)     # row -> (n, k) on one rank
    table_name: str = ""
    table_box: str = ""
    table_priced: bool = False                    # the step itself prices its GEMMs from a table
    why_roofline: str = ""                        # botec's own reason, where the step keeps the roofline
    rest_weights: float = 0.0                     # table-priced: w_rest, the weight read outside the layer GEMMs
    knee: float = 0.0                             # table-priced: the step's GEMM knee exponent p (0: the max)


def botec_gemm_split(quantities, device: str, tokens: float, moe: bool) -> GemmSplit:
    """Per layer GEMM (QKV, O, gate/up, down; MoE: QKV and O only, the experts' FFN is no dense GEMM): the price
    of the path the step takes (the roofline ``step_costs._roofline``, or the table it is priced from) and the
    price from botec's table for the contract's device and weight format, both × the stage's layers."""
    from botec.serving import operators, step_costs

    q = {name: float(quantities[name].value) for name in (
        "hidden_size", "attention_heads", "kv_heads", "qk_head_dim", "v_head_dim", "ffn_size", "mlp_gated",
        "tensor_parallel", "pipeline_stage_layers", "weight_bytes_per_parameter", "gemm_table_index")}
    shapes = operators.layer_gemm_shapes(q["hidden_size"], q["attention_heads"], q["kv_heads"], q["qk_head_dim"],
                                         q["v_head_dim"], q["ffn_size"], q["mlp_gated"], q["tensor_parallel"])
    if moe:
        shapes = shapes[:2]
    roofline = _call_with(step_costs._roofline, quantities)
    layers = q["pipeline_stage_layers"]
    precision = {1.0: "fp8", 2.0: "bf16"}.get(q["weight_bytes_per_parameter"])
    fmt = operators.FORMAT_OF_PRECISION.get(precision or "")
    table = operators.gemm_table(device, fmt) if fmt else None
    in_step = operators.table_by_index(q["gemm_table_index"])
    split = GemmSplit(table_priced=in_step is not None)
    if table is not None:
        split.table_name, split.table_box = table.name, table.reach_line()
    for name, n, k in shapes:
        n, k = float(n), float(k)
        split.shape[name] = (n, k)
        split.step[name] = layers * (operators.gemm_seconds(in_step, tokens, n, k, roofline) if in_step is not None
                                     else float(roofline(tokens, n, k)))
        if table is not None:
            split.table[name] = layers * operators.gemm_seconds(table, tokens, n, k, roofline)
            split.reach[name] = operators.gemm_reach(table, tokens, n, k)
    return split


def _lone_prompt_attention(quantities) -> tuple[float, float]:
    """(b, the stage's prefill attention for one prompt of P alone, seconds) from the measured context-attention
    section in force: botec prices a pair at b prompts a step (b from the budget), the table at b = 1 here."""
    from botec.serving import prefill_attention
    from botec.serving.attention_tables import layout_on_rank

    section = prefill_attention.section_by_index(quantities["prefill_attention_table_index"].value)
    prompt, budget = (float(quantities[name].value) for name in ("prompt_tokens", "max_batched_tokens"))
    if section is None:
        return 0.0, 0.0
    key = layout_on_rank(*(quantities[name].value for name in ("attention_heads", "kv_heads",
                                                                "attention_tensor_parallel")))
    alone = prefill_attention.layer_seconds(section, key, 1.0, prompt)[0]
    return (prefill_attention.prompts_per_step(prompt, budget),
            alone * float(quantities["pipeline_stage_layers"].value))


def botec_case(case: Case, batch: int):
    """(botec's rows at this batch, its GEMM split, CPU seconds of the estimate, CPU seconds of the terms)."""
    import botec

    botec.estimate(case.contract)                      # warm: imports, catalog caches
    timed = []
    for _ in range(ESTIMATE_REPEATS):
        start = time.process_time()
        result = botec.estimate(case.contract)
        timed.append(time.process_time() - start)
    estimate_s = statistics.median(timed)
    quantities = result.quantities
    start = time.process_time()
    if case.phase == "decode":
        tokens = float(batch)
        rows = botec_step_terms(quantities, tokens, tokens * decode_context_tokens(), 0.0, 0.0, tokens)
    else:
        tokens = float(quantities["prefill_tokens_per_request"].value)
        per_token = float(quantities["prefill_attention_tokens"].value)
        rows = botec_step_terms(quantities, 0.0, 0.0, tokens, tokens * per_token, 1.0)
        rows["prefill_batch"], rows["lone_prompt_attention"] = _lone_prompt_attention(quantities)
    split = GemmSplit()
    if not case.mla:
        split = botec_gemm_split(quantities, case.contract["supply"]["accelerator"], tokens, case.moe)
        split.why_roofline = "" if split.table_priced else str(quantities["gemm_table_index"].source or "")
        rows |= split.step
        left = rows["GEMM term"] - sum(split.step.values())
        if split.table_priced:
            # with a table the step's weight read w is w_rest + F·L_s (F: the layer's GEMMs at m = 1, as timed):
            # w_rest (embedding, LM head, norms) sits inside the step's fitted GEMM term with the table's fit
            rows["table fit"] = left
            split.rest_weights = float(quantities["weight_read_seconds"].value) - float(
                quantities["table_gemm_floor_seconds_per_layer"].value) * float(
                quantities["pipeline_stage_layers"].value)
            split.knee = float(quantities["gemm_knee_exponent"].value) if "gemm_knee_exponent" in quantities \
                else 0.0
        else:
            rows["other weights"] = left
    else:
        rows["blocks"] = rows["GEMM term"] + rows["attention"] + rows["communication"]
    return rows, split, estimate_s, time.process_time() - start


# --- why a row differs ----------------------------------------------------------------------------

def causes(case: Case, aic: dict, botec_rows: dict, split: GemmSplit) -> list[str]:
    """The known cause of each difference above 10 % (and of the rows only one tool has)."""
    def differs(value, reference):
        return bool(reference) and value is not None and abs(value / reference - 1) > DIFFERENCE_NOTED

    def off(row):
        return differs(botec_rows.get(row), aic.get(row))

    found = []
    roofline_priced = [LABELS[r] for r in split.step if off(r) and not split.table_priced and r in split.table
                       and not differs(split.table[r], aic.get(r))]
    if roofline_priced:
        found.append(f"{', '.join(roofline_priced)}: botec's own table (tbl) agrees with AIConfigurator, but the "
                     "step prices these GEMMs on the roofline max(2mnk / (e_mm·peak), n·k·b / (e_mem·BW)); botec "
                     f"says why: {split.why_roofline}")
    for row, reach in split.reach.items():
        if reach == "roofline" and aic.get(row):
            n, k = split.shape[row]
            found.append(f"{LABELS[row]}: n × k = {n:,.0f} × {k:,.0f} lies outside botec's grid "
                         f"({split.table_name}: {split.table_box}), so its table falls back to the roofline; "
                         "AIConfigurator's own table reaches it")
        elif row in split.table and differs(split.table[row], aic.get(row)):
            found.append(f"{LABELS[row]}: botec's table ({reach}) differs from AIConfigurator's lookup: botec "
                         "keeps a grid of its table and interpolates log L in log m, n, k")
    if "table fit" in botec_rows:
        form = (f"‖L(8,192)/8,192 · T, L(1) + w_rest‖_p with p = {split.knee:.2f}" if split.knee > 0
                else "max(L(8,192)/8,192 · T, L(1) + w_rest)")
        found.append(f"step's GEMM fit − table: the step prices the layer's GEMMs from its table as {form} "
                     "(L: the layer's GEMMs from the table, w_rest: the embedding, LM head and norm weights read, "
                     f"{split.rest_weights * 1e3:.3f} ms), not the table at m = T; this row is its GEMM term − "
                     "the table at m = T, so it holds w_rest and the fit's error (its embedding half an "
                     "over-count: an engine gathers T rows of the embedding table)")
    if "other weights" in botec_rows:
        text = ("other weight reads: the rest of botec's weight-read term w: the LM head's weights (AIConfigurator "
                "has them in its logits GEMM) and the whole embedding table, which an engine gathers T rows of "
                "(AIConfigurator's embedding op: a few µs)")
        if case.moe:
            text += "; and the experts' and router's weights (max(g·T, w + x·share) is not split per op)"
        found.append(text)
    if case.mla:
        found.append("MLA and MoE: botec's GEMM term holds the MLA projections and every expert (all read at this "
                     "batch; roofline), its communication term the all-to-all; AIConfigurator's MLA block holds "
                     "attention with its projections, its MoE block the grouped GEMM, shared expert and the "
                     "all-to-all overlapped. Compare the blocks row")
        if float(botec_rows.get("communication", 0)) > 0:
            found.append("communication (botec): the all-to-all and the dense layers' gathers, and the latency of "
                         "2 collectives per dense layer (the MoE layers' exchange: the all-to-all; no all-reduce "
                         "around data-parallel attention)")
    if off("logits"):
        found.append("LM head: botec's logits term is the compute side only (2·V·h per sampled token at e_mm); "
                     "its weight read is inside w" + (
                         "; in a prefill the GEMM term is compute-bound and w is not charged" if case.phase ==
                         "prefill" else ""))
    if off("attention") and not case.mla:
        found.append("attention: " + (
            "botec prices the measured context-FMHA table's cost per attended pair at the prompts a step's budget "
            f"holds (botec.serving.prefill_attention: b = {botec_rows.get('prefill_batch', 0):g} here; the same "
            f"table at b = 1 gives {botec_rows.get('lone_prompt_attention', 0) * 1e3:.2f} ms), AIConfigurator one "
            "prompt alone" if case.phase == "prefill" else
            ("botec prices its closed form F + ‖σ·b, κ·b·s‖_p fitted to the same generation-attention table "
             "(AIConfigurator interpolates the table's points)" if float(botec_rows.get("attention_knee", 0)) > 0
             else "botec prices max(FLOPs / (e_attn·peak16), KV bytes / (e_mem·BW)); AIConfigurator its measured "
             "generation-attention (XQA) table by batch and context, which holds a per-kernel floor")))
    if off("communication") and not case.mla:
        found.append("communication: " + (
            "AIConfigurator has the TP all-reduces inside its MoE pre/post-dispatch ops (measured all-reduce "
            "tables); " if case.moe else "AIConfigurator reads measured all-reduce tables by message size; ")
            + "botec prices them from the same tables through its closed form ‖α, β·S‖_q, fitted to the table "
            "over the step's sizes (allreduce_table_index says the fit's worst error), or, without a table, α + "
            "2(t−1)/t · bytes / B_link (the engine's latency, the link's bandwidth)")
    if off("other"):
        found.append("norms, act., embed: botec prices (10·h + activation elements) × bytes per token at e_mem; "
                     "AIConfigurator's empirical add-norm and activation kernels have a latency floor per kernel "
                     "(about 3 µs each), which dominates at small batch")
    if "overhead" in botec_rows:
        found.append("kernel + engine fixed (botec only): the engine's time t0 per kernel (9 per layer + 2, or 5 + 2 "
                     "where a table's latencies hold the 4 GEMM kernels) and its step overhead, on top of the "
                     "rooflines; AIConfigurator's measured op latencies hold each kernel's own time and its "
                     "per-step call adds no engine time")
    return found


# --- the table ------------------------------------------------------------------------------------

def _ms(value) -> str:
    return "" if value is None else f"{value * 1e3:.3f}"


def _delta(value, reference) -> str:
    if value is None or not reference:
        return ""
    return f"{(value / reference - 1) * 100:+.0f} %"


REACH = {"measured": "meas.", "interpolated": "interp.", "extrapolated": "extrap.", "roofline": "roofline"}


def case_lines(case: Case, batch: int, aic_ops, botec_rows: dict, split: GemmSplit, said: set) -> list[str]:
    """The case's side-by-side table and the causes of its differences (those not in ``said`` yet)."""
    from botec.report.width import wrap

    aic = aic_rows(aic_ops)
    if case.mla:
        aic["blocks"] = aic.get("mla", 0.0) + aic.get("moe", 0.0) + aic.get("communication", 0.0)
        aic.pop("GEMM term", None)
    title = case.label + (f", batch {batch}, {decode_context_tokens():,}-token contexts" if case.phase == "decode"
                          else "")
    lines = wrap(title, 100).splitlines() + (["   " + case.note] if case.note else [])
    lines.append(f"   {'op':<24}{'AIC ms':>10}{'botec ms':>10}{'Δ':>8}{'tbl ms':>10}{'Δ tbl':>8}  {'tbl reach':<9}")
    for row in ROWS:
        a, b, t = aic.get(row), botec_rows.get(row), split.table.get(row)
        if a is None and b is None:
            continue
        lines.append(f"   {LABELS[row]:<24}{_ms(a):>10}{_ms(b):>10}{_delta(b, a):>8}{_ms(t):>10}{_delta(t, a):>8}"
                     f"  {REACH.get(split.reach.get(row), '')}".rstrip())
    for cause in causes(case, aic, botec_rows, split):
        if cause not in said:
            said.add(cause)
            lines.extend(wrap("   · " + cause, 100, hang=2).splitlines())
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aic", type=Path, default=AIC_PYTHON, help=f"AIConfigurator's python ({AIC_PYTHON})")
    parser.add_argument("--repeats", type=int, default=20, help="warm AIConfigurator calls timed per prediction")
    args = parser.parse_args()
    if not args.aic.exists():
        print(f"skipped: AIConfigurator not found at {args.aic} (install: {INSTALL})")
        return 0
    peer = run_aic(args.aic, CASES, args.repeats)
    botec_cpu, botec_terms_cpu, aic_first, aic_warm, aic_compile = [], [], [], [], []
    print("AIConfigurator 0.12.0 (SILICON: TensorRT-LLM 1.3.0rc20 tables) and botec's serving step, ms per step")
    print("on one GPU of the replica. Δ = botec / AIC − 1; tbl: the same GEMM from botec's table at m = tokens.")
    for case, answer in zip(CASES, peer):
        print()
        if "error" in answer:
            print(f"{case.label}: AIConfigurator refused: {answer['error']}")
            continue
        aic_compile.append(answer["compile_s"])
        batches = case.batches if case.phase == "decode" else (case.prefill_tokens,)
        said = set()     # a cause printed once per case
        for batch, result in zip(batches, answer["results"]):
            try:
                rows, split, estimate_s, terms_s = botec_case(case, batch)
            except Exception as error:   # botec's side mid-change or refusing: one line, the other cases go on
                print(f"{case.label}: botec failed: {type(error).__name__}: {str(error)[:120]}")
                continue
            botec_cpu.append(estimate_s)
            botec_terms_cpu.append(terms_s)
            aic_first.append(result["first_s"])
            aic_warm.append(result["warm_s"])
            print("\n".join(case_lines(case, batch, result["ops"], rows, split, said)))
    if botec_cpu:
        median = statistics.median
        print()
        print(f"CPU time per prediction (time.process_time), median over {len(botec_cpu)} predictions:")
        print(f"   botec:          one whole serving estimate {median(botec_cpu) * 1e3:.1f} ms (warm, in process); "
              f"its step's terms {median(botec_terms_cpu) * 1e3:.2f} ms")
        print(f"   AIConfigurator: engine compile {median(aic_compile) * 1e3:.0f} ms; first call "
              f"{median(aic_first) * 1e3:.0f} ms (tables load); warm call {median(aic_warm) * 1e6:.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
