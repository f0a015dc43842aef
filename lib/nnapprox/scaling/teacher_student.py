r"""Teacher-student regression: the scaling exponent comes from the data's dimension.

Chapter *Neural scaling laws*, section "The exponent comes from the data's dimension"
(``sharma2022scaling``, ``bahri2021explaining``).

**Resolution-limited regime** (``sharma2022scaling``). A ReLU student is piecewise linear.
With :math:`N` parameters spread over a :math:`d`-dimensional data manifold, each linear
piece covers a region of diameter :math:`s \propto N^{-1/d}`; a smooth teacher deviates
from its tangent plane by :math:`O(s^2)` on such a region, so

.. math::  \mathrm{MSE}(N) \propto s^4 \propto N^{-4/d}, \qquad \alpha \approx 4/d .

Here the teacher is a random smooth network :math:`f^\star(x) = \sum_{j \le K} c_j
\tanh(w_j \cdot x + b_j)` on :math:`x \sim U([-1,1]^d)` and the student is
:math:`N` random ReLU features :math:`\mathrm{ReLU}(v_i \cdot x + a_i)` (plus an affine
term) whose output layer is fitted by least squares on plenty of data, so only the
student's size limits the loss.

**Variance-limited regime** (``bahri2021explaining``). At fixed :math:`N` the student
fitted on :math:`D` noisy samples has excess loss
:math:`L(D) - L(\infty) = \sigma^2 p / D + O(D^{-2})` for ordinary least squares with
:math:`p` features: exponent exactly 1, whatever :math:`d`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

Teacher = Callable[[Float[Tensor, "n d"]], Float[Tensor, " n"]]


def tanh_teacher(d: int, generator: torch.Generator, K: int = 32, scale: float = 1.5) -> Teacher:
    r"""Random smooth teacher :math:`f^\star(x) = K^{-1/2} \sum_j c_j \tanh(w_j \cdot x + b_j)`, :math:`w_j \sim \mathcal N(0, \text{scale}^2 I)` (float64)."""
    if d < 1 or K < 1:
        raise ValueError(f"d and K must be >= 1, got d={d}, K={K}")
    w = rng.randn(K, d, generator=generator, dtype=torch.float64) * scale
    b = rng.randn(K, generator=generator, dtype=torch.float64)
    c = rng.randn(K, generator=generator, dtype=torch.float64) / K**0.5

    def f(x: Float[Tensor, "n d"]) -> Float[Tensor, " n"]:
        return torch.tanh(x @ w.T + b) @ c

    return f


def _features(x: Float[Tensor, "n d"], v: Float[Tensor, "N d"], a: Float[Tensor, " N"]) -> Float[Tensor, "n p"]:
    """ReLU features plus an affine part: shape (n, N + 1 + d)."""
    return torch.cat([torch.relu(x @ v.T + a), torch.ones(len(x), 1, dtype=x.dtype), x], dim=1)


def _least_squares(Phi: Float[Tensor, "n p"], y: Float[Tensor, " n"], ridge: float) -> Float[Tensor, " p"]:
    return _solve_ridge(Phi.T @ Phi, Phi.T @ y, ridge)


def _solve_ridge(G: Float[Tensor, "p p"], b: Float[Tensor, " p"], ridge: float) -> Float[Tensor, " p"]:
    """Normal equations (G + ridge * mean(diag G) I) coef = b, with G = Phi^T Phi and b = Phi^T y."""
    G = G + ridge * G.diagonal().mean() * torch.eye(G.shape[0], dtype=G.dtype)
    return torch.linalg.solve(G, b)


def random_features_curve(
    teacher: Teacher,
    d: int,
    N: list[int],
    generator: torch.Generator,
    n_train: int = 8000,
    n_test: int = 4000,
    noise: float = 0.0,
    ridge: float = 1e-12,
) -> Float[np.ndarray, " m"]:
    r"""Test MSE of least-squares random-ReLU-feature students of sizes ``N`` (nested: the first :math:`N` of one draw).

    Features :math:`v_i` uniform on the sphere, offsets :math:`a_i \sim U(-\sqrt d, \sqrt d)`;
    inputs :math:`U([-1,1]^d)`; labels :math:`f^\star(x) + \sigma \xi`. The test MSE is
    measured against the noiseless teacher (the excess loss).
    """
    if not N or min(N) < 1:
        raise ValueError(f"N must be a non-empty list of positive sizes, got {N}")
    if n_train < max(N) + d + 1:
        raise ValueError(f"n_train={n_train} must exceed the number of features {max(N) + d + 1}")
    dt = torch.float64
    x = 2 * rng.rand(n_train, d, generator=generator, dtype=dt) - 1
    x_test = 2 * rng.rand(n_test, d, generator=generator, dtype=dt) - 1
    v = rng.randn(max(N), d, generator=generator, dtype=dt)
    v = v / v.norm(dim=1, keepdim=True)
    a = (2 * rng.rand(max(N), generator=generator, dtype=dt) - 1) * d**0.5
    y = teacher(x) + noise * rng.randn(n_train, generator=generator, dtype=dt)
    y_test = teacher(x_test)
    # one Gram matrix for the largest student, columns ordered [1, x, features]: the student with
    # the first n_feat features is its leading (1 + d + n_feat) block, so no size recomputes it
    Phi = _features(x, v, a).roll(1 + d, dims=1)
    Phi_test = _features(x_test, v, a).roll(1 + d, dims=1)
    G, b = Phi.T @ Phi, Phi.T @ y
    out = []
    for n_feat in N:
        p = 1 + d + n_feat
        coef = _solve_ridge(G[:p, :p], b[:p], ridge)
        pred = Phi_test[:, :p] @ coef
        out.append(float(((pred - y_test) ** 2).mean()))
    return np.asarray(out)


def variance_limited_curve(
    teacher: Teacher,
    d: int,
    N: int,
    D: list[int],
    generator: torch.Generator,
    noise: float = 0.1,
    n_test: int = 20_000,
    ridge: float = 1e-12,
) -> Float[np.ndarray, " m"]:
    r"""Excess test loss :math:`L(D) - L^\star` of a fixed-size student (``N`` features) fitted on ``D`` noisy samples.

    :math:`L^\star` is the smallest test loss the student can reach: its least-squares fit
    :math:`c^\star` on the (noiseless) test set itself. By orthogonality of least squares,
    :math:`L(D) - L^\star = \tfrac1n \lVert \Phi_{\text{test}}(\hat c_D - c^\star)\rVert^2 \ge 0`,
    which is what is returned (no difference of two noisy numbers).
    """
    if min(D) <= N + d + 1:
        raise ValueError(f"every D must exceed the number of features {N + d + 1}, got {D}")
    dt = torch.float64
    v = rng.randn(N, d, generator=generator, dtype=dt)
    v = v / v.norm(dim=1, keepdim=True)
    a = (2 * rng.rand(N, generator=generator, dtype=dt) - 1) * d**0.5
    x_test = 2 * rng.rand(n_test, d, generator=generator, dtype=dt) - 1
    Phi_test = _features(x_test, v, a)
    c_star = _least_squares(Phi_test, teacher(x_test), ridge)

    def excess(n: int) -> float:
        x = 2 * rng.rand(n, d, generator=generator, dtype=dt) - 1
        y = teacher(x) + noise * rng.randn(n, generator=generator, dtype=dt)
        coef = _least_squares(_features(x, v, a), y, ridge)
        return float(((Phi_test @ (coef - c_star)) ** 2).mean())

    return np.asarray([excess(n) for n in D])
