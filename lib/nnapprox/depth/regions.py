r"""How many linear regions do ReLU networks actually have?

Chapter "Depth separation", section "How many regions do real networks have?"
(``hanin2019complexity``, ``telgarsky2016benefits``).

*Maximum.* Along a line, each neuron of layer :math:`\ell` is affine on each piece made by
the layers below, so it splits each piece at most once: a network with hidden widths
:math:`m_1, \dots, m_{L-1}` has at most

.. math::  \prod_{\ell=1}^{L-1} (m_\ell + 1)

pieces on a line (and at most :math:`(2m)^{l}` for :math:`l` layers of width :math:`m`
with a 1-D input, the counting step of ``telgarsky2015representation``, Theorem 1.1). The sawtooth attains :math:`2^L` with 2 units
per layer: depth can multiply pieces.

*Typical.* Hanin & Rolnick (2019, ``hanin2019complexity``) prove that at initialization the
expected number of regions met by a line segment of length :math:`T` is at most
:math:`1 + C_\text{grad} C_\text{bias} T N`, with :math:`N` the *total* number of neurons
and constants that bound the bias densities and the pre-activation gradients: an upper
bound linear in length and in :math:`N`, with depth entering only through the constants
(and, empirically, of the same order during training). This module provides the bounds and the batched sweep
used by the chapter; counting itself is in :mod:`nnapprox.depth.pieces`.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from .pieces import count_regions_along_line
from .relu_net import Weights, random_relu_net
from nnapprox import rng


def max_pieces_on_line(hidden_widths: list[int]) -> int:
    r""":math:`\prod_\ell (m_\ell + 1)`: the most pieces a ReLU net with these hidden widths has on a line."""
    if any(m < 1 for m in hidden_widths):
        raise ValueError(f"hidden widths must be positive, got {hidden_widths}")
    return math.prod(m + 1 for m in hidden_widths)


def telgarsky_piece_bound(m: int, n_layers: int) -> int:
    r""":math:`(2m)^{l}`: Telgarsky's bound on the pieces of :math:`l` layers of :math:`m` ReLUs, 1-D input."""
    if m < 1 or n_layers < 1:
        raise ValueError(f"need m >= 1 and n_layers >= 1, got m={m}, n_layers={n_layers}")
    return (2 * m) ** n_layers


def equal_width_architecture(N: int, depth: int, d: int, out: int = 1) -> list[int]:
    r"""Widths ``[d, N/depth, ..., N/depth, out]``: ``depth`` hidden layers sharing :math:`N` neurons."""
    if depth < 1 or N % depth:
        raise ValueError(f"depth must be a positive divisor of N={N}, got {depth}")
    return [d] + [N // depth] * depth + [out]


def regions_per_neuron(
    nets: list[Weights], segments: Float[Tensor, "n_lines 2 d"]
) -> Float[Tensor, "n_nets n_lines"]:
    r"""Regions crossed by each segment, divided by the net's number of hidden neurons :math:`N`."""
    rows = []
    for weights in nets:
        L = len([k for k in weights if k.startswith("W")])
        N = sum(weights[f"W{ell}"].shape[0] for ell in range(L - 1))
        rows.append([count_regions_along_line(weights, s[0], s[1]) / N for s in segments])
    return torch.tensor(rows, dtype=torch.float64)


def random_segments(
    n_lines: int, d: int, radius: float, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Float[Tensor, "n_lines 2 d"]:
    r"""Segments :math:`[-R u, R u]` through the origin along random unit directions :math:`u`."""
    u = rng.randn(n_lines, d, generator=generator, dtype=dtype)
    u = u / u.norm(dim=1, keepdim=True)
    return torch.stack([-radius * u, radius * u], dim=1)


__all__ = [
    "equal_width_architecture",
    "max_pieces_on_line",
    "random_relu_net",
    "random_segments",
    "regions_per_neuron",
    "telgarsky_piece_bound",
]
