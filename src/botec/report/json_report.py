"""The estimate as one JSON object, in base units (bytes, FLOP, seconds), for scripts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from botec import __version__
from botec.report import layout_line, methods

if TYPE_CHECKING:   # a type only: report/ draws the Estimate it is handed (botec.estimation shows itself through it)
    from botec.estimation import Estimate


_CANDIDATE_FIGURES = ("replicas", "serving_accelerators", "decode_batch_size", "time_per_output_token_seconds",
                      "time_to_first_token_seconds", "serving_cost_per_day_usd", "cost_per_million_output_tokens_usd",
                      "cost_per_million_input_tokens_usd")


def quantity_record(q) -> dict:
    """One quantity: ``{name, account, value (base units), unit, meaning, formula, condition, inputs,
    source: {provenance, field, note}, low, high}``."""
    return {
        "name": q.name,
        "account": q.account,
        "value": q.value,
        "unit": q.unit,
        "meaning": q.definition.meaning,
        "formula": q.formula,
        "condition": q.condition,
        "inputs": list(q.inputs),
        "source": {"provenance": q.provenance, "field": q.field, "note": q.source},
        "low": q.low,
        "high": q.high,
    }


def quantity_frame(result: Estimate):
    """Every quantity as a row of a pandas DataFrame indexed by name: value (base units), unit, meaning, formula,
    ..., and its source as three columns (provenance, field, source). ``Estimate.to_dataframe``."""
    try:
        import pandas
    except ImportError:
        raise ImportError("Estimate.to_dataframe needs pandas: pip install 'botec[pandas]'") from None
    rows = []
    for quantity in result.quantities.values():
        record = quantity_record(quantity)
        source = record.pop("source")
        rows.append(record | {"provenance": source["provenance"], "field": source["field"], "source": source["note"]})
    return pandas.DataFrame(rows).set_index("name")


def to_dict(result: Estimate) -> dict:
    """``{botec_version, catalog_revised, kind, contract, notes, accelerator, formats, fits, fits_device, methods,
    layout, quantities: [...], findings: [...], candidates: [...]}``."""
    from botec.catalog import catalog_revised

    quantities = [quantity_record(q) for q in result.quantities.values()]
    return {
        "botec_version": __version__,
        "catalog_revised": catalog_revised(),
        "kind": result.kind,
        "contract": result.contract.model_dump(mode="json", exclude_none=True),
        "notes": result.contract.notes,
        "accelerator": result.inputs.accelerator_label,
        "formats": result.inputs.formats_label,
        "fits": result.fits,                 # training: the plan fits with its headroom kept (botec.findings.fit)
        "fits_device": result.fits_device,   # training: its allocations fit the device, the headroom eaten
        "methods": dict(result.choices) | {"summary": methods(result)},
        "layout": layout_line(result),
        "quantities": quantities,
        "findings": [finding.as_dict() for finding in result.findings],
        "candidates": [
            {"accelerator": key, **({"error": outcome} if isinstance(outcome, str) else
                                    {name: outcome[name].value for name in _CANDIDATE_FIGURES if name in outcome})}
            for key, outcome in (result.candidates or [])],
    }


def render(result: Estimate) -> str:
    return json.dumps(to_dict(result), indent=2, ensure_ascii=False, allow_nan=False)
