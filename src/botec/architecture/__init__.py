"""A model's architecture: its shape and parameters by part (:mod:`.shape`, the counting formulas), the linear
layers LoRA adapts (:mod:`.adapters`), a Hugging Face ``config.json`` read offline (:mod:`.hf_config`) and the
shipped catalog (:mod:`.catalog`). Four ways to name a model: a bare parameter count (the lesson's way), an
architecture written in the contract, a ``config.json``, or a catalog name; the last three give an
:class:`Architecture`."""

from botec.architecture.adapters import AdapterCount, LinearMatrix, linear_matrices, lora_parameters, module_names
from botec.architecture.catalog import as_dict, infer_from_count, model_catalog
from botec.architecture.hf_config import SUPPORTED_FAMILIES, from_hf_config, read_hf_config
from botec.architecture.shape import MLA, Architecture, MoE, ParameterBreakdown, breakdown

__all__ = ["Architecture", "MoE", "MLA", "ParameterBreakdown", "from_hf_config", "read_hf_config", "model_catalog",
           "breakdown", "SUPPORTED_FAMILIES", "LinearMatrix", "AdapterCount", "linear_matrices", "module_names",
           "lora_parameters", "infer_from_count", "as_dict"]
