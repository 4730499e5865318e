"""How `botec serve` runs the app: uvicorn, with limits on what a connection may hold and how long it may take.

- **Header size** (:data:`MAX_HEADER_BYTES`, 64 KiB, h11's own default): a request line and headers larger than
  that get 431 and the connection is closed. uvicorn's httptools parser (several times cheaper per request than
  h11, so we keep it) buffers a header of any size (a 200 MB header was read whole), so
  :class:`LimitedHttpToolsProtocol` counts the bytes of a request's head itself.
- **Read timeout** (:data:`READ_TIMEOUT_SECONDS`): a request's head and body must arrive within that time of its
  first byte (of the connection's opening, for its first request); else 408 (or, where nothing was sent, the
  connection is just closed). uvicorn has no such timeout: idle partial connections were held forever and 1,008
  of them used up the process's descriptors. Between requests, uvicorn's own keep-alive timeout
  (:data:`KEEP_ALIVE_SECONDS`) closes an idle connection.
- **Connections** (:data:`MAX_CONNECTIONS`): beyond that many open connections a request gets uvicorn's 503;
  the open-file limit is raised to fit them (:func:`raise_open_file_limit`), so a new client is never refused a
  socket while fewer are open, and slow ones are closed by the read timeout.
- **Drain** (:data:`DRAIN_SECONDS`): on SIGTERM or Ctrl-C the server stops accepting at once; requests in
  progress have that long to finish, then each gets a 503 "shutting down" (:class:`botec.web.guard.Guard`)
  and the process exits (about ``DRAIN_SECONDS`` + 1 s in all).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 64 * 1024
READ_TIMEOUT_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5
MAX_CONNECTIONS = 2048
DRAIN_SECONDS = 5
SPARE_DESCRIPTORS = 128       # files, the listening socket, the pool's threads: beyond the connections


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a limit on the size of a request's head and a read timeout (the
    class's attributes ``max_header_bytes`` and ``read_timeout_s``, set by :func:`server_options`)."""

    max_header_bytes = MAX_HEADER_BYTES
    read_timeout_s = READ_TIMEOUT_SECONDS

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.head_bytes = self.unparsed_head_bytes = 0     # the head's parsed parts; bytes read while incomplete
        self.head_complete, self.head_too_large, self.reading = False, False, None
        self._start_reading()

    def _start_reading(self) -> None:
        if self.reading is None:
            self.reading = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _stop_reading(self) -> None:
        if self.reading is not None:
            self.reading.cancel()
            self.reading = None

    def connection_lost(self, exc) -> None:
        self._stop_reading()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes, self.head_complete = 0, False
        self._start_reading()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)    # "name: value\r\n"
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        """Count a parsed part of the head; past the limit, stop the parser (uvicorn's answer to a parser error
        is then this protocol's 431: :meth:`send_400_response`)."""
        self.head_bytes += size
        if self.head_bytes > self.max_header_bytes:
            self.head_too_large = True
            raise ValueError("the request's head is too large")

    def send_400_response(self, msg: str) -> None:
        if self.head_too_large:
            return self._refuse_too_large()
        super().send_400_response(msg)

    def _refuse_too_large(self) -> None:
        self._refuse(431, "Request Header Fields Too Large",
                     f"the request's header is larger than {self.max_header_bytes // 1024} KiB")

    def on_headers_complete(self) -> None:
        self.head_complete = True
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._stop_reading()
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self.unparsed_head_bytes = 0 if self.head_complete else self.unparsed_head_bytes + len(data)
        if self.unparsed_head_bytes > self.max_header_bytes and not self.transport.is_closing():
            self._refuse_too_large()   # a head still incomplete (one header being buffered whole): a bound

    def _read_timed_out(self) -> None:
        self.reading = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:        # the server paused reading (pipelining, a body not yet taken)
            return self._start_reading()
        if self.unparsed_head_bytes or self.head_bytes or self.head_complete:
            self._refuse(408, "Request Timeout", f"the request did not arrive within {self.read_timeout_s:g} s")
        else:
            self.transport.close()       # nothing sent: nothing to answer

    def _refuse(self, status: int, reason: str, message: str) -> None:
        """Answer ``status`` in the API's error shape and close the connection; just close it where an answer
        is already under way (an earlier request's, or this one's)."""
        if self.cycle is not None and not self.cycle.response_complete and (
                not self.head_complete or self.cycle.response_started):
            return self.transport.close()
        body = json.dumps({"error": {"field": None, "message": message}}).encode()
        self.transport.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                             f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body)
        self.transport.close()


def raise_open_file_limit(wanted: int) -> int:
    """Raise this process's soft limit on open files to ``wanted`` where the hard limit allows; the limit now
    (a server holds one descriptor per connection; the usual soft limit is 1,024)."""
    try:
        import resource
    except ImportError:   # Windows: no such limit to raise
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return wanted if soft == resource.RLIM_INFINITY else soft


def server_options(max_connections: int = MAX_CONNECTIONS, read_timeout_s: float = READ_TIMEOUT_SECONDS,
                   max_header_bytes: int = MAX_HEADER_BYTES, keep_alive_s: int = KEEP_ALIVE_SECONDS,
                   drain_s: Optional[int] = DRAIN_SECONDS) -> dict[str, Any]:
    """The options of ``uvicorn.run`` or ``uvicorn.Config`` that `botec serve` (and the tests, with small limits)
    runs the app with: the limits above, the connection limit lowered to what the open-file limit allows (which
    is raised first, where the hard limit lets it)."""
    descriptors = raise_open_file_limit(max_connections + SPARE_DESCRIPTORS)
    protocol = LimitedHttpToolsProtocol   # importable by name: worker processes receive the configuration pickled
    if (max_header_bytes, read_timeout_s) != (protocol.max_header_bytes, protocol.read_timeout_s):
        protocol = type(protocol.__name__, (protocol,), {"max_header_bytes": max_header_bytes,
                                                        "read_timeout_s": read_timeout_s})
    return {"http": protocol, "limit_concurrency": max(1, min(max_connections, descriptors - SPARE_DESCRIPTORS)),
            "timeout_keep_alive": keep_alive_s, "timeout_graceful_shutdown": drain_s}
