"""A ``torchrun`` launch script, read back: the form Megatron-LM and torchtitan jobs are started in.

Written by :func:`botec.launch.commandline.shell_script`: a comment header, then ``torchrun --nproc-per-node G
--nnodes N <program> \\`` and one option per line. Read: the script's commands
(:func:`~botec.launch.commandline.shell_commands`: nothing expanded or run); the one that runs the program (a
path ending so, or ``-m module``) is split into torchrun's own options (the words before the program: ``exec``,
``srun ...``, ``VAR=value`` and torchrun's other options skipped) and the program's, each a mapping of option to
value (``"true"`` for a flag). Other commands of the script are not read.
"""

from __future__ import annotations

from typing import Optional

from botec.errors import ContractError
from botec.launch.commandline import parse_options, product, shell_commands, whole_number

__all__ = ["Command", "read_command"]

TORCHRUN_OPTIONS = {"--nproc_per_node": "--nproc-per-node"}
"""torchrun's spellings of one option, as the one botec reads."""
TORCHRUN_READ = {"--nproc-per-node", "--nnodes"}


class Command:
    """A parsed launch command: torchrun's options, the program, and the program's options."""

    def __init__(self, launcher: dict[str, str], program: str, options: dict[str, str]):
        self.launcher = launcher
        self.program = program
        self.options = options

    def world_size(self, origin: str) -> Optional[int]:
        """``--nproc-per-node`` × ``--nnodes`` (None when torchrun states neither), below the contract's bound."""
        if "--nproc-per-node" not in self.launcher:
            return None
        per_node = whole_number(self.launcher["--nproc-per-node"], "torchrun --nproc-per-node", origin)
        nodes = self.launcher.get("--nnodes", "1").split(":")[-1]   # an elastic range 1:4: the most
        return product([("torchrun --nproc-per-node", per_node),
                        ("torchrun --nnodes", whole_number(nodes, "torchrun --nnodes", origin))], origin)


def read_command(text: str, origin: str, programs: tuple[str, ...], flags: set[str]) -> Command:
    """The command in ``text`` whose program is one of ``programs``; ``flags``: the program's options that take
    no value. A tyro subcommand (torchtitan's ``activation-checkpoint:full``) is read as a flag."""
    found = []
    for command in shell_commands(text, origin):
        words = command.words
        start = next((i for i, w in enumerate(words) if _is_program(w, programs) or
                      (w == "-m" and i + 1 < len(words) and words[i + 1] in programs)), None)
        if start is not None:
            found.append((command, start))
    if not found:
        raise ContractError(f"no {' or '.join(programs)} command found", origin=origin)
    if len(found) > 1:
        raise ContractError(f"lines {found[0][0].line} and {found[1][0].line} both run {' or '.join(programs)}: "
                            "botec reads one command; keep one", origin=origin)
    command, start = found[0]
    words = command.words
    _, launcher = parse_options(words[:start], set(), origin, TORCHRUN_OPTIONS, only=TORCHRUN_READ)
    program_index = start + 1 if words[start] == "-m" else start
    positional, options = parse_options(words[program_index + 1:], flags, origin)
    for word in positional:
        if ":" not in word:
            raise ContractError(f"expected an option, got {word[:40]!r}", origin=origin)
        if word in options:
            raise ContractError("stated twice; state it once", field=word, origin=origin)
        options[word] = "true"
    return Command(launcher, words[program_index], options)


def _is_program(word: str, programs: tuple[str, ...]) -> bool:
    return any(word == p or word.endswith("/" + p) for p in programs)
