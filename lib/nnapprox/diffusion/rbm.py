r"""A restricted Boltzmann machine as data: its denoiser is the mean of a bipartite Ising model.

Chapter "Diffusion models as variational inference", section 3, subsection "A second graphical
model: the restricted Boltzmann machine" ({cite}`mei2023deep` list RBMs among their examples;
TAP for RBMs: {cite}`tramel2017deterministic`).

Visible spins :math:`x \in \{-1,1\}^d` and hidden spins :math:`s \in \{-1,1\}^k` with

.. math::  \mu(x, s) \propto e^{x^\top W s}, \qquad
           \mu(x) \propto \sum_s e^{x^\top W s} \propto \prod_{a=1}^k \cosh\big((W^\top x)_a\big).

The joint law is the Ising model on :math:`d + k` spins with the bipartite couplings
:math:`A_W = \begin{pmatrix} 0 & W \\ W^\top & 0 \end{pmatrix}`, and since :math:`\|x\|^2 = d`
the posterior of :math:`(x, s)` given :math:`z_t = z` is that Ising model with the field
:math:`(h, 0)`, :math:`h = \lambda_t z/\sigma_t^2`: the exact posterior mean, mean field and TAP of
:mod:`.enumeration` and :mod:`.mean_field` apply to :math:`(A_W, (h, 0))` unchanged. Eliminating the
hidden means gives the mean-field iteration on the visible means alone,

.. math::  m^\ell = T(m^{\ell-1}) = \tanh\big(W \tanh(W^\top m^{\ell-1}) + h\big), \qquad m^0 = 0,

a contraction with factor :math:`\|W\|_{\mathrm{op}}^2` when :math:`\|W\|_{\mathrm{op}} < 1`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox import rng

from .enumeration import D_MAX, _CHUNK_ENTRIES, all_states, sample_exact


def _check_field(W: Tensor, h: Tensor) -> None:
    if W.ndim != 2:
        raise ValueError(f"W must be a (d, k) matrix, got shape {tuple(W.shape)}")
    if h.ndim != 2 or h.shape[1] != W.shape[0]:
        raise ValueError(
            f"h must have shape (batch, d) with d = W.shape[0] = {W.shape[0]}, got {tuple(h.shape)}"
        )


def rbm_coupling(
    d: int, k: int, beta: float, generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> Float[Tensor, "d k"]:
    r"""Random RBM weights :math:`W_{ia} \sim \mathcal N(0, \beta^2/d)`, i.i.d.

    :math:`\|W\|_{\mathrm{op}} \to \beta(1 + \sqrt{k/d})` as :math:`d \to \infty` at fixed
    :math:`k/d` (the edge of the Marchenko–Pastur law).
    """
    if d < 1 or k < 1:
        raise ValueError(f"need d >= 1 visible and k >= 1 hidden units, got d={d}, k={k}")
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    return beta * rng.randn(d, k, generator=generator, dtype=dtype) / d**0.5


def joint_coupling(W: Float[Tensor, "d k"]) -> Float[Tensor, "dk dk"]:
    r"""The bipartite couplings :math:`A_W = [[0, W], [W^\top, 0]]` of the law of :math:`(x, s)`."""
    if W.ndim != 2:
        raise ValueError(f"W must be a (d, k) matrix, got shape {tuple(W.shape)}")
    d, k = W.shape
    A = W.new_zeros(d + k, d + k)
    A[:d, d:] = W
    A[d:, :d] = W.T
    return A


def joint_field(h: Float[Tensor, "batch d"], k: int) -> Float[Tensor, "batch dk"]:
    r"""The field :math:`(h, 0)` of the joint posterior: the noise only sees the visible spins."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return torch.cat([h, h.new_zeros(h.shape[0], k)], dim=1)


def rbm_log_weight(x: Float[Tensor, "*batch d"], W: Float[Tensor, "d k"]
                   ) -> Float[Tensor, "*batch"]:
    r""":math:`\sum_a \log\cosh((W^\top x)_a)`, :math:`\log\mu(x)` up to a constant (stable)."""
    u = (x @ W).abs()  # (*batch, k)
    return (u + torch.log1p(torch.exp(-2 * u)) - torch.log(u.new_tensor(2.0))).sum(-1)


def rbm_posterior_mean(W: Float[Tensor, "d k"], h: Float[Tensor, "batch d"]
                       ) -> Float[Tensor, "batch d"]:
    r"""Exact :math:`\mathbb E[x]` under :math:`\mu_h(x) \propto \mu(x) e^{\langle h, x\rangle}`,
    enumerating the :math:`2^d` visible states only (the hidden spins summed in closed form)."""
    _check_field(W, h)
    X = all_states(W.shape[0], W.dtype, W.device)  # (2^d, d)
    log_w = rbm_log_weight(X, W)  # (2^d,)
    size = max(1, _CHUNK_ENTRIES // X.shape[0])
    out = [torch.softmax(log_w + h[i:i + size] @ X.T, dim=1) @ X
           for i in range(0, h.shape[0], size)]
    return torch.cat(out)


def rbm_posterior_mean_reference(W: Float[Tensor, "d k"], h: Float[Tensor, " d"]
                                 ) -> Float[Tensor, " d"]:
    r"""Readable reference: a Python loop over all :math:`2^{d+k}` states :math:`(x, s)`."""
    d, k = W.shape
    if d + k > 16:
        raise ValueError(f"the reference loop is for d + k <= 16, got d + k = {d + k}")

    def spins(code: int, n: int) -> Tensor:
        return torch.tensor([1.0 if (code >> (n - 1 - i)) & 1 else -1.0 for i in range(n)],
                            dtype=W.dtype)

    numerator, Z = torch.zeros(d, dtype=W.dtype), torch.zeros((), dtype=W.dtype)
    for a in range(2**d):
        x = spins(a, d)
        for b in range(2**k):
            w = torch.exp(x @ W @ spins(b, k) + h @ x)
            numerator += w * x
            Z += w
    return numerator / Z


def rbm_sample_exact(W: Float[Tensor, "d k"], n: int, generator: torch.Generator | None = None
                     ) -> Float[Tensor, "n d"]:
    r"""``n`` exact samples of :math:`\mu(x)`: joint samples of :math:`(x, s)`, keep :math:`x`."""
    if W.ndim != 2 or W.shape[0] + W.shape[1] > D_MAX:
        raise ValueError(
            f"exact sampling enumerates the d + k visible and hidden spins; needs a (d, k) W with"
            f" d + k <= {D_MAX}, got shape {tuple(W.shape)}"
        )
    return sample_exact(joint_coupling(W), n, generator)[:, :W.shape[0]]


def rbm_mf_step(m: Float[Tensor, "batch d"], W: Float[Tensor, "d k"], h: Float[Tensor, "batch d"]
                ) -> Float[Tensor, "batch d"]:
    r"""One mean-field update :math:`m \mapsto \tanh(W \tanh(W^\top m) + h)`."""
    n = torch.tanh(m @ W)  # hidden means, (batch, k)
    return torch.tanh(n @ W.T + h)


def rbm_mf_trajectory(W: Float[Tensor, "d k"], h: Float[Tensor, "batch d"], n_iter: int
                      ) -> Float[Tensor, "iters_plus_one batch d"]:
    r"""All iterates :math:`m^0 = 0, m^1, \dots, m^L` of :func:`rbm_mf_step`."""
    _check_field(W, h)
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    ms = [torch.zeros_like(h)]
    for _ in range(n_iter):
        ms.append(rbm_mf_step(ms[-1], W, h))
    return torch.stack(ms)


def rbm_mean_field(W: Float[Tensor, "d k"], h: Float[Tensor, "batch d"], n_iter: int = 200
                   ) -> Float[Tensor, "batch d"]:
    r"""The visible means after ``n_iter`` steps of :func:`rbm_mf_step` from :math:`m^0 = 0`."""
    _check_field(W, h)
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    m = torch.zeros_like(h)
    for _ in range(n_iter):
        m = rbm_mf_step(m, W, h)
    return m
