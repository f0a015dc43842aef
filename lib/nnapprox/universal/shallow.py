r"""One hidden layer is universal: ReLU networks that interpolate or fit a 1-D function.

Universal approximation chapter, section "One hidden layer is universal" (Cybenko 1989,
``cybenko1989approximation``; Hornik 1991, ``hornik1991approximation``). In one dimension
the proof is a construction. For knots :math:`0 = t_0 < t_1 < \dots < t_N = 1`, the network
with :math:`N` hidden units

.. math::  \mathrm{NN}(x) = f(t_0) + \sum_{i=0}^{N-1} c_i\, \sigma(x - t_i), \qquad
           c_i = s_i - s_{i-1},\quad s_i = \frac{f(t_{i+1}) - f(t_i)}{t_{i+1}-t_i},\ s_{-1}=0,

is the piecewise-linear interpolant of :math:`f` on :math:`[0, 1]`. For continuous
:math:`f` its sup-error tends to zero as the mesh :math:`h \to 0` (uniform continuity), and
for :math:`f \in C^2` it is at most :math:`\tfrac{h^2}{8}\|f''\|_\infty`.

:func:`fit_relu_output_layer` keeps the same hidden units and *fits* the output layer by
least squares instead: for nested knot sets the function spaces are nested, so the fitted
:math:`L^2` error can only decrease with the width.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params


def uniform_knots(N: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, " N_plus_one"]:
    r"""The :math:`N + 1` knots :math:`i/N`."""
    if N < 1:
        raise ValueError(f"N (number of hidden units) must be >= 1, got {N}")
    return torch.arange(N + 1, dtype=dtype) / N


def relu_interpolant_weights(knots: Float[Tensor, " N_plus_one"], values: Float[Tensor, " N_plus_one"]) -> Params:
    r"""Weights of the :math:`N`-unit network equal to the piecewise-linear interpolant of ``values`` at ``knots``."""
    if knots.shape != values.shape or knots.ndim != 1 or len(knots) < 2:
        raise ValueError("knots and values must be 1-D of equal length >= 2")
    if not bool((knots[1:] > knots[:-1]).all()):
        raise ValueError("knots must be strictly increasing")
    slopes = (values[1:] - values[:-1]) / (knots[1:] - knots[:-1])  # s_0 .. s_{N-1}
    c = torch.diff(slopes, prepend=slopes.new_zeros(1))  # c_i = s_i - s_{i-1}
    N = len(slopes)
    return {
        "W_1": torch.ones(N, 1, dtype=knots.dtype),
        "b_1": -knots[:-1].clone(),
        "W_2": c[None, :],
        "b_2": values[:1].clone(),
    }


def fit_relu_output_layer(
    knots: Float[Tensor, " N_plus_one"], x: Float[Tensor, " n"], y: Float[Tensor, " n"]
) -> Params:
    r"""Hidden units :math:`\sigma(x - t_i)`, :math:`i < N`; output weights and bias by least squares on ``(x, y)``."""
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError("x and y must be 1-D of equal length")
    features = torch.relu(x[:, None] - knots[None, :-1])  # (n, N)
    design = torch.cat([features, torch.ones_like(x)[:, None]], dim=1)
    coef = torch.linalg.lstsq(design, y[:, None]).solution[:, 0]
    N = len(knots) - 1
    return {
        "W_1": torch.ones(N, 1, dtype=x.dtype),
        "b_1": -knots[:-1].clone(),
        "W_2": coef[None, :N],
        "b_2": coef[N:],
    }


def interpolation_bound(h: float, second_derivative_sup: float) -> float:
    r""":math:`\tfrac{h^2}{8}\|f''\|_\infty`, the sup-error bound of linear interpolation."""
    return h**2 / 8.0 * second_derivative_sup
