"""The measuring harness (PyTorch, CPU here), the measurement file, calibration and diagnosis."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from botec.architecture import Architecture, breakdown  # noqa: E402
from botec.measure import measurement as files  # noqa: E402

from conftest import REPO  # noqa: E402
from conftest import TINY_CPU_CONTRACT as TINY  # noqa: E402


def tiny_contract(tmp_path: Path, count: int = 1) -> Path:
    path = tmp_path / f"tiny-{count}.yaml"
    path.write_text(TINY.replace("COUNT", str(count)))
    return path


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One single-process measurement of the tiny model, shared by the tests below."""
    folder = tmp_path_factory.mktemp("measure")
    contract = tiny_contract(folder)
    output = folder / "run.json"
    completed = subprocess.run([sys.executable, "-m", "botec.cli", "measure", str(contract), "--steps", "6",
                                "-o", str(output)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return contract, output, completed.stdout


def test_reference_model_has_the_estimated_parameter_count():
    from botec.measure.model import Transformer

    for arch in (Architecture("gqa", "custom", 2, 128, 4, 2, 344, 1024),
                 Architecture("gpt", "gpt2", 2, 96, 4, 4, 384, 500, mlp="plain", tied_embeddings=True,
                              position_embeddings=64, norm="layernorm", attention_bias="all", mlp_bias=True)):
        model = Transformer(arch)
        assert sum(p.numel() for p in model.parameters()) == breakdown(arch).total


def test_single_process_measurement_round_trips(measured):
    contract, output, stdout = measured
    measurement = files.read(output)
    assert measurement.environment.world_size == 1 and measurement.environment.device == "cpu"
    assert len(measurement.samples) == 6
    assert measurement.workload.tokens_per_step == 4 * 128
    assert measurement.workload.model.parameters == breakdown(Architecture("x", "custom", 2, 128, 4, 2, 344, 1024)).total
    for phase in files.PHASES:
        assert measurement.summary.median[phase] >= 0
    # the step is the sum of its phases
    sample = measurement.samples[0]
    parts = (sample.input_wait_seconds + sample.forward_backward_seconds + sample.sync_seconds
             + sample.optimizer_seconds)
    assert sample.step_seconds == pytest.approx(parts, rel=0.01, abs=1e-4)
    assert measurement.memory.activations_bytes > 0 and measurement.checkpoint.bytes > 0
    again = files.Measurement.model_validate_json(output.read_text())
    assert again == measurement
    assert "tokens/s" in stdout and "saved-tensor factor" in stdout


def test_calibration_round_trips_the_measured_step(measured, tmp_path, cli):
    """A round trip, not an accuracy test: the MFU back-solved from the measured step gives that step back."""
    contract, output, _ = measured
    calibrated = tmp_path / "calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(output), "-o", str(calibrated))
    assert code == 0, err
    assert "end_to_end_mfu replaces single_accelerator_mfu × scaling_efficiency" in out
    from botec.estimation import estimate_file

    result = estimate_file(calibrated)
    step = files.read(output).summary.median["step_seconds"]
    assert result.value("step_seconds") == pytest.approx(step, rel=0.02)
    assert result.quantities["end_to_end_mfu"].provenance == "measured"
    assert "single_accelerator_mfu" not in result.quantities
    assert result.quantities["saved_tensor_factor"].provenance == "measured"


def test_fake_tensor_memory_agrees_with_a_real_run():
    from botec.measure.fake import saved_activation_bytes, step_memory

    arch = Architecture("small", "custom", 2, 128, 4, 2, 344, 1024)
    fake, real = step_memory(arch, 4, 128), step_memory(arch, 4, 128, fake=False)
    assert fake["TOTAL"] == pytest.approx(real["TOTAL"], rel=0.10)
    assert fake["ACT"] == pytest.approx(real["ACT"], rel=0.10)
    assert saved_activation_bytes(arch, 4, 128) == pytest.approx(saved_activation_bytes(arch, 4, 128, fake=False),
                                                                 rel=0.10)


def test_saved_tensor_factor_of_a_llama_layer_without_allocating_it(cli, tmp_path):
    """Llama 3.1 8B's own config.json with two of its 32 layers: a layer is the same, and PyTorch's MemTracker costs
    about 1.5 s of CPU per layer on fake tensors (the full model: 51 s)."""
    config = json.loads((REPO / "tests" / "data" / "hf" / "llama-3.1-8b" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 2}))
    code, out, err = cli("measure", "--fake", "--set", f"workload.model={{config: {tmp_path / 'config.json'}}}",
                         "--set", "supply.accelerator=h100-sxm", "--set", "strategy.micro_batch_size=1")
    assert code == 0, err
    out = " ".join(out.split())   # a line over 100 columns wraps
    assert "hidden-state tensors" in out and "the lesson's placeholder: 8" in out


def test_diagnosis_attributes_an_injected_input_delay(measured, tmp_path, cli):
    """A slow input pipeline on purpose, sized against this machine's own step: the loader sleeps twice a measured
    step per sequence (4 sequences a step), so input wait dwarfs compute. A machine that got busier since the
    reference run can slow the compute past that: then the delay is sized again from the slow run's own compute
    (at most twice), so the premise holds whatever the load and the diagnosis is what is tested."""
    _, reference, _ = measured
    step = files.read(reference).summary.median["step_seconds"]
    delay = max(0.05, 2 * step)
    contract = tiny_contract(tmp_path)
    output = tmp_path / "slow.json"
    for _ in range(3):
        completed = subprocess.run([sys.executable, "-m", "botec.cli", "measure", str(contract), "--steps", "3",
                                    "--warmup", "1", "--input-delay", f"{delay:.4f}", "--no-checkpoint", "-o",
                                    str(output)], capture_output=True, text=True, timeout=300)
        assert completed.returncode == 0, completed.stderr
        median = files.read(output).summary.median
        assert median["input_wait_seconds"] >= 4 * delay
        compute = median["forward_backward_seconds"] + median["optimizer_seconds"]
        if median["input_wait_seconds"] > compute:
            break
        delay = 2 * compute  # per sequence: four sequences a step wait eight times this run's compute
    assert median["input_wait_seconds"] > compute, "the injected wait must outweigh this run's measured compute"
    code, out, err = cli("calibrate", str(contract), str(output))
    assert code == 0, err
    assert "comes mostly from input wait" in out and "input pipeline keeps up" in out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_under_torchrun_with_gloo(tmp_path, cli):
    contract = tiny_contract(tmp_path, count=2)
    output = tmp_path / "ddp.json"
    torchrun = Path(sys.executable).with_name("torchrun")
    completed = subprocess.run([str(torchrun), "--nproc_per_node=2", f"--master_port={_free_port()}", "-m", "botec.cli",
                                "measure", str(contract), "--steps", "3", "--warmup", "1", "-o", str(output)],
                               capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert completed.returncode == 0, completed.stderr[-2000:]
    measurement = files.read(output)
    assert measurement.environment.world_size == 2 and measurement.environment.backend == "gloo"
    assert measurement.workload.tokens_per_step == 2 * 4 * 128
    assert measurement.summary.median["sync_seconds"] > 0
    code, out, err = cli("calibrate", str(contract), str(output))
    assert code == 0, err
    assert "supply.network.bandwidth" in out                 # the effective collective bandwidth, back-solved


def test_refuses_a_different_workload(measured, tmp_path, cli):
    _, output, _ = measured
    other = tmp_path / "other.yaml"
    other.write_text(TINY.replace("COUNT", "1").replace("sequence_length: 128", "sequence_length: 256"))
    target = tmp_path / "never.yaml"
    code, out, err = cli("calibrate", str(other), str(output), "-o", str(target))
    assert code == 2 and err.count("\n") == 1
    assert "workload: the measurement is of a different workload (sequence_length 256 in the contract, 128 measured" in err
    assert not target.exists()


@pytest.mark.parametrize("text, message", [
    ('{"schema": "botec.measurement/1", "created": "x", ', "corrupt or truncated JSON"),
    ('{"hello": 1}', "expected schema 'botec.measurement/1'"),
    ("", "corrupt or truncated JSON"),
])
def test_refuses_a_corrupt_file(tmp_path, cli, text, message):
    contract = tiny_contract(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    code, out, err = cli("calibrate", str(contract), str(bad), "-o", str(tmp_path / "never.yaml"))
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "never.yaml").exists()


def test_refuses_zero_steps(measured, tmp_path, cli):
    contract, output, _ = measured
    data = json.loads(output.read_text())
    data["samples"] = []
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(data))
    code, out, err = cli("calibrate", str(contract), str(empty))
    assert code == 2 and "samples: the measurement has zero steps" in err


def test_interrupting_a_measurement_leaves_no_file(tmp_path):
    """SIGINT once the child says it is measuring (so its handler is in place): exit 130, nothing written."""
    import threading

    contract = tiny_contract(tmp_path)
    output = tmp_path / "interrupted.json"
    # A suite started in the background by a non-interactive shell inherits SIGINT ignored, and Python keeps
    # it ignored: the child gets the default disposition back, so its handler is Python's whatever the parent's.
    process = subprocess.Popen([sys.executable, "-m", "botec.cli", "measure", str(contract), "--steps", "500",
                                "--input-delay", "0.01", "-o", str(output)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    guard = threading.Timer(240, process.kill)  # never hang the suite if the child never says it started
    guard.start()
    try:
        seen = []
        for line in process.stderr:
            seen.append(line)
            if line.startswith("botec: measuring"):
                break
        assert seen and seen[-1].startswith("botec: measuring"), "".join(seen)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:
        guard.cancel()
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not output.exists()
    assert not list(tmp_path.glob(".interrupted.json*"))


# --- LoRA: adapters on a frozen base, measured on CPU ---------------------------------------------------------

def lora_contract(tmp_path: Path, base_weights: str = "bf16", name: str = "tiny-lora.yaml") -> Path:
    """The tiny contract fine-tuned with rank-8 adapters on every linear of its blocks."""
    path = tmp_path / name
    path.write_text(TINY.replace("COUNT", "1").replace(
        "  optimizer: adam-fp32\n",
        f"  optimizer: adam-fp32\n  lora: {{rank: 8, target_modules: all-linear, base_weights: {base_weights}}}\n"))
    return path


# Hand derivation for the tiny model (h 128, 4 heads of 32, 2 KV heads, FFN 344, 2 layers), LoRA rank r = 8 on all
# seven linears: r · (d_in + d_out) each (Hu et al. 2021): q 8·(128+128) = 2,048, k and v 8·(128+64) = 1,536 each,
# o 2,048, gate, up and down 8·(128+344) = 3,776 each: 18,496 per layer, 36,992 for the two.
TINY_LORA_TRAINABLE = 36_992


@pytest.fixture(scope="module")
def lora_measured(tmp_path_factory):
    """One LoRA measurement of the tiny model (BF16 base, FP32 adapters), shared by the tests below."""
    folder = tmp_path_factory.mktemp("lora")
    contract = lora_contract(folder)
    output = folder / "lora.json"
    completed = subprocess.run([sys.executable, "-m", "botec.cli", "measure", str(contract), "--steps", "3",
                                "--warmup", "1", "-o", str(output)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    return contract, output, completed.stdout


def test_lora_trains_only_the_adapters(tmp_path):
    """Only A and B take gradients; their count is the hand derivation's and botec's ``trainable_parameters``."""
    from botec.architecture import lora_parameters
    from botec.estimation import estimate_file
    from botec.measure.model import Transformer, add_lora

    arch = Architecture("gqa", "custom", 2, 128, 4, 2, 344, 1024)
    torch.manual_seed(0)
    model = Transformer(arch).to(torch.bfloat16)
    tokens = torch.randint(0, arch.vocab_size, (2, 16))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        base_loss = model(tokens, tokens)
    roles = tuple(dict.fromkeys(m.role for m in lora_parameters(arch, 8, "all-linear").adapted))
    assert roles == ("q", "k", "v", "o", "gate", "up", "down")
    trainable = add_lora(model, roles, rank=8)
    assert trainable == TINY_LORA_TRAINABLE
    assert trainable == estimate_file(lora_contract(tmp_path)).value("trainable_parameters")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(tokens, tokens)
    assert loss.item() == base_loss.item()           # B starts at zero: the adapted model is the base model
    loss.backward()
    with_gradient = {name for name, p in model.named_parameters() if p.grad is not None}
    assert with_gradient == {name for name, _ in model.named_parameters() if ".lora_" in name}
    assert len(with_gradient) == 2 * 7 * 2            # layers × adapted linears × (A, B)
    assert sum(p.numel() for p in model.parameters() if p.grad is not None) == trainable
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)


def test_lora_measurement_holds_a_frozen_base_and_the_adapters_state(lora_measured, measured):
    contract, output, stdout = lora_measured
    lora = files.read(output)
    arch = Architecture("x", "custom", 2, 128, 4, 2, 344, 1024)
    assert lora.workload.lora.rank == 8 and lora.workload.lora.measured_base_weights == "bf16" and not lora.notes
    assert lora.workload.model.trainable_parameters == TINY_LORA_TRAINABLE
    assert lora.workload.gradient_bytes == 4 * TINY_LORA_TRAINABLE            # FP32 adapters' gradients only
    memory = lora.memory
    # BF16 base (2 B per parameter, breakdown's count) + FP32 adapters (4 B): 2 · 625,280 + 4 · 36,992 = 1,398,528
    assert memory.parameters_bytes == 2 * breakdown(arch).total + 4 * TINY_LORA_TRAINABLE == 1_398_528
    # AdamW: two FP32 moments per adapter parameter, plus one 4-byte step count per adapter tensor (28)
    assert memory.optimizer_bytes == 2 * 4 * TINY_LORA_TRAINABLE + 4 * 28
    assert memory.activation_bytes_per_element == 2.0
    # botec's estimate of the same contract holds the same state: its formulas beside MemTracker's categories
    from botec.estimation import estimate_file

    estimate = estimate_file(contract)
    assert estimate.value("weight_memory_bytes") == memory.parameters_bytes
    assert estimate.value("gradient_memory_bytes") == lora.workload.gradient_bytes
    assert estimate.value("optimizer_memory_bytes") == pytest.approx(memory.optimizer_bytes, abs=4 * 28)
    full = files.read(measured[1]).memory
    assert memory.peak_bytes < full.peak_bytes and memory.optimizer_bytes < full.optimizer_bytes / 10
    assert "36,992 trainable of 625,280 parameters" in stdout
    assert lora.checkpoint.bytes < files.read(measured[1]).checkpoint.bytes   # adapters + their optimizer state


def test_lora_calibration_round_trips(lora_measured, measured, tmp_path, cli):
    """The efficiency back-solved from a LoRA step gives that step back with LoRA's FLOPs (the harness and the
    estimate count the same work), and the saved-tensor factor gives back the measured activations."""
    contract, output, _ = lora_measured
    calibrated = tmp_path / "lora.calibrated.yaml"
    code, out, err = cli("calibrate", str(contract), str(output), "-o", str(calibrated))
    assert code == 0, err
    from botec.estimation import estimate_file

    measurement = files.read(output)
    result = estimate_file(calibrated)
    assert result.value("step_seconds") == pytest.approx(measurement.summary.median["step_seconds"], rel=0.02)
    assert result.value("end_to_end_mfu") == pytest.approx(
        measurement.summary.achieved_flops_per_s / 10e12, rel=0.02)           # the contract's 10 TFLOP/s peak
    assert result.quantities["saved_tensor_factor"].provenance == "measured"
    assert result.value("activation_bytes") * 2.0 / result.value("activation_bytes_per_element") == pytest.approx(
        measurement.memory.activations_bytes, rel=1e-5)                       # (written to 6 digits)
    assert result.value("trainable_parameters") == measurement.workload.model.trainable_parameters
    # a full-training contract is another workload than the LoRA run
    code, out, err = cli("calibrate", str(measured[0]), str(output))
    assert code == 2 and "full training in the contract, LoRA rank 8 on all-linear measured" in err


def test_a_quantized_base_is_measured_in_bf16_and_says_so(tmp_path, cli):
    """No bitsandbytes on CPU: the NF4 base is held in BF16, noted; calibrate back-solves no efficiency from it."""
    contract = lora_contract(tmp_path, "nf4")
    output = tmp_path / "qlora.json"
    code, out, err = cli("measure", str(contract), "--steps", "1", "--warmup", "0", "--no-checkpoint", "-o",
                         str(output))
    assert code == 0, err
    measurement = files.read(output)
    assert measurement.workload.lora.base_weights == "nf4" and measurement.workload.lora.measured_base_weights == "bf16"
    assert "strategy.lora.base_weights is nf4: measured with the frozen base in BF16" in measurement.notes[0]
    code, out, err = cli("calibrate", str(contract), str(output), "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert "assumptions.end_to_end_mfu" not in data["assumptions"]
    assert data["missing"][0].startswith("end_to_end_mfu: the nf4 base was measured in BF16")
    assert "assumptions.saved_tensor_factor" in data["assumptions"]
