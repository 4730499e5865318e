"""The op-level compute model: every kernel of a layer on a roofline with a fixed cost per kernel.

One micro-batch on one rank carries T = micro-batch × sequence / CP tokens. Each op class of a
transformer layer takes the longer of its FLOPs at the matmul rate and its bytes at the memory
rate, plus a fixed cost per kernel (launch, the last partial wave):

    GEMM (M × K by K × N)   t = max(2·M·K·N / (e_mm · peak), b·(M·K + K·N + M·N) / (e_mem · BW)) + t0
    memory-bound op         t = bytes / (e_mem · BW) + t0
    fused attention         t = FLOPs / (e_attn · peak₁₆) + t0

so a GEMM of F FLOPs sustains e_mm · F / (F + e_mm · peak · t0) of the peak: small GEMMs lose to
the fixed cost, large ones approach e_mm. That size dependence is what makes large models run at a
higher share of the peak than small ones (Narayanan et al. 2021, Table 1: 137 → 163 TFLOP/s per
GPU from 1.7B to 1T parameters). The figures e_mm, t0, e_mem, e_attn are per accelerator family
(``catalog/efficiency.yaml``), each with its source and range; Calculon (Isaev et al., SC23) models
per-op efficiency the same way with a table. The roofline: Williams, Waterman and Patterson 2009.

The op classes of one layer, forward (TP degree t splits every matrix's output or input side):

- attention projections: Q, K, V (one GEMM: T × h by h × (its weights / h / t)) and the output
  projection (T × (a·d_v / t) by (a·d_v / t) × h);
- attention core: fused (FlashAttention: the causal half of the s × s scores computed, nothing of
  them stored) or eager (the full scores by two batched GEMMs, with softmax and dropout on s²
  elements in memory);
- MLP: up (and gate) and down projections of a dense layer; an MoE layer's router, its routed
  experts at the tokens each receives (× the load imbalance of the busiest) and its shared experts;
- memory-bound ops: two norms and two residual adds (with bias and dropout fused) on the hidden
  state, the activation function on the MLP's width, the MoE token permutation.

Backward: every GEMM twice (input and weight gradients), the fused attention kernel 2.5 × its
forward FLOPs (FlashAttention-2 recomputes the scores: 5 matmuls to the forward's 2; Dao 2023), the
memory-bound ops twice their forward bytes. Recomputation repeats the forward (full) or, selective, what
the stack's policy drops: the attention core (Megatron) or every second matmul and the memory-bound ops
(torchtitan's op-level SAC). The output layer (LM head and cross entropy, and any multi-token-
prediction modules) runs on the last pipeline stage.
"""

from botec.graph import Formulas, maximum, where
from botec.formulas.transformer import memory_bound_elements_per_token
from botec.layout import Recompute

formulas = Formulas(account="compute")

formulas.input("matmul_efficiency", unit="1",
               meaning="share of the dense peak a large GEMM sustains (e_mm; the catalog's family curve)")
formulas.input("kernel_overhead_seconds", unit="s",
               meaning="fixed time of every kernel: launch and the last partial wave (t0)")
formulas.input("memory_bandwidth_efficiency", unit="1",
               meaning="share of the memory bandwidth a memory-bound op sustains (e_mem)")
formulas.input("attention_efficiency", unit="1",
               meaning="share of the 16-bit peak a fused (flash) attention kernel sustains, forward and backward "
                       "(e_attn; the family's figure for the training stack's kernel)")
formulas.input("attention_peak_flops_per_s", unit="FLOP/s", detail=True,
               meaning="the accelerator's 16-bit dense peak: attention runs in BF16/FP16 even when the GEMMs run FP8")
formulas.input("fused_attention", unit="1", detail=True,
               meaning="1: a fused attention kernel (FlashAttention: no s × s tensor in memory); 0: eager attention")
formulas.input("elementwise_traffic_factor", unit="1", detail=True,
               meaning="bytes the memory-bound ops of a layer move over the fused kernels' (1 fused; about 4 in "
                       "eager PyTorch: FP32 up-casts in the norms, RoPE and SiLU apart; catalog/stacks.yaml)")
formulas.input("elementwise_kernels_per_layer", unit="1", detail=True,
               meaning="memory-bound kernels of one layer's forward (5 fused: two norms, two residual adds, the "
                       "activation; 28 in eager PyTorch)")
formulas.input("cross_entropy_bytes_per_logit", unit="B", detail=True,
               meaning="bytes the loss reads and writes per logit, forward and backward (12 fused; 36 unfused)")
formulas.input("expert_load_imbalance", unit="1",
               meaning="tokens the busiest expert receives over the mean (1: perfectly balanced routing)")

# Flash attention's backward does 5 matmuls to the forward's 2 (it recomputes the scores): Dao 2023, §3.1.
FUSED_ATTENTION_BACKWARD_WORK = 2.5


def gemm_seconds(m, k, n, element_bytes, peak_flops_per_s, matmul_efficiency, memory_bytes_per_s,
                 memory_bandwidth_efficiency, kernel_overhead_seconds):
    """One GEMM (m × k by k × n) on the roofline: max(2mkn / (e_mm·peak), b·(mk + kn + mn) / (e_mem·BW)) + t0."""
    return grouped_gemm_seconds(1, m, k, n, element_bytes, peak_flops_per_s, matmul_efficiency, memory_bytes_per_s,
                                memory_bandwidth_efficiency, kernel_overhead_seconds)


def grouped_gemm_seconds(groups, m, k, n, element_bytes, peak_flops_per_s, matmul_efficiency, memory_bytes_per_s,
                         memory_bandwidth_efficiency, kernel_overhead_seconds):
    """G GEMMs of m × k by k × n, each with its own k × n matrix, in one kernel launch:

        t = max(G·2mkn / (e_mm·peak), G·b·(mk + kn + mn) / (e_mem·BW)) + t0

    G: groups (an MoE layer's local experts), b: bytes per element, t0: one kernel's fixed cost for all G
    (G = 1: a plain GEMM). Source: Megatron-Core GroupedMLP (``--moe-grouped-gemm``) and Transformer Engine's
    grouped GEMM (CUTLASS grouped GEMM) launch one kernel for the E/EP local experts of a layer."""
    flops_seconds = groups * 2 * m * k * n / (matmul_efficiency * peak_flops_per_s)
    bytes_seconds = (groups * element_bytes * (m * k + k * n + m * n)
                     / (memory_bandwidth_efficiency * memory_bytes_per_s))
    return maximum(flops_seconds, bytes_seconds) + kernel_overhead_seconds


def _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
             kernel_overhead_seconds):
    return peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency, \
        kernel_overhead_seconds


@formulas.formula(unit="tokens", meaning="tokens one micro-batch carries on one rank (T)",
                  expression="micro_batch_size × local_sequence_length", detail=True)
def microbatch_tokens(micro_batch_size, local_sequence_length):
    return micro_batch_size * local_sequence_length


@formulas.formula(unit="s", meaning="forward time of one layer's attention projections (QKV and output GEMMs)",
                  expression="gemm(T, h, qkv weights / (h·t)) + gemm(T, a·d_v / t, h), each max(FLOPs / (e_mm·peak), "
                             "bytes / (e_mem·BW)) + t0", prose=True, detail=True,
                  symbols={"T": "microbatch_tokens", "h": "hidden_size",
                           "qkv weights": "attention_projection_parameters_per_layer",
                           "a·d_v": "attention_output_parameters_per_layer / hidden_size", "t": "tensor_parallel",
                           "e_mm": "matmul_efficiency", "peak": "peak_flops_per_s",
                           "e_mem": "memory_bandwidth_efficiency", "BW": "memory_bandwidth_bytes_per_s",
                           "t0": "kernel_overhead_seconds"})
def attention_projection_seconds(microbatch_tokens, hidden_size, attention_projection_parameters_per_layer,
                                 attention_output_parameters_per_layer, tensor_parallel, activation_bytes_per_element,
                                 peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s,
                                 memory_bandwidth_efficiency, kernel_overhead_seconds):
    machine = _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                       kernel_overhead_seconds)
    t, h, width = tensor_parallel, hidden_size, activation_bytes_per_element
    qkv = gemm_seconds(microbatch_tokens, h, attention_projection_parameters_per_layer / (h * t), width, *machine)
    out = gemm_seconds(microbatch_tokens, attention_output_parameters_per_layer / (h * t), h, width, *machine)
    return qkv + out


@formulas.formula(unit="s", meaning="forward time of one dense layer's MLP (up and down GEMMs)",
                  expression="gemm(T, h, up weights / (h·t)) + gemm(T, down weights / (h·t), h)", prose=True,
                  detail=True, zero_when="mlp_up_parameters_per_layer == 0",
                  symbols={"T": "microbatch_tokens", "h": "hidden_size", "up weights": "mlp_up_parameters_per_layer",
                           "down weights": "mlp_down_parameters_per_layer", "t": "tensor_parallel"})
def dense_mlp_seconds(microbatch_tokens, hidden_size, mlp_up_parameters_per_layer, mlp_down_parameters_per_layer,
                      tensor_parallel, activation_bytes_per_element, peak_flops_per_s, matmul_efficiency,
                      memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency, kernel_overhead_seconds):
    machine = _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                       kernel_overhead_seconds)
    t, h, width = tensor_parallel, hidden_size, activation_bytes_per_element
    up = gemm_seconds(microbatch_tokens, h, mlp_up_parameters_per_layer / (h * t), width, *machine)
    down = gemm_seconds(microbatch_tokens, mlp_down_parameters_per_layer / (h * t), h, width, *machine)
    return up + down


@formulas.formula(unit="tokens", meaning="tokens the busiest local expert receives per micro-batch",
                  expression="microbatch_tokens × experts_per_token × expert_parallel × expert_load_imbalance / experts",
                  source="balanced routing sends T·k_e·EP / E tokens to each expert of an EP group; the busiest "
                         "receives the imbalance factor more (Fedus et al. 2021: capacity factor)",
                  detail=True, zero_when="experts == 0")
def expert_tokens(microbatch_tokens, experts_per_token, expert_parallel, expert_load_imbalance, experts):
    return microbatch_tokens * experts_per_token * expert_parallel * expert_load_imbalance / experts


@formulas.formula(unit="s", meaning="forward time of one MoE layer's MLP: router, local routed experts, shared experts",
                  expression="gemm(T, h, E) + grouped(E / EP; expert_tokens, h, up / (h·t_e)) + grouped(E / EP; "
                             "expert_tokens, down / (h·t_e), h) + S × (gemm(T, h, up / (h·t)) + gemm(T, down / (h·t), "
                             "h)); grouped(G; m, k, n) = max(G·2mkn / (e_mm·peak), G·b·(mk + kn + mn) / (e_mem·BW)) "
                             "+ t0: the local experts of each projection in one kernel",
                  source="Megatron-Core GroupedMLP / Transformer Engine grouped GEMM: one kernel (one t0) for all "
                         "E/EP local experts of a projection (formula-audit-2 N10)",
                  prose=True, detail=True, zero_when="moe_layers == 0",
                  symbols={"T": "microbatch_tokens", "h": "hidden_size", "E": "experts", "EP": "expert_parallel",
                           "up": "expert_up_parameters", "down": "expert_down_parameters",
                           "t_e": "expert_tensor_parallel", "S": "shared_experts", "t": "tensor_parallel"})
def expert_mlp_seconds(microbatch_tokens, expert_tokens, hidden_size, experts, expert_parallel, shared_experts,
                       expert_up_parameters, expert_down_parameters, expert_tensor_parallel, tensor_parallel,
                       activation_bytes_per_element, peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s,
                       memory_bandwidth_efficiency, kernel_overhead_seconds):
    machine = _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                       kernel_overhead_seconds)
    h, width = hidden_size, activation_bytes_per_element
    router = gemm_seconds(microbatch_tokens, h, experts, width, *machine)
    local_experts = experts / expert_parallel   # each projection's local experts: one grouped GEMM, one t0
    up_width = expert_up_parameters / (h * expert_tensor_parallel)
    down_width = expert_down_parameters / (h * expert_tensor_parallel)
    routed = (grouped_gemm_seconds(local_experts, expert_tokens, h, up_width, width, *machine)
              + grouped_gemm_seconds(local_experts, expert_tokens, down_width, h, width, *machine))
    shared = shared_experts * (
        gemm_seconds(microbatch_tokens, h, expert_up_parameters / (h * tensor_parallel), width, *machine)
        + gemm_seconds(microbatch_tokens, expert_down_parameters / (h * tensor_parallel), h, width, *machine))
    return router + routed + shared


@formulas.formula(unit="FLOP", meaning="attention-score work the kernel executes per layer and micro-batch, forward",
                  expression="2 × microbatch_tokens × sequence_length × attention_heads / tensor_parallel"
                             " × (qk_head_dim + v_head_dim) × (0.5 if fused_attention else 1)",
                  source="QKᵀ and attention × V; a fused causal kernel skips the masked half, eager attention computes "
                         "the full s × s scores", detail=True)
def attention_core_flops(microbatch_tokens, sequence_length, attention_heads, tensor_parallel, qk_head_dim,
                         v_head_dim, fused_attention):
    executed = where(fused_attention, 0.5, 1.0)
    return (2 * microbatch_tokens * sequence_length * attention_heads / tensor_parallel * (qk_head_dim + v_head_dim)
            * executed)


def _eager_attention_parts(microbatch_tokens, micro_batch_size, sequence_length, attention_heads, tensor_parallel,
                           qk_head_dim, v_head_dim, activation_bytes_per_element, peak_flops_per_s, matmul_efficiency,
                           memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency, kernel_overhead_seconds):
    """(the two batched GEMMs, the softmax and dropout on the scores) of eager attention, forward."""
    machine = _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                       kernel_overhead_seconds)
    width = activation_bytes_per_element
    batch = micro_batch_size * attention_heads / tensor_parallel          # (sequence, head) pairs on this rank
    queries = microbatch_tokens / micro_batch_size                        # the rank's queries of one sequence
    s = sequence_length
    overhead = kernel_overhead_seconds
    scores = gemm_seconds(queries, qk_head_dim, s, width, *machine[:-1], 0.0) * batch + overhead
    values = gemm_seconds(queries, s, v_head_dim, width, *machine[:-1], 0.0) * batch + overhead
    elements = batch * queries * s
    rate = memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s
    softmax = 2 * width * elements / rate + overhead                       # scale, mask, softmax: read and write
    dropout = (2 * width + 1) * elements / rate + overhead                 # read, write, and a one-byte mask
    return scores + values, softmax + dropout


@formulas.formula(unit="s", meaning="forward time of one layer's attention core (scores, softmax, weighted values)",
                  expression="fused: attention_core_flops / (e_attn × attention peak) + t0; eager: two batched GEMMs "
                             "on the roofline + softmax and dropout over the s × s scores at e_mem × BW",
                  prose=True, detail=True,
                  symbols={"e_attn": "attention_efficiency", "attention peak": "attention_peak_flops_per_s",
                           "t0": "kernel_overhead_seconds", "s": "sequence_length",
                           "e_mem": "memory_bandwidth_efficiency", "BW": "memory_bandwidth_bytes_per_s"})
def attention_core_seconds(attention_core_flops, fused_attention, attention_efficiency, attention_peak_flops_per_s,
                           microbatch_tokens, micro_batch_size, sequence_length, attention_heads, tensor_parallel,
                           qk_head_dim, v_head_dim, activation_bytes_per_element, peak_flops_per_s, matmul_efficiency,
                           memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency, kernel_overhead_seconds):
    fused = attention_core_flops / (attention_efficiency * attention_peak_flops_per_s) + kernel_overhead_seconds
    gemms, elementwise = _eager_attention_parts(
        microbatch_tokens, micro_batch_size, sequence_length, attention_heads, tensor_parallel, qk_head_dim,
        v_head_dim, activation_bytes_per_element, attention_peak_flops_per_s, matmul_efficiency,
        memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency, kernel_overhead_seconds)
    return where(fused_attention, fused, gemms + elementwise)


@formulas.formula(unit="s", meaning="backward time of one layer's attention core",
                  expression="fused: 2.5 × attention_core_flops / (e_attn × attention peak) + t0 (the scores "
                             "recomputed); eager: twice the forward's GEMMs and memory-bound ops",
                  source="FlashAttention-2 backward: 5 matmuls to the forward's 2 (Dao 2023)", prose=True, detail=True,
                  symbols={"e_attn": "attention_efficiency", "attention peak": "attention_peak_flops_per_s",
                           "t0": "kernel_overhead_seconds"})
def attention_core_backward_seconds(attention_core_flops, fused_attention, attention_efficiency,
                                    attention_peak_flops_per_s, attention_core_seconds, kernel_overhead_seconds):
    fused = (FUSED_ATTENTION_BACKWARD_WORK * attention_core_flops / (attention_efficiency * attention_peak_flops_per_s)
             + kernel_overhead_seconds)
    return where(fused_attention, fused, 2 * attention_core_seconds)


@formulas.formula(unit="s", meaning="forward time of one layer's memory-bound ops: norms, residual adds, activation "
                                    "function, MoE token permutation",
                  expression="x × b × (T_n × 10 × h + T × activation_function_elements / t + T × 4 × k_e × h × "
                             "moe_layers / layers) / (e_mem × BW) + n × t0, T_n = T / t with sequence parallelism "
                             "(else T)",
                  source="two norms (read h, write h) and two residual adds (read 2h, write h) per token in fused "
                         "kernels; eager PyTorch moves x ≈ 4 times those bytes in n = 28 kernels (catalog/stacks.yaml)",
                  prose=True, detail=True,
                  symbols={"b": "activation_bytes_per_element", "T": "microbatch_tokens", "h": "hidden_size",
                           "t": "tensor_parallel", "k_e": "experts_per_token", "x": "elementwise_traffic_factor",
                           "n": "elementwise_kernels_per_layer",
                           "e_mem": "memory_bandwidth_efficiency", "BW": "memory_bandwidth_bytes_per_s",
                           "t0": "kernel_overhead_seconds"})
def elementwise_seconds(microbatch_tokens, hidden_size, sequence_parallel, tensor_parallel,
                        activation_function_elements, experts_per_token, moe_layers, layers,
                        activation_bytes_per_element, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                        kernel_overhead_seconds, elementwise_traffic_factor, elementwise_kernels_per_layer):
    norm_share = 1 / where(sequence_parallel, tensor_parallel, 1)
    elements = microbatch_tokens * memory_bound_elements_per_token(
        hidden_size, activation_function_elements, tensor_parallel, experts_per_token, moe_layers, layers, norm_share)
    return (elementwise_traffic_factor * activation_bytes_per_element * elements
            / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s)
            + elementwise_kernels_per_layer * kernel_overhead_seconds)


@formulas.formula(unit="s", meaning="forward time of one layer on one rank for one micro-batch (all op classes)",
                  expression="attention_projection_seconds + attention_core_seconds + elementwise_seconds"
                             " + (dense_mlp_seconds × (layers − moe_layers) + expert_mlp_seconds × moe_layers) / layers"
                             " + adapter_forward_seconds + dequantization_seconds",
                  source="LoRA adds its adapters' GEMMs and, for a 4- or 8-bit base, the dequantization "
                         "(botec.training.adapters)")
def layer_forward_seconds(attention_projection_seconds, attention_core_seconds, elementwise_seconds,
                          dense_mlp_seconds, expert_mlp_seconds, layers, moe_layers, adapter_forward_seconds,
                          dequantization_seconds):
    return (attention_projection_seconds + attention_core_seconds + elementwise_seconds
            + (dense_mlp_seconds * (layers - moe_layers) + expert_mlp_seconds * moe_layers) / layers
            + adapter_forward_seconds + dequantization_seconds)


@formulas.formula(unit="s", meaning="backward time of one layer on one rank for one micro-batch",
                  expression="(2 − frozen_base) × (attention_projection_seconds + (dense_mlp_seconds × (layers − "
                             "moe_layers) + expert_mlp_seconds × moe_layers) / layers) + attention_core_backward_seconds"
                             " + 2 × elementwise_seconds + adapter_backward_seconds + dequantization_seconds",
                  source="input and weight gradients: two GEMMs per forward GEMM; a frozen (LoRA) matrix needs only "
                         "its input gradient: one GEMM, after dequantizing it again")
def layer_backward_seconds(attention_projection_seconds, dense_mlp_seconds, expert_mlp_seconds, layers, moe_layers,
                           attention_core_backward_seconds, elementwise_seconds, frozen_base, adapter_backward_seconds,
                           dequantization_seconds):
    gemms = attention_projection_seconds + (dense_mlp_seconds * (layers - moe_layers)
                                            + expert_mlp_seconds * moe_layers) / layers
    return ((2 - frozen_base) * gemms + attention_core_backward_seconds + 2 * elementwise_seconds
            + adapter_backward_seconds + dequantization_seconds)


@formulas.formula(unit="s", meaning="the weight-gradient GEMMs of one layer's backward for one micro-batch (W)",
                  expression="(1 − frozen_base) × (attention_projection_seconds + (dense_mlp_seconds × (layers − "
                             "moe_layers) + expert_mlp_seconds × moe_layers) / layers)",
                  source="one weight-gradient GEMM per forward GEMM, of the forward's size (Qi et al. 2023 §2: the "
                         "backward as B and W); none for a frozen base; the adapters' own are left in B", detail=True)
def layer_weight_gradient_seconds(attention_projection_seconds, dense_mlp_seconds, expert_mlp_seconds, layers,
                                  moe_layers, frozen_base):
    return (1 - frozen_base) * (attention_projection_seconds + (dense_mlp_seconds * (layers - moe_layers)
                                                                + expert_mlp_seconds * moe_layers) / layers)


@formulas.formula(unit="s", meaning="the GEMMs op-level selective checkpointing repeats in one layer's backward, per "
                                    "micro-batch: the K and output projections and the MLP's up (a plain MLP: down)",
                  expression="gemm(T, h, k·d_qk / t) + gemm(T, a·d_v / t, h) + (L − M) / L × (gemm(T, h, f / t) if "
                             "gated else gemm(T, f / t, h))",
                  source="torchtitan's op-level SAC recomputes every second matmul of a block (Q, K, V, O, W1, W3, "
                         "W2: K, O and W3; sac_recomputed_matmul_parameters_per_layer); an MoE layer's experts are "
                         "saved (assumed)", prose=True, detail=True,
                  symbols={"T": "microbatch_tokens", "h": "hidden_size", "k": "kv_heads", "t": "tensor_parallel",
                           "a·d_v": "attention_output_parameters_per_layer / hidden_size", "f": "ffn_size",
                           "L": "layers", "M": "moe_layers"})
def sac_recompute_gemm_seconds(microbatch_tokens, hidden_size, kv_heads, qk_head_dim,
                               attention_output_parameters_per_layer, ffn_size, mlp_gated, layers, moe_layers,
                               tensor_parallel, activation_bytes_per_element, peak_flops_per_s, matmul_efficiency,
                               memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency, kernel_overhead_seconds):
    machine = _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                       kernel_overhead_seconds)
    t, h, width, tokens = tensor_parallel, hidden_size, activation_bytes_per_element, microbatch_tokens
    key = gemm_seconds(tokens, h, kv_heads * qk_head_dim / t, width, *machine)
    output = gemm_seconds(tokens, attention_output_parameters_per_layer / (h * t), h, width, *machine)
    mlp = where(mlp_gated, gemm_seconds(tokens, h, ffn_size / t, width, *machine),
                gemm_seconds(tokens, ffn_size / t, h, width, *machine))
    return key + output + (layers - moe_layers) / layers * mlp


@formulas.formula(unit="s", meaning="forward work one layer repeats for recomputation, per micro-batch",
                  expression="full_recompute_share × layer_forward_seconds if recompute = full (per layer, averaged "
                             "over the layers); if selective: attention_core_seconds with eager attention and 0 "
                             "with a fused kernel, plus sac_recompute_gemm_seconds + elementwise_seconds under "
                             "op-level SAC (selective_recompute_policy 1)",
                  source="Korthikanti et al. 2022: full recompute repeats the layer's forward, Megatron's selective "
                         "the attention core; Megatron --recompute-num-layers: only that share of the layers. A fused "
                         "(flash) kernel keeps nothing of the scores and recomputes them in its own backward "
                         "(Dao et al. 2022), already charged: Megatron's selective has nothing left to repeat. "
                         "torchtitan's op-level SAC saves the attention kernel's output and every second matmul's, "
                         "and repeats the other matmuls and every memory-bound op (norms, RoPE, SiLU, residuals)",
                  prose=True, detail=True)
def layer_recompute_seconds(recompute, layer_forward_seconds, attention_core_seconds, full_recompute_share,
                            fused_attention, selective_recompute_policy, sac_recompute_gemm_seconds,
                            elementwise_seconds):
    attention_core = where(fused_attention, 0.0, attention_core_seconds)
    selective = attention_core + where(selective_recompute_policy >= 1,
                                       sac_recompute_gemm_seconds + elementwise_seconds, 0.0)
    return where(recompute >= Recompute.FULL, full_recompute_share * layer_forward_seconds,
                 where(recompute >= Recompute.SELECTIVE, selective, 0.0))


@formulas.formula(unit="s", meaning="one micro-batch through the output layer on the last stage: LM head forward "
                                    "and backward, cross entropy, and any multi-token-prediction modules",
                  expression="(1 + mtp_layers) × ((3 − frozen_base) × gemm(T, h, V / t) + c_ce × T × V / t / (e_mem × "
                             "BW) + t0) + mtp_layers × (layer_forward_seconds + layer_backward_seconds)",
                  source="vocabulary-parallel LM head; the cross entropy's bytes per logit c_ce are the loss kernel's "
                         "(catalog/stacks.yaml: 12 fused, 36 for the unfused Hugging Face / torchtitan loss); "
                         "DeepSeek-V3's MTP module is a full layer plus the shared head; a frozen (LoRA) head needs no "
                         "weight gradient",
                  prose=True, detail=True,
                  symbols={"T": "microbatch_tokens", "h": "hidden_size", "V": "vocab_size", "t": "tensor_parallel",
                           "c_ce": "cross_entropy_bytes_per_logit",
                           "e_mem": "memory_bandwidth_efficiency", "BW": "memory_bandwidth_bytes_per_s",
                           "t0": "kernel_overhead_seconds"})
def output_layer_seconds(microbatch_tokens, hidden_size, vocab_size, tensor_parallel, mtp_layers,
                         layer_forward_seconds, layer_backward_seconds, activation_bytes_per_element,
                         peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s,
                         memory_bandwidth_efficiency, kernel_overhead_seconds, frozen_base,
                         cross_entropy_bytes_per_logit):
    machine = _machine(peak_flops_per_s, matmul_efficiency, memory_bandwidth_bytes_per_s, memory_bandwidth_efficiency,
                       kernel_overhead_seconds)
    logits = microbatch_tokens * vocab_size / tensor_parallel
    head = ((3 - frozen_base) * gemm_seconds(microbatch_tokens, hidden_size, vocab_size / tensor_parallel,
                                             activation_bytes_per_element, *machine)
            + cross_entropy_bytes_per_logit * logits / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s)
            + kernel_overhead_seconds)
    return (1 + mtp_layers) * head + mtp_layers * (layer_forward_seconds + layer_backward_seconds)


@formulas.formula(unit="s", meaning="forward, backward and recomputation of one layer for one micro-batch",
                  expression="layer_forward_seconds + layer_backward_seconds + layer_recompute_seconds", detail=True)
def layer_seconds(layer_forward_seconds, layer_backward_seconds, layer_recompute_seconds):
    return layer_forward_seconds + layer_backward_seconds + layer_recompute_seconds


@formulas.formula(unit="B", meaning="bytes the optimizer step reads and writes on one accelerator",
                  expression="2 × optimizer_memory_bytes + 2 × gradient_bytes_per_parameter × optimizer_memory_bytes"
                             " / (master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter)"
                             " + weight_memory_bytes − frozen_weight_memory_bytes", detail=True)
def optimizer_step_bytes(optimizer_memory_bytes, gradient_bytes_per_parameter, master_weight_bytes_per_parameter,
                         optimizer_state_bytes_per_parameter, weight_memory_bytes, frozen_weight_memory_bytes):
    """Adam reads and writes its master weights and moments (2 × their bytes), reads the gradient of each
    parameter it updates twice (norm, update), and writes the working weights (the trainable ones: a frozen
    LoRA base is not updated)."""
    state_per_parameter = master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter
    updated = where(state_per_parameter > 0, optimizer_memory_bytes / maximum(state_per_parameter, 1e-30), 0.0)
    return (2 * optimizer_memory_bytes + 2 * gradient_bytes_per_parameter * updated + weight_memory_bytes
            - frozen_weight_memory_bytes)
