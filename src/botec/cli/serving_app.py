"""`botec serve`: the local web app."""

from __future__ import annotations

import typer

from botec.cli.common import app
from botec.errors import UserError


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port."),
    allowed_host: list[str] = typer.Option([], "--allowed-host", help=(
        "Also answer requests whose Host header names this (NAME, or NAME:PORT for another port); repeatable. "
        "Loopback (127.0.0.1, localhost, [::1]) and --host are always allowed; any other Host gets 400.")),
    workers: int = typer.Option(1, "--workers", min=1, max=64, help="Worker processes (each uses one core)."),
    docs: bool = typer.Option(False, "--docs", help=(
        "Also serve the API's interactive documentation at /docs and /redoc; their scripts and styles load from "
        "a CDN (cdn.jsdelivr.net), so the browser goes online for them. Without it: /openapi.json only.")),
) -> None:
    """Run the local web app: pick or paste a contract, edit its inputs, see accounts, findings and plots.

    Limits: a request's header may hold 64 KiB (else 431) and must arrive, with its body, within 10 s (else
    408); at most 2,048 connections (then 503); parsing and estimating run in a pool of 2 threads with up to 256
    requests admitted (then 503 with Retry-After). On SIGTERM or Ctrl-C it stops accepting at once, gives the
    requests in progress 5 s to finish (then each gets 503) and exits.

    Example: `botec serve --port 8765`, then open http://127.0.0.1:8765
    """
    import os
    import sys

    try:
        import uvicorn

        from botec.web.guard import ALLOWED_HOSTS_ENV, DOCS_ENV   # not the app: built on import
        from botec.web.server import server_options
    except ImportError:
        raise UserError("the web app needs FastAPI and uvicorn: pip install 'botec[web]'") from None
    for name in allowed_host:
        if not name.strip() or any(c in name for c in "/, \t") or name.count("://"):
            raise UserError(f"--allowed-host {name!r}: give a host name or address, optionally with :PORT")
    extra = list(allowed_host) + ([] if host in ("0.0.0.0", "::", "") else [host])
    os.environ[ALLOWED_HOSTS_ENV] = ",".join(extra)     # read by the app in every worker process
    os.environ[DOCS_ENV] = "1" if docs else "0"
    typer.echo(f"botec serving on http://{host}:{port} (Ctrl-C to stop)"
               + (" ; /docs loads swagger-ui from cdn.jsdelivr.net" if docs else ""), err=True)
    # the import string lets uvicorn start worker processes; a request still running DRAIN_SECONDS after SIGTERM
    # or Ctrl-C gets a 503 and is abandoned, so the server always exits
    uvicorn.run("botec.cli._process:served_app", factory=True, host=host, port=port, workers=workers, log_level="warning",
                **server_options())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)   # do not wait for a worker thread still computing an abandoned request
