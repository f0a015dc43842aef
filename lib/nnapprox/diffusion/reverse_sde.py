r"""Sampling by the time-reversed OU process, driven by any posterior-mean estimate.

Chapter "Diffusion models as variational inference", section 5 ({cite}`sohl2015deep`,
{cite}`song2021score`, {cite}`mei2023deep`).

The sampler, the time-reversed OU process of {cite}`song2021score`, integrates from
:math:`Y_0 \sim \mathcal N(0, I_d)`,

.. math::  \mathrm dY_\tau = \big(Y_\tau + 2\hat s_{T-\tau}(Y_\tau)\big)\mathrm d\tau + \sqrt2\,\mathrm dB_\tau,
           \qquad \tau \in [0, T - \delta],

by Euler–Maruyama on a geometric grid of forward times :math:`T = t_0 > t_1 > \dots > t_N = \delta`
(fine steps where :math:`\sigma_t` is small), with :math:`\hat s_t(z) = (\lambda_t \hat m(h) - z)/\sigma_t^2`.
A last Tweedie step denoises: :math:`\hat x = \mathrm{sign}(\hat m(\lambda_\delta Y/\sigma_\delta^2))`.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from .ising import field, score_from_mean
from nnapprox import rng

Denoiser = Callable[[Float[Tensor, "batch d"]], Float[Tensor, "batch d"]]


def time_grid(T: float, delta: float, n_steps: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, " steps_plus_one"]:
    r"""Geometric forward times :math:`t_k = T (\delta/T)^{k/N}`, :math:`k = 0..N`."""
    if not 0 < delta < T or n_steps < 1:
        raise ValueError(f"need 0 < delta < T and n_steps >= 1, got delta={delta}, T={T}, n_steps={n_steps}")
    return torch.exp(torch.linspace(math.log(T), math.log(delta), n_steps + 1, dtype=dtype))


def reverse_sde(
    denoiser: Denoiser,
    d: int,
    n_samples: int,
    T: float = 5.0,
    delta: float = 1e-3,
    n_steps: int = 200,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    n_snapshots: int = 0,
) -> tuple[Float[Tensor, "n d"], Float[Tensor, "snapshots n d"], Float[Tensor, " snapshots"]]:
    r"""Euler–Maruyama for the reverse SDE, then a Tweedie step and rounding to :math:`\{-1,1\}^d`.

    Returns ``(x_hat, Y_snapshots, t_snapshots)``: the ±1 samples, and ``n_snapshots``
    intermediate states :math:`Y` with their forward times (for the reverse-process animation).
    """
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    ts = time_grid(T, delta, n_steps, dtype).to(device)
    keep = set(torch.linspace(0, n_steps, n_snapshots).round().long().tolist()) if n_snapshots else set()
    Y = rng.randn(n_samples, d, generator=generator, dtype=dtype, device=device)
    snapshots, snap_times = [], []
    for k in range(n_steps):
        if k in keep:
            snapshots.append(Y.clone())
            snap_times.append(ts[k])
        t = ts[k].expand(n_samples)
        s = score_from_mean(denoiser(field(Y, t)), Y, t)
        dt = ts[k] - ts[k + 1]
        xi = rng.randn(Y.shape, generator=generator, dtype=dtype, device=device)
        Y = Y + dt * (Y + 2 * s) + torch.sqrt(2 * dt) * xi
    if n_steps in keep:
        snapshots.append(Y.clone())
        snap_times.append(ts[n_steps])
    m = denoiser(field(Y, ts[-1].expand(n_samples)))
    x_hat = torch.where(m >= 0, 1.0, -1.0).to(dtype)
    empty = torch.zeros(0, n_samples, d, dtype=dtype, device=device)
    Ys = torch.stack(snapshots) if snapshots else empty
    return x_hat, Ys, torch.stack(snap_times) if snap_times else torch.zeros(0, dtype=dtype, device=device)
