r"""Exact counting of the linear pieces of a ReLU network along a line.

Chapter "Depth separation", sections "The sawtooth" and "How many regions do real
networks have?" (``telgarsky2016benefits``, ``hanin2019complexity``).

Restricted to a segment :math:`x(t) = x_0 + t (x_1 - x_0)`, :math:`t \in [0, 1]`, a ReLU
network is a continuous piecewise-linear function of :math:`t`. Its *breakpoints* are the
:math:`t` where some neuron changes sign. They are found exactly, layer by layer: once the
breakpoints of layers :math:`< \ell` are known, every pre-activation of layer :math:`\ell`
is affine between two consecutive ones, so its zeros are

.. math::  t^\ast = t_i + (t_{i+1} - t_i)\,\frac{z(t_i)}{z(t_i) - z(t_{i+1})}
           \quad\text{where } z(t_i)\, z(t_{i+1}) < 0.

Two counts come out, and they differ:

* **activation regions** (Hanin & Rolnick): intervals of constant activation pattern,
  ``len(breakpoints) - 1``;
* **linear pieces** of the output: 1 + the number of breakpoints where the output's slope
  really changes (a neuron can switch without changing the output, e.g. when its outgoing
  weight is zero). Always ``pieces <= regions``.

Counting on a grid is a trap: a kink strictly between two grid points makes the slope of
that grid segment differ from both neighbours, so it is counted twice. Put the kinks *on*
the grid (the dyadic grid :math:`i/2^{L+3}` for the sawtooth) or track breakpoints.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights, n_affine_layers, preactivations, relu_net


def breakpoints_along_line(
    weights: Weights, x0: Float[Tensor, " d"], x1: Float[Tensor, " d"]
) -> Float[Tensor, " n_points"]:
    r"""Sorted breakpoints :math:`0 = t_0 < \dots < t_K = 1` of the network on the segment ``x0 -> x1``.

    Includes the two end points; the network is affine on each :math:`[t_i, t_{i+1}]`.
    Exact up to floating-point rounding of the crossing formula (exact for dyadic data).
    """
    L = n_affine_layers(weights)
    t = torch.tensor([0.0, 1.0], dtype=x0.dtype, device=x0.device)
    direction = x1 - x0
    for ell in range(L - 1):  # output layer is linear: no new kinks
        z = preactivations(weights, x0 + t[:, None] * direction)[ell]  # (n_t, m)
        za, zb = z[:-1], z[1:]
        ta, tb = t[:-1, None].expand_as(za), t[1:, None].expand_as(za)
        cross = za * zb < 0
        t_new = ta[cross] + (tb[cross] - ta[cross]) * za[cross] / (za[cross] - zb[cross])
        t = torch.unique(torch.cat([t, t_new]))  # sorted, exact duplicates merged
    return t


def count_regions_along_line(weights: Weights, x0: Float[Tensor, " d"], x1: Float[Tensor, " d"]) -> int:
    """Number of activation regions crossed by the segment (Hanin & Rolnick's count)."""
    return len(breakpoints_along_line(weights, x0, x1)) - 1


def slope_changes(
    t: Float[Tensor, " n_points"], y: Float[Tensor, "n_points out"], rtol: float = 1e-9
) -> int:
    r"""Number of interior points where the piecewise-linear interpolant of ``(t, y)`` bends.

    The slopes :math:`s_i = (y_{i+1} - y_i)/(t_{i+1} - t_i)` are compared with a relative
    tolerance ``rtol`` times the largest slope (any output coordinate bending counts).
    """
    if t.ndim != 1 or len(t) < 2:
        raise ValueError("need at least two points")
    s = (y[1:] - y[:-1]) / (t[1:] - t[:-1])[:, None]  # (n_points - 1, out)
    scale = s.abs().max().clamp_min(1e-300)
    bend = ((s[1:] - s[:-1]).abs() > rtol * scale).any(dim=1)
    return int(bend.sum())


def count_pieces_along_line(
    weights: Weights, x0: Float[Tensor, " d"], x1: Float[Tensor, " d"], rtol: float = 1e-9
) -> int:
    """Number of maximal linear pieces of the network's output on the segment (exact breakpoints)."""
    t = breakpoints_along_line(weights, x0, x1)
    y = relu_net(weights, x0 + t[:, None] * (x1 - x0))
    return 1 + slope_changes(t, y, rtol)


def count_pieces_on_grid(
    x: Float[Tensor, " n_points"], y: Float[Tensor, " n_points"], rtol: float = 1e-9
) -> int:
    """Pieces of the interpolant of samples ``y`` on the grid ``x``: right only if every kink is a grid point."""
    return 1 + slope_changes(x, y[:, None], rtol)
