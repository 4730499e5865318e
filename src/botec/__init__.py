"""botec: capacity planning for AI workloads, with every assumption named.

The Python API (:mod:`botec.api`)::

    import botec
    result = botec.estimate("examples/lesson-finetune-1b.yaml", supply__count=8)
    result.value("run_seconds")          # 15625.0 (base units: seconds)
    print(result.explain("run_seconds"))
    botec.sweep("examples/lesson-finetune-1b.yaml", {"supply.count": [4, 8, 16]})

``botec.estimate`` is the function :func:`botec.api.estimate`; the module that computes an estimate is
:mod:`botec.estimation`. Nothing heavy is imported by ``import botec``: each name loads its module when
first used.
"""

__version__ = "0.7.0"

__all__ = ["__version__", "Estimate", "estimate", "estimate_file", "load_contract", "sweep"]

_FROM = {"estimate": "botec.api", "sweep": "botec.api", "Estimate": "botec.api",  # the API binds the display
         "estimate_file": "botec.estimation", "load_contract": "botec.contract"}


def __getattr__(name):  # imported lazily: `import botec` stays cheap
    if name not in _FROM:
        raise AttributeError(f"module 'botec' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_FROM[name]), name)
