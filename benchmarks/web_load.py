"""Load test of `botec serve` on loopback: server CPU per request, throughput and p99, against a trivial endpoint.

    python benchmarks/web_load.py [--requests 200] [--workers 1] [--skip-page]

Starts `botec serve` in a subprocess on a free loopback port and sends four rounds of N concurrent
requests: `GET /api/health` (the web stack alone), `POST /api/estimate`, the page's request
(`/api/estimate` with ``figures``, ``detail: "page"``, ``tornado: false``) and the page's second
request (`/api/sensitivity`, the tornado). Every estimate is a different contract (``workload.tokens``
varies), so no cache flatters it; every answer is checked. For each round it prints failures, requests/s, p50/p99
latency and the server's CPU per request (user + system time of the server and its workers, from
/proc, before and after the round). Last, the event loop's freedom: ``GET /api/health`` every 10 ms while four
250 KB contracts (the lesson's with a section of 6,000 small entries, about 1 s each to parse) are sent to
``/api/contract`` at once; its p50/p99/max (issue 21's target: p99 under 100 ms). Only 127.0.0.1 is contacted;
Linux only (/proc).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live children (uvicorn's worker processes)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    children = Path(f"/proc/{pid}/task/{pid}/children")
    for each in [pid] + [int(c) for c in (children.read_text().split() if children.exists() else [])]:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def big_contract(text: str, size_bytes: int = 250_000) -> str:
    """``text`` with a section of small entries appended up to ``size_bytes`` (slow to parse; refused as unknown
    by /api/estimate, written back by /api/contract)."""
    lines, size = [text, "notes:\n"], len(text) + 7
    while size < size_bytes - 40:
        lines.append(f"  note_{len(lines):06d}: {{value: {len(lines)}, source: x}}\n")
        size += len(lines[-1])
    return "".join(lines)


def health_while_parsing(base: str, contract: str, parses: int = 4) -> None:
    """/api/health's latency, asked every 10 ms while ``parses`` 250 KB contracts go through /api/contract."""
    import httpx

    big = big_contract(contract)

    async def run():
        latencies, parsing = [], True
        async with httpx.AsyncClient(timeout=600) as client:
            async def poll():
                while parsing:
                    start = time.perf_counter()
                    assert (await client.get(f"{base}/api/health")).status_code == 200
                    latencies.append(time.perf_counter() - start)
                    await asyncio.sleep(0.01)

            poller = asyncio.create_task(poll())
            started = time.perf_counter()
            answers = await asyncio.gather(*(client.post(f"{base}/api/contract", json={"contract": big})
                                             for _ in range(parses)))
            wall = time.perf_counter() - started
            parsing = False
            await poller
        assert all(a.status_code == 200 for a in answers), [a.status_code for a in answers]
        latencies.sort()
        print(f"GET /api/health every 10 ms while {parses} {len(big) / 1000:.0f} KB contracts parse "
              f"({wall:.1f} s): {len(latencies)} answered; p50 {statistics.median(latencies) * 1000:.0f} ms, "
              f"p99 {latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000:.0f} ms, "
              f"max {latencies[-1] * 1000:.0f} ms")

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--skip-page", action="store_true", help="leave out the page's two rounds (with figures)")
    args = parser.parse_args()

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    botec = Path(sys.executable).parent / "botec"
    server = subprocess.Popen([str(botec), "serve", "--port", str(port), "--workers", str(args.workers)])
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            if httpx.get(f"{base}/api/health", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.time() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.1)
    contract = resources.files("botec.contracts").joinpath("lesson-finetune-1b.yaml").read_text()
    assert "  tokens: 1B " in contract

    async def one(client, i: int, kind: str):
        start = time.perf_counter()
        if kind == "health":
            response = await client.get(f"{base}/api/health")
            return response.status_code == 200, time.perf_counter() - start
        body = {"contract": contract.replace("  tokens: 1B ", f"  tokens: {1_000_000_000 + i * 1000} ", 1)}
        if kind == "page":                  # what page.html asks first: what it draws, the figures but the tornado
            body |= {"figures": True, "detail": "page", "tornado": False}
        response = await client.post(f"{base}/api/{'sensitivity' if kind == 'tornado' else 'estimate'}", json=body)
        if response.status_code != 200:
            return False, time.perf_counter() - start
        answer = response.json()
        if kind == "tornado":               # then the tornado, drawn when it comes
            ok = answer["figure"]["layout"]["title"]["text"].startswith("Sensitivity of run_seconds")
        elif kind == "page":
            rows = [row[:2] for account in answer["tables"]["accounts"] for row in account["rows"]]
            ok = ["planned_device_bytes", "25.2 GB"] in rows and len(answer["figures"]) == 3
        else:
            ok = abs(answer["quantities"]["planned_device_bytes"] / 25.2e9 - 1) < 2e-3   # the default: values
        return ok, time.perf_counter() - start

    async def round_of(kind: str, offset: int):
        limits = httpx.Limits(max_connections=args.requests)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            return await asyncio.gather(*(one(client, offset + i, kind) for i in range(args.requests)))

    rounds = ["health", "estimate"] + ([] if args.skip_page else ["page", "tornado"])
    throughput = {}
    try:
        asyncio.run(round_of("health", 0))        # warm up: imports, first-request caches
        asyncio.run(round_of("estimate", 10 ** 6))
        for n, kind in enumerate(rounds):
            cpu = _cpu_seconds(server.pid)
            started = time.perf_counter()
            results = asyncio.run(round_of(kind, n * args.requests))
            wall = time.perf_counter() - started
            cpu = _cpu_seconds(server.pid) - cpu
            latencies = sorted(t for _, t in results)
            failed = sum(1 for ok, _ in results if not ok)
            throughput[kind] = args.requests / wall
            label = {"health": "GET /api/health", "estimate": "POST /api/estimate",
                     "page": "POST /api/estimate with figures, detail page (the page)",
                     "tornado": "POST /api/sensitivity (the page's tornado)"}[kind]
            print(f"{args.requests} concurrent {label}: {failed} failed; {throughput[kind]:.0f} requests/s; "
                  f"p50 {statistics.median(latencies) * 1000:.0f} ms, "
                  f"p99 {latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000:.0f} ms; "
                  f"server CPU {cpu / args.requests * 1000:.2f} ms per request ({args.workers} worker(s))")
        for kind in rounds[1:]:
            print(f"{kind}: {throughput[kind] / throughput['health']:.0%} of the trivial endpoint's throughput")
        health_while_parsing(base, contract)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
