r"""The expected number of activation regions on a segment, from the co-area formula.

Chapter "Depth separation", section "How many regions do real networks have?"
(``hanin2019complexity``).

On a segment :math:`x(t) = x_0 + t(x_1 - x_0)`, :math:`t \in [0, 1]`, write each hidden
pre-activation as :math:`z(t) = g_z(t) + b_z`, where :math:`g_z` depends only on the
weights and biases of *earlier* layers and on :math:`W_z`, never on :math:`b_z` itself. A
region boundary is a zero of some :math:`z`. If :math:`b_z` has density :math:`\rho` and
CDF :math:`F`, independent of everything else, the co-area formula
:math:`\int \#\{t : g(t) = y\}\, dy = \int_0^1 |g'(t)|\, dt` gives

.. math::  \mathbb E_{b_z}\big[\#\{t : z(t) = 0\}\big]
           = \int_0^1 \rho(-g_z(t))\, |g_z'(t)|\, dt
           = \sum_j \big|F(-g_z(t_{j+1})) - F(-g_z(t_j))\big|,

the sum running over the pieces :math:`[t_j, t_{j+1}]` on which the network is affine
(there :math:`g_z` is affine). Summing over neurons (zeros of different neurons coincide
with probability 0),

.. math::  V = 1 + \sum_z \sum_j \big|F(-g_z(t_{j+1})) - F(-g_z(t_j))\big|

satisfies :math:`\mathbb E[\#\text{regions}] = \mathbb E[V]`: an exact identity, and
:math:`V \le U = 1 + C_\text{bias} \sum_z \int_0^1 |g_z'|\, dt` with
:math:`C_\text{bias} = \sup \rho`. Writing :math:`\int_0^1 |g_z'|\,dt = T \cdot
\overline{|\partial_u z|}` (:math:`T` the length, :math:`u` the unit direction, the bar an
average along the segment) gives Hanin & Rolnick's form
:math:`\mathbb E[\#\text{regions}] \le 1 + C_\text{grad}\, C_\text{bias}\, T\, N` with
:math:`C_\text{grad}` bounding the mean directional derivative of the pre-activations.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox import rng

from .pieces import breakpoints_along_line
from .relu_net import Weights, n_affine_layers, preactivations


def region_expectation_terms(
    weights: Weights, x0: Float[Tensor, " d"], x1: Float[Tensor, " d"], bias_std: float
) -> tuple[int, float, float]:
    r"""(regions counted, :math:`V`, :math:`\sum_z \int_0^1 |g_z'|\,dt`) for one network and one segment.

    Biases are taken :math:`\mathcal N(0, \text{bias\_std}^2)` (as in
    :func:`~nnapprox.depth.relu_net.random_relu_net` with ``init="he"``). The counted regions
    and :math:`V` have the same expectation over the biases; :math:`V \le 1 +
    C_\text{bias} \cdot` (third entry) with :math:`C_\text{bias} = 1/(\text{bias\_std}\sqrt{2\pi})`.
    """
    if not bias_std > 0:
        raise ValueError(f"bias_std must be > 0, got {bias_std}")
    t = breakpoints_along_line(weights, x0, x1)
    pts = x0 + t[:, None] * (x1 - x0)
    zs = preactivations(weights, pts)[: n_affine_layers(weights) - 1]  # hidden layers only
    normal = torch.distributions.Normal(0.0, float(bias_std))
    V, tv = 1.0, 0.0
    for ell, z in enumerate(zs):
        g = z - weights[f"b{ell}"]  # (n_points, m): the pre-activation without its own bias
        V += float((normal.cdf(-g[1:]) - normal.cdf(-g[:-1])).abs().sum())
        tv += float((g[1:] - g[:-1]).abs().sum())
    return len(t) - 1, V, tv


def bias_density_bound(bias_std: float) -> float:
    r""":math:`C_\text{bias} = 1/(\sigma_b\sqrt{2\pi})`, the largest value of the :math:`\mathcal N(0, \sigma_b^2)` density."""
    if not bias_std > 0:
        raise ValueError(f"bias_std must be > 0, got {bias_std}")
    return 1.0 / (bias_std * math.sqrt(2 * math.pi))


def offset_segments(
    n_lines: int, d: int, length: float, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Float[Tensor, "n_lines 2 d"]:
    r"""Segments of the given length centred at :math:`c \sim \mathcal N(0, I_d)`, along uniform random directions.

    Unlike :func:`~nnapprox.depth.regions.random_segments`, they do not pass through the
    origin, where every first-layer neuron of a network with small biases switches.
    """
    if n_lines < 1 or d < 1 or not length > 0:
        raise ValueError(f"need n_lines >= 1, d >= 1 and length > 0, got {n_lines}, {d}, {length}")
    c = rng.randn(n_lines, d, generator=generator, dtype=dtype)
    u = rng.randn(n_lines, d, generator=generator, dtype=dtype)
    u = u / u.norm(dim=1, keepdim=True)
    return torch.stack([c - 0.5 * length * u, c + 0.5 * length * u], dim=1)
