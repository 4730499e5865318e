"""The parallel layout of a job: its degrees, schedule, sharding, recomputation and stage split,
validated once by one list of rules.

In the spirit of torchtitan's ``ParallelDims``: the degrees are held in one value object,
named as Megatron names them, and every derived size (the data-parallel degree, the ZeRO shard
group, the accelerators each group spans, the layers of each pipeline stage) is computed here
and nowhere else. Ranks are laid out as Megatron does: TP fastest, then CP, then DP (EP inside
DP), then PP.

One list of rules (:mod:`botec.layout.rules`, the only place they are written) serves three
uses, so they cannot drift apart:

- :meth:`Layout.check` raises the first broken rule as a one-line :class:`ContractError` naming
  the field (``botec estimate``);
- :meth:`Layout.mask` ANDs the same predicates over numpy arrays (``botec sweep``, the search);
- :func:`candidates` enumerates the values each degree can take for a model and an accelerator
  count (``botec search``), within the named :data:`SEARCH_BOUNDS`.

A layout's fields may be plain numbers (one estimate) or numpy arrays of equal length (a sweep):
the predicates and derived sizes use only operators and the elementwise helpers that work on both.

Pipeline stages need not be even. When ``p`` divides the layers each stage takes ``L/p``;
otherwise the default split (:func:`default_stage_layers`) counts the embedding and the LM head as
one layer each on the first and last stages and balances the rest, which reproduces published
layouts: Llama 3.1 405B's 126 layers on 16 stages (7, 8 × 14, 7; Llama 3 paper §3.3.2), BLOOM's 70
on 12 (5, 6 × 10, 5; Megatron-DeepSpeed's ``type:transformer|embedding`` partition). A contract may
list the layers of each stage instead (``strategy.pipeline_stage_layers``). The stage with the most
layers sets the step time and the training state per accelerator; under 1F1B the first stages keep
the most micro-batches in flight, so the activations peak at max over stages i of (p − i) · L_i.
The interleaved schedule splits each stage's layers into v model chunks as evenly as they go (Llama 3
405B ran 7, 8 × 14, 7 interleaved): each chunk needs one slot, a layer, or the embedding or LM head on
the first and last stages, and the largest chunk, ⌈L_max / v⌉ layers, paces the bubble.
"""

from botec.layout.dims import (FSDP_ZERO_STAGE, GROUPS, Layout, ModelFacts, PipelineSchedule, Recompute, Rule,
                               number_text)
from botec.layout.rules import SEARCH_BOUNDS, SERVING_RULES, TRAINING_RULES, SearchBounds, candidates, layout_of
from botec.layout.stages import default_stage_layers, layers_in_flight

__all__ = ["FSDP_ZERO_STAGE", "GROUPS", "Layout", "ModelFacts", "PipelineSchedule", "Recompute", "Rule",
           "SEARCH_BOUNDS", "SERVING_RULES", "TRAINING_RULES", "SearchBounds", "candidates", "default_stage_layers",
           "layers_in_flight", "layout_of", "number_text"]
