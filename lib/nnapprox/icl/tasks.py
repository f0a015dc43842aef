r"""In-context learning tasks: a prompt is a small data set drawn from a random task.

Chapter "In-context learning as gradient descent", section "The phenomenon"
(seed lecture 000; ``garg2022what``, ``bai2023transformers``).

A task is a random function :math:`f`; a prompt holds :math:`N` examples
:math:`(x_i, y_i = f(x_i) + \varepsilon_i)` and a query :math:`x_{N+1}`. Every sampler draws
``batch`` independent tasks at once and returns tensors of shape ``(batch, N, d)`` and
``(batch, N)`` (the last example, index ``N - 1``, can serve as the query).

=========================  ===============================================================
sampler                    task
=========================  ===============================================================
:func:`linear_tasks`       :math:`y = w^\top x + \sigma\varepsilon`, :math:`w\sim\mathcal N(0, I_d/d\cdot s)`
:func:`mixed_noise_tasks`  as above, the noise level :math:`\sigma` drawn per task from a list
:func:`sparse_linear_tasks` :math:`w` with ``s`` non-zero Gaussian coordinates
:func:`logistic_tasks`     :math:`y\in\{0,1\}`, :math:`P(y=1) = \mathrm{sigmoid}(w^\top x)`
:func:`sign_tasks`         :math:`y = \mathrm{sign}(w^\top x) \in \{-1, 1\}` (linear classification)
:func:`regression_or_classification_tasks`  per task, :func:`linear_tasks` or :func:`sign_tasks` at random
:func:`relu_teacher_tasks` :math:`y = a^\top \mathrm{ReLU}(V x)`, a random 2-layer network
=========================  ===============================================================

Out-of-distribution prompts (Garg et al.'s probes): :func:`linear_tasks` takes ``x_scale``
(inputs :math:`c\,x`) and ``x_sqrt_cov`` (inputs :math:`A x`, covariance :math:`A A^\top`, e.g.
:func:`skewed_sqrt_cov`).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

_X_DISTRIBUTIONS = ("gaussian", "uniform")


def _check(batch: int, N: int, d: int) -> None:
    for name, value in (("batch", batch), ("N", N), ("d", d)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def sample_x(
    batch: int, N: int, d: int, generator: torch.Generator, *, x_dist: str = "gaussian",
    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> Float[Tensor, "batch N d"]:
    r"""Inputs :math:`x_i \sim \mathcal N(0, I_d)` (``"gaussian"``) or :math:`U(-1, 1)^d` (``"uniform"``)."""
    _check(batch, N, d)
    if x_dist not in _X_DISTRIBUTIONS:
        raise ValueError(f"unknown x_dist {x_dist!r}: valid values are {_X_DISTRIBUTIONS}")
    if x_dist == "gaussian":
        return rng.randn(batch, N, d, generator=generator, dtype=dtype, device=device)
    return 2 * rng.rand(batch, N, d, generator=generator, dtype=dtype, device=device) - 1


def skewed_sqrt_cov(d: int, generator: torch.Generator, *, decay: float = 2.0,
                    dtype: torch.dtype = torch.float32) -> Float[Tensor, "d d"]:
    r"""A square root :math:`A = U \operatorname{diag}(\sqrt{\lambda})` of a skewed covariance :math:`\Sigma = A A^\top`.

    Eigenvalues :math:`\lambda_i \propto i^{-\text{decay}}`, rescaled so that
    :math:`\operatorname{tr}\Sigma = d` (the same mean :math:`\mathbb E\|x\|^2` as
    :math:`\mathcal N(0, I_d)`), and a uniformly random orthonormal eigenbasis :math:`U` (QR of a
    Gaussian matrix with the signs fixed).
    """
    _check(1, 1, d)
    if decay < 0:
        raise ValueError(f"decay must be >= 0, got {decay}")
    lam = torch.arange(1, d + 1, dtype=torch.float64).pow(-decay)
    lam = lam * d / lam.sum()
    Q, R = torch.linalg.qr(rng.randn(d, d, generator=generator, dtype=torch.float64))
    U = Q * torch.sign(torch.diagonal(R))
    return (U * lam.sqrt()).to(dtype)


def linear_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, sigma: float = 0.0,
    w_scale: float = 1.0, x_dist: str = "gaussian", d_eff: int | None = None, x_scale: float = 1.0,
    x_sqrt_cov: Float[Tensor, "d d"] | None = None, dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"]]:
    r"""Noisy linear regression :math:`y_i = w^\top x_i + \sigma \varepsilon_i`, :math:`w \sim \mathcal N(0, w_{\rm scale}^2 I_d)`.

    Garg et al. use ``w_scale=1`` and no noise; Bai et al. use ``w_scale = 1/sqrt(d)``.
    ``d_eff < d`` zeroes the input coordinates beyond the first ``d_eff`` (a ``d_eff``-dimensional
    problem in the same ``d``-dimensional tokens: Garg et al.'s curriculum, see :class:`Curriculum`).
    ``x_scale`` = :math:`c` and ``x_sqrt_cov`` = :math:`A` shift the inputs to
    :math:`x = c A z` (:math:`z` drawn as ``x_dist``): the distribution-shift probes.
    Returns ``(X, y, w)``.
    """
    if sigma < 0 or w_scale <= 0 or x_scale <= 0:
        raise ValueError(f"need sigma >= 0, w_scale > 0 and x_scale > 0, got sigma={sigma}, w_scale={w_scale}, "
                         f"x_scale={x_scale}")
    if d_eff is not None and not 1 <= d_eff <= d:
        raise ValueError(f"d_eff must be in 1..d={d}, got {d_eff}")
    if x_sqrt_cov is not None and tuple(x_sqrt_cov.shape) != (d, d):
        raise ValueError(f"x_sqrt_cov must have shape ({d}, {d}), got {tuple(x_sqrt_cov.shape)}")
    X = sample_x(batch, N, d, generator, x_dist=x_dist, dtype=dtype, device=device)
    if d_eff is not None and d_eff < d:
        X[..., d_eff:] = 0
    if x_sqrt_cov is not None:
        X = X @ x_sqrt_cov.to(device=X.device, dtype=dtype).T
    if x_scale != 1.0:
        X = x_scale * X
    w = w_scale * rng.randn(batch, d, generator=generator, dtype=dtype, device=device)
    noise = rng.randn(batch, N, generator=generator, dtype=dtype, device=device)
    y = torch.einsum("bnd,bd->bn", X, w) + sigma * noise
    return X, y, w


def mixed_noise_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, sigmas: Sequence[float],
    w_scale: float = 1.0, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"], Float[Tensor, " batch"]]:
    r"""Noisy linear regression whose noise level is drawn uniformly from ``sigmas`` per task.

    The setting of Bai et al.'s algorithm-selection experiment. Returns ``(X, y, w, sigma)``.
    """
    if len(sigmas) == 0 or min(sigmas) < 0:
        raise ValueError(f"sigmas must be a non-empty list of noise levels >= 0, got {sigmas!r}")
    X, y0, w = linear_tasks(batch, N, d, generator, w_scale=w_scale, dtype=dtype, device=device)
    levels = torch.tensor(list(sigmas), dtype=dtype, device=device)
    pick = rng.randint(len(sigmas), (batch,), generator=generator, device=device)
    sigma = levels[pick]
    y = y0 + sigma[:, None] * rng.randn(batch, N, generator=generator, dtype=dtype, device=device)
    return X, y, w, sigma


def sparse_linear_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, s: int, sigma: float = 0.0,
    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"]]:
    r"""Sparse linear regression: :math:`w` has ``s`` non-zero :math:`\mathcal N(0,1)` coordinates at random places."""
    if not 1 <= s <= d:
        raise ValueError(f"sparsity s must be in 1..d={d}, got {s}")
    X, _, w = linear_tasks(batch, N, d, generator, dtype=dtype, device=device)
    keep = rng.rand(batch, d, generator=generator, device=device).argsort(dim=1) < s
    w = w * keep.to(dtype)
    y = torch.einsum("bnd,bd->bn", X, w) + sigma * rng.randn(batch, N, generator=generator, dtype=dtype, device=device)
    return X, y, w


def logistic_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, w_scale: float = 1.0,
    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"]]:
    r"""Binary labels :math:`y_i \in \{0, 1\}` with :math:`P(y_i = 1 \mid x_i) = \mathrm{sigmoid}(w^\top x_i)`."""
    X, y0, w = linear_tasks(batch, N, d, generator, w_scale=w_scale, dtype=dtype, device=device)
    p = torch.sigmoid(y0)  # y0 = w^T x_i (no noise)
    y = (rng.rand(batch, N, generator=generator, dtype=dtype, device=device) < p).to(dtype)
    return X, y, w


def sign_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, w_scale: float = 1.0,
    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"]]:
    r"""Linear classification: labels :math:`y_i = \mathrm{sign}(w^\top x_i) \in \{-1, 1\}` (Bai et al.'s classification task)."""
    X, y0, w = linear_tasks(batch, N, d, generator, w_scale=w_scale, dtype=dtype, device=device)
    return X, _sign(y0), w


def _sign(z: Tensor) -> Tensor:
    """Labels in {-1, 1}: sign with sign(0) = 1."""
    return torch.where(z >= 0, 1.0, -1.0).to(z.dtype)


def regression_or_classification_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, sigma: float = 0.1, w_scale: float = 1.0,
    p_classification: float = 0.5, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"], Float[Tensor, " batch"]]:
    r"""Per task, noisy linear regression (:func:`linear_tasks`, noise ``sigma``) or, with probability ``p_classification``, :func:`sign_tasks`.

    The pretraining mixture of Bai et al.'s "pre-ICL testing" experiment: the model has to
    tell from the labels which problem it is given. Returns ``(X, y, w, is_classification)``
    (the last a 0/1 float per task).
    """
    if not 0 <= p_classification <= 1:
        raise ValueError(f"p_classification must be in [0, 1], got {p_classification}")
    X, y, w = linear_tasks(batch, N, d, generator, sigma=sigma, w_scale=w_scale, dtype=dtype, device=device)
    is_cls = (rng.rand(batch, generator=generator, device=device) < p_classification).to(dtype)
    y = torch.where(is_cls[:, None] > 0, _sign(torch.einsum("bnd,bd->bn", X, w)), y)
    return X, y, w, is_cls


def relu_net(X: Float[Tensor, "batch n d"], a: Float[Tensor, "batch K"], V: Float[Tensor, "batch K d"]) -> Float[Tensor, "batch n"]:
    r"""The two-layer network :math:`f(w, x) = \sum_k a_k \sigma(v_k^\top x)` on every example, one network per prompt."""
    return torch.einsum("bnk,bk->bn", torch.relu(torch.einsum("bkd,bnd->bnk", V, X)), a)


def relu_teacher_tasks(
    batch: int, N: int, d: int, generator: torch.Generator, *, width: int = 8,
    dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch width d"], Float[Tensor, "batch width"]]:
    r"""A random 2-layer ReLU teacher :math:`y = a^\top \mathrm{ReLU}(V x)`, :math:`V_{kj}\sim\mathcal N(0, 1/d)`, :math:`a_k\sim\mathcal N(0, 2/\text{width})`.

    The scaling keeps :math:`\mathbb E\, y^2 = 1`. Returns ``(X, y, V, a)``.
    """
    if width < 1:
        raise ValueError(f"width must be >= 1, got {width}")
    X = sample_x(batch, N, d, generator, dtype=dtype, device=device)
    V = rng.randn(batch, width, d, generator=generator, dtype=dtype, device=device) / math.sqrt(d)
    a = rng.randn(batch, width, generator=generator, dtype=dtype, device=device) * math.sqrt(2.0 / width)
    return X, relu_net(X, a, V), V, a


def relu_teacher_affine_part(
    V: Float[Tensor, "batch K d"], a: Float[Tensor, "batch K"]
) -> tuple[Float[Tensor, " batch"], Float[Tensor, "batch d"]]:
    r"""Best affine approximation :math:`c + b^\top x` of each teacher :math:`a^\top\sigma(Vx)` in :math:`L^2(\mathcal N(0, I_d))`.

    For Gaussian :math:`x` the :math:`L^2` projection onto :math:`\{c + b^\top x\}` is
    :math:`c = \mathbb E\,y`, :math:`b = \mathbb E\,[y x]` (:math:`\operatorname{Cov} x = I`). With
    :math:`z = v^\top x \sim \mathcal N(0, \|v\|^2)`, :math:`\mathbb E\,\sigma(z) = \|v\|/\sqrt{2\pi}` and, by
    Stein's lemma, :math:`\mathbb E\,[\sigma(v^\top x)\,x] = \mathbb E[\sigma'(z)]\,v = v/2`, so

    .. math:: c = \sum_k a_k \|v_k\| / \sqrt{2\pi}, \qquad b = \tfrac12 \sum_k a_k v_k .

    Returns ``(c, b)``. Under :func:`relu_teacher_tasks`' prior, :math:`\mathbb E\,c^2 = 1/\pi` and
    :math:`\mathbb E\,\|b\|^2 = 1/2` of :math:`\mathbb E\,y^2 = 1`.
    """
    if V.dim() != 3 or a.shape != V.shape[:2]:
        raise ValueError(f"need V of shape (batch, K, d) and a of shape (batch, K); got {tuple(V.shape)}, "
                         f"{tuple(a.shape)}")
    c = (a * V.norm(dim=-1)).sum(-1) / math.sqrt(2 * math.pi)
    b = 0.5 * torch.einsum("bk,bkd->bd", a, V)
    return c, b


def task_pool(M: int, d: int, generator: torch.Generator, *, w_scale: float = 1.0,
              dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Float[Tensor, "M d"]:
    r"""A finite pool of :math:`M` tasks :math:`w_m \sim \mathcal N(0, w_{\rm scale}^2 I_d)` (``raventos2023pretraining``)."""
    if M < 1:
        raise ValueError(f"the pool needs M >= 1 tasks, got {M}")
    return w_scale * rng.randn(M, d, generator=generator, dtype=dtype, device=device)


def pool_tasks(
    batch: int, N: int, pool: Float[Tensor, "M d"], generator: torch.Generator, *, sigma: float = 0.0,
    x_dist: str = "gaussian", device: torch.device | str | None = None,
) -> tuple[Float[Tensor, "batch N d"], Float[Tensor, "batch N"], Float[Tensor, "batch d"]]:
    r"""Linear-regression prompts whose task is drawn uniformly from ``pool``: :math:`y = w_m^\top x + \sigma\varepsilon`."""
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    device = pool.device if device is None else device
    M, d = pool.shape
    X = sample_x(batch, N, d, generator, x_dist=x_dist, dtype=pool.dtype, device=device)
    w = pool.to(device)[rng.randint(M, (batch,), generator=generator, device=device)]
    y = torch.einsum("bnd,bd->bn", X, w) + sigma * rng.randn(batch, N, generator=generator, dtype=pool.dtype, device=device)
    return X, y, w
