r"""Variational inference for the Ising posterior: naive mean field and TAP, with damping.

Chapter "Diffusion models as variational inference", sections 2–3 ({cite}`mei2023deep`,
{cite}`thouless1977solution`, {cite}`elalaoui2022sampling`).

The mean field approximation minimises over product measures with means :math:`m \in [-1,1]^d`
the variational free energy

.. math::  F_{\mathrm{VI}}(m) = -\sum_{i=1}^d H\!\left(\tfrac{1+m_i}{2}\right)
           - \tfrac12 m^\top A m - \langle h, m\rangle ,

with :math:`H` the binary entropy (in nats). Its stationarity condition is the fixed point
:math:`m = \tanh(A m + h)`, found by iterating :math:`m^{\ell} = \tanh(A m^{\ell-1} + h)`,
:math:`m^0 = 0`: a contraction when :math:`\|A\|_{\mathrm{op}} < 1`, since tanh is 1-Lipschitz.
The TAP equations add the Onsager reaction term,

.. math::  m_i = \tanh\Big(h_i + \sum_j A_{ij} m_j - m_i \sum_j A_{ij}^2 (1 - m_j^2)\Big).

``damping`` :math:`\alpha \in (0, 1]` replaces an update :math:`m \leftarrow U(m)` by
:math:`m \leftarrow (1-\alpha) m + \alpha U(m)`; use :math:`\alpha < 1` when :math:`2\beta > 1`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def _check(n_iter: int, damping: float) -> None:
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    if not 0.0 < damping <= 1.0:
        raise ValueError(f"damping must be in (0, 1], got {damping}")


def mf_step(m: Float[Tensor, "batch d"], A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"]
            ) -> Float[Tensor, "batch d"]:
    r"""One naive mean-field update :math:`m \mapsto \tanh(A m + h)`."""
    return torch.tanh(m @ A.T + h)


def tap_step(m: Float[Tensor, "batch d"], A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"]
             ) -> Float[Tensor, "batch d"]:
    r"""One TAP update :math:`m_i \mapsto \tanh(h_i + (Am)_i - m_i \sum_j A_{ij}^2 (1 - m_j^2))`."""
    onsager = (1.0 - m**2) @ (A**2).T  # (batch, d)
    return torch.tanh(h + m @ A.T - m * onsager)


def naive_mean_field(
    A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"], n_iter: int = 200, damping: float = 1.0
) -> Float[Tensor, "batch d"]:
    r"""Iterate :func:`mf_step` ``n_iter`` times from :math:`m^0 = 0` (with damping)."""
    _check(n_iter, damping)
    m = torch.zeros_like(h)
    for _ in range(n_iter):
        m = (1.0 - damping) * m + damping * mf_step(m, A, h)
    return m


def tap(
    A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"], n_iter: int = 200, damping: float = 0.5
) -> Float[Tensor, "batch d"]:
    r"""Iterate :func:`tap_step` ``n_iter`` times from :math:`m^0 = 0` (damped by default)."""
    _check(n_iter, damping)
    m = torch.zeros_like(h)
    for _ in range(n_iter):
        m = (1.0 - damping) * m + damping * tap_step(m, A, h)
    return m


def mf_trajectory(
    A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"], n_iter: int
) -> Float[Tensor, "iters_plus_one batch d"]:
    r"""All iterates :math:`m^0 = 0, m^1, \dots, m^L` of the undamped mean-field iteration."""
    _check(n_iter, 1.0)
    ms = [torch.zeros_like(h)]
    for _ in range(n_iter):
        ms.append(mf_step(ms[-1], A, h))
    return torch.stack(ms)


def vi_free_energy(
    m: Float[Tensor, "batch d"], A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"]
) -> Float[Tensor, " batch"]:
    r"""The mean-field objective :math:`F_{\mathrm{VI}}(m)` (negative entropy minus energy), per row."""
    p, q = (1.0 + m) / 2, (1.0 - m) / 2
    entropy = -(torch.xlogy(p, p) + torch.xlogy(q, q)).sum(-1)
    return -entropy - 0.5 * ((m @ A) * m).sum(-1) - (h * m).sum(-1)
