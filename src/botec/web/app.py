"""`botec serve`: a local web app over the same quantity graph (FastAPI; ``pip install botec[web]``).

Pick or paste a contract, edit any input in the form, see the accounts, findings and figures
update; download the contract, the estimate and the report. The page keeps one state, the contract
text: a form edit is written into the text (``/api/contract``, comments kept) and the form is rebuilt
from it, so every download reproduces what is on screen; the URL's fragment holds the text (a
permalink). The JSON API (``/api/estimate``, ``/api/contract``, ``/api/explain``, ``/api/report``,
``/api/sweep``, ``/api/catalog``, ``/api/examples``, ``/api/sensitivity``) is described at ``/openapi.json``;
``/docs`` (swagger-ui, loaded from a CDN) only with ``botec serve --docs``.

The parts: :mod:`~botec.web.answers` (what each endpoint computes), :mod:`~botec.web.contract_text` (the form's
edits written into the text), :mod:`~botec.web.pool` (where that work runs: a bounded pool off the event loop;
beyond its bound, 503 with Retry-After), :mod:`~botec.web.guard` (hosts, origins, body size, security headers,
one-line errors), :mod:`~botec.web.server` (uvicorn's limits: header size, read timeout, connections, drain).

Safety: only loopback Host headers (and ``--host``/``--allowed-host``) are served and a foreign
``Origin`` is refused (against DNS rebinding); the request body is capped (``MAX_BODY_BYTES``) before it is
parsed; contracts are parsed with YAML's safe loader and validated; nothing in a request names a file to read
(``workload.model.config`` is refused); a sweep may ask for at most ``MAX_SWEEP`` configurations; every failure
is a 4xx with a message naming the field. Handlers are plain functions over immutable data, so concurrent
requests share nothing mutable; the heap is frozen after start-up (:func:`_lifespan`).
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from importlib import resources
from typing import Optional

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from botec import __version__
from botec.errors import UserError
from botec.web import answers
from botec.web.answers import MAX_SWEEP, EstimateRequest, ExplainRequest, SweepRequest, error
from botec.web.guard import ALLOWED_HOSTS_ENV, DOCS_ENV, MAX_BODY_BYTES, Guard, page_policy
from botec.web.pool import RETRY_AFTER_SECONDS, Busy, Pool

__all__ = ["ALLOWED_HOSTS_ENV", "DOCS_ENV", "MAX_BODY_BYTES", "MAX_SWEEP", "app", "create_app"]


@asynccontextmanager
async def _lifespan(app: FastAPI):
    """At start-up, import what the handlers use and load the catalogs (the first request is not the one that pays
    for it). (`botec serve` settles the garbage collector too: :func:`botec.cli._process.served_app`)."""
    import botec.estimation
    import botec.explore.figure_data
    import botec.report.figures
    import botec.report.html
    import botec.report.json_report  # noqa: F401
    from botec.architecture import model_catalog
    from botec.catalog import accelerators, node_presets

    accelerators(), node_presets(), model_catalog()
    yield


def create_app(allowed_hosts: Optional[list[str]] = None, docs: bool = False, pool: Optional[Pool] = None) -> FastAPI:
    """The web app; ``allowed_hosts`` adds Host names to loopback (default: ``$BOTEC_ALLOWED_HOSTS``); ``docs``
    serves ``/docs`` and ``/redoc`` (their scripts come from a CDN); ``pool``: where parsing and estimating run."""
    page_html = resources.files("botec.web").joinpath("page.html").read_text(encoding="utf-8")
    pool = pool or Pool()
    app = FastAPI(title="botec", version=__version__, lifespan=_lifespan,
                  docs_url="/docs" if docs else None, redoc_url="/redoc" if docs else None,
                  description="Capacity planning for AI workloads: the quantity graph over HTTP.")
    app.add_middleware(Guard, allowed_hosts=allowed_hosts, policy=page_policy(page_html))
    app.state.pool = pool

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, failure: RequestValidationError):
        first = failure.errors()[0]
        field = ".".join(str(p) for p in first["loc"] if p not in ("body", "query"))
        message = first["msg"]
        if first["type"] == "json_invalid":
            message, field = f"malformed JSON body: {first.get('ctx', {}).get('error', 'cannot parse')}", None
        return error(422, message, field or None)

    @app.exception_handler(UserError)
    async def user_error(request: Request, failure: UserError):
        return error(422, getattr(failure, "detail", str(failure)), getattr(failure, "field", None))

    @app.exception_handler(Busy)
    async def busy(request: Request, failure: Busy):
        response = error(503, str(failure))
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, failure: StarletteHTTPException):
        """Every other refusal in the API's one shape, ``{"error": {"field", "message"}}``: an unknown path (404),
        a wrong method (405), and a body the JSON parser gives up on (FastAPI's 400 "There was an error parsing
        the body": a document nested past the parser's recursion limit), which is a malformed body like any other
        (422)."""
        if failure.status_code == 400 and failure.detail == "There was an error parsing the body":
            return error(422, "malformed JSON body: it cannot be parsed (nested too deeply?)")
        response = error(failure.status_code, str(failure.detail))
        response.headers.update(failure.headers or {})
        return response

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> str:
        return page_html

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        from plotly.offline import get_plotlyjs

        return Response(get_plotlyjs(), media_type="application/javascript",
                        headers={"Cache-Control": "max-age=86400"})

    @app.get("/api/health")
    async def health() -> dict:
        """A trivial answer, on the event loop (the load benchmark's baseline for the web stack alone, and the
        proof that parsing and estimating elsewhere stall no one)."""
        return {"status": "ok", "version": __version__}

    @app.get("/api/examples")
    def examples() -> dict:
        """The contracts a user can start from, as YAML text."""
        return answers.examples()

    @app.post("/api/contract")
    async def contract_endpoint(request: EstimateRequest) -> Response:
        """The contract text with the form's edits (``overrides``) written into it, and its form fields:
        the page keeps one state, the text, and the form is a view of it."""
        return await pool.run(answers.contract_answer, request)

    @app.get("/api/catalog")
    def catalog() -> dict:
        """Accelerators, node presets, optimizer presets and models."""
        import dataclasses

        from botec.architecture import breakdown, model_catalog
        from botec.catalog import accelerators, node_presets, optimizer_presets

        return {"accelerators": [dataclasses.asdict(a) for a in accelerators().values()],
                "nodes": [dataclasses.asdict(n) for n in node_presets().values()],
                "optimizers": [dataclasses.asdict(o) for o in optimizer_presets().values()],
                "models": [{"key": k, "name": a.name, "parameters": breakdown(a).total}
                           for k, a in model_catalog().items()]}

    @app.post("/api/estimate")
    async def estimate_endpoint(request: EstimateRequest) -> Response:
        """The estimate of a contract. ``detail``: ``values`` (the default: kind, fits, headline, findings, every
        quantity's value in base units and its unit, by name), ``full`` (what ``botec estimate -f json`` writes,
        with every quantity's record, and its formatted value) or ``page`` (what the page draws: kind, fits,
        findings, headline, tables); ``figures: true`` adds the figures."""
        return await pool.run(answers.estimate_answer, request)

    @app.post("/api/sensitivity")
    async def sensitivity_endpoint(request: EstimateRequest) -> Response:
        """The sensitivity tornado of the contract's headline output, as a plotly figure spec (``figure``; null
        where no assumption is ranged): the one figure ``/api/estimate`` with ``tornado: false`` leaves out."""
        return await pool.run(answers.sensitivity_answer, request)

    @app.post("/api/explain")
    async def explain_endpoint(request: ExplainRequest) -> Response:
        """The derivation chain of one quantity."""
        return await pool.run(answers.explain_answer, request)

    @app.post("/api/report")
    async def report_endpoint(request: EstimateRequest,
                              format: str = Query("html", pattern="^(html|markdown)$")) -> Response:
        """The report, as a download (HTML with figures, or Markdown)."""
        return await pool.run(answers.report_answer, request, format)

    @app.post("/api/sweep")
    async def sweep_endpoint(request: SweepRequest) -> Response:
        """A vectorized sweep (at most MAX_SWEEP configurations)."""
        return await pool.run(answers.sweep_answer, request)

    return app


app = create_app(docs=os.environ.get(DOCS_ENV) == "1")
