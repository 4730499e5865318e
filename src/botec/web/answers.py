"""What the web app's endpoints answer: the requests' shapes, and the work each does on a request's contract
(parse, validate, estimate, draw), written as plain functions over a request that the app runs in its bounded
pool (:mod:`botec.web.pool`), never on the event loop.

Speed: ``/api/estimate`` answers values by name unless asked for ``detail: "full"`` (the JSON report); the
page asks for ``detail: "page"`` (only what it draws, the tables as rows of text) without the tornado, then
``/api/sensitivity`` for the tornado; figures are plain plotly JSON specs (no plotly on the server path);
answers are written by pydantic's serializer without a response model (:func:`json_response`).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from botec.errors import ContractError
from botec.web.contract_text import contract_form, parse_text
from botec.web.guard import MAX_BODY_BYTES

MAX_SWEEP = 200_000
CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[3] / "examples"   # a source checkout's examples/


def examples() -> dict[str, str]:
    """Every example contract the web app can run, by name: those in the package, and in a source checkout
    every ``examples/*.yaml`` whose model is not a config file (the web app reads no files)."""
    from botec.yamlfile import load_yaml_text

    found = {Path(item.name).stem: item.read_text(encoding="utf-8")
             for item in resources.files("botec.contracts").iterdir() if item.name.endswith(".yaml")}
    for path in sorted(CHECKOUT_EXAMPLES.glob("*.yaml")) if CHECKOUT_EXAMPLES.is_dir() else []:
        text = path.read_text(encoding="utf-8")
        model = ((load_yaml_text(text) or {}).get("workload") or {}).get("model")
        if not (isinstance(model, dict) and model.get("config") is not None):
            found.setdefault(path.stem, text)
    return dict(sorted(found.items()))


class EstimateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    contract: str = Field(description="the contract, YAML or JSON text", max_length=MAX_BODY_BYTES)
    overrides: dict[str, Any] = Field(default_factory=dict, description="FIELD: value, like --set")
    units: str = Field("decimal", pattern="^(decimal|binary)$")
    figures: bool = Field(False, description="also return the report's figures (plotly JSON)")
    tornado: bool = Field(True, description="with figures: also the sensitivity tornado, the costliest figure "
                                            "(about 0.5 s for a serving contract; the page gets it from "
                                            "/api/sensitivity after the rest)")
    detail: str = Field("values", pattern="^(values|full|page)$",
                        description="/api/estimate: 'values' (every quantity's value in base units and its unit, by "
                                    "name, with the headline and findings), 'full' (what `botec estimate -f json` "
                                    "writes: every quantity with its record, and its formatted value) or 'page' "
                                    "(only what the page draws: headline, findings, tables, figures)")
    details: bool = Field(False, description="detail page: the tables with every step, as `botec estimate --details` "
                                             "(the intermediate and zero-valued quantities, the inputs the layout "
                                             "line says); without it, the rows `botec estimate` shows")


class ExplainRequest(EstimateRequest):
    quantity: str


class SweepRequest(EstimateRequest):
    axes: list[str] = Field(description="FIELD=VALUES, like botec sweep --set", min_length=1, max_length=6)
    outputs: list[str] = Field(default_factory=lambda: ["run_seconds", "planned_device_bytes"], max_length=12)


def json_response(payload: dict) -> Response:
    """``payload`` as compact JSON, written by pydantic's Rust serializer without a response model to validate
    against (0.5 ms for a full estimate; the stdlib's json takes 1.7 ms); a non-finite number, which JSON lacks,
    is null, as FastAPI writes it. A string pydantic cannot write as UTF-8 (a lone surrogate) goes through the
    stdlib's ASCII-escaping encoder instead."""
    from pydantic_core import PydanticSerializationError, to_json

    try:
        body = to_json(payload, inf_nan_mode="null")
    except PydanticSerializationError:
        body = json.dumps(payload, separators=(",", ":"), allow_nan=False, default=str).encode()
    return Response(body, media_type="application/json")


def error(status: int, message: str, field: Optional[str] = None) -> JSONResponse:
    """A refusal in the API's one shape, ``{"error": {"field", "message"}}``."""
    return JSONResponse(status_code=status, content={"error": {"field": field, "message": message}})


def load(request: EstimateRequest):
    """The validated contract of a request (no file is ever read on its behalf)."""
    from botec.contract import apply_overrides, parse_contract

    data = parse_text(request.contract)
    overrides = [f"{path}={json.dumps(value) if not isinstance(value, str) else value}"
                 for path, value in request.overrides.items()]
    data = apply_overrides(data, overrides) if overrides else data
    model = (data.get("workload") or {}).get("model") if isinstance(data.get("workload"), dict) else None
    if isinstance(model, dict) and model.get("config") is not None:
        raise ContractError("the web app reads no files: give the model as a catalog name or an architecture",
                            field="workload.model.config")
    return data, parse_contract(data)


def _download_headers(name: str, suffix: str) -> dict[str, str]:
    """A Content-Disposition for ``name`` + ``suffix`` that any name survives: an ASCII fallback (quotes,
    backslashes, control characters and non-ASCII replaced) and the exact name per RFC 5987."""
    from urllib.parse import quote

    name = "".join(c for c in name if c.isprintable()) or "botec-report"
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    return {"Content-Disposition": f"attachment; filename=\"{fallback}{suffix}\"; "
                                   f"filename*=UTF-8''{quote(name + suffix, safe='')}"}


def estimate_answer(request: EstimateRequest) -> Response:
    """The answer of ``/api/estimate`` (see :func:`botec.web.app.create_app`)."""
    from botec.estimation import estimate
    from botec.report import headline

    result = estimate(load(request)[1])
    system = request.units
    if request.detail == "full":
        from botec.report.json_report import to_dict

        payload = to_dict(result)
        payload["formatted"] = {name: q.formatted(system) for name, q in result.quantities.items()}
    else:
        payload = {"kind": result.kind, "fits": result.fits,
                   "findings": [finding.as_dict() for finding in result.findings]}
    payload["headline"] = headline(result)
    if request.detail == "values":
        payload["quantities"] = {name: q.value for name, q in result.quantities.items()}
        payload["units"] = {name: q.unit for name, q in result.quantities.items()}
    payload["figures"] = []
    if request.figures:
        from botec.explore.figure_data import figure_data
        from botec.report.figures import figures

        payload["figures"] = figures(result, figure_data(result, tornado=request.tornado))   # plotly's JSON schema
    if request.detail == "page":
        from botec.report.html import tables_data

        payload["tables"] = tables_data(result, system, request.details)   # rows of text: the page builds them
    return json_response(payload)


def sensitivity_answer(request: EstimateRequest) -> Response:
    """The sensitivity tornado of the contract's headline output (``/api/sensitivity``)."""
    from botec.estimation import estimate
    from botec.explore.figure_data import tornado_data
    from botec.report.figures import sensitivity_figure

    result = estimate(load(request)[1])
    return json_response({"figure": sensitivity_figure(result, tornado_data(result))})


def explain_answer(request: ExplainRequest) -> Response:
    """The derivation chain of one quantity (``/api/explain``)."""
    from botec.estimation import estimate
    from botec.graph.explain import explain

    _, contract = load(request)
    result = estimate(contract)
    if request.quantity not in result.quantities:
        reason = result.inputs.why_absent(request.quantity, result.quantities) \
            if request.quantity in result.inputs.graph else "not a quantity of this contract"
        raise ContractError(f"{request.quantity!r}: {reason}", field="quantity")
    return json_response({"lines": [{"depth": d, "text": t}
                                    for d, t in explain(request.quantity, result.quantities, request.units)]})


def report_answer(request: EstimateRequest, format: str) -> Response:
    """The report as a download (``/api/report``): HTML with figures, or Markdown."""
    from botec.estimation import estimate

    _, contract = load(request)
    result = estimate(contract)
    name = contract.name or "botec-report"
    if format == "markdown":
        from botec.report.markdown import render

        return PlainTextResponse(render(result, request.units), media_type="text/markdown",
                                 headers=_download_headers(name, ".md"))
    from botec.explore.figure_data import figure_data
    from botec.report.html import render

    return HTMLResponse(render(result, figure_data(result), request.units), headers=_download_headers(name, ".html"))


def sweep_answer(request: SweepRequest) -> Response:
    """A vectorized sweep (``/api/sweep``, at most MAX_SWEEP configurations)."""
    import numpy as np

    from botec.explore.space import Space, evaluate_space, fit_quantities, fits_mask, parse_axes
    from botec.inputs import build_inputs

    _, contract = load(request)
    if contract.workload.kind != "training":
        raise ContractError("sweeps run over training contracts", field="workload.kind")
    inputs = build_inputs(contract)
    axes = parse_axes(request.axes, inputs, MAX_SWEEP, field="axes", cap_words="this server's cap of {cap:,}")
    space = Space(inputs, axes)
    columns, valid, counts = evaluate_space(space, wanted=list(dict.fromkeys(request.outputs +
                                                                             fit_quantities(inputs))))
    fits, device = fits_mask(columns, valid), fits_mask(columns, valid, "fits_device")   # the headroom kept, or eaten
    names = [a.path for a in axes] + request.outputs
    rows = [[None if not np.isfinite(columns[n][i]) else float(columns[n][i]) for n in names]
            + [bool(fits[i]), bool(device[i])] for i in range(space.size)]
    return json_response({"columns": names + ["fits", "fits_device"], "rows": rows, "counts": counts})


def contract_answer(request: EstimateRequest) -> Response:
    """The contract text with the form's edits written in, its fields and the fields it may add
    (``/api/contract``; :func:`botec.web.contract_text.contract_form`)."""
    return json_response(contract_form(request.contract, request.overrides))
