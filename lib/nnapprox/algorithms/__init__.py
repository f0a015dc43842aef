"""Closing chapter "Functions versus algorithms: what the algorithmic view buys".

The chapter is ``chapters/algorithms.md``.

Modules: :mod:`.looped` (a weight-tied transformer block run T times), :mod:`.amp`
(approximate message passing against the Bayes error), :mod:`.lista` (unrolled ISTA against an
MLP of equal size) and :mod:`.probes` (linear probes of a transformer trained in context on a
fixed representation). The probed transformers are committed checkpoints (five training runs).
"""

from nnapprox.checkpoints import Spec
from nnapprox.icl.encoder import BaiEncoder

from . import amp, probes

#: Training runs behind the interpretability section: one checkpoint per seed.
PROBE_SEEDS = (0, 1, 2, 3, 4)

CHECKPOINTS = {
    f"algorithms_probes_{s}": Spec("algorithms", BaiEncoder, probes.CONFIG, probes.train,
                                   probes.PROFILES["full"], seed=s)
    for s in PROBE_SEEDS
}

__all__ = ["CHECKPOINTS", "PROBE_SEEDS", "amp", "probes"]
