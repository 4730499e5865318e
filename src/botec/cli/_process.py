"""Settings that belong to a whole process, made once by the entry point that owns it (never by library code)."""

from __future__ import annotations

import functools
import os

TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024


@functools.cache
def keep_freed_arrays() -> None:
    """Let the C allocator keep the arrays a chunk frees for the next chunk to reuse (glibc only; once per process).

    Every chunk allocates and frees the same few hundred arrays. glibc hands a freed heap top back to the system
    past a threshold it adapts (about twice the largest array freed), so each chunk faulted its pages in afresh:
    the search over GPT-3's 161,280 layouts took 0.31 s instead of 0.18 s. Freed memory up to 256 MB stays in the
    heap (M_TRIM_THRESHOLD) and arrays up to 32 MB come from it (M_MMAP_THRESHOLD); the peak is unchanged (10^7
    candidates: 144 MB). A user's own MALLOC_TRIM_THRESHOLD_ or MALLOC_MMAP_THRESHOLD_ is kept. Worker processes
    (a fork server's children, not this process's) get the same thresholds from those variables, set here."""
    import ctypes

    if any(name in os.environ for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")):
        return
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):   # not glibc (macOS, Windows, musl): its allocator as it is
        return
    m_trim_threshold, m_mmap_threshold = -1, -3   # glibc's <malloc.h>
    mallopt(m_trim_threshold, TRIM_THRESHOLD_BYTES)
    mallopt(m_mmap_threshold, MMAP_THRESHOLD_BYTES)
    os.environ["MALLOC_TRIM_THRESHOLD_"] = str(TRIM_THRESHOLD_BYTES)   # glibc reads them at a worker's start
    os.environ["MALLOC_MMAP_THRESHOLD_"] = str(MMAP_THRESHOLD_BYTES)


def served_app():
    """The web app as each `botec serve` worker process loads it (uvicorn's factory), its garbage collector settled.

    What is alive once the handlers' modules and the catalogs are loaded goes into the collector's permanent
    generation: the catalog, the graphs and the framework's objects are never garbage, and a full collection that
    no longer walks them is several times cheaper (a request allocates enough to trigger collections).
    Collections are made rarer too (the young generation every 200,000 allocations rather than 700, each older
    one every 100 of the younger's rather than 10): a collection holds the interpreter's lock, the event loop's
    with it, and a 250 KB contract's parse allocates enough to set off several; /api/health's worst latency under
    four such parses fell from 0.39-0.57 s to 0.16-0.19 s (a loaded 2-core machine, benchmarks/web_load.py's last
    round)."""
    import gc

    import botec.estimation
    import botec.explore.figure_data
    import botec.report.figures
    import botec.report.html
    import botec.report.json_report  # noqa: F401
    from botec.architecture import model_catalog
    from botec.catalog import accelerators, node_presets
    from botec.web.app import app

    accelerators(), node_presets(), model_catalog()
    gc.collect()
    gc.freeze()
    gc.set_threshold(200_000, 100, 100)
    return app
