"""botec: capacity planning for AI workloads, with every assumption named.

The Python API in three lines::

    from botec import estimate_file
    result = estimate_file("examples/lesson-finetune-1b.yaml")
    result.value("run_seconds")          # 31250.0 (base units: seconds)
"""

__version__ = "0.5.0"

__all__ = ["__version__", "estimate_file", "load_contract"]


def __getattr__(name):  # imported lazily: `import botec` stays cheap
    if name == "estimate_file":
        from botec.estimate import estimate_file

        return estimate_file
    if name == "load_contract":
        from botec.contract import load_contract

        return load_contract
    raise AttributeError(name)
