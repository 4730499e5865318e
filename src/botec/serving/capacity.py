"""Capacity for a traffic target: replicas, accelerators, utilization.

Replicas must carry the traffic (λ / requests per replica) and keep the time to first token
within its target under load. With prefill taking a share ρ = λ_r · TTFT of a replica's time,
a waiting prompt sees about TTFT / (1 − ρ) (an M/M/1-style approximation: queueing, not
modelled by the roofline, grows as the replica fills), so each replica may take at most
λ_r = (1 − TTFT / target) / TTFT requests per second.
"""

from botec.graph import Formulas, ceil, maximum, where

formulas = Formulas(account="capacity")

formulas.input("requests_per_s", unit="requests/s", meaning="target traffic (mean arrivals)")


@formulas.formula(unit="replicas", meaning="replicas the traffic needs for throughput",
                  expression="⌈requests_per_s / requests_per_s_per_replica⌉")
def replicas_for_throughput(requests_per_s, requests_per_s_per_replica):
    return ceil(requests_per_s / requests_per_s_per_replica)


@formulas.formula(unit="replicas", meaning="replicas that keep the loaded TTFT within its target",
                  expression="⌈requests_per_s × time_to_first_token_seconds / (1 − time_to_first_token_seconds"
                             " / time_to_first_token_target_seconds)⌉ (when the unloaded TTFT meets the target)",
                  prose=True)
def replicas_for_time_to_first_token(requests_per_s, time_to_first_token_seconds, time_to_first_token_target_seconds):
    headroom = 1 - time_to_first_token_seconds / time_to_first_token_target_seconds
    return where(headroom > 0, ceil(requests_per_s * time_to_first_token_seconds / maximum(headroom, 1e-9)), 1.0)


@formulas.formula(unit="replicas", meaning="replicas to deploy",
                  expression="max(replicas_for_throughput, replicas_for_time_to_first_token, 1)",
                  choice=("ttft_target", "stated"))
def replicas(replicas_for_throughput, replicas_for_time_to_first_token):
    return maximum(maximum(replicas_for_throughput, replicas_for_time_to_first_token), 1)


@formulas.formula(unit="replicas", meaning="replicas to deploy", expression="max(replicas_for_throughput, 1)",
                  choice=("ttft_target", "none"))
def replicas(replicas_for_throughput):  # noqa: F811
    """No TTFT target: as many as the traffic needs."""
    return maximum(replicas_for_throughput, 1)


@formulas.formula(unit="accelerators", meaning="accelerators the serving fleet needs",
                  expression="replicas × replica_accelerators")
def serving_accelerators(replicas, replica_accelerators):
    return replicas * replica_accelerators


@formulas.formula(unit="requests/s", meaning="traffic the fleet can carry at full load",
                  expression="replicas × requests_per_s_per_replica")
def served_requests_per_s(replicas, requests_per_s_per_replica):
    return replicas * requests_per_s_per_replica


@formulas.formula(unit="fraction", meaning="share of the fleet's capacity the traffic uses",
                  expression="requests_per_s / served_requests_per_s")
def serving_utilization(requests_per_s, served_requests_per_s):
    return requests_per_s / served_requests_per_s
