r"""The TwoNN estimator of intrinsic dimension (Facco et al. 2017).

Chapter *Neural scaling laws*, section "The exponent comes from the data's dimension", applied
to the byte-level model of section 4 (``sharma2022scaling``, ``facco2017estimating``).

For each point :math:`x_i` of a sample let :math:`r_1(i) < r_2(i)` be the distances to its
first and second nearest neighbours, and :math:`\mu_i = r_2(i)/r_1(i)`. If the points are a
Poisson process of constant density on a :math:`d`-dimensional manifold (constant at least
over the distance to the second neighbour), :math:`\mu` has the Pareto law

.. math::  F(\mu) = 1 - \mu^{-d}, \qquad \mu \ge 1,

whatever the density: :math:`-\log(1 - F(\mu)) = d \log \mu` is a line through the origin.
Facco et al. estimate :math:`d` as the slope of that line fitted (least squares through the
origin) to the empirical distribution function, after discarding the largest 10% of the
:math:`\mu_i`, whose tail is the most sensitive to noise and curvature
(:func:`two_nn_dimension`). Equivalently :math:`\log \mu \sim \text{Exp}(d)`, so the
maximum-likelihood estimate of :math:`n` independent ratios is :math:`(n-1)/\sum_i \log
\mu_i` (the unbiased version), with standard error :math:`\hat d/\sqrt{n-2}`
(:func:`two_nn_mle`). The ratios of neighbouring points share neighbours and are not exactly
independent, so that standard error is a first-order guide, not an exact one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor


def two_nn_ratios(X: Float[Tensor, "n D"]) -> Float[np.ndarray, " n"]:
    r""":math:`\mu_i = r_2(i)/r_1(i)`, Euclidean distances computed in float64.

    Raises ``ValueError`` for fewer than 3 points or for repeated points (:math:`r_1 = 0`):
    remove duplicates first (e.g. ``torch.unique(X, dim=0)``).
    """
    X = torch.as_tensor(X)
    if X.ndim != 2 or X.shape[0] < 3:
        raise ValueError(f"X must be an (n, D) array of n >= 3 points, got shape {tuple(X.shape)}")
    X = X.detach().to(torch.float64)
    dist = torch.cdist(X, X)  # (n, n)
    dist.fill_diagonal_(float("inf"))
    r = torch.topk(dist, 2, dim=1, largest=False).values  # (n, 2): r_1, r_2
    if (r[:, 0] == 0).any():
        raise ValueError("X has repeated points (a nearest-neighbour distance is 0): remove duplicates first")
    return (r[:, 1] / r[:, 0]).cpu().numpy()


def two_nn_dimension(mu: Float[np.ndarray, " n"], discard_fraction: float = 0.1) -> float:
    r"""Facco et al.'s fit: slope through the origin of :math:`-\log(1 - F_{emp}(\mu))` on :math:`\log\mu`.

    The :math:`\mu_i` are sorted, :math:`F_{emp}(\mu_{(i)}) = i/n` (:math:`i = 1 \dots n`), and the
    largest ``discard_fraction`` of them are left out (which also drops :math:`F = 1`).
    """
    mu = np.sort(np.asarray(mu, dtype=float))
    if mu.ndim != 1 or len(mu) < 3 or (mu < 1).any():
        raise ValueError("mu must be a 1-d array of at least 3 ratios r_2/r_1 >= 1")
    if not 0.0 <= discard_fraction < 1.0:
        raise ValueError(f"discard_fraction must be in [0, 1), got {discard_fraction}")
    n = len(mu)
    keep = min(int(np.floor(n * (1.0 - discard_fraction))), n - 1)  # F = 1 at i = n: never kept
    x = np.log(mu[:keep])
    y = -np.log(1.0 - np.arange(1, keep + 1) / n)
    return float((x * y).sum() / (x * x).sum())


def two_nn_mle(mu: Float[np.ndarray, " n"]) -> tuple[float, float]:
    r"""Maximum likelihood under :math:`\log\mu \sim \text{Exp}(d)`: :math:`\hat d = (n-1)/\sum\log\mu_i`, s.e. :math:`\hat d/\sqrt{n-2}`."""
    mu = np.asarray(mu, dtype=float)
    if mu.ndim != 1 or len(mu) < 3 or (mu < 1).any():
        raise ValueError("mu must be a 1-d array of at least 3 ratios r_2/r_1 >= 1")
    s = float(np.log(mu).sum())
    if s <= 0:
        raise ValueError("every ratio is 1: the sample has no nearest-neighbour structure")
    d = (len(mu) - 1) / s
    return d, d / np.sqrt(len(mu) - 2)


@dataclass(frozen=True)
class TwoNN:
    """Intrinsic dimension of a point cloud by TwoNN: Facco et al.'s fit and the MLE with its s.e."""

    d_fit: float
    d_mle: float
    se_mle: float
    n: int


def two_nn(X: Float[Tensor, "n D"], discard_fraction: float = 0.1) -> TwoNN:
    """TwoNN on the rows of ``X`` (distinct points): both estimates of :math:`d`."""
    mu = two_nn_ratios(X)
    d_mle, se = two_nn_mle(mu)
    return TwoNN(two_nn_dimension(mu, discard_fraction), d_mle, se, len(mu))


def flat_torus(n: int, d: int, generator: torch.Generator) -> Float[Tensor, "n two_d"]:
    r"""``n`` uniform points on the flat torus :math:`(S^1)^d \subset \mathbb R^{2d}`: a closed
    :math:`d`-dimensional manifold of constant density and no boundary, for testing estimators."""
    if n < 1 or d < 1:
        raise ValueError(f"n and d must be >= 1, got n={n}, d={d}")
    theta = 2 * torch.pi * torch.rand(n, d, generator=generator, dtype=torch.float64)
    return torch.cat([torch.cos(theta), torch.sin(theta)], dim=1)
