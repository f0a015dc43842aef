r"""One ISTA (proximal gradient) step for the Lasso: a *nonlinear* stable step, and the
two-layer ReLU network that computes it exactly.

Introduction (``book/intro.md``), section "A nonlinear stable step", proposition
``prop-intro-ista``. For the *strongly convex* Lasso objective

.. math::  F(z) = \tfrac12 z^\top A z - b^\top z + \lambda \|z\|_1, \qquad A \succ 0
           \text{ symmetric},

one step of ISTA, the proximal gradient method (``beck2009fast``), is

.. math::  U(z) = S_{\eta\lambda}\bigl(z - \eta(Az - b)\bigr), \qquad
           S_\tau(u) = \operatorname{sign}(u)\max(|u| - \tau, 0).

The soft-threshold :math:`S_\tau` is the proximal map of :math:`\tau\|\cdot\|_1`, hence
1-Lipschitz (firmly non-expansive), so :math:`U` is Lipschitz with the factor
:math:`\rho = \max_i |1 - \eta\lambda_i(A)|` of the gradient step inside it. For
:math:`A \succ 0` and :math:`0 < \eta < 2/\lambda_{\max}(A)`, :math:`\rho < 1`: ``U`` is a
contraction, the error-composition theorem gives :math:`e_L \le \varepsilon/(1-\rho)` as for
gradient descent, and the unique minimiser of :math:`F` is the unique fixed point of ``U``,
reached at the linear rate :math:`\rho^L` (a consequence of strong convexity). For a singular
``A`` (the usual Lasso :math:`A = X^\top X/n` with more features than samples) :math:`\rho = 1`:
ISTA is then only non-expansive, its objective gap decays like :math:`O(1/k)`
(``beck2009fast``), and errors compose as :math:`e_L \le L\varepsilon`. The functions here
refuse a singular or non-symmetric ``A``.

Coordinatewise :math:`S_\tau(u) = \mathrm{relu}(u - \tau) - \mathrm{relu}(-u - \tau)`, so
:math:`U` is *exactly* a ReLU network with one hidden layer of :math:`2d` units:
:math:`U(z) = W_2\,\mathrm{relu}(W_1 z + c_1)` with
:math:`W_1 = \begin{pmatrix} M \\ -M \end{pmatrix}`, :math:`c_1 = \begin{pmatrix} \eta b - \tau \\ -\eta b - \tau\end{pmatrix}`,
:math:`W_2 = (I_d \;\; -I_d)`, :math:`M = I - \eta A`, :math:`\tau = \eta\lambda`.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from .composition import Step, check_quadratic


def soft_threshold(u: Float[Tensor, "*shape"], tau: float) -> Float[Tensor, "*shape"]:
    r""":math:`S_\tau(u) = \operatorname{sign}(u)\max(|u| - \tau, 0)`, elementwise."""
    if tau < 0:
        raise ValueError(f"the threshold tau must be >= 0, got {tau}")
    return torch.sign(u) * torch.clamp(u.abs() - tau, min=0.0)


def _check(A: Tensor, b: Tensor, lam: float, eta: float) -> Tensor:
    """Validate a strongly convex Lasso and a step size; return the eigenvalues of ``A``."""
    if not lam >= 0 or not eta > 0 or not math.isfinite(lam) or not math.isfinite(eta):
        raise ValueError(f"need lam >= 0 and eta > 0 (finite), got lam={lam}, eta={eta}")
    return check_quadratic(A, b)  # A symmetric positive definite (d, d), b (d,)


def ista_step(A: Float[Tensor, "d d"], b: Float[Tensor, " d"], lam: float, eta: float) -> tuple[Step, float]:
    r"""One ISTA step :math:`U(z) = S_{\eta\lambda}(z - \eta(Az - b))` and its contraction factor.

    Returns ``(step, rho)`` with :math:`\rho = \max_i |1 - \eta\lambda_i(A)|`, which is
    :math:`< 1` for :math:`0 < \eta < 2/\lambda_{\max}`.
    """
    rho = float((1.0 - eta * _check(A, b, lam, eta)).abs().max())

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return soft_threshold(z - eta * (z @ A.T - b), eta * lam)

    return step, rho


def ista_relu_weights(
    A: Float[Tensor, "d d"], b: Float[Tensor, " d"], lam: float, eta: float
) -> dict[str, Tensor]:
    r"""Weights ``W1 (2d, d)``, ``c1 (2d,)``, ``W2 (d, 2d)`` of the exact ReLU network of one step."""
    _check(A, b, lam, eta)
    d = A.shape[0]
    M = torch.eye(d, dtype=A.dtype, device=A.device) - eta * A
    tau = eta * lam
    eye = torch.eye(d, dtype=A.dtype, device=A.device)
    return {
        "W1": torch.cat([M, -M]),  # (2d, d)
        "c1": torch.cat([eta * b - tau, -eta * b - tau]),  # (2d,)
        "W2": torch.cat([eye, -eye], dim=1),  # (d, 2d)
    }


def relu_network_step(weights: dict[str, Tensor]) -> Step:
    r"""The map :math:`z \mapsto W_2\,\mathrm{relu}(W_1 z + c_1)` of :func:`ista_relu_weights`."""

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        hidden = torch.relu(z @ weights["W1"].T + weights["c1"])  # (batch, 2d)
        return hidden @ weights["W2"].T

    return step


def lasso_kkt_residual(
    z: Float[Tensor, "batch d"], A: Float[Tensor, "d d"], b: Float[Tensor, " d"], lam: float
) -> Float[Tensor, " batch"]:
    r"""Distance of :math:`-(Az - b)` from :math:`\lambda\,\partial\|z\|_1` (0 exactly at the minimiser).

    Per coordinate: :math:`|g_i + \lambda\operatorname{sign} z_i|` where :math:`z_i \ne 0`, and
    :math:`\max(|g_i| - \lambda, 0)` where :math:`z_i = 0`, with :math:`g = Az - b`; the
    maximum over coordinates.
    """
    g = z @ A.T - b
    on = (g + lam * torch.sign(z)).abs()
    off = torch.clamp(g.abs() - lam, min=0.0)
    return torch.where(z != 0, on, off).amax(dim=1)


def strict_complementarity_margin(
    z: Float[Tensor, "batch d"], A: Float[Tensor, "d d"], b: Float[Tensor, " d"], lam: float
) -> Float[Tensor, " batch"]:
    r""":math:`\min_{i: z_i = 0} (\lambda - |(Az - b)_i|)`: how strictly the zero coordinates hold.

    At the Lasso minimiser the optimality condition asks :math:`|(Az^\ast - b)_i| \le \lambda`
    where :math:`z^\ast_i = 0`; *strict* complementarity is a positive margin :math:`m` there.
    With it, one ISTA step maps every point within distance :math:`\eta m/\|I - \eta A\|` of
    :math:`z^\ast` to a point that is zero wherever :math:`z^\ast` is (introduction, section "A
    nonlinear stable step"). Evaluated at ``z`` (a row per point); ``+inf`` for a row without
    zeros.
    """
    g = z @ A.T - b  # (batch, d)
    gap = torch.where(z == 0, lam - g.abs(), torch.full_like(g, float("inf")))
    return gap.amin(dim=1)
