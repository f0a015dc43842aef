r"""The square bump with 13 parameters: ReLU units vs polynomials vs Fourier series.

Universal approximation chapter, section "Not all universal approximators are equal".
The target is the indicator of an interval inside :math:`[0, 1]`,

.. math::  \mathbb 1_{[a, b]}(x), \qquad 0 < a < b < 1,

measured in :math:`L^2([0, 1])`. Three universal families get 13 parameters each:

* **ReLU** (4 hidden units: 4 weights, 4 biases, 4 output weights, 1 output bias): two ramps
  of width :math:`\delta` centred on the jumps,

  .. math::  f_\delta(x) = \tfrac1\delta\big[\sigma(x-a+\tfrac\delta2) - \sigma(x-a-\tfrac\delta2)
             - \sigma(x-b+\tfrac\delta2) + \sigma(x-b-\tfrac\delta2)\big],

  whose error is exactly :math:`\|f_\delta - \mathbb 1_{[a,b]}\|_2 = \sqrt{\delta/6}` (each
  half-ramp contributes :math:`\int_0^{\delta/2} (t/\delta)^2\,dt = \delta/24`).
* **Polynomial** of degree 12: the :math:`L^2` projection on shifted Legendre polynomials
  :math:`\tilde P_j(x) = P_j(2x-1)`, coefficients :math:`c_j = (2j+1)\int_a^b \tilde P_j`.
* **Fourier** partial sum with :math:`K = 6` (1 + 2K coefficients), period 1.

Near a jump the Fourier partial sums overshoot by a fraction of the jump that tends to
:math:`\mathrm{Si}(\pi)/\pi - 1/2 \approx 0.0895` as :math:`K` grows (the Gibbs phenomenon):
the height of the overshoot does not shrink, only its width (:func:`fourier_overshoot_exact`).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params, relu_mlp

GIBBS_CONSTANT = 0.08948987223608362  # Si(pi)/pi - 1/2


def _check_interval(a: float, b: float) -> None:
    if not 0.0 < a < b < 1.0:
        raise ValueError(f"the bump [a, b] must satisfy 0 < a < b < 1, got a={a}, b={b}")


def square_bump(x: Float[Tensor, " n"], a: float = 0.25, b: float = 0.75) -> Float[Tensor, " n"]:
    r"""The target :math:`\mathbb 1_{[a, b]}(x)`."""
    return ((x >= a) & (x <= b)).to(x.dtype)


def relu_bump_weights(delta: float, a: float = 0.25, b: float = 0.75, dtype: torch.dtype = torch.float64) -> Params:
    r"""Weights of :math:`f_\delta` (4 ReLU units, 13 parameters) for :func:`~nnapprox.universal.relu_mlp`."""
    _check_interval(a, b)
    if not 0.0 < delta <= min(2 * a, 2 * (1 - b), b - a):
        raise ValueError(f"delta must lie in (0, min(2a, 2(1-b), b-a)] so the ramps stay inside [0, 1] and apart; got {delta}")
    t = lambda v: torch.tensor(v, dtype=dtype)  # noqa: E731
    return {
        "W_1": t([[1.0], [1.0], [1.0], [1.0]]),
        "b_1": t([-a + delta / 2, -a - delta / 2, -b + delta / 2, -b - delta / 2]),
        "W_2": t([[1.0, -1.0, -1.0, 1.0]]) / delta,
        "b_2": t([0.0]),
    }


def relu_bump_breakpoints(delta: float, a: float = 0.25, b: float = 0.75) -> list[float]:
    """Points where the ReLU approximation or the target changes formula (for exact quadrature)."""
    return sorted({0.0, a - delta / 2, a, a + delta / 2, b - delta / 2, b, b + delta / 2, 1.0})


def relu_bump_error_formula(delta: float) -> float:
    r"""The exact :math:`L^2` error :math:`\sqrt{\delta/6}` of :func:`relu_bump_weights`."""
    return math.sqrt(delta / 6.0)


# ---------------------------------------------------------------------------- Legendre
def legendre_table(t: Float[Tensor, " n"], degree: int) -> Float[Tensor, "n degree_plus_one"]:
    r"""Legendre polynomials :math:`P_0..P_{\text{degree}}` at ``t`` (Bonnet's recurrence)."""
    P = [torch.ones_like(t), t]
    for j in range(1, degree):
        P.append(((2 * j + 1) * t * P[j] - j * P[j - 1]) / (j + 1))
    return torch.stack(P[: degree + 1], dim=1)


def legendre_bump_coefficients(degree: int, a: float = 0.25, b: float = 0.75) -> Float[Tensor, " degree_plus_one"]:
    r""":math:`c_j = (2j+1)\int_a^b P_j(2x-1)\,dx`, exactly via :math:`\int P_j = (P_{j+1}-P_{j-1})/(2j+1)`."""
    _check_interval(a, b)
    if degree < 0:
        raise ValueError(f"degree must be >= 0, got {degree}")
    ends = torch.tensor([2 * a - 1, 2 * b - 1], dtype=torch.float64)
    P = legendre_table(ends, degree + 1)  # (2, degree+2)
    c = torch.empty(degree + 1, dtype=torch.float64)
    c[0] = b - a
    for j in range(1, degree + 1):
        antiderivative = (P[:, j + 1] - P[:, j - 1]) / (2 * j + 1)
        c[j] = (2 * j + 1) / 2 * (antiderivative[1] - antiderivative[0])  # dx = dt / 2
    return c


def legendre_eval(c: Float[Tensor, " degree_plus_one"], x: Float[Tensor, " n"]) -> Float[Tensor, " n"]:
    r""":math:`\sum_j c_j P_j(2x - 1)`."""
    return legendre_table(2 * x.double() - 1, len(c) - 1) @ c


# ---------------------------------------------------------------------------- Fourier
def fourier_bump_coefficients(K: int, a: float = 0.25, b: float = 0.75) -> tuple[Tensor, Tensor, Tensor]:
    r"""Coefficients of the period-1 Fourier series of the bump up to frequency ``K``.

    :math:`f \approx \alpha_0 + \sum_{k=1}^K \alpha_k \cos 2\pi k x + \beta_k \sin 2\pi k x`
    with :math:`\alpha_0 = b - a`, :math:`\alpha_k = 2\int_a^b \cos 2\pi k x`,
    :math:`\beta_k = 2\int_a^b \sin 2\pi k x`. Returns ``(alpha_0, alpha, beta)``.
    """
    _check_interval(a, b)
    if K < 0:
        raise ValueError(f"K must be >= 0, got {K}")
    k = torch.arange(1, K + 1, dtype=torch.float64)
    w = 2 * math.pi * k
    alpha = 2 * (torch.sin(w * b) - torch.sin(w * a)) / w
    beta = 2 * (torch.cos(w * a) - torch.cos(w * b)) / w
    return torch.tensor(b - a, dtype=torch.float64), alpha, beta


def fourier_eval(coefficients: tuple[Tensor, Tensor, Tensor], x: Float[Tensor, " n"]) -> Float[Tensor, " n"]:
    """The Fourier partial sum at ``x``."""
    alpha_0, alpha, beta = coefficients
    w = 2 * math.pi * torch.arange(1, len(alpha) + 1, dtype=torch.float64)
    angle = x.double()[:, None] * w[None, :]
    return alpha_0 + torch.cos(angle) @ alpha + torch.sin(angle) @ beta


def fourier_overshoot(K: int, a: float = 0.25, b: float = 0.75, n_grid: int = 200_001) -> float:
    r"""Gibbs overshoot :math:`\max_x S_K(x) - 1` on a grid of ``n_grid`` points of :math:`[0, 1]` (jump height 1)."""
    x = torch.linspace(0.0, 1.0, n_grid, dtype=torch.float64)
    return float(fourier_eval(fourier_bump_coefficients(K, a, b), x).max() - 1.0)


def fourier_overshoot_grid_error(K: int, a: float = 0.25, b: float = 0.75, n_grid: int = 200_001) -> float:
    r"""How far the grid maximum of :func:`fourier_overshoot` can fall below the true maximum.

    At an interior maximum :math:`x^*` of :math:`S_K` the derivative vanishes, and the nearest
    grid point is within :math:`h/2`, :math:`h = 1/(n_\text{grid} - 1)`, so by Taylor
    :math:`S_K(x^*) - \max_\text{grid} S_K \le \tfrac12\|S_K''\|_\infty (h/2)^2` with
    :math:`\|S_K''\|_\infty \le \sum_{k \le K} (2\pi k)^2 \sqrt{\alpha_k^2 + \beta_k^2}`.
    """
    if n_grid < 2:
        raise ValueError(f"n_grid must be >= 2, got {n_grid}")
    _, alpha, beta = fourier_bump_coefficients(K, a, b)
    w = 2 * math.pi * torch.arange(1, K + 1, dtype=torch.float64)
    second = float((w**2 * torch.sqrt(alpha**2 + beta**2)).sum())
    h = 1.0 / (n_grid - 1)
    return 0.5 * second * (h / 2) ** 2


def fourier_overshoot_exact(K: int) -> float:
    r"""Closed form of the overshoot of :math:`S_K` for the centred bump :math:`\mathbb 1_{[1/4, 3/4]}`.

    Only the odd frequencies :math:`k = 1, 3, \dots, 2n - 1` (:math:`n = \lceil K/2 \rceil`)
    are present: :math:`S_K` is half a square wave plus :math:`\tfrac12`. Its first maximum after
    the jump at :math:`1/4` sits at :math:`1/4 + 1/(4n)`, where

    .. math::  S_K - 1 = \frac{M_n}{\pi} - \frac12, \qquad
               M_n = \frac{\pi}{n}\sum_{j=1}^n \operatorname{sinc}\Big(\frac{(2j-1)\pi}{2n}\Big),

    :math:`M_n` being the midpoint rule with :math:`n` cells for
    :math:`\mathrm{Si}(\pi) = \int_0^\pi \frac{\sin t}{t}\,dt`; as :math:`n \to \infty` the
    overshoot tends to :data:`GIBBS_CONSTANT` from above: the midpoint rule's error is
    :math:`\mathrm{Si}(\pi) - M_n = \tfrac{h^2}{24}(g'(\pi) - g'(0)) + O(h^4) = -\tfrac{\pi}{24n^2}
    + O(n^{-4})` with :math:`g = \operatorname{sinc}`, :math:`h = \pi/n`, so the overshoot is
    :math:`\mathrm{Si}(\pi)/\pi - \tfrac12 + \tfrac{1}{24n^2} + O(n^{-4})`. The height does
    not shrink with :math:`K`; the peak's distance :math:`1/(4n)` from the jump does.
    """
    if not isinstance(K, int) or K < 1:
        raise ValueError(f"K must be an integer >= 1, got {K!r}")
    n = (K + 1) // 2
    t = (2 * torch.arange(1, n + 1, dtype=torch.float64) - 1) * math.pi / (2 * n)
    M_n = math.pi / n * float((torch.sin(t) / t).sum())
    return M_n / math.pi - 0.5


# ---------------------------------------------------------------------------- errors
def piecewise_l2_error(
    f: Callable[[Tensor], Tensor], g: Callable[[Tensor], Tensor], breakpoints: list[float], n_nodes: int = 16, n_sub: int = 1
) -> float:
    r""":math:`\big(\int_0^1 (f-g)^2\big)^{1/2}` by Gauss–Legendre on each piece between ``breakpoints``.

    Exact (to rounding) when :math:`(f-g)^2` is a polynomial of degree :math:`< 2\,n_\text{nodes}`
    on every piece; ``n_sub`` splits every piece further for smooth non-polynomial integrands.
    """
    import numpy as np

    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    nodes_t, weights_t = torch.tensor(nodes), torch.tensor(weights)
    edges = torch.tensor(sorted(set(breakpoints)), dtype=torch.float64)
    if n_sub > 1:
        edges = torch.cat([torch.linspace(float(lo), float(hi), n_sub + 1, dtype=torch.float64)[:-1]
                           for lo, hi in zip(edges[:-1], edges[1:])] + [edges[-1:]])
    lo, hi = edges[:-1], edges[1:]
    x = (lo[:, None] + hi[:, None]) / 2 + (hi - lo)[:, None] / 2 * nodes_t[None, :]  # (pieces, nodes)
    # evaluate the target on the interior of each piece: its jumps sit at the breakpoints
    sq = (f(x.reshape(-1)) - g(x.reshape(-1))).reshape(x.shape) ** 2
    return float(torch.sqrt(((hi - lo)[:, None] / 2 * weights_t[None, :] * sq).sum()))


def relu_bump_l2_error(delta: float, a: float = 0.25, b: float = 0.75) -> float:
    r"""Quadrature value of :math:`\|f_\delta - \mathbb 1_{[a,b]}\|_{L^2[0,1]}` for the network of :func:`relu_bump_weights`."""
    params = relu_bump_weights(delta, a, b)
    net = lambda x: relu_mlp(params, x[:, None])[:, 0]  # noqa: E731
    return piecewise_l2_error(net, lambda x: square_bump(x, a, b), relu_bump_breakpoints(delta, a, b), n_nodes=4)


def legendre_bump_l2_error(degree: int, a: float = 0.25, b: float = 0.75) -> float:
    """Quadrature value of the :math:`L^2` error of the degree-``degree`` Legendre projection."""
    c = legendre_bump_coefficients(degree, a, b)
    return piecewise_l2_error(lambda x: legendre_eval(c, x), lambda x: square_bump(x, a, b),
                              [0.0, a, b, 1.0], n_nodes=degree + 2)


def fourier_bump_l2_error(K: int, a: float = 0.25, b: float = 0.75) -> float:
    """Quadrature value of the :math:`L^2` error of the Fourier partial sum with ``K`` frequencies."""
    coefficients = fourier_bump_coefficients(K, a, b)
    return piecewise_l2_error(lambda x: fourier_eval(coefficients, x), lambda x: square_bump(x, a, b),
                              [0.0, a, b, 1.0], n_nodes=32, n_sub=8)


def _check_interval(a: float, b: float) -> None:
    if not 0.0 < a < b < 1.0:
        raise ValueError(f"need 0 < a < b < 1 for the bump interval, got a={a}, b={b}")


def legendre_bump_l2_error_exact(degree: int, a: float = 0.25, b: float = 0.75) -> float:
    r"""Closed-form :math:`L^2` error of the degree-``degree`` Legendre projection of the bump.

    With :math:`I_j = \int_a^b P_j(2x-1)\,dx = \tfrac12\big[\tfrac{P_{j+1}-P_{j-1}}{2j+1}\big]_{2a-1}^{2b-1}`
    (and :math:`I_0 = b-a`), Parseval gives :math:`\|f - \Pi_p f\|^2 = (b-a) - \sum_{j\le p}(2j+1)I_j^2`.
    """
    if not isinstance(degree, int) or degree < 0:
        raise ValueError(f"degree must be a non-negative int, got {degree!r}")
    _check_interval(a, b)
    from numpy.polynomial import legendre as L

    lo, hi = 2 * a - 1, 2 * b - 1
    P = lambda j, t: float(L.legval(t, [0.0] * j + [1.0]))  # noqa: E731
    captured = (b - a) ** 2  # j = 0: I_0 = b - a, weight 2*0 + 1
    for j in range(1, degree + 1):
        anti = lambda t: (P(j + 1, t) - P(j - 1, t)) / (2 * j + 1)  # noqa: E731
        I_j = 0.5 * (anti(hi) - anti(lo))
        captured += (2 * j + 1) * I_j**2
    return math.sqrt(max((b - a) - captured, 0.0))


def fourier_bump_l2_error_exact(K: int, a: float = 0.25, b: float = 0.75) -> float:
    r"""Closed-form (Parseval) :math:`L^2` error of the Fourier partial sum with ``K`` frequencies.

    :math:`\|f - S_K f\|^2 = (b-a) - (b-a)^2 - \sum_{k=1}^K 2\sin^2(\pi k (b-a))/(\pi k)^2`;
    for the chapter's bump and :math:`K = 6` the squared error is 0.0167 (error 0.1294).
    """
    if not isinstance(K, int) or K < 0:
        raise ValueError(f"K must be a non-negative int, got {K!r}")
    _check_interval(a, b)
    w = b - a
    tail = sum(2 * math.sin(math.pi * k * w) ** 2 / (math.pi * k) ** 2 for k in range(1, K + 1))
    err2 = w - w**2 - tail
    return math.sqrt(max(err2, 0.0))
