"""The calibrated contract: the contract's YAML with the back-solved assumptions written in, its relative paths
made to resolve from where it is written, and estimated before it is handed out (never a contract that
``botec estimate`` would refuse)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from botec.errors import ContractError
from botec.measure.calibrate.results import Calibration

PATH_FIELDS = ("workload.model.config", "assumptions.efficiency_curve", "assumptions.speculative_decoding.draft_model")
"""The contract fields that name a file, read relative to the contract's folder (a draft model only when it is a
``.json`` path: else it is a catalog name)."""


def _field(data: dict, path: str):
    """The value at the dotted ``path`` of a raw contract mapping, or None."""
    node = data
    for key in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def rewrite_relative_paths(data: dict, contract_folder: Path, output_folder: Path) -> None:
    """Make each relative path of :data:`PATH_FIELDS` resolve from ``output_folder`` as it did from
    ``contract_folder`` (in place): ``os.path.relpath(contract_folder / path, output_folder)``, or the absolute
    path where no relative one exists (another drive)."""
    from botec.contract import set_field

    for path_field in PATH_FIELDS:
        value = _field(data, path_field)
        if not isinstance(value, str) or Path(value).is_absolute() or \
                (path_field.endswith("draft_model") and not value.endswith(".json")):
            continue
        target = Path(contract_folder, value).resolve()
        try:
            rewritten = os.path.relpath(target, output_folder)
        except ValueError:   # Windows: another drive
            rewritten = str(target)
        set_field(data, path_field, Path(rewritten).as_posix())


def calibrated_data(contract_path: str | Path | None, calibration: Calibration,
                    overrides: list[str] | tuple[str, ...] = (), output_folder: str | Path | None = None) -> dict:
    """The contract's raw mapping with the ``--set`` overrides the calibration ran with and the back-solved
    assumptions written in (measured, with their source); its relative paths rewritten for ``output_folder``
    (:func:`rewrite_relative_paths`; None: the contract's own folder)."""
    from botec.contract import apply_overrides, read_contract_data, remove_field, set_field
    from botec.estimation import reference_contract_path

    if contract_path is None:
        from botec.yamlfile import load_yaml_text

        data = load_yaml_text(reference_contract_path().read_text(encoding="utf-8"))
    else:
        data = read_contract_data(contract_path)
    if overrides:
        data = apply_overrides(data, list(overrides))
    for path, (value, note) in calibration.assumptions.items():
        set_field(data, path, {"value": float(f"{value:.6g}"), "source": note, "provenance": "measured"})
        section, _, name = path.rpartition(".")
        if name in ("end_to_end_mfu", "end_to_end_hfu"):
            for replaced in ("single_accelerator_mfu", "single_accelerator_hfu", "scaling_efficiency"):
                remove_field(data, f"{section}.{replaced}")
    if contract_path is not None and output_folder is not None:
        rewrite_relative_paths(data, Path(contract_path).resolve().parent, Path(output_folder).resolve())
    return data


def check_estimates(data: dict, calibration: Calibration, base_dir: Path | None) -> None:
    """Estimate the calibrated contract as ``botec estimate`` would read it (paths from ``base_dir``); a
    one-line :class:`ContractError` naming the field when it would be refused: a back-solved value out of its
    field's range (a negative saved-tensor factor from a measurement whose activations came out negative)."""
    from botec.contract import parse_contract
    from botec.estimation import estimate

    try:
        estimate(parse_contract(data, origin="the calibrated contract"), base_dir=base_dir, compare=False)
    except ContractError as error:
        for path, (value, note) in calibration.assumptions.items():
            if error.field and error.field.startswith(path):
                raise ContractError(f"{value:.6g} back-solved ({note}) is not a value a contract takes "
                                    f"({error.detail}): nothing written", field=path) from None
        raise ContractError(f"the calibrated contract would be refused ({error}): nothing written",
                            field=error.field) from None


def calibrated_contract(contract_path: str | Path | None, calibration: Calibration, origin_text: str | None = None,
                        overrides: list[str] | tuple[str, ...] = (), output_folder: str | Path | None = None) -> str:
    """The calibrated contract's YAML (:func:`calibrated_data`), checked to estimate (:func:`check_estimates`),
    with a header naming the calibration. ``output_folder``: where it will be written (its relative paths are
    rewritten to resolve from there); None: the contract's own folder."""
    import yaml

    data = calibrated_data(contract_path, calibration, overrides, output_folder)
    folder = output_folder if output_folder is not None else \
        (Path(contract_path).resolve().parent if contract_path is not None else None)
    check_estimates(data, calibration, Path(folder) if folder is not None else None)
    stamp = datetime.date.today().isoformat()
    header = (f"# botec calibrated contract ({stamp}): assumptions marked provenance: measured were back-solved "
              f"by `botec calibrate`{' from ' + origin_text if origin_text else ''}.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
