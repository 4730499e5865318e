"""Formulas both kinds of estimate share: the model's shape and its attention work
(:mod:`.transformer`), the parameters each accelerator holds (:mod:`.weights`), the links each
parallel group crosses (:mod:`.links`), the α–β cost of a collective (:mod:`.collectives`) and the
facility's power and price (:mod:`botec.economics`)."""
