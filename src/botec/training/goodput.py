"""Goodput: what failures, restarts and checkpoint pauses do to a long run's wall time and cost.

The model (checkpoint/restart under exponential failures, Daly 2006's "complete" model):

    symbol  quantity                              meaning
    N       accelerators                          accelerators the job holds
    λ       failure_rate_per_accelerator_hour     job-interrupting failures per accelerator-hour
    Λ       job_interruptions_per_hour            N·λ: one failure anywhere stops the whole synchronous job
    M       3,600 s / Λ                           the job's mean time between failures
    T       run_seconds                           training time with neither pauses nor failures
    τ       checkpoint_interval_seconds           training time between checkpoint saves (stated)
    δ       checkpoint_pause_seconds_each         time a save stops training (sync: the write to storage;
                                                  async: the copy to host memory)
    L       checkpoint_write_behind_seconds       time after the pause until the save is safe in storage
                                                  (async: the background write; sync: 0)
    R       restart_seconds                       detection, rescheduling, reload and warm-up after a failure

Training runs in T/τ segments of τ + δ. A failure (Poisson, rate 1/M, also during restarts) rolls the job
back to the last checkpoint that is safe in storage, and it restarts after R. Between the moments two
successive checkpoints become safe lie τ + δ; once a failure has struck, reaching the next safe checkpoint
takes τ + δ + L from the rolled-back position. The expected time of one segment is then

    E[segment] = M·e^{R/M}·e^{L/M}·(e^{(τ+δ)/M} − 1)

(with L = 0 this is the complete model of Daly 2006, "A higher order estimate of the optimum checkpoint
interval for restart dumps", FGCS 22(3)), and the expected wall time of the run

    W = T/τ · M·e^{(R+L)/M}·(e^{(τ+δ)/M} − 1)         → T·(τ+δ)/τ when λ = 0.

Expected interruptions: W/M (a Poisson count over the wall time: Wald's identity). Goodput: T/W. Lost per
interruption, to first order in 1/M: R + L + (τ + δ)/2 (half a segment of rework on average).

The interval that minimizes W: Young 1974 ("A first order approximation to the optimum checkpoint interval",
CACM 17(9)) τ_Y = √(2δM); Daly 2006's higher-order estimate τ_D = √(2δM)·[1 + ⅓·√(δ/2M) + (δ/2M)/9] − δ for
δ < 2M, else M. botec computes Daly's (τ_D; closer to the true minimum of W when δ/M is not small; neither is
longer than the run, and with asynchronous saves τ_D is not shorter than L) and reports as the optimal interval the
better of τ_D and the stated τ, by W: the saving W(τ) − min(W(τ), W(τ_D)) is never negative, and where the stated
interval is already at least as good (a run shorter than its interval, say) it is kept and saves 0. Worked: δ = 60 s,
M = 24 h → τ_Y = √(2 · 60 · 86,400) = 3,220 s, τ_D = 3,180 s.

Asynchronous saves (PyTorch DCP async_save, Megatron --async-save): training stops only while each
accelerator copies its shard to host memory over its host link (checkpoint bytes / N / host-link bandwidth:
Megatron's fully parallel save and DCP's deduplicated plans spread one logical checkpoint over all ranks), then
the write to storage runs in the background. A new save waits for the write still in flight, so a write
longer than the interval adds its excess to the pause. The host holds one shard per accelerator of the node.

The default failure rate comes from fleet statistics over two clusters, not from a training run (Kokolis et al.
2024, arXiv:2410.21680: Meta's RSC-1 and RSC-2, 11 months of A100 jobs): r_f = 6.50 and 2.34 failures per 1,000
node-days, λ = r_f / (8 GPUs × 24 h) = 3.4e-5 and 1.2e-5 per GPU-hour, pooled by fleet size ≈ 2.7e-5; the range
reaches 1.2e-4, the rate RSC-1's 1,024-GPU jobs met (botec.contract.defaults.FLEET_FAILURE_RATE_SOURCE).

Not modelled: failures that are not memoryless (infant mortality, a bad node failing again), in-memory or
peer-to-peer checkpoints that restore without storage, the background write slowing the training it overlaps,
and a checkpoint's read time apart from the restart time R (state it inside R).
"""

from botec.graph import Formulas, exp, exprel, maximum, minimum, where
from botec.training.compute.achieved import accelerator_hours

formulas = Formulas(account="compute")

SECONDS_PER_HOUR = 3600

formulas.input("failure_rate_per_accelerator_hour", unit="failures/accelerator-hour",
               meaning="job-interrupting failures per accelerator-hour λ (hardware, software, network)")
formulas.input("restart_seconds", unit="s",
               meaning="time from a failure to training again: detection, rescheduling, reload, warm-up")
formulas.input("checkpoint_mode_async", unit="1", account="storage",
               meaning="1 when saves are asynchronous (copy to host memory, write in the background), 0 when "
                       "training waits for the write")


# --- the checkpoint pause, synchronous or asynchronous ----------------------------------------------

@formulas.formula(unit="B", meaning="one accelerator's share of a checkpoint: what it copies and writes per save",
                  expression="checkpoint_bytes / accelerators", account="storage", detail=True,
                  source="every rank saves its shard; replicated state is spread over the data-parallel ranks "
                         "(Megatron-LM fully parallel save, PyTorch DCP deduplicated save plans)")
def checkpoint_bytes_per_accelerator(checkpoint_bytes, accelerators):
    return checkpoint_bytes / accelerators


@formulas.formula(unit="s", meaning="asynchronous save: time to copy each accelerator's shard to host memory",
                  expression="checkpoint_bytes_per_accelerator / host_link_bytes_per_s", account="storage",
                  zero_when="checkpoint_mode_async == 0",
                  source="PyTorch DCP async_save and Megatron --async-save stage the state in host memory, then "
                         "write it from a background thread or process")
def checkpoint_snapshot_seconds(checkpoint_bytes_per_accelerator, host_link_bytes_per_s):
    """The device-to-host copy at the host link's bandwidth: all accelerators copy at once over their own links."""
    return checkpoint_bytes_per_accelerator / host_link_bytes_per_s


@formulas.formula(unit="s", meaning="time each checkpoint save stops training",
                  expression="checkpoint_snapshot_seconds + (max(0, checkpoint_write_seconds − "
                             "checkpoint_interval_seconds) if checkpoint_mode_async else checkpoint_write_seconds)",
                  account="storage",
                  source="sync: the write to storage (lesson 000: 14 s); async: the copy to host memory, plus "
                         "the wait for a background write longer than the interval")
def checkpoint_pause_seconds_each(checkpoint_snapshot_seconds, checkpoint_mode_async, checkpoint_write_seconds,
                                  checkpoint_interval_seconds):
    """δ = t_write (sync); δ = t_snapshot + max(0, t_write − τ) (async: a save waits for the one in flight)."""
    waited = where(checkpoint_mode_async, maximum(0.0, checkpoint_write_seconds - checkpoint_interval_seconds),
                   checkpoint_write_seconds)
    return checkpoint_snapshot_seconds + waited


@formulas.formula(unit="s", meaning="time after a save's pause until it is safe in storage (the background write)",
                  expression="checkpoint_write_seconds", account="storage", detail=True,
                  zero_when="checkpoint_mode_async == 0",
                  source="a failure during the background write rolls back to the previous checkpoint")
def checkpoint_write_behind_seconds(checkpoint_write_seconds):
    return checkpoint_write_seconds


@formulas.formula(unit="B", meaning="asynchronous save: host memory one node needs for its accelerators' shards",
                  expression="checkpoint_bytes_per_accelerator × accelerators_sharing_host", account="storage",
                  zero_when="checkpoint_mode_async == 0",
                  source="one staged copy per accelerator of the node (a new save waits for the write in flight)")
def checkpoint_host_memory_bytes_per_node(checkpoint_bytes_per_accelerator, accelerators_sharing_host):
    return checkpoint_bytes_per_accelerator * accelerators_sharing_host


@formulas.formula(unit="1", meaning="the staged checkpoint shards over a node's host memory (a ratio: above 1 they "
                                     "do not fit)",
                  expression="checkpoint_host_memory_bytes_per_node / host_memory_bytes", account="storage",
                  detail=True)
def checkpoint_host_memory_share(checkpoint_host_memory_bytes_per_node, host_memory_bytes):
    return checkpoint_host_memory_bytes_per_node / host_memory_bytes


# --- failures, expected wall time and goodput ------------------------------------------------------

@formulas.formula(unit="interruptions/h", meaning="job-stopping failures per hour Λ: any accelerator's stops all",
                  expression="accelerators × failure_rate_per_accelerator_hour",
                  source="Llama 3 405B: 419 unexpected interruptions in 54 days on 16,384 H100 (Llama Team 2024)")
def job_interruptions_per_hour(accelerators, failure_rate_per_accelerator_hour):
    """Λ = N·λ: a synchronous job stops when any of its accelerators (or their hosts, links) fails."""
    return accelerators * failure_rate_per_accelerator_hour


@formulas.formula(unit="s", meaning="expected wall time of the run, checkpoint pauses, failures and restarts counted",
                  expression="T/τ × M·e^((R + L)/M)·(e^((τ + δ)/M) − 1), M = 3,600 s / job_interruptions_per_hour "
                             "(T·(τ + δ)/τ without failures)", prose=True,
                  source="Daly 2006, FGCS 22(3): the complete model; with the write-behind L of asynchronous saves",
                  symbols={"T": "run_seconds", "τ": "checkpoint_interval_seconds",
                           "δ": "checkpoint_pause_seconds_each", "R": "restart_seconds",
                           "L": "checkpoint_write_behind_seconds"})
def expected_wall_seconds(run_seconds, checkpoint_interval_seconds, checkpoint_pause_seconds_each, restart_seconds,
                          checkpoint_write_behind_seconds, job_interruptions_per_hour):
    """W = T/τ · e^{(R+L)Λ} · (τ+δ) · exprel((τ+δ)Λ), Λ per second: the same formula, finite at Λ = 0."""
    rate = job_interruptions_per_hour / SECONDS_PER_HOUR
    segment = checkpoint_interval_seconds + checkpoint_pause_seconds_each
    return (run_seconds / checkpoint_interval_seconds * exp((restart_seconds + checkpoint_write_behind_seconds) * rate)
            * segment * exprel(segment * rate))


@formulas.formula(unit="interruptions", meaning="expected failures over the run",
                  expression="expected_wall_seconds × job_interruptions_per_hour / 3,600",
                  source="a Poisson count over the expected wall time (Wald's identity)")
def expected_interruptions(expected_wall_seconds, job_interruptions_per_hour):
    return expected_wall_seconds * job_interruptions_per_hour / SECONDS_PER_HOUR


@formulas.formula(unit="s", meaning="expected wall time lost to failures: restarts and work redone",
                  expression="expected_wall_seconds − run_seconds × (1 + checkpoint_pause_seconds_each / "
                             "checkpoint_interval_seconds)", detail=True)
def failure_lost_seconds(expected_wall_seconds, run_seconds, checkpoint_pause_seconds_each,
                         checkpoint_interval_seconds):
    return expected_wall_seconds - run_seconds * (1 + checkpoint_pause_seconds_each / checkpoint_interval_seconds)


@formulas.formula(unit="s", meaning="expected wall time each failure costs: restart, write-behind and work redone",
                  expression="failure_lost_seconds / expected_interruptions (R + L + (τ + δ)/2 as failures "
                             "become rare)", prose=True,
                  source="first order: a failure strikes on average half-way through a segment of τ + δ",
                  symbols={"R": "restart_seconds", "L": "checkpoint_write_behind_seconds",
                           "τ": "checkpoint_interval_seconds", "δ": "checkpoint_pause_seconds_each"})
def lost_seconds_per_interruption(failure_lost_seconds, expected_interruptions, restart_seconds,
                                  checkpoint_write_behind_seconds, checkpoint_interval_seconds,
                                  checkpoint_pause_seconds_each):
    rare = restart_seconds + checkpoint_write_behind_seconds + (checkpoint_interval_seconds
                                                                + checkpoint_pause_seconds_each) / 2
    some = expected_interruptions > 0
    return where(some, failure_lost_seconds / where(some, expected_interruptions, 1.0), rare)


@formulas.formula(unit="fraction", meaning="goodput: useful training time over expected wall time",
                  expression="run_seconds / expected_wall_seconds",
                  source="Llama 3 405B: over 90 % effective training time at 16,384 GPUs (Llama Team 2024)")
def goodput(run_seconds, expected_wall_seconds):
    return run_seconds / expected_wall_seconds


@formulas.formula(unit="accelerator-hours", meaning="accelerator-hours the run is expected to hold, failures counted",
                  expression="accelerators × expected_wall_seconds / 3600")
def expected_accelerator_hours(accelerators, expected_wall_seconds):
    return accelerator_hours(accelerators, expected_wall_seconds)


# --- the checkpoint interval that minimizes the expected wall time -----------------------------------

@formulas.formula(unit="s", meaning="Young's first-order optimal checkpoint interval √(2δM), at most the run",
                  expression="min(run_seconds, (2 × checkpoint_pause_seconds_each × 3600 / "
                             "job_interruptions_per_hour) ** 0.5)", detail=True,
                  source="Young 1974, CACM 17(9)")
def young_checkpoint_interval_seconds(checkpoint_pause_seconds_each, job_interruptions_per_hour, run_seconds):
    rate = job_interruptions_per_hour / SECONDS_PER_HOUR
    failing = rate > 0
    interval = (2 * checkpoint_pause_seconds_each / where(failing, rate, 1.0)) ** 0.5
    return minimum(run_seconds, where(failing, interval, run_seconds))


@formulas.formula(unit="s", meaning="Daly's estimate of the checkpoint interval that minimizes the expected wall "
                                    "time, at most the run", detail=True,
                  expression="min(run_seconds, max(L, √(2δM)·[1 + ⅓·√(δ/2M) + (δ/2M)/9] − δ if δ < 2M else M)), "
                             "δ = checkpoint_pause_seconds_each, L = checkpoint_write_behind_seconds, "
                             "M = 3,600 s / job_interruptions_per_hour",
                  prose=True, source="Daly 2006, FGCS 22(3): the higher-order estimate")
def daly_checkpoint_interval_seconds(checkpoint_pause_seconds_each, job_interruptions_per_hour, run_seconds,
                                     checkpoint_write_behind_seconds=0.0):
    """With y = δ/2M: τ_D = δ·(y^{-1/2} − 2/3 + y^{1/2}/9) for y < 1 (the bracket multiplied out), else M = δ/2y.

    Asynchronous saves: not below the background write L, since a shorter interval only makes each save wait for
    the one in flight (the segment stays L + δ long and holds less training)."""
    rate = job_interruptions_per_hour / SECONDS_PER_HOUR
    pause = checkpoint_pause_seconds_each
    y = pause * rate / 2
    failing = y > 0
    safe = where(failing, y, 1.0)
    interval = where(safe < 1, pause * (safe ** -0.5 - 2 / 3 + safe ** 0.5 / 9), pause / (2 * safe))
    return minimum(run_seconds, where(failing, maximum(interval, checkpoint_write_behind_seconds), run_seconds))


@formulas.formula(unit="s", meaning="expected wall time if saves came at Daly's interval", prose=True,
                  expression="expected_wall_seconds with checkpoint_interval_seconds = "
                             "daly_checkpoint_interval_seconds", detail=True)
def daly_interval_wall_seconds(run_seconds, daly_checkpoint_interval_seconds, checkpoint_pause_seconds_each,
                               restart_seconds, checkpoint_write_behind_seconds, job_interruptions_per_hour):
    return expected_wall_seconds(run_seconds, daly_checkpoint_interval_seconds, checkpoint_pause_seconds_each,
                                 restart_seconds, checkpoint_write_behind_seconds, job_interruptions_per_hour)


@formulas.formula(unit="s", meaning="checkpoint interval that minimizes the expected wall time: Daly's, unless the "
                                    "stated one is at least as good (then the stated one, kept)",
                  expression="daly_checkpoint_interval_seconds if daly_interval_wall_seconds < expected_wall_seconds "
                             "else checkpoint_interval_seconds",
                  source="Daly 2006's estimate, checked against the stated interval through the same expected wall "
                         "time: a run shorter than its interval saves once at most, which Daly's (capped at the run) "
                         "cannot beat")
def optimal_checkpoint_interval_seconds(daly_checkpoint_interval_seconds, daly_interval_wall_seconds,
                                        checkpoint_interval_seconds, expected_wall_seconds):
    return where(daly_interval_wall_seconds < expected_wall_seconds, daly_checkpoint_interval_seconds,
                 checkpoint_interval_seconds)


@formulas.formula(unit="s", meaning="expected wall time if saves came at the optimal interval",
                  expression="min(expected_wall_seconds, daly_interval_wall_seconds)", detail=True)
def optimal_interval_wall_seconds(expected_wall_seconds, daly_interval_wall_seconds):
    return minimum(expected_wall_seconds, daly_interval_wall_seconds)


@formulas.formula(unit="s", meaning="wall time the optimal checkpoint interval would save over the stated one (0: "
                                    "the stated one is at least as good)",
                  expression="expected_wall_seconds − optimal_interval_wall_seconds")
def optimal_interval_saving_seconds(expected_wall_seconds, optimal_interval_wall_seconds):
    """W(τ) − min(W(τ), W(τ_D)) ≥ 0: never negative."""
    return expected_wall_seconds - optimal_interval_wall_seconds


@formulas.formula(unit="accelerator-hours", meaning="accelerator-hours the optimal checkpoint interval would save",
                  expression="accelerators × optimal_interval_saving_seconds / 3600", detail=True)
def optimal_interval_saving_accelerator_hours(accelerators, optimal_interval_saving_seconds):
    return accelerator_hours(accelerators, optimal_interval_saving_seconds)
