r"""The Ising model, the SK couplings and the Ornstein–Uhlenbeck noising process.

Chapter "Diffusion models as variational inference", sections 1–2 ({cite}`mei2023deep`,
{cite}`elalaoui2022sampling`).

The data distribution is an Ising model on the hypercube,

.. math::  \mu(x) \propto \exp\{\tfrac12 x^\top A x\}, \qquad x \in \{-1, 1\}^d,

with the Sherrington–Kirkpatrick (SK) couplings :math:`A = \beta J`, :math:`J \sim \mathrm{GOE}(d)`
(off-diagonal entries :math:`\mathcal N(0, 1/d)`), diagonal set to zero. Data are noised by the
OU process :math:`z_t = \lambda_t x + \sigma_t g` with :math:`\lambda_t = e^{-t}`,
:math:`\sigma_t^2 = 1 - e^{-2t}`. Given :math:`z`, the posterior of :math:`x` is again an Ising
model, with the extra field :math:`h = \lambda_t z / \sigma_t^2`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng


def sk_coupling(
    d: int, beta: float, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> Float[Tensor, "d d"]:
    r"""SK couplings :math:`A = \beta J`, :math:`J` a GOE(d) matrix with zero diagonal.

    :math:`J_{ij} = J_{ji} \sim \mathcal N(0, 1/d)` for :math:`i \ne j`, :math:`J_{ii} = 0`;
    then :math:`\|J\|_{\mathrm{op}} \to 2` as :math:`d \to \infty`.
    """
    if d < 2:
        raise ValueError(f"d must be >= 2, got {d}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    gaussian = rng.randn(d, d, generator=generator, dtype=dtype)
    J = torch.triu(gaussian, diagonal=1) / d**0.5
    J = J + J.T  # symmetric, zero diagonal
    return beta * J


def operator_norm(A: Float[Tensor, "d d"]) -> float:
    r""":math:`\|A\|_{\mathrm{op}}`, the largest absolute eigenvalue of a symmetric matrix."""
    return float(torch.linalg.eigvalsh(A).abs().max())


def energy(x: Float[Tensor, "*batch d"], A: Float[Tensor, "d d"]) -> Float[Tensor, "*batch"]:
    r""":math:`\tfrac12 x^\top A x`, the log-weight of a state (so :math:`\mu \propto e^{\mathrm{energy}}`)."""
    return 0.5 * ((x @ A) * x).sum(-1)


def ou_schedule(t: Float[Tensor, "*batch"]) -> tuple[Float[Tensor, "*batch"], Float[Tensor, "*batch"]]:
    r""":math:`(\lambda_t, \sigma_t) = (e^{-t}, \sqrt{1 - e^{-2t}})` of the OU forward process."""
    if (t <= 0).any():
        raise ValueError("the OU schedule needs times t > 0")
    lambda_t = torch.exp(-t)
    sigma_t = torch.sqrt(-torch.expm1(-2 * t))
    return lambda_t, sigma_t


def noise(
    x: Float[Tensor, "batch d"], t: Float[Tensor, " batch"], generator: torch.Generator | None = None
) -> Float[Tensor, "batch d"]:
    r""":math:`z_t = \lambda_t x + \sigma_t g`, :math:`g \sim \mathcal N(0, I_d)`, one time per row."""
    lambda_t, sigma_t = ou_schedule(t)
    g = rng.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
    return lambda_t[:, None] * x + sigma_t[:, None] * g


def field(z: Float[Tensor, "batch d"], t: Float[Tensor, " batch"]) -> Float[Tensor, "batch d"]:
    r"""The posterior's external field :math:`h = \lambda_t z / \sigma_t^2`."""
    lambda_t, sigma_t = ou_schedule(t)
    return (lambda_t / sigma_t**2)[:, None] * z


def score_from_mean(
    m: Float[Tensor, "batch d"], z: Float[Tensor, "batch d"], t: Float[Tensor, " batch"]
) -> Float[Tensor, "batch d"]:
    r"""Tweedie's formula :math:`s_t(z) = (\lambda_t m_t(z) - z) / \sigma_t^2`."""
    lambda_t, sigma_t = ou_schedule(t)
    return (lambda_t[:, None] * m - z) / (sigma_t**2)[:, None]
