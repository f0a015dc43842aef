r"""The quanta model: a scaling law whose exponent is known in advance.

Chapter *Neural scaling laws*, section "A model where the exponent is known"
(``hutter2021learning``, ``michaud2023quantization``).

Knowledge comes in discrete *quanta* :math:`k = 1, 2, \dots`, used with Zipf frequencies

.. math::  p_k = \frac{k^{-(\alpha+1)}}{\zeta(\alpha+1)}, \qquad \alpha > 0 .

A prediction that needs an unlearned quantum costs one unit of loss, a learned one costs
nothing. A model with capacity for :math:`N` quanta learns the :math:`N` most frequent, so

.. math::  L(N) = \sum_{k > N} p_k = \frac{\zeta(\alpha+1, N+1)}{\zeta(\alpha+1)}
           \sim \frac{N^{-\alpha}}{\alpha\,\zeta(\alpha+1)} .

With unlimited capacity but :math:`D` samples, quantum :math:`k` is learned once it was seen
at least :math:`\tau` times; it is seen about :math:`D p_k` times, so quanta up to
:math:`k^\star \propto D^{1/(\alpha+1)}` are learned and
:math:`L(D) \propto (k^\star)^{-\alpha} \propto D^{-\alpha/(\alpha+1)}`.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Float, Int
from scipy.special import zeta
from torch import Tensor


def _check_alpha(alpha: float) -> None:
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0 (p_k ∝ k^-(alpha+1) must be summable), got {alpha}")


def quanta_probs(alpha: float, n_quanta: int) -> Float[Tensor, " n_quanta"]:
    r""":math:`p_k = k^{-(\alpha+1)}/\zeta(\alpha+1)` for :math:`k = 1..` ``n_quanta`` (float64; the tail beyond is left out)."""
    _check_alpha(alpha)
    if n_quanta < 1:
        raise ValueError(f"n_quanta must be >= 1, got {n_quanta}")
    k = torch.arange(1, n_quanta + 1, dtype=torch.float64)
    return k ** (-(alpha + 1.0)) / float(zeta(alpha + 1.0))


def loss_capacity_limited(alpha: float, N: Int[np.ndarray, " m"]) -> Float[np.ndarray, " m"]:
    r"""Exact :math:`L(N) = \zeta(\alpha+1, N+1)/\zeta(\alpha+1)`: the mass of the quanta beyond the top :math:`N`."""
    _check_alpha(alpha)
    N = np.asarray(N)
    if (N < 0).any():
        raise ValueError("N must be >= 0")
    return zeta(alpha + 1.0, N.astype(float) + 1.0) / zeta(alpha + 1.0)


def loss_data_limited(
    alpha: float,
    D: Int[np.ndarray, " m"],
    generator: torch.Generator,
    tau: int = 1,
    n_quanta: int = 1_000_000,
) -> Float[np.ndarray, " m"]:
    r"""Sampled :math:`L(D) = \sum_k p_k\,\mathbf 1[\text{count}_k < \tau]` after :math:`D` samples.

    Counts are Poisson(:math:`D p_k`) (Poissonised sampling: independent across quanta,
    and exact in law for a Poisson number of samples with mean :math:`D`). Quanta beyond
    ``n_quanta`` are counted as unlearned, which adds their exact mass
    :math:`\zeta(\alpha+1, n+1)/\zeta(\alpha+1)`; choose ``n_quanta`` so that
    :math:`D p_{n} \ll 1` for the largest ``D``.
    """
    _check_alpha(alpha)
    if tau < 1:
        raise ValueError(f"tau must be >= 1, got {tau}")
    p = quanta_probs(alpha, n_quanta)
    tail = float(loss_capacity_limited(alpha, np.array([n_quanta]))[0])
    out = []
    for d in np.asarray(D):
        if d < 1:
            raise ValueError(f"D must be >= 1, got {d}")
        counts = torch.poisson(p * float(d), generator=generator)
        out.append(float(p[counts < tau].sum()) + tail)
    return np.asarray(out)


def expected_loss_data_limited(
    alpha: float, D: Int[np.ndarray, " m"], tau: int = 1, n_quanta: int = 1_000_000
) -> Float[np.ndarray, " m"]:
    r"""Reference: :math:`\mathbb E L(D) = \sum_k p_k\, P(\mathrm{Poisson}(D p_k) < \tau)` (+ the tail)."""
    from scipy.stats import poisson

    _check_alpha(alpha)
    p = quanta_probs(alpha, n_quanta).numpy()
    tail = float(loss_capacity_limited(alpha, np.array([n_quanta]))[0])
    return np.asarray([float((p * poisson.cdf(tau - 1, p * d)).sum()) + tail for d in np.asarray(D)])


def variance_loss_data_limited(
    alpha: float, D: Int[np.ndarray, " m"], tau: int = 1, n_quanta: int = 1_000_000
) -> Float[np.ndarray, " m"]:
    r"""Exact :math:`\operatorname{Var} L(D) = \sum_k p_k^2\, q_k (1 - q_k)` of :func:`loss_data_limited`.

    With Poissonised sampling the counts are independent, so :math:`L(D)` is a sum of
    independent terms :math:`p_k \mathbf 1[\text{count}_k < \tau]`, each Bernoulli with
    :math:`q_k = P(\mathrm{Poisson}(D p_k) < \tau)`; the tail beyond ``n_quanta`` is constant.
    """
    from scipy.stats import poisson

    _check_alpha(alpha)
    if tau < 1:
        raise ValueError(f"tau must be >= 1, got {tau}")
    D = np.asarray(D)
    if (D < 1).any():
        raise ValueError(f"D must be >= 1, got {D.min()}")
    p = quanta_probs(alpha, n_quanta).numpy()
    out = []
    for d in D:
        q = poisson.cdf(tau - 1, p * d)
        out.append(float((p**2 * q * (1 - q)).sum()))
    return np.asarray(out)
