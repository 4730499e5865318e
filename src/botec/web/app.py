"""`botec serve`: a local web app over the same quantity graph (FastAPI; ``pip install botec[web]``).

Pick or paste a contract, edit any input in the form, see the accounts, findings and figures
update; download the contract, the estimate and the report. The page keeps one state, the contract
text: a form edit is written into the text (``/api/contract``, comments kept) and the form is rebuilt
from it, so every download reproduces what is on screen; the URL's fragment holds the text (a
permalink). The JSON API (``/api/estimate``, ``/api/contract``, ``/api/explain``, ``/api/report``,
``/api/sweep``, ``/api/catalog``, ``/api/examples``, ``/api/sensitivity``) is documented at ``/openapi.json``.

Speed: ``/api/estimate`` answers values by name unless asked for ``detail: "full"`` (the JSON report); the
page asks for ``detail: "page"`` (only what it draws, the tables as rows of text) without the tornado, then
``/api/sensitivity`` for the tornado; figures are plain plotly JSON specs (no plotly on the server path);
answers are written by pydantic's serializer without a response model (:func:`_json_response`); a training
request runs on the event loop, a serving one in the thread pool (:func:`_off_the_loop_if_serving`); the heap
is frozen after start-up (:func:`_lifespan`).

Safety: only loopback Host headers (and ``--host``/``--allowed-host``) are served and a foreign
``Origin`` is refused (:class:`Guard`, against DNS rebinding); the request body is capped
(``MAX_BODY_BYTES``) before it is parsed; contracts are parsed with YAML's safe
loader and validated; nothing in a request names a file to read (``workload.model.config`` is
refused); a sweep may ask for at most ``MAX_SWEEP`` configurations; every failure is a 4xx with a
message naming the field. Handlers are plain functions over immutable data, so concurrent
requests share nothing mutable.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Optional

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from pydantic import BaseModel, ConfigDict, Field

from botec import __version__
from botec.errors import ContractError, UserError

MAX_BODY_BYTES = 256 * 1024
MAX_SWEEP = 200_000
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ALLOWED_HOSTS_ENV = "BOTEC_ALLOWED_HOSTS"   # comma-separated extra Host names (``botec serve --allowed-host``)
CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[3] / "examples"   # a source checkout's examples/


def _examples() -> dict[str, str]:
    """Every example contract the web app can run, by name: those in the package, and in a source checkout
    every ``examples/*.yaml`` whose model is not a config file (the web app reads no files)."""
    from botec.catalog import load_yaml_text

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


def _json_response(payload: dict) -> Response:
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


def _error(status: int, message: str, field: Optional[str] = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": {"field": field, "message": message}})


def _parse_text(text: str) -> dict:
    """The raw mapping of a contract's text (YAML or JSON), or a ContractError naming the line."""
    from botec.catalog import load_contract_yaml

    try:
        data = load_contract_yaml(text)   # the loader contract files go through (no aliases, depth bounded)
    except Exception as error:  # yaml.YAMLError and its C-loader cousins
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ContractError(f"malformed YAML{where}: {getattr(error, 'problem', None) or error}",
                            field="contract") from None
    if not isinstance(data, dict):
        raise ContractError("a contract is a mapping with sections workload, supply, strategy, assumptions",
                            field="contract")
    return data


def _load(request: EstimateRequest):
    """The validated contract of a request (no file is ever read on its behalf)."""
    from botec.contract import apply_overrides, parse_contract

    data = _parse_text(request.contract)
    overrides = [f"{path}={json.dumps(value) if not isinstance(value, str) else value}"
                 for path, value in request.overrides.items()]
    data = apply_overrides(data, overrides) if overrides else data
    model = (data.get("workload") or {}).get("model") if isinstance(data.get("workload"), dict) else None
    if isinstance(model, dict) and model.get("config") is not None:
        raise ContractError("the web app reads no files: give the model as a catalog name or an architecture",
                            field="workload.model.config")
    return data, parse_contract(data)


def _choices() -> dict[str, list[str]]:
    """The catalog names a field may take, by field path (shown as a select)."""
    from botec.architecture import model_catalog
    from botec.catalog import accelerators, node_presets

    return {"supply.accelerator": sorted(accelerators()), "workload.model": sorted(model_catalog()),
            "supply.cluster.node": sorted(node_presets())}


def _fields(data: dict, prefix: str = "", choices: Optional[dict] = None) -> list[dict]:
    """The contract's editable leaves, as form fields (path, value, and the catalog's names where it has
    them)."""
    choices = _choices() if choices is None else choices
    fields = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            fields += _fields(value, path + ".", choices)
        elif isinstance(value, (str, int, float, bool)) and key not in ("name", "description"):
            field = {"path": path, "value": value}
            if path in choices and isinstance(value, str):
                field["choices"] = choices[path] if value in choices[path] else [value] + choices[path]
            fields.append(field)
    return fields


@lru_cache(maxsize=2)
def _schema_fields(kind: str) -> tuple[dict, ...]:
    """Every field a contract of ``kind`` may hold (path and description), from the contract's JSON Schema:
    the form's "add a field" list. A stated number (value or {value, low, high, source}) is one field."""
    from botec.contract import contract_schema

    schema = contract_schema()
    definitions = schema["$defs"]
    found: list[dict] = []

    def resolve(node: dict) -> list[dict]:
        if "$ref" in node:
            return [definitions[node["$ref"].rsplit("/", 1)[1]]]
        return [n for option in node.get("anyOf", []) for n in resolve(option)] or [node]

    def walk(definition: dict, prefix: str, depth: int) -> None:
        for name, node in definition.get("properties", {}).items():
            path = f"{prefix}{name}"
            sections = [n for n in resolve(node) if "properties" in n and n is not definitions["StatedNumber"]]
            if sections and depth < 4 and not any(n is definitions["StatedNumber"] for n in resolve(node)):
                walk(sections[0], path + ".", depth + 1)
            elif name not in ("kind", "name", "description"):
                found.append({"path": path, "description": node.get("description", "")})

    walk(definitions["ServingContract" if kind == "serving" else "TrainingContract"], "", 0)
    return tuple(found)


def _scalar(value: Any) -> tuple[str, Any]:
    """A form's value as YAML text, and the value a contract reads from it (as ``--set`` does)."""
    from botec.catalog import load_yaml_text

    if not isinstance(value, str):
        return json.dumps(value), value
    try:
        parsed = load_yaml_text(value)
    except Exception:  # yaml.YAMLError and its C-loader cousins
        parsed = value
    if isinstance(parsed, (dict, list)) or "\n" in value:
        return json.dumps(value), value
    return value, parsed


def _set_in_text(text: str, path: str, value: Any) -> Optional[str]:
    """``text`` with the scalar at ``path`` replaced in place (comments and layout kept), or None
    where the path is not a scalar of the text or the edit would not read back as ``value``."""
    import yaml

    from botec.catalog import load_yaml_text

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    for key in path.split("."):
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
        if node is None:
            return None
    if not isinstance(node, yaml.ScalarNode):
        return None
    before = load_yaml_text(text)
    plain, parsed = _scalar(value)
    expected = _assign(before, path, parsed)
    quoted = json.dumps(parsed) if isinstance(parsed, str) else plain
    for written in (quoted, plain) if node.style in ('"', "'") else (plain, quoted):
        edited = text[:node.start_mark.index] + written + text[node.end_mark.index:]
        try:
            if load_yaml_text(edited) == expected:
                return edited
        except Exception:  # yaml.YAMLError and its C-loader cousins
            continue
    return None


def _add_to_text(text: str, path: str, value: Any) -> Optional[str]:
    """``text`` with a field it lacks written as new lines at the end of the deepest block section it has
    (comments and layout kept), or None where that cannot be done exactly."""
    import yaml

    from botec.catalog import load_yaml_text
    from botec.contract import apply_overrides

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    keys = path.split(".")
    depth = 0
    while depth < len(keys) - 1 and isinstance(node, yaml.MappingNode):
        child = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == keys[depth]), None)
        if not isinstance(child, yaml.MappingNode) or child.flow_style or not child.value:
            break
        node, depth = child, depth + 1
    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        return None
    first_key, (_, last_value) = node.value[0][0], node.value[-1]
    indent, step = " " * first_key.start_mark.column, "  "
    plain, _ = _scalar(value)
    lines = [f"{indent}{step * i}{key}:" for i, key in enumerate(keys[depth:-1])]
    lines.append(f"{indent}{step * (len(keys) - 1 - depth)}{keys[-1]}: {plain}")
    at = last_value.end_mark.index
    if at > 0 and text[at - 1] != "\n":
        at = text.find("\n", at)
        at = len(text) if at < 0 else at + 1
    while at >= 2 and text[at - 2] == "\n":         # before the blank lines that close the section
        at -= 1
    block = "\n".join(lines) + "\n"
    edited = text[:at] + ("" if at == 0 or text[at - 1] == "\n" else "\n") + block + text[at:]
    try:
        expected = apply_overrides(load_yaml_text(text), [f"{path}={plain}"])
        return edited if load_yaml_text(edited) == expected else None
    except Exception:  # yaml.YAMLError and its C-loader cousins, a path through a scalar
        return None


def _assign(data: dict, path: str, value: Any) -> dict:
    import copy

    data = copy.deepcopy(data)
    target = data
    *sections, last = path.split(".")
    for key in sections:
        target = target[key]
    target[last] = value
    return data


def _edit(text: str, edits: dict[str, Any]) -> str:
    """The contract text with the form's edits written into it: in place where the field is in the
    text, else the whole contract rewritten (YAML, or JSON where the text was JSON)."""
    import yaml

    from botec.contract import apply_overrides

    _parse_text(text)
    for path, value in edits.items():
        edited = _set_in_text(text, path, value)
        if edited is None:
            edited = _add_to_text(text, path, value)
        if edited is None:
            data = apply_overrides(_parse_text(text), [f"{path}={_scalar(value)[0]}"])
            edited = json.dumps(data, indent=2, default=str) + "\n" if text.lstrip().startswith("{") else \
                yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        text = edited
    return text


def _host_and_port(text: str) -> tuple[str, Optional[int]]:
    """``name[:port]`` (IPv6 in brackets) as a lower-case name and a port (None where none or malformed)."""
    text = text.strip().lower()
    name, colon, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
    if not colon:
        return text, None
    return name, int(port) if port.isdigit() and len(port) <= 5 else -1


def _allowed_hosts(extra: Optional[list[str]] = None) -> frozenset[str]:
    """The Host names the app answers: loopback, and ``extra`` or else ``$BOTEC_ALLOWED_HOSTS``
    (``name`` or ``name:port``; a bare IPv6 address is bracketed)."""
    import os

    names = extra if extra is not None else os.environ.get(ALLOWED_HOSTS_ENV, "").split(",")
    found = set(LOOPBACK_HOSTS)
    for name in (n.strip().lower() for n in names):
        if name:
            found.add(f"[{name}]" if name.count(":") > 1 and not name.startswith("[") else name)
    return frozenset(found)


class Guard:
    """The ASGI middleware every HTTP request passes first (cheap: no request object is built).

    - DNS rebinding: the ``Host`` header must name an allowed host (loopback, ``--host``,
      ``--allowed-host``) on the port the server listens on, else 400;
    - cross-origin requests: an ``Origin`` header that is not such a host is refused (403);
    - the body is capped at ``MAX_BODY_BYTES`` before anything parses it: a larger Content-Length,
      or a streamed body that grows past the cap, is a 413;
    - an exception is a one-line 500 JSON error, never a traceback.
    """

    def __init__(self, app, allowed_hosts: Optional[list[str]] = None):
        self.app = app
        self.extra_hosts = allowed_hosts
        self.allowed_hosts: frozenset[str] = frozenset()

    def _allowed(self, host: str, served_port: Optional[int], default_port: int) -> bool:
        if not self.allowed_hosts:   # read when serving starts, so `botec serve` can set the environment first
            self.allowed_hosts = _allowed_hosts(self.extra_hosts)
        return self._allowed_host(host, served_port, default_port)

    def _allowed_host(self, host: str, served_port: Optional[int], default_port: int) -> bool:
        name, port = _host_and_port(host)
        if f"{name}:{port if port is not None else default_port}" in self.allowed_hosts:
            return True
        return name in self.allowed_hosts and (port if port is not None else default_port) == \
            (served_port if served_port is not None else default_port)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {}
        for key, value in scope["headers"]:
            headers.setdefault(key, value)
        served_port = (scope.get("server") or (None, None))[1]
        host = headers.get(b"host", b"").decode("latin-1")
        if not self._allowed(host, served_port, 80):
            return await _send_error(send, 400, f"Host {host[:100]!r} is not served here (allowed: "
                                     f"{', '.join(sorted(self.allowed_hosts))}; add one with --allowed-host)")
        origin = headers.get(b"origin")
        if origin is not None:
            scheme, _, rest = origin.decode("latin-1").partition("://")
            if scheme != "http" or not rest or "/" in rest or not self._allowed(rest, served_port, 80):
                return await _send_error(send, 403, f"cross-origin request from {origin.decode('latin-1')[:100]!r} "
                                         "refused")
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return await _send_error(send, 413, f"the request body is larger than {MAX_BODY_BYTES // 1024} KiB")
        if scope["method"] in ("POST", "PUT", "PATCH"):
            chunks, size = [], 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                if size > MAX_BODY_BYTES:
                    return await _send_error(send, 413, f"the request body is larger than "
                                             f"{MAX_BODY_BYTES // 1024} KiB")
                if not message.get("more_body", False):
                    break
            replayed = False

            async def receive_body():
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
                return await receive()

            receive = receive_body
        started = False

        async def send_tracked(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracked)
        except Exception as error:  # never a 500 with a traceback: say what failed
            if not started:
                await _send_error(send, 500, f"internal error: {error.__class__.__name__}")


async def _send_error(send, status: int, message: str, field: Optional[str] = None) -> None:
    body = json.dumps({"error": {"field": field, "message": message}}, separators=(",", ":")).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _download_headers(name: str, suffix: str) -> dict[str, str]:
    """A Content-Disposition for ``name`` + ``suffix`` that any name survives: an ASCII fallback (quotes,
    backslashes, control characters and non-ASCII replaced) and the exact name per RFC 5987."""
    from urllib.parse import quote

    name = "".join(c for c in name if c.isprintable()) or "botec-report"
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in name)
    return {"Content-Disposition": f"attachment; filename=\"{fallback}{suffix}\"; "
                                   f"filename*=UTF-8''{quote(name + suffix, safe='')}"}


def _estimate_answer(request: EstimateRequest, contract) -> Response:
    """The answer of ``/api/estimate`` (see :func:`create_app`)."""
    from botec.estimate import estimate
    from botec.report import headline

    result = estimate(contract)
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
        from botec.report.figures import figures

        payload["figures"] = figures(result, tornado=request.tornado)   # plain dicts, plotly's JSON schema
    if request.detail == "page":
        from botec.report.html import tables_data

        payload["tables"] = tables_data(result, system, request.details)   # rows of text: the page builds them
    return _json_response(payload)


def _sensitivity_answer(contract) -> Response:
    from botec.estimate import estimate
    from botec.report.figures import tornado_figure

    return _json_response({"figure": tornado_figure(estimate(contract))})


async def _off_the_loop_if_serving(contract, answer: Callable[..., Response], *args) -> Response:
    """``answer(*args)``, in the thread pool for a serving contract. A training estimate takes 1-2 ms of CPU, less
    than handing it to a thread and back costs, so it runs on the event loop; a serving estimate (the load model,
    each candidate accelerator) takes tens to hundreds of ms, which would stall every other connection."""
    if contract.kind == "serving":
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(answer, *args)
    return answer(*args)


@asynccontextmanager
async def _lifespan(app: FastAPI):
    """At start-up, import what the handlers use (the first request is not the one that pays for it), then freeze
    what is alive into the garbage collector's permanent generation: the catalog, the graphs and the framework's
    objects are never garbage, and a full collection that no longer walks them is several times cheaper (a
    request allocates enough to trigger collections)."""
    import gc

    import botec.estimate
    import botec.report.figures
    import botec.report.html
    import botec.report.json_report  # noqa: F401
    from botec.catalog import accelerators, node_presets
    from botec.architecture import model_catalog

    accelerators(), node_presets(), model_catalog()
    gc.collect()
    gc.freeze()
    yield


def create_app(allowed_hosts: Optional[list[str]] = None) -> FastAPI:
    """The web app; ``allowed_hosts`` adds Host names to loopback (default: ``$BOTEC_ALLOWED_HOSTS``)."""
    app = FastAPI(title="botec", version=__version__, lifespan=_lifespan,
                  description="Capacity planning for AI workloads: the quantity graph over HTTP.")
    app.add_middleware(Guard, allowed_hosts=allowed_hosts)

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

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException):
        """Every other refusal in the API's one shape, ``{"error": {"field", "message"}}``: an unknown path (404),
        a wrong method (405), and a body the JSON parser gives up on (FastAPI's 400 "There was an error parsing
        the body": a document nested past the parser's recursion limit), which is a malformed body like any other
        (422)."""
        if error.status_code == 400 and error.detail == "There was an error parsing the body":
            return _error(422, "malformed JSON body: it cannot be parsed (nested too deeply?)")
        response = _error(error.status_code, str(error.detail))
        response.headers.update(error.headers or {})
        return response

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> str:
        return resources.files("botec.web").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_js() -> Response:
        from plotly.offline import get_plotlyjs

        return Response(get_plotlyjs(), media_type="application/javascript",
                        headers={"Cache-Control": "max-age=86400"})

    @app.get("/api/health")
    def health() -> dict:
        """A trivial answer (the load benchmark's baseline for the web stack alone)."""
        return {"status": "ok", "version": __version__}

    @app.get("/api/examples")
    def examples() -> dict:
        """The contracts a user can start from, as YAML text."""
        return _examples()

    @app.post("/api/contract")
    async def contract_endpoint(request: EstimateRequest) -> dict:
        """The contract text with the form's edits (``overrides``) written into it, and its form fields:
        the page keeps one state, the text, and the form is a view of it."""
        text = _edit(request.contract, request.overrides)
        data = _parse_text(text)
        kind = (data.get("workload") or {}).get("kind") if isinstance(data.get("workload"), dict) else None
        present = {f["path"] for f in _fields(data, choices={})}
        taken = present | {p.rsplit(".", n)[0] for p in present for n in range(1, p.count(".") + 1)}

        def addable(path: str) -> bool:   # not there yet, and not inside a field given as one value
            prefixes = {path.rsplit(".", n)[0] for n in range(1, path.count(".") + 1)}
            return path not in taken and not prefixes & present and path != "workload.model.config"

        return {"contract": text, "fields": _fields(data),
                "addable": [f for f in _schema_fields(str(kind)) if addable(f["path"])]}

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
    async def estimate_endpoint(request: EstimateRequest) -> dict:
        """The estimate of a contract. ``detail``: ``values`` (the default: kind, fits, headline, findings, every
        quantity's value in base units and its unit, by name), ``full`` (what ``botec estimate -f json`` writes,
        with every quantity's record, and its formatted value) or ``page`` (what the page draws: kind, fits,
        findings, headline, tables); ``figures: true`` adds the figures."""
        _, contract = _load(request)
        return await _off_the_loop_if_serving(contract, _estimate_answer, request, contract)

    @app.post("/api/sensitivity")
    async def sensitivity_endpoint(request: EstimateRequest) -> dict:
        """The sensitivity tornado of the contract's headline output, as a plotly figure spec (``figure``; null
        where no assumption is ranged): the one figure ``/api/estimate`` with ``tornado: false`` leaves out."""
        _, contract = _load(request)
        return await _off_the_loop_if_serving(contract, _sensitivity_answer, contract)

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
        name = contract.name or "botec-report"
        if format == "markdown":
            from botec.report.markdown import render

            return PlainTextResponse(render(result, request.units), media_type="text/markdown",
                                     headers=_download_headers(name, ".md"))
        from botec.report.html import render

        return HTMLResponse(render(result, request.units), headers=_download_headers(name, ".html"))

    @app.post("/api/sweep")
    def sweep_endpoint(request: SweepRequest) -> dict:
        """A vectorized sweep (at most MAX_SWEEP configurations)."""
        from botec.explore.space import Space, evaluate_space, fit_quantities, fits_mask, parse_axes
        from botec.inputs import build_inputs

        _, contract = _load(request)
        if contract.workload.kind != "training":
            raise ContractError("sweeps run over training contracts", field="workload.kind")
        inputs = build_inputs(contract)
        axes = parse_axes(request.axes, inputs, MAX_SWEEP, field="axes", cap_words="this server's cap of {cap:,}")
        space = Space(inputs, axes)
        columns, valid, counts = evaluate_space(space, wanted=list(dict.fromkeys(request.outputs +
                                                                                 fit_quantities(inputs))))
        import numpy as np

        fits = fits_mask(columns, valid)
        names = [a.path for a in axes] + request.outputs
        rows = [[None if not np.isfinite(columns[n][i]) else float(columns[n][i]) for n in names] + [bool(fits[i])]
                for i in range(space.size)]
        return {"columns": names + ["fits"], "rows": rows, "counts": counts}

    return app


app = create_app()
