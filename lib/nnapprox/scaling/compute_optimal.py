r"""Compute-optimal allocation of a training budget between model size and data.

Chapter *Neural scaling laws*, sections "How fits go wrong" and "Kaplan vs Chinchilla".

With training compute :math:`C \approx 6 N D` FLOPs (``kaplan2020scaling``) and the loss
:math:`L = E + A N^{-\alpha} + B D^{-\beta}` (``hoffmann2022training``), minimising over
:math:`N` at fixed :math:`C` gives

.. math::  N_{\mathrm{opt}}(C) = G \Bigl(\frac{C}{6}\Bigr)^{a}, \quad
           D_{\mathrm{opt}}(C) = G^{-1} \Bigl(\frac{C}{6}\Bigr)^{b}, \quad
           G = \Bigl(\frac{\alpha A}{\beta B}\Bigr)^{1/(\alpha+\beta)}, \quad
           a = \frac{\beta}{\alpha+\beta}, \ b = \frac{\alpha}{\alpha+\beta}.

:func:`optimal_allocation_numeric` minimises the same loss on a grid of :math:`N`; the
tests check that both agree.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float


def compute_optimal_exponents(alpha: float, beta: float) -> tuple[float, float]:
    r""":math:`(a, b) = (\beta/(\alpha+\beta),\ \alpha/(\alpha+\beta))`, with :math:`a + b = 1`."""
    if alpha <= 0 or beta <= 0:
        raise ValueError(f"alpha and beta must be positive, got {alpha}, {beta}")
    return beta / (alpha + beta), alpha / (alpha + beta)


def optimal_allocation(
    C: Float[np.ndarray, " c"], A: float, B: float, alpha: float, beta: float, flops_per_param_token: float = 6.0
) -> tuple[Float[np.ndarray, " c"], Float[np.ndarray, " c"]]:
    r"""Closed form :math:`(N_{\mathrm{opt}}(C), D_{\mathrm{opt}}(C))` for :math:`C = 6 N D`."""
    a, b = compute_optimal_exponents(alpha, beta)
    G = (alpha * A / (beta * B)) ** (1.0 / (alpha + beta))
    base = np.asarray(C, dtype=float) / flops_per_param_token
    return G * base**a, base**b / G


def optimal_allocation_numeric(
    C: Float[np.ndarray, " c"], A: float, B: float, alpha: float, beta: float,
    flops_per_param_token: float = 6.0, n_grid: int = 20_001,
) -> tuple[Float[np.ndarray, " c"], Float[np.ndarray, " c"]]:
    """Reference: minimise :math:`A N^{-\\alpha} + B D^{-\\beta}` along :math:`D = C/(6N)` on a fine log grid."""
    C = np.asarray(C, dtype=float)
    base = C / flops_per_param_token
    N_opt = np.empty_like(C)
    for i, c in enumerate(base):
        logN = np.linspace(0.0, np.log(c), n_grid)
        loss = A * np.exp(-alpha * logN) + B * np.exp(-beta * (np.log(c) - logN))
        j = int(np.argmin(loss))
        # parabolic refinement of the grid minimum
        if 0 < j < n_grid - 1:
            y0, y1, y2 = loss[j - 1], loss[j], loss[j + 1]
            h = logN[1] - logN[0]
            shift = 0.5 * h * (y0 - y2) / (y0 - 2 * y1 + y2)
            N_opt[i] = np.exp(logN[j] + shift)
        else:
            N_opt[i] = np.exp(logN[j])
    return N_opt, base / N_opt
