"""Closing chapter "Functions versus algorithms: what the algorithmic view buys" (``chapters/algorithms.md``).

Modules: :mod:`.looped` (a weight-tied transformer block run T times), :mod:`.amp`
(approximate message passing against the exact Bayes estimator), :mod:`.lista` (unrolled
ISTA against an MLP of equal size) and :mod:`.probes` (linear probes of a transformer
trained in context on a fixed representation).
"""
