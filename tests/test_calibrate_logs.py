"""`botec calibrate` with a Megatron-LM or torchtitan training log as the measurement: parsing (colours,
thousands separators, versions with and without optional fields, warm-up and outliers), detection, the
one-line errors, and the comparison printed end to end. The logs in tests/data are synthetic, written in
the tools' formats; every expected number below is worked out by hand from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botec.errors import ContractError
from botec.measure import logs
from botec.units import format_quantity

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
EXAMPLES = REPO / "examples"
MEGATRON = DATA / "megatron-llama3.1-70b.log"       # core >= 0.16: timestamps, TFLOP/s, memory, timer blocks
LEGACY = DATA / "megatron-v2-legacy.log"            # v2.x: no timestamp, no TFLOP/s, one-line timers, rank prefix
TITAN = DATA / "torchtitan-llama2-7b.log"           # v0.1-v0.2: colours, grad_norm, tflops, config lines
TITAN_2024 = DATA / "torchtitan-2024.log"           # 2024: wps, no tflops, no grad_norm
MiB, GiB = 2**20, 2**30


# --------------------------------------------------------------------------------------------- parsing

def test_megatron_core_log():
    log = logs.read(MEGATRON)
    assert log.format == "megatron" and log.tool == "Megatron-LM"
    assert log.logged == 7
    # iterations 1 and 10 are warm-up; 40 (45.0 s) is over 2 × 20.1 s, the median of 20.0, 20.4, 19.8, 20.2
    assert log.used == (20, 30, 50, 60)
    assert log.dropped == ((1, "warm-up"), (10, "warm-up"), (40, "slower than 2× the median of the rest"))
    assert log.step_seconds.median == pytest.approx(20.1)          # (20.0 + 20.2) / 2
    assert (log.step_seconds.low, log.step_seconds.high, log.step_seconds.p90) == pytest.approx((19.8, 20.4, 20.4))
    assert log.flops_per_s_per_device.median == pytest.approx(366.0e12)   # (364.2 + 367.8) / 2 TFLOP/s
    assert log.tokens_per_s_per_device is None and log.mfu is None
    # the largest report of four ranks, Megatron's "MB" being MiB
    assert log.peak_allocated_bytes == 30512.25 * MiB and log.peak_reserved_bytes == 33792.0 * MiB
    assert log.memory_ranks == 4
    # timers of the kept iterations, the max across ranks: medians of (19580.40, 19950.30, 19360.90, 19740.60)
    # and (410.80, 415.20, 405.50, 412.30) ms; the setup timers before iteration 1 belong to no step
    assert log.phases == pytest.approx({"forward-backward": 19.6605, "optimizer": 0.41155})
    assert log.stated == {"global_batch_size": 2048, "micro_batch_size": 1, "pipeline_parallel": 4,
                          "sequence_length": 8192, "tensor_parallel": 8, "accelerators": 1024}
    assert log.date == "2025-03-01"


def test_megatron_legacy_log_without_timestamp_or_throughput():
    log = logs.read(LEGACY)
    assert log.format == "megatron" and log.logged == 5
    assert log.used == (15, 20, 25)
    assert log.step_seconds.median == pytest.approx(1.2)
    assert log.flops_per_s_per_device is None and log.date is None
    assert log.phases == pytest.approx({"forward-compute": 0.3801, "backward-compute": 0.7604,
                                        "backward-params-all-reduce": 0.0295, "optimizer": 0.0302})
    assert log.peak_allocated_bytes == 3400.25 * MiB and log.peak_reserved_bytes == 3800.0 * MiB
    assert log.stated == {"global_batch_size": 64}


def test_torchtitan_log_with_colours_and_config():
    log = logs.read(TITAN)
    assert log.format == "torchtitan" and log.tool == "torchtitan"
    assert log.logged == 7                                   # the "validate step: 50" line is not a step
    assert log.used == (20, 30, 40, 50)
    assert log.dropped == ((1, "warm-up"), (10, "warm-up"), (60, "slower than 2× the median of the rest"))
    assert log.step_seconds is None
    assert log.tokens_per_s_per_device.median == 2404            # (2,398 + 2,410) / 2
    assert log.flops_per_s_per_device.median == pytest.approx(110.785e12)   # (110.51 + 111.06) / 2
    assert log.mfu == pytest.approx(0.3551)                      # (35.42 + 35.60) / 2 %
    assert log.peak_reserved_bytes == pytest.approx(22.44 * GiB)  # the largest of the used steps
    assert log.peak_allocated_bytes is None and log.memory_ranks == 0
    assert log.stated == {"accelerators": 8, "local_batch_size": 4, "global_batch_size": 64,
                          "gradient_accumulation_steps": 2, "sequence_length": 4096}
    assert log.device_name == "NVIDIA A100-SXM4-80GB" and log.date == "2025-06-20"


def test_torchtitan_2024_log_with_wps_and_no_tflops():
    log = logs.read(TITAN_2024)
    assert log.used == (20, 30)
    assert log.tokens_per_s_per_device.median == 3940            # (3,950 + 3,930) / 2, from "wps"
    assert log.flops_per_s_per_device is None
    assert log.mfu == pytest.approx(0.3586)
    assert log.peak_reserved_bytes == pytest.approx(41.22 * GiB)
    assert log.stated == {} and log.device_name == "NVIDIA H100 80GB HBM3 (0)"


def test_torchtitan_newest_lines():
    """main (2026): 'mfu: N/A' when quantized, thousands separators in tflops, the token-based config line and the
    device mesh line with every degree."""
    text = "\n".join([
        "[rank0]:[titan] 2026-04-01 08:00:00,000 - root - INFO - Building device mesh with parallelism: pp=1, "
        "dp_replicate=2, dp_shard=4, cp=1, tp=2, ep=1, etp=1",
        "[rank0]:[titan] 2026-04-01 08:00:05,000 - root - INFO - Trainer is initialized with 16384 tokens per DP "
        "rank, 131072 tokens per train step, gradient accumulation steps 1, maximum context length 8192, total steps "
        "100 (warmup 10)",
        *[f"[rank0]:[titan] 2026-04-01 08:0{i}:00,000 - root - INFO - \x1b[31mstep: {n:2}  \x1b[32mloss: "
          f"{5.0 - i / 10:8.5f}  \x1b[38;2;180;60;0mgrad_norm:  0.5000  \x1b[38;2;54;234;195mmemory: 61.20GiB(64.45%)  "
          f"\x1b[34mtps: {tps:,}  \x1b[36mtflops: {tflops:,.2f}  \x1b[35mmfu: N/A\x1b[39m"
          for i, (n, tps, tflops) in enumerate([(1, 2000, 400.0), (10, 11500, 1150.5), (20, 12345, 1234.56),
                                                (30, 12355, 1235.56)])],
    ])
    log = logs.parse(text, "run.log")
    assert log.format == "torchtitan" and log.used == (20, 30)
    assert log.tokens_per_s_per_device.median == 12350
    assert log.flops_per_s_per_device.median == pytest.approx(1235.06e12)
    assert log.mfu is None
    assert log.stated == {"accelerators": 16, "tensor_parallel": 2, "pipeline_parallel": 1,
                          "tokens_per_step": 131072, "gradient_accumulation_steps": 1, "sequence_length": 8192}


def test_megatron_fork_fields_and_gigabyte_memory():
    """Forks print tokens/s (per GPU or in all) and other TFLOP/s/GPU keys; Megatron-Bridge reports memory in GB;
    a timer block may sit on one line."""
    lines = []
    for n, ms in [(10, 900.0), (20, 1000.0), (30, 1010.0), (40, 990.0)]:
        lines.append(f" iteration {n:8d}/     100 | consumed samples: {32 * n:12d} | elapsed time per iteration (ms): "
                     f"{ms:.1f} | compute per GPU (TFLOP/s/GPU): {400 * 1000 / ms:.1f} (avg 400.0) | tokens per GPU "
                     f"(tokens/s/GPU): {8_192_000 / ms:,.1f} | tokens per second: {65_536_000 / ms:.1f} | global "
                     f"batch size:    32 | lm loss: 2.000000E+00 |")
    lines.append("successfully saved checkpoint from iteration 40 to /ckpt [ t 1/1, p 1/1 ] (min, max) time across "
                 "ranks (ms): save-checkpoint ................................: (24895.07, 24895.13)")
    lines.append("[Rank 0] (after 40 iterations) memory (GB) | allocated: 40.5 | max allocated: 61.25 | "
                 "reserved: 70.0 | max reserved: 72.5")
    log = logs.parse("\n".join(lines), "fork.log")
    assert log.used == (30, 40)
    assert log.step_seconds.median == pytest.approx(1.0)
    assert log.flops_per_s_per_device.median == pytest.approx(400.0e12)     # (396.0 + 404.0) / 2
    assert log.tokens_per_s_per_device.median == pytest.approx(8192.0, rel=1e-3)  # (8,110.9 + 8,274.7) / 2
    assert log.tokens_per_s.median == pytest.approx(65536.0, rel=1e-3)
    assert log.peak_allocated_bytes == 61.25 * GiB and log.peak_reserved_bytes == 72.5 * GiB
    assert log.phases == pytest.approx({"save-checkpoint": 24.89513})


def _megatron_lines(times_ms, batches=None):
    batches = batches or [64] * len(times_ms)
    return "\n".join(f" iteration {10 * (i + 1):8d}/     100 | elapsed time per iteration (ms): {ms:.1f} | "
                     f"global batch size: {batch:5d} |" for i, (ms, batch) in enumerate(zip(times_ms, batches)))


@pytest.mark.parametrize("times, warmup, used, median", [
    ([5000, 1000, 1100, 900, 1000], 2, (30, 40, 50), 1.0),       # the default: drop the first two
    ([5000, 1000, 1100, 900, 1000], 0, (20, 30, 40, 50), 1.0),   # 5.0 s > 2 × 1.05 s: dropped as an outlier anyway
    ([1000, 1000, 1100, 900, 1000], 0, (10, 20, 30, 40, 50), 1.0),
    ([5000, 3000, 1000, 1200, 2500, 1100], 1, (30, 40, 60), 1.1),  # 3.0 and 2.5 s: over 2 × the median of the rest
    ([5000, 3000], 2, (20,), 3.0),                               # all warm-up: the last one is kept, with a note
])
def test_warm_up_and_outliers(times, warmup, used, median):
    log = logs.parse(_megatron_lines(times), "run.log", warmup=warmup)
    assert log.used == used
    assert log.step_seconds.median == pytest.approx(median)
    assert any("warm-up could not be dropped" in note for note in log.notes) == (len(times) <= warmup)


def test_batch_ramp_up_is_dropped():
    log = logs.parse(_megatron_lines([3000, 600, 800, 1000, 1010, 990, 1000], [16, 16, 32, 64, 64, 64, 64]),
                     "ramp.log")
    assert [d for d in log.dropped if "ramp-up" in d[1]] == [(10, "batch ramp-up (global batch 16)"),
                                                              (20, "batch ramp-up (global batch 16)"),
                                                              (30, "batch ramp-up (global batch 32)")]
    assert log.used == (60, 70) and log.stated["global_batch_size"] == 64


def test_lines_of_several_ranks_count_once():
    one = _megatron_lines([3000, 2000, 1000, 1010, 990]).splitlines()
    text = "\n".join(f"[default{rank}]:{line}" for line in one for rank in (0, 1))
    log = logs.parse(text, "ranks.log")
    assert log.logged == 5 and log.used == (30, 40, 50)
    assert any("5 repeated step line(s)" in note for note in log.notes)


# --------------------------------------------------------------------------------------------- detection

@pytest.mark.parametrize("path, expected", [(MEGATRON, "megatron"), (LEGACY, "megatron"), (TITAN, "torchtitan"),
                                            (TITAN_2024, "torchtitan"),
                                            (EXAMPLES / "logs" / "megatron-gpt3-175b.log", "megatron")])
def test_detects_the_shipped_logs(path, expected):
    assert logs.detect(path.read_text(encoding="utf-8"), path) == expected


@pytest.mark.parametrize("text, name, expected", [
    ('{"schema": "botec.measurement/1"}', "run.json", "botec"),
    ('{"schema": "botec.measurement/1"}', "run.txt", "botec"),
    ("", "run.json", "botec"),
    ("[1, 2]", "run.txt", "botec"),
    ("[titan] 2025-01-01 00:00:00,000 - root - INFO - Trainer is initialized with local batch size 1", "a.log",
     "torchtitan"),
    ("------------------------ arguments ------------------------\n  seq_length ...... 2048\n", "a.log", "megatron"),
    ("step 10, loss: 2.5\nhello\n", "a.log", None),
])
def test_detection(text, name, expected):
    assert logs.detect(text, name) == expected


def test_read_measurement_detects_each_kind(tmp_path):
    assert isinstance(logs.read_measurement(MEGATRON), logs.LogMeasurement)
    assert logs.read_measurement(TITAN).format == "torchtitan"
    forced = tmp_path / "renamed.txt"
    forced.write_text(TITAN.read_text(encoding="utf-8"), encoding="utf-8")
    assert logs.read_measurement(forced, "torchtitan").used == (20, 30, 40, 50)
    with pytest.raises(ContractError, match="no Megatron-LM iteration lines"):
        logs.read_measurement(forced, "megatron")
    with pytest.raises(ContractError, match="not a measurement: corrupt or truncated JSON"):
        logs.read_measurement(forced, "botec")


# --------------------------------------------------------------------------------------------- bad input

LESSON = EXAMPLES / "lesson-finetune-1b.yaml"


@pytest.mark.parametrize("name, text, options, message", [
    ("empty.log", "", [], "empty file: expected a botec measurement (JSON, schema botec.measurement/1), a "
                          "Megatron-LM training log"),
    ("notes.txt", "hello\nworld\n", [], "not a recognised measurement: expected a botec measurement"),
    ("started.log", "------------------------ arguments ------------------------\n  seq_length ........ 2048\n"
                    "[before the start of training step] datetime: 2025-01-01 00:00:00\n", [],
     "no Megatron-LM iteration lines: expected lines like ' iteration N/ M | ... | elapsed time per iteration (ms)"),
    ("titan.log", "[titan] 2025-01-01 00:00:00,000 - root - INFO - Training starts at step 1.\n", [],
     "no torchtitan iteration lines: expected lines like 'step: N  loss: L  memory: M GiB(P%)  tps: T ...'"),
    ("megatron.log", LEGACY.read_text(encoding="utf-8"), ["--log-format", "torchtitan"],
     "no torchtitan iteration lines"),
    ("megatron.log", LEGACY.read_text(encoding="utf-8"), ["--log-format", "botec"], "not a measurement: corrupt"),
    ("megatron.log", LEGACY.read_text(encoding="utf-8"), ["--log-format", "csv"],
     "--log-format: expected megatron, torchtitan or botec, not 'csv'"),
])
def test_bad_input_is_one_line(tmp_path, cli, name, text, options, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    target = tmp_path / "never.yaml"
    code, out, err = cli("calibrate", str(LESSON), str(path), *options, "-o", str(target))
    assert code == 2, out + err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    if "--log-format: expected" not in message:
        assert str(path) in err                        # names the file
    assert not target.exists()


def test_missing_file(tmp_path, cli):
    code, _, err = cli("calibrate", str(LESSON), str(tmp_path / "nowhere.log"))
    assert code == 2 and "nowhere.log: no such measurement file" in err and err.count("\n") == 1


def test_a_different_global_batch_is_refused(tmp_path, cli):
    """The workload comes from the contract; where the log states it, they must agree (or be told to differ)."""
    text = MEGATRON.read_text(encoding="utf-8").replace("global batch size:  2048", "global batch size:  1024")
    text = text.replace("global_batch_size ............................... 2048",
                        "global_batch_size ............................... 1024")
    log = tmp_path / "half.log"
    log.write_text(text, encoding="utf-8")
    contract = EXAMPLES / "llama3.1-70b-pretrain.yaml"
    code, out, err = cli("calibrate", str(contract), str(log))
    assert code == 2 and err.count("\n") == 1
    assert (f"{log}: strategy.global_batch_size: the Megatron-LM log is of a different workload (global batch size "
            "1,024 sequences in the log, 2,048 in the contract") in err
    code, out, err = cli("calibrate", str(contract), str(log), "--allow-workload-change")
    assert code == 0, err
    out = " ".join(out.split())   # a line over 100 columns wraps
    assert "compared anyway, --allow-workload-change" in out


# --------------------------------------------------------------------------------------------- end to end

def test_calibrate_a_megatron_log_end_to_end(tmp_path, cli):
    from botec.estimation import estimate_file
    from botec.measure.calibrate import efficiency_assumption

    contract = EXAMPLES / "llama3.1-70b-pretrain.yaml"
    result = estimate_file(contract)
    q = result.quantities
    calibrated = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(MEGATRON), "-o", str(calibrated))
    assert code == 0, err
    out = " ".join(out.split())   # a line over 100 columns wraps

    def compared(name, unit, measured_text):
        return f" {name}: estimated {format_quantity(estimate_of[name], unit)}, measured {measured_text} ("

    flops = q["useful_flops_per_s"].value / q["accelerators"].value
    estimate_of = {
        "step_seconds": q["step_seconds"].value, "tokens_per_s": q["tokens_per_s"].value,
        "FLOP/s per accelerator (as logged)": flops,
        "peak memory per accelerator (max reserved)":
            q["planned_device_bytes"].value - q["memory_headroom_bytes"].value,
        "peak memory per accelerator (max allocated)": q["state_bytes"].value + q["activation_bytes"].value,
    }
    assert compared("step_seconds", "s", "20.1 s") in out
    # 2,048 × 8,192 tokens / 20.1 s = 834,687 tokens/s
    assert compared("tokens_per_s", "tokens/s", "834,687 tokens/s") in out
    assert compared("FLOP/s per accelerator (as logged)", "FLOP/s", "366 TFLOP/s") in out
    assert "measured in Megatron-LM's count (num_floating_point_operations)" in out
    assert "estimated in botec's count: 6·N(active, matmul) + attention scores counted causal" in out
    # 33,792 MiB reserved, 30,512.25 MiB allocated
    assert compared("peak memory per accelerator (max reserved)", "B", "35.4 GB") in out
    assert compared("peak memory per accelerator (max allocated)", "B", "32 GB") in out
    assert "read as a Megatron-LM log: 7 iteration line(s), 4 used; dropped 1, 10 (warm-up); 40 (slower than 2× " \
           "the median of the rest)" in out
    assert "not compared (the measurement does not have them):" in out
    assert "checkpoint_bytes and the storage write bandwidth: the log has no checkpoint size" in out
    assert "forward-backward 19.7 s, optimizer 0.412 s" in out
    # the back-solved efficiency gives the measured step back
    efficiency = efficiency_assumption(result)
    again = estimate_file(calibrated)
    assert again.value("step_seconds") == pytest.approx(20.1, rel=1e-3)
    assert again.quantities[efficiency.removeprefix("assumptions.")].provenance == "measured"
    assert "megatron-llama3.1-70b.log (Megatron-LM log, 2025-03-01)" in calibrated.read_text(encoding="utf-8")


def test_calibrate_a_torchtitan_log_as_json(cli):
    contract = EXAMPLES / "llama2-7b-fsdp-finetune.yaml"
    code, out, err = cli("calibrate", str(contract), str(TITAN), "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    measured = {c["name"]: c["measured"] for c in data["comparisons"]}
    # 64 sequences × 4,096 tokens / (2,404 tokens/s per accelerator × 8 accelerators)
    assert measured["step_seconds"] == pytest.approx(262144 / (2404 * 8))
    assert measured["tokens_per_s"] == pytest.approx(2404 * 8)
    assert measured["FLOP/s per accelerator (as logged)"] == pytest.approx(110.785e12)
    assert measured["MFU (as logged)"] == pytest.approx(0.3551)
    assert measured["peak memory per accelerator (max reserved)"] == pytest.approx(22.44 * GiB)
    assert "peak memory per accelerator (max allocated)" not in measured       # torchtitan prints reserved only
    notes = {c["name"]: c.get("note", "") for c in data["comparisons"]}
    assert "torchtitan's count" in notes["FLOP/s per accelerator (as logged)"]
    assert any(line.startswith("compute_seconds_per_step") for line in data["missing"])
    assert data["measured"][0].startswith("read as a torchtitan log: 7 iteration line(s), 4 used")
    assert len(data["assumptions"]) == 1


def test_a_legacy_log_says_what_it_cannot_compare(cli):
    code, out, err = cli("calibrate", str(LESSON), str(LEGACY), "--allow-workload-change")
    assert code == 0, err
    out = " ".join(out.split())   # a line over 100 columns wraps
    assert "FLOP/s per accelerator as logged (botec's count of the measured tokens is compared instead): no " \
           "'throughput per GPU (TFLOP/s/GPU)' field" in out
    assert "FLOP/s per accelerator (botec's count of the measured tokens/s)" in out
    assert "forward-compute + backward-compute 1.14 s, optimizer 30.2 ms" in out


def test_the_shipped_example_log_runs(cli):
    code, out, err = cli("calibrate", str(EXAMPLES / "gpt3-175b-search.yaml"),
                         str(EXAMPLES / "logs" / "megatron-gpt3-175b.log"))
    assert code == 0, err
    out = " ".join(out.split())   # a line over 100 columns wraps
    assert "measured 36 s" in out and "measured 90.5 TFLOP/s" in out
    assert "dropped 10, 20 (warm-up); 80 (slower than 2× the median of the rest)" in out


def test_calibrate_takes_the_partial_measurement_directly():
    """The library path: a LogMeasurement goes to the same calibrate() as a botec measurement."""
    from botec.estimation import estimate_file
    from botec.measure.calibrate import calibrate

    result = estimate_file(EXAMPLES / "llama2-7b-fsdp-finetune.yaml")
    calibration = calibrate(result, logs.read(TITAN), "torchtitan-llama2-7b.log")
    names = [c.name for c in calibration.comparisons]
    assert names[:2] == ["step_seconds", "tokens_per_s"]
    assert calibration.missing and calibration.measured
