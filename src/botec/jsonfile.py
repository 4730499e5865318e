"""A user's JSON text, parsed so that no file can crash the reader: the one JSON loader of botec's readers.

Python's ``json.loads`` fails in three ways that are not a ``JSONDecodeError`` and would end a command in an
internal error: a value nested some thousand levels deep (``RecursionError``, from a few kilobytes of ``[``),
an integer of more than 4,300 digits (``ValueError``: Python refuses to convert it) and, downstream, a
number too large for a float (``1e400`` reads as infinity). :func:`load_json_text`

- refuses nesting deeper than :data:`MAX_JSON_DEPTH` levels before parsing, in one line naming the line and
  column (a :class:`ContractError`): no file botec reads needs more than a few levels;
- reads an integer longer than :data:`MAX_INTEGER_DIGITS` digits as the float it is closest to (infinity: it is
  beyond 10^308), as JSON reads ``1e400``: the reader's field check then refuses it, naming the field, as it
  refuses ``Infinity`` (JSON's ``NaN`` and ``Infinity`` are read as floats, for the fields that allow them:
  SGLang writes ``"request_rate": Infinity``);
- reads a lone surrogate (``"\\ud83d"``: half of an escaped pair, which JSON allows and no UTF-8 can hold) as
  U+FFFD, the replacement character, in every string and key (:func:`printable_strings`): a string botec
  read from a file and later prints or writes can then always be encoded (reliability-3 D9: a benchmark's
  ``backend`` crashed the calibration's report with ``UnicodeEncodeError``);
- leaves a ``json.JSONDecodeError`` (corrupt or truncated JSON) to the caller, who says what it expected.

Every JSON botec reads goes through this module, as every YAML goes through :mod:`botec.yamlfile`
(``tests/test_structure.py`` holds it: no ``json.load``/``json.loads`` anywhere else): contracts (with
``unique_keys``: an object that states a key twice is refused), Hugging Face ``config.json`` files, launch
files being imported, measurements, serving-benchmark results, traces (:func:`load_json_rows`, the fast path
for many short lines at once).
"""

from __future__ import annotations

import json
import re

from botec.errors import ContractError

__all__ = ["MAX_JSON_DEPTH", "MAX_INTEGER_DIGITS", "load_json_text", "load_json_rows", "too_deep_at",
           "printable_strings"]

MAX_JSON_DEPTH = 64          # nesting levels a user's JSON may have (botec's and the benchmarks' files use at most 4)
MAX_INTEGER_DIGITS = 4300    # digits of an integer Python converts (sys.get_int_max_str_digits' default)

# A JSON string (skipped: brackets inside it do not nest; an unterminated one runs to the end, so that the scan
# stays linear whatever the text) or a bracket.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
# A surrogate, escaped (\ud800 to \udfff) or not (a text handed over by code; a file's UTF-8 holds none): a text
# without one holds no surrogate once parsed. And a surrogate left alone once parsed (json joins an escaped pair).
_ANY_SURROGATE = re.compile("\\\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def printable_strings(value):
    """``value`` with every lone surrogate in its strings and keys replaced by U+FFFD (lists and objects walked;
    their depth is bounded by :data:`MAX_JSON_DEPTH`)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [printable_strings(item) for item in value]
    if isinstance(value, dict):
        return {printable_strings(key): printable_strings(item) for key, item in value.items()}
    return value


def _integer(digits: str):
    """An integer of the text: exact up to MAX_INTEGER_DIGITS digits, else the float nearest (±inf)."""
    return int(digits) if len(digits) <= MAX_INTEGER_DIGITS else float(digits)


def too_deep_at(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The offset in ``text`` of the first bracket that opens level ``limit + 1``, or -1 when none does.

    Brackets inside strings do not count; a stray closing bracket never takes the depth below 0. One pass of a
    regular expression over the strings and brackets, skipped when the text has too few brackets to nest that deep.
    """
    if text.count("[") + text.count("{") <= limit:
        return -1
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        first = match.group()[0]
        if first == "[" or first == "{":
            depth += 1
            if depth > limit:
                return match.start()
        elif first == "]" or first == "}":
            depth = max(0, depth - 1)
    return -1


def _unique_pairs(pairs: list, origin: str | None) -> dict:
    """A JSON object, refused when it states a key twice (JSON would keep the last silently)."""
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ContractError(f"malformed JSON: {twice!r} is stated twice in one object", origin=origin)
    return found


def load_json_text(text: str, origin: str | None = None, line_offset: int = 0, unique_keys: bool = False):
    """Parse ``text`` as JSON (see the module docstring): the value, a :class:`ContractError` naming the line
    and column where the nesting passes :data:`MAX_JSON_DEPTH`, or ``json.JSONDecodeError`` for the caller.

    ``line_offset``: lines before ``text`` in its file (a JSON-lines reader parsing one line), for the message.
    ``unique_keys``: refuse an object that states a key twice (a :class:`ContractError` naming the key).
    """
    offset = too_deep_at(text)
    if offset >= 0:
        line = text.count("\n", 0, offset) + 1 + line_offset
        column = offset - text.rfind("\n", 0, offset)
        raise ContractError(f"JSON nested too deep: more than {MAX_JSON_DEPTH} levels at line {line}, column "
                            f"{column} (no file botec reads nests that deep)", origin=origin)
    hook = (lambda pairs: _unique_pairs(pairs, origin)) if unique_keys else None
    try:
        try:
            value = json.loads(text, object_pairs_hook=hook)
        except json.JSONDecodeError:
            raise
        except ValueError:   # an integer Python refuses to convert (> 4,300 digits): read again, it as a float
            value = json.loads(text, parse_int=_integer, object_pairs_hook=hook)
    except RecursionError:   # unreachable below MAX_JSON_DEPTH; kept so that no depth can become a traceback
        raise ContractError(f"JSON nested too deep: more than {MAX_JSON_DEPTH} levels", origin=origin) from None
    return printable_strings(value) if _ANY_SURROGATE.search(text) else value


def load_json_rows(lines: list[str]) -> list | None:
    """Many JSON lines at once, parsed as one array (a trace's fast path: one call for a chunk of rows), or None
    when that fails in any way (a line that is not JSON, too deep, an integer Python refuses): the caller then
    reads the lines one by one with :func:`load_json_text`, which says what is wrong where."""
    if not all(lines) or any(_ANY_SURROGATE.search(line) for line in lines):   # (surrogates: line by line)
        return None
    try:
        rows = json.loads("[" + ",".join(lines) + "]")
    except (ValueError, RecursionError):   # ValueError: JSONDecodeError, or too long an integer
        return None
    return rows if len(rows) == len(lines) else None
