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

Adding a parallelism (a new parallel dimension, e.g. what ``context_parallel`` / CP needed; grep
``context_parallel`` and ``"cp"`` for each step's model):

0. ``layout/parallelisms.py``: its record (``tests/test_parallelisms.py`` checks it against the places below);
1. ``layout/dims.py``: the degree as a :class:`Layout` field (default 1), its place in the rank order
   (:meth:`Layout.span`), what it divides (``data_parallel`` = N / (TP × PP × CP)), and its group in
   :data:`GROUPS` when its collectives cross a network tier;
2. ``layout/rules.py``: the rules it must obey, each naming its field (CP divides the sequence length),
   the model-parallel product, and its range in :class:`SearchBounds` and :func:`candidates`;
3. ``contract/training.py`` (and ``contract/serving.py`` if a replica uses it): the ``strategy`` field with
   its description; ``inputs/training.py``: read it into ``spec`` (``strategy.<field>``), into the layout
   (``layout_of``) and as a :class:`botec.graph.Given` with its field; ``inputs/model.py``: its 1 in
   ``architecture_quantities``; ``inputs/cluster.py`` places its group on a tier from :data:`GROUPS`;
4. ``training/``: the formulas it changes: compute (``compute/__init__.py`` declares the input,
   ``compute/step.py`` divides the work), memory (``memory/activations.py``: what each rank keeps, as
   ``local_sequence_length``), network (``network/model_parallel.py``: its bytes and time per step, zero
   when the degree is 1; ``network/exposed.py``: its bytes in the step's total and the share overlap hides), and ``findings/training.py``'s
   advice when its communication dominates; ``serving/`` the same if a replica uses it;
5. ``explore/search.py``: the searched fields (and ``explore/space.py`` when it needs words);
6. ``report/__init__.py`` (the layout line, the network table's ``<group>_link_*`` rows) and
   ``report/explore.py`` (the search's layout column); a choice encoded as a number gives
   ``labels=`` to its :meth:`botec.graph.Formulas.input` so that ``botec explain`` writes the word;
7. tests: ``tests/test_layout.py`` (its rules: scalar check, array mask, candidates agree),
   ``tests/test_parallelism.py`` (hand-derived figures of its compute, memory and bytes),
   ``tests/test_properties.py`` (more ranks never lengthen the compute), ``tests/test_cli_errors.py``
   (its field's one-line errors).
"""

from botec.layout.dims import (FSDP_ZERO_STAGE, GROUPS, Layout, ModelFacts, PipelineSchedule, Recompute, Rule,
                               number_text)
from botec.layout.rules import SEARCH_BOUNDS, SERVING_RULES, TRAINING_RULES, SearchBounds, candidates, layout_of
from botec.layout.stages import default_stage_layers, layers_in_flight

__all__ = ["FSDP_ZERO_STAGE", "GROUPS", "Layout", "ModelFacts", "PipelineSchedule", "Recompute", "Rule",
           "SEARCH_BOUNDS", "SERVING_RULES", "TRAINING_RULES", "SearchBounds", "candidates", "default_stage_layers",
           "layers_in_flight", "layout_of", "number_text"]
