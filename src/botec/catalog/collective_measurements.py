"""Published cross-node nccl-tests results (``catalog/measurements/collectives/*.yaml``): bus bandwidth by collective,
GPU count and message size, each file naming its source. They test botec's collectives across nodes
(:mod:`botec.formulas.nccl_tuning`); the estimate path never reads them."""

from __future__ import annotations

from botec.catalog.root import catalog_cache, catalog_root

__all__ = ["collective_measurement", "published_busbw"]

MIB = 2 ** 20


@catalog_cache
def collective_measurement(name: str) -> dict:
    """The data of ``measurements/collectives/<name>.yaml``."""
    from botec.yamlfile import load_yaml_text

    path = catalog_root().joinpath("measurements", "collectives", f"{name}.yaml")
    return load_yaml_text(path.read_text(encoding="utf-8"))


def published_busbw(name: str, op: str) -> list[tuple[int, float, float]]:
    """(GPUs, message bytes, bus bandwidth in B/s) of every point of ``op`` in the file ``name``: a sweep file's
    ``tables`` or a file of single ``points``."""
    data = collective_measurement(name)
    if "tables" in data:
        return [(int(gpus), float(size) * MIB, float(busbw) * 1e9)
                for gpus, row in data["tables"][op].items() for size, busbw in row]
    return [(int(p["gpus"]), float(p["size"]) * MIB, float(p["busbw"]) * 1e9) for p in data["points"] if p["op"] == op]
