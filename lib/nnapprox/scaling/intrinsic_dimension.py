r"""The TwoNN estimator of intrinsic dimension (Facco et al. 2017).

Chapter *Neural scaling laws*, section "The exponent comes from the data's dimension", applied
to the byte-level model of section 4 (``sharma2022scaling``, ``facco2017estimating``).

For each point :math:`x_i` of a sample let :math:`r_1(i) < r_2(i)` be the distances to its
first and second nearest neighbours, and :math:`\mu_i = r_2(i)/r_1(i)`. If the points are a
Poisson process of constant density on a :math:`d`-dimensional manifold (constant at least
over the distance to the second neighbour), :math:`\mu` has the Pareto law

.. math::  F(\mu) = 1 - \mu^{-d}, \qquad \mu \ge 1,

whatever the density: :math:`-\log(1 - F(\mu)) = d \log \mu` is a line through the origin.
The proof uses the volume :math:`\omega_d r^d` of a ball, so the distances must be measured in
a metric in which the manifold is locally Euclidean (flat) out to the second neighbour. On the
flat torus :math:`(S^1)^d` the geodesic distance is such a metric; the chordal distance of its
embedding in :math:`\mathbb R^{2d}` (:func:`flat_torus`) agrees with it only to leading order
in the distance, and the difference at the scale of the neighbours biases the estimate.
:func:`two_nn_torus` computes the ratios geodesically from the angles.
Facco et al. estimate :math:`d` as the slope of that line fitted (least squares through the
origin) to the empirical distribution function, after discarding the largest 10% of the
:math:`\mu_i`, whose tail is the most sensitive to noise and curvature
(:func:`two_nn_dimension`). Equivalently :math:`\log \mu \sim \text{Exp}(d)`, so the
maximum-likelihood estimate from :math:`n` independent ratios is :math:`n/\sum_i \log \mu_i`;
:func:`two_nn_mle` returns its unbiased version :math:`(n-1)/\sum_i \log \mu_i`, with standard
error :math:`\hat d/\sqrt{n-2}`. The ratios of neighbouring points share neighbours and are not
exactly independent, so that standard error is a first-order guide, not an exact one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor


def _ratios_from_distances(dist: Float[Tensor, "n n"]) -> Float[np.ndarray, " n"]:
    """r_2/r_1 of each row of a distance matrix whose diagonal is ignored (modified in place)."""
    dist.fill_diagonal_(float("inf"))
    r = torch.topk(dist, 2, dim=1, largest=False).values  # (n, 2): r_1, r_2
    if (r[:, 0] == 0).any():
        raise ValueError(
            "X has repeated points (a nearest-neighbour distance is 0): remove duplicates first"
        )
    return (r[:, 1] / r[:, 0]).cpu().numpy()


def two_nn_ratios(X: Float[Tensor, "n D"]) -> Float[np.ndarray, " n"]:
    r""":math:`\mu_i = r_2(i)/r_1(i)`, Euclidean distances computed in float64.

    Raises ``ValueError`` for fewer than 3 points or for repeated points (:math:`r_1 = 0`):
    remove duplicates first (e.g. ``torch.unique(X, dim=0)``).
    """
    X = torch.as_tensor(X)
    if X.ndim != 2 or X.shape[0] < 3:
        raise ValueError(f"X must be an (n, D) array of n >= 3 points, got shape {tuple(X.shape)}")
    X = X.detach().to(torch.float64)
    return _ratios_from_distances(torch.cdist(X, X))  # (n, n) distances


def torus_geodesic_distances(theta: Float[Tensor, "n d"]) -> Float[Tensor, "n n"]:
    r"""Geodesic distances on the flat torus :math:`\mathbb R^d / (2\pi\mathbb Z)^d`, float64.

    :math:`\mathrm{dist}(\theta, \theta') = \bigl(\sum_j \min(|\Delta_j|, 2\pi - |\Delta_j|)^2
    \bigr)^{1/2}` with :math:`\Delta_j = (\theta_j - \theta'_j) \bmod 2\pi`: the length of the
    shortest segment between the two points in the flat metric (each circle of radius 1).
    """
    theta = torch.as_tensor(theta).detach().to(torch.float64)
    if theta.ndim != 2:
        raise ValueError(f"theta must be an (n, d) array of angles, got shape {tuple(theta.shape)}")
    n, out = theta.shape[0], []
    for i in range(0, n, 512):  # rows in chunks: (chunk, n, d) stays small
        delta = torch.remainder(theta[i : i + 512, None, :] - theta[None, :, :], 2 * torch.pi)
        delta = torch.minimum(delta, 2 * torch.pi - delta)  # (chunk, n, d)
        out.append(delta.square().sum(dim=2).sqrt())  # (chunk, n)
    return torch.cat(out)  # (n, n)


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
    r"""Unbiased version of the MLE under :math:`\log\mu \sim \text{Exp}(d)`:
    :math:`\hat d = (n-1)/\sum\log\mu_i`, s.e. :math:`\hat d/\sqrt{n-2}`."""
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


def two_nn_torus(theta: Float[Tensor, "n d"], discard_fraction: float = 0.1) -> TwoNN:
    """TwoNN on points of the flat torus given by their angles, with geodesic distances.

    For ``n`` independent uniform points and :math:`r_2 < \\pi`, each ratio follows the Pareto
    law exactly (:func:`torus_geodesic_distances`; chapter, section on the byte model's
    representations).
    """
    theta = torch.as_tensor(theta)
    if theta.ndim != 2 or theta.shape[0] < 3:
        raise ValueError(f"theta must be (n, d) with n >= 3, got shape {tuple(theta.shape)}")
    mu = _ratios_from_distances(torus_geodesic_distances(theta))
    d_mle, se = two_nn_mle(mu)
    return TwoNN(two_nn_dimension(mu, discard_fraction), d_mle, se, len(mu))


def flat_torus_angles(n: int, d: int, generator: torch.Generator) -> Float[Tensor, "n d"]:
    r"""``n`` independent uniform points of the flat torus :math:`(S^1)^d`, as angles in
    :math:`[0, 2\pi)`."""
    if n < 1 or d < 1:
        raise ValueError(f"n and d must be >= 1, got n={n}, d={d}")
    return 2 * torch.pi * torch.rand(n, d, generator=generator, dtype=torch.float64)


def torus_embedding(theta: Float[Tensor, "n d"]) -> Float[Tensor, "n two_d"]:
    r"""The flat torus in :math:`\mathbb R^{2d}`: :math:`(\cos\theta_1..\cos\theta_d,
    \sin\theta_1..\sin\theta_d)`, an isometric embedding of the flat metric whose chordal
    distances are shorter than the geodesic ones."""
    theta = torch.as_tensor(theta)
    return torch.cat([torch.cos(theta), torch.sin(theta)], dim=1)


def flat_torus(n: int, d: int, generator: torch.Generator) -> Float[Tensor, "n two_d"]:
    r"""``n`` uniform points on the flat torus :math:`(S^1)^d \subset \mathbb R^{2d}`: a closed
    :math:`d`-dimensional manifold of constant density and no boundary, for testing estimators."""
    return torus_embedding(flat_torus_angles(n, d, generator))
