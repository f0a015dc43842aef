r"""Staircase targets: a high-degree monomial learned through the lower-degree ones.

Chapter "When gradient descent fails", section "Sparse parities"
({cite}`abbe2021staircase`, {cite}`abbe2022merged`). A target on :math:`x \in \{\pm1\}^d`

.. math::  f(x) = \sum_{m} a_m\, \chi_{S_m}(x), \qquad
           f_{\text{stair}} = x_1 + x_1x_2 + x_1x_2x_3 + x_1x_2x_3x_4 ,

has the staircase property when each :math:`S_m` adds at most one new coordinate to the union
of the previous ones. The monomial :math:`x_1x_2x_3x_4` alone is a degree-4 parity, which SGD
learns slowly (sections on parity); inside the staircase each step is "one coordinate away" from
what is already learned. The networks and SGD are those of :mod:`nnapprox.failures.parity_sgd`,
with the square loss :math:`\tfrac12(p_w(x) - f(x))^2`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..progress import progress
from .parity_sgd import ensemble_forward, init_ensemble, sgd_step
from nnapprox import rng

Target = list[tuple[float, list[int]]]  # (coefficient a_m, subset S_m as 0-based coordinates)


def staircase(k: int) -> Target:
    r""":math:`x_1 + x_1x_2 + \dots + x_1\cdots x_k` as a list of ``(a_m, S_m)``."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return [(1.0, list(range(j))) for j in range(1, k + 1)]


def evaluate_target(target: Target, x: Float[Tensor, "... d"]) -> Float[Tensor, "..."]:
    r""":math:`f(x) = \sum_m a_m \prod_{j \in S_m} x_j`."""
    out = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for a, S in target:
        out = out + a * x[..., S].prod(-1)
    return out


def train_targets_ensemble(
    targets: list[Target], d: int, n_steps: int, generator: torch.Generator, monomial: list[int], *,
    width_factor: int = 10, batch: int = 128, lr: float = 0.05, eval_every: int = 100, n_eval: int = 4096,
) -> tuple[Int[Tensor, " evals"], Float[Tensor, "evals E"]]:
    r"""Train one network per target (square loss, SGD); track the Fourier coefficient on ``monomial``.

    Returns ``(steps, coefficient)`` with ``coefficient[t, e]`` :math:`= \widehat{p}(S) = \mathbb{E}_x[p_e(x)\chi_S(x)]`,
    estimated on ``n_eval`` fixed uniform inputs, for :math:`S` = ``monomial``.
    """
    if not targets or n_steps < 1 or eval_every < 1:
        raise ValueError("need at least one target, n_steps >= 1 and eval_every >= 1")
    dev = generator.device
    E = len(targets)
    params = init_ensemble([d] * E, width_factor, generator)
    for t in params.values():
        t.requires_grad_(True)

    def draw(n: int) -> tuple[Tensor, Tensor]:
        x = 1.0 - 2.0 * rng.randint(0, 2, (E, n, d), generator=generator, device=dev).float()
        y = torch.stack([evaluate_target(f, x[e]) for e, f in enumerate(targets)])  # (E, n)
        return x, y

    x_eval, _ = draw(n_eval)
    chi = x_eval[..., monomial].prod(-1)  # (E, n_eval)

    def coefficient() -> Tensor:
        with torch.no_grad():
            return (ensemble_forward(params, x_eval) * chi).mean(1).cpu()

    steps, curve = [0], [coefficient()]
    for step in progress(range(1, n_steps + 1), desc="staircase SGD"):
        x, y = draw(batch)
        loss = (0.5 * (ensemble_forward(params, x) - y) ** 2).mean(1).sum()  # members are independent
        sgd_step(params, loss, lr)
        if step % eval_every == 0 or step == n_steps:
            steps.append(step)
            curve.append(coefficient())
    return torch.tensor(steps), torch.stack(curve)
