"""The routed experts of an MoE replica: where they sit, what a step reads of them, and the all-to-all that moves
tokens to them.

Placement. A replica splits its E routed experts over EP ranks (each expert split TP / EP ways). DeepSeek's
expert-parallel load balancer (EPLB) adds N redundant copies of the hottest experts, so that the E + N physical
experts spread over more ranks than E allows and each carries about the same load: DeepSeek-V3/R1's own
inference system runs prefill at EP 32 with 32 redundant experts, 9 routed experts per GPU ((256 + 32)/32), and
decode at EP 144, 2 per GPU ((256 + 32)/144) (deepseek-ai/open-infra-index, "Day 6 - One More Thing:
DeepSeek-V3/R1 Inference System Overview", 2025-02-28); SGLang's large-scale EP runs 288 experts at EP 72, 4 per GPU
(LMSYS blog "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs",
2025-05-05: "EPLB's use of 288 experts enables ... parallelism sizes of 12 or 72"). When EP does not divide
E + N the placement is uneven: the busiest rank holds ⌈(E + N)/EP⌉ and sets both the memory per device and the
expert read of a step (the others wait for it at the combine).

Reads. A step's T tokens each pick k of the E logical experts; EPLB spreads a replicated expert's tokens over its
copies, so each of the E + N physical experts is picked by a token with probability k/(E + N) and is read when one
of the T tokens picks it, 1 − (1 − k/(E + N))^T (:func:`botec.serving.step.experts_touched_share`).

Exchange. Under tensor parallelism the MoE layer's input and output are all-reduced like any TP layer. Under
data-parallel attention (SGLang, TensorRT-LLM, DeepSeek's system) each token is dispatched to the ranks holding its
k experts and combined back (DeepEP: FP8 out with one FP32 scale per 128 elements, BF16 back), an all-to-all over
the EP group, in one of DeepEP's two kernel families (deepseek-ai/DeepEP, docs/legacy.md; LMSYS blog 2025-05-05,
"Expert Parallelism with DeepEP": normal kernels for prefill, low-latency kernels for decode):

- low-latency (a step that decodes): one message per (token, expert) pair, straight to the rank holding the expert
  (csrc/kernels/internode_ll.cu: the receive buffer is laid out per local expert; tests/test_low_latency.py counts
  its bytes per selection): k copies, k·(n − 1)/n of them leave the rank, over NVLink to the node's ranks and each
  rank's own NIC across nodes (:func:`botec.formulas.collectives.all_to_all_bytes_per_s`, ``ep_link_bytes_per_s``);
- normal (a disaggregated prefill instance): one RDMA copy per remote *node* holding any of the token's experts,
  forwarded over NVLink to the ranks there ("asymmetric-domain bandwidth forwarding ... from NVLink domain to RDMA
  domain"), so the NIC carries N_r = (M − 1)·(1 − (1 − 1/M)^k) copies (M nodes in the group) and NVLink the
  fan-out to the distinct destination ranks, D·(l − 1)/l (l ranks per node), concurrently.

A replica whose prefill instances take its own layout prices their prompts with the decode kernels (one layout,
one set of step costs).
"""

from botec.graph import Formulas, ceil, maximum, where

formulas = Formulas(account="serving")

formulas.input("redundant_experts", unit="experts", detail=True,
               meaning="redundant routed-expert copies held beside the E experts (EPLB; 0: none)")
formulas.input("expert_parallel_nodes", unit="nodes", detail=True,
               meaning="M: nodes the EP group spans (EP / its ranks per node; 1 inside a node)")
formulas.input("two_batch_overlap", unit="1", detail=True,
               meaning="1 when each step runs as two micro-batches, one's MoE all-to-all under the other's compute "
                       "(strategy.two_batch_overlap; SGLang --enable-two-batch-overlap), else 0")
formulas.input("deepep_normal_kernels", unit="1", detail=True,
               meaning="1 where the MoE all-to-all runs DeepEP's normal kernels (a disaggregated prefill instance: one "
                       "RDMA copy per remote node, forwarded over NVLink), 0 for its low-latency kernels (a step that "
                       "decodes: one copy per token and expert)")

# DeepEP: tokens dispatched in FP8 with one FP32 scale per 128 elements (7,168 + 224 B of a 7,168-wide token; the
# 16 B message header left out), combined back in BF16 (csrc/kernels/internode_ll.cu's message layout)
MOE_DISPATCH_BYTES, MOE_COMBINE_BYTES = 1.0 + 4 / 128, 2.0


@formulas.formula(unit="experts", meaning="routed experts (and redundant copies) the busiest accelerator holds per MoE "
                                          "layer",
                  expression="⌈(experts + redundant_experts) / expert_parallel⌉",
                  choice=("expert_placement", "busiest"),
                  source="DeepSeek EPLB (deepseek-ai/eplb; open-infra-index day 6, 2025-02-28: prefill 9 and decode 2 "
                         "routed experts per GPU, (256 + 32)/32 and (256 + 32)/144)", prose=True, detail=True,
                  symbols={"experts": "E, routed experts", "redundant_experts": "N"})
def routed_experts_per_device(experts, redundant_experts, expert_parallel):
    return ceil((experts + redundant_experts) / expert_parallel)


@formulas.formula(unit="1", meaning="the busiest rank's routed experts over the mean rank's (1: an even placement)",
                  expression="routed_experts_per_device × expert_parallel / (experts + redundant_experts)",
                  zero_when="experts == 0", detail=True)
def expert_placement_imbalance(routed_experts_per_device, expert_parallel, experts, redundant_experts):
    return routed_experts_per_device * expert_parallel / (experts + redundant_experts)


@formulas.formula(unit="B", meaning="routed-expert weights resident on one accelerator (the busiest rank)",
                  expression="expert_parameters_per_device × weight_bytes_per_parameter", detail=True)
def expert_weight_bytes(expert_parameters_per_device, weight_bytes_per_parameter):
    return expert_parameters_per_device * weight_bytes_per_parameter


@formulas.formula(unit="s", meaning="time to read every routed expert resident on one accelerator",
                  expression="where a fused-MoE table covers them: expert_table_read_seconds_per_layer × moe_layers × "
                             "pipeline_stage_layers / layers (the read as the op times it, botec.serving.expert_gemms); "
                             "else expert_weight_bytes / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s)",
                  detail=True, prose=True)
def expert_read_seconds(expert_weight_bytes, memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s,
                        expert_table_covers, expert_table_read_seconds_per_layer, moe_layers, pipeline_stage_layers,
                        layers):
    return where(expert_table_covers > 0, expert_table_read_seconds_per_layer * moe_layers * pipeline_stage_layers
                 / layers, expert_weight_bytes / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s))


@formulas.formula(unit="fraction", meaning="chance a token picks a given physical expert: k / (E + N)",
                  expression="experts_per_token / (experts + redundant_experts)", zero_when="experts == 0",
                  source="EPLB spreads a replicated expert's tokens over its copies: the T·k picks of a step fall on "
                         "the E + N physical experts evenly", detail=True)
def expert_pick_probability(experts_per_token, experts, redundant_experts):
    return experts_per_token / (experts + redundant_experts)


@formulas.formula(unit="ranks", meaning="data-parallel attention: the other EP ranks one token's hidden state is "
                                        "sent to per MoE layer (one copy per rank holding any of its experts)",
                  expression="expert_parallel × (1 − (1 − 1/expert_parallel)^experts_per_token) × (expert_parallel − 1)"
                             " / expert_parallel",
                  source="DeepEP (deepseek-ai/DeepEP README): dispatch sends a token once to each rank holding one of "
                         "its k experts; the k experts taken as independent uniform picks over the EP ranks (for "
                         "DeepSeek-V3, k = 8 of 256 on EP 8: 4.59 remote ranks, 4.64 picking without replacement)",
                  prose=True, zero_when="experts == 0", detail=True)
def expert_destination_ranks(expert_parallel, experts_per_token, experts):
    ranks = expert_parallel * (1 - (1 - 1 / expert_parallel) ** experts_per_token)
    return where(experts > 0, ranks * (expert_parallel - 1) / expert_parallel, 0.0)


@formulas.formula(unit="copies", meaning="data-parallel attention: copies of one token's hidden state a rank sends "
                                         "to other ranks per MoE layer over the EP link",
                  expression="low-latency kernels: experts_per_token × (n − 1)/n; normal kernels: "
                             "expert_destination_ranks, n = expert_parallel",
                  source="DeepEP (deepseek-ai/DeepEP, docs/legacy.md; csrc/kernels/internode_ll.cu): the low-latency "
                         "dispatch writes one message per (token, expert) into a receive buffer laid out per local "
                         "expert (tests/test_low_latency.py counts the bytes per selection: 128 tokens × 8 × 7,392 B "
                         "in 192 µs = 39 GB/s at EP 128), so two experts on one rank take two copies; the normal "
                         "kernels send each destination rank one copy. EP 144, k = 8: 8 × 143/144 = 7.944 copies",
                  prose=True, zero_when="experts == 0", detail=True)
def expert_remote_copies(deepep_normal_kernels, experts_per_token, expert_parallel, expert_destination_ranks):
    return where(deepep_normal_kernels > 0, expert_destination_ranks,
                 experts_per_token * (expert_parallel - 1) / expert_parallel)


@formulas.formula(unit="s/B", meaning="DeepEP's normal kernels across nodes: seconds per byte of a token's hidden "
                                      "state, the slower of its RDMA copies (one per remote node) and its NVLink "
                                      "forwarding (one per destination rank in the node)",
                  expression="max(N_r / B_inter, D·(l − 1)/l / B_intra), N_r = (M − 1)·(1 − (1 − 1/M)^k), D = n·(1 − "
                             "(1 − 1/n)^k), l = n / M",
                  source="DeepEP README (docs/legacy.md): the normal kernels forward \"from NVLink domain to RDMA "
                         "domain\": a token crosses to each remote node holding one of its experts once and fans out "
                         "over NVLink there; RDMA and NVLink run concurrently. EP 32 on 4 nodes, k = 8: N_r = 3·(1 − "
                         "(3/4)^8) = 2.70 RDMA copies where one per remote rank is 24·(1 − (31/32)^8) = 5.38",
                  symbols={"M": "expert_parallel_nodes", "n": "expert_parallel", "k": "experts_per_token",
                           "B_inter": "inter_node_bytes_per_s", "B_intra": "intra_node_bytes_per_s"},
                  prose=True, zero_when="deepep_normal_kernels == 0 or expert_parallel_nodes <= 1 or experts == 0",
                  detail=True)
def forwarded_exchange_seconds_per_byte(expert_parallel_nodes, expert_parallel, experts_per_token,
                                        inter_node_bytes_per_s, intra_node_bytes_per_s):
    nodes, ranks, k = expert_parallel_nodes, expert_parallel, experts_per_token
    rdma_copies = (nodes - 1) * (1 - (1 - 1 / nodes) ** k)
    local = ranks / nodes
    nvlink_copies = ranks * (1 - (1 - 1 / ranks) ** k) * (local - 1) / local
    return maximum(rdma_copies / inter_node_bytes_per_s, nvlink_copies / intra_node_bytes_per_s)


@formulas.formula(unit="s", meaning="data-parallel attention: the MoE all-to-all's time per token a step carries "
                                    "(dispatch and combine of every MoE layer of the stage, each rank its 1/t of the "
                                    "tokens)",
                  expression="(L_s/L) · L_moe · h·(b₈ + b₁₆) / t × (F if normal kernels across nodes else "
                             "C / B_ep)",
                  source="DeepEP's README: dispatch in FP8 with its scales (b₈ = 1 + 4/128 B), combine in BF16 (b₁₆ = "
                         "2 B); DeepSeek-V3 report §3.4 (the all-to-all of expert parallelism). Balanced ranks: each "
                         "of the t ranks sends the copies of its own 1/t of the step's tokens. The part of the step "
                         "two-batch overlap can hide (botec.serving.step.engine_step_seconds)",
                  symbols={"L_s": "pipeline_stage_layers", "L": "layers", "L_moe": "moe_layers",
                           "t": "tensor_parallel", "h": "hidden_size", "C": "expert_remote_copies",
                           "B_ep": "ep_link_bytes_per_s (the all-to-all's per-rank bandwidth)",
                           "F": "forwarded_exchange_seconds_per_byte", "b₈": "1 + 4/128 B (FP8 and its scales)",
                           "b₁₆": "2 B (BF16 combine)"},
                  prose=True, zero_when="data_parallel_attention == 0 or experts == 0", detail=True)
def moe_exchange_seconds_per_token(pipeline_stage_layers, layers, moe_layers, hidden_size, tensor_parallel,
                                   expert_remote_copies, ep_link_bytes_per_s, forwarded_exchange_seconds_per_byte,
                                   deepep_normal_kernels, expert_parallel_nodes):
    per_byte = where((deepep_normal_kernels > 0) & (expert_parallel_nodes > 1), forwarded_exchange_seconds_per_byte,
                     expert_remote_copies / ep_link_bytes_per_s)
    return (pipeline_stage_layers / layers * moe_layers * hidden_size * (MOE_DISPATCH_BYTES + MOE_COMBINE_BYTES)
            / tensor_parallel * per_byte)


@formulas.formula(unit="s", meaning="communication time per token a step carries beside the tensor-parallel "
                                    "all-reduces (allreduce_seconds_per_token): data-parallel attention's MoE "
                                    "all-to-all over the EP group, dense layers gathered over the TP group's link",
                  expression="TP: 0 (the all-reduces: allreduce_seconds_per_token). DP attention: "
                             "moe_exchange_seconds_per_token + (L_s/L)·((L − L_moe) · 2(t − 1)/t · h·b + L · 2(t_a − 1)"
                             "/t_a · h·b · t_a/t) / B",
                  prose=True, zero_when="tensor_parallel == 1", detail=True,
                  source="DP attention: SGLang's DP-attention docs (dense layers: all-gather then reduce-scatter "
                         "over the ranks, one all-reduce's bytes; the attention output all-reduced within its group "
                         "of t_a); the MoE all-to-all: moe_exchange_seconds_per_token (DeepEP's kernels)",
                  symbols={"L_s": "pipeline_stage_layers", "L": "layers", "L_moe": "moe_layers",
                           "t": "tensor_parallel", "t_a": "attention_tensor_parallel", "h": "hidden_size",
                           "b": "activation_bytes_per_element", "B": "tp_link_bytes_per_s"})
def communication_seconds_per_token(pipeline_stage_layers, tensor_parallel, hidden_size, activation_bytes_per_element,
                                    tp_link_bytes_per_s, data_parallel_attention, attention_tensor_parallel, layers,
                                    moe_layers, moe_exchange_seconds_per_token):
    ring = 2 * (tensor_parallel - 1) / tensor_parallel * hidden_size * activation_bytes_per_element
    t_a = attention_tensor_parallel
    gathered = (layers - moe_layers) * ring
    within = layers * 2 * (t_a - 1) / t_a * hidden_size * activation_bytes_per_element * t_a / tensor_parallel
    spread = moe_exchange_seconds_per_token + pipeline_stage_layers / layers * (gathered + within) / tp_link_bytes_per_s
    return where(data_parallel_attention > 0, spread, 0.0)
