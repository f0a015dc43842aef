r"""Parities on the Boolean cube and their samplers.

Chapter "When gradient descent fails", sections "The theorem" and "Parity with SGD"
({cite}`shalevshwartz2017failures`).

For :math:`x \in \{\pm 1\}^d` and a subset :math:`S \subseteq [d]` the parity is

.. math::  \chi_S(x) = \prod_{j \in S} x_j ,

the :math:`\pm1` encoding of :math:`(-1)^{\langle b, v^\ast\rangle}` with bits
:math:`b \in \{0,1\}^d` (:math:`x_j = (-1)^{b_j}`) and :math:`v^\ast` the indicator of
:math:`S`. Under the uniform distribution the :math:`2^d` parities are orthonormal:
:math:`\mathbb{E}_x[\chi_S\chi_T] = \prod_j \mathbb{E}[x_j^{[j\in S]+[j\in T]}] = [S = T]`.
Index conventions follow :mod:`nnapprox.failures.walsh_hadamard`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor
from nnapprox import rng


def _check_d(d: int, max_d: int | None = None) -> None:
    if not isinstance(d, int) or isinstance(d, bool) or d < 1 or (max_d is not None and d > max_d):
        bound = f"1..{max_d}" if max_d is not None else ">= 1"
        raise ValueError(f"d must be an integer in {bound}, got {d!r}")


def _device(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


def hypercube(d: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, "two_d d"]:
    r"""All :math:`2^d` points of :math:`\{\pm1\}^d`; row ``i`` has :math:`x_j = -1` iff bit ``j`` of ``i`` is 1."""
    _check_d(d, 20)
    idx = torch.arange(2**d)
    bits = (idx[:, None] >> torch.arange(d)[None, :]) & 1
    return (1 - 2 * bits).to(dtype)


def subset_mask(s: int, d: int) -> Int[Tensor, " d"]:
    """Indicator vector :math:`v^\\ast \\in \\{0,1\\}^d` of the subset with integer code ``s``."""
    _check_d(d)
    if not 0 <= s < 2**d:
        raise ValueError(f"subset code s must be in 0..2^d-1 = 0..{2**d - 1}, got {s}")
    return (s >> torch.arange(d)) & 1


def parity(x: Float[Tensor, "batch d"], v: Int[Tensor, " d"]) -> Float[Tensor, " batch"]:
    r""":math:`\chi_S(x) = \prod_{j: v_j = 1} x_j` for :math:`\pm1` inputs ``x``."""
    if v.shape[0] != x.shape[1]:
        raise ValueError(f"v has {v.shape[0]} entries but x has d = {x.shape[1]} columns")
    ones = torch.ones_like(x)
    return torch.where(v.bool()[None, :], x, ones).prod(dim=1)


def all_parities(d: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, "two_d two_d"]:
    r"""Matrix :math:`P_{si} = \chi_{S_s}(x^{(i)})` of every parity on every point (readable, :math:`O(4^d)`)."""
    _check_d(d, 14)
    x = hypercube(d, dtype)
    return torch.stack([parity(x, subset_mask(s, d)) for s in range(2**d)])


def random_subset(d: int, k: int, generator: torch.Generator | None = None) -> Int[Tensor, " d"]:
    """Indicator of a uniformly random subset of size ``k`` of ``{0..d-1}``."""
    _check_d(d)
    if not 0 <= k <= d:
        raise ValueError(f"subset size k must be in 0..d = 0..{d}, got {k}")
    chosen = rng.randperm(d, generator=generator, device=_device(generator))[:k].cpu()
    v = torch.zeros(d, dtype=torch.long)
    v[chosen] = 1
    return v


def sample_parity(
    n: int, v: Int[Tensor, " d"], generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
) -> tuple[Float[Tensor, "n d"], Float[Tensor, " n"]]:
    r"""``n`` uniform points of :math:`\{\pm1\}^d` and their labels :math:`y = \chi_S(x)`."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    d = v.shape[0]
    x = 1.0 - 2.0 * rng.randint(0, 2, (n, d), generator=generator, device=_device(generator)).to(dtype)
    v = v.to(x.device)
    return x, parity(x, v)
