r"""The Walsh–Hadamard transform: all parity coefficients of a function on the cube at once.

Chapter "When gradient descent fails", section "The theorem" ({cite}`shalevshwartz2017failures`).

Index the points of :math:`\{\pm1\}^d` and the subsets :math:`S \subseteq [d]` by integers
:math:`0 \le i, s < 2^d` (bit :math:`j` of ``i`` is 1 when :math:`x_j = -1`; bit :math:`j`
of ``s`` is 1 when :math:`j \in S`). The Hadamard matrix

.. math::  H_{s i} = \chi_S(x^{(i)}) = (-1)^{\mathrm{popcount}(s \,\&\, i)}

is symmetric with :math:`H^2 = 2^d I`. The transform :math:`\hat f = H f` gives every parity
coefficient :math:`\hat f(S) = 2^d\,\mathbb{E}_x[f(x)\chi_S(x)]` in :math:`O(d\,2^d)`
operations instead of :math:`O(4^d)`: :func:`fwht` is the butterfly, :func:`hadamard_matrix`
the readable reference.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def hadamard_matrix(d: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, "two_d two_d"]:
    r"""The :math:`2^d \times 2^d` Sylvester–Hadamard matrix :math:`H_{si} = (-1)^{\mathrm{popcount}(s \& i)}`."""
    if not isinstance(d, int) or d < 0 or d > 14:
        raise ValueError(f"d must be an integer in 0..14 for a dense Hadamard matrix, got {d!r}")
    idx = torch.arange(2**d)
    both = idx[:, None] & idx[None, :]
    popcount = torch.zeros_like(both)
    for j in range(d):
        popcount += (both >> j) & 1
    return (1 - 2 * (popcount % 2)).to(dtype)


def fwht(f: Float[Tensor, "two_d *rest"]) -> Float[Tensor, "two_d *rest"]:
    r"""Fast Walsh–Hadamard transform along the first axis: returns :math:`H f` (unnormalised).

    ``f`` has :math:`2^d` rows (any trailing shape, e.g. one column per network parameter).
    Each of the :math:`d` butterfly stages views the rows as ``(blocks, 2, half)`` and replaces
    each pair ``(a, b)`` by ``(a + b, a - b)``: :math:`d\,2^d` additions per column.
    """
    n = f.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"fwht needs a power-of-two number of rows, got {n}")
    rest = f.shape[1:]
    out = f.reshape(n, -1)
    h = 1
    while h < n:
        pairs = out.reshape(n // (2 * h), 2, h, -1)  # (blocks, 2, half, columns)
        a, b = pairs[:, 0], pairs[:, 1]
        out = torch.stack((a + b, a - b), dim=1).reshape(n, -1)
        h *= 2
    return out.reshape(n, *rest)
