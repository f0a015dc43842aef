r"""From score error to sampling error: the KL divergence between two discretised reverse SDEs.

Chapter "Diffusion models as variational inference", section 5 ({cite}`chen2023sampling`,
{cite}`mei2023deep`).

Two Euler–Maruyama chains on the same forward-time grid :math:`t_0 = T > \dots > t_N = \delta`,
both from :math:`Y_0 \sim \mathcal N(0, I_d)`, differ only in their score:

.. math::  Y_{k+1} = Y_k + \Delta_k\,(Y_k + 2 s_{t_k}(Y_k)) + \sqrt{2\Delta_k}\,\xi_k
           \quad\text{versus}\quad \hat s \text{ in place of } s, \qquad \Delta_k = t_k - t_{k+1}.

Each step is Gaussian with covariance :math:`2\Delta_k I` in both chains, so the KL divergence of
one step given :math:`Y_k` is :math:`\|2\Delta_k(s - \hat s)\|^2/(4\Delta_k) = \Delta_k\|s - \hat s\|^2`,
and by the chain rule the KL divergence between the laws of the whole paths is exactly

.. math::  \mathrm{KL}(P\,\|\,Q) = \sum_{k<N} \Delta_k\, \mathbb E_P \|s_{t_k}(Y_k) - \hat s_{t_k}(Y_k)\|^2 ,

the expectation along the chain :math:`P` driven by :math:`s`. Any map of the last state (e.g.
rounding to :math:`\{-1,1\}^d`) can only shrink it (data processing), and Pinsker's inequality
turns it into total variation: :math:`\mathrm{TV} \le \sqrt{\mathrm{KL}/2}`. In continuous time
the same computation is Girsanov's theorem, the route by which sampling error is bounded by the
:math:`L^2` score error.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from .ising import field, score_from_mean
from .reverse_sde import time_grid
from nnapprox import rng

Denoiser = Callable[[Float[Tensor, "batch d"]], Float[Tensor, "batch d"]]


def euler_chain_path_kl(
    denoiser: Denoiser,
    others: Sequence[Denoiser],
    d: int,
    n_samples: int,
    T: float = 5.0,
    delta: float = 1e-2,
    n_steps: int = 200,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> tuple[Float[Tensor, "n d"], Float[Tensor, "others n d"], Float[Tensor, "others n"],
           Float[Tensor, "others steps"]]:
    r"""The Euler chain :math:`P` driven by ``denoiser``, the chains :math:`Q_j` of ``others``, and the path KL.

    Same grid and updates as :func:`nnapprox.diffusion.reverse_sde` (scores from posterior
    means by Tweedie's formula), without the final Tweedie step. The chains are *coupled*:
    every chain starts from the same :math:`Y_0` and takes the same Gaussian increments, so each
    has its own law while differences of expectations between them are estimated with little
    noise. Returns the last states :math:`Y_N` of :math:`P`, ``(n, d)``, and of each
    :math:`Q_j`, ``(len(others), n, d)``; per path of :math:`P` the sum
    :math:`\sum_k \Delta_k \|s_{t_k}(Y_k) - \hat s^{(j)}_{t_k}(Y_k)\|^2`, ``(len(others), n)``,
    whose mean over paths is :math:`\mathrm{KL}(P \| Q_j)` (module docstring), and the
    posterior-mean error along the chain, :math:`\mathbb E_P\|m - \hat m^{(j)}\|^2/d` at each
    step (mean over paths), ``(len(others), n_steps)``: with Tweedie's formula the path KL is
    :math:`\sum_k \Delta_k\lambda_{t_k}^2\sigma_{t_k}^{-4}\, d` times it.
    """
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    others = list(others)
    ts = time_grid(T, delta, n_steps, dtype).to(device)
    Y = rng.randn(n_samples, d, generator=generator, dtype=dtype, device=device)
    Y_others = Y.expand(len(others), n_samples, d).clone()  # (others, n, d)
    kl = torch.zeros(len(others), n_samples, dtype=dtype, device=device)
    mean_err = torch.zeros(len(others), n_steps, dtype=dtype, device=device)
    for k in range(n_steps):
        t = ts[k].expand(n_samples)
        h = field(Y, t)
        m = denoiser(h)
        s = score_from_mean(m, Y, t)
        dt = ts[k] - ts[k + 1]
        for j, other in enumerate(others):
            m_other = other(h)
            kl[j] += dt * ((s - score_from_mean(m_other, Y, t)) ** 2).sum(1)
            mean_err[j, k] = ((m - m_other) ** 2).sum(1).mean() / d
        xi = rng.randn(Y.shape, generator=generator, dtype=dtype, device=device)
        for j, other in enumerate(others):  # Q_j with the same increments
            Yj = Y_others[j]
            s_j = score_from_mean(other(field(Yj, t)), Yj, t)
            Y_others[j] = Yj + dt * (Yj + 2 * s_j) + torch.sqrt(2 * dt) * xi
        Y = Y + dt * (Y + 2 * s) + torch.sqrt(2 * dt) * xi
    return Y, Y_others, kl, mean_err
