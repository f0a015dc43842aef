r"""Composing approximate layers: the curse of depth and how stable algorithms break it.

Introduction, section "Breaking the curse of depth" (seed lecture 000; Mei & Wu 2023).

A target computed by an algorithm is a composition :math:`f = U_L \circ \cdots \circ U_1`.
A network imitates each layer up to an error, :math:`\mathrm{NN}_\ell = U_\ell + \varepsilon_\ell`
with :math:`\|\varepsilon_\ell\| \le \varepsilon`. The error of the composition obeys

.. math::  e_\ell = \|z_\ell - \hat z_\ell\| \le K e_{\ell-1} + \varepsilon
           \quad\Longrightarrow\quad e_L \le \varepsilon \frac{K^L - 1}{K - 1},

for :math:`K`-Lipschitz layers: exponential in depth when :math:`K > 1` (the curse of depth).
When each layer is a step of a *stable* algorithm, a contraction with factor
:math:`\rho < 1` (gradient descent on a strongly convex loss), the same recursion gives
:math:`e_L \le \varepsilon / (1 - \rho)` for every :math:`L`.

Everything is batched: ``z`` has shape ``(batch, d)`` and every trajectory of the batch is
run at once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

Step = Callable[[Float[Tensor, "batch d"]], Float[Tensor, "batch d"]]


def unroll_with_errors(
    step: Step,
    z0: Float[Tensor, "batch d"],
    n_layers: int,
    eps: float,
    generator: torch.Generator | None = None,
) -> Float[Tensor, "layers_plus_one batch"]:
    r"""Run ``step`` exactly and with a per-layer error of norm ``eps``; return the gap.

    The perturbed run is :math:`\hat z_\ell = U(\hat z_{\ell-1}) + \varepsilon_\ell` with
    :math:`\varepsilon_\ell` uniform on the sphere of radius ``eps`` (independent per layer
    and per trajectory). Returns :math:`e_\ell = \|z_\ell - \hat z_\ell\|_2` for
    :math:`\ell = 0, \dots, L`, shape ``(n_layers + 1, batch)``.
    """
    if n_layers < 0:
        raise ValueError(f"n_layers must be >= 0, got {n_layers}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    z, z_hat = z0, z0.clone()
    errors = [torch.zeros(z0.shape[0], dtype=z0.dtype, device=z0.device)]
    for _ in range(n_layers):
        noise = rng.randn(z0.shape, generator=generator, dtype=z0.dtype, device=z0.device)
        noise = eps * noise / noise.norm(dim=1, keepdim=True)
        z, z_hat = step(z), step(z_hat) + noise
        errors.append((z - z_hat).norm(dim=1))
    return torch.stack(errors)


def error_bound(K: float, eps: float, n_layers: int) -> float:
    r""":math:`\varepsilon \sum_{j<L} K^j`: the worst case of :math:`e_\ell \le K e_{\ell-1} + \varepsilon`."""
    if K == 1.0:
        return eps * n_layers
    return eps * (K**n_layers - 1.0) / (K - 1.0)


def expanding_layer(
    K: float, d: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> tuple[Step, Float[Tensor, "d d"]]:
    r"""A generic :math:`K`-Lipschitz linear layer :math:`U(z) = K Q z` with a random orthogonal ``Q``.

    It stretches every error by exactly ``K``, so the composed error grows at the worst-case
    rate ``K``. Its size stays below the worst case unless the fresh errors all point the same
    way: with independent random directions of norm ``eps``,
    :math:`e_\ell^2 \approx \varepsilon^2 (K^{2\ell} - 1)/(K^2 - 1)`, so
    :math:`e_\ell \approx \varepsilon K^\ell/\sqrt{K^2 - 1}` against the bound
    :math:`\varepsilon (K^\ell - 1)/(K - 1)`.
    Returns ``(step, Q)``.
    """
    gaussian = rng.randn(d, d, generator=generator, dtype=dtype)
    Q, R = torch.linalg.qr(gaussian)
    Q = Q * torch.sign(torch.diagonal(R))  # Haar-distributed orthogonal matrix

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return K * z @ Q.T

    return step, Q


def gradient_descent_layer(
    A: Float[Tensor, "d d"], b: Float[Tensor, " d"], eta: float
) -> tuple[Step, float]:
    r"""One step of gradient descent on :math:`F(z) = \tfrac12 z^\top A z - b^\top z` (``A`` s.p.d.).

    :math:`U(z) = z - \eta (A z - b)` is a contraction with factor
    :math:`\rho = \max_i |1 - \eta \lambda_i(A)|`, which is :math:`< 1` for
    :math:`0 < \eta < 2 / \lambda_{\max}`. Returns ``(step, rho)``.
    """
    eigenvalues = torch.linalg.eigvalsh(A)
    if eigenvalues.min() <= 0:
        raise ValueError("A must be symmetric positive definite (strongly convex loss)")
    rho = float((1.0 - eta * eigenvalues).abs().max())

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return z - eta * (z @ A.T - b)

    return step, rho


def growth_rate(errors: Float[Tensor, " layers"]) -> float:
    r"""Geometric growth rate of a positive sequence: :math:`\exp` of the least-squares slope of :math:`\log e_\ell`."""
    if (errors <= 0).any():
        raise ValueError("growth_rate needs positive errors")
    ell = torch.arange(len(errors), dtype=torch.float64)
    log_e = errors.detach().double().cpu().log()
    slope = ((ell - ell.mean()) * (log_e - log_e.mean())).sum() / ((ell - ell.mean()) ** 2).sum()
    return float(slope.exp())


def relu_step_network(d: int, width: int, generator: torch.Generator | None = None) -> torch.nn.Sequential:
    """A one-hidden-layer ReLU network :math:`\\mathrm{NN}(z) = z + W_2 \\sigma(W_1 z + b_1) + b_2` (residual form)."""
    if d < 1 or width < 1:
        raise ValueError(f"d and width must be positive integers, got d={d}, width={width}")
    net = torch.nn.Sequential(torch.nn.Linear(d, width), torch.nn.ReLU(), torch.nn.Linear(width, d))
    with torch.no_grad():
        for layer in (net[0], net[2]):
            bound = 1.0 / layer.in_features**0.5
            layer.weight.copy_(rng.uniform_like(layer.weight, -bound, bound, generator))
            layer.bias.copy_(rng.uniform_like(layer.bias, -bound, bound, generator))
    return net


def fit_step_network(
    step: Step,
    d: int,
    *,
    width: int = 64,
    radius: float = 3.0,
    n_steps: int = 2000,
    batch: int = 512,
    lr: float = 3e-3,
    generator: torch.Generator | None = None,
) -> Step:
    r"""Train a ReLU network to imitate one algorithm step on the cube :math:`[-r, r]^d`.

    The network learns the increment :math:`U(z) - z` (a residual block), by Adam on the
    squared error at fresh uniform points each step. Returns the trained step
    :math:`z \mapsto z + \mathrm{NN}(z)` in float64, ready for :func:`unroll_with_errors`
    style comparisons (its error :math:`\varepsilon(z) = \|\mathrm{NN}(z) + z - U(z)\|` is
    *systematic*, not random).
    """
    from .progress import progress

    net = relu_step_network(d, width, generator)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, n_steps)
    for _ in progress(range(n_steps), desc="fit step network"):
        z = (2 * rng.rand(batch, d, generator=generator) - 1) * radius
        target = (step(z.double()) - z.double()).float()
        loss = ((net(z) - target) ** 2).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    net = net.double().eval()

    def learned(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        with torch.no_grad():
            return z + net(z)

    return learned


def unroll_pair(
    exact: Step, approx: Step, z0: Float[Tensor, "batch d"], n_layers: int
) -> tuple[Float[Tensor, "layers_plus_one batch d"], Float[Tensor, "layers_plus_one batch d"], Float[Tensor, "layers batch"]]:
    r"""Run the exact algorithm and its approximation side by side.

    Returns the trajectories :math:`z_\ell`, :math:`\hat z_\ell` (``(L+1, batch, d)``) and the
    per-layer errors *at the visited points*, :math:`\varepsilon_\ell =
    \|\mathrm{NN}(\hat z_{\ell-1}) - U(\hat z_{\ell-1})\|` (``(L, batch)``): with them the bound
    :math:`e_\ell \le \rho e_{\ell-1} + \varepsilon_\ell` can be checked exactly.
    """
    z, z_hat = [z0], [z0]
    local = []
    for _ in range(n_layers):
        nxt_hat = approx(z_hat[-1])
        local.append((nxt_hat - exact(z_hat[-1])).norm(dim=1))
        z.append(exact(z[-1]))
        z_hat.append(nxt_hat)
    return torch.stack(z), torch.stack(z_hat), torch.stack(local)
