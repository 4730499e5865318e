"""The catalog folder every catalog file is read from, and the caches of what was read from it.

The folder is the packaged one (``src/botec/catalog``) unless the environment variable ``BOTEC_CATALOG`` names
another: a whole catalog of the same layout (``hardware.yaml``, ``efficiency.yaml``, ``stacks.yaml``,
``engines.yaml``, ``models.yaml``, ``nodes.yaml``, ``optimizers.yaml``, ``runtime.yaml``, ``measurements/``,
``calibrations/``). A new accelerator family, training stack or serving engine is then a YAML block in that copy,
no code edit (tests/test_catalog_extension.py).

What is read from the folder is kept for the process (:func:`catalog_cache`); a process that switches folders
(a test setting ``BOTEC_CATALOG``) calls :func:`clear_catalog_caches` after it does.
"""

from __future__ import annotations

import os
from functools import lru_cache

__all__ = ["CATALOG_VARIABLE", "catalog_cache", "catalog_root", "clear_catalog_caches"]

CATALOG_VARIABLE = "BOTEC_CATALOG"

_CACHED = []   # every function decorated with catalog_cache, in the order their modules were imported


def catalog_root():
    """The catalog folder: ``BOTEC_CATALOG``'s when set (a one-line :class:`~botec.errors.UserError` when it
    is no folder), else the packaged ``botec.catalog``. Either answers ``joinpath``, ``read_text``, ``iterdir``."""
    folder = os.environ.get(CATALOG_VARIABLE)
    if not folder:
        from importlib import resources

        return resources.files("botec.catalog")
    from pathlib import Path

    path = Path(folder).expanduser()
    if not path.is_dir():
        from botec.errors import UserError

        raise UserError(f"{CATALOG_VARIABLE}={folder!r} is not a folder (expected a catalog folder laid out like "
                        "botec's own: hardware.yaml, efficiency.yaml, stacks.yaml, engines.yaml, ...)")
    return path


def catalog_cache(function=None, /, *, maxsize: int | None = None):
    """``functools.lru_cache`` for a function whose answer depends on the catalog's files, registered so that
    :func:`clear_catalog_caches` empties it. ``@catalog_cache`` keeps every answer; ``@catalog_cache(maxsize=256)``
    the latest 256."""

    def decorate(inner):
        cached = lru_cache(maxsize=maxsize)(inner)
        _CACHED.append(cached)
        return cached

    return decorate if function is None else decorate(function)


def clear_catalog_caches() -> None:
    """Forget everything read from the catalog folder (call it after changing ``BOTEC_CATALOG``). A module not
    yet imported has nothing cached, so only the imported ones are cleared."""
    for cached in _CACHED:
        cached.cache_clear()
