r"""One hidden ReLU layer, *all* weights trained: independent runs side by side.

Universal approximation chapter, section "A deep tree against trained one-hidden-layer
networks". The network of width :math:`W` on :math:`\mathbb R^d`,

.. math::  \mathrm{NN}(x) = \sum_{i=1}^W a_i\,\sigma(w_i\cdot x + b_i) + c,
           \qquad (d + 2)W + 1 \text{ parameters},

is trained on the squared loss :math:`\frac1N\sum_n (\mathrm{NN}(x_n) - y_n)^2` by full-batch
Adam with a cosine learning-rate schedule. Each run starts from its own random-feature fit
(:func:`nnapprox.universal.fit_random_relu_features`: random directions, kinks through
training inputs, output layer by least squares), a strong start, and then moves every weight.
The runs share nothing but the data: they are independent training runs, stored with a
leading run axis in the weight dict so that :func:`nnapprox.universal.relu_mlp_ensemble`
evaluates them.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params
from .random_features import fit_random_relu_features


def train_shallow_runs(
    x: Float[Tensor, "n d"],
    y: Float[Tensor, " n"],
    width: int,
    n_runs: int,
    generator: torch.Generator,
    *,
    n_steps: int = 1000,
    lr: float = 3e-3,
    dtype: torch.dtype = torch.float32,
) -> Params:
    r"""``n_runs`` independently started networks of ``width`` units, every weight trained.

    Returns a weight dict whose tensors have a leading axis of length ``n_runs``.
    """
    if x.ndim != 2 or y.shape != x.shape[:1]:
        raise ValueError(f"x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    if n_runs < 1 or n_steps < 0 or lr <= 0:
        raise ValueError(f"need n_runs >= 1, n_steps >= 0 and lr > 0, got {n_runs}, {n_steps}, {lr}")
    starts = [fit_random_relu_features(x, y, width, generator) for _ in range(n_runs)]
    p = {k: torch.stack([s[k] for s in starts]).to(dtype).requires_grad_() for k in starts[0]}
    xs, ys = x.to(dtype), y.to(dtype)
    opt = torch.optim.Adam(p.values(), lr=lr)
    for t in range(n_steps):
        for group in opt.param_groups:  # cosine schedule from lr to 0
            group["lr"] = 0.5 * lr * (1 + math.cos(math.pi * t / n_steps))
        hidden = torch.relu(torch.einsum("nd,rwd->rnw", xs, p["W_1"]) + p["b_1"][:, None, :])
        out = torch.einsum("rnw,rw->rn", hidden, p["W_2"][:, 0, :]) + p["b_2"]
        loss = ((out - ys) ** 2).mean(1).sum()  # runs are independent: their losses add
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach() for k, v in p.items()}
