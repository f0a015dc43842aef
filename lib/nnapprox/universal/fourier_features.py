r"""Random Fourier features tune the bandwidth of the network's kernel (and, too wide, overfit).

Universal approximation chapter, section "Fourier features" (Tancik et al. 2020,
``tancik2020fourier``). Before the MLP, the input :math:`v \in [0,1]` is mapped to

.. math::  \gamma(v) = \big[\cos(2\pi B v), \sin(2\pi B v)\big] \in \mathbb R^{2 m_f},
           \qquad B_j \sim \mathcal N(0, \sigma^2),

so that the network starts from sinusoids of frequencies :math:`|B_j|`. The scale
:math:`\sigma` sets the bandwidth of the kernel the network behaves like: too small and high
frequencies stay out of reach (as without the mapping), too large and the fit interpolates the
training points with high-frequency wiggles that do not generalise to points in between.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from ..progress import progress
from .mlp import init_relu_mlp, relu_mlp
from nnapprox import rng


def fourier_feature_map(v: Float[Tensor, " n"], B: Float[Tensor, " m_f"] | None) -> Float[Tensor, "n features"]:
    r""":math:`\gamma(v)`; with ``B=None`` the identity map :math:`v \mapsto (v)` ("no mapping")."""
    if B is None:
        return v[:, None]
    angle = 2 * math.pi * v[:, None] * B[None, :]
    return torch.cat([torch.cos(angle), torch.sin(angle)], dim=1)


def fit_fourier_features(
    v_train: Float[Tensor, " n_train"],
    y_train: Float[Tensor, " n_train"],
    sigma: float | None,
    generator: torch.Generator,
    *,
    m_f: int = 128,
    depth: int = 3,
    width: int = 128,
    n_steps: int = 1000,
    lr: float = 1e-3,
    device: torch.device | str = "cpu",
) -> tuple[dict[str, Tensor], Tensor | None]:
    r"""Fit an MLP on :math:`\gamma_\sigma(v)` (``sigma=None``: on :math:`v` itself) by full-batch Adam on the MSE.

    Returns ``(params, B)``; predict with :func:`predict_fourier_features`.
    """
    if sigma is not None and sigma <= 0:
        raise ValueError(f"sigma must be positive or None (no mapping), got {sigma}")
    if m_f < 1 or depth < 1 or width < 1 or n_steps < 1:
        raise ValueError("m_f, depth, width and n_steps must be >= 1")
    dev = torch.device(device)
    B = None if sigma is None else (sigma * rng.randn(m_f, generator=generator)).to(dev)
    features = fourier_feature_map(v_train.to(dev), B)
    params = init_relu_mlp([features.shape[1]] + [width] * depth + [1], generator, device=dev)
    for p in params.values():
        p.requires_grad_(True)
    opt = torch.optim.Adam(params.values(), lr=lr)
    y = y_train.to(dev)
    for _ in progress(range(n_steps), desc=f"Fourier features sigma={sigma}"):
        loss = ((relu_mlp(params, features)[:, 0] - y) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {k: p.detach() for k, p in params.items()}, B


@torch.no_grad()
def predict_fourier_features(params: dict[str, Tensor], B: Tensor | None, v: Float[Tensor, " n"]) -> Float[Tensor, " n"]:
    """The fitted network at ``v``."""
    return relu_mlp(params, fourier_feature_map(v.to(params["W_1"].device), B))[:, 0].cpu()


def relative_mse(prediction: Float[Tensor, " n"], target: Float[Tensor, " n"]) -> float:
    r""":math:`\|\hat y - y\|^2 / \|y\|^2`."""
    return float(((prediction - target) ** 2).sum() / (target**2).sum())
