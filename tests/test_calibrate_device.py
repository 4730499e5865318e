"""Calibrating from a run on other hardware than the contract's accelerator (a CPU run against an H100 plan):
refused by default, or with --device-independent-only only the figures that do not depend on the device.

Fast: the measurement is written by hand and validated by the Measurement model, no torch run."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import LESSON, write

from botec.measure.measurement import Measurement, summarize

# The lesson's workload (1B parameters, 16 layers × 2048, 2 × 2048 tokens per rank, 4 replicated ranks), as a
# 1-step CPU run: 40 s a step, 2 s of it waiting for input, a 4 GB checkpoint saved in 8 s.
STEP, INPUT_WAIT = 40.0, 2.0


def measurement_data(device: str = "cpu", device_name: str = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz") -> dict:
    sample = {"step": 1, "input_wait_seconds": INPUT_WAIT, "forward_backward_seconds": 36.0, "sync_seconds": 0.0,
              "optimizer_seconds": 2.0, "step_seconds": STEP}
    tokens = 2 * 2048 * 4
    summary = summarize([Measurement.model_fields["samples"].annotation.__args__[0](**sample)], tokens, 6e9, 4, None)
    data = {
        "schema": "botec.measurement/1", "created": "2026-11-30T12:00:00+00:00", "contract": str(LESSON),
        "workload": {
            "model": {"name": "lesson 1B", "layers": 16, "hidden_size": 2048, "attention_heads": 16, "kv_heads": 16,
                      "ffn_size": 8192, "vocab_size": 32000, "parameters": 1_000_000_000,
                      "model_flops_per_token": 6e9},
            "micro_batch_size": 2, "sequence_length": 2048, "data_parallel_degree": 4, "tokens_per_step": tokens,
            "precision": "bf16", "optimizer": "adam-mixed"},
        "environment": {"device": device, "device_name": device_name, "world_size": 4, "backend": "gloo",
                        "torch_version": "2.5.0", "threads": 4},
        "samples": [sample],
        "summary": json.loads(summary.model_dump_json()),
        "memory": {"method": "MemTracker", "parameters_bytes": 2e9, "gradients_bytes": 2e9, "optimizer_bytes": 12e9,
                   "activations_bytes": 3e9, "temporary_bytes": 0.0, "peak_bytes": 19e9,
                   "activation_bytes_per_element": 2.0, "saved_tensor_factor": 11.0},
        "checkpoint": {"seconds": 8.0, "bytes": 4e9},
    }
    Measurement.model_validate(data)   # the hand-written file is a valid measurement
    return data


def _contract(tmp_path, accelerator: str | None = None):
    """The lesson's contract, on a catalog accelerator when one is named (else its hypothetical inline one)."""
    data = yaml.safe_load(LESSON.read_text(encoding="utf-8"))
    if accelerator is not None:
        data["supply"]["accelerator"] = accelerator
    return write(tmp_path, yaml.safe_dump(data, sort_keys=False), name="job.yaml")


def _measurement(tmp_path, **kwargs):
    return write(tmp_path, json.dumps(measurement_data(**kwargs)), name="run.json")


@pytest.mark.parametrize("accelerator, named", [("h100-sxm", "h100-sxm"), (None, "'lesson accelerator'")])
def test_a_cpu_run_against_another_accelerator_is_refused(cli, tmp_path, accelerator, named):
    contract, run = _contract(tmp_path, accelerator), _measurement(tmp_path)
    target = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(run), "-o", str(target))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "the measurement ran on Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz (cpu), not the contract's " \
           f"{named}" in err
    assert "--device-independent-only" in err
    assert not target.exists()
    # --allow-workload-change is about the workload, not the device: still refused
    code, out, err = cli("calibrate", str(contract), str(run), "--allow-workload-change")
    assert code == 2 and "not the contract's" in err


def test_device_independent_only_takes_memory_storage_and_input_wait(cli, tmp_path):
    contract, run = _contract(tmp_path, "h100-sxm"), _measurement(tmp_path)
    target = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(run), "--device-independent-only", "-o", str(target))
    assert code == 0, err
    assumptions = yaml.safe_load(target.read_text())["assumptions"]
    assert assumptions["saved_tensor_factor"]["value"] == pytest.approx(11.0)
    assert assumptions["saved_tensor_factor"]["provenance"] == "measured"
    assert "end_to_end_mfu" not in assumptions                     # no CPU MFU written for the H100
    assert assumptions["single_accelerator_mfu"]["value"] == 0.30  # the contract's own, untouched
    storage = yaml.safe_load(target.read_text())["supply"]["storage"]["write_bandwidth"]
    assert storage["value"] == pytest.approx(4e9 / 8.0) and storage["provenance"] == "measured"
    assert "input wait: 2 s per step (5% of the measured step)" in out
    assert "step_seconds" not in out                              # the CPU step is not compared with the H100's
    # the written contract estimates
    code, out, err = cli("estimate", str(target), "-f", "json")
    assert code == 0, err


def test_device_independent_only_json(cli, tmp_path):
    contract, run = _contract(tmp_path, "h100-sxm"), _measurement(tmp_path)
    code, out, err = cli("calibrate", str(contract), str(run), "--device-independent-only", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload["assumptions"]) == {"assumptions.saved_tensor_factor", "supply.storage.write_bandwidth"}
    assert payload["assumptions"]["assumptions.saved_tensor_factor"]["value"] == pytest.approx(11.0)
    assert payload["missing"][0].startswith("end_to_end_mfu, step time and tokens/s: measured on Intel")


def test_a_run_on_the_contracts_gpu_calibrates_as_before(cli, tmp_path):
    """torch names an H100 SXM 'NVIDIA H100 80GB HBM3': that is the contract's h100-sxm, so the MFU is solved."""
    contract = _contract(tmp_path, "h100-sxm")
    run = _measurement(tmp_path, device="cuda", device_name="NVIDIA H100 80GB HBM3")
    target = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(run), "-o", str(target))
    assert code == 0, err
    assumptions = yaml.safe_load(target.read_text())["assumptions"]
    assert assumptions["end_to_end_mfu"]["provenance"] == "measured"
    # an A100 run is not an H100 plan
    run = _measurement(tmp_path, device="cuda", device_name="NVIDIA A100-SXM4-80GB")
    code, out, err = cli("calibrate", str(contract), str(run))
    assert code == 2 and "NVIDIA A100-SXM4-80GB (cuda), not the contract's h100-sxm" in err


def test_an_inline_cpu_contract_is_its_own_device(cli, tmp_path):
    """A contract that describes the CPU inline (as tests/test_measure.py's does) calibrates from a CPU run."""
    data = yaml.safe_load(LESSON.read_text(encoding="utf-8"))
    data["supply"]["accelerator"] = {"name": "this CPU", "peak_flops_per_s": "1 TFLOP/s", "memory": "64 GB"}
    contract = write(tmp_path, yaml.safe_dump(data, sort_keys=False), name="cpu.yaml")
    code, out, err = cli("calibrate", str(contract), str(_measurement(tmp_path)))
    assert code == 0, err
    assert "end_to_end_mfu" in out


def test_a_cpu_proxy_run_calibrates_only_what_transfers(cli, tmp_path):
    """The newcomer's flow: `botec init`, `botec measure` on a CPU (a scaled-down proxy: 4 layers × 256), then
    calibrate. It used to write a 'measured' MFU of 0.0061 and the proxy's saved-tensor factor of 39.4 for the
    planned accelerator, and the calibrated contract no longer fitted; now the storage bandwidth is all it takes."""
    contract = tmp_path / "job.yaml"
    assert cli("init", str(contract))[0] == 0
    data = measurement_data()
    data["workload"]["model"].update(layers=4, hidden_size=256, parameters=15_000_000)
    data["workload"]["proxy_of"] = "1B dense transformer"
    data["memory"]["saved_tensor_factor"] = 39.4
    run = write(tmp_path, json.dumps(data), name="proxy.json")
    target = tmp_path / "job.calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(run), "--device-independent-only", "-o", str(target))
    assert code == 2 and "different workload" in err and "--allow-workload-change" in err
    code, out, err = cli("calibrate", str(contract), str(run), "--device-independent-only", "--allow-workload-change",
                         "-o", str(target))
    assert code == 0, err
    out = " ".join(out.split())   # a line over 100 columns wraps
    assert "saved_tensor_factor 39.4 measured; not written: it was measured on another workload (layers 16" in out
    written = yaml.safe_load(target.read_text())
    assert written["assumptions"]["saved_tensor_factor"]["value"] == 8           # the contract's, untouched
    assert "end_to_end_mfu" not in written["assumptions"]
    assert written["supply"]["storage"]["write_bandwidth"]["value"] == pytest.approx(5e8)
    code, out, err = cli("estimate", str(target), "-f", "json")
    assert code == 0, err
