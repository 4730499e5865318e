"""The Python API for notebooks and scripts: estimate a contract, change its fields, sweep them.

    import botec

    result = botec.estimate("examples/lesson-finetune-1b.yaml", strategy__micro_batch_size=4)
    result                                  # in Jupyter: the findings and the accounts' tables
    result.value("run_seconds")             # base units: seconds
    print(result.explain("planned_device_bytes"))
    result.to_dataframe()                   # one row per quantity (pip install 'botec[pandas]')
    botec.sweep("examples/lesson-finetune-1b.yaml", {"supply.count": [4, 8, 16]}, outputs=["run_seconds"])

A *source* is a contract file's path, the contract as a mapping (what the YAML file holds), a
contract object (``botec.load_contract(path)``), or None for the built-in reference workload.
Fields are changed as keywords, ``__`` standing for the dots (``supply__count=8``), or as a mapping
``overrides={"supply.count": 8}``; values are what the contract file would hold (``"64 GB"``, ``8``,
``"full"``). Bad input raises the same one-line :class:`botec.errors.ContractError` as the CLI.

Every :class:`Estimate` shows itself, whatever was imported: its ``_repr_html_``, ``_repr_markdown_`` and
``to_dataframe`` are its own methods (drawn by :mod:`botec.report`, imported when first called).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from botec.errors import ContractError
from botec.estimation import Estimate

__all__ = ["Estimate", "estimate", "notebook_html", "notebook_markdown", "sweep", "to_dataframe", "SWEEP_OUTPUTS"]

SWEEP_OUTPUTS = ("run_seconds", "planned_device_bytes", "step_seconds")


def _plain(value: Any) -> Any:
    """A value JSON cannot write itself: a numpy number or a path."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(type(value).__name__)


def _override_lines(overrides: Mapping[str, Any] | list[str] | None, fields: dict[str, Any]) -> list[str]:
    """``FIELD=VALUE`` lines (as ``--set`` takes them) from a mapping of dotted paths and ``a__b`` keywords."""
    if overrides is None:
        overrides = {}
    if isinstance(overrides, (list, tuple)):  # already FIELD=VALUE lines
        lines = [str(line) for line in overrides]
        overrides = {}
    elif isinstance(overrides, Mapping):
        lines = []
    else:
        raise ContractError(f"expected a mapping such as {{'supply.count': 8}}, got {type(overrides).__name__}",
                            field="overrides")
    changes = dict(overrides) | {name.replace("__", "."): value for name, value in fields.items()}
    for path, value in changes.items():
        try:
            text = json.dumps(value, default=_plain)  # JSON is YAML: apply_overrides reads it back as written
        except (TypeError, ValueError):
            raise ContractError(f"{type(value).__name__} cannot be written in a contract (a number, a string "
                                "such as '64 GB', a list or a mapping)", field=path) from None
        lines.append(f"{path}={text}")
    return lines


def load(source=None, overrides: Mapping[str, Any] | list[str] | None = None, **fields: Any):
    """(contract, base directory for its relative paths) from a path, a mapping, a contract object or None."""
    from botec.contract import ServingContract, TrainingContract, apply_overrides, load_contract, parse_contract

    lines = _override_lines(overrides, fields)
    if source is None:
        from importlib import resources

        from botec.estimation import REFERENCE_CONTRACT, reference_contract_path

        with resources.as_file(reference_contract_path()) as reference:
            return load_contract(reference, lines, origin=f"reference workload {REFERENCE_CONTRACT}"), None
    if isinstance(source, (str, Path)):
        return load_contract(source, lines), Path(source).resolve().parent
    if isinstance(source, Mapping):
        data = dict(source)
    elif isinstance(source, (TrainingContract, ServingContract)):
        data = source.model_dump(mode="json", exclude_unset=True)
    else:
        raise ContractError(f"expected a contract file's path, a mapping or a contract, got {type(source).__name__}",
                            field="source")
    return parse_contract(apply_overrides(data, lines) if lines else data), None


def estimate(source=None, overrides: Mapping[str, Any] | list[str] | None = None, **fields: Any):
    """Estimate a contract (path, mapping, contract object, or None: the reference workload) with fields changed.

    ``botec.estimate("job.yaml", supply__count=16, overrides={"strategy.micro_batch_size": 4})``
    returns a :class:`botec.estimation.Estimate`: ``.value(name)`` (base units), ``.explain(name)``,
    ``.to_dataframe()``, ``.findings``; Jupyter shows its findings and tables.
    """
    from botec.estimation import estimate as estimate_contract

    contract, base_dir = load(source, overrides, **fields)
    return estimate_contract(contract, base_dir=base_dir)


def _axis_text(path: str, values: Any) -> str:
    """``path=v1,v2,...`` (as ``botec sweep --set`` takes it) from a list of values or a range string."""
    if isinstance(values, str):
        return f"{path}={values}"  # "1..8", "0.2:0.5:4", "4,8,16"
    try:
        items = [_plain(v) if hasattr(v, "item") else v for v in values]
    except TypeError:
        raise ContractError(f"expected a list of values or a range such as '1..8', got {type(values).__name__}",
                            field=path) from None
    return f"{path}={','.join(str(item) for item in items)}"


def sweep(source=None, axes: Mapping[str, Any] | None = None, outputs: list[str] | tuple[str, ...] = SWEEP_OUTPUTS,
          overrides: Mapping[str, Any] | list[str] | None = None, cap: int = 10_000_000, **fields: Any):
    """Every combination of the axes' values, through the same formulas as ``botec sweep`` (numpy arrays).

    ``axes`` maps contract fields to values: ``{"supply.count": [8, 16, 32], "strategy.micro_batch_size": "1..8"}``.
    Returns a pandas DataFrame when pandas is installed, else a dict of numpy arrays, with one column per
    axis (in the contract's units: counts, bytes, seconds), one per output (base units), ``valid``
    (the configuration respects the layout rules), ``fits`` (valid, and it fits in memory with the headroom kept, as
    ``botec estimate`` requires) and ``fits_device`` (valid, and its allocations fit the device, the headroom eaten).
    Outputs of configurations that are not valid are NaN.
    """
    try:
        import numpy  # noqa: F401 (only checks that numpy is installed)
    except ImportError:
        raise ImportError("botec.sweep evaluates the formulas on arrays: pip install 'botec[array]' (numpy)") from None
    from botec.explore.space import Space, evaluate_space, fit_quantities, fits_mask, parse_axes
    from botec.inputs import build_inputs

    if not axes:
        raise ContractError("give at least one field to sweep, e.g. {'supply.count': [8, 16, 32]}", field="axes")
    contract, base_dir = load(source, overrides, **fields)
    inputs = build_inputs(contract, base_dir)
    if inputs.kind != "training":
        raise ContractError("sweeps run over training contracts (serving: botec.estimate with the traffic changed)",
                            field="source")
    outputs = [outputs] if isinstance(outputs, str) else list(outputs)
    try:
        parsed = parse_axes([_axis_text(path, values) for path, values in axes.items()], inputs, cap, field="axes",
                            cap_words="cap={cap:,}")
        space = Space(inputs, parsed)
        columns, valid, _ = evaluate_space(space, wanted=list(dict.fromkeys(outputs + fit_quantities(inputs))))
    except ContractError as error:  # the CLI's option names, in the API's words
        field = {"--set": "axes", "--quantity": "outputs"}.get(error.field, error.field)
        raise ContractError(error.detail, field=field, origin=error.origin) from None
    table = {axis.path: columns[axis.path] for axis in parsed} | {name: columns[name] for name in outputs}
    table |= {"valid": valid, "fits": fits_mask(columns, valid),
              "fits_device": fits_mask(columns, valid, "fits_device")}
    try:
        import pandas
    except ImportError:
        return table
    return pandas.DataFrame(table)


def to_dataframe(result: Estimate):
    """``result.to_dataframe()`` (kept for scripts written against 0.7, when the API bound the method)."""
    return result.to_dataframe()


def notebook_html(result: Estimate) -> str:
    """``result._repr_html_()``: what Jupyter shows for an estimate (kept for scripts written against 0.7)."""
    return result._repr_html_()


def notebook_markdown(result: Estimate) -> str:
    """``result._repr_markdown_()``: the estimate as Markdown (kept for scripts written against 0.7)."""
    return result._repr_markdown_()
