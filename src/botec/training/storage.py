"""Storage: retained bytes, and bytes per second in (input) and out (checkpoints).

Source: lesson 000 ("Storage: distinguish retained bytes from bytes per second").
"""

from botec.graph import Formulas, floor

formulas = Formulas(account="storage")

formulas.input("storage_write_bytes_per_s", unit="B/s",
               meaning="aggregate write bandwidth genuinely available for checkpoints")
formulas.input("checkpoint_interval_seconds", unit="s",
               meaning="training time between checkpoint saves")
formulas.input("retained_checkpoints", unit="checkpoints",
               meaning="checkpoints kept at once (one logical checkpoint per save)")
formulas.input("dataset_copies", unit="copies",
               meaning="copies of the prepared dataset retained (snapshot, staging, ...)")
formulas.input("export_bytes_per_parameter", unit="B/parameter",
               meaning="bytes per parameter of the exported model (2 for BF16)")


@formulas.formula(unit="B", meaning="tokenized training data read over the run",
                  expression="tokens × token_bytes",
                  source="lesson 000: 10⁹ × 4 B = 4 GB")
def dataset_bytes(tokens, token_bytes):
    """Before metadata, indexes or compression."""
    return tokens * token_bytes


@formulas.formula(unit="B/s", meaning="average input payload rate of the whole job",
                  expression="dataset_bytes / run_seconds",
                  source="lesson 000: 4 GB / 8.7 h ≈ 128 kB/s")
def input_bytes_per_s(dataset_bytes, run_seconds):
    """A low average does not prove the input pipeline healthy (small objects, decoding, prefetch)."""
    return dataset_bytes / run_seconds


@formulas.formula(unit="B/parameter", meaning="checkpoint bytes per parameter (no gradients)",
                  expression="weight_bytes_per_parameter + master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter",
                  source="lesson 000: 2 + 4 + 4 + 4 = 14 for Adam in mixed precision", detail=True)
def checkpoint_bytes_per_parameter(weight_bytes_per_parameter, master_weight_bytes_per_parameter,
                                   optimizer_state_bytes_per_parameter):
    """Gradients are needed during a step but not to resume: they are not saved."""
    return weight_bytes_per_parameter + master_weight_bytes_per_parameter + optimizer_state_bytes_per_parameter


@formulas.formula(unit="B", meaning="one logical checkpoint",
                  expression="trainable_parameters × checkpoint_bytes_per_parameter",
                  source="lesson 000: 10⁹ × 14 B = 14 GB; a LoRA checkpoint holds the adapters and their optimizer "
                         "state, not the frozen base (already on disk)")
def checkpoint_bytes(trainable_parameters, checkpoint_bytes_per_parameter):
    return trainable_parameters * checkpoint_bytes_per_parameter


@formulas.formula(unit="B", meaning="checkpoints retained at once",
                  expression="retained_checkpoints × checkpoint_bytes",
                  source="lesson 000: 3 × 14 GB = 42 GB")
def retained_checkpoint_bytes(retained_checkpoints, checkpoint_bytes):
    return retained_checkpoints * checkpoint_bytes


@formulas.formula(unit="B", meaning="the exported model",
                  expression="parameters × export_bytes_per_parameter",
                  source="lesson 000: a 2 GB BF16 export")
def export_bytes(parameters, export_bytes_per_parameter):
    return parameters * export_bytes_per_parameter


@formulas.formula(unit="B", meaning="retained footprint: checkpoints, data copies and the export",
                  expression="retained_checkpoint_bytes + dataset_copies × dataset_bytes + export_bytes",
                  source="lesson 000: 42 + 2 × 4 + 2 ≈ 52 GB, before logs, replication and backups")
def retained_storage_bytes(retained_checkpoint_bytes, dataset_copies, dataset_bytes, export_bytes):
    return retained_checkpoint_bytes + dataset_copies * dataset_bytes + export_bytes


@formulas.formula(unit="s", meaning="bandwidth-only time to write one checkpoint",
                  expression="checkpoint_bytes / storage_write_bytes_per_s",
                  source="lesson 000: 14 GB / 1 GB/s = 14 s")
def checkpoint_write_seconds(checkpoint_bytes, storage_write_bytes_per_s):
    """A minimum: serialization and metadata add to it."""
    return checkpoint_bytes / storage_write_bytes_per_s


@formulas.formula(unit="fraction", meaning="the share of wall time saves stop training, failures aside: a pause per "
                                           "interval of training",
                  expression="checkpoint_pause_seconds_each / (checkpoint_interval_seconds + "
                             "checkpoint_pause_seconds_each)",
                  source="lesson 000: 14 s per hour ≈ 0.4 % (synchronous saves); of the wall time, so that it stays "
                         "a share when a save outlasts its interval (was pause / interval: 2.8 at 14 s per 5 s)")
def checkpoint_pause_share(checkpoint_pause_seconds_each, checkpoint_interval_seconds):
    """δ / (τ + δ), 1 − goodput without failures; the pause is the write (sync) or the copy to host memory (async):
    :mod:`botec.training.goodput`."""
    return checkpoint_pause_seconds_each / (checkpoint_interval_seconds + checkpoint_pause_seconds_each)


@formulas.formula(unit="checkpoints", meaning="checkpoints saved during the run",
                  expression="⌊run_seconds / checkpoint_interval_seconds⌋")
def checkpoints_per_run(run_seconds, checkpoint_interval_seconds):
    return floor(run_seconds / checkpoint_interval_seconds)


@formulas.formula(unit="s", meaning="training time lost to checkpoint pauses over the run",
                  expression="checkpoints_per_run × checkpoint_pause_seconds_each")
def checkpoint_pause_seconds(checkpoints_per_run, checkpoint_pause_seconds_each):
    return checkpoints_per_run * checkpoint_pause_seconds_each
