r"""Expressible is not learnable: the Cantor-set classifier of Malach & Shalev-Shwartz.

Chapter "Depth separation", section "Expressible is not learnable"
(``malach2019deeper``).

The map :math:`g(x) = 3x - 6\,\sigma(x - \tfrac12)` sends the two outer thirds of
:math:`[0, 1]` onto :math:`[0, 1]` and the middle third above 1; a point that leaves
:math:`[0, 1]` never comes back (:math:`g(y) = 3 - 3y < 0` for :math:`y > 1`, and
:math:`g(y) = 3y < 0` for :math:`y < 0`). Hence the level-:math:`n` Cantor set is

.. math::  C_n = \{x \in [0,1] : g^{n}(x) \in [0, 1]\},

:math:`2^n` intervals of length :math:`3^{-n}`. With :math:`y = \sigma(y) - \sigma(-y)`, one
layer of 3 ReLUs computes :math:`g` exactly on all of :math:`\mathbb R`, and the score
:math:`s(y) = y - 2\sigma(y - \tfrac12)` (:math:`\ge 0` iff :math:`y \in [0, 1]`, for
:math:`y \le 3/2`) is one more layer: a depth-:math:`(n+1)`, width-3 network classifies
:math:`C_n` exactly. Rounding errors are multiplied by up to :math:`3^n`: use float64.

Data. Positives are uniform on :math:`C_n`. A negative at level :math:`j` is uniform on
one of the :math:`2^{j-1}` open middle thirds removed at step :math:`j` (each of length
:math:`3^{-j}`). ``level_probs[j-1]`` is the probability of level :math:`j`: mass on
small :math:`j` ("coarse") makes the problem solvable by a coarse approximation, mass on
:math:`j = n` ("fine") hides all information at scale :math:`3^{-n}`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights
from nnapprox import rng


def cantor_map(x: Tensor) -> Tensor:
    r"""Reference :math:`g(x) = 3x` for :math:`x \le \frac12`, :math:`3 - 3x` otherwise."""
    return torch.where(x <= 0.5, 3 * x, 3 - 3 * x)


def in_cantor_set(x: Tensor, n: int) -> Tensor:
    r"""Reference membership :math:`x \in C_n` via :math:`g^{n}(x) \in [0, 1]` (boolean)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    y = x.clone()
    for _ in range(n):
        y = cantor_map(y)
    return (y >= 0) & (y <= 1) & (x >= 0) & (x <= 1)


def cantor_net_weights(n: int, dtype: torch.dtype = torch.float64, device: torch.device | str = "cpu") -> Weights:
    r"""Depth-:math:`(n+1)`, width-3 ReLU network whose output is :math:`\ge 0` exactly on :math:`C_n` (inputs in [0, 1]).

    Hidden layer :math:`\ell` holds :math:`(\sigma(y), \sigma(-y), \sigma(y - \frac12))` of
    :math:`y = g^{\ell}(x)`; :math:`g(y) = 3\sigma(y) - 3\sigma(-y) - 6\sigma(y - \frac12)`.
    The last hidden layer feeds the score :math:`s(y) = \sigma(y) - \sigma(-y) - 2\sigma(y - \frac12)`.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    kw = dict(dtype=dtype, device=device)
    spread = torch.tensor([[1.0], [-1.0], [1.0]], **kw)
    shift = torch.tensor([0.0, 0.0, -0.5], **kw)
    g_row = torch.tensor([[3.0, -3.0, -6.0]], **kw)
    weights: Weights = {"W0": spread.clone(), "b0": shift.clone()}
    for ell in range(1, n + 1):
        weights[f"W{ell}"], weights[f"b{ell}"] = spread @ g_row, shift.clone()
    weights[f"W{n + 1}"] = torch.tensor([[1.0, -1.0, -2.0]], **kw)
    weights[f"b{n + 1}"] = torch.zeros(1, **kw)
    return weights


def _random_ternary_prefix(n_samples: int, depth: Tensor, max_depth: int, generator: torch.Generator) -> Tensor:
    """Left end of a random level-``depth`` Cantor interval (digits 0 or 2 in base 3)."""
    digits = 2.0 * rng.randint(0, 2, (n_samples, max_depth), generator=generator).double()
    scale = 3.0 ** -torch.arange(1, max_depth + 1, dtype=torch.float64)
    keep = torch.arange(max_depth)[None, :] < depth[:, None]
    return (digits * scale * keep).sum(dim=1)


def sample_cantor_data(
    n: int,
    n_samples: int,
    level_probs: Float[Tensor, " n"],
    generator: torch.Generator,
) -> tuple[Float[Tensor, "n_samples 1"], Float[Tensor, "n_samples 1"]]:
    r"""Balanced samples ``(x, y)``: :math:`y = 1` uniform on :math:`C_n`, :math:`y = 0` from the gaps.

    The gap level :math:`j \in \{1..n\}` of each negative is drawn from ``level_probs``.
    """
    if level_probs.shape != (n,) or (level_probs < 0).any() or abs(float(level_probs.sum()) - 1) > 1e-9:
        raise ValueError(f"level_probs must be {n} non-negative numbers summing to 1")
    n_pos = n_samples // 2
    n_neg = n_samples - n_pos
    full = torch.full((n_pos,), n, dtype=torch.long)
    x_pos = _random_ternary_prefix(n_pos, full, n, generator)
    x_pos = x_pos + 3.0**-n * rng.rand(n_pos, generator=generator, dtype=torch.float64)
    level = rng.multinomial(level_probs.double(), n_neg, replacement=True, generator=generator) + 1
    left = _random_ternary_prefix(n_neg, level - 1, n, generator)
    width = 3.0 ** -level.double()
    x_neg = left + width * (1 + rng.rand(n_neg, generator=generator, dtype=torch.float64))
    x = torch.cat([x_pos, x_neg])[:, None]
    y = torch.cat([torch.ones(n_pos), torch.zeros(n_neg)]).double()[:, None]
    perm = rng.randperm(n_samples, generator=generator)
    return x[perm], y[perm]


def coarse_levels(n: int) -> Float[Tensor, " n"]:
    """Negatives from the two coarsest levels only (half each)."""
    p = torch.zeros(n, dtype=torch.float64)
    p[: min(2, n)] = 1.0 / min(2, n)
    return p


def spread_levels(n: int) -> Float[Tensor, " n"]:
    r"""Negatives from every level :math:`1..n` with equal mass :math:`1/n` (the control).

    Same positives and same finest scale :math:`3^{-n}` as :func:`fine_levels`, but the
    level-:math:`j` classifier of :math:`C_j` already reaches accuracy :math:`\tfrac12 + \tfrac{j}{2n}`:
    coarse approximations carry signal (a rising approximation curve, ``malach2019deeper``).
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return torch.full((n,), 1.0 / n, dtype=torch.float64)


def fine_levels(n: int) -> Float[Tensor, " n"]:
    """Negatives from the finest level :math:`n` only."""
    p = torch.zeros(n, dtype=torch.float64)
    p[-1] = 1.0
    return p
