"""The quantity graph: what it is made of (:mod:`.definitions`), the engine that evaluates it (:mod:`.engine`),
the elementwise helpers formulas use (:mod:`.elementwise`) and the explanation of a derivation chain
(:mod:`.explain`).

The engine knows no formula; :mod:`botec.training` and :mod:`botec.serving` compose theirs into
the ``TRAINING`` and ``SERVING`` graphs.
"""

from botec.graph.elementwise import ceil, exp, exprel, floor, log2, maximum, minimum, where
from botec.graph.engine import ACCOUNTS, PROVENANCES, Condition, Definition, Formulas, Given, Graph, Quantity

__all__ = ["ACCOUNTS", "PROVENANCES", "Condition", "Definition", "Formulas", "Given", "Graph", "Quantity",
           "ceil", "exp", "exprel", "floor", "log2", "maximum", "minimum", "where"]
