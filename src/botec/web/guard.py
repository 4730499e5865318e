"""The ASGI middleware every HTTP request passes first (:class:`Guard`): who may ask, how much they may send,
the headers every answer carries, and a one-line error for whatever fails.

Security headers, on every answer (:data:`SECURITY_HEADERS`): a Content-Security-Policy that lets the page run
only its own script (the inline one by its hash, :func:`page_policy`) and plotly from this server, and talk only
to this server; ``X-Content-Type-Options: nosniff``; ``X-Frame-Options: DENY`` (no page may frame the app);
``Referrer-Policy: no-referrer``. ``/docs`` and ``/redoc`` (only with ``botec serve --docs``) load swagger-ui and
redoc from FastAPI's CDN, so they get a policy that allows it (:data:`DOCS_POLICY`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Optional

MAX_BODY_BYTES = 256 * 1024
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
ALLOWED_HOSTS_ENV = "BOTEC_ALLOWED_HOSTS"   # comma-separated extra Host names (``botec serve --allowed-host``)
DOCS_ENV = "BOTEC_DOCS"   # "1": serve /docs and /redoc (``botec serve --docs``; read in every worker process)
DOCS_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc")
CDN = "https://cdn.jsdelivr.net"
DOCS_POLICY = (f"default-src 'none'; script-src 'self' 'unsafe-inline' {CDN}; style-src 'self' 'unsafe-inline' "
               f"{CDN} https://fonts.googleapis.com; font-src https://fonts.gstatic.com; img-src 'self' data: "
               "https://fastapi.tiangolo.com; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
                    (b"referrer-policy", b"no-referrer")]


def page_policy(html: str) -> str:
    """The Content-Security-Policy of the app: nothing by default; scripts from this server and the inline
    scripts of ``html`` (the page) by their SHA-256; styles from this server and inline (plotly sets styles on the
    elements it draws); images from this server and ``data:``; requests (fetch) to this server only; no framing,
    no ``<base>``, no form posted elsewhere."""
    import base64
    import hashlib
    import re

    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
                      for body in re.findall(r"<script>(.*?)</script>", html, re.S))
    return (f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
            "form-action 'self'")


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
    - every answer carries the security headers (``policy``: the page's Content-Security-Policy);
    - an exception is a one-line 500 JSON error, never a traceback; a request still running when the server's
      drain time after SIGTERM is over (uvicorn cancels it) is a 503 "shutting down", not uvicorn's bare 500.
    """

    def __init__(self, app, allowed_hosts: Optional[list[str]] = None, policy: str = "default-src 'none'"):
        self.app = app
        self.extra_hosts = allowed_hosts
        self.allowed_hosts: frozenset[str] = frozenset()
        self.headers = SECURITY_HEADERS + [(b"content-security-policy", policy.encode())]
        self.docs_headers = SECURITY_HEADERS + [(b"content-security-policy", DOCS_POLICY.encode())]

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
        started = False
        extra_headers = self.docs_headers if scope["path"] in DOCS_PATHS else self.headers
        respond = send

        async def send(message):   # every answer, the app's and the guard's own, with the security headers
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", ()), *extra_headers]}
            await respond(message)

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
        try:
            await self.app(scope, receive, send)
        except asyncio.CancelledError:   # the drain time after SIGTERM is over: say so, once
            if started:
                raise
            task = asyncio.current_task()
            if hasattr(task, "uncancel"):   # Python 3.11+: answered, this request's task ends here as asked
                task.uncancel()
            await _send_error(send, 503, "the server is shutting down; retry in a moment", retry_after_s=1)
        except Exception as error:  # never a 500 with a traceback: say what failed
            if not started:
                await _send_error(send, 500, f"internal error: {error.__class__.__name__}")


async def _send_error(send, status: int, message: str, field: Optional[str] = None,
                      retry_after_s: Optional[int] = None) -> None:
    body = json.dumps({"error": {"field": field, "message": message}}, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after_s is not None:
        headers += [(b"retry-after", str(retry_after_s).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

