r"""Exact computations for small Ising models, by enumerating all :math:`2^d` states at once.

Chapter "Diffusion models as variational inference", section 1 ({cite}`mei2023deep`).

Every state of :math:`\{-1,1\}^d` is one row of a ``(2**d, d)`` tensor, so the partition
function, the posterior mean with a field :math:`h`,

.. math::  m(h) = \frac{\sum_x x\, e^{x^\top A x/2 + \langle h, x\rangle}}{\sum_x e^{x^\top A x/2 + \langle h, x\rangle}},

and the log-density of the noised data :math:`\mu_t = \mu * \mathcal N(\lambda_t\,\cdot, \sigma_t^2 I)`
are each a matrix product and a ``logsumexp`` (batched in chunks to bound memory). Use
float64; :math:`d \le 20`.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from .ising import energy, field, ou_schedule
from nnapprox import rng

D_MAX = 20
_CHUNK_ENTRIES = 2**22  # rows * states per chunk


def all_states(d: int, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
               ) -> Float[Tensor, "states d"]:
    """All :math:`2^d` points of :math:`\\{-1,1\\}^d`, row ``k`` is the binary expansion of ``k``."""
    if not 1 <= d <= D_MAX:
        raise ValueError(f"exact enumeration needs 1 <= d <= {D_MAX}, got d={d}")
    k = torch.arange(2**d, device=device)
    bits = (k[:, None] >> torch.arange(d - 1, -1, -1, device=device)) & 1  # (2^d, d)
    return (2 * bits - 1).to(dtype)


def _chunks(n_rows: int, n_states: int) -> range:
    size = max(1, _CHUNK_ENTRIES // n_states)
    return range(0, n_rows, size)


def log_partition(A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"]) -> Float[Tensor, " batch"]:
    r""":math:`\log Z(h) = \log \sum_x \exp\{x^\top A x/2 + \langle h, x\rangle\}` for each row of ``h``."""
    X = all_states(A.shape[0], A.dtype, A.device)
    E = energy(X, A)
    size = max(1, _CHUNK_ENTRIES // X.shape[0])
    return torch.cat([torch.logsumexp(E + h[i:i + size] @ X.T, dim=1) for i in range(0, h.shape[0], size)])


def posterior_mean(A: Float[Tensor, "d d"], h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
    r"""Exact mean :math:`m(h) = \mathbb E_{\mu_h}[x]` of the Ising model with couplings ``A`` and field ``h``."""
    X = all_states(A.shape[0], A.dtype, A.device)
    E = energy(X, A)
    size = max(1, _CHUNK_ENTRIES // X.shape[0])
    out = [torch.softmax(E + h[i:i + size] @ X.T, dim=1) @ X for i in range(0, h.shape[0], size)]
    return torch.cat(out)


def posterior_mean_reference(A: Float[Tensor, "d d"], h: Float[Tensor, " d"]) -> Float[Tensor, " d"]:
    """Readable reference for :func:`posterior_mean`: a Python loop over the states, one field."""
    d = A.shape[0]
    numerator = torch.zeros(d, dtype=A.dtype)
    Z = torch.zeros((), dtype=A.dtype)
    for k in range(2**d):
        x = torch.tensor([1.0 if (k >> (d - 1 - i)) & 1 else -1.0 for i in range(d)], dtype=A.dtype)
        w = torch.exp(0.5 * x @ A @ x + h @ x)
        numerator += w * x
        Z += w
    return numerator / Z


def probabilities(A: Float[Tensor, "d d"]) -> Float[Tensor, " states"]:
    r""":math:`\mu(x)` for every row of :func:`all_states`."""
    X = all_states(A.shape[0], A.dtype, A.device)
    return torch.softmax(energy(X, A), dim=0)


def sample_exact(A: Float[Tensor, "d d"], n: int, generator: torch.Generator | None = None
                 ) -> Float[Tensor, "n d"]:
    r"""``n`` i.i.d. exact samples of :math:`\mu`, by inverse-CDF over the enumerated states."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    p = probabilities(A)
    idx = rng.multinomial(p, n, replacement=True, generator=generator)
    return all_states(A.shape[0], A.dtype, A.device)[idx]


def state_index(x: Float[Tensor, "n d"]) -> Tensor:
    """Row of :func:`all_states` holding each state of ``x`` (entries must be ±1)."""
    d = x.shape[1]
    weights = 2 ** torch.arange(d - 1, -1, -1, device=x.device)
    return (((x > 0).long()) * weights).sum(1)


def log_density_t(A: Float[Tensor, "d d"], z: Float[Tensor, "batch d"], t: Float[Tensor, " batch"]
                  ) -> Float[Tensor, " batch"]:
    r"""Exact :math:`\log \mu_t(z)` of the noised data, a Gaussian mixture over all states.

    .. math::  \log\mu_t(z) = \log \sum_x \mu(x)\, \mathcal N(z; \lambda_t x, \sigma_t^2 I_d).
    """
    d = A.shape[0]
    X = all_states(d, A.dtype, A.device)
    log_mu = torch.log_softmax(energy(X, A), dim=0)
    lambda_t, sigma_t = ou_schedule(t)
    out = []
    size = max(1, _CHUNK_ENTRIES // X.shape[0])
    for i in range(0, z.shape[0], size):
        zi, li, si = z[i:i + size], lambda_t[i:i + size, None], sigma_t[i:i + size, None]
        sq = (zi**2).sum(1, keepdim=True) - 2 * li * (zi @ X.T) + li**2 * d  # ||z - lambda x||^2, (chunk, 2^d)
        log_gauss = -sq / (2 * si**2) - d * torch.log(si) - 0.5 * d * math.log(2 * math.pi)
        out.append(torch.logsumexp(log_mu + log_gauss, dim=1))
    return torch.cat(out)


def score_autograd(A: Float[Tensor, "d d"], z: Float[Tensor, "batch d"], t: Float[Tensor, " batch"]
                   ) -> Float[Tensor, "batch d"]:
    r""":math:`\nabla_z \log \mu_t(z)` by automatic differentiation of :func:`log_density_t`."""
    z = z.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(log_density_t(A, z, t).sum(), z)
    return grad


def exact_score(A: Float[Tensor, "d d"], z: Float[Tensor, "batch d"], t: Float[Tensor, " batch"]
                ) -> Float[Tensor, "batch d"]:
    r"""Exact score by Tweedie: :math:`s_t(z) = (\lambda_t m(h) - z)/\sigma_t^2`, :math:`h = \lambda_t z/\sigma_t^2`."""
    lambda_t, sigma_t = ou_schedule(t)
    m = posterior_mean(A, field(z, t))
    return (lambda_t[:, None] * m - z) / (sigma_t**2)[:, None]
