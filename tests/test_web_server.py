"""The web server under abuse: slow clients, huge headers, big contracts, a full pool, shutdown; and the
security headers and the form's conflicting edits (issue 21). A real server runs on a free loopback port with
`botec serve`'s options (:func:`botec.web.server.server_options`), its timeouts set small."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httptools")

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from botec.web.app import create_app  # noqa: E402
from botec.web.pool import Busy, Pool  # noqa: E402
from botec.web.server import server_options  # noqa: E402

from conftest import LESSON  # noqa: E402

LESSON_TEXT = LESSON.read_text()


def _big_contract(size_bytes: int = 250_000) -> str:
    """The lesson's contract with a 250 KB section of small entries (slow to parse: ~1 s; refused as unknown)."""
    lines, size = [LESSON_TEXT, "notes:\n"], len(LESSON_TEXT) + 7
    while size < size_bytes - 40:
        lines.append(f"  note_{len(lines):06d}: {{value: {len(lines)}, source: x}}\n")
        size += len(lines[-1])
    return "".join(lines)


class _Server:
    """A real uvicorn server in a thread, on a free port, as `botec serve` configures it (``options`` change it)."""

    def __init__(self, app, **options):
        import uvicorn

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="critical",
                                                    **server_options(**options)))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        _until(lambda: self.server.started, 30, "the server did not start")
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=30)


def _until(condition, seconds: float, failure: str):
    """Poll ``condition`` until it holds (its value) or ``seconds`` pass (then fail with ``failure``)."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, failure
        time.sleep(0.02)


def test_idle_partial_connections_neither_lock_out_a_new_client_nor_stay():
    """1,000 connections that sent half a request head: a new client is answered at once, and each of them
    is answered 408 and closed by the server's read timeout (set to 2 s here, 10 s in `botec serve`)."""
    with _Server(create_app(), read_timeout_s=2) as server:
        idle = []
        for _ in range(1000):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            connection.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")   # and never the blank line
            idle.append(connection)
        try:
            answer = httpx.get(f"{server.url}/api/health", timeout=5)
            assert answer.status_code == 200 and answer.json()["status"] == "ok"
            answered = [connection.recv(200) for connection in idle]     # each waits for the server's timeout
            assert all(a.startswith(b"HTTP/1.1 408 Request Timeout") for a in answered), answered[0]
            assert b"did not arrive within 2 s" in answered[0]
            assert all(connection.recv(10) == b"" for connection in idle)             # and closed
        finally:
            for connection in idle:
                connection.close()


def test_a_header_over_64_kib_gets_431():
    """httptools reads a header of any size; the server counts the head's bytes: 60 KiB is served, 70 KiB is a
    431 and the connection is closed."""
    with _Server(create_app()) as server:
        def ask(header_bytes: int) -> bytes:
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
                connection.sendall(f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nX-Big: ".encode()
                                   + b"a" * header_bytes + b"\r\n\r\n")
                return connection.recv(4096)

        assert ask(60 * 1024).startswith(b"HTTP/1.1 200 OK")
        refused = ask(70 * 1024)
        assert refused.startswith(b"HTTP/1.1 431 Request Header Fields Too Large")
        assert b"the request's header is larger than 64 KiB" in refused


def test_health_is_answered_while_four_big_contracts_parse(monkeypatch):
    """Parsing runs in the pool, off the event loop: with four 250 KB contracts being parsed (all four in the
    pool: two parsing, two waiting), /api/health is answered before the first of them is. Each parse is held
    until health has answered (an event, not a race against the parse's speed): were the parse on the event
    loop, health could not be answered and the test would time out instead."""
    from botec.web import answers

    app = create_app()
    big = _big_contract()
    answered = threading.Event()
    original = answers.contract_answer

    def held(request):
        assert answered.wait(60), "health was never answered while the contracts waited in the pool"
        return original(request)

    monkeypatch.setattr(answers, "contract_answer", held)
    with _Server(app) as server:
        async def run() -> list[str]:
            finished: list[str] = []
            async with httpx.AsyncClient(timeout=120) as client:
                async def parse(i: int):
                    response = await client.post(f"{server.url}/api/contract", json={"contract": big})
                    assert response.status_code == 200, response.text
                    finished.append(f"contract {i}")

                parses = [asyncio.create_task(parse(i)) for i in range(4)]
                deadline = time.monotonic() + 30
                while app.state.pool.in_pool < 4:       # all four are in the pool now
                    assert time.monotonic() < deadline and not any(p.done() for p in parses)
                    await asyncio.sleep(0.005)
                health = await client.get(f"{server.url}/api/health")
                assert health.status_code == 200
                finished.append("health")
                answered.set()
                await asyncio.gather(*parses)
            return finished

        finished = asyncio.run(run())
        assert finished[0] == "health"   # the four parses then finish in the pool's order
        assert sorted(finished[1:]) == [f"contract {i}" for i in range(4)]


def test_a_full_pool_answers_503_with_retry_after():
    """Beyond the requests the pool admits, a request is refused at once (503, Retry-After), not queued."""
    release = threading.Event()

    async def two_at_once():
        pool = Pool(threads=1, admitted=1)
        first = asyncio.create_task(pool.run(release.wait, 30))
        while pool.in_pool < 1:
            await asyncio.sleep(0)
        with pytest.raises(Busy, match="1 requests are running or waiting"):
            await pool.run(len, "x")
        release.set()
        assert await first is True and pool.in_pool == 0

    asyncio.run(two_at_once())
    full = TestClient(create_app(pool=Pool(admitted=0)), base_url="http://127.0.0.1")
    answer = full.post("/api/estimate", json={"contract": LESSON_TEXT})
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert answer.json()["error"]["message"].startswith("the server is busy")
    assert full.get("/api/health").status_code == 200        # the health check is never in the pool


def test_a_request_still_running_after_the_drain_time_gets_503():
    """On shutdown, a request in progress has the drain time (1 s here) to finish; then it is answered 503
    "shutting down" (not uvicorn's bare 500) and the server stops, its worker thread abandoned."""
    app = create_app()
    stuck = threading.Event()

    @app.get("/stuck")
    async def stuck_endpoint():
        return await app.state.pool.run(stuck.wait, 60)

    server = _Server(app, drain_s=1).__enter__()
    try:
        async def run():
            async with httpx.AsyncClient(timeout=60) as client:
                request = asyncio.create_task(client.get(f"{server.url}/stuck"))
                deadline = time.monotonic() + 30
                while app.state.pool.in_pool < 1:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.005)
                server.server.should_exit = True     # what SIGTERM does
                return await request

        answer = asyncio.run(run())
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        assert answer.json()["error"]["message"] == "the server is shutting down; retry in a moment"
        server.thread.join(timeout=30)
        assert not server.thread.is_alive()
    finally:
        stuck.set()
        server.__exit__()


def test_every_answer_carries_the_security_headers():
    """CSP (the page's inline script by its hash, no inline script otherwise, fetch to this server only, no
    framing), nosniff, DENY, no referrer: on the page, the API, an error and a refused Host."""
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    answers = [client.get("/"), client.get("/api/health"), client.get("/nowhere"),
               client.get("/api/health", headers={"host": "evil.example"}),
               client.post("/api/estimate", json={"contract": "workload: [1"})]
    assert [a.status_code for a in answers] == [200, 200, 404, 400, 422]
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY" and answer.headers["referrer-policy"] == "no-referrer"
        policy = dict(d.strip().split(" ", 1) for d in answer.headers["content-security-policy"].split(";"))
        assert policy["default-src"] == "'none'" and policy["connect-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'"
        assert policy["script-src"].startswith("'self' 'sha256-") and "unsafe" not in policy["script-src"]


def test_docs_are_off_unless_asked_and_then_allowed_their_cdn():
    assert TestClient(create_app(), base_url="http://127.0.0.1").get("/docs").status_code == 404
    docs = TestClient(create_app(docs=True), base_url="http://127.0.0.1").get("/docs")
    assert docs.status_code == 200 and "cdn.jsdelivr.net" in docs.text
    assert "https://cdn.jsdelivr.net" in docs.headers["content-security-policy"]


@pytest.mark.parametrize("overrides, field, message", [
    ({"strategy.checkpoint": 1, "strategy.checkpoint.interval": "2 h"}, "strategy.checkpoint.interval",
     "'checkpoint' is not a section"),
    ({".": 1}, "overrides", "'.': expected a field's dotted path, such as strategy.micro_batch_size"),
    ({"strategy..micro_batch_size": 4}, "overrides", "'strategy..micro_batch_size': expected a field's dotted"),
])
def test_conflicting_form_edits_are_a_422_naming_the_field(overrides, field, message):
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    answer = client.post("/api/contract", json={"contract": LESSON_TEXT, "overrides": overrides})
    assert answer.status_code == 422 and answer.json()["error"]["field"] == field
    assert answer.json()["error"]["message"].startswith(message)


def test_a_section_replaced_then_edited_is_stated_once():
    """A whole section given, then a field in it: the text states the section once (not a second
    ``workload:`` at the end, which YAML would read as the last one), and an infinite value is null, not a 500."""
    import yaml

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    answer = client.post("/api/contract", json={"contract": LESSON_TEXT, "overrides": {
        "workload": {"kind": "training", "model": "llama-3.1-8b"}, "workload.tokens": "2B"}})
    assert answer.status_code == 200, answer.text
    text = answer.json()["contract"]
    assert text.count("\nworkload:") == 1 and yaml.safe_load(text)["workload"] == {
        "kind": "training", "model": "llama-3.1-8b", "tokens": "2B"}
    infinite = client.post("/api/contract", json={"contract": LESSON_TEXT.replace(
        "micro_batch_size: 2 ", "micro_batch_size: .inf ")})
    assert infinite.status_code == 200
    assert {f["path"]: f["value"] for f in infinite.json()["fields"]}["strategy.micro_batch_size"] is None
