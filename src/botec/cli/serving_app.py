"""`botec serve`: the local web app."""

from __future__ import annotations

import typer

from botec.cli.common import app
from botec.errors import UserError


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
    port: int = typer.Option(8765, "--port", min=1, max=65535, help="Port."),
) -> None:
    """Run the local web app: pick or paste a contract, edit its inputs, see accounts, findings and plots.

    Example: `botec serve --port 8765`, then open http://127.0.0.1:8765
    """
    try:
        import uvicorn

        from botec.web.app import app as web_app
    except ImportError:
        raise UserError("the web app needs FastAPI and uvicorn: pip install 'botec[web]'") from None
    typer.echo(f"botec serving on http://{host}:{port} (Ctrl-C to stop)", err=True)
    uvicorn.run(web_app, host=host, port=port, log_level="warning")
