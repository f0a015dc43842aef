r"""Composing approximate layers: the curse of depth and how stable algorithms break it.

Introduction, section "Breaking the curse of depth" (seed lecture 000; Mei & Wu 2023).

A target computed by an algorithm is a composition :math:`f = U_L \circ \cdots \circ U_1`.
A network imitates each layer up to an error, :math:`\mathrm{NN}_\ell = U_\ell + \varepsilon_\ell`
with :math:`\|\varepsilon_\ell\| \le \varepsilon`. The error of the composition obeys

.. math::  e_\ell = \|z_\ell - \hat z_\ell\| \le K e_{\ell-1} + \varepsilon
           \quad\Longrightarrow\quad e_L \le \varepsilon \frac{K^L - 1}{K - 1},

for :math:`K`-Lipschitz layers: exponential in depth when :math:`K > 1` (the curse of depth).
When each layer is a step of a *stable* algorithm, a contraction with factor
:math:`\rho < 1` (gradient descent on a strongly convex loss), the same recursion gives
:math:`e_L \le \varepsilon / (1 - \rho)` for every :math:`L`.

Everything is batched: ``z`` has shape ``(batch, d)`` and every trajectory of the batch is
run at once.
"""

from __future__ import annotations

from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

Step = Callable[[Float[Tensor, "batch d"]], Float[Tensor, "batch d"]]


def unroll_with_errors(
    step: Step,
    z0: Float[Tensor, "batch d"],
    n_layers: int,
    eps: float,
    generator: torch.Generator | None = None,
) -> Float[Tensor, "layers_plus_one batch"]:
    r"""Run ``step`` exactly and with a per-layer error of norm ``eps``; return the gap.

    The perturbed run is :math:`\hat z_\ell = U(\hat z_{\ell-1}) + \varepsilon_\ell` with
    :math:`\varepsilon_\ell` uniform on the sphere of radius ``eps`` (independent per layer
    and per trajectory). Returns :math:`e_\ell = \|z_\ell - \hat z_\ell\|_2` for
    :math:`\ell = 0, \dots, L`, shape ``(n_layers + 1, batch)``.
    """
    if n_layers < 0:
        raise ValueError(f"n_layers must be >= 0, got {n_layers}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    z, z_hat = z0, z0.clone()
    errors = [torch.zeros(z0.shape[0], dtype=z0.dtype, device=z0.device)]
    for _ in range(n_layers):
        noise = torch.randn(z0.shape, generator=generator, dtype=z0.dtype, device=z0.device)
        noise = eps * noise / noise.norm(dim=1, keepdim=True)
        z, z_hat = step(z), step(z_hat) + noise
        errors.append((z - z_hat).norm(dim=1))
    return torch.stack(errors)


def error_bound(K: float, eps: float, n_layers: int) -> float:
    r""":math:`\varepsilon \sum_{j<L} K^j`: the worst case of :math:`e_\ell \le K e_{\ell-1} + \varepsilon`."""
    if K == 1.0:
        return eps * n_layers
    return eps * (K**n_layers - 1.0) / (K - 1.0)


def expanding_layer(
    K: float, d: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> tuple[Step, Float[Tensor, "d d"]]:
    r"""A generic :math:`K`-Lipschitz linear layer :math:`U(z) = K Q z` with a random orthogonal ``Q``.

    It stretches every error by exactly ``K``, so it realises the worst case of the recursion.
    Returns ``(step, Q)``.
    """
    gaussian = torch.randn(d, d, generator=generator, dtype=dtype)
    Q, R = torch.linalg.qr(gaussian)
    Q = Q * torch.sign(torch.diagonal(R))  # Haar-distributed orthogonal matrix

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return K * z @ Q.T

    return step, Q


def gradient_descent_layer(
    A: Float[Tensor, "d d"], b: Float[Tensor, " d"], eta: float
) -> tuple[Step, float]:
    r"""One step of gradient descent on :math:`F(z) = \tfrac12 z^\top A z - b^\top z` (``A`` s.p.d.).

    :math:`U(z) = z - \eta (A z - b)` is a contraction with factor
    :math:`\rho = \max_i |1 - \eta \lambda_i(A)|`, which is :math:`< 1` for
    :math:`0 < \eta < 2 / \lambda_{\max}`. Returns ``(step, rho)``.
    """
    eigenvalues = torch.linalg.eigvalsh(A)
    if eigenvalues.min() <= 0:
        raise ValueError("A must be symmetric positive definite (strongly convex loss)")
    rho = float((1.0 - eta * eigenvalues).abs().max())

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return z - eta * (z @ A.T - b)

    return step, rho


def growth_rate(errors: Float[Tensor, " layers"]) -> float:
    r"""Geometric growth rate of a positive sequence: :math:`\exp` of the least-squares slope of :math:`\log e_\ell`."""
    if (errors <= 0).any():
        raise ValueError("growth_rate needs positive errors")
    ell = torch.arange(len(errors), dtype=torch.float64)
    log_e = errors.double().log()
    slope = ((ell - ell.mean()) * (log_e - log_e.mean())).sum() / ((ell - ell.mean()) ** 2).sum()
    return float(slope.exp())
