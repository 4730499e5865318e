"""Fan independent tasks out over local processes or a Ray cluster, results in task order.

One entry point, :func:`run_tasks`, for every command whose work splits into independent pieces (a
simulation's seeds, a sweep's or a search's chunks, Monte Carlo's sample blocks, a study's cells). The
results are the same whatever the worker count: a task carries everything it needs (its seed included), so
how tasks are dealt to workers changes only when each finishes, never what it returns.

- ``workers=1``: in this process, one task after another (no pickling; the default under a debugger).
- ``workers=N > 1``: a pool of N local processes (:class:`concurrent.futures.ProcessPoolExecutor`). They are
  forked from a fresh single-threaded server that has imported numpy and the task's module once (the
  ``forkserver`` start method, where the platform has it; ``spawn`` elsewhere), so a worker never inherits a
  half-held lock of this process (a progress bar's thread, say) and a second pool starts in 0.15 s instead of
  1 s (four workers, two busy cores: ``benchmarks/fanout.py --start-up``).
- ``ray_address`` (or ``$RAY_ADDRESS``): each task a Ray remote call on that cluster (``"local"`` starts one
  on this machine, ``"auto"`` joins the one this machine belongs to); Ray is an optional extra
  (``pip install 'botec[ray]'``), imported only here. ``ray_address=""`` runs locally whatever the variable says.

Small jobs should not pay for workers: a pool's start-up costs 0.3–1 s (each worker imports botec and numpy),
a Ray connection seconds. :func:`fanout_options` turns a command's ``--workers``/``--ray`` into run_tasks'
options: work below the command's threshold runs in this process unless ``--workers`` or ``--ray`` asks
otherwise (an explicit choice is always honoured; ``$RAY_ADDRESS`` alone is taken above the threshold only).

Interrupted (Ctrl-C), :func:`run_tasks` stops the workers and raises :class:`Interrupted` carrying the results
finished so far (``None`` where a task did not finish), so a caller can write what it has. Workers ignore
Ctrl-C themselves: the terminal sends it to every process of the group, and only this one decides.
"""

from __future__ import annotations

import os
import pickle
from typing import Any, Callable, Optional, Sequence

from botec.errors import UserError

__all__ = ["Interrupted", "Rebuilt", "default_workers", "check_workers", "fanout_options", "run_tasks", "runs_here",
           "RAY_ADDRESS_ENV"]

RAY_ADDRESS_ENV = "RAY_ADDRESS"
MAX_WORKERS = 1024
PRELOADED = ("numpy", "botec.estimation", "botec.inputs.serving", "botec.inputs.training", "botec.simulate")
"""Imported once by the fork server, so no worker imports them again (0.6 s of a worker's start-up on two busy
cores; what a worker still does alone: read the catalog, rebuild its estimate, 0.2–0.8 s)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_tasks`: ``results`` holds each finished task's result (None: not finished)."""

    def __init__(self, results: list):
        super().__init__("interrupted")
        self.results = results

    @property
    def finished(self) -> int:
        return sum(result is not None for result in self.results)


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else the CPU count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:   # macOS, Windows
        return max(os.cpu_count() or 1, 1)


def check_workers(workers: Optional[int], option: str = "--workers") -> int:
    """``workers`` as a count of processes (None: :func:`default_workers`); a one-line error unless 1 … 1,024."""
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise UserError(f"{option}: expected a whole number of worker processes from 1 to {MAX_WORKERS:,}, "
                        f"got {workers!r}")
    return workers


def fanout_options(workers: Optional[int], ray_address: Optional[str], work: float,
                   in_process_below: float) -> dict:
    """``workers``/``ray_address`` for :func:`run_tasks` from a command's ``--workers``/``--ray`` (None: not given).

    ``work`` is the job's size in the unit of ``in_process_below`` (requests, rows, samples): below it the job
    runs in this process, where a pool's start-up would cost more than the job, unless ``--workers`` or
    ``--ray`` is given (always honoured). ``$RAY_ADDRESS`` alone counts above the threshold only."""
    if ray_address is not None:
        if not ray_address.strip():
            raise UserError("--ray: expected a Ray cluster's address (host:port, 'auto' or 'local'), got ''")
        return {"workers": None if workers is None else check_workers(workers), "ray_address": ray_address}
    if workers is not None:
        return {"workers": check_workers(workers), "ray_address": ""}
    if work < in_process_below:
        return {"workers": 1, "ray_address": ""}
    return {"workers": None, "ray_address": None}


class Rebuilt:
    """A value sent to workers as the recipe that makes it, ``function(*args, **keywords)``, made once per process.

    For what does not pickle, or costs more to pickle than to make: an Estimate (its graph holds the formulas'
    functions) travels as its contract, and each worker process rebuilds it once however many tasks it runs.
    ``value`` in the process that made the Rebuilt is ``made`` when given (nothing is rebuilt there)."""

    _made_here: dict = {}   # per process: the recipe's pickled bytes -> the value, the last KEPT_VALUES made
    KEPT_VALUES = 8

    def __init__(self, function: Callable, *args, made: Any = None, **keywords):
        self.recipe = (function, args, keywords)
        self._made = made

    def __getstate__(self):
        return {"recipe": self.recipe, "_made": None}

    @property
    def value(self):
        if self._made is None:
            key = pickle.dumps(self.recipe)
            if key not in Rebuilt._made_here:
                function, args, keywords = self.recipe
                if len(Rebuilt._made_here) >= Rebuilt.KEPT_VALUES:   # the oldest goes
                    Rebuilt._made_here.pop(next(iter(Rebuilt._made_here)))
                Rebuilt._made_here[key] = function(*args, **keywords)
            self._made = Rebuilt._made_here[key]
        return self._made


def runs_here(workers: Optional[int], ray_address: Optional[str]) -> bool:
    """Whether :func:`run_tasks` with these options runs the tasks in this process (one worker, no Ray)."""
    return workers == 1 and not _address(ray_address)


def _address(ray_address: Optional[str]) -> str:
    """The Ray cluster to use: ``ray_address``, or ``$RAY_ADDRESS`` when it is None; "" for none."""
    return (os.environ.get(RAY_ADDRESS_ENV, "") if ray_address is None else ray_address).strip()


def run_tasks(function: Callable[[Any], Any], tasks: Sequence, *, workers: Optional[int] = None,
              ray_address: Optional[str] = None, progress: Optional[Callable[[int, int], None]] = None) -> list:
    """``[function(task) for task in tasks]``, computed by ``workers`` local processes or on a Ray cluster.

    ``function`` must be importable by name (a module-level function) and ``tasks`` picklable when more than one
    process runs them. ``ray_address`` None reads ``$RAY_ADDRESS``; ``""`` never uses Ray. ``progress(done,
    total)`` is called in this process as tasks finish. A task's exception is raised here (the first to finish
    with one); the other tasks are cancelled and the workers stopped."""
    tasks = list(tasks)
    total = len(tasks)
    results: list = [None] * total
    address = _address(ray_address)
    if address:
        return _run_on_ray(function, tasks, address, progress, results)
    workers = min(check_workers(workers), max(total, 1))
    if workers == 1:
        try:
            for index, task in enumerate(tasks):
                results[index] = function(task)
                if progress is not None:
                    progress(index + 1, total)
        except KeyboardInterrupt:
            raise Interrupted(results) from None
        return results
    return _run_in_processes(function, tasks, workers, progress, results)


def _ignore_interrupts() -> None:
    """A worker's initializer: Ctrl-C is the parent's to handle (it stops the workers)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _context(function):
    """The start method: a fork server that has imported numpy and ``function``'s module, else spawn."""
    import multiprocessing

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # read when the server starts (the first pool of this process); a module it cannot import is skipped
    context.set_forkserver_preload([*PRELOADED, getattr(function, "__module__", "botec")])
    return context


def _run_in_processes(function, tasks, workers, progress, results) -> list:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=_context(function), initializer=_ignore_interrupts)
    finished_cleanly, done_count = False, 0
    try:
        pending = {pool.submit(function, task): index for index, task in enumerate(tasks)}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=pending.get):   # several at once: in task order
                index = pending.pop(future)
                results[index] = future.result()
                done_count += 1
                if progress is not None:
                    progress(done_count, len(tasks))
        finished_cleanly = True
        return results
    except KeyboardInterrupt:
        raise Interrupted(results) from None
    except BrokenProcessPool:
        raise UserError(f"--workers: a worker process ended abruptly (out of memory?); {len(tasks) - done_count:,} "
                        f"of {len(tasks):,} tasks unfinished: try fewer workers") from None
    finally:
        if finished_cleanly:
            pool.shutdown(wait=True)
        else:   # an interrupt or a task's error: what still runs is not waited for
            processes = list((getattr(pool, "_processes", None) or {}).values())   # shutdown forgets them
            pool.shutdown(wait=False, cancel_futures=True)
            _stop(processes)


def _stop(processes: list) -> None:
    """End a pool's worker processes (Python 3.14 has ProcessPoolExecutor.terminate_workers; 3.10–3.13 do not)."""
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(5)


def _ray_start_failure(address: str, error: BaseException) -> str:
    """The one line for a Ray that would not start or answer: the option, what failed, Ray's first line, what to
    try. Under a 4 GiB address-space cap, ``--ray local`` fails after some 37 s with Ray's bare ``Exception: The
    current node timed out during startup``."""
    said = str(error).strip().splitlines()
    reason = said[0][:200] if said else type(error).__name__
    if address == "local":
        return (f"--ray local: Ray could not start a cluster on this machine ({reason}); try --workers N for local "
                "processes instead, or give Ray more memory")
    return (f"--ray: cannot reach the Ray cluster at {address!r} ({reason}); check the address (host:port, or "
            "'auto' on a node of the cluster), or try --workers N for local processes")


def _run_on_ray(function, tasks, address, progress, results) -> list:
    try:
        import ray
    except ImportError:
        raise UserError("--ray: Ray is not installed: pip install 'botec[ray]'") from None
    if not ray.is_initialized():
        try:
            ray.init(address=None if address == "local" else address, include_dashboard=False,
                     log_to_driver=False, ignore_reinit_error=True)
        except Exception as error:   # Ray raises a bare Exception when its node times out starting (out of memory)
            raise UserError(_ray_start_failure(address, error)) from None
    remote = ray.remote(function)
    references = {remote.remote(task): index for index, task in enumerate(tasks)}
    waiting = list(references)
    done_count = 0
    try:
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for reference in ready:
                try:
                    results[references[reference]] = ray.get(reference)
                except ray.exceptions.RayTaskError as error:   # the task's own exception, not Ray's wrapper
                    for other in waiting:
                        ray.cancel(other)
                    cause = getattr(error, "cause", None)
                    raise (cause if isinstance(cause, BaseException) else error) from None
                done_count += 1
                if progress is not None:
                    progress(done_count, len(tasks))
        return results
    except KeyboardInterrupt:
        for reference in waiting:
            ray.cancel(reference, force=True)
        raise Interrupted(results) from None
