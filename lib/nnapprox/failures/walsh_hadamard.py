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


def butterflies_(f: Float[Tensor, "two_d *rest"], first: int = 1) -> Float[Tensor, "two_d *rest"]:
    r"""The butterfly stages of the transform at distances ``first, 2 first, ..., n/2``, in place.

    Stage :math:`h` views the rows as ``(blocks, 2, h, columns)`` and replaces each pair of rows
    ``(a, b)`` at distance :math:`h` by ``(a + b, a - b)``, computed in place as
    :math:`a \leftarrow a + b`, then :math:`b \leftarrow (a + b) - 2b`. Since
    :math:`H_d = H_1 \otimes \dots \otimes H_1` and the factors commute, the stages can run in
    any order and in pieces: the stages with :math:`h <` ``first`` can be run beforehand on each
    block of ``first`` consecutive rows separately (as :func:`parity_gradient_variance
    <nnapprox.failures.grad_variance.parity_gradient_variance>` does while a block is in cache).
    ``f`` must be contiguous; ``first`` a power of two.
    """
    n = f.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"fwht needs a power-of-two number of rows, got {n}")
    if first < 1 or first & (first - 1):
        raise ValueError(f"first must be a power of two >= 1, got {first}")
    if not f.is_contiguous():
        raise ValueError("the in-place transform needs a contiguous tensor (use fwht)")
    out = f.view(n, -1)
    h = first
    while h < n:
        pairs = out.view(n // (2 * h), 2, h, -1)  # (blocks, 2, half, columns)
        a, b = pairs[:, 0], pairs[:, 1]
        a.add_(b)  # a + b
        torch.sub(a, b, alpha=2, out=b)  # (a + b) - 2b = a - b
        h *= 2
    return f


def fwht_(f: Float[Tensor, "two_d *rest"]) -> Float[Tensor, "two_d *rest"]:
    r"""In-place fast Walsh–Hadamard transform along the first axis: overwrites ``f`` with :math:`H f`.

    All :math:`d` butterfly stages (:func:`butterflies_`): :math:`2d\,2^d` floating-point
    operations per column and no allocation. ``f`` must be contiguous.
    """
    return butterflies_(f, 1)


def fwht(f: Float[Tensor, "two_d *rest"]) -> Float[Tensor, "two_d *rest"]:
    r"""Fast Walsh–Hadamard transform along the first axis: returns :math:`H f` (unnormalised).

    ``f`` has :math:`2^d` rows (any trailing shape, e.g. one column per network parameter).
    The :math:`d` butterfly stages (:func:`fwht_`, run on a copy) replace each pair of rows
    ``(a, b)`` at distance :math:`2^j` by ``(a + b, a - b)``: :math:`d\,2^d` additions per
    column instead of the :math:`4^d` of the product with :func:`hadamard_matrix`.
    """
    n = f.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"fwht needs a power-of-two number of rows, got {n}")
    return fwht_(f.clone(memory_format=torch.contiguous_format))
