"""A stated number: a value in base units, with an optional range, source, provenance and distribution.

Every number of a contract accepts units (``32 GB``, ``200 TFLOP/s``, ``1 h``, ``7B``) or a plain
number in base units, and may be written as a mapping that states its uncertainty and origin::

    single_accelerator_mfu: {value: 0.30, low: 0.20, high: 0.45, source: "short run on 1 GPU"}

:func:`quantity` makes the pydantic type of such a field, with its dimension and bounds; its
errors name what was expected.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Optional, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, NonNegativeInt, PositiveInt, WithJsonSchema

from botec.units import DIMENSIONS, UnitError, excerpt, parse_quantity

__all__ = ["Stated", "STATED_SCHEMA", "STATED_SCHEMA_NAME", "quantity", "default", "default_range", "DISTRIBUTIONS",
           "STATED_PROVENANCES", "STATED_KEYS", "MAX_WHOLE_NUMBER", "PositiveCount", "NonNegativeCount",
           "below_whole_bound"]

SMALLEST_MAGNITUDE, LARGEST_MAGNITUDE = 1e-30, 1e30
"""Every stated number other than 0 lies within these, in base units (B, FLOP, s, FLOP/s, tokens, USD, ...): the
largest legitimate inputs (10^15 tokens, 10^5 accelerators, a 10^26-FLOP budget, exabytes of storage) and the
smallest (a 10^-9 s latency) are far inside, and anything outside would overflow or vanish in the formulas
(10^308 accelerators, 5e-324 parameters). A ratio (an efficiency, a headroom, a rate of loss) has no lower bound:
a tiny fraction is a legitimate way to say "almost none", and the formulas stay finite with it."""
MAX_WHOLE_NUMBER = 10**18
"""A whole number (a count: accelerators, layers, batch sizes, sequence length) is below this: int64 holds it."""


def below_whole_bound(raw: Any) -> Any:
    """``raw`` unchanged unless it is a count of ``MAX_WHOLE_NUMBER`` or more in any form a count field takes: an
    int, a float, or a string of digits (pydantic turns ``'9…9'``, quoted in YAML, into an int of any size, which
    then overflowed a float in the formulas: OverflowError). A string is judged by its digits before anything
    parses it (a 10^6-digit string costs nothing), so the bound is checked before any arithmetic."""
    if isinstance(raw, str):
        digits = raw.strip().lstrip("+-").replace("_", "")
        too_large = digits.isdigit() and len(digits.lstrip("0")) > len(str(MAX_WHOLE_NUMBER)) - 1
    elif isinstance(raw, float):
        too_large = math.isfinite(raw) and abs(raw) >= MAX_WHOLE_NUMBER
    else:
        too_large = isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) >= MAX_WHOLE_NUMBER
    if too_large:
        raise ValueError(f"expected a whole number below 10^18, got {excerpt(raw)}")
    return raw


PositiveCount = Annotated[PositiveInt, BeforeValidator(below_whole_bound)]
"""A count field of a contract (a degree, a rank, instances): a whole number from 1 to below 10^18."""
NonNegativeCount = Annotated[NonNegativeInt, BeforeValidator(below_whole_bound)]
"""A count field that may be 0 (shared experts, dense layers, redundant experts): 0 to below 10^18."""

Distribution = Literal["triangular", "uniform", "normal", "lognormal"]
StatedProvenance = Literal["assumed", "measured"]


class Stated(BaseModel):
    """A stated number in base units, with an optional uncertainty range and a source note."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    low: Optional[float] = None
    high: Optional[float] = None
    source: Optional[str] = None
    provenance: StatedProvenance = "assumed"
    distribution: Distribution = "triangular"

    def scaled(self, factor: float) -> "Stated":
        """The same statement in another unit: value and range times ``factor``, everything else kept."""
        return self.model_copy(update={"value": self.value * factor,
                                       "low": None if self.low is None else self.low * factor,
                                       "high": None if self.high is None else self.high * factor})


STATED_KEYS = tuple(Stated.model_fields)
DISTRIBUTIONS = get_args(Distribution)
STATED_PROVENANCES = get_args(StatedProvenance)


STATED_SCHEMA_NAME = "StatedNumber"
STATED_SCHEMA = {  # the mapping form of every number field (contract_schema() keeps one copy, in $defs)
    "type": "object",
    "description": "A number stated with its uncertainty and origin; each of value, low and high takes the field's "
                   "units (or a plain number in base units).",
    "properties": {
        "value": {"type": ["number", "string"], "description": "the planning value, e.g. 0.3 or '32 GB'"},
        "low": {"type": ["number", "string"],
                "description": "low end of the range --uncertainty and sensitivity vary (default: none)"},
        "high": {"type": ["number", "string"],
                 "description": "high end of the range --uncertainty and sensitivity vary (default: none)"},
        "source": {"type": "string", "description": "where the number comes from (shown beside it in reports)"},
        "provenance": {"enum": list(STATED_PROVENANCES),
                       "description": "assumed (the default) or measured (botec calibrate writes measured)"},
        "distribution": {"enum": list(DISTRIBUTIONS),
                         "description": "the shape --uncertainty samples between low and high (default: triangular)"},
    },
    "required": ["value"],
    "additionalProperties": False,
}


def default(value: float, source: str) -> Stated:
    """A default a contract need not state, with where it comes from."""
    return Stated(value=value, source=f"default: {source}")


def default_range(value: float, low: float, high: float, source: str) -> Stated:
    """A default with the range ``--uncertainty`` and ``sensitivity`` vary, and where it comes from."""
    return Stated(value=value, low=low, high=high, source=f"default: {source}")


def quantity(dimension: str, description: str, *, minimum: float | None = None,
             exclusive_minimum: float | None = None, maximum: float | None = None, integer: bool = False):
    """A contract field holding a :class:`Stated` number of ``dimension``, checked against its bounds."""
    expected = DIMENSIONS[dimension][0]
    bounds = []
    if exclusive_minimum is not None:
        bounds.append(f"greater than {exclusive_minimum:g}")
    if minimum is not None:
        bounds.append(f"at least {minimum:g}")
    if maximum is not None:
        bounds.append(f"at most {maximum:g}")
    kind = "a whole number" if integer else "a number"
    smallest = 0.0 if dimension == "ratio" else SMALLEST_MAGNITUDE
    magnitudes = "at most 1e30" if dimension == "ratio" else "0 or between 1e-30 and 1e30"
    requirement = f"{kind} {' and '.join(bounds)}".strip()

    def check(number: float, raw: object, what: str) -> float:
        broken = ((integer and number != int(number))
                  or (exclusive_minimum is not None and not number > exclusive_minimum)
                  or (minimum is not None and number < minimum)
                  or (maximum is not None and number > maximum))
        if broken:
            raise ValueError(f"{what} must be {requirement}, got {excerpt(raw)}")
        if integer and abs(number) >= MAX_WHOLE_NUMBER:
            raise ValueError(f"{what} must be a whole number below 10^18, got {excerpt(raw)}")
        if number != 0 and not smallest <= abs(number) <= LARGEST_MAGNITUDE:
            raise ValueError(f"{what} must be {magnitudes} in base units, got {excerpt(raw)}")
        return number

    def parse(raw: object, what: str = "value") -> float:
        try:
            number = parse_quantity(raw, dimension)
        except UnitError as error:
            raise ValueError(str(error)) from None
        return check(number, raw, what)

    def validate(raw: Any) -> Stated:
        if isinstance(raw, Stated):
            return raw
        if not isinstance(raw, dict):
            return Stated(value=parse(raw))
        unknown = set(raw) - set(STATED_KEYS)
        if unknown:
            raise ValueError(f"unknown key {excerpt(sorted(unknown, key=str)[0])}; a ranged value has keys "
                             f"{', '.join(STATED_KEYS)}")
        if "value" not in raw:
            raise ValueError("a ranged value needs 'value' (and optionally low, high, source)")
        value = parse(raw["value"])
        low = parse(raw["low"], "low") if raw.get("low") is not None else None
        high = parse(raw["high"], "high") if raw.get("high") is not None else None
        if low is not None and low > value:
            raise ValueError(f"low ({excerpt(raw['low'])}) must not exceed value ({excerpt(raw['value'])})")
        if high is not None and high < value:
            raise ValueError(f"high ({excerpt(raw['high'])}) must not be below value ({excerpt(raw['value'])})")
        provenance = raw.get("provenance", "assumed")
        if provenance not in STATED_PROVENANCES:
            raise ValueError(f"provenance must be {' or '.join(map(repr, STATED_PROVENANCES))}, got "
                             f"{excerpt(provenance)}")
        distribution = raw.get("distribution", "triangular")
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, got {excerpt(distribution)}")
        if distribution == "lognormal" and low is not None and low <= 0:
            raise ValueError("a lognormal range needs a positive low")
        source = raw.get("source")
        return Stated(value=value, low=low, high=high, source=None if source is None else str(source),
                      provenance=provenance, distribution=distribution)

    schema = {
        "description": f"{description}. {requirement[0].upper() + requirement[1:]}: {expected}; "
                       f"or a mapping {{{', '.join(STATED_KEYS)}}}.",
        "anyOf": [
            {"type": "number"},
            {"type": "string"},
            STATED_SCHEMA,  # contract_schema() moves it to $defs, named STATED_SCHEMA_NAME, and refers to it
        ],
    }
    return Annotated[Stated, BeforeValidator(validate), WithJsonSchema(schema)]
