"""Load test of `botec serve` on loopback: N concurrent /api/estimate requests of the reference workload.

    python benchmarks/web_load.py [--requests 200] [--figures]

Starts the app with uvicorn on a free loopback port, sends the requests at once, checks every answer,
prints p50/p90/p99 latency and throughput, and stops the server. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import threading
import time
from importlib import resources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--figures", action="store_true", help="ask for the figures too (as the page does)")
    args = parser.parse_args()

    import httpx
    import uvicorn

    from botec.web.app import app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    contract = resources.files("botec.contracts").joinpath("lesson-finetune-1b.yaml").read_text()
    url = f"http://127.0.0.1:{port}/api/estimate"

    async def one(client):
        start = time.perf_counter()
        response = await client.post(url, json={"contract": contract, "figures": args.figures})
        ok = response.status_code == 200 and response.json()["formatted"]["planned_device_bytes"] == "25.2 GB"
        return ok, time.perf_counter() - start

    async def run():
        async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=args.requests)) as client:
            return await asyncio.gather(*(one(client) for _ in range(args.requests)))

    started = time.perf_counter()
    results = asyncio.run(run())
    wall = time.perf_counter() - started
    server.should_exit = True
    thread.join(timeout=10)
    latencies = sorted(t for _, t in results)

    def percentile(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    failed = sum(1 for ok, _ in results if not ok)
    print(f"{args.requests} concurrent /api/estimate{' with figures' if args.figures else ''}: {failed} failed; "
          f"p50 {statistics.median(latencies):.2f} s, p90 {percentile(0.9):.2f} s, p99 {percentile(0.99):.2f} s; "
          f"{args.requests / wall:.1f} requests/s over {wall:.1f} s")


if __name__ == "__main__":
    main()
