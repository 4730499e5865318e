"""The bounded pool the web app parses and estimates in, off the event loop.

Parsing a contract's YAML and estimating it are CPU work: a 250 KB contract takes about a second to parse, a
serving estimate tens to hundreds of milliseconds. On the event loop that work stalls every other connection
(four 250 KB contracts held ``/api/health`` for 5.8 s), so every handler that parses or estimates hands it to
:meth:`Pool.run`: at most ``threads`` run at once (two: Python work shares the interpreter's lock, so more
threads add no throughput, only more contenders the event loop must win the lock from; /api/health's worst
latency under four 250 KB parses measured 0.45 s with two, 1.4 s with four, on a loaded 2-core machine), and at most ``admitted`` requests are running or waiting; one
more is answered at once with 503 and ``Retry-After`` (:class:`Busy`) rather than piling up in memory (a
waiting request holds its body, at most ``MAX_BODY_BYTES``). A request whose task is cancelled (the server's
drain time after SIGTERM is over) stops waiting for its thread, which is abandoned.
"""

from __future__ import annotations

from typing import Any, Callable

WORK_THREADS = 2            # parses and estimates running at once (they share one interpreter lock)
ADMITTED_REQUESTS = 256     # running or waiting; one more gets 503 (about 256 × 0.25 MiB of bodies at most)
RETRY_AFTER_SECONDS = 1


class Busy(Exception):
    """The pool has admitted as many requests as it may: the answer is 503 with ``Retry-After``."""

    def __init__(self, admitted: int):
        super().__init__(f"the server is busy: {admitted} requests are running or waiting; retry in "
                         f"{RETRY_AFTER_SECONDS} s")


class Pool:
    """At most ``threads`` calls running in worker threads, at most ``admitted`` running or waiting.

    One per app, used from its event loop only (the counter needs no lock); the limiter is made on first use,
    inside the loop that serves."""

    def __init__(self, threads: int = WORK_THREADS, admitted: int = ADMITTED_REQUESTS):
        self.threads = threads
        self.admitted = admitted
        self.in_pool = 0
        self._limiter = None

    async def run(self, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)`` in a worker thread, once one of the ``threads`` is free; :class:`Busy` at once where
        ``admitted`` requests are already running or waiting."""
        import anyio.to_thread

        if self.in_pool >= self.admitted:
            raise Busy(self.in_pool)
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        self.in_pool += 1
        try:
            return await anyio.to_thread.run_sync(work, *args, limiter=self._limiter, abandon_on_cancel=True)
        finally:
            self.in_pool -= 1
