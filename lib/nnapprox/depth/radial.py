r"""Radial functions: the ball indicator with three layers.

Chapter "Depth separation", section "Radial functions" (``eldan2016power``,
``safran2017depth``).

Eldan & Shamir (2016) show that some radial functions are cheap for 3-layer networks and
need width exponential in :math:`d` with 2 layers (to a constant accuracy); Safran & Shamir
(2017) prove a separation of this kind for the indicator of the ball
:math:`\mathbb 1[\|x\|^2 \le R^2]` in :math:`\mathbb R^d` (and of ellipses), for an
accuracy that shrinks polynomially with :math:`d`. The 3-layer construction:

1. per coordinate, the piecewise-linear interpolant :math:`q` of :math:`x^2` on
   :math:`k` equal intervals of :math:`[-1, 1]` (:math:`h = 2/k`), written with :math:`k`
   ReLUs; it satisfies :math:`0 \le q(x) - x^2 \le h^2/4`, with equality at the midpoints;
2. sum: :math:`\hat r^2 = \sum_i q(x_i)`, so :math:`0 \le \hat r^2 - \|x\|^2 \le d h^2/4 = d/k^2`;
3. a ramp of width :math:`2\delta` in :math:`\hat r^2`:
   :math:`\psi(u) = \sigma\!\big(\tfrac{R^2 + \delta - u}{2\delta}\big) - \sigma\!\big(\tfrac{R^2 - \delta - u}{2\delta}\big)`.

So the error falls like :math:`1/k^2` in the number of knots, and the output equals the
indicator exactly wherever :math:`|\|x\|^2 - R^2| > \delta + d/k^2`.

Thresholded at :math:`\tfrac12` the ramp decides :math:`\hat r^2 < R^2`, and since
:math:`\hat r^2 \ge \|x\|^2` the only mistakes are points inside the ball with
:math:`R^2 - \|x\|^2 < \hat r^2 - \|x\|^2 \le d/k^2`: a shell of width
:math:`O(1/k^2)`, so the misclassified mass falls like :math:`1/k^2`
(:func:`ball_error_rate`).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights, relu_net
from nnapprox import rng


def square_interpolant_weights(k: int, dtype: torch.dtype = torch.float64) -> Weights:
    r"""One hidden layer of :math:`k` ReLUs computing the interpolant :math:`q` of :math:`x^2` on [-1, 1].

    Knots :math:`t_j = -1 + jh`; :math:`q(x) = 1 + s_0 \sigma(x + 1) + \sum_{j\ge1} (s_j - s_{j-1}) \sigma(x - t_j)`
    with slopes :math:`s_j = t_j + t_{j+1}`. Valid for :math:`x \ge -1`.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    t = torch.linspace(-1.0, 1.0, k + 1, dtype=dtype)
    s = t[:-1] + t[1:]
    c = torch.cat([s[:1], s[1:] - s[:-1]])
    return {"W0": torch.ones(k, 1, dtype=dtype), "b0": -t[:-1], "W1": c[None, :], "b1": torch.ones(1, dtype=dtype)}


def ball_indicator_weights(d: int, k: int, R: float, delta: float, dtype: torch.dtype = torch.float64) -> Weights:
    r"""The 3-layer network :math:`\psi\big(\sum_i q(x_i)\big)` approximating :math:`\mathbb 1[\|x\|^2 \le R^2]` on :math:`[-1,1]^d`.

    Widths ``[d, d*k, 2, 1]``; layer 1 holds the :math:`k` units of :math:`q` for each
    coordinate, layer 2 the two ramp units reading :math:`\hat r^2` linearly.
    """
    if d < 1 or delta <= 0 or R <= 0:
        raise ValueError(f"need d >= 1, R > 0 and delta > 0, got d={d}, R={R}, delta={delta}")
    q = square_interpolant_weights(k, dtype)
    W0 = torch.kron(torch.eye(d, dtype=dtype), q["W0"])  # (d*k, d): coordinate i feeds its k units
    b0 = q["b0"].repeat(d)
    c = q["W1"][0].repeat(d)  # r2_hat = c . h + d * 1
    r2_const = d * float(q["b1"])
    scale = 1.0 / (2 * delta)
    W1 = torch.stack([-scale * c, -scale * c])  # (2, d*k)
    b1 = torch.tensor([scale * (R**2 + delta - r2_const), scale * (R**2 - delta - r2_const)], dtype=dtype)
    return {"W0": W0, "b0": b0, "W1": W1, "b1": b1,
            "W2": torch.tensor([[1.0, -1.0]], dtype=dtype), "b2": torch.zeros(1, dtype=dtype)}


def squared_norm_weights(d: int, k: int, dtype: torch.dtype = torch.float64) -> Weights:
    r"""One hidden layer of :math:`dk` ReLUs computing :math:`\hat r^2 = \sum_i q(x_i)` on :math:`[-1, 1]^d`.

    The first two layers of :func:`ball_indicator_weights` with a linear read-out: coordinate
    :math:`i` feeds its own :math:`k` units of :func:`square_interpolant_weights`.
    """
    if not isinstance(d, int) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    q = square_interpolant_weights(k, dtype)
    return {"W0": torch.kron(torch.eye(d, dtype=dtype), q["W0"]), "b0": q["b0"].repeat(d),
            "W1": q["W1"].repeat(1, d), "b1": d * q["b1"]}


def squared_norm_error_mc(
    d: int, k: int, n: int, generator: torch.Generator, chunk: int = 2048
) -> tuple[float, float, float]:
    r"""Monte Carlo of :math:`\hat r^2(x) - \|x\|^2` for :math:`x` uniform on :math:`[-1, 1]^d`: (mean, standard error, max).

    The network :func:`squared_norm_weights` is evaluated in :math:`d` dimensions. Each
    coordinate falls uniformly in one of the :math:`k` intervals, where the chord error
    :math:`u(h - u)` (:math:`u` uniform on :math:`[0, h]`) has mean :math:`h^2/6` and
    variance :math:`h^4/180`; so the exact mean is :math:`d h^2/6 = 2d/(3k^2)`, two thirds of
    the supremum :math:`d/k^2` (:func:`squared_norm_error_bound`).
    """
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    w = squared_norm_weights(d, k)
    errs = []
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        x = 2 * rng.rand(m, d, generator=generator, dtype=torch.float64) - 1
        errs.append(relu_net(w, x)[:, 0] - (x**2).sum(dim=1))
    e = torch.cat(errs)
    return float(e.mean()), float(e.std() / n**0.5), float(e.max())


def squared_norm_error_bound(d: int, k: int) -> float:
    r""":math:`d h^2 / 4 = d / k^2`: the sup of :math:`\hat r^2 - \|x\|^2` on :math:`[-1, 1]^d`."""
    return d / k**2


def ball_indicator(x: Float[Tensor, "batch d"], R: float) -> Float[Tensor, "batch 1"]:
    r"""Reference :math:`\mathbb 1[\|x\|^2 \le R^2]`."""
    return ((x**2).sum(dim=1, keepdim=True) <= R**2).to(x.dtype)


def near_sphere_points(
    n: int, d: int, R: float, spread: float, generator: torch.Generator, dtype: torch.dtype = torch.float64
) -> Float[Tensor, "n d"]:
    r"""Points :math:`x = \rho u`, :math:`u` uniform on the sphere, :math:`\rho` uniform on :math:`[R - \text{spread}, R + \text{spread}]`, clipped to the cube."""
    u = rng.randn(n, d, generator=generator, dtype=dtype)
    u = u / u.norm(dim=1, keepdim=True)
    rho = R + spread * (2 * rng.rand(n, 1, generator=generator, dtype=dtype) - 1)
    return (rho * u).clamp(-1.0, 1.0)


def ball_error_rate(
    d: int, k: int, R: float, delta: float, spread: float, n: int, generator: torch.Generator
) -> float:
    r"""Probability that the thresholded construction misclassifies :math:`x = \rho u` (importance-sampled).

    :math:`u` is uniform on the sphere and :math:`\rho` uniform on :math:`[R - s, R + s]`
    (:math:`s` = ``spread``; no clipping to the cube). Mistakes can only
    happen for :math:`\rho \in (\rho_-, R]` with :math:`\rho_-^2 = R^2 - d/k^2` (module
    docstring), so ``n`` radii are drawn in that shell only and

    .. math::  P[\text{wrong}] = P[\rho \in (\rho_-, R]] \cdot P[\text{wrong} \mid \text{shell}]
               = \frac{R - \rho_-}{2 s}\, \widehat{P}[\hat r^2 \ge R^2 \mid \text{shell}].

    For large :math:`k`, :math:`P[\text{wrong}] \approx \mathbb E[\hat r^2 - \|x\|^2] / (4 R s)
    \approx d / (6 R s k^2)` (mean chord error :math:`h^2/6` per coordinate).
    """
    if not 0 < spread <= R:
        raise ValueError(f"need 0 < spread <= R, got spread={spread}, R={R}")
    rho_lo = max(R - spread, max(R**2 - squared_norm_error_bound(d, k), 0.0) ** 0.5)
    u = rng.randn(n, d, generator=generator, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    rho = rho_lo + (R - rho_lo) * rng.rand(n, 1, generator=generator, dtype=torch.float64)  # (n, 1), all <= R: inside
    out = relu_net(ball_indicator_weights(d, k, R, delta), rho * u)[:, 0]
    return float((out <= 0.5).double().mean()) * (R - rho_lo) / (2 * spread)


def balanced_ball_radius(d: int) -> float:
    r"""The radius :math:`R` with :math:`P[\|x\| \le R] = \tfrac12` for :math:`x \sim \mathcal N(0, I_d/d)`.

    :math:`d\|x\|^2 \sim \chi^2_d`, so :math:`R^2` is the median of :math:`\chi^2_d` over
    :math:`d` (close to :math:`1 - \tfrac{2}{3d}`): the ball indicator is then a balanced
    label, and predicting the constant :math:`\tfrac12` has mean squared error :math:`\tfrac14`.
    """
    from scipy.special import gammaincinv

    if d < 1:
        raise ValueError(f"d must be >= 1, got {d}")
    return float(2 * gammaincinv(d / 2, 0.5) / d) ** 0.5


def gaussian_ball_data(
    n: int, d: int, R: float, generator: torch.Generator, *, dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Float[Tensor, "n d"], Float[Tensor, "n 1"]]:
    r"""Fresh samples :math:`x \sim \mathcal N(0, I_d/d)` with labels :math:`y = \mathbb 1[\|x\| \le R]`.

    The training distribution of the trained depth comparison (section "Radial
    functions"; the experiment of ``safran2017depth``, Sec. 6, with a Gaussian input law).
    """
    x = rng.randn(n, d, generator=generator, dtype=dtype, device=device) / d**0.5
    return x, ball_indicator(x, R)


SLAB_HALF_WIDTH = 0.6744897501960817
r"""The median of :math:`|Z|`, :math:`Z \sim \mathcal N(0, 1)`: :math:`\Phi^{-1}(3/4)`."""


def gaussian_slab_data(
    n: int, d: int, u: Float[Tensor, " d"], generator: torch.Generator, *,
    dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
) -> tuple[Float[Tensor, "n d"], Float[Tensor, "n 1"]]:
    r"""Fresh samples :math:`x \sim \mathcal N(0, I_d/d)` with labels :math:`y = \mathbb 1[|u \cdot x| \le c]`.

    A *ridge* target beside the ball of :func:`gaussian_ball_data`: it depends on :math:`x`
    through one direction :math:`u` (normalised here), so four ReLU units of a 2-layer network
    (two ramps along :math:`u`) approximate it as closely as steep ramps allow. With :math:`u \cdot x \sim \mathcal N(0, 1/d)` and
    :math:`c = \Phi^{-1}(3/4)/\sqrt d` (:data:`SLAB_HALF_WIDTH`), :math:`P[y = 1] = \tfrac12`,
    so the constant :math:`\tfrac12` has mean squared error :math:`\tfrac14`, as for the ball.
    """
    if u.dim() != 1 or u.shape[0] != d:
        raise ValueError(f"u must be a vector of length d = {d}, got shape {tuple(u.shape)}")
    norm = float(u.norm())
    if not norm > 0:
        raise ValueError("u must be a nonzero direction")
    x = rng.randn(n, d, generator=generator, dtype=dtype, device=device) / d**0.5
    proj = x @ (u / norm).to(dtype=dtype, device=x.device)
    return x, (proj.abs() <= SLAB_HALF_WIDTH / d**0.5).to(dtype)[:, None]
