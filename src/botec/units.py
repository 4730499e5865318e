"""Units at the boundary, SI inside.

People write quantities the way they read them on a datasheet or in a lesson: ``32 GB``,
``200 TFLOP/s``, ``25 GB/s``, ``200 Gbps``, ``1 h``, ``2,048``, ``1e9``, ``7B``, ``30%``.
:func:`parse_quantity` turns such a text into a float in the base unit of its *dimension*
(bytes, FLOP, FLOP/s, bytes/s, seconds, ...); :func:`format_quantity` turns a base-unit float
back into text. Inside botec every number is a float in base units and its name says which.

Decimal prefixes are the default, as in the lesson (1 GB = 10^9 B); binary prefixes
(KiB, MiB, GiB, TiB) are accepted on input and used on output with ``system="binary"``.
``KB`` is read as the decimal kilobyte (10^3 B), the way the lesson writes "128 KB/s".

We parse by hand rather than through a units library (pint, astropy.units) on purpose: the
grammar is small and fixed, and a units registry costs more start-up time (hundreds of ms)
than the whole single estimate is allowed (see ``benchmarks/estimate_startup.py``).
"""

from __future__ import annotations

import math
import re

__all__ = [
    "DIMENSIONS",
    "UnitError",
    "parse_quantity",
    "format_quantity",
    "format_number",
    "dimension_of_unit",
    "excerpt",
]


class UnitError(ValueError):
    """A quantity that does not parse in its expected dimension; the message says what was expected."""


_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def _prefixed(base_names: list[str], scale: float = 1.0, binary: bool = False) -> dict[str, float]:
    """All spellings ``<prefix><base>`` of a unit, mapped to their factor to the base unit."""
    table: dict[str, float] = {}
    prefixes = dict(_DECIMAL)
    if binary:
        prefixes.update(_BINARY)
    for base in base_names:
        for prefix, factor in prefixes.items():
            table[prefix + base] = factor * scale
    return table


_BYTES = _prefixed(["B"], binary=True) | {"byte": 1.0, "bytes": 1.0}
_BITS = _prefixed(["b", "bit"], scale=1 / 8, binary=True)
_PER_SECOND = ["/s", "ps", "/sec", " per second"]

_SECONDS = {
    "": 1.0, "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "wk": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "y": 365.25 * 86400.0, "yr": 365.25 * 86400.0, "year": 365.25 * 86400.0, "years": 365.25 * 86400.0,
}

# Short-scale multipliers for counts: "7B" parameters, "2T" tokens, "16k" sequences.
_COUNT_SCALE = {
    "": 1.0, "k": 1e3, "K": 1e3, "thousand": 1e3, "M": 1e6, "million": 1e6,
    "B": 1e9, "G": 1e9, "billion": 1e9, "T": 1e12, "trillion": 1e12,
}
_COUNT_NOUNS = (
    "tokens", "token", "parameters", "parameter", "params", "param", "sequences", "sequence",
    "steps", "step", "accelerators", "accelerator", "gpus", "GPUs", "devices", "layers",
    "requests", "checkpoints", "copies",
)


def _rate(table: dict[str, float]) -> dict[str, float]:
    return {name + suffix: factor for name, factor in table.items() if name for suffix in _PER_SECOND}


def _build_dimensions() -> dict[str, tuple[str, dict[str, float]]]:
    flop = _prefixed(["FLOP", "FLOPs", "flop", "flops"])
    flop_rate = _rate(_prefixed(["FLOP", "FLOPs", "flop"])) | _prefixed(["FLOPS"])
    return {
        "bytes": ("a byte size such as '32 GB', '14 GiB' or a number of bytes", _BYTES | {"": 1.0}),
        "byte_rate": (
            "a bandwidth such as '25 GB/s', '200 Gbps' or a number of bytes per second",
            _rate(_BYTES) | _rate(_BITS) | {"": 1.0},
        ),
        "flop": ("an amount of work such as '6e18 FLOP' or '6 EFLOP'", flop | {"": 1.0}),
        "flop_rate": ("a compute rate such as '200 TFLOP/s' or '989 TFLOPS'", flop_rate | {"": 1.0}),
        "seconds": ("a duration such as '1 h', '30 min', '14 s' or a number of seconds", _SECONDS),
        "count": ("a count such as '2,048', '1e9', '7B' or '2T tokens'", _COUNT_SCALE),
        "count_rate": ("a rate such as '28,837 tokens/s', '12.5k tokens/s' or '4 requests/s'", _COUNT_SCALE),
        "ratio": ("a fraction such as 0.3 or '30%'", {"": 1.0, "%": 0.01}),
        "watts": ("a power such as '700 W' or '1.2 kW'", _prefixed(["W"]) | {"": 1.0}),
        "usd": ("an amount of money in US dollars such as '$1,200' or '1200 USD'", {"": 1.0, "USD": 1.0, "$": 1.0}),
        "usd_per_hour": (
            "a price per hour in US dollars such as '$2.50/h' or '2.5 USD/h'",
            {"": 1.0} | {f"{cur}/{h}": 1.0 for cur in ("", "$", "USD") for h in ("h", "hr", "hour")}
            | {"USD": 1.0, "$": 1.0},
        ),
    }


DIMENSIONS: dict[str, tuple[str, dict[str, float]]] = _build_dimensions()
"""dimension name -> (what a user should write, {unit spelling: factor to the base unit})."""

# The dimension a value in a quantity's unit is read in (counts for every unit not listed).
_DIMENSION_OF_UNIT = {"s": "seconds", "B": "bytes", "B/parameter": "bytes", "B/s": "byte_rate",
                      "tokens/s": "count_rate", "requests/s": "count_rate",
                      "FLOP/s": "flop_rate", "FLOP": "flop", "USD": "usd", "USD/h": "usd_per_hour", "W": "watts",
                      "fraction": "ratio", "1": "ratio"}


def dimension_of_unit(unit: str) -> str:
    """The dimension to parse a value of a quantity in ``unit`` with (``"B/s"`` -> ``"byte_rate"``)."""
    return _DIMENSION_OF_UNIT.get(unit, "count")

_NUMBER = re.compile(
    r"""^\s*(?P<currency>\$)?\s*
        (?P<number>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)(?:\.\d*)?(?:[eE][+-]?\d+)?
                  |[+-]?\.\d+(?:[eE][+-]?\d+)?)
        \s*(?P<unit>.*?)\s*$""",
    re.VERBOSE,
)


def _bits_hint(unit: str, dimension: str) -> str:
    """Why '32 Gb' is not a byte size: a lowercase b is bits."""
    bits = re.fullmatch(r"([kKMGTPE]i?)b(it)?s?", unit.replace(" ", ""))
    if dimension != "bytes" or not bits:
        return ""
    prefix = bits[1]
    names = {"k": "kilo", "K": "kilo", "M": "mega", "G": "giga", "T": "tera", "P": "peta", "E": "exa"}
    binary = {"K": "kibi", "M": "mebi", "G": "gibi", "T": "tebi", "P": "pebi", "E": "exbi"}
    name = binary[prefix[0].upper()] if prefix.endswith("i") else names[prefix[0]]
    return f" ({unit} is {name}bits; for bytes write {prefix}B)"


EXCERPT_CHARACTERS = 60  # the longest rendering of a user's value an error message shows
MAX_QUANTITY_CHARACTERS = 100  # the longest text parse_quantity reads ("1,000,000,000,000 tokens" has 24)


def excerpt(value: object, limit: int = EXCERPT_CHARACTERS) -> str:
    """``repr(value)`` for an error message, at most ``limit`` characters (cut with an ellipsis).

    Bounded however large or deep ``value`` is: only its first items and levels are rendered (reprlib), so no
    error message can take long to format or be huge.
    """
    import reprlib

    shorter = reprlib.Repr()
    shorter.maxlevel, shorter.maxlist, shorter.maxtuple, shorter.maxdict, shorter.maxset = 2, 4, 4, 4, 4
    shorter.maxstring = shorter.maxlong = shorter.maxother = limit
    try:
        text = shorter.repr(value)
    except ValueError:  # an int of more than 4,300 digits, which Python refuses to write out
        text = f"<a whole number of {int(value.bit_length() * math.log10(2)) + 1:,} digits>"
    return text if len(text) <= limit else text[:limit - 1] + "…"


def parse_quantity(value: object, dimension: str) -> float:
    """Parse ``value`` (a number or a text like ``"32 GB"``) into a float in ``dimension``'s base unit.

    A plain number is taken to be in base units already. Raises :class:`UnitError` naming what
    was expected when the text does not parse or its unit belongs to another dimension.
    """
    expected, table = DIMENSIONS[dimension]
    if isinstance(value, bool):
        raise UnitError(f"expected {expected}, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int beyond float's range (a number of 309 digits or more)
            number = math.inf
        if not math.isfinite(number):
            raise UnitError(f"expected {expected}, got {excerpt(value)} (not a finite number)")
        return number
    if not isinstance(value, str):
        raise UnitError(f"expected {expected}, got {excerpt(value)}")
    if len(value) > MAX_QUANTITY_CHARACTERS:  # no quantity is this long; the pattern below is quadratic in it
        raise UnitError(f"expected {expected}, got {excerpt(value)} ({len(value):,} characters; a number with its "
                        f"unit has at most {MAX_QUANTITY_CHARACTERS})")
    match = _NUMBER.match(value)
    if not match:
        raise UnitError(f"expected {expected}, got {excerpt(value)}")
    unit = match["unit"]
    if dimension == "count":  # "2T tokens", "7 B params": drop the noun, keep the scale
        words = unit.split()
        if words and words[-1] in _COUNT_NOUNS:
            unit = " ".join(words[:-1])
    if dimension == "count_rate":  # "28.8k tokens/s", "4 requests/s": a count per second
        words = unit.split()
        per_second = words[-1].removesuffix("/s") if words and words[-1].endswith("/s") else None
        if per_second is None or per_second not in _COUNT_NOUNS + ("tok", "req", ""):
            raise UnitError(f"unknown unit {excerpt(unit)} in {excerpt(value)}; expected {expected}")
        unit = " ".join(words[:-1])
    if match["currency"]:
        unit = "$" + unit if unit.startswith("/") else (unit or "$")
    factor = table.get(unit)
    if factor is None:
        factor = table.get(unit.replace(" ", ""))
    spelled = unit.replace(" ", "")
    if factor is None and spelled in (spelled.lower(), spelled.upper()) and re.fullmatch(
            r"[kmgtpe]ib(/s|ps)?", spelled, re.IGNORECASE):
        # "32 gib", "32 GIB": a binary prefix read in one case is bytes ("Gib" is gibibits, "gb" ambiguous)
        factor = table.get(spelled[0].upper() + "i" + spelled[2].upper() + spelled[3:].lower())
    if factor is None:
        raise UnitError(f"unknown unit {excerpt(unit)} in {excerpt(value)}; expected {expected}"
                        f"{_bits_hint(unit, dimension)}")
    number = float(match["number"].replace(",", "").replace("_", "")) * factor
    if not math.isfinite(number):
        raise UnitError(f"expected {expected}, got {excerpt(value)} (not a finite number)")
    return number


# ---------------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------------

_DECIMAL_STEPS = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_BINARY_STEPS = [(2.0**50, "Pi"), (2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"), (1.0, "")]
_COUNT_STEPS = [(1e12, "T"), (1e9, "B"), (1e6, "M")]
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def format_number(value: float, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, no trailing zeros; integers >= 1000 in full with commas."""
    if value != value or value in (math.inf, -math.inf):
        return str(value)
    if abs(value) >= 1000:
        return f"{round(value):,}"
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:  # very small: keep scientific, but readable
        mantissa, exponent = text.split("e")
        return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _with_prefix(value: float, symbol: str, steps: list[tuple[float, str]]) -> str:
    magnitude = abs(value)
    for factor, prefix in steps:
        if magnitude >= factor:
            return f"{format_number(value / factor)} {prefix}{symbol}"
    return f"{format_number(value)} {symbol}"


def _format_seconds(seconds: float) -> str:
    magnitude = abs(seconds)
    if 0 < magnitude < 1e-3:
        return f"{format_number(seconds * 1e6)} µs"
    if 0 < magnitude < 0.1:
        return f"{format_number(seconds * 1e3)} ms"
    if magnitude < 120:
        return f"{format_number(seconds)} s"
    if magnitude < 3600:
        return f"{format_number(seconds / 60)} min"
    if magnitude < 72 * 3600:
        return f"{format_number(seconds / 3600)} h"
    if magnitude < 2 * 365.25 * 86400:
        return f"{format_number(seconds / 86400)} days"
    return f"{format_number(seconds / (365.25 * 86400))} years"


def _format_count(value: float, noun: str) -> str:
    if value == 1 and noun.endswith("s") and "/" not in noun:
        noun = noun[:-1]  # "1 sequence", "1 accelerator"
    suffix = f" {noun}" if noun else ""
    if abs(value) >= 1e6:
        for factor, letter in _COUNT_STEPS:
            if abs(value) >= factor:
                return f"{format_number(value / factor)}{letter}{suffix}"
    return f"{format_number(value)}{suffix}"


def format_quantity(value: float, unit: str, system: str = "decimal") -> str:
    """Text for a base-unit ``value`` of ``unit`` (one of the units quantities declare).

    ``system`` is ``"decimal"`` (GB = 10^9 B, the default) or ``"binary"`` (GiB = 2^30 B) and
    applies to bytes and bytes/s.
    """
    byte_steps = _BINARY_STEPS if system == "binary" else _DECIMAL_STEPS
    if unit == "B":
        return _with_prefix(value, "B", byte_steps)
    if unit == "B/s":
        return _with_prefix(value, "B/s", byte_steps)
    if unit == "FLOP/s":
        return _with_prefix(value, "FLOP/s", _DECIMAL_STEPS)
    if unit == "W":
        return _with_prefix(value, "W", _DECIMAL_STEPS)
    if unit == "FLOP":
        if value == 0:
            return "0 FLOP"
        exponent = math.floor(math.log10(abs(value)))
        mantissa = format_number(value / 10**exponent)
        return f"{mantissa} × 10{str(exponent).translate(_SUPERSCRIPT)} FLOP"
    if unit == "s":
        return _format_seconds(value)
    if unit == "J":
        if abs(value) < 3600:
            return f"{format_number(value)} J"
        return _with_prefix(value / 3600.0, "Wh", _DECIMAL_STEPS)
    if unit == "fraction":
        return f"{format_number(value * 100)} %"
    if unit == "USD":
        if abs(value) >= 1e6:
            return f"${format_number(value / 1e6)}M"
        if abs(value) >= 100:
            return f"${value:,.0f}"
        if value != 0 and abs(value) < 0.1:
            decimals = 2 - math.floor(math.log10(abs(value)))
            return f"${value:.{decimals}f}"
        return f"${value:,.2f}"
    if unit == "USD/h":
        return f"${value:,.2f}/h"
    if unit in ("1", ""):
        return format_number(value)
    # counted things: tokens, steps, sequences, parameters, accelerators, h, B/parameter, ...
    return _format_count(value, unit)
