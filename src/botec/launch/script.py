"""A ``torchrun`` launch script, written and read back: the form Megatron-LM and torchtitan jobs are started in.

Written: a comment header, then ``torchrun --nproc-per-node G --nnodes N <program> \\`` and one option per line.
Read: the shell words (comments dropped, backslash continuations joined, quotes honoured: :mod:`shlex`), split
into torchrun's own options and the program's, each a mapping of option to value (True for a flag). Tokens
before ``torchrun`` (``exec``, environment assignments) are skipped.
"""

from __future__ import annotations

import shlex
from typing import Optional

from botec.errors import ContractError

__all__ = ["Command", "read_command", "write_command"]

TORCHRUN_OPTIONS = {"--nproc-per-node": "nproc_per_node", "--nproc_per_node": "nproc_per_node",
                    "--nnodes": "nnodes"}


def write_command(header: list[str], launcher: list[str], options: list[tuple[str, Optional[object]]]) -> str:
    """The script: ``header`` lines, the launcher's words, then each ``(option, value)`` on a line of its own
    (value None: a flag)."""
    lines = ["#!/usr/bin/env bash", *header, " ".join(launcher) + " \\"]
    for index, (option, value) in enumerate(options):
        words = option if value is None else f"{option} {shlex.quote(str(value))}"
        lines.append(f"  {words}" + (" \\" if index < len(options) - 1 else ""))
    return "\n".join(lines) + "\n"


class Command:
    """A parsed launch command: torchrun's options, the program, and the program's options."""

    def __init__(self, launcher: dict[str, str], program: str, options: dict[str, object]):
        self.launcher = launcher
        self.program = program
        self.options = options

    def world_size(self, origin: str) -> Optional[int]:
        """``--nproc-per-node`` × ``--nnodes`` (None when torchrun states neither)."""
        from botec.launch.plan import positive_int

        if "nproc_per_node" not in self.launcher:
            return None
        per_node = positive_int(self.launcher["nproc_per_node"], "torchrun --nproc-per-node", origin)
        nodes = self.launcher.get("nnodes", "1").split(":")[-1]   # an elastic range 1:4: the most
        return per_node * positive_int(nodes, "torchrun --nnodes", origin)


def read_command(text: str, origin: str, programs: tuple[str, ...], flags: set[str]) -> Command:
    """The command in ``text`` whose program is one of ``programs`` (a path ending so, or ``-m module``);
    ``flags``: the program's options that take no value."""
    try:
        words = shlex.split(text.replace("\\\r\n", " ").replace("\\\n", " "), comments=True)
    except ValueError as error:
        raise ContractError(f"cannot read the command line ({error})", origin=origin) from None
    start = next((i for i, w in enumerate(words) if _is_program(w, programs) or
                  (w == "-m" and i + 1 < len(words) and words[i + 1] in programs)), None)
    if start is None:
        raise ContractError(f"no {' or '.join(programs)} command found", origin=origin)
    launcher = _options(words[:start], origin, set(), keep=TORCHRUN_OPTIONS)
    program_index = start + 1 if words[start] == "-m" else start
    return Command(launcher, words[program_index], _options(words[program_index + 1:], origin, flags))


def _is_program(word: str, programs: tuple[str, ...]) -> bool:
    return any(word == p or word.endswith("/" + p) for p in programs)


def _options(words: list[str], origin: str, flags: set[str], keep: Optional[dict] = None) -> dict:
    """``--name value``, ``--name=value`` and flags, as a mapping; with ``keep``, only those options (renamed),
    other words skipped."""
    found: dict[str, object] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if not word.startswith("-"):
            if keep is None and ":" in word:   # a tyro subcommand (torchtitan's activation-checkpoint:full)
                found[word] = True
                continue
            if keep is None:
                raise ContractError(f"expected an option, got {word[:40]!r}", origin=origin)
            continue
        name, sep, value = word.partition("=")
        if keep is not None:
            if name in keep and not sep and index < len(words):
                value, index = words[index], index + 1
            if name in keep:
                found[keep[name]] = value
            continue
        if sep:
            found[name] = value
        elif name in flags or name.count(":") or index >= len(words) or words[index].startswith("--"):
            found[name] = True
        else:
            found[name] = words[index]
            index += 1
    return found
