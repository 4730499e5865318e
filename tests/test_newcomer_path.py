"""A newcomer's first hour as one test: the README's two set-up commands, `botec init` for their own job,
the estimate, the report, and the web app answering on its port (issue 14, "Done when").

Each step runs the installed `botec` as a separate process, as a user's shell would; the set-up commands are
checked as the Makefile spells them (creating a second virtual environment would take minutes)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BOTEC = [sys.executable, "-m", "botec.cli"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    completed = subprocess.run([*BOTEC, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in completed.stderr, completed.stderr
    return completed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_readme_set_up_is_the_makefile_s_two_targets():
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up: two commands", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in setup and "make test" in setup
    demo = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert demo.returncode == 0 and "botec estimate" in demo.stdout
    test = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert test.returncode == 0 and "pytest" in test.stdout


def test_a_newcomer_goes_from_the_demo_to_their_own_job_in_the_browser(tmp_path):
    # make demo: the reference workload
    demo = run("estimate", cwd=tmp_path)
    assert demo.returncode == 0 and "fits: 25.2 GB of 32 GB planned" in demo.stdout
    # their own job, from the catalog
    job = tmp_path / "my-job.yaml"
    init = run("init", str(job), "--model", "llama-3.1-8b", "--accelerator", "h100-sxm", "--count", "8", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    text = job.read_text()
    assert "llama-3.1-8b" in text and "h100-sxm" in text and "lesson-finetune-1b" not in text
    estimate = run("estimate", str(job), "-f", "json", cwd=tmp_path)
    assert estimate.returncode == 0, estimate.stderr
    result = json.loads(estimate.stdout)
    quantities = {q["name"]: q["value"] for q in result["quantities"]}
    assert quantities["accelerators"] == 8 and quantities["memory_spare_bytes"] >= 0
    # a report to paste into a design review
    report = run("report", str(job), "-o", str(tmp_path / "my-job.md"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "run_seconds" in (tmp_path / "my-job.md").read_text()
    # the web app, on a port of its own, estimates the same contract
    port = _free_port()
    server = subprocess.Popen([*BOTEC, "serve", "--port", str(port)], cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        page = None
        for _ in range(1200):  # wait for the port, not for a time: up to 120 s of 0.1 s polls
            if server.poll() is not None:
                pytest.fail(f"botec serve exited: {server.stderr.read()}")
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert page is not None and "botec" in page
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/estimate", method="POST",
                                         data=json.dumps({"contract": text}).encode(),
                                         headers={"Content-Type": "application/json"})
        answer = json.loads(urllib.request.urlopen(request, timeout=120).read())
        served = answer["quantities"]
        assert served["run_seconds"] == pytest.approx(quantities["run_seconds"], rel=1e-12)
    finally:
        server.terminate()
        server.wait(timeout=30)
