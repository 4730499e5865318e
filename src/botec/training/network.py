"""Network: bytes per synchronization, the average rate over a step, the bandwidth floor.

Source: lesson 000 ("Network: count traffic at each synchronization boundary"); the ring
all-reduce sends 2(N−1)/N · M per participant (Patarasuk & Yuan 2009; Thakur et al. 2005).
ZeRO-1/2 replace the all-reduce by a reduce-scatter plus an all-gather of the same total
size; ZeRO-3 reduce-scatters the gradients and all-gathers the weights before the forward and
again before the backward pass of every micro-batch: 3(N−1)/N · M, 1.5× plain data
parallelism (Rajbhandari et al. 2020, section 7).
"""

from botec.quantities import declare_input, formula, where

declare_input("interconnect_bytes_per_s", account="network", unit="B/s",
              meaning="usable bandwidth per accelerator per direction during the collective")


@formula(account="network", unit="B", meaning="one full gradient message",
         expression="parameters × gradient_bytes_per_parameter",
         source="lesson 000: 10⁹ × 2 B = 2 GB")
def gradient_bytes(parameters, gradient_bytes_per_parameter):
    """M = P × bytes per gradient element."""
    return parameters * gradient_bytes_per_parameter


@formula(account="network", unit="1", meaning="full gradient messages each accelerator sends per step, "
         "in units of (N − 1)/N · M",
         expression="1 if zero_stage ≥ 3 else 2",
         source="ring all-reduce = reduce-scatter + all-gather: 2; ZeRO-1/2 the same; ZeRO-3 reduce-scatter only: 1")
def gradient_sync_passes(zero_stage):
    """2 for an all-reduce (or ZeRO-1/2's reduce-scatter of gradients + all-gather of updated weights);
    1 for ZeRO-3, whose weights are gathered by the next forward pass instead."""
    return where(zero_stage >= 3, 1.0, 2.0)


@formula(account="network", unit="B", meaning="bytes each accelerator sends per step to synchronize gradients (ring)",
         expression="gradient_sync_passes × (data_parallel_degree − 1) / data_parallel_degree × gradient_bytes",
         source="lesson 000: 2(4 − 1)/4 × 2 GB = 3 GB")
def ring_bytes_sent_per_step(gradient_sync_passes, data_parallel_degree, gradient_bytes):
    """Ring all-reduce: 2(N−1)/N · M sent (and as much received) per participant per step."""
    return gradient_sync_passes * (data_parallel_degree - 1) / data_parallel_degree * gradient_bytes


@formula(account="network", unit="B",
         meaning="bytes each accelerator sends per step to all-gather sharded weights (ZeRO-3 only)",
         expression="2 × gradient_accumulation_steps × (data_parallel_degree − 1) / data_parallel_degree"
                    " × parameters × weight_bytes_per_parameter if zero_stage ≥ 3 else 0",
         source="Rajbhandari et al. 2020: one all-gather before the forward and one before the backward")
def parameter_gather_bytes_sent_per_step(zero_stage, gradient_accumulation_steps, data_parallel_degree,
                                         parameters, weight_bytes_per_parameter):
    gathered = (2 * gradient_accumulation_steps * (data_parallel_degree - 1) / data_parallel_degree
                * parameters * weight_bytes_per_parameter)
    return where(zero_stage >= 3, gathered, 0.0)


@formula(account="network", unit="B", meaning="all collective bytes each accelerator sends per step",
         expression="ring_bytes_sent_per_step + parameter_gather_bytes_sent_per_step")
def collective_bytes_sent_per_step(ring_bytes_sent_per_step, parameter_gather_bytes_sent_per_step):
    return ring_bytes_sent_per_step + parameter_gather_bytes_sent_per_step


@formula(account="network", unit="B/s", meaning="average outgoing collective rate per accelerator over a step",
         expression="collective_bytes_sent_per_step / step_seconds",
         source="lesson 000: 3 GB / 0.51 s ≈ 5.9 GB/s")
def average_collective_bytes_per_s(collective_bytes_sent_per_step, step_seconds):
    """Step-averaged rate; bursts during the collective run far above it."""
    return collective_bytes_sent_per_step / step_seconds


@formula(account="network", unit="s", meaning="bandwidth-only lower bound on the collective time per step",
         expression="collective_bytes_sent_per_step / interconnect_bytes_per_s",
         source="lesson 000: 3 GB / 25 GB/s = 0.12 s")
def collective_floor_seconds(collective_bytes_sent_per_step, interconnect_bytes_per_s):
    """Ignores latency, contention and topology: the real collective is slower."""
    return collective_bytes_sent_per_step / interconnect_bytes_per_s


@formula(account="network", unit="fraction", meaning="the collective's bandwidth floor as a share of the step",
         expression="collective_floor_seconds / step_seconds",
         source="lesson 000: 0.12 s beside a 0.51 s step")
def collective_floor_share(collective_floor_seconds, step_seconds):
    """Above ~10 % the step estimate holds only if communication overlaps the backward pass."""
    return collective_floor_seconds / step_seconds
