"""One engine step of in-flight batching, on the rooflines: the function the estimate and the simulator share.

An engine (vLLM, TensorRT-LLM, SGLang) runs steps: each carries one token of every running
request that is decoding and a chunk of prompt tokens of the requests being prefilled
(Orca's iteration-level scheduling, Yu et al. 2022; chunked prefill, Agrawal et al. 2024,
Sarathi-Serve). On one accelerator of a replica a step of ``T = d + p`` tokens (d decoding
sequences, p prefill tokens) takes

    t = ‖F_gemm / (e_mm · peak), W(T) / (e_mem · BW)‖_p                 the weight GEMMs (the knee below)
      + max(F_attn / (e_attn · peak₁₆), KV / (e_mem · BW))                attention over the cache, read once (or the table's, below)
      + F_logits / (e_mm · peak)                                          the LM head, sampled tokens only
      + ‖n_ar·α_ar, n_ar·2(t−1)/t · T·h·b / B_ar‖_q                      tensor-parallel all-reduces (q = 1: the α–β sum)
      + T · e                                                             norms, residuals, activation, permutation
      + n_kernels · t0 + t_step                                           kernel and engine overheads

with ‖a, b‖_p = (a^p + b^p)^(1/p), F_gemm = 2·N_active·T / t (matmul parameters per device), W(T) the weights read once per
step — the dense ones always, each expert only when one of the T tokens picks it (expected
experts touched: E·(1 − (1 − k/E)^T)) — F_attn = 2 · (attention width per context token) ×
(the context tokens the step's queries attend; prefill and decode each at their own width: MLA prefills
in the decompressed MHA form, a·(d_qk + d_v), and decodes in the absorbed latent form, a·(2·r_kv + d_rope),
as vLLM and SGLang do), KV the cache bytes those contexts read — once per sequence per step, however
many queries attend it (a speculative verification runs k + 1 queries of a sequence against one read
of its cache: FlashAttention and FlashInfer tile the queries over the same K/V blocks) — α_ar the
small-message latency of one all-reduce (the engine's custom all-reduce or NCCL's low-latency
protocol), t0 a fixed cost per kernel with the decode step captured in CUDA graphs, and t_step the
engine's CPU overhead per step not hidden behind the GPU (scheduling, sampling). The figures
e_mm, e_mem, e_attn are the accelerator family's (``catalog/efficiency.yaml``, as in training);
α_ar, t0 and t_step the engine's (``catalog/engines.yaml``).

The weight GEMMs' knee. Where a measured GEMM table prices them (``catalog/measurements/operators``, AIConfigurator's
kernels timed one at a time; :mod:`botec.serving.operators`), the two sides are the table's own: the weight read w is
the layer's GEMMs at m = 1 and the compute side g·T their latency at m = 8,192 per token, and p is fitted to the
table's points over m = 1 … 8,192 for the layer's shapes on one TP rank (``gemm_knee_exponent``, least squares in log
space). A GEMM does not switch from bound by its weight read to bound by its tensor cores at one m: near the crossover
T* = w/g both cost (its tiles wait on loads and on the math), so it runs slower than either alone: at T* the closed
form is w·2^(1/p), and on the Hopper tables it follows the layer within −9 … +5 % over m where max(w, g·T) undercuts
the knee by 12-32 % (p = 1.4-3.8: smaller for FP8, whose math is cheaper beside the same loads). Without a table p is
0 and the term is the roofline's max(g·T, w), as before.

The all-reduces' knee. The n_ar all-reduces of a step each reduce a T·h·b-byte tensor; where a measured collective
table covers the accelerator, the engine and the TP degree (``catalog/measurements/operators/allreduce-*``,
:mod:`botec.formulas.collective_tables`), α_ar, B_ar (a bus bandwidth, nccl-tests' convention) and q are fitted to
the table's points over the message sizes the step produces (T = 1 … the token budget): the measured curve of an
engine's custom all-reduce rises faster than α + β·S between its latency floor and its bandwidth asymptote (one-shot,
two-shot, then NCCL), so q is 0.4-0.8 at 4-8 ranks. Without a table q = 1 (``allreduce_knee_exponent`` 0), α_ar is
the engine preset's and B_ar the TP group's link: the α–β sum, as before (:func:`allreduce_term`).

Decode attention from a measured table. Where one prices it (``catalog/measurements/operators/attention-decode-*``,
AIConfigurator's generation-attention kernel timed per layer by batch b and KV length s; :mod:`botec.serving.
attention_tables`), the decode part of the attention term is the rank's layout's closed form, fitted to the table's
own points, F + ‖σ·b, κ·C_d‖_p_a (F the kernel's floor per step, σ per sequence, κ per context token, p_a the knee
between them; b = d/q the decoding sequences), and the prefill part stays the roofline's max(a_p·C_p, c·p). Without
a table p_a is 0 and the term is the roofline's, as before.

Every function here is elementwise: the estimate calls it on floats or numpy arrays (sweeps), the
simulator on the batch each step really holds. Sources: the roofline (Williams et al. 2009);
the decode roofline max(B·a, w + B·k) of Databricks' MBU and the scaling book; the expected
number of distinct experts (formula audit row 29); speculative decoding's expected tokens
(Leviathan et al. 2023, eq. 1); the verification's single cache read and MLA's two attention widths
(formula audit 2, §4 N3 and N6).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from botec.graph.elementwise import maximum, minimum, where

__all__ = ["engine_step_seconds", "gemm_term", "allreduce_term", "scalar_engine_step", "experts_touched_share",
           "speculative_tokens_per_step", "critical_step_tokens", "StepModel", "STEP_INPUTS"]

BISECTIONS = 80   # halvings of [0, (w + x)/g] in critical_step_tokens: far below float precision


def experts_touched_share(tokens, expert_pick_probability):
    """Expected share of the experts that at least one of ``tokens`` routes to: 1 − (1 − k/E)^T (0 for dense)."""
    return where(expert_pick_probability > 0, 1 - (1 - expert_pick_probability) ** maximum(tokens, 0), 0.0)


def speculative_tokens_per_step(draft_tokens, acceptance_rate):
    """Tokens a sequence gains per verification step with k draft tokens accepted each with probability α:
    (1 − α^(k+1)) / (1 − α) (Leviathan et al. 2023); 1 without speculation (k = 0)."""
    alpha = maximum(acceptance_rate, 0.0)
    return where(alpha < 1, (1 - alpha ** (draft_tokens + 1)) / maximum(1 - alpha, 1e-12), draft_tokens + 1)


def critical_step_tokens(gemm_seconds_per_token, weight_read_seconds, expert_read_seconds, expert_pick_probability):
    """The tokens T* at which a step's weight GEMMs turn compute-bound: the root of

        g·T = w + x·(1 − (1 − k/E)^T)

    (g = gemm_seconds_per_token, w = weight_read_seconds, x = expert_read_seconds, k/E =
    expert_pick_probability). Dense models (k/E = 0): T* = w / g (Databricks' MBU; the scaling book's
    B*). MoE: the right side grows with T as more experts are touched, so the crossover is later; the
    left side minus the right is convex in T, −w at T = 0 and ≥ 0 at T = (w + x)/g, so it has one root
    in between, found by bisection (elementwise; formula audit 2, §4 N4). T* stays the crossover of the two
    asymptotes where a measured table's knee exponent p joins them (:func:`engine_step_seconds`): the step there
    costs ‖g·T*, w‖_p = w·2^(1/p) (dense), not w; below T* it is still the weight read that rules."""
    high = (weight_read_seconds + expert_read_seconds) / gemm_seconds_per_token
    low = high * 0.0
    for _ in range(BISECTIONS):
        middle = (low + high) / 2
        above = gemm_seconds_per_token * middle >= weight_read_seconds + expert_read_seconds * experts_touched_share(
            middle, expert_pick_probability)
        low, high = where(above, low, middle), where(above, middle, high)
    return where(expert_pick_probability > 0, (low + high) / 2, weight_read_seconds / gemm_seconds_per_token)


def gemm_term(compute, weights, exponent):
    """A step's weight GEMMs from their two asymptotes, elementwise: the compute side g·T and the weight read w
    joined at the measured table's knee,

        G = H · (1 + (L/H)^p)^(1/p),  H = max(g·T, w), L = min(g·T, w)     (= (w^p + (g·T)^p)^(1/p), no overflow)

    with p = max(``exponent``, 1); ``exponent`` 0 (no table) is the roofline's max(g·T, w). The one definition:
    :func:`botec.serving.operators.knee_curve` fits p with it, and :func:`scalar_engine_step` repeats it for
    plain numbers in the same order of operations."""
    high = maximum(compute, weights)
    low = minimum(compute, weights)
    knee = maximum(exponent, 1.0)
    smooth = high * (1 + (low / where(high > 0, high, 1.0)) ** knee) ** (1 / knee)
    return where(exponent > 0, smooth, high)


def allreduce_term(bandwidth, latency, exponent):
    """A step's tensor-parallel all-reduces from their two sides, elementwise: the bandwidth side R·T and the
    latency side A joined by the power mean of the measured table's knee,

        J = H · (1 + (L/H)^q)^(1/q),  H = max(R·T, A), L = min(R·T, A)     (= (A^q + (R·T)^q)^(1/q), no overflow)

    with q = ``exponent`` where it is > 0 (a measured table's fit), else 1 (``exponent`` 0, no table): q = 1 is the
    α–β sum A + R·T, q < 1 lies above it where the sides are near (a custom all-reduce between its latency floor and
    its bandwidth asymptote). J = 0 where both sides are 0 (TP 1). :func:`scalar_engine_step` repeats it for plain
    numbers in the same order of operations."""
    high = maximum(bandwidth, latency)
    low = minimum(bandwidth, latency)
    q = where(exponent > 0, exponent, 1.0)
    return high * (1 + (low / where(high > 0, high, 1.0)) ** q) ** (1 / q)


def engine_step_seconds(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens, sampled_tokens,
                        queries_per_context_read=1.0, *, gemm_seconds_per_token, weight_read_seconds,
                        expert_read_seconds, expert_pick_probability, attention_seconds_per_context_token,
                        prefill_attention_seconds_per_context_token, kv_read_seconds_per_context_token,
                        logit_seconds_per_token, communication_seconds_per_token, fixed_seconds_per_step,
                        elementwise_seconds_per_token=0.0, gemm_knee_exponent=0.0, moe_exchange_seconds_per_token=0.0,
                        two_batch_overlap=0.0, allreduce_seconds_per_step=0.0, allreduce_seconds_per_token=0.0,
                        allreduce_knee_exponent=0.0, attention_table_floor_seconds=0.0,
                        attention_table_seconds_per_sequence=0.0, attention_table_seconds_per_context_token=0.0,
                        attention_knee_exponent=0.0):
    """Seconds of one engine step on one accelerator of a replica (see the module docstring), from the
    replica's per-unit costs:

    ``decode_tokens`` d (one per decoding request, k + 1 when speculating) and ``prefill_tokens`` p make the
    step's T tokens; ``decode_context_tokens`` C_d is the sum of the decoding requests' contexts (each
    sequence's cache, read once) and ``prefill_context_tokens`` C_p the sum, over prefill tokens, of the
    tokens each attends; ``sampled_tokens`` s the positions the LM head runs for;
    ``queries_per_context_read`` q the queries each decoding sequence runs against its one read of the
    cache (k + 1 verifying k speculative drafts, else 1).

        t = G(g·T, w + x·(1 − (1 − k/E)^T)) + A_t + l·s + J(R·T, A) + (r + e)·T + f

        A_t = max(a·q·C_d + a_p·C_p, c·(C_d + p))                                      (π_a = 0: the roofline)
        A_t = [d > 0]·F_a + G_a(σ·d/q, κ·C_d) + max(a_p·C_p, c·p)                       (π_a > 0: a measured table)

        G(u, v) = H·(1 + (L/H)^π)^(1/π) = (u^π + v^π)^(1/π),  H = max(u, v), L = min(u, v), π = max(p, 1)   (p > 0)
        G(u, v) = max(u, v)                                                                                (p = 0)

    g = gemm_seconds_per_token, w = weight_read_seconds, x = expert_read_seconds, a =
    attention_seconds_per_context_token (decode), a_p = prefill_attention_seconds_per_context_token, c =
    kv_read_seconds_per_context_token, l = logit_seconds_per_token, r = communication_seconds_per_token,
    f = fixed_seconds_per_step, e = elementwise_seconds_per_token (the memory-bound ops of each token), p =
    gemm_knee_exponent (the measured GEMM table's knee, fitted to its points: see the module docstring; 0, the
    roofline's max, without a table); J = :func:`allreduce_term` of R = allreduce_seconds_per_token and A =
    allreduce_seconds_per_step with q = allreduce_knee_exponent (0, no table: their sum; the tensor-parallel all-reduces).
    With a measured decode-attention table: F_a = attention_table_floor_seconds (the layers' kernel floor, in a step
    that decodes), σ = attention_table_seconds_per_sequence, κ = attention_table_seconds_per_context_token, π_a =
    attention_knee_exponent and G_a the knee G at π_a (the fit of the table's points,
    :mod:`botec.serving.attention_tables`).
    Speculating, the compute side counts the k + 1 queries (a·q·C_d) and the memory side the cache once
    (c·C_d): a verification kernel tiles the queries of a sequence over one pass of its K/V blocks.

    Two-batch overlap (``two_batch_overlap`` o = 1; SGLang ``--enable-two-batch-overlap``, DeepSeek's inference
    system, deepseek-ai/profile-data and open-infra-index day 6): the step runs as two micro-batches of T/2 tokens,
    and while one computes, the other's MoE dispatch and combine (m = moe_exchange_seconds_per_token, part of r) are
    in flight (DeepEP's receive hooks: the RDMA traffic takes no SMs). Each engine resource then carries two
    micro-batches' work in turn, so the busier one sets the step:

        t = 2 · max(C(T/2), m·T/2) + f,   C(T/2) = G(g·T/2, w + x·(1 − (1 − k/E)^(T/2))) + J(R·T/2, A)
                                                 + [max(a·q·C_d + a_p·C_p, c·(C_d + p)) + l·s + (r − m + e)·T] / 2

    (each micro-batch runs its own all-reduces, J at its T/2 tokens).

    The linear terms halve and sum back; the GEMMs do not: each micro-batch reads the weights (and the experts its
    tokens touch) itself, which is what two-batch overlap costs where the weight read binds (LMSYS blog 2025-05-05:
    "TBO yields minimal or negative gains" below 64-128 tokens per device). Not overlapped: f (the kernels' and the
    engine's fixed times, counted once) and the pipeline's fill, one layer's exchange of L_moe (left out).
    """
    tokens = decode_tokens + prefill_tokens
    weights = weight_read_seconds + expert_read_seconds * experts_touched_share(tokens, expert_pick_probability)
    gemms = gemm_term(gemm_seconds_per_token * tokens, weights, gemm_knee_exponent)
    roofline = maximum(attention_seconds_per_context_token * queries_per_context_read * decode_context_tokens
                       + prefill_attention_seconds_per_context_token * prefill_context_tokens,
                       kv_read_seconds_per_context_token * (decode_context_tokens + prefill_tokens))
    tabled = (where(decode_tokens > 0, attention_table_floor_seconds, 0.0)
              + gemm_term(attention_table_seconds_per_sequence * (decode_tokens / queries_per_context_read),
                          attention_table_seconds_per_context_token * decode_context_tokens, attention_knee_exponent)
              + maximum(prefill_attention_seconds_per_context_token * prefill_context_tokens,
                        kv_read_seconds_per_context_token * prefill_tokens))
    attention = where(attention_knee_exponent > 0, tabled, roofline)
    all_reduces = allreduce_term(allreduce_seconds_per_token * tokens, allreduce_seconds_per_step,
                                 allreduce_knee_exponent)
    plain = (gemms + attention + logit_seconds_per_token * sampled_tokens + all_reduces
             + (communication_seconds_per_token + elementwise_seconds_per_token) * tokens + fixed_seconds_per_step)
    if is_off(two_batch_overlap):
        return plain
    half_all_reduces = allreduce_term(allreduce_seconds_per_token * (tokens / 2), allreduce_seconds_per_step,
                                      allreduce_knee_exponent)
    return where(two_batch_overlap > 0, two_batch_step(
        tokens, attention + logit_seconds_per_token * sampled_tokens, gemm_seconds_per_token, weight_read_seconds,
        expert_read_seconds, expert_pick_probability, communication_seconds_per_token, elementwise_seconds_per_token,
        fixed_seconds_per_step, gemm_knee_exponent, moe_exchange_seconds_per_token, half_all_reduces), plain)


def is_off(flag) -> bool:
    """True for a plain 0 (no two-batch overlap): the step skips its second form (an array flag is never off)."""
    return not hasattr(flag, "shape") and flag <= 0


def two_batch_step(tokens, linear, gemm_seconds_per_token, weight_read_seconds, expert_read_seconds,
                   expert_pick_probability, communication_seconds_per_token, elementwise_seconds_per_token,
                   fixed_seconds_per_step, gemm_knee_exponent, moe_exchange_seconds_per_token, half_all_reduces=0.0):
    """A step of two micro-batches (see :func:`engine_step_seconds`): 2·max(C(T/2), m·T/2) + f, ``linear`` the
    attention and LM-head terms of the whole step (halved here), ``half_all_reduces`` one micro-batch's J(R·T/2, A)."""
    half = tokens / 2
    weights = weight_read_seconds + expert_read_seconds * experts_touched_share(half, expert_pick_probability)
    compute = (gemm_term(gemm_seconds_per_token * half, weights, gemm_knee_exponent) + half_all_reduces + linear / 2
               + (communication_seconds_per_token - moe_exchange_seconds_per_token + elementwise_seconds_per_token)
               * half)
    return 2 * maximum(compute, moe_exchange_seconds_per_token * half) + fixed_seconds_per_step


def scalar_engine_step(gemm_seconds_per_token, weight_read_seconds, expert_read_seconds, expert_pick_probability,
                       attention_seconds_per_context_token, prefill_attention_seconds_per_context_token,
                       kv_read_seconds_per_context_token, logit_seconds_per_token, communication_seconds_per_token,
                       fixed_seconds_per_step, elementwise_seconds_per_token=0.0, gemm_knee_exponent=0.0,
                       moe_exchange_seconds_per_token=0.0, two_batch_overlap=0.0, allreduce_seconds_per_step=0.0,
                       allreduce_seconds_per_token=0.0, allreduce_knee_exponent=0.0, attention_table_floor_seconds=0.0,
                       attention_table_seconds_per_sequence=0.0, attention_table_seconds_per_context_token=0.0,
                       attention_knee_exponent=0.0):
    """:func:`engine_step_seconds` with a replica's costs bound once, for plain numbers (int or float) only: the
    simulator's hot path (about two calls a request). The same formula, term by term and in the same order of
    operations (``maximum(a, b)`` is ``b if b > a else a``, as :func:`botec.graph.elementwise.maximum` computes it
    on scalars, ``minimum(a, b)`` is ``b if b < a else a``), so the two agree to the bit; a test holds them together
    on random inputs. The GEMM term's form (the knee G with p > 0, the max with p = 0) is chosen once, when the
    costs are bound. Arrays go to :func:`engine_step_seconds`."""
    g, w, x, k = gemm_seconds_per_token, weight_read_seconds, expert_read_seconds, expert_pick_probability
    a, a_p, c = (attention_seconds_per_context_token, prefill_attention_seconds_per_context_token,
                 kv_read_seconds_per_context_token)
    l, f = logit_seconds_per_token, fixed_seconds_per_step
    r_e = communication_seconds_per_token + elementwise_seconds_per_token
    p = gemm_knee_exponent
    knee = 1.0 if 1.0 > p else p           # maximum(p, 1.0)
    inverse = 1 / knee
    ar_a, ar_r = allreduce_seconds_per_step, allreduce_seconds_per_token
    ar_q = allreduce_knee_exponent if allreduce_knee_exponent > 0 else 1.0   # where(q > 0, q, 1.0)
    ar_inverse = 1 / ar_q

    def all_reduces(tokens):               # allreduce_term(R·T, A, q)
        bandwidth = ar_r * tokens
        high = ar_a if ar_a > bandwidth else bandwidth
        low = ar_a if ar_a < bandwidth else bandwidth
        return high * (1 + (low / (high if high > 0 else 1.0)) ** ar_q) ** ar_inverse

    def gemm_term(compute, weights):       # G(g·T, weights): the knee (p > 0) or the max (p = 0)
        high = weights if weights > compute else compute
        low = weights if weights < compute else compute
        return high * (1 + (low / (high if high > 0 else 1.0)) ** knee) ** inverse

    if p <= 0:
        def gemm_term(compute, weights):   # noqa: F811 (the max form)
            return weights if weights > compute else compute

    floor_a, sigma, kappa = (attention_table_floor_seconds, attention_table_seconds_per_sequence,
                             attention_table_seconds_per_context_token)
    knee_a = 1.0 if 1.0 > attention_knee_exponent else attention_knee_exponent   # maximum(p_a, 1.0)
    inverse_a = 1 / knee_a

    if attention_knee_exponent > 0:      # a measured decode-attention table: F_a + G_a(σ·d/q, κ·C_d) + the prefill's
        def attention(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                      queries_per_context_read):
            per_sequence = sigma * (decode_tokens / queries_per_context_read)
            per_context = kappa * decode_context_tokens
            high = per_context if per_context > per_sequence else per_sequence
            low = per_context if per_context < per_sequence else per_sequence
            knee = high * (1 + (low / (high if high > 0 else 1.0)) ** knee_a) ** inverse_a
            compute = a_p * prefill_context_tokens
            memory = c * prefill_tokens
            return ((floor_a if decode_tokens > 0 else 0.0) + knee) + (memory if memory > compute else compute)
    else:                                # the roofline
        def attention(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                      queries_per_context_read):
            compute = a * queries_per_context_read * decode_context_tokens + a_p * prefill_context_tokens
            memory = c * (decode_context_tokens + prefill_tokens)
            return memory if memory > compute else compute

    if two_batch_overlap > 0:   # two micro-batches (engine_step_seconds's second form), term by term as two_batch_step
        m = moe_exchange_seconds_per_token
        r, e = communication_seconds_per_token, elementwise_seconds_per_token
        kept = 1 - k

        def step(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens, sampled_tokens,
                 queries_per_context_read=1.0):
            tokens = decode_tokens + prefill_tokens
            linear = attention(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                               queries_per_context_read) + l * sampled_tokens
            half = tokens / 2
            touched = (1 - kept ** (0 if 0 > half else half)) if k > 0 else 0.0
            busy = gemm_term(g * half, w + x * touched) + all_reduces(half) + linear / 2 + (r - m + e) * half
            exchange = m * half
            return 2 * (exchange if exchange > busy else busy) + f

        return step

    if k > 0:
        kept = 1 - k            # experts_touched_share: 1 − (1 − k/E)^max(T, 0)

        def step(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens, sampled_tokens,
                 queries_per_context_read=1.0):
            tokens = decode_tokens + prefill_tokens
            weights = w + x * (1 - kept ** (0 if 0 > tokens else tokens))
            gemms = gemm_term(g * tokens, weights)
            return (gemms + attention(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                                      queries_per_context_read) + l * sampled_tokens + all_reduces(tokens)
                    + r_e * tokens + f)
    elif attention_knee_exponent <= 0:   # dense on the roofline: the attention inline (the simulator's hot path)
        weights = w + x * 0.0    # no expert is picked (dense): experts_touched_share is 0

        def step(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens, sampled_tokens,
                 queries_per_context_read=1.0):
            tokens = decode_tokens + prefill_tokens
            gemms = gemm_term(g * tokens, weights)
            compute = a * queries_per_context_read * decode_context_tokens + a_p * prefill_context_tokens
            memory = c * (decode_context_tokens + prefill_tokens)
            return (gemms + (memory if memory > compute else compute) + l * sampled_tokens + all_reduces(tokens)
                    + r_e * tokens + f)
    else:
        weights = w + x * 0.0

        def step(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens, sampled_tokens,
                 queries_per_context_read=1.0):
            tokens = decode_tokens + prefill_tokens
            gemms = gemm_term(g * tokens, weights)
            return (gemms + attention(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                                      queries_per_context_read) + l * sampled_tokens + all_reduces(tokens)
                    + r_e * tokens + f)

    return step


# The graph quantities an engine step reads, in the order of engine_step_seconds's keyword arguments.
STEP_INPUTS = ("gemm_seconds_per_token", "weight_read_seconds", "expert_read_seconds", "expert_pick_probability",
               "attention_seconds_per_context_token", "prefill_attention_seconds_per_context_token",
               "kv_read_seconds_per_context_token", "logit_seconds_per_token", "communication_seconds_per_token",
               "fixed_seconds_per_step", "elementwise_seconds_per_token", "gemm_knee_exponent",
               "moe_exchange_seconds_per_token", "two_batch_overlap", "allreduce_seconds_per_step",
               "allreduce_seconds_per_token", "allreduce_knee_exponent", "attention_table_floor_seconds",
               "attention_table_seconds_per_sequence", "attention_table_seconds_per_context_token",
               "attention_knee_exponent")


@dataclass(frozen=True)
class StepModel:
    """One replica's per-unit costs, bound from an estimate: ``step(...)`` is engine_step_seconds."""

    gemm_seconds_per_token: float
    weight_read_seconds: float
    expert_read_seconds: float
    expert_pick_probability: float
    attention_seconds_per_context_token: float
    prefill_attention_seconds_per_context_token: float
    kv_read_seconds_per_context_token: float
    logit_seconds_per_token: float
    communication_seconds_per_token: float
    fixed_seconds_per_step: float
    elementwise_seconds_per_token: float = 0.0
    gemm_knee_exponent: float = 0.0
    moe_exchange_seconds_per_token: float = 0.0
    two_batch_overlap: float = 0.0
    allreduce_seconds_per_step: float = 0.0
    allreduce_seconds_per_token: float = 0.0
    allreduce_knee_exponent: float = 0.0
    attention_table_floor_seconds: float = 0.0
    attention_table_seconds_per_sequence: float = 0.0
    attention_table_seconds_per_context_token: float = 0.0
    attention_knee_exponent: float = 0.0

    @classmethod
    def from_quantities(cls, quantities) -> "StepModel":
        """From an estimate's quantities (``result.quantities``: name -> Quantity)."""
        return cls(*(float(quantities[name].value) for name in STEP_INPUTS))

    def scalar_step(self):
        """``step``'s formula with these costs bound, for plain numbers: :func:`scalar_engine_step` (all six
        arguments positional: decode tokens, decode context, prefill tokens, prefill context, sampled tokens, and
        optionally the queries per context read)."""
        return scalar_engine_step(**{f.name: getattr(self, f.name) for f in fields(self)})

    def step(self, decode_tokens, decode_context_tokens, prefill_tokens=0.0, prefill_context_tokens=0.0,
             sampled_tokens=None, queries_per_context_read=1.0):
        """Seconds of a step (``sampled_tokens`` defaults to the decoding tokens)."""
        if sampled_tokens is None:
            sampled_tokens = decode_tokens
        return engine_step_seconds(decode_tokens, decode_context_tokens, prefill_tokens, prefill_context_tokens,
                                   sampled_tokens, queries_per_context_read,
                                   **{f.name: getattr(self, f.name) for f in fields(self)})
