r"""Fully connected ReLU networks stored as plain dictionaries of weights.

Chapter "Depth separation", used by every section. A network with :math:`L` affine
layers is

.. math::  z^{[0]} = x,\qquad z^{[\ell+1]} = \sigma\big(W^{[\ell]} z^{[\ell]} + b^{[\ell]}\big)
           \ (\ell < L-1),\qquad f(x) = W^{[L-1]} z^{[L-1]} + b^{[L-1]},

with :math:`\sigma = \mathrm{relu}` on the hidden layers and a linear output layer. Its
weights are a ``dict`` with keys ``"W0", "b0", ..., "W{L-1}", "b{L-1}"`` (``W`` has shape
``(out, in)`` as in ``torch.nn.Linear``), so that the same function :func:`relu_net` runs a
hand-built construction (a sawtooth, an XOR tree, a Cantor-set classifier) and a trained
network, and tests can compare the two.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

Weights = dict[str, Tensor]


def n_affine_layers(weights: Weights) -> int:
    """Number of affine layers :math:`L` (hidden layers + the output layer)."""
    L = 0
    while f"W{L}" in weights:
        L += 1
    if L == 0 or any(f"b{ell}" not in weights for ell in range(L)):
        raise ValueError("weights must hold 'W0', 'b0', ..., 'W{L-1}', 'b{L-1}'")
    return L


def widths(weights: Weights) -> list[int]:
    """Layer widths ``[d, m_1, ..., m_{L-1}, out]``."""
    L = n_affine_layers(weights)
    return [weights["W0"].shape[1]] + [weights[f"W{ell}"].shape[0] for ell in range(L)]


def relu_net(weights: Weights, x: Float[Tensor, "batch d"]) -> Float[Tensor, "batch out"]:
    r"""Evaluate the network :math:`f(x)` (relu on hidden layers, linear output)."""
    L = n_affine_layers(weights)
    z = x
    for ell in range(L):
        z = z @ weights[f"W{ell}"].T + weights[f"b{ell}"]
        if ell < L - 1:
            z = torch.relu(z)
    return z


def preactivations(weights: Weights, x: Float[Tensor, "batch d"]) -> list[Tensor]:
    r"""Pre-activations :math:`W^{[\ell]} z^{[\ell]} + b^{[\ell]}` of every layer, each ``(batch, m_{\ell+1})``."""
    L = n_affine_layers(weights)
    z, out = x, []
    for ell in range(L):
        z = z @ weights[f"W{ell}"].T + weights[f"b{ell}"]
        out.append(z)
        if ell < L - 1:
            z = torch.relu(z)
    return out


def random_relu_net(
    layer_widths: list[int],
    generator: torch.Generator,
    *,
    init: str = "he",
    bias_std: float = 0.1,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> Weights:
    r"""A random ReLU network with widths ``[d, m_1, ..., out]``.

    ``init="he"``: :math:`W_{ij} \sim \mathcal N(0, 2/\text{fan-in})`, biases
    :math:`\mathcal N(0, \text{bias\_std}^2)` (the setting of Hanin & Rolnick 2019,
    ``hanin2019complexity``). ``init="default"``: PyTorch's ``nn.Linear`` default,
    :math:`\mathcal U(\pm 1/\sqrt{\text{fan-in}})` for weights and biases.
    """
    if init not in ("he", "default"):
        raise ValueError(f"unknown init {init!r}: valid inits are 'he', 'default'")
    if len(layer_widths) < 2 or any(int(m) < 1 for m in layer_widths):
        raise ValueError(f"layer_widths must list at least two positive widths, got {layer_widths}")
    weights: Weights = {}
    for ell, (m_in, m_out) in enumerate(zip(layer_widths[:-1], layer_widths[1:])):
        if init == "he":
            W = rng.randn(m_out, m_in, generator=generator, dtype=dtype) * math.sqrt(2.0 / m_in)
            b = rng.randn(m_out, generator=generator, dtype=dtype) * bias_std
        else:
            bound = 1.0 / math.sqrt(m_in)
            W = (2 * rng.rand(m_out, m_in, generator=generator, dtype=dtype) - 1) * bound
            b = (2 * rng.rand(m_out, generator=generator, dtype=dtype) - 1) * bound
        weights[f"W{ell}"], weights[f"b{ell}"] = W.to(device), b.to(device)
    return weights


def n_parameters(weights: Weights) -> int:
    """Number of scalar weights and biases."""
    return sum(v.numel() for v in weights.values())


def train_relu_net(
    weights: Weights,
    x: Float[Tensor, "n d"],
    y: Float[Tensor, "n out"],
    n_steps: int,
    lr: float = 1e-3,
    batch_size: int | None = None,
    generator: torch.Generator | None = None,
    loss: str = "mse",
    desc: str | None = None,
) -> tuple[Weights, Float[Tensor, " steps"]]:
    """Train a copy of ``weights`` with Adam on ``(x, y)``; return it and the loss curve.

    ``loss="mse"`` (regression) or ``"logistic"`` (labels ``y`` in {0, 1}, the network
    output is a logit).
    """
    from ..progress import progress

    if loss not in ("mse", "logistic"):
        raise ValueError(f"unknown loss {loss!r}: valid losses are 'mse', 'logistic'")
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    params = {k: v.detach().clone().requires_grad_(True) for k, v in weights.items()}
    opt = torch.optim.Adam(params.values(), lr=lr)
    losses = torch.empty(n_steps, dtype=torch.float64, device=x.device)  # read back once, after the loop
    n = x.shape[0]
    for step in progress(range(n_steps), desc=desc or "training", leave=False):
        if batch_size is not None and batch_size < n:
            idx = rng.randint(n, (batch_size,), generator=generator).to(x.device)
            xb, yb = x[idx], y[idx]
        else:
            xb, yb = x, y
        out = relu_net(params, xb)
        if loss == "mse":
            value = ((out - yb) ** 2).mean()
        else:
            value = torch.nn.functional.binary_cross_entropy_with_logits(out, yb)
        opt.zero_grad()
        value.backward()
        opt.step()
        losses[step] = value.detach()
    return {k: v.detach() for k, v in params.items()}, losses.cpu()
