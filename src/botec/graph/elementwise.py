"""Elementwise helpers for formulas: plain math on floats, numpy on arrays (numpy imported only then).

A formula is written once and evaluates a single estimate (floats) and a sweep or a Monte Carlo
(numpy arrays). Arithmetic operators already work on both; these helpers cover what Python's
``math`` and ``min``/``max``/``if`` would otherwise write twice.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ceil", "floor", "log", "log2", "exp", "exprel", "minimum", "maximum", "where", "is_scalar", "all_true"]


_SCALARS = (int, float)


def is_scalar(*values: Any) -> bool:
    for value in values:  # a loop, not all(generator): formulas call this hundreds of thousands of times
        if not isinstance(value, _SCALARS):
            return False
    return True


def ceil(x):
    """⌈x⌉, elementwise."""
    if is_scalar(x):
        return float(math.ceil(x)) if math.isfinite(x) else x  # inf/nan pass through to the finite check
    import numpy as np

    return np.ceil(x)


def floor(x):
    """⌊x⌋, elementwise."""
    if is_scalar(x):
        return float(math.floor(x)) if math.isfinite(x) else x
    import numpy as np

    return np.floor(x)


def log(x):
    """ln x, elementwise."""
    if is_scalar(x):
        return math.log(x)
    import numpy as np

    return np.log(x)


def log2(x):
    """log₂ x, elementwise."""
    if is_scalar(x):
        return math.log2(x)
    import numpy as np

    return np.log2(x)


def exp(x):
    """eˣ, elementwise."""
    if is_scalar(x):
        return math.exp(x)
    import numpy as np

    return np.exp(x)


def exprel(x):
    """(eˣ − 1) / x, elementwise, with its limit 1 at x = 0 (accurate for small x, as scipy.special.exprel)."""
    if is_scalar(x):
        return math.expm1(x) / x if x != 0 else 1.0
    import numpy as np

    x = np.asarray(x, dtype=float)
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 1.0, np.expm1(safe) / safe)


def minimum(a, b):
    """min(a, b), elementwise."""
    if isinstance(a, _SCALARS) and isinstance(b, _SCALARS):
        return b if b < a else a  # min(a, b), without the builtin's call overhead
    import numpy as np

    return np.minimum(a, b)


def maximum(a, b):
    """max(a, b), elementwise."""
    if isinstance(a, _SCALARS) and isinstance(b, _SCALARS):
        return b if b > a else a  # max(a, b), without the builtin's call overhead
    import numpy as np

    return np.maximum(a, b)


def where(condition, if_true, if_false):
    """``if_true`` where ``condition`` holds, else ``if_false``, elementwise."""
    if isinstance(condition, bool) or is_scalar(condition):
        return if_true if condition else if_false
    import numpy as np

    return np.where(condition, if_true, if_false)


def all_true(condition) -> bool:
    """Whether a condition holds everywhere (a bool, or every element of an array)."""
    if isinstance(condition, bool) or is_scalar(condition):
        return bool(condition)
    import numpy as np

    return bool(np.all(condition))
