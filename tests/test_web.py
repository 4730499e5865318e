"""The HTML report and the local web app: API, safety, load on loopback, and a real browser."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("plotly")

from fastapi.testclient import TestClient  # noqa: E402

from botec.web.app import MAX_BODY_BYTES, app, create_app  # noqa: E402

from conftest import LESSON, REPO  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = REPO / "test-artifacts" / "screenshots"
LESSON_TEXT = LESSON.read_text()


@pytest.fixture(scope="module")
def client():
    return TestClient(app, base_url="http://127.0.0.1")   # the Host the server answers (loopback)


def test_estimate_api_reproduces_the_lesson(client):
    """``detail: "full"`` is what ``botec estimate -f json`` writes (every quantity's record), with the formatted
    values; the default, ``values``, is each quantity's value and unit by name, a fraction of the bytes."""
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT, "figures": True, "detail": "full"})
    assert response.status_code == 200
    payload = response.json()
    assert payload["formatted"]["planned_device_bytes"] == "25.2 GB"
    quantities = {q["name"]: q["value"] for q in payload["quantities"]}
    assert quantities["steps"] == 61_036
    assert len(payload["figures"]) == 4 and payload["contract"]["workload"]["tokens"]["value"] == 1e9
    values = client.post("/api/estimate", json={"contract": LESSON_TEXT})
    compact = values.json()
    assert sorted(compact) == ["figures", "findings", "fits", "headline", "kind", "quantities", "units"]
    assert compact["quantities"] == quantities and compact["quantities"]["steps"] == 61_036
    assert compact["units"]["planned_device_bytes"] == "B" and compact["figures"] == []
    assert compact["headline"] == payload["headline"] and compact["findings"] == payload["findings"]
    assert len(values.content) < len(response.content) / 4


def test_the_page_asks_for_only_what_it_draws(client):
    """``detail: "page"``: the headline, findings, tables and figures the page draws, the same as in the full
    answer, in a fraction of its bytes; an unknown detail is a 422 naming the field."""
    body = {"contract": LESSON_TEXT, "figures": True}
    full = client.post("/api/estimate", json=body | {"detail": "full"})
    page = client.post("/api/estimate", json=body | {"detail": "page"})
    assert page.status_code == 200 and page.headers["content-type"] == "application/json"
    compact = page.json()
    assert sorted(compact) == ["figures", "findings", "fits", "headline", "kind", "tables"]
    assert all(compact[key] == full.json()[key] for key in compact if key != "tables")   # the tables: the page's
    assert [f["layout"]["title"]["text"] for f in compact["figures"]][0] == "Memory per accelerator"
    assert len(page.content) < len(full.content) / 1.5
    tables = compact["tables"]   # rows of text, the page builds the tables: the HTML report's rows
    memory = {a["title"]: a["rows"] for a in tables["accounts"]}["Accelerator memory (per accelerator)"]
    assert ["planned_device_bytes", "25.2 GB"] in [row[:2] for row in memory]
    assert ["device_memory_bytes", "32 GB"] in [row[:2] for row in tables["inputs"]]
    from botec.contract import load_contract
    from botec.estimation import estimate
    from botec.report.html import tables_html

    report = tables_html(estimate(load_contract(LESSON)))
    assert all(f"<code>{row[0]}</code>" in report for a in tables["accounts"] for row in a["rows"])
    # the rows `botec estimate` shows; every step with details, as `botec estimate --details`
    names = [row[0] for row in tables["inputs"]] + [row[0] for a in tables["accounts"] for row in a["rows"]]
    every = client.post("/api/estimate", json=body | {"detail": "page", "details": True}).json()["tables"]
    every_name = [row[0] for row in every["inputs"]] + [row[0] for a in every["accounts"] for row in a["rows"]]
    # 327 quantities: issue 20 added routed_experts_per_device; issue 28 daly_checkpoint_interval_seconds and
    # daly_interval_wall_seconds (the optimal interval is the better of Daly's and the stated one); 334: issue 30's
    # op-level SAC (selective_recompute_policy, sac_recomputed_matmul_parameters_per_layer, sac_activation_width,
    # sac_activation_bytes_per_layer) and tp_, dp_ and shard_collective_table_index (which collectives NCCL's
    # measured tables price); 338: issue 30's runtime memory and gradient timing (allocator_workspace_bytes,
    # gradients_freed_between_steps, transient_gradient_bytes, gradient_activation_overlap_bytes); 348: issue 30's
    # collectives across nodes (dp_ and shard_ranks_per_node, collective_nvlink_bytes_per_s, collective_node_kind)
    # and their granularity (collective_root_units, gradient_ and gather_bucket_parameters, gradient_bucket_bytes,
    # gradient_collectives_per_reduction, parameter_collectives_per_gather); 354: issue 30's overlap from the
    # schedule (tp_comm_overlap, tp_overlap_sm_share, exposed_tp_communication_seconds; data_parallel_overlap_stated,
    # data_parallel_schedule, exposed_bucket_share; data_parallel_overlap an output instead of an input)
    assert set(names) < set(every_name) and len(every_name) == 354 and len(names) == 115
    assert "tensor_parallel" in every_name and "tensor_parallel" not in names        # the layout line says it
    assert "pipeline_bubble_seconds" in every_name and "pipeline_bubble_seconds" not in names   # 0 s: one stage
    terminal = subprocess.run([str(Path(sys.executable).with_name("botec")), "estimate"], capture_output=True,
                              text=True, env=dict(os.environ, COLUMNS="200")).stdout
    import re

    assert {name for name in re.findall(r"^ ([a-z_0-9]+) ", terminal, re.M) if name in every_name} == set(names)
    wrong = client.post("/api/estimate", json=body | {"detail": "everything"})
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "detail"


def test_the_tornado_comes_when_asked(client):
    """The sensitivity tornado (the costliest figure) is left out with ``tornado: false`` and answered alone by
    /api/sensitivity: the same figure as in the full answer."""
    body = {"contract": LESSON_TEXT, "figures": True, "detail": "page"}
    titles = [f["layout"]["title"]["text"] for f in client.post("/api/estimate", json=body).json()["figures"]]
    assert titles[-1] == "Sensitivity of run_seconds (change from 8.68 hours)"
    without = client.post("/api/estimate", json=body | {"tornado": False}).json()["figures"]
    assert [f["layout"]["title"]["text"] for f in without] == titles[:-1]
    alone = client.post("/api/sensitivity", json={"contract": LESSON_TEXT})
    assert alone.status_code == 200 and alone.json()["figure"]["layout"]["title"]["text"] == titles[-1]
    bad = client.post("/api/sensitivity", json={"contract": "workload: 5"})
    assert bad.status_code == 422 and bad.json()["error"]["field"]


def test_json_answers_stay_json_for_any_value():
    """A non-finite float (JSON has none) is written as null; a lone surrogate, which UTF-8 cannot carry,
    as an escape: never a 500."""
    from botec.web.answers import json_response

    assert json.loads(json_response({"a": float("nan"), "b": [float("inf"), 1.5]}).body) == {"a": None,
                                                                                             "b": [None, 1.5]}
    assert json.loads(json_response({"name": "x\ud800y"}).body) == {"name": "x\ud800y"}


def test_overrides_change_the_estimate(client):
    payload = client.post("/api/estimate", json={"contract": LESSON_TEXT,
                                                  "overrides": {"strategy.micro_batch_size": 8}}).json()
    # (16 + 8 × 1.07 + 2) GB × 1.25
    assert payload["quantities"]["planned_device_bytes"] == pytest.approx(33.2e9, rel=2e-3)
    memory = [f for f in payload["findings"] if f["account"] == "memory"][0]
    # 26.6 GB needed fits the 32 GB device only by eating the 25 % headroom: it does not fit (issue 28)
    assert memory["level"] == "fail" and memory["message"].startswith("does not fit within the headroom")
    assert payload["fits"] is False


def test_explain_report_catalog_and_openapi(client):
    lines = client.post("/api/explain", json={"contract": LESSON_TEXT, "quantity": "planned_device_bytes"}).json()
    assert lines["lines"][0]["text"].endswith("= (18.1 + 0 + 2 − 0) GB × 1.25 = 25.2 GB")
    assert lines["lines"][1]["text"].endswith("= 16 GB + 2.15 GB + 0 B + 0 B − 0 B − 0 B − 0 B = 18.1 GB")
    report = client.post("/api/report", json={"contract": LESSON_TEXT})
    assert report.status_code == 200 and "attachment" in report.headers["content-disposition"]
    assert "Plotly" in report.text and "25.2 GB" in report.text
    catalog = client.get("/api/catalog").json()
    assert {"h100-sxm", "mi300x"} <= {a["key"] for a in catalog["accelerators"]}
    spec = client.get("/openapi.json").json()
    assert {"/api/estimate", "/api/explain", "/api/catalog", "/api/report", "/api/sweep"} <= set(spec["paths"])


@pytest.mark.parametrize("body, status, fragment", [
    (b"{not json", 422, "malformed JSON body"),
    (b'{"contract": "workload: [1"}', 422, "malformed YAML"),
    (b'{"contract": "x: 1", "colour": "red"}', 422, "Extra inputs are not permitted"),
    (b"x" * (MAX_BODY_BYTES + 10), 413, "larger than"),
])
def test_bad_requests_get_4xx_with_a_message(client, body, status, fragment):
    response = client.post("/api/estimate", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert fragment in response.json()["error"]["message"]


def test_contract_errors_name_the_field(client):
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT.replace("memory: 32 GB", "memory: 32 GX")})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "supply.accelerator.memory"
    unknown = client.post("/api/estimate", json={"contract": LESSON_TEXT.replace("  count: 4 ", "  cuont: 4 ")})
    assert unknown.json()["error"]["message"].startswith("unknown field; did you mean 'count'?")


def test_no_file_is_read_for_a_request(client):
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT, "overrides": {
        "workload.model": {"config": "/etc/passwd"}}})
    assert response.status_code == 422 and response.json()["error"]["field"] == "workload.model.config"


def test_sweep_beyond_the_cap(client):
    response = client.post("/api/sweep", json={"contract": LESSON_TEXT,
                                               "axes": ["supply.count=1..1000", "strategy.micro_batch_size=1..1000"]})
    assert response.status_code == 422 and "cap" in response.json()["error"]["message"]
    ok = client.post("/api/sweep", json={"contract": LESSON_TEXT, "axes": ["strategy.micro_batch_size=12..14"]})
    # 12 and 13 fit the 32 GB device only by eating the headroom (fits_device), 14 not even that (issue 28)
    assert ok.json()["columns"][-2:] == ["fits", "fits_device"]
    assert [row[-2:] for row in ok.json()["rows"]] == [[False, True], [False, True], [False, False]]


# --- attacks (issue 15) -------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["evil.example", "rebind.attacker.example:80", "127.0.0.1.evil.example",
                                  "localhost:8080", "", "[::2]"])
def test_a_foreign_host_header_gets_400(client, host):
    """DNS rebinding: a page on another name that resolves to 127.0.0.1 must not reach the API."""
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT}, headers={"host": host})
    assert response.status_code == 400
    assert "is not served here" in response.json()["error"]["message"]
    assert client.get("/api/examples", headers={"host": host}).status_code == 400


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST:80"])
def test_loopback_host_headers_are_served(client, host):
    assert client.get("/api/examples", headers={"host": host}).status_code == 200


def test_allowed_hosts_are_added_by_name_or_name_and_port():
    added = TestClient(create_app(allowed_hosts=["box.lan", "proxy.lan:443", "::1"]), base_url="http://box.lan")
    assert added.get("/api/examples").status_code == 200
    assert added.get("/api/examples", headers={"host": "box.lan:8080"}).status_code == 400   # not the served port
    assert added.get("/api/examples", headers={"host": "proxy.lan:443"}).status_code == 200
    assert added.get("/api/examples", headers={"host": "other.lan"}).status_code == 400


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "https://127.0.0.1", "http://localhost:9999",
                                    "http://127.0.0.1/x"])
def test_a_cross_origin_post_gets_403(client, origin):
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT}, headers={"origin": origin})
    assert response.status_code == 403
    assert "cross-origin" in response.json()["error"]["message"]


def test_a_same_origin_post_is_served(client):
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT}, headers={"origin": "http://127.0.0.1"})
    assert response.status_code == 200


def test_an_oversized_body_is_refused_before_it_is_parsed(client, monkeypatch):
    import botec.web.answers as web

    def must_not_parse(*args, **kwargs):
        raise AssertionError("parsed an oversized body")

    monkeypatch.setattr(web, "parse_text", must_not_parse)
    big = b'{"contract": "' + b"x" * MAX_BODY_BYTES + b'"}'
    stated = client.post("/api/estimate", content=big, headers={"content-type": "application/json"})
    assert stated.status_code == 413 and "larger than 256 KiB" in stated.json()["error"]["message"]

    def chunks():   # no Content-Length: the streamed size is counted
        for _ in range(MAX_BODY_BYTES // 4096 + 2):
            yield b"x" * 4096

    streamed = client.post("/api/estimate", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and "larger than 256 KiB" in streamed.json()["error"]["message"]
    lying = client.post("/api/estimate", content=b"{}", headers={"content-type": "application/json",
                                                               "content-length": "-1"})
    assert lying.status_code in (400, 413)


def test_duplicate_keys_in_a_request_contract_are_refused(client):
    response = client.post("/api/estimate", json={"contract": LESSON_TEXT.replace("  count: 4 ", "  count: 4\n  count: 4000 ")})
    assert response.status_code == 422 and "stated twice" in response.json()["error"]["message"]


@pytest.mark.parametrize("name, fallback, encoded", [
    ("résumé ☃", "r_sum_ _", "r%C3%A9sum%C3%A9%20%E2%98%83"),
    ("a\r\nSet-Cookie: pwn=1\r\nX-Evil: 1", "aSet-Cookie: pwn=1X-Evil: 1", "aSet-Cookie%3A%20pwn%3D1X-Evil%3A%201"),
    ('x"; filename*=UTF-8\'\'evil.exe; a="', "x_; filename*=UTF-8''evil.exe; a=_",
     "x%22%3B%20filename%2A%3DUTF-8%27%27evil.exe%3B%20a%3D%22"),
])
@pytest.mark.parametrize("format, suffix", [("html", ".html"), ("markdown", ".md")])
def test_any_contract_name_gives_a_safe_download_header(client, name, fallback, encoded, format, suffix):
    import json as json_module

    text = LESSON_TEXT.replace("name: ", f"name: {json_module.dumps(name)} #", 1)
    response = client.post(f"/api/report?format={format}", json={"contract": text})
    assert response.status_code == 200, response.text
    assert response.headers["content-disposition"] == \
        f"attachment; filename=\"{fallback}{suffix}\"; filename*=UTF-8''{encoded}{suffix}"
    assert "set-cookie" not in response.headers and "x-evil" not in response.headers


def test_the_server_exits_on_sigterm(tmp_path):
    import signal
    import subprocess
    import sys

    import httpx

    port = _free_port()
    process = subprocess.Popen([str(Path(sys.executable).parent / "botec"), "serve", "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 60
        while True:   # wait until it answers
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/examples", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.time() < deadline, process.stdout.read().decode()
            time.sleep(0.1)
        assert httpx.get(f"http://127.0.0.1:{port}/api/examples", headers={"host": "evil.example"}).status_code == 400
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) in (0, -signal.SIGTERM)   # uvicorn re-raises the signal once shut down
    finally:
        process.kill()
        process.wait()


# --- a real server on loopback ------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    import uvicorn

    from botec.web.server import server_options

    port = _free_port()
    instance = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                             **server_options()))   # as `botec serve` runs it
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not instance.started and time.time() < deadline:
        time.sleep(0.05)
    assert instance.started
    yield f"http://127.0.0.1:{port}"
    instance.should_exit = True
    thread.join(timeout=10)


def test_200_concurrent_estimates_on_loopback(server):
    import httpx

    async def one(client):
        start = time.perf_counter()
        response = await client.post(f"{server}/api/estimate", json={"contract": LESSON_TEXT})
        return response, time.perf_counter() - start

    async def all_of_them():
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client) for _ in range(200)))

    results = asyncio.run(all_of_them())
    assert all(r.status_code == 200 for r, _ in results)
    assert all(r.json()["quantities"]["planned_device_bytes"] == pytest.approx(25.2e9, rel=2e-3) for r, _ in results)
    latencies = sorted(t for _, t in results)
    print(f"\n200 concurrent /api/estimate: p50 {statistics.median(latencies):.2f} s, "
          f"p99 {latencies[int(0.99 * len(latencies)) - 1]:.2f} s")


# --- a real browser -----------------------------------------------------------------------------------

needs_browser = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")


def _browser(playwright):
    """Debian's Chromium. Each expectation waits up to 30 s (a deadline, not a sleep: it passes as soon as the page
    shows it): every change goes through the server's parse and estimate, which two busy cores slow past
    Playwright's default 5 s."""
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


@needs_browser
def test_the_page_in_a_real_browser(server, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        console = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(server)
        page.select_option("#example", "lesson-finetune-1b")
        page.click("#load-example")
        expect(page.locator("#findings")).to_contain_text("fits: 25.2 GB of 32 GB planned")
        expect(page.locator("#figure-0 .main-svg").first).to_be_visible()
        expect(page.locator("#figure-3 .gtitle")).to_contain_text("Sensitivity of run_seconds")  # asked for after
        planned = page.locator("#tables tr", has=page.get_by_text("planned_device_bytes", exact=True))
        expect(planned.locator("td.value")).to_have_text("25.2 GB")      # the tables, drawn from rows of text
        expect(page.locator("#tables h2").first).to_have_text("Inputs and assumptions")
        layout_row = page.locator("#tables tr", has=page.get_by_text("tensor_parallel", exact=True))
        expect(layout_row).to_have_count(0)          # the rows `botec estimate` shows: the layout line says TP
        page.check("#details")                       # every step, as --details
        expect(layout_row).to_have_count(1)
        page.screenshot(path=str(ARTIFACTS / "1-lesson.png"), full_page=True)

        batch = page.locator('input[data-path="strategy.micro_batch_size"]')
        expect(batch).to_have_value("2")
        batch.fill("8")
        batch.dispatch_event("change")
        expect(page.locator("#findings")).to_contain_text("does not fit within the headroom: 33.2 GB planned")
        batch.fill("14")
        batch.dispatch_event("change")
        expect(page.locator("#findings")).to_contain_text("does not fit: 41.3 GB planned against 32 GB")
        page.screenshot(path=str(ARTIFACTS / "2-batch-8.png"), full_page=True)

        bad = tmp_path / "bad.yaml"
        bad.write_text(LESSON_TEXT.replace("memory: 32 GB", "memory: 32 GX"))
        page.set_input_files("#upload", str(bad))
        expect(page.locator("#contract-error")).to_contain_text("supply.accelerator.memory: unknown unit 'GX'")
        expect(page.locator('[data-error-for="supply.accelerator.memory"]')).to_contain_text("unknown unit 'GX'")
        page.screenshot(path=str(ARTIFACTS / "3-malformed.png"), full_page=True)

        page.select_option("#example", "lesson-finetune-1b")
        page.click("#load-example")
        expect(page.locator("#findings")).to_contain_text("25.2 GB")
        with page.expect_download() as download_info:
            page.click("#download-report")
        target = tmp_path / "report.html"
        download_info.value.save_as(target)
        assert "botec estimate: lesson-finetune-1b" in target.read_text()
        browser.close()
    assert not [m for m in console if "Content Security Policy" in m]     # the page lives within its own CSP


@needs_browser
def test_one_state_stale_results_permalink_and_a_narrow_screen(server, tmp_path):
    """The form and the text are one state; a pasted contract starts clean; stale results are marked;
    the URL restores the contract; at 400 px nothing scrolls sideways."""
    import json

    from playwright.sync_api import expect, sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page.goto(server)
        expect(page.locator("#findings")).to_contain_text("fits: 25.2 GB of 32 GB planned")   # not an empty page
        assert page.locator("#example option").count() >= 13                              # every example
        page.select_option("#example", "serve-llama3.1-8b-h100")                          # no Load click
        rate = page.locator('[data-path="workload.traffic.requests_per_second"]')
        expect(rate).to_have_value("20")
        assert page.locator('select[data-path="supply.accelerator"] option[value="h200"]').count() == 1
        assert page.locator('select[data-path="workload.model"] option[value="llama-3.1-70b"]').count() == 1
        rate.fill("100")
        rate.dispatch_event("change")
        expect(page.locator("#contract")).to_have_value(SERVE_TEXT.replace("second: 20", "second: 100"))
        # ⌈100 / r⌉ replicas at 100/s, r the rate one replica takes at the 0.8 utilization cap: 0.8 × its
        # 24.9 requests/s of decode capacity = 19.9/s, so 6 (5 × 19.9 = 99.7 < 100); the figure the
        # estimate of the 20/s contract gives per replica (a serving estimate with its figures takes ~10 s
        # on a loaded machine: the tornado)
        import math

        from botec.api import estimate

        per_replica = estimate(REPO / "examples" / "serve-llama3.1-8b-h100.yaml").quantities
        rate_per_replica = per_replica["requests_per_s_per_replica"].value
        assert rate_per_replica == pytest.approx(0.8 * per_replica["decode_requests_per_s_per_replica"].value)
        expect(page.locator("#headline")).to_contain_text(f"× {math.ceil(100 / rate_per_replica)} replicas",
                                                          timeout=90_000)
        downloads = {}
        for button, name in (("#download-contract", "contract.yaml"), ("#download-json", "estimate.json")):
            with page.expect_download() as info:
                page.click(button)
            info.value.save_as(tmp_path / name)
            downloads[name] = (tmp_path / name).read_text()
        assert "requests_per_second: 100\n" in downloads["contract.yaml"]
        rates = {q["name"]: q["value"] for q in json.loads(downloads["estimate.json"])["quantities"]}
        assert rates["requests_per_s"] == 100
        page.screenshot(path=str(ARTIFACTS / "5-edit-rate-100.png"), full_page=True)
        permalink = page.url

        rate.fill("lots")                                          # a bad entry: the old results are stale
        rate.dispatch_event("change")
        expect(page.locator('[data-error-for="workload.traffic.requests_per_second"]')).to_be_visible()
        expect(page.locator("#results")).to_have_class("stale")
        expect(page.locator("#stale")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "6-stale.png"), full_page=True)

        page.select_option("#example", "lesson-finetune-1b")
        batch = page.locator('[data-path="strategy.micro_batch_size"]')
        expect(batch).to_have_value("2")
        page.fill("#add-path", "supply.price_per_accelerator_hour")     # a field the contract lacks
        page.fill("#add-value", "$2/h")
        page.click("#add-field")
        expect(page.locator('[data-path="supply.price_per_accelerator_hour"]')).to_have_value("$2/h")
        expect(page.locator("#findings")).to_contain_text("costs $69.44")               # 34.7 accelerator-hours × $2
        batch.fill("16")
        batch.dispatch_event("change")
        lesson = LESSON_TEXT.replace("micro_batch_size: 2 ", "micro_batch_size: 16 ").replace(
            'rate"}\n', 'rate"}\n  price_per_accelerator_hour: $2/h\n')
        expect(page.locator("#contract")).to_have_value(lesson)
        page.locator("#contract").dispatch_event("paste")            # paste another contract over it
        page.locator("#contract").fill(MIXTRAL_TEXT)
        expect(page.locator('[data-path="strategy.micro_batch_size"]')).to_have_value("1")   # Mixtral's, not 16
        expect(page.locator("#findings")).to_contain_text("fits")
        expect(page.locator("#contract-error")).to_have_text("")
        expect(page.locator("#results")).not_to_have_class("stale")
        page.screenshot(path=str(ARTIFACTS / "7-pasted.png"), full_page=True)

        narrow = browser.new_page(viewport={"width": 400, "height": 900})   # the permalink, on a phone
        narrow.goto(permalink)
        expect(narrow.locator("#contract")).to_have_value(SERVE_TEXT.replace("second: 20", "second: 100"))
        expect(narrow.locator("#figure-0 .main-svg").first).to_be_visible(timeout=90_000)
        assert narrow.evaluate("document.documentElement.scrollWidth") <= 400
        for control in narrow.locator("button, select, input, textarea").all():
            box = control.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 400, control
        narrow.screenshot(path=str(ARTIFACTS / "8-permalink-400px.png"), full_page=True)
        browser.close()


@needs_browser
def test_the_html_report_opens_offline_with_every_plot(tmp_path, cli):
    from playwright.sync_api import sync_playwright

    report = tmp_path / "report.html"
    code, out, err = cli("report", str(LESSON), "-o", str(report))
    assert code == 0, err
    requests = []
    with sync_playwright() as playwright:
        browser = _browser(playwright)
        page = browser.new_page()
        page.on("request", lambda request: requests.append(request.url))
        page.goto(report.as_uri())
        page.wait_for_selector("#figure-3 .main-svg")
        figures = page.locator("div.figure .plotly-graph-div").count()
        rendered = page.locator("div.figure .main-svg").count()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "4-report.png"), full_page=True)
        browser.close()
    assert figures == 4 and rendered >= 4
    assert [url for url in requests if not url.startswith("file://")] == []     # nothing from the network


SERVE_TEXT = (REPO / "examples" / "serve-llama3.1-8b-h100.yaml").read_text()
MIXTRAL_TEXT = (REPO / "examples" / "mixtral-8x7b-finetune.yaml").read_text()


def test_a_form_edit_is_written_into_the_contract_text(client):
    edited = client.post("/api/contract", json={"contract": SERVE_TEXT,
                                                "overrides": {"workload.traffic.requests_per_second": "100"}}).json()
    assert "    requests_per_second: 100\n" in edited["contract"]
    assert edited["contract"] == SERVE_TEXT.replace("requests_per_second: 20", "requests_per_second: 100")  # comments kept
    fields = {f["path"]: f for f in edited["fields"]}
    assert fields["workload.traffic.requests_per_second"]["value"] == 100
    assert "h200" in fields["supply.accelerator"]["choices"] and fields["supply.accelerator"]["value"] == "h100-sxm"
    assert "llama-3.1-70b" in fields["workload.model"]["choices"]
    # a field the text lacks is added; a JSON contract stays JSON
    added = client.post("/api/contract", json={"contract": SERVE_TEXT,
                                               "overrides": {"supply.cluster.node": "dgx-h100"}})
    node = {f["path"]: f for f in added.json()["fields"]}["supply.cluster.node"]
    assert node["value"] == "dgx-h100" and "dgx-a100" in node["choices"]
    assert added.json()["contract"] == SERVE_TEXT.replace(
        "list price\"}\n", "list price\"}\n  cluster:\n    node: dgx-h100\n")      # in its section, comments kept
    as_json = '{"workload": {"kind": "serving", "model": "llama-3.1-8b"}, "supply": {"accelerator": "h100-sxm"}}'
    edited = client.post("/api/contract", json={"contract": as_json, "overrides": {"supply.accelerator": "h200"}})
    assert edited.json()["contract"] == as_json.replace('"h100-sxm"', '"h200"')
    addable = {f["path"]: f["description"] for f in edited.json()["addable"]}   # the schema's fields not given
    assert "workload.model.parameters" not in addable      # the model is a catalog name: no architecture fields
    assert "supply.cluster.node" in addable and "supply.accelerator" not in addable
    assert addable["workload.latency.percentile"] and "workload.traffic.prompt_tokens" not in {
        f["path"] for f in client.post("/api/contract", json={"contract": SERVE_TEXT}).json()["addable"]}
    broken = client.post("/api/contract", json={"contract": "workload: [1", "overrides": {}})
    assert broken.status_code == 422 and broken.json()["error"]["field"] == "contract"


def test_every_runnable_example_is_offered(client):
    offered = client.get("/api/examples").json()
    runnable = {p.stem for p in (REPO / "examples").glob("*.yaml") if "config:" not in p.read_text()}
    assert len(runnable) >= 12 and runnable <= set(offered)
    for name, text in offered.items():
        assert client.post("/api/estimate", json={"contract": text}).status_code == 200, name


def test_no_request_gets_a_500(client):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False, allow_infinity=False),
                        st.text(max_size=20))
    bodies = st.one_of(
        st.dictionaries(st.sampled_from(["contract", "overrides", "units", "figures", "quantity", "axes", "x"]),
                        st.one_of(scalars, st.lists(scalars, max_size=3),
                                  st.dictionaries(st.text(max_size=30), scalars, max_size=3)), max_size=4),
        st.fixed_dictionaries({"contract": st.just(LESSON_TEXT),
                               "overrides": st.dictionaries(st.sampled_from(["supply.count", "strategy.micro_batch_size",
                                                                             "assumptions.headroom", "workload.model",
                                                                             "supply.accelerator", "strategy.x"]),
                                                            scalars, max_size=2)}),
    )

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.sampled_from(["/api/estimate", "/api/explain", "/api/report", "/api/sweep", "/api/contract"]), bodies)
    def check(path, body):
        response = client.post(path, json=body)
        assert response.status_code < 500, (path, body, response.text)
        if response.status_code >= 400:
            assert response.json()["error"]["message"]

    check()
