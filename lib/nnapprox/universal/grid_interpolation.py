r"""The curse of dimensionality: piecewise-linear interpolation on a grid.

Universal approximation chapter, section "Barron: a rate free of dimension" (the contrast).
On the grid :math:`\{0, h, 2h, \dots, 1\}^d` with :math:`m = 1/h + 1` points per axis
(:math:`N = m^d` points in all), multilinear interpolation of a :math:`C^2` function has
error :math:`O(h^2)`:

.. math::  \|f - I_h f\|_\infty \le \tfrac{d}{8} h^2 \max_i \|\partial_i^2 f\|_\infty
           \quad\Longrightarrow\quad \text{error} \propto N^{-2/d},

so the number of points needed for an accuracy :math:`\varepsilon` grows like
:math:`\varepsilon^{-d/2}`, exponentially in :math:`d`. Barron's rate :math:`n^{-1/2}`
(:mod:`nnapprox.universal.maurey`) does not.

For :math:`d \ge 2` the multilinear interpolant is not piecewise linear (it contains products
such as :math:`x_1x_2`), so no ReLU network equals it. The *simplicial* interpolant
(:func:`simplicial_interpolate`) is: it splits every cell into the :math:`d!` simplices of the
Kuhn (Freudenthal) triangulation, :math:`\{x : x_{\pi(1)} \ge \dots \ge x_{\pi(d)}\}` in
local coordinates, and is affine on each, continuous, and has the same :math:`O(h^2)` error.
"""

from __future__ import annotations

import itertools
from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng


def grid_values(f: Callable[[Tensor], Tensor], m: int, d: int) -> Float[Tensor, "..."]:
    """``f`` on the grid ``{0, 1/(m-1), ..., 1}^d``, as a tensor of shape ``(m,) * d`` (float64)."""
    if m < 2 or d < 1:
        raise ValueError(f"need m >= 2 points per axis and d >= 1, got m={m}, d={d}")
    axis = torch.linspace(0.0, 1.0, m, dtype=torch.float64)
    mesh = torch.stack(torch.meshgrid(*([axis] * d), indexing="ij"), dim=-1)  # (m,)*d + (d,)
    return f(mesh.reshape(-1, d)).reshape((m,) * d)


def _cell(values: Tensor, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The grid cell of each point: its lower corner (batch, d), the position inside it in
    [0, 1]^d, the flattened values and the strides that turn a corner into a flat index."""
    d = x.shape[1]
    if values.ndim != d:
        raise ValueError(f"values has {values.ndim} axes but the points have d={d}")
    m = values.shape[0]
    scaled = x.clamp(0.0, 1.0) * (m - 1)
    lower = scaled.floor().long().clamp(max=m - 2)  # (batch, d)
    strides = torch.tensor([m ** (d - 1 - i) for i in range(d)], dtype=torch.long)
    return lower, scaled - lower, values.reshape(-1), strides


def multilinear_interpolate(values: Float[Tensor, "..."], x: Float[Tensor, "batch d"]) -> Float[Tensor, " batch"]:
    r"""Multilinear interpolation :math:`I_h f(x)` of grid ``values`` (shape ``(m,)*d``) at points of :math:`[0,1]^d`.

    Sums the :math:`2^d` corners of the cell of each point with the tensor-product hat weights.
    """
    d = x.shape[1]
    lower, frac, flat, strides = _cell(values, x)
    out = torch.zeros(x.shape[0], dtype=values.dtype)
    for corner in itertools.product((0, 1), repeat=d):
        c = torch.tensor(corner, dtype=torch.long)
        weight = torch.where(c.bool(), frac, 1 - frac).prod(1)
        out += weight * flat[((lower + c) * strides).sum(1)]
    return out


def simplicial_interpolate(values: Float[Tensor, "..."], x: Float[Tensor, "batch d"]) -> Float[Tensor, " batch"]:
    r"""Kuhn (Freudenthal) simplicial interpolation of grid ``values`` (shape ``(m,)*d``) at points of :math:`[0,1]^d`.

    With local coordinates :math:`s \in [0, 1]^d` in the cell and :math:`\pi` sorting them
    decreasingly, the point lies in the simplex with vertices :math:`v_0 = 0`,
    :math:`v_j = v_{j-1} + e_{\pi(j)}`, and its barycentric weights are
    :math:`1 - s_{\pi(1)}, s_{\pi(1)} - s_{\pi(2)}, \dots, s_{\pi(d)}`. The result is affine on
    each simplex and continuous: a continuous piecewise-linear function, which a ReLU network
    can represent exactly.
    """
    d = x.shape[1]
    lower, frac, flat, strides = _cell(values, x)
    s_sorted, order = frac.sort(dim=1, descending=True)  # (batch, d)
    vertex = lower.clone()
    out = (1 - s_sorted[:, 0]) * flat[(vertex * strides).sum(1)]
    for j in range(d):
        vertex = vertex.scatter_add(1, order[:, j : j + 1], torch.ones_like(order[:, j : j + 1]))
        s_next = s_sorted[:, j + 1] if j + 1 < d else torch.zeros_like(s_sorted[:, 0])
        out = out + (s_sorted[:, j] - s_next) * flat[(vertex * strides).sum(1)]
    return out


def interpolation_rmse(
    f: Callable[[Tensor], Tensor],
    m: int,
    d: int,
    generator: torch.Generator,
    n_test: int = 20_000,
    method: str = "multilinear",
) -> float:
    r"""Root-mean-square error of the grid interpolant (``"multilinear"`` or ``"simplicial"``) at uniform random points."""
    methods = {"multilinear": multilinear_interpolate, "simplicial": simplicial_interpolate}
    if method not in methods:
        raise ValueError(f"method must be one of {sorted(methods)}, got {method!r}")
    values = grid_values(f, m, d)
    x = rng.rand(n_test, d, generator=generator, dtype=torch.float64)
    return float(((methods[method](values, x) - f(x)) ** 2).mean().sqrt())
