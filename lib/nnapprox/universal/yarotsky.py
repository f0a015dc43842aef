r"""Yarotsky's deep ReLU network for :math:`x^2`: error :math:`4^{-m}` with :math:`O(m)` units.

Universal approximation chapter, section "Depth buys efficiency" (Yarotsky 2017,
``yarotsky2017error``). With the tent map :math:`t(x) = 2\sigma(x) - 4\sigma(x - \tfrac12)`
on :math:`[0, 1]` and its :math:`s`-fold composition :math:`f_s = t^{\circ s}` (the depth
chapter's sawtooth, with
:math:`2^{s-1}` teeth),

.. math::  q_m(x) = x - \sum_{s=1}^{m} \frac{f_s(x)}{4^s}

is the piecewise-linear interpolant of :math:`x^2` on the grid :math:`k 2^{-m}`, so

.. math::  \max_{x\in[0,1]} |q_m(x) - x^2| = 2^{-2m-2},

attained at the midpoints of the grid cells. The network below has :math:`m` hidden layers of
3 ReLU units: two compute the next hat, one carries the running sum
:math:`x - \sum_{s\le \ell} f_s/4^s \ge 0` (a ReLU leaves it unchanged), so it has
:math:`3m` units for error :math:`4^{-m-1}`. A one-hidden-layer network needs
:math:`\Theta(\varepsilon^{-1/2})` units for the same error.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params


def hat(x: Float[Tensor, " n"]) -> Float[Tensor, " n"]:
    r"""Reference tent map :math:`t(x) = 2x` on :math:`[0, \tfrac12]`, :math:`2(1-x)` on :math:`[\tfrac12, 1]`."""
    return torch.where(x < 0.5, 2 * x, 2 * (1 - x))


def yarotsky_square_reference(x: Float[Tensor, " n"], m: int) -> Float[Tensor, " n"]:
    r"""Readable reference: :math:`q_m(x) = x - \sum_{s=1}^m f_s(x)/4^s` by explicit composition."""
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    out, g_s = x.clone(), x
    for s in range(1, m + 1):
        g_s = hat(g_s)
        out = out - g_s / 4**s
    return out


def yarotsky_square_weights(m: int, dtype: torch.dtype = torch.float64) -> Params:
    r"""Weights of the depth-:math:`(m+1)` ReLU network computing :math:`q_m` on :math:`[0,1]` (for :func:`relu_mlp`).

    Hidden layer :math:`\ell` holds :math:`(\sigma(y), \sigma(y - \tfrac12), \sigma(r))` where
    :math:`y = f_{\ell-1}(x)` and :math:`r = q_{\ell-1}(x)`; the next layer reads
    :math:`f_\ell = 2\sigma(y) - 4\sigma(y-\tfrac12)` and :math:`q_\ell = r - f_\ell/4^\ell` linearly.
    """
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    t = lambda v: torch.tensor(v, dtype=dtype)  # noqa: E731
    # read-out of layer l's units (a, b, c) -> (g_l, f_l)
    def readout(l: int) -> Tensor:
        return t([[2.0, -4.0, 0.0], [-2.0 / 4**l, 4.0 / 4**l, 1.0]])

    to_units = t([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # (g, f) -> pre-activations (g, g - 1/2, f)
    unit_bias = t([0.0, -0.5, 0.0])
    params: Params = {"W_1": t([[1.0], [1.0], [1.0]]), "b_1": unit_bias.clone()}  # y = r = x
    for l in range(2, m + 1):
        params[f"W_{l}"] = to_units @ readout(l - 1)
        params[f"b_{l}"] = unit_bias.clone()
    params[f"W_{m + 1}"] = readout(m)[1:2]
    params[f"b_{m + 1}"] = t([0.0])
    return params


def dyadic_grid(m: int, extra_levels: int = 2, dtype: torch.dtype = torch.float64) -> Float[Tensor, " n"]:
    r"""The points :math:`i\,2^{-(m+\text{extra})}` of :math:`[0,1]`; they contain every cell midpoint of level :math:`m`."""
    n = 2 ** (m + extra_levels)
    return torch.arange(n + 1, dtype=dtype) / n


def yarotsky_max_error_theory(m: int) -> float:
    r""":math:`2^{-2m-2}`."""
    return 2.0 ** (-2 * m - 2)
