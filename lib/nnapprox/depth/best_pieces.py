r"""The best 0-1 error of any :math:`p`-piece function on the alternating points, exactly.

Chapter "Depth separation", section "Shallow networks need exponential width"
(``telgarsky2015representation``).

Take the :math:`n` alternating points :math:`x_i = i/n`, :math:`y_i = i \bmod 2`
(:func:`~nnapprox.depth.sawtooth.alternating_points`) and classify by
:math:`\mathbb 1[f(x) \ge \tfrac12]`. On the sorted points, a function only matters through
the 0/1 label sequence it produces, and that sequence can only *switch* label a limited
number of times:

* an affine piece crosses the level :math:`\tfrac12` at most once, so a **continuous**
  function with :math:`p` affine pieces gives at most :math:`p` switches; conversely every
  sequence with :math:`1 \le s \le p` switches comes from a continuous :math:`p`-piece
  function: choose a crossing :math:`c_j` between runs :math:`j` and :math:`j+1` and a
  point :math:`m_j` of each interior run, put a kink at :math:`m_j` with value
  :math:`\tfrac12 \pm a_j` on the side run :math:`j` needs, with
  :math:`a_{j+1} = a_j (m_{j+1} - c_j)/(c_j - m_j)` so that the segment between consecutive
  kinks crosses :math:`\tfrac12` exactly at :math:`c_j`, and continue the end pieces
  through :math:`(c_1, \tfrac12)` and :math:`(c_s, \tfrac12)` (:math:`s - 1` kinks,
  :math:`s` pieces);
* a function with :math:`p` pieces that may jump between them can switch once inside each
  piece and once at each of the :math:`p - 1` jumps: at most :math:`2p - 1` switches.

So the best error over :math:`p`-piece functions is the best error over label sequences
with at most :math:`s` switches, a dynamic program over the points
(:func:`min_errors_with_switches`, :math:`O(n s)`): with :math:`e_i(j, c)` the fewest
mistakes on the first :math:`i` points using :math:`j` switches and ending in label
:math:`c`,

.. math::  e_{i+1}(j, c) = \min\big(e_i(j, c),\ e_i(j - 1, 1 - c)\big) + \mathbb 1[y_{i+1} \ne c].

For the alternating labels it has a closed form (:func:`best_error_closed_form`): runs of
length :math:`r_1, \dots, r_{s+1}` cost at least :math:`\sum_j \lfloor r_j/2 \rfloor \ge
(n - s - 1)/2` mistakes, and :math:`s` runs of length 1 plus one long run attain
:math:`\lfloor (n - s)/2 \rfloor`. Telgarsky's counting bound :math:`(n - 4p)/(3n)` lies
below both versions (:func:`~nnapprox.depth.sawtooth.telgarsky_error_lower_bound`).
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Shaped
from torch import Tensor


def min_errors_with_switches(y: Shaped[Tensor, " n"], s_max: int) -> Tensor:
    r"""Fewest mismatches with ``y`` of a 0/1 sequence with at most ``s`` switches, for ``s = 0..s_max``.

    Returns an integer tensor of shape ``(s_max + 1,)`` (non-increasing in ``s``).
    """
    y = torch.as_tensor(y).reshape(-1)
    if y.numel() == 0 or not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("y must be a non-empty sequence of 0/1 labels")
    if not isinstance(s_max, int) or s_max < 0:
        raise ValueError(f"s_max must be an integer >= 0, got {s_max!r}")
    big = y.numel() + 1
    yl = y.to(torch.long)
    # e[j, c]: fewest mistakes so far with exactly j switches, current label c
    e = torch.full((s_max + 1, 2), big, dtype=torch.long)
    e[0, 0], e[0, 1] = int(yl[0] != 0), int(yl[0] != 1)
    labels = torch.tensor([0, 1])
    for yi in yl[1:]:
        switched = torch.full_like(e, big)
        switched[1:] = e[:-1].flip(1)  # came from the other label with one switch fewer
        e = torch.minimum(e, switched) + (labels != yi).long()[None, :]
    return torch.cummin(e.min(dim=1).values, dim=0).values  # at most s switches


def max_switches(p: int, continuous: bool = True) -> int:
    r"""Most label switches of a :math:`p`-piece function: :math:`p` if continuous, :math:`2p - 1` otherwise."""
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"p must be a positive integer, got {p!r}")
    return p if continuous else 2 * p - 1


def best_piecewise_errors(n: int, p_max: int, continuous: bool = True) -> Float[Tensor, " p_max"]:
    r"""Best 0-1 error on the :math:`n` alternating points of any function with :math:`p` affine pieces.

    Entry ``p - 1`` is the minimum over all (continuous, or arbitrary if ``continuous`` is
    False) :math:`p`-piece functions, :math:`p = 1, \dots,` ``p_max``, computed exactly by
    :func:`min_errors_with_switches`.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(p_max, int) or p_max < 1:
        raise ValueError(f"p_max must be a positive integer, got {p_max!r}")
    y = torch.arange(n) % 2
    s = [max_switches(p, continuous) for p in range(1, p_max + 1)]
    errs = min_errors_with_switches(y, max(s))
    return errs[torch.tensor(s)].to(torch.float64) / n


def best_error_closed_form(n: int, s: int) -> float:
    r""":math:`\lfloor (n - s)/2 \rfloor / n`: the best error with at most :math:`s` switches on the alternating points."""
    if not isinstance(n, int) or n < 1 or not isinstance(s, int) or s < 0:
        raise ValueError(f"need integers n >= 1 and s >= 0, got n={n!r}, s={s!r}")
    return max(0, (n - s) // 2) / n


def telgarsky_width_limit(k: int, l: int) -> int:
    r"""Largest width :math:`m` with :math:`m \le 2^{(k-3)/l - 1}`, the hypothesis of Telgarsky's theorem.

    An :math:`l`-layer network of such width has at most :math:`(2m)^l \le 2^{k-3}` pieces,
    hence 0-1 error at least :math:`1/6` on the :math:`2^k` alternating points. Returns 0
    when no width qualifies.
    """
    if not isinstance(k, int) or k < 1 or not isinstance(l, int) or l < 1:
        raise ValueError(f"need integers k >= 1 and l >= 1, got k={k!r}, l={l!r}")
    m = 0
    while (2 * (m + 1)) ** l <= 2 ** (k - 3):  # (2m)^l <= 2^(k-3) iff m <= 2^((k-3)/l - 1)
        m += 1
    return m
