r"""Telgarsky's sawtooth: the tent map composed :math:`L` times.

Chapter "Depth separation", section "The sawtooth" (``telgarsky2015representation``,
``telgarsky2016benefits``).

The tent map on :math:`[0, 1]` is a two-unit ReLU layer,

.. math::  t(x) = 2\,\sigma(x) - 4\,\sigma(x - \tfrac12),

and the sawtooth :math:`f_L = t \circ \dots \circ t` (:math:`L` times) is a network with
:math:`L` hidden layers of 2 units. It has exactly :math:`2^L` linear pieces on
:math:`[0, 1]`, with slopes :math:`\pm 2^L` and kinks at :math:`i / 2^L`, and
:math:`f_L(i/2^L) = i \bmod 2`: it labels the :math:`n = 2^L` alternating points
:math:`x_i = i/n,\ y_i = i \bmod 2` perfectly.

A function with :math:`p` affine pieces, thresholded at :math:`\tfrac12`, misclassifies at
least a fraction :math:`(n - 4p)/(3n)` of those points (``telgarsky2015representation``, the
counting step of Theorem 1.1; the exact best error is in :mod:`best_pieces`); a
one-hidden-layer network with :math:`m` units has at most :math:`m + 1` pieces, so it
needs :math:`m \ge n/4 - 1` units for zero error (in fact :math:`m \ge n - 2`: each piece
crosses :math:`\tfrac12` at most once and the labels alternate :math:`n - 1` times).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights


def tent(x: Tensor) -> Tensor:
    r"""Reference tent map :math:`t(x) = 2x` for :math:`x \le \frac12`, :math:`2 - 2x` otherwise (on [0, 1])."""
    return torch.where(x <= 0.5, 2 * x, 2 - 2 * x)


def sawtooth(x: Tensor, L: int) -> Tensor:
    r"""Reference :math:`f_L(x) = t^{L}(x)` by direct iteration (no network)."""
    if L < 0:
        raise ValueError(f"L must be >= 0, got {L}")
    for _ in range(L):
        x = tent(x)
    return x


def sawtooth_weights(L: int, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> Weights:
    r"""Weights of the depth-:math:`L` sawtooth network: :math:`L` hidden layers of 2 units, linear output.

    Hidden layer :math:`\ell` computes :math:`(\sigma(u), \sigma(u - \frac12))` of
    :math:`u = t^{\ell}(x)`; the next layer reads :math:`u' = 2 h_1 - 4 h_2` directly, so
    :math:`W^{[\ell]} = \begin{pmatrix}2 & -4\\ 2 & -4\end{pmatrix}` for :math:`\ell \ge 1`.
    """
    if not isinstance(L, int) or L < 1:
        raise ValueError(f"L must be a positive integer, got {L!r}")
    kw = dict(dtype=dtype, device=device)
    fold = torch.tensor([[2.0, -4.0]], **kw)  # u' = 2 h1 - 4 h2
    spread = torch.tensor([[1.0], [1.0]], **kw)  # (relu(u), relu(u - 1/2))
    shift = torch.tensor([0.0, -0.5], **kw)
    weights: Weights = {"W0": spread.clone(), "b0": shift.clone()}
    for ell in range(1, L):
        weights[f"W{ell}"], weights[f"b{ell}"] = spread @ fold, shift.clone()
    weights[f"W{L}"], weights[f"b{L}"] = fold.clone(), torch.zeros(1, **kw)
    return weights


def tent_cell(dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> Weights:
    r"""One recurrent cell :math:`u \mapsto t(u) = 2\sigma(u) - 4\sigma(u - \tfrac12)`: 2 ReLUs and a linear read-out, 7 parameters.

    Iterated :math:`k` times (:func:`recurrent_sawtooth`) it computes the sawtooth
    :math:`f_k` with the same 7 numbers for every :math:`k`, the weight-tied form of
    :func:`sawtooth_weights` (``telgarsky2015representation`` gives a recurrent network with
    a constant number of nodes for the same purpose).
    """
    kw = dict(dtype=dtype, device=device)
    return {"W0": torch.ones(2, 1, **kw), "b0": torch.tensor([0.0, -0.5], **kw),
            "W1": torch.tensor([[2.0, -4.0]], **kw), "b1": torch.zeros(1, **kw)}


def recurrent_sawtooth(x: Float[Tensor, "n 1"], k: int, cell: Weights | None = None) -> Float[Tensor, "n 1"]:
    r"""Apply the tied :func:`tent_cell` :math:`k` times: :math:`f_k(x) = t^{\circ k}(x)`."""
    if not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")
    if x.ndim != 2 or x.shape[1] != 1:
        raise ValueError(f"x must have shape (n, 1), got {tuple(x.shape)}")
    cell = tent_cell(x.dtype, x.device) if cell is None else cell
    for _ in range(k):
        x = torch.relu(x @ cell["W0"].T + cell["b0"]) @ cell["W1"].T + cell["b1"]
    return x


def alternating_points(
    k: int, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu"
) -> tuple[Float[Tensor, "n 1"], Float[Tensor, "n 1"]]:
    r"""The :math:`n = 2^k` alternating points :math:`x_i = i/n`, :math:`y_i = i \bmod 2`."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    n = 2**k
    i = torch.arange(n, device=device)
    return (i.to(dtype) / n)[:, None], (i % 2).to(dtype)[:, None]


def telgarsky_error_lower_bound(n: int, pieces: int) -> float:
    r"""Lower bound :math:`\max(0, (n - 4p)/(3n))` on the 0-1 error on the :math:`n`-alternating points."""
    if n < 1 or pieces < 1:
        raise ValueError(f"need n >= 1 and pieces >= 1, got n={n}, pieces={pieces}")
    return max(0.0, (n - 4 * pieces) / (3 * n))


def classification_error(f_x: Float[Tensor, "n 1"], y: Float[Tensor, "n 1"]) -> float:
    r"""Fraction of points with :math:`\mathbb 1[f(x) \ge \frac12] \ne y` (the chapter's rule)."""
    return float(((f_x >= 0.5).to(y.dtype) != y).double().mean())
