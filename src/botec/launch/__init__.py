"""Launch configs out of a plan (``botec export``) and into a contract (``botec import``).

A format is one module of this package exposing ``FORMAT``, a :class:`LaunchFormat`: the tool and the version
whose options it writes (only options that exist in that version), the kind of contract it serves, and its two
directions:

- ``export(result) -> str``: the file's text for an :class:`~botec.estimation.Estimate`'s plan (the layout the
  estimate resolved, its batch, precisions, engine limits), the tool and version named in a comment or field;
- ``read(text, origin) -> dict``: the contract fields the file carries (a partial contract mapping, dotted
  sections as nested dicts; an optional ``"_notes"`` list of lines for the written contract, such as options it
  did not read); a one-line :class:`~botec.errors.ContractError` naming the option otherwise.

Every value a format writes (shell words, comments, YAML, JSON, the header) and every command line and count it
reads goes through :mod:`botec.launch.commandline`, so that nothing a contract states can run or add a key in the
file. Export then import is the identity on every field both sides carry (tests/test_launch_*.py hold it).

A serving format names the engines it serves (``engines``: presets of ``catalog/engines.yaml``, whose program
its file runs); :func:`export_text`, what `botec export` calls, refuses in one line a contract of another engine
(a preset that ``launches_as`` a served engine is served too). A format's ``export`` itself writes any serving
estimate, as its options would read under the engine it names (the tests compare the engines' rules that way).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Optional

from botec.errors import UserError

__all__ = ["LaunchFormat", "FORMAT_MODULES", "launch_formats", "launch_format", "export_text", "serves"]

FORMAT_MODULES = {
    # training
    "torchtitan": "botec.launch.torchtitan",
    "megatron": "botec.launch.megatron",
    "deepspeed": "botec.launch.deepspeed",
    "accelerate": "botec.launch.accelerate",
    # serving
    "vllm": "botec.launch.vllm",
    "sglang": "botec.launch.sglang",
    "trtllm": "botec.launch.trtllm",
    "kubernetes": "botec.launch.kubernetes",
}
"""Each format's module, by the name ``--to``/``--from`` take."""


@dataclass(frozen=True)
class LaunchFormat:
    """One launch format: what it is, for which tool and version, and its two directions."""

    name: str                     # the --to / --from name
    kind: str                     # "training" or "serving"
    tool: str                     # the tool that reads it ("torchtitan", "Megatron-LM", "vLLM", ...)
    version: str                  # the pinned version whose options are written ("0.3.0")
    suffix: str                   # the file's usual suffix (".toml", ".sh", ".json", ".yaml")
    description: str              # one line: what the file is
    export: Callable              # (result) -> str
    read: Optional[Callable] = None   # (text, origin) -> dict of contract fields; None: export only
    markers: tuple = ()           # text only this format's files contain ("torchtitan.train"): `botec import`
                                  # picks the format by them when --from is absent
    engines: tuple[str, ...] = ()  # serving: the strategy.engine presets whose program the file runs ("vllm",);
                                   # training formats: ()


def launch_format(name: str) -> LaunchFormat:
    """The format called ``name``; a one-line error listing the formats otherwise."""
    if name not in FORMAT_MODULES:
        from botec.catalog import did_you_mean

        raise UserError(f"unknown launch format {name!r}{did_you_mean(name, FORMAT_MODULES)} (formats: "
                        f"{', '.join(FORMAT_MODULES)})")
    return importlib.import_module(FORMAT_MODULES[name]).FORMAT


def launch_formats(kind: Optional[str] = None) -> dict[str, LaunchFormat]:
    """Every format (of ``kind``: "training" or "serving"), by name."""
    formats = {name: launch_format(name) for name in FORMAT_MODULES}
    return {name: f for name, f in formats.items() if kind is None or f.kind == kind}


def serves(fmt: LaunchFormat, engine: str) -> bool:
    """Whether ``fmt`` writes launch files for the serving preset ``engine``: the preset, or the preset it
    ``launches_as`` (catalog/engines.yaml), is one of the format's ``engines``."""
    from botec.catalog.engines import engine_preset

    return engine in fmt.engines or engine_preset(engine).program in fmt.engines


def export_text(fmt: LaunchFormat, result) -> str:
    """The file ``fmt`` writes for an estimate; for a serving contract whose engine the format does not serve, a
    one-line :class:`~botec.errors.ContractError` naming ``strategy.engine``, the engine and the formats that
    serve it."""
    if fmt.kind == "serving" and result.kind == "serving":
        engine = result.inputs.engine.key
        if not serves(fmt, engine):
            from botec.errors import ContractError
            from botec.launch.importing import available_formats

            others = [name for name in available_formats(FORMAT_MODULES)
                      if launch_format(name).kind == "serving" and serves(launch_format(name), engine)]
            raise ContractError(f"--to {fmt.name} writes {fmt.tool} launch files, for the engine "
                                f"{' or '.join(fmt.engines)}, and this contract's engine is {engine!r} (the formats of "
                                f"{engine!r}: {', '.join(others) or 'none installed'})", field="strategy.engine")
    return fmt.export(result)
