"""The measured operator tables' files (``catalog/measurements/operators/<kind>-….yaml``): where they are, which
there are, and one file's data. The tables themselves (GEMM, fused MoE, collectives, attention) are read by their own
modules; this is the one place that knows the folder. Nothing is parsed until a table is asked for."""

from __future__ import annotations

from botec.catalog.root import catalog_cache, catalog_root

__all__ = ["operator_file_names", "read_operator_file"]


def _folder():
    return catalog_root().joinpath("measurements").joinpath("operators")


@catalog_cache
def operator_file_names(*kinds: str) -> tuple[str, ...]:
    """The stems of the files whose name starts with one of ``kinds`` followed by ``-`` (``"gemm"``: every
    ``gemm-*.yaml``), sorted; no file is parsed."""
    folder = _folder()
    if not folder.is_dir():
        return ()
    return tuple(sorted(p.name[:-len(".yaml")] for p in folder.iterdir()
                        if p.name.endswith(".yaml") and p.name.split("-", 1)[0] in kinds))


def read_operator_file(name: str) -> dict:
    """The data of ``measurements/operators/<name>.yaml`` (shipped data, through :mod:`botec.yamlfile`)."""
    from botec.yamlfile import load_yaml_text

    return load_yaml_text(_folder().joinpath(f"{name}.yaml").read_text(encoding="utf-8"))
