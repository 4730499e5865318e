"""Capacity for a traffic target: replicas, accelerators, utilization.

The fleet has the fewest replicas that carry the traffic with every latency target met at its
percentile, each loaded to at most the utilization cap (:mod:`botec.serving.latency` finds the
largest load per replica that meets the targets). A target no load can meet (its floor, on an idle
replica, is above it) leaves no such fleet: the replicas are then counted for throughput alone and
the estimate says the target is unreachable instead of pricing a fleet that would miss it.
"""

from botec.graph import Formulas, ceil, maximum, where

formulas = Formulas(account="capacity")

formulas.input("requests_per_s", unit="requests/s", meaning="target traffic (mean arrivals)")


@formulas.formula(unit="1", meaning="1 when every stated latency target can be met at some load, else 0",
                  expression="1 if requests_per_s_per_replica > 0 else 0")
def targets_reachable(requests_per_s_per_replica):
    return where(requests_per_s_per_replica > 0, 1.0, 0.0)


@formulas.formula(unit="replicas", meaning="replicas to deploy: the fewest that carry the traffic within the targets",
                  expression="⌈requests_per_s / requests_per_s_per_replica⌉ (unreachable targets: ⌈requests_per_s"
                             " / (utilization_cap × offline_requests_per_s_per_replica)⌉, throughput alone)",
                  prose=True)
def replicas(requests_per_s, requests_per_s_per_replica, utilization_cap, offline_requests_per_s_per_replica):
    throughput_only = ceil(requests_per_s / (utilization_cap * offline_requests_per_s_per_replica))
    within = ceil(requests_per_s / maximum(requests_per_s_per_replica, 1e-300))
    return maximum(where(requests_per_s_per_replica > 0, within, throughput_only), 1)


@formulas.formula(unit="accelerators", meaning="accelerators the serving fleet needs",
                  expression="replicas × replica_accelerators")
def serving_accelerators(replicas, replica_accelerators):
    return replicas * replica_accelerators


@formulas.formula(unit="requests/s", meaning="traffic the fleet can carry at saturation",
                  expression="replicas × offline_requests_per_s_per_replica")
def served_requests_per_s(replicas, offline_requests_per_s_per_replica):
    return replicas * offline_requests_per_s_per_replica


@formulas.formula(unit="fraction", meaning="share of the fleet's capacity the traffic uses",
                  expression="requests_per_s / served_requests_per_s")
def serving_utilization(requests_per_s, served_requests_per_s):
    return requests_per_s / served_requests_per_s
