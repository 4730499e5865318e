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
data-parallel attention (SGLang, TensorRT-LLM, DeepSeek's system) each token is dispatched once to every rank
holding one of its k experts and combined back (DeepEP: FP8 out, BF16 back), an all-to-all over the EP group: the
tier its ranks span (NVLink inside a node; across nodes, each rank's own NIC for its off-node share,
:func:`botec.formulas.collectives.all_to_all_bytes_per_s`).
"""

from botec.graph import Formulas, ceil, where

formulas = Formulas(account="serving")

formulas.input("redundant_experts", unit="experts", detail=True,
               meaning="redundant routed-expert copies held beside the E experts (EPLB; 0: none)")

MOE_DISPATCH_BYTES, MOE_COMBINE_BYTES = 1.0, 2.0   # DeepEP: tokens dispatched in FP8, combined back in BF16


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
                  expression="expert_weight_bytes / (memory_bandwidth_efficiency × memory_bandwidth_bytes_per_s)",
                  detail=True)
def expert_read_seconds(expert_weight_bytes, memory_bandwidth_efficiency, memory_bandwidth_bytes_per_s):
    return expert_weight_bytes / (memory_bandwidth_efficiency * memory_bandwidth_bytes_per_s)


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


@formulas.formula(unit="s", meaning="communication time per token a step carries beside the tensor-parallel "
                                    "all-reduces (allreduce_seconds_per_token): data-parallel attention's MoE "
                                    "all-to-all over the EP group's link, dense layers gathered over the TP group's",
                  expression="TP: 0 (the all-reduces: allreduce_seconds_per_token). DP attention: (L_s/L)·[L_moe · R · "
                             "h·(b₈ + b₁₆) / (t·B_ep) + ((L − L_moe) · 2(t − 1)/t · h·b + L · 2(t_a − 1)/t_a · h·b · "
                             "t_a/t) / B]",
                  prose=True, zero_when="tensor_parallel == 1", detail=True,
                  source="DP attention: SGLang's DP-attention docs (dense layers: all-gather then reduce-scatter "
                         "over the ranks, one all-reduce's bytes; the attention output all-reduced within its group "
                         "of t_a); "
                         "DeepEP's README: dispatch in FP8 (b₈ = 1 B), combine in BF16 (b₁₆ = 2 B), one copy per "
                         "destination rank, over NVLink inside a node and RDMA across nodes; DeepSeek-V3 report §3.4 "
                         "(the all-to-all of expert parallelism). Balanced ranks: each of the t ranks sends the copies "
                         "of its own 1/t of the step's tokens",
                  symbols={"L_s": "pipeline_stage_layers", "L": "layers", "L_moe": "moe_layers",
                           "t": "tensor_parallel", "t_a": "attention_tensor_parallel", "h": "hidden_size",
                           "b": "activation_bytes_per_element", "B": "tp_link_bytes_per_s",
                           "B_ep": "ep_link_bytes_per_s (the all-to-all's per-rank bandwidth)",
                           "R": "expert_destination_ranks", "b₈": "1 B (FP8 dispatch)", "b₁₆": "2 B (BF16 combine)"})
def communication_seconds_per_token(pipeline_stage_layers, tensor_parallel, hidden_size, activation_bytes_per_element,
                                    tp_link_bytes_per_s, ep_link_bytes_per_s, data_parallel_attention,
                                    attention_tensor_parallel, layers, moe_layers, expert_destination_ranks):
    ring = 2 * (tensor_parallel - 1) / tensor_parallel * hidden_size * activation_bytes_per_element
    t_a = attention_tensor_parallel
    all_to_all = moe_layers * expert_destination_ranks * hidden_size * (MOE_DISPATCH_BYTES + MOE_COMBINE_BYTES) \
        / (tensor_parallel * ep_link_bytes_per_s)
    gathered = (layers - moe_layers) * ring
    within = layers * 2 * (t_a - 1) / t_a * hidden_size * activation_bytes_per_element * t_a / tensor_parallel
    spread = pipeline_stage_layers / layers * (all_to_all + (gathered + within) / tp_link_bytes_per_s)
    return where(data_parallel_attention > 0, spread, 0.0)
