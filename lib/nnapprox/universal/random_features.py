r"""One hidden ReLU layer in :math:`d` dimensions: random hidden units, output layer by least squares.

Universal approximation chapter, section "From x^2 to products, polynomials and compositional
functions": the shallow side of the deep-versus-shallow comparison. The network

.. math::  \mathrm{NN}(x) = \sum_{j=1}^W c_j\,\sigma(w_j\cdot x + b_j) + c_0,
           \qquad w_j \sim \mathrm{Unif}(\mathbb S^{d-1}),\quad b_j = -w_j\cdot x^{(i_j)},

has its kinks through randomly chosen training inputs :math:`x^{(i_j)}` (so that no unit is
dead or linear on the data), and its output layer :math:`(c_0, c)` minimises the training
squared error exactly (a linear least-squares problem). It has :math:`(d + 2)W + 1`
parameters. This is *one* way to fit a shallow network, the high-dimensional version of
Section 1's fitted output layer; it is not the best network of its size.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params


def shallow_width(n_params: int, d: int) -> int:
    r"""Largest width :math:`W` with :math:`(d + 2)W + 1 \le` ``n_params``."""
    if d < 1 or n_params < d + 3:
        raise ValueError(f"need d >= 1 and n_params >= d + 3, got d={d}, n_params={n_params}")
    return (n_params - 1) // (d + 2)


def fit_random_relu_features(
    x: Float[Tensor, "n d"],
    y: Float[Tensor, " n"],
    width: int,
    generator: torch.Generator,
) -> Params:
    r"""Weights of :math:`\mathrm{NN}` (see the module) fitted to ``(x, y)``; float64, for :func:`relu_mlp`."""
    if x.ndim != 2 or y.shape != x.shape[:1]:
        raise ValueError(f"x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    n, d = x.shape
    if not isinstance(width, int) or width < 1 or width + 1 > n:
        raise ValueError(f"width must be an integer in [1, n - 1] = [1, {n - 1}], got {width!r}")
    x, y = x.double(), y.double()
    w = torch.randn(width, d, generator=generator, dtype=torch.float64).to(x.device)
    w = w / w.norm(dim=1, keepdim=True)  # uniform directions on the sphere
    anchors = torch.randint(n, (width,), generator=generator).to(x.device)
    b = -(w * x[anchors]).sum(1)  # each kink passes through a training input
    H = torch.cat([torch.relu(x @ w.T + b), torch.ones(n, 1, dtype=x.dtype, device=x.device)], 1)
    coef = torch.linalg.lstsq(H, y[:, None]).solution[:, 0]  # (width + 1,)
    return {"W_1": w, "b_1": b, "W_2": coef[None, :width], "b_2": coef[width:]}
