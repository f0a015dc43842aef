r"""One hidden layer for a product, built by polarization: the strongest shallow foil we know.

Universal approximation chapter, section "A deep tree against one hidden layer". The product
of :math:`d` numbers is a sum of :math:`2^{d-1}` ridge functions (polarization):

.. math::  x_1 x_2 \cdots x_d = \frac{1}{2^{d-1} d!} \sum_{\varepsilon \in \{\pm1\}^d,\ \varepsilon_1 = 1}
           \Big(\prod_i \varepsilon_i\Big)\, (\varepsilon\cdot x)^d .

Each ridge :math:`t \mapsto t^d` is a function of one variable on the bounded interval
:math:`\{\varepsilon\cdot x : x \in [0, 1]^d\}`, and one hidden ReLU layer interpolates it on
:math:`K` uniform cells exactly as in Section 1 (:func:`nnapprox.universal.relu_interpolant_weights`).
The :math:`2^{d-1}` interpolants side by side form one hidden layer of width
:math:`W = 2^{d-1}K` in :math:`x`: units :math:`\sigma(\varepsilon\cdot x - t_i)`. Its error
falls like :math:`K^{-2}`, a power of the width, where a deep tree of product gadgets falls
like :math:`4^{-m}` in its depth.
"""

from __future__ import annotations

import itertools
import math

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params
from .shallow import relu_interpolant_weights


def polarization_signs(d: int) -> Float[Tensor, "R d"]:
    r"""The :math:`2^{d-1}` sign vectors :math:`\varepsilon` with :math:`\varepsilon_1 = 1`."""
    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    rows = [(1.0, *rest) for rest in itertools.product((1.0, -1.0), repeat=d - 1)]
    return torch.tensor(rows, dtype=torch.float64)


def polarization_product(x: Float[Tensor, "batch d"]) -> Float[Tensor, " batch"]:
    r"""The right-hand side of the polarization identity, evaluated exactly (a check of the identity)."""
    d = x.shape[-1]
    eps = polarization_signs(d).to(x.dtype)
    return ((x @ eps.T) ** d * eps.prod(1)).sum(-1) / (2 ** (d - 1) * math.factorial(d))


def polarization_shallow_weights(d: int, cells: int) -> Params:
    r"""One hidden layer of width :math:`2^{d-1}` ``cells``: each ridge :math:`(\varepsilon\cdot x)^d` interpolated on ``cells`` cells."""
    if d < 1 or cells < 1:
        raise ValueError(f"need d >= 1 and cells >= 1, got d={d}, cells={cells}")
    eps = polarization_signs(d)
    scale = eps.prod(1) / (2 ** (d - 1) * math.factorial(d))  # signed weight of each ridge
    W_1, b_1, W_2, b_2 = [], [], [], torch.zeros(1, dtype=torch.float64)
    for e, c in zip(eps, scale):
        lo, hi = float(e.clamp(max=0).sum()), float(e.clamp(min=0).sum())  # range of e.x on the cube
        knots = torch.linspace(lo, hi, cells + 1, dtype=torch.float64)
        one = relu_interpolant_weights(knots, knots**d)  # units relu(t - t_i), t = e.x
        W_1.append(e[None, :].expand(cells, d))
        b_1.append(one["b_1"])
        W_2.append(c * one["W_2"][0])
        b_2 = b_2 + c * one["b_2"]
    return {"W_1": torch.cat(W_1), "b_1": torch.cat(b_1), "W_2": torch.cat(W_2)[None, :], "b_2": b_2}
