"""The one writer and the one reader of what a launch file holds: shell words, comments, YAML, JSON, and the
options and whole numbers read back from them. Every format of :mod:`botec.launch` goes through this module.

Writing (nothing a contract states can leave the place it is written into):

- a shell word only through :func:`shell_word` (``shlex.quote``); a command through :func:`shell_command`, a
  script through :func:`shell_script`, a file written by the script through :func:`here_document`, whose
  delimiter is chosen so that it does not occur in the body;
- every comment line through :func:`comment_line`: a character that ends or hides a line anywhere one of the
  files is read (``\\n`` and ``\\r``; the other C0/C1 controls, ``\\x85`` among them; U+2028 and U+2029, which
  YAML 1.1 reads as line breaks; format and surrogate characters) is shown escaped (``\\n``, ``\\u2028``), never
  raw, so a value cannot end its ``#`` and start a command or a key;
- YAML only through ``yaml.safe_dump`` (:func:`yaml_document`), JSON only through ``json.dumps``
  (:func:`json_document`);
- the header every exported file starts with: :func:`file_header`, one writer for all eight formats.

Reading (linear in the file's length, nothing run or expanded):

- :func:`shell_commands`: the script's commands as words, by one regular-expression tokenizer with POSIX
  quoting (``'...'``, ``"..."`` with its four backslash escapes, ``\\`` outside quotes), backslash-newline
  continuations, ``#`` comments at a word's start, command separators (newline, ``;``, ``&``, ``|``, ``&&``,
  ``||``, parentheses), redirections and here-documents (their bodies kept, :class:`ShellCommand`). ``$VAR``,
  ``$(...)`` (two levels of parentheses deep) and backticks are kept as the text they are: botec expands no shell
  syntax. What it cannot read (a quote or substitution left open) is one line naming the line;
- :func:`parse_options`: ``--name value``, ``--name=value`` and flags of one command, an option stated twice
  refused (as a contract refuses a key stated twice);
- :func:`whole_number`: a count, checked against the contract's bound (below 10^18,
  :data:`botec.contract.stated.MAX_WHOLE_NUMBER`) before any arithmetic; :func:`product` the same for a count
  made of counts (the world size, the tokens).
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, Optional

from botec.errors import ContractError

__all__ = ["comment_line", "file_header", "shell_word", "shell_command", "shell_script", "here_document",
           "yaml_document", "json_document", "json_value", "written_format", "ShellCommand", "shell_commands",
           "commands_of", "parse_options", "unread_note", "whole_number", "whole_option", "product", "ratio_option",
           "count_bound"]

# --- writing ---------------------------------------------------------------------------------------------------

_HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
"""Controls (\\n, \\r, \\x85, ...), format characters (bidirectional overrides), lone surrogates, and the line and
paragraph separators U+2028 and U+2029: shown escaped in a comment."""
_NOT_PLAIN = re.compile(r"[^\x20-\x7e]")


def _escaped(match: re.Match) -> str:
    character = match.group()
    if unicodedata.category(character) not in _HIDDEN_CATEGORIES:
        return character   # printable unicode (é, ☃, emoji) stays as it is
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(character) or (
        f"\\x{ord(character):02x}" if ord(character) < 0x100 else f"\\u{ord(character):04x}"
        if ord(character) < 0x10000 else f"\\U{ord(character):08x}")


def comment_line(text: str, prefix: str = "# ") -> str:
    """One comment line: ``prefix`` + ``text`` with every character that could end or hide the line escaped."""
    return (prefix + _NOT_PLAIN.sub(_escaped, str(text))).rstrip()


def file_header(tool: str, version: str, format_name: str, contract_name: Optional[str], about: Iterable[str],
                unexpressed: Iterable[str], prefix: str = "# ") -> list[str]:
    """The comment every exported file starts with: the tool and version, the format (``botec import`` tells its
    own files by this line, :func:`written_format`), the contract, ``about`` lines, and what the file cannot
    express."""
    from botec import __version__

    lines = [f"{tool} {version} launch config written by botec {__version__} (botec export --to {format_name})",
             f"from the contract {contract_name or 'unnamed'!r}", *about]
    unexpressed = list(unexpressed)
    if unexpressed:
        lines += ["not expressed here (set it in your job):", *(f"  - {item}" for item in unexpressed)]
    return [comment_line(line, prefix) for line in lines]


_WRITTEN_BY = re.compile(r"# .*? launch config written by botec \S+ \(botec export --to ([a-z]+)\)$")


def written_format(text: str) -> Optional[str]:
    """The format named by botec's own header (:func:`file_header`) in the file's first lines, else None."""
    for line in text[:4096].splitlines()[:3]:
        found = _WRITTEN_BY.match(line)
        if found:
            return found.group(1)
    return None


def shell_word(value: object) -> str:
    """``value`` as one shell word, whatever it holds (``shlex.quote``: single quotes unless it is plain)."""
    return shlex.quote(str(value))


def shell_command(words: list, options: list[tuple[str, Optional[object]]]) -> str:
    """A command: its words, then each ``(option, value)`` on a line of its own, ``\\``-continued (value None: a
    flag)."""
    parts = [" ".join(shell_word(word) for word in words)]
    parts += [f"  {shell_word(option)}" + ("" if value is None else f" {shell_word(value)}")
              for option, value in options]
    return " \\\n".join(parts) + "\n"


def shell_script(header: list[str], blocks: list[tuple[list[str], str]]) -> str:
    """A bash script: ``#!/usr/bin/env bash``, the header (comment lines), then each block's comments and its
    text (a :func:`shell_command` or :func:`here_document`), a blank line before each."""
    text = "\n".join(["#!/usr/bin/env bash", *header]) + "\n"
    for comments, body in blocks:
        text += "\n" + "".join(comment_line(line) + "\n" for line in comments) + body
    return text


def here_document(words: list, target: str, body: str) -> str:
    """``words > target <<'DELIM'``, ``body``, ``DELIM``: a file written by the script, nothing in it expanded
    (the delimiter is quoted), the delimiter ``EOF`` lengthened until it does not occur in ``body``."""
    delimiter = "EOF"
    while delimiter in body:
        delimiter += "_"
    body = body if body.endswith("\n") else body + "\n"
    return f"{' '.join(shell_word(w) for w in words)} > {shell_word(target)} <<'{delimiter}'\n{body}{delimiter}\n"


def yaml_document(header: list[str], data) -> str:
    """The header's comment lines, then ``data`` as YAML (``yaml.safe_dump``: every string quoted as it needs).

    Non-ASCII characters are written escaped (PyYAML's default): with ``allow_unicode`` PyYAML writes U+2028 and
    U+0085 raw inside a single-quoted scalar, which reads back as a different string."""
    import yaml

    return "".join(line + "\n" for line in header) + yaml.safe_dump(data, sort_keys=False)


def json_document(data) -> str:
    """``data`` as indented JSON (``json.dumps``)."""
    import json

    return json.dumps(data, indent=2) + "\n"


def json_value(data) -> str:
    """``data`` as compact JSON on one line (``json.dumps``), the value of an option such as vLLM's
    ``--speculative-config`` (then one shell word through :func:`shell_word`)."""
    import json

    return json.dumps(data, separators=(",", ":"))


# --- reading shell ---------------------------------------------------------------------------------------------

@dataclass
class ShellCommand:
    """One command of a script: the line it starts on, its words (quotes removed, nothing expanded), its
    redirections ``(operator, target)`` and the bodies of its here-documents."""

    line: int
    words: list[str] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    here_documents: list[str] = field(default_factory=list)


_DOUBLE = r'"[^"\\]*(?:\\[\s\S][^"\\]*)*"'
# (each repetition's alternatives start with different characters and match one unit each, so that a failed
# match gives each character back once: no nested quantifier, linear even when the substitution is not closed)
_SUBSTITUTION = (r"\$\((?:[^()'\"\\]|'[^']*'|" + _DOUBLE + r"|\\[\s\S]|\((?:[^()'\"\\]|'[^']*'|" + _DOUBLE
                 + r"|\\[\s\S])*\))*\)")
_PIECE = (r"[^ \t\r\n'\"\\;&|<>()`$]+|'[^']*'|" + _DOUBLE + r"|\\\r?\n|\\[\s\S]|" + _SUBSTITUTION
          + r"|`[^`\\]*(?:\\[\s\S][^`\\]*)*`|\$\{[^}\n]*\}|\$(?!\()")
_TOKEN = re.compile(r"(?P<space>(?:[ \t\r]|\\\r?\n)+)|(?P<comment>#[^\n]*)|(?P<newline>\n)"
                    r"|(?P<redirect><<-|<<<|<<|>>|>\||<>|>&|<&|&>>|&>|>|<)|(?P<operator>&&|\|\||;;|\|&|[;&|()])"
                    r"|(?P<word>(?:" + _PIECE + r")+)")
_PIECES = re.compile(r"(?P<single>'[^']*')|(?P<double>" + _DOUBLE + r")|(?P<joined>\\\r?\n)|(?P<escaped>\\[\s\S])"
                     r"|(?P<other>" + _PIECE + ")")
_DOUBLE_ESCAPE = re.compile(r'\\([$`"\\\n])')


def _word(raw: str) -> str:
    """A shell word's value: quotes removed, backslash escapes applied (POSIX), ``$`` forms left as written."""
    if "'" not in raw and '"' not in raw and "\\" not in raw:
        return raw
    out = []
    for piece in _PIECES.finditer(raw):
        kind, text = piece.lastgroup, piece.group()
        if kind == "single":
            out.append(text[1:-1])
        elif kind == "double":
            out.append(_DOUBLE_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), text[1:-1]))
        elif kind == "escaped":
            out.append(text[1])
        elif kind == "other":
            out.append(text)
    return "".join(out)


def shell_commands(text: str, origin: str) -> list[ShellCommand]:
    """The commands of a shell script, in order (see the module docstring); a one-line error naming the line for
    what the tokenizer cannot read. One pass of a regular expression: linear in the text's length."""
    commands: list[ShellCommand] = []
    current = ShellCommand(1)
    pending: list[tuple[str, bool, ShellCommand]] = []   # here-documents whose bodies follow this line
    redirect: Optional[str] = None
    position, line, counted = 0, 1, 0

    def line_at(offset: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, offset)
        counted = offset
        return line

    def end_command(at: int) -> None:
        nonlocal current
        if current.words or current.redirects:
            commands.append(current)
        current = ShellCommand(line_at(at))

    while position < len(text):
        token = _TOKEN.match(text, position)
        if token is None:
            raise ContractError(f"line {line_at(position)}: cannot read the shell syntax at "
                                f"{text[position:position + 20]!r} (a quote, $( or ` that is not closed, or $( nested "
                                "more than two deep; botec reads the text and runs nothing)", origin=origin)
        kind, raw, end = token.lastgroup, token.group(), token.end()
        if redirect is not None and kind in ("newline", "operator", "redirect"):
            raise ContractError(f"line {line_at(position)}: {redirect} names no file", origin=origin)
        if kind == "word":
            if redirect is not None:
                current.redirects.append((redirect, _word(raw)))
                if redirect in ("<<", "<<-"):
                    pending.append((_word(raw), redirect == "<<-", current))
                redirect = None
            elif raw.isascii() and raw.isdigit() and text[end:end + 1] in ("<", ">"):
                pass   # a file descriptor (2>log): part of the redirection
            else:
                current.words.append(_word(raw))
        elif kind == "redirect":
            redirect = raw
        elif kind == "operator":
            end_command(end)
        elif kind == "newline":
            for delimiter, tabs, command in pending:   # (``a <<X | b``: the body is a's)
                end = _here_document_end(text, end, delimiter, tabs, command, origin, line_at(position))
            pending = []
            end_command(end)
        position = end
    if redirect is not None:
        raise ContractError(f"line {line_at(position)}: {redirect} names no file", origin=origin)
    if pending:
        raise ContractError(f"line {line_at(position)}: the here-document <<{pending[0][0]} has no body",
                            origin=origin)
    end_command(position)
    return commands


def _here_document_end(text: str, start: int, delimiter: str, tabs: bool, command: ShellCommand, origin: str,
                       line: int) -> int:
    """Read a here-document's body from ``start`` to its delimiter line into ``command``; the offset after it."""
    position = start
    while position <= len(text):
        stop = text.find("\n", position)
        stop = len(text) if stop < 0 else stop
        candidate = text[position:stop].rstrip("\r")
        if (candidate.lstrip("\t") if tabs else candidate) == delimiter:
            command.here_documents.append(text[start:position])
            return min(stop + 1, len(text))
        if stop >= len(text):
            break
        position = stop + 1
    raise ContractError(f"line {line}: the here-document <<{delimiter} is not closed by a line {delimiter}",
                        origin=origin)


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def commands_of(commands: list[ShellCommand], program: tuple[str, ...], origin: str
                ) -> list[tuple[ShellCommand, list[str]]]:
    """Each command that runs ``program`` (its words in sequence, after any ``VAR=value``), with the words after
    it; a one-line error when none does."""
    found = []
    for command in commands:
        words = command.words
        start = 0
        while start < len(words) and _ASSIGNMENT.match(words[start]):
            start += 1
        for index in range(start, len(words) - len(program) + 1):
            if tuple(words[index:index + len(program)]) == program:
                found.append((command, words[index + len(program):]))
                break
    if not found:
        raise ContractError(f"no `{' '.join(program)}` command found", origin=origin)
    return found


def parse_options(words: list[str], flags: Iterable[str], origin: str, aliases: Optional[dict] = None,
                  only: Optional[set] = None) -> tuple[list[str], dict[str, str]]:
    """The positional words and the options of one command: ``--name value`` or ``--name=value``; a flag (a
    name in ``flags``, a name with ``:``, or one followed by another ``--`` option or nothing) reads as
    ``"true"``. ``aliases`` renames (``-tp`` is ``--tensor-parallel-size``); ``only``: read just those names
    (after renaming), skipping other words. An option stated twice is refused, naming it."""
    flags, aliases = set(flags), aliases or {}
    positional: list[str] = []
    options: dict[str, str] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        name, equals, value = word.partition("=")
        name = aliases.get(name, name)
        if not equals:
            if (name in flags or ":" in name or index >= len(words) or words[index].startswith("--")
                    or (only is not None and name not in only)):
                value = "true"
            else:
                value, index = words[index], index + 1
        if only is not None and name not in only:
            continue
        if name in options:
            raise ContractError(f"stated twice ({options[name][:40]!r} and {value[:40]!r}); state it once",
                                field=name, origin=origin)
        options[name] = value
    return positional, options


def unread_note(names: list[str], shown: int = 20) -> str:
    """The note an imported contract carries for the options botec does not read: the first ``shown`` names,
    each cut at 40 characters, and how many more."""
    listed = [name if len(name) <= 40 else name[:39] + "…" for name in names[:shown]]
    more = f" and {len(names) - shown:,} more" if len(names) > shown else ""
    return f"options botec does not read: {', '.join(listed)}{more}"


# --- reading numbers -------------------------------------------------------------------------------------------

_DIGITS = re.compile(r"\+?[0-9]+")


def count_bound() -> int:
    """The contract's bound on a whole number (below 10^18, :data:`botec.contract.stated.MAX_WHOLE_NUMBER`)."""
    from botec.contract.stated import MAX_WHOLE_NUMBER

    return MAX_WHOLE_NUMBER


def whole_number(value: object, field: str, origin: str, minimum: int = 1) -> int:
    """``value`` (an int, or a text of ASCII digits) as a whole number from ``minimum`` to below 10^18 (the
    contract's bound, compared as the contract compares it: on the number as a float, so 10^18 − 1, which rounds
    to 1e18, is refused too), checked before it is converted or multiplied; a one-line error naming ``field``."""
    bound = count_bound()
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        text = str(value).strip()
        if not _DIGITS.fullmatch(text):
            shown = text[:40] + ("…" if len(text) > 40 else "")
            hint = (": botec reads the file's text and expands no shell syntax ($VAR, $(...), `...`); write the "
                    "number itself" if "$" in text or "`" in text else "")
            raise ContractError(f"expected a whole number, got {shown!r}{hint}", field=field, origin=origin)
        digits = text.lstrip("+").lstrip("0")
        if len(digits) > len(str(bound)):
            raise ContractError(f"expected a whole number below 10^18 (the contract's bound), got one of "
                                f"{len(digits):,} digits", field=field, origin=origin)
        number = int(digits or "0")
    if number < minimum:
        raise ContractError(f"expected a whole number >= {minimum}, got {number}", field=field, origin=origin)
    if number >= bound or float(number) >= bound:   # the contract compares the float: 10^18 − 1 is 1e18 there
        raise ContractError(f"expected a whole number below 10^18 (the contract's bound), got {number}", field=field,
                            origin=origin)
    return number


def whole_option(options: dict, name: str, origin: str, minimum: int = 1) -> Optional[int]:
    """The option's :func:`whole_number` (None when absent)."""
    return whole_number(options[name], name, origin, minimum) if name in options else None


def product(factors: list[tuple[str, int]], origin: str) -> int:
    """The product of counts ``(name, value)`` (tokens = steps × batch × sequence), refused naming them when it
    reaches the contract's bound (10^18)."""
    total = 1
    for _, value in factors:
        total *= value
    if total >= count_bound() or float(total) >= count_bound():
        names = " × ".join(name for name, _ in factors)
        raise ContractError(f"{names} = {total:.3g}, at or above the contract's bound for a whole number (10^18)",
                            field=factors[0][0], origin=origin)
    return total


def ratio_option(options: dict, name: str, origin: str) -> Optional[float]:
    """The option's value as a share in (0, 1] (None when absent); a one-line error naming it otherwise."""
    if name not in options:
        return None
    raw = options[name]
    try:
        value = float("nan") if isinstance(raw, bool) or len(str(raw)) > 100 else float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not (0 < value <= 1):
        raise ContractError(f"expected a share in (0, 1], got {str(raw)[:40]!r}", field=name, origin=origin)
    return value
