r"""Barron's dimension-free rate, made concrete with Maurey's sampling argument.

Universal approximation chapter, section "Barron: a rate free of dimension"
(Barron 1993, ``barron1993universal``). A function that is an *average* of units,

.. math::  f(x) = \mathbb E_{\omega \sim \mathcal N(0, I_d)} \cos(\omega \cdot x) = e^{-\|x\|^2/2},

is approximated by the empirical average of :math:`n` random units,
:math:`f_n(x) = \frac1n \sum_{j=1}^n \cos(\omega_j \cdot x)`, a one-hidden-layer network with
cosine activation. Its error is a variance (Maurey's lemma):

.. math::  \mathbb E_\omega \|f_n - f\|_{L^2(\mu)}^2 = \frac{C_d}{n}, \qquad
           C_d = \mathbb E_{x\sim\mu} \operatorname{Var}_\omega \cos(\omega\cdot x)
               = \mathbb E_{x\sim\mu}\Big[\tfrac{1 + e^{-2\|x\|^2}}{2} - e^{-\|x\|^2}\Big],

a rate :math:`n^{-1}` whatever the dimension :math:`d`. For inputs
:math:`x \sim \mu = \mathcal N(0, \tfrac{s}{d} I_d)` (so :math:`\mathbb E\|x\|^2 = s`) the
constant is closed-form: :math:`\mathbb E_x e^{-c\|x\|^2} = (1 + 2cs/d)^{-d/2}`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from ..progress import progress
from nnapprox import rng


def gaussian_target(x: Float[Tensor, "batch d"]) -> Float[Tensor, " batch"]:
    r""":math:`f(x) = e^{-\|x\|^2/2}`."""
    return torch.exp(-0.5 * (x**2).sum(-1))


def random_cosine_average(
    omega: Float[Tensor, "n d"], x: Float[Tensor, "batch d"]
) -> Float[Tensor, "n batch"]:
    r"""All prefix averages :math:`f_m(x) = \frac1m\sum_{j\le m}\cos(\omega_j\cdot x)`, :math:`m = 1..n`."""
    units = torch.cos(omega @ x.T)  # (n, batch)
    m = torch.arange(1, omega.shape[0] + 1, dtype=x.dtype, device=x.device)[:, None]
    return units.cumsum(0) / m


def maurey_constant(d: int, s: float = 2.0) -> float:
    r""":math:`C_d` for :math:`x \sim \mathcal N(0, \tfrac sd I_d)`, in closed form."""
    if d < 1 or s <= 0:
        raise ValueError(f"need d >= 1 and s > 0, got d={d}, s={s}")
    moment = lambda c: (1.0 + 2.0 * c * s / d) ** (-d / 2.0)  # noqa: E731  E exp(-c |x|^2)
    return 0.5 * (1.0 + moment(2.0)) - moment(1.0)


def maurey_mse(
    d: int,
    n_values: list[int],
    generator: torch.Generator,
    *,
    n_repeats: int = 200,
    n_test: int = 256,
    s: float = 2.0,
    device: torch.device | str = "cpu",
    return_repeats: bool = False,
) -> Float[Tensor, " n_values"] | Float[Tensor, "n_repeats n_values"]:
    r"""Monte Carlo estimate of :math:`\mathbb E\|f_n - f\|^2_{L^2(\mu)}` for each ``n`` in ``n_values``.

    Each repeat draws fresh units :math:`\omega_1..\omega_{n_\max}` and fresh test inputs
    :math:`x \sim \mathcal N(0, \tfrac sd I_d)`; nested prefixes give every ``n`` at once.
    Computed in float64. With ``return_repeats=True`` the result is the
    ``(n_repeats, len(n_values))`` tensor of per-repeat errors (independent rows, for standard
    errors); otherwise their mean over repeats.
    """
    if d < 1 or n_repeats < 1 or n_test < 1 or not n_values or min(n_values) < 1:
        raise ValueError("need d, n_repeats, n_test >= 1 and a non-empty list of n >= 1")
    n_max = max(n_values)
    idx = torch.tensor(n_values, device=device) - 1
    per_repeat = torch.zeros(n_repeats, len(n_values), dtype=torch.float64, device=device)
    for r in progress(range(n_repeats), desc=f"Maurey d={d}"):
        omega = rng.randn(n_max, d, generator=generator, dtype=torch.float64).to(device)
        x = (rng.randn(n_test, d, generator=generator, dtype=torch.float64) * (s / d) ** 0.5).to(device)
        f_n = random_cosine_average(omega, x)[idx]  # (len(n_values), n_test)
        per_repeat[r] = ((f_n - gaussian_target(x)[None, :]) ** 2).mean(1)
    per_repeat = per_repeat.cpu()
    return per_repeat if return_repeats else per_repeat.mean(0)


def loglog_slope(n: Float[Tensor, " k"], err: Float[Tensor, " k"]) -> float:
    r"""Least-squares slope of :math:`\log \text{err}` against :math:`\log n`."""
    if (n <= 0).any() or (err <= 0).any():
        raise ValueError("loglog_slope needs positive inputs")
    u, v = n.double().log(), err.double().log()
    u, v = u - u.mean(), v - v.mean()
    return float((u * v).sum() / (u * u).sum())
