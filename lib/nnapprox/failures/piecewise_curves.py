r"""Ill-conditioned piecewise-linear curves and a convolution that undoes them.

Chapter "When gradient descent fails", section "Conditioning and architecture" (§4 of
{cite}`shalevshwartz2017failures`).

A piecewise-linear curve sampled at :math:`n` points with slope changes :math:`p_j` at the
grid points is :math:`f = W p` with the lower-triangular Toeplitz matrix

.. math::  W_{ij} = [\,i - j + 1\,]_+ ,\qquad W = T^2,\ T = \text{lower-triangular ones},

whose squared condition number :math:`(\sigma_1/\sigma_n)^2` grows like :math:`n^4`: since
:math:`W^{-1} = (I - S)^2` (:math:`S` the down-shift), :math:`\sigma_n = 1/\|(I - S)^2\| \ge 1/4`,
while :math:`\sigma_1 \ge \|W\mathbf 1\|/\sqrt n \ge n^2/\sqrt{20}`. Learning the *encoder* :math:`f \mapsto p`
with a fully connected linear map :math:`U` and gradient descent on
:math:`\tfrac12\mathbb{E}_{p\sim\mathcal N(0,I)}\|Uf - p\|^2 = \tfrac12\|UW - I\|_F^2`
converges at the rate :math:`1 - \sigma_n^2/\sigma_1^2`. The inverse :math:`W^{-1} = (I - S)^2`
(:math:`S` the down-shift) is a 3-tap convolution :math:`p_i = f_i - 2f_{i-1} + f_{i-2}`, so
a convolutional encoder with 3 weights can represent it, and whitening its 3-dimensional input
patches makes the problem perfectly conditioned.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def pwl_matrix(n: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, "n n"]:
    r""":math:`W_{ij} = [i - j + 1]_+` (curve values from slope changes)."""
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    i = torch.arange(n)
    return torch.clamp(i[:, None] - i[None, :] + 1, min=0).to(dtype)


def condition_squared(n: int) -> float:
    r""":math:`(\sigma_1/\sigma_n)^2` of :math:`W`, the condition number of the least-squares problem."""
    s = torch.linalg.svdvals(pwl_matrix(n))
    return float((s[0] / s[-1]) ** 2)


def shift_powers(n: int, taps: int = 3, dtype: torch.dtype = torch.float64) -> Float[Tensor, "taps n n"]:
    r""":math:`S^0, S^1, \dots, S^{\mathrm{taps}-1}`: a causal convolution is :math:`C(k) = \sum_t k_t S^t`."""
    S = torch.diag(torch.ones(n - 1, dtype=dtype), -1)
    out = [torch.eye(n, dtype=dtype)]
    for _ in range(taps - 1):
        out.append(S @ out[-1])
    return torch.stack(out)


def fc_encoder_gd(n: int, n_steps: int) -> Float[Tensor, " steps_plus_one"]:
    r"""Gradient descent :math:`U \leftarrow U - \eta (UW - I)W^\top`, :math:`\eta = 1/\sigma_1^2`, from :math:`U = 0`.

    Returns the relative error :math:`\|U_t W - I\|_F^2 / n` for :math:`t = 0, \dots, n_{\mathrm{steps}}`.
    """
    W = pwl_matrix(n)
    eta = 1.0 / float(torch.linalg.matrix_norm(W, ord=2)) ** 2
    U, eye = torch.zeros_like(W), torch.eye(n, dtype=W.dtype)
    errors = [1.0]
    for _ in range(n_steps):
        R = U @ W - eye
        U = U - eta * R @ W.T
        errors.append(float(((U @ W - eye) ** 2).sum()) / n)
    return torch.tensor(errors, dtype=torch.float64)


def fc_encoder_error_closed_form(n: int, steps: Tensor) -> Float[Tensor, " m"]:
    r"""The same curve in closed form: :math:`\frac1n\sum_i (1 - \sigma_i^2/\sigma_1^2)^{2t}` (reference for the tests)."""
    s2 = torch.linalg.svdvals(pwl_matrix(n)) ** 2
    return ((1 - s2 / s2[0])[None, :] ** (2 * steps.double()[:, None])).mean(1)


def fc_encoder_error_lower_bound(n: int, steps: Tensor) -> Float[Tensor, " m"]:
    r"""The smallest singular value's term alone, :math:`\frac1n(1 - \sigma_n^2/\sigma_1^2)^{2t}`.

    Every term of :func:`fc_encoder_error_closed_form` is non-negative, so the fully connected
    encoder's error after :math:`t` steps is at least this; reaching a relative error
    :math:`\varepsilon < 1/n` therefore takes at least
    :math:`\ln(n\varepsilon) / (2\ln(1 - \sigma_n^2/\sigma_1^2)) \approx \tfrac12(\sigma_1/\sigma_n)^2\ln(1/(n\varepsilon))`
    steps.
    """
    s2 = torch.linalg.svdvals(pwl_matrix(n)) ** 2
    return (1 - s2[-1] / s2[0]) ** (2 * steps.double()) / n


def conv_encoder_gd(n: int, n_steps: int, whiten: bool = True, eta: float = 0.5) -> Float[Tensor, " steps_plus_one"]:
    r"""Gradient descent on the 3 taps of :math:`C(k) = \sum_t k_t S^t`, loss :math:`\tfrac12\|C(k)W - I\|_F^2`.

    The loss is quadratic with Hessian :math:`M_{tt'} = \langle S^tW, S^{t'}W\rangle_F` (the
    second moment of the input patches). With ``whiten`` the patches are whitened, i.e. the
    step is :math:`k \leftarrow k - \eta M^{-1}\nabla`; without, :math:`\eta` is divided by
    :math:`\lambda_{\max}(M)`. Returns :math:`\|C(k_t)W - I\|_F^2 / n`, from :math:`k = 0`.
    """
    if not 0 < eta <= 1:
        raise ValueError(f"eta must be in (0, 1], got {eta}")
    W = pwl_matrix(n)
    A = shift_powers(n) @ W  # (3, n, n): the convolution's features
    eye = torch.eye(n, dtype=W.dtype)
    M = torch.einsum("aij,bij->ab", A, A)
    b = torch.einsum("aij,ij->a", A, eye)
    precondition = torch.linalg.inv(M) if whiten else torch.eye(3, dtype=W.dtype) / float(torch.linalg.eigvalsh(M)[-1])
    k = torch.zeros(3, dtype=W.dtype)
    errors = [1.0]
    for _ in range(n_steps):
        k = k - eta * precondition @ (M @ k - b)
        errors.append(float(((torch.einsum("a,aij->ij", k, A) - eye) ** 2).sum()) / n)
    return torch.tensor(errors, dtype=torch.float64)


def steps_to_reach(errors: Float[Tensor, " steps"], target: float) -> int | None:
    """First step at which ``errors`` is at most ``target``; ``None`` if never within the run."""
    hit = (errors <= target).nonzero()
    return int(hit[0]) if len(hit) else None
