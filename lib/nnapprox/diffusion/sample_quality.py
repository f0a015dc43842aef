r"""How close are samples to the Ising model? Total variation, correlations, energy law.

Chapter "Diffusion models as variational inference", section 5.

* :func:`tv_distance`: :math:`\mathrm{TV}(\hat\mu_n, \mu) = \frac12 \sum_x |\hat\mu_n(x) - \mu(x)|`
  for the empirical law of ``n`` samples (exact :math:`\mu` by enumeration, :math:`d \le 20`).
  Even exact samples have a positive TV (the noise floor); compare with it, not with 0.
* :func:`correlation_error`: :math:`\|\hat C - C\|_F` of the matrices :math:`C = \mathbb E[x x^\top]`.
* :func:`ks_energy`: Kolmogorov–Smirnov distance between the empirical and the exact law of
  the energy :math:`x^\top A x/2`.
* :func:`resampled_quality`: the sampling distribution of TV and correlation error for samples
  of a given size from a given law (exact samples: the null distribution of a test).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox import rng

from .enumeration import all_states, probabilities, state_index
from .ising import energy


def empirical_law(x: Float[Tensor, "n d"]) -> Float[Tensor, " states"]:
    """Frequencies of every state of :math:`\\{-1,1\\}^d` among the rows of ``x``."""
    d = x.shape[1]
    counts = torch.bincount(state_index(x), minlength=2**d)
    return counts.to(torch.float64) / x.shape[0]


def tv_distance(x: Float[Tensor, "n d"], p: Float[Tensor, " states"]) -> float:
    r""":math:`\frac12\sum_x |\hat\mu_n(x) - p(x)|`."""
    return float(0.5 * (empirical_law(x).to(p.device) - p).abs().sum())


def second_moment(x: Float[Tensor, "n d"]) -> Float[Tensor, "d d"]:
    r"""Empirical :math:`\frac1n \sum_i x_i x_i^\top`."""
    return x.T @ x / x.shape[0]


def exact_second_moment(A: Float[Tensor, "d d"]) -> Float[Tensor, "d d"]:
    r""":math:`C = \mathbb E_\mu[x x^\top]` by enumeration."""
    X = all_states(A.shape[0], A.dtype, A.device)
    p = probabilities(A)
    return (X * p[:, None]).T @ X


def correlation_error(x: Float[Tensor, "n d"], C: Float[Tensor, "d d"]) -> float:
    r""":math:`\|\frac1n\sum_i x_i x_i^\top - C\|_F`."""
    return float(torch.linalg.matrix_norm(second_moment(x).to(C) - C))


def ks_energy(x: Float[Tensor, "n d"], A: Float[Tensor, "d d"]) -> float:
    r""":math:`\sup_e |\hat F_n(e) - F(e)|` for the energy :math:`x^\top A x/2` (exact :math:`F` by enumeration).

    Both CDFs jump only at energies of states, so the supremum is attained on those values.
    """
    X = all_states(A.shape[0], A.dtype, A.device)
    E_all = torch.round(energy(X, A) * 1e9) / 1e9
    p = probabilities(A)
    levels, inverse = torch.unique(E_all, return_inverse=True)  # sorted distinct energies
    F = torch.cumsum(torch.zeros_like(levels).index_add_(0, inverse, p), 0)
    E_samp = torch.round(energy(x.to(A), A) * 1e9) / 1e9
    F_n = torch.searchsorted(torch.sort(E_samp).values, levels, right=True).to(A.dtype) / x.shape[0]
    return float((F_n - F).abs().max())


def resampled_quality(
    q: Float[Tensor, " states"],
    p: Float[Tensor, " states"],
    C: Float[Tensor, "d d"],
    n: int,
    n_draws: int,
    generator: torch.Generator | None = None,
) -> tuple[Float[Tensor, " n_draws"], Float[Tensor, " n_draws"]]:
    r"""TV and correlation error of ``n_draws`` independent samples of size ``n`` from a law ``q``.

    ``q`` is a law on :math:`\{-1,1\}^d` (indexed like :func:`all_states`); each draw is the
    multinomial vector of state counts of ``n`` samples from ``q``, and is scored against
    :math:`\mu` (probabilities ``p``, second moment ``C``) exactly as :func:`tv_distance` and
    :func:`correlation_error` score the samples themselves. With ``q = p`` this is the sampling
    distribution of both statistics for *exact* samplers (the null distribution of a test that a
    sampler draws from :math:`\mu`); with another ``q`` it measures the test's power against
    ``q``. Chapter "Diffusion models as variational inference", section 5.
    """
    if q.ndim != 1 or q.shape != p.shape or n < 1 or n_draws < 1:
        raise ValueError(f"need laws q, p of the same length (2^d states) and n, n_draws >= 1, got "
                         f"{tuple(q.shape)}, {tuple(p.shape)}, n={n}, n_draws={n_draws}")
    d = C.shape[0]
    if p.shape[0] != 2**d:
        raise ValueError(f"p has {p.shape[0]} states; C is {d} x {d}, so 2^d = {2**d} were expected")
    X = all_states(d, p.dtype, p.device)
    outer = (X[:, :, None] * X[:, None, :]).reshape(p.shape[0], d * d)  # x x^T per state
    chunk = max(1, 2**22 // n)  # draws per multinomial call: at most ~4M indices in memory
    tv, corr = [], []
    for start in range(0, n_draws, chunk):
        b = min(chunk, n_draws - start)
        idx = rng.multinomial(q.expand(b, -1), n, replacement=True, generator=generator).to(p.device)
        counts = torch.zeros(b, p.shape[0], dtype=p.dtype, device=p.device)
        counts.scatter_add_(1, idx, torch.ones(idx.shape, dtype=p.dtype, device=p.device))
        freq = counts / n  # (b, states): empirical laws
        tv.append(0.5 * (freq - p).abs().sum(1))
        second = (freq @ outer).reshape(b, d, d)  # empirical E[x x^T] of each draw
        corr.append(torch.linalg.matrix_norm(second - C.to(p)))
    tv, corr = torch.cat(tv), torch.cat(corr)
    return tv, corr
