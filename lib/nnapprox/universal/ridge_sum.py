r"""A Barron target whose variance does not depend on the dimension, and a fixed-basis foil.

Universal approximation chapter, section "Barron: a rate free of dimension"
(Barron 1993, ``barron1993universal``). With orthonormal directions :math:`v_1, \dots, v_J`
in :math:`\mathbb R^d` (:math:`J \le d`) the target is an average of cosine ridge units,

.. math::  f(x) = \frac1J\sum_{j=1}^J \mathbb E_{r\sim\mathcal N(0, s^2)} \cos(r\, v_j\cdot x)
                = \frac1J\sum_{j=1}^J e^{-s^2 (v_j\cdot x)^2/2},

and Maurey's approximant averages :math:`n` units :math:`\cos(r_i\, v_{j_i}\cdot x)` drawn
from that same distribution (:math:`j_i` uniform, :math:`r_i \sim \mathcal N(0, s^2)`). For
inputs :math:`x \sim \mathcal N(0, I_d)` the projections :math:`t_j = v_j\cdot x` are i.i.d.
:math:`\mathcal N(0, 1)` in every dimension, and with :math:`\mathbb E e^{-a t^2} = (1 + 2a)^{-1/2}`

.. math::  \mathbb E_\omega\|f_n - f\|^2_{L^2(\mu)} = \frac{C}{n},\qquad
           C = \tfrac12\big(1 + (1 + 4s^2)^{-1/2}\big) - \mathbb E_\mu f^2,

.. math::  \mathbb E_\mu f^2 = \tfrac1J (1 + 2s^2)^{-1/2} + (1 - \tfrac1J)(1 + s^2)^{-1},\qquad
           \mathbb E_\mu f = (1 + s^2)^{-1/2},

so the *relative* error :math:`C / (n \operatorname{Var}_\mu f)` is the same in every dimension.

The foil, :func:`fixed_basis_relative_mse`, is a linear method with a basis fixed before the
target is seen: :math:`n` cosine units :math:`\cos(r\,u\cdot x + b)` with the same radial law
:math:`r \sim \mathcal N(0, s^2)` but directions :math:`u` uniform on the sphere and phases
:math:`b` uniform, and output weights fitted by least squares on training points.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox import rng


def _check(d: int, J: int, s: float) -> None:
    if not (1 <= J <= d):
        raise ValueError(f"need 1 <= J <= d (orthonormal directions), got J={J}, d={d}")
    if s <= 0:
        raise ValueError(f"the scale s must be > 0, got {s}")


def ridge_directions(d: int, J: int, generator: torch.Generator) -> Float[Tensor, "J d"]:
    r"""``J`` orthonormal directions, a uniformly random rotation of the first ``J`` axes."""
    _check(d, J, 1.0)
    g = rng.randn(d, J, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    return (q * torch.sign(torch.diagonal(r))[None, :]).T.contiguous()


def ridge_sum_target(x: Float[Tensor, "batch d"], V: Float[Tensor, "J d"], s: float) -> Float[Tensor, " batch"]:
    r""":math:`f(x) = \frac1J\sum_j e^{-s^2 (v_j\cdot x)^2/2}`."""
    return torch.exp(-0.5 * s**2 * (x @ V.T) ** 2).mean(-1)


def ridge_sum_moments(J: int, s: float) -> dict[str, float]:
    r"""Closed forms for :math:`x\sim\mathcal N(0, I_d)`: ``C`` (Maurey's constant), ``var`` (of f), ``relative`` = C/var."""
    _check(J, J, s)
    a = s**2
    second = (1 + 2 * a) ** -0.5 / J + (1 - 1 / J) / (1 + a)  # E f^2
    C = 0.5 * (1 + (1 + 4 * a) ** -0.5) - second
    var = second - 1 / (1 + a)
    return {"C": C, "var": var, "relative": C / var}


def maurey_ridge_relative_mse(
    d: int,
    n_values: list[int],
    generator: torch.Generator,
    *,
    J: int = 2,
    s: float = 2.0,
    n_repeats: int = 40,
    n_test: int = 256,
) -> Float[Tensor, "n_repeats n_values"]:
    r"""Relative MSE :math:`\|f_n - f\|^2 / \operatorname{Var}_\mu f` per repeat (rows) and ``n``.

    Each repeat draws new directions, new units (nested prefixes give every ``n``) and new
    test inputs; the variance is the closed form of :func:`ridge_sum_moments`. Float64.
    """
    _check(d, J, s)
    if n_repeats < 2 or n_test < 1 or not n_values or min(n_values) < 1:
        raise ValueError("need n_repeats >= 2, n_test >= 1 and a non-empty list of n >= 1")
    var = ridge_sum_moments(J, s)["var"]
    n_max, idx = max(n_values), torch.tensor(n_values) - 1
    out = torch.zeros(n_repeats, len(n_values), dtype=torch.float64)
    for k in range(n_repeats):
        V = ridge_directions(d, J, generator)
        j = torch.randint(J, (n_max,), generator=generator)
        r = s * rng.randn(n_max, generator=generator, dtype=torch.float64)
        x = rng.randn(n_test, d, generator=generator, dtype=torch.float64)
        units = torch.cos(r[:, None] * (x @ V[j].T).T)  # (n_max, n_test)
        f_n = units.cumsum(0)[idx] / (idx[:, None] + 1)
        out[k] = ((f_n - ridge_sum_target(x, V, s)[None]) ** 2).mean(1) / var
    return out


def fixed_basis_relative_mse(
    d: int,
    n_values: list[int],
    generator: torch.Generator,
    *,
    J: int = 2,
    s: float = 2.0,
    train_factor: int = 4,
    n_test: int = 2048,
    ridge: float = 1e-4,
) -> Float[Tensor, " n_values"]:
    r"""Held-out relative MSE of least squares on ``n`` fixed cosine units (isotropic directions).

    The basis :math:`\cos(r_i\,u_i\cdot x + b_i)` (plus a constant) is drawn without looking at
    the target; the output weights are fitted on ``train_factor * n`` points by least squares with a small
    ridge penalty ``ridge`` per point (it keeps the fit stable when the basis is nearly collinear).
    """
    _check(d, J, s)
    if train_factor < 2 or n_test < 1 or ridge < 0 or not n_values or min(n_values) < 1:
        raise ValueError("need train_factor >= 2, n_test >= 1, ridge >= 0 and a non-empty list of n >= 1")
    V = ridge_directions(d, J, generator)
    var = ridge_sum_moments(J, s)["var"]
    n_max = max(n_values)
    u = rng.randn(n_max, d, generator=generator, dtype=torch.float64)
    omega = s * rng.randn(n_max, 1, generator=generator, dtype=torch.float64) * u / u.norm(dim=1, keepdim=True)
    b = 2 * math.pi * torch.rand(n_max, generator=generator, dtype=torch.float64)
    x_test = rng.randn(n_test, d, generator=generator, dtype=torch.float64)
    y_test = ridge_sum_target(x_test, V, s)
    out = []
    for n in n_values:
        x = rng.randn(train_factor * n, d, generator=generator, dtype=torch.float64)
        feats = lambda z: torch.cat([torch.cos(z @ omega[:n].T + b[:n]), torch.ones(len(z), 1, dtype=z.dtype)], 1)  # noqa: E731
        F = feats(x)
        gram = F.T @ F + ridge * len(x) * torch.eye(n + 1, dtype=F.dtype)  # ridge: a stable fit
        coef = torch.linalg.solve(gram, F.T @ ridge_sum_target(x, V, s))
        out.append(float(((feats(x_test) @ coef - y_test) ** 2).mean()) / var)
    return torch.tensor(out, dtype=torch.float64)
