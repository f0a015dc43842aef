r"""Case-resampling bootstrap confidence intervals for fitted scaling laws.

Chapter *Neural scaling laws*, section "How fits go wrong" (``besiroglu2024chinchilla``).

Resample the :math:`n` observations with replacement, refit, and read the
:math:`(1-\gamma)` interval off the empirical quantiles of each parameter
(the percentile bootstrap, Efron & Tibshirani):

.. math::  \mathrm{CI}_{1-\gamma}(\theta_j) = \bigl[q_{\gamma/2}(\hat\theta_j^{*}),\ q_{1-\gamma/2}(\hat\theta_j^{*})\bigr].

Derived quantities (e.g. the compute-optimal exponent :math:`a = \beta/(\alpha+\beta)`)
get their interval from the same resamples.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from jaxtyping import Float

from ..progress import progress


def bootstrap_fits(
    fit: Callable[..., dict[str, float]],
    data: tuple[np.ndarray, ...],
    n_boot: int,
    rng: np.random.Generator,
    *,
    desc: str = "bootstrap",
) -> dict[str, Float[np.ndarray, " n_boot"]]:
    """Refit ``fit(*resampled_data)`` on ``n_boot`` case resamples; return each parameter's draws.

    ``data`` are arrays with the same first dimension (one row per observation, e.g.
    ``(N, D, L)``); rows are resampled jointly. ``fit`` returns a dict of named floats.
    """
    if n_boot < 2:
        raise ValueError(f"n_boot must be >= 2, got {n_boot}")
    data = tuple(np.asarray(a) for a in data)
    n = len(data[0])
    if any(len(a) != n for a in data):
        raise ValueError(f"all data arrays need the same length, got {[len(a) for a in data]}")
    draws: dict[str, list[float]] = {}
    for _ in progress(range(n_boot), desc=desc):
        idx = rng.integers(0, n, size=n)
        for key, value in fit(*(a[idx] for a in data)).items():
            draws.setdefault(key, []).append(float(value))
    return {k: np.asarray(v) for k, v in draws.items()}


def percentile_ci(
    draws: Float[np.ndarray, " n_boot"], level: float = 0.95
) -> tuple[float, float]:
    r"""Percentile interval :math:`[q_{\gamma/2}, q_{1-\gamma/2}]` with :math:`\gamma = 1 - \text{level}`."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    gamma = 1.0 - level
    lo, hi = np.quantile(np.asarray(draws, dtype=float), [gamma / 2, 1 - gamma / 2])
    return float(lo), float(hi)
