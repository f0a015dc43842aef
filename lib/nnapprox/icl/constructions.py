r"""Hand-built ReLU transformers that run gradient descent in context.

Chapter "In-context learning as gradient descent", part I, section "ReLU attention runs
gradient descent for ridge, Lasso and logistic regression" (seed lecture 000;
``bai2023transformers``, Theorems on in-context ridge, Lasso and logistic regression).

Token layout (``D = 2d + 4``, :func:`layout`):
:math:`h_i = [x_i;\ y_i;\ \hat y_i;\ w;\ 1;\ t_i]`, where :math:`w` is the current iterate
(the same in every token), :math:`t_i = 1` on the context and 0 on the query.

Every layer below is built from two tricks.

* **Linear attention from two ReLU heads**: :math:`\sigma(a) - \sigma(-a) = a`.
* **Masking the query** with a large constant :math:`B`: adding :math:`B(t_j - 1)` to a
  score switches off token :math:`j = N+1` whenever the score is smaller than :math:`B`.

Then one layer computes :math:`\frac1N \sum_{j\le N} (w^\top x_j - y_j)\, x_j`, the gradient
of :math:`\frac1{2N}\|Xw - y\|^2`, and writes :math:`-\eta` times it into the :math:`w` slot:

* ridge, :math:`+\frac\lambda2\|w\|^2`: a third head with score :math:`t_j` and value
  :math:`-\eta\lambda w` (3 heads, exactly one GD step);
* Lasso, :math:`+\lambda\|w\|_1`: the MLP applies soft thresholding
  :math:`S_{\eta\lambda}(w) = \sigma(w - \eta\lambda) - \sigma(-w - \eta\lambda)` (ISTA, exact);
* logistic loss: the derivative :math:`\mathrm{sigmoid}(t) - y` is replaced by the piecewise
  linear interpolant of the sigmoid on :math:`M` knots, a sum of :math:`M` ReLUs, one head
  each (:func:`sigmoid_interpolant`); the error is
  :math:`\le h^2 \max|\mathrm{sigmoid}''| / 8` on :math:`[-R, R]`, :math:`h = 2R/(M-1)`.

A final :func:`readout_layer` writes :math:`\hat y_i = w^\top x_i` (two heads).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_attention import Layer

SIGMOID_D2_MAX = 1.0 / (6.0 * math.sqrt(3.0))  # max |sigmoid''|, at t = log(2 ± sqrt 3)


def layout(d: int) -> dict[str, int | slice]:
    """Positions of the token's fields for the constructions: ``x, y, y_hat, w, one, t`` and ``D``."""
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    return {"x": slice(0, d), "y": d, "y_hat": d + 1, "w": slice(d + 2, 2 * d + 2), "one": 2 * d + 2, "t": 2 * d + 3, "D": 2 * d + 4}


def read_w(H: Float[Tensor, "batch T D"], d: int) -> Float[Tensor, "batch d"]:
    """The iterate :math:`w` stored in the query token."""
    return H[:, -1, layout(d)["w"]]


def _zeros(M: int, D: int, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    return torch.zeros(M, D, D, dtype=dtype), torch.zeros(M, D, D, dtype=dtype), torch.zeros(M, D, D, dtype=dtype)


def _residual_heads(d: int, eta: float, B: float, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    r"""Two heads adding :math:`-\frac\eta N\sum_{j \le N} (w^\top x_j - y_j) x_j` to the :math:`w` slot."""
    s = layout(d)
    Q, K, V = _zeros(2, s["D"], dtype)
    x, w = range(d), range(d + 2, 2 * d + 2)
    for m, sign in enumerate((1.0, -1.0)):
        for a in range(d):
            Q[m, a, w[a]] = sign          # <Q h_i, K h_j> = sign (w^T x_j - y_j) + B (t_j - 1)
            K[m, a, x[a]] = 1.0
            V[m, w[a], x[a]] = -sign * eta
        Q[m, d, s["one"]] = sign
        K[m, d, s["y"]] = -1.0
        Q[m, d + 1, s["one"]] = B
        K[m, d + 1, s["t"]] = 1.0
        K[m, d + 1, s["one"]] = -1.0
    return Q, K, V


def ridge_gd_layers(d: int, eta: float, lam: float, n_steps: int, B: float = 1e4,
                    dtype: torch.dtype = torch.float64) -> list[Layer]:
    r""":math:`L` = ``n_steps`` attention layers, 3 heads each: :math:`w \leftarrow w - \eta(\frac1N X^\top(Xw - y) + \lambda w)`."""
    if eta <= 0 or lam < 0 or n_steps < 0 or B <= 0:
        raise ValueError(f"need eta > 0, lam >= 0, n_steps >= 0, B > 0; got {eta}, {lam}, {n_steps}, {B}")
    s = layout(d)
    Q2, K2, V2 = _residual_heads(d, eta, B, dtype)
    Q1, K1, V1 = _zeros(1, s["D"], dtype)
    Q1[0, 0, s["one"]] = 1.0  # score t_j: the average over the context of -eta*lam*w is -eta*lam*w
    K1[0, 0, s["t"]] = 1.0
    for a in range(d):
        V1[0, d + 2 + a, d + 2 + a] = -eta * lam
    layer = {"Q": torch.cat([Q2, Q1]), "K": torch.cat([K2, K1]), "V": torch.cat([V2, V1])}
    return [dict(layer) for _ in range(n_steps)]


def lasso_ista_layers(d: int, eta: float, lam: float, n_steps: int, B: float = 1e4,
                      dtype: torch.dtype = torch.float64) -> list[Layer]:
    r""":math:`L` layers of ISTA: the gradient step by attention (2 heads), then :math:`S_{\eta\lambda}` by the MLP.

    The MLP has :math:`2d + 1` units: :math:`S_\tau(w) - w = \sigma(w - \tau) - \sigma(w + \tau) + \tau`
    for :math:`\tau \ge 0`, two units per coordinate and one shared unit :math:`\sigma(1) = 1` on
    the constant slot carrying :math:`\tau`.
    """
    if eta <= 0 or lam < 0 or n_steps < 0:
        raise ValueError(f"need eta > 0, lam >= 0, n_steps >= 0; got {eta}, {lam}, {n_steps}")
    s = layout(d)
    Q, K, V = _residual_heads(d, eta, B, dtype)
    tau = eta * lam
    W_1 = torch.zeros(2 * d + 1, s["D"], dtype=dtype)
    W_2 = torch.zeros(s["D"], 2 * d + 1, dtype=dtype)
    W_1[2 * d, s["one"]] = 1.0  # the constant unit sigma(1) = 1
    for a in range(d):
        wa = d + 2 + a  # S_tau(w) - w = relu(w - tau) - relu(w + tau) + tau
        for u, (shift, out) in enumerate(((-tau, 1.0), (tau, -1.0))):
            W_1[2 * a + u, wa] = 1.0
            W_1[2 * a + u, s["one"]] = shift
            W_2[wa, 2 * a + u] = out
        W_2[wa, 2 * d] = tau
    layer = {"Q": Q, "K": K, "V": V, "W_1": W_1, "W_2": W_2}
    return [dict(layer) for _ in range(n_steps)]


def sigmoid_interpolant(M: int, R: float, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, float]:
    r"""Piecewise-linear interpolant of the sigmoid on :math:`M` uniform knots of :math:`[-R, R]`, constant outside.

    Returns ``(knots, c, c_0)`` with :math:`f_M(t) = c_0 + \sum_m c_m \sigma(t - a_m)`.
    """
    if M < 2 or R <= 0:
        raise ValueError(f"need M >= 2 knots and R > 0, got M={M}, R={R}")
    knots = torch.linspace(-R, R, M, dtype=dtype)
    values = torch.sigmoid(knots)
    slopes = torch.diff(values) / torch.diff(knots)  # (M - 1,)
    c = torch.diff(torch.cat([slopes.new_zeros(1), slopes, slopes.new_zeros(1)]))  # slope changes at each knot
    return knots, c, float(values[0])


def sigmoid_interpolant_eval(t: Tensor, M: int, R: float) -> Tensor:
    r""":math:`f_M(t)` of :func:`sigmoid_interpolant`."""
    knots, c, c0 = sigmoid_interpolant(M, R, dtype=t.dtype)
    return c0 + (torch.relu(t[..., None] - knots) * c).sum(-1)


def sigmoid_interpolation_bound(M: int, R: float) -> float:
    r"""Sup error of :math:`f_M` on :math:`[-R, R]` (:math:`h^2\max|s''|/8`), and :math:`\mathrm{sigmoid}(-R)` outside."""
    h = 2 * R / (M - 1)
    return max(h * h * SIGMOID_D2_MAX / 8, 1 / (1 + math.exp(R)))


def logistic_gd_layers(d: int, eta: float, n_steps: int, M: int, R: float = 6.0, B: float = 1e4,
                       dtype: torch.dtype = torch.float64) -> list[Layer]:
    r""":math:`L` layers, :math:`M + 2` heads each: GD on the logistic loss with :math:`\mathrm{sigmoid} \approx f_M`.

    Heads: one per knot (score :math:`w^\top x_j - a_m + B(t_j - 1)`, value :math:`-\eta c_m x_j`),
    one for :math:`c_0` (score :math:`t_j`) and one for :math:`-y_j` (score :math:`y_j \in \{0,1\}`).
    """
    if eta <= 0 or n_steps < 0:
        raise ValueError(f"need eta > 0 and n_steps >= 0; got {eta}, {n_steps}")
    s = layout(d)
    knots, c, c0 = sigmoid_interpolant(M, R, dtype)
    Q, K, V = _zeros(M + 2, s["D"], dtype)
    for m in range(M):
        for a in range(d):
            Q[m, a, d + 2 + a] = 1.0
            K[m, a, a] = 1.0
            V[m, d + 2 + a, a] = -eta * float(c[m])
        Q[m, d, s["one"]] = -float(knots[m])
        K[m, d, s["one"]] = 1.0
        Q[m, d + 1, s["one"]] = B
        K[m, d + 1, s["t"]] = 1.0
        K[m, d + 1, s["one"]] = -1.0
    Q[M, 0, s["one"]], K[M, 0, s["t"]] = 1.0, 1.0           # constant c_0 on the context
    Q[M + 1, 0, s["one"]], K[M + 1, 0, s["y"]] = 1.0, 1.0   # the label term, y_j in {0, 1}
    for a in range(d):
        V[M, d + 2 + a, a] = -eta * c0
        V[M + 1, d + 2 + a, a] = eta
    layer = {"Q": Q, "K": K, "V": V}
    return [dict(layer) for _ in range(n_steps)]


def readout_layer(d: int, B: float = 1e4, dtype: torch.dtype = torch.float64) -> Layer:
    r"""Two heads writing :math:`\hat y_i = w^\top x_i` into every token's :math:`\hat y` slot."""
    s = layout(d)
    Q, K, V = _zeros(2, s["D"], dtype)
    for m, sign in enumerate((1.0, -1.0)):
        for a in range(d):
            Q[m, a, a] = sign
            K[m, a, d + 2 + a] = 1.0
        Q[m, d, s["one"]] = B
        K[m, d, s["t"]] = 1.0
        K[m, d, s["one"]] = -1.0
        V[m, s["y_hat"], s["one"]] = sign
    return {"Q": Q, "K": K, "V": V}
