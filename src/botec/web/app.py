"""`botec serve`: a local web app over the same quantity graph (FastAPI; ``pip install botec[web]``).

Pick or paste a contract, edit any input in the form, see the accounts, findings and figures
update; download the contract, the estimate and the report. The JSON API (``/api/estimate``,
``/api/explain``, ``/api/report``, ``/api/sweep``, ``/api/catalog``) is documented at
``/openapi.json``.

Safety: the request body is capped (``MAX_BODY_BYTES``); contracts are parsed with YAML's safe
loader and validated; nothing in a request names a file to read (``workload.model.config`` is
refused); a sweep may ask for at most ``MAX_SWEEP`` configurations; every failure is a 4xx with a
message naming the field. Handlers are plain functions over immutable data, so concurrent
requests share nothing mutable.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from botec import __version__
from botec.errors import ContractError, UserError

MAX_BODY_BYTES = 256 * 1024
MAX_SWEEP = 200_000
EXAMPLES = {"lesson-finetune-1b": "lesson-finetune-1b.yaml", "serve-llama3.1-8b-h100": "serve-llama3.1-8b-h100.yaml"}


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    contract: str = Field(description="the contract, YAML or JSON text", max_length=MAX_BODY_BYTES)
    overrides: dict[str, Any] = Field(default_factory=dict, description="FIELD: value, like --set")
    units: str = Field("decimal", pattern="^(decimal|binary)$")
    figures: bool = Field(False, description="also return the report's figures (plotly JSON)")


class ExplainRequest(EstimateRequest):
    quantity: str


class SweepRequest(EstimateRequest):
    axes: list[str] = Field(description="FIELD=VALUES, like botec sweep --set", min_length=1, max_length=6)
    outputs: list[str] = Field(default_factory=lambda: ["run_seconds", "planned_device_bytes"], max_length=12)


def _error(status: int, message: str, field: Optional[str] = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"field": field, "message": message}})


def _load(request: EstimateRequest):
    """The validated contract of a request (no file is ever read on its behalf)."""
    from botec.catalog import load_yaml_text
    from botec.contract import apply_overrides, parse_contract

    try:
        data = load_yaml_text(request.contract)
    except Exception as error:  # yaml.YAMLError and its C-loader cousins
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ContractError(f"malformed YAML{where}: {getattr(error, 'problem', None) or error}",
                            field="contract") from None
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            field="contract")
    overrides = [f"{path}={json.dumps(value) if not isinstance(value, str) else value}"
                 for path, value in request.overrides.items()]
    data = apply_overrides(data, overrides)
    model = (data.get("workload") or {}).get("model") if isinstance(data.get("workload"), dict) else None
    if isinstance(model, dict) and model.get("config") is not None:
        raise ContractError("the web app reads no files: give the model as a catalog name or an architecture",
                            field="workload.model.config")
    return data, parse_contract(data)


def _fields(data: dict, prefix: str = "") -> list[dict]:
    """The contract's editable leaves, as form fields (path, value)."""
    fields = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            fields += _fields(value, path + ".")
        elif isinstance(value, (str, int, float, bool)) and key not in ("name", "description"):
            fields.append({"path": path, "value": value})
    return fields


def create_app() -> FastAPI:
    app = FastAPI(title="botec", version=__version__,
                  description="Capacity planning for AI workloads: the quantity graph over HTTP.")

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return _error(413, f"the request body is larger than {MAX_BODY_BYTES // 1024} KiB")
        if length is None and request.method in ("POST", "PUT"):
            body = await request.body()
            if len(body) > MAX_BODY_BYTES:
                return _error(413, f"the request body is larger than {MAX_BODY_BYTES // 1024} KiB")
        try:
            return await call_next(request)
        except Exception as error:  # never a 500 with a traceback: say what failed
            return _error(500, f"internal error: {error.__class__.__name__}")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError):
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"] if p != "body")
        message = first["msg"]
        if first["type"] == "json_invalid":
            message, field = f"malformed JSON body: {first.get('ctx', {}).get('error', 'cannot parse')}", None
        return _error(422, message, field or None)

    @app.exception_handler(UserError)
    async def user_error(request: Request, error: UserError):
        return _error(422, getattr(error, "detail", str(error)), getattr(error, "field", None))

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> str:
        return resources.files("botec.web").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        from plotly.offline import get_plotlyjs

        return Response(get_plotlyjs(), media_type="application/javascript",
                        headers={"Cache-Control": "max-age=86400"})

    @app.get("/api/examples")
    def examples() -> dict:
        """The contracts a user can start from, as YAML text."""
        return {name: resources.files("botec.contracts").joinpath(file).read_text(encoding="utf-8")
                for name, file in EXAMPLES.items()}

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
    def estimate_endpoint(request: EstimateRequest) -> dict:
        """Every quantity, the findings and the figures of a contract."""
        from botec.estimate import estimate
        from botec.report import headline
        from botec.report.html import tables_html
        from botec.report.json_report import to_dict

        data, contract = _load(request)
        result = estimate(contract)
        payload = to_dict(result)
        system = request.units
        payload["formatted"] = {name: q.formatted(system) for name, q in result.quantities.items()}
        payload["fields"] = _fields(data)
        payload["headline"] = headline(result)
        payload["figures"] = []
        if request.figures:
            from botec.report.figures import figures

            payload["figures"] = [json.loads(figure.to_json()) for figure in figures(result)]
        payload["tables"] = tables_html(result, system)
        return payload

    @app.post("/api/explain")
    def explain_endpoint(request: ExplainRequest) -> dict:
        """The derivation chain of one quantity."""
        from botec.estimate import estimate
        from botec.graph.explain import explain

        _, contract = _load(request)
        result = estimate(contract)
        if request.quantity not in result.quantities:
            reason = result.inputs.why_absent(request.quantity, result.quantities) \
                if request.quantity in result.inputs.graph else "not a quantity of this contract"
            raise ContractError(f"{request.quantity!r}: {reason}", field="quantity")
        return {"lines": [{"depth": d, "text": t} for d, t in explain(request.quantity, result.quantities,
                                                                       request.units)]}

    @app.post("/api/report")
    def report_endpoint(request: EstimateRequest, format: str = "html") -> Response:
        """The report, as a download (HTML with figures, or Markdown)."""
        from botec.estimate import estimate

        _, contract = _load(request)
        result = estimate(contract)
        name = (contract.name or "botec-report").replace('"', "")
        if format == "markdown":
            from botec.report.markdown import render

            return PlainTextResponse(render(result, request.units), media_type="text/markdown",
                                     headers={"Content-Disposition": f'attachment; filename="{name}.md"'})
        from botec.report.html import render

        return HTMLResponse(render(result, request.units),
                            headers={"Content-Disposition": f'attachment; filename="{name}.html"'})

    @app.post("/api/sweep")
    def sweep_endpoint(request: SweepRequest) -> dict:
        """A vectorized sweep (at most MAX_SWEEP configurations)."""
        from botec.explore.space import Space, evaluate_space, parse_axis
        from botec.inputs import build_inputs

        _, contract = _load(request)
        if contract.workload.kind != "training":
            raise ContractError("sweeps run over training contracts", field="workload.kind")
        inputs = build_inputs(contract)
        axes = [parse_axis(axis, inputs) for axis in request.axes]
        space = Space(inputs, axes)
        if space.size > MAX_SWEEP:
            raise ContractError(f"the sweep has {space.size:,} configurations, more than this server's cap of "
                                f"{MAX_SWEEP:,}", field="axes")
        columns, valid, counts = evaluate_space(space, wanted=list(dict.fromkeys(request.outputs +
                                                                                 ["memory_spare_bytes"])))
        import numpy as np

        fits = valid & (columns["memory_spare_bytes"] >= 0)
        names = [a.path for a in axes] + request.outputs
        rows = [[None if not np.isfinite(columns[n][i]) else float(columns[n][i]) for n in names] + [bool(fits[i])]
                for i in range(space.size)]
        return {"columns": names + ["fits"], "rows": rows, "counts": counts}

    return app


app = create_app()
