"""botec: capacity planning for AI workloads, with every assumption named.

The Python API (:mod:`botec.api`)::

    import botec
    result = botec.estimate("examples/lesson-finetune-1b.yaml", supply__count=8)
    result.value("run_seconds")          # 15625.0 (base units: seconds)
    print(result.explain("run_seconds"))
    botec.sweep("examples/lesson-finetune-1b.yaml", {"supply.count": [4, 8, 16]})

Nothing heavy is imported by ``import botec``: each name loads its module when first used.
"""

__version__ = "0.7.0"

__all__ = ["__version__", "Estimate", "estimate", "estimate_file", "load_contract", "sweep"]


def __getattr__(name):  # imported lazily: `import botec` stays cheap
    if name == "estimate":  # the module botec.estimate, callable as botec.api.estimate
        import importlib

        return importlib.import_module("botec.estimate")
    if name == "Estimate":
        from botec.estimate import Estimate

        return Estimate
    if name == "sweep":
        from botec.api import sweep

        return sweep
    if name == "estimate_file":
        from botec.estimate import estimate_file

        return estimate_file
    if name == "load_contract":
        from botec.contract import load_contract

        return load_contract
    raise AttributeError(name)
