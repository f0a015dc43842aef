r"""Sensitivity of a soft-attention encoder to one input symbol (Hahn, 2020, Lemma 5).

Chapter "When gradient descent fails", section "Transformers and sensitivity"
({cite}`hahn2020theoretical`).

With bounded weights every attention weight is :math:`e^{O(1)} / \sum_j e^{O(1)} = \Theta(1/n)`.
Exchanging one symbol :math:`x_i` (:math:`i < n`) changes only the :math:`i`-th input vector;
every other position sees it through one attention weight, so after each layer the change is
:math:`O(1/n)` away from position :math:`i`:

.. math::  \big\| y_n^{(L)}(x) - y_n^{(L)}(x^{\oplus i}) \big\| = O(1/n)

with a constant depending on the weights and on :math:`L`. Parity flips with every symbol,
so a bounded-weight transformer cannot represent it with a margin that survives long inputs.
This module builds a random post-LayerNorm encoder (:func:`init_encoder`, pure function of a
generator) and measures the change (:func:`flip_sensitivity`).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor
from nnapprox import rng

Params = dict[str, Tensor]


def init_encoder(
    n_layers: int, d_model: int, generator: torch.Generator | None = None, n_symbols: int = 2
) -> list[Params]:
    r"""Random weights of an ``n_layers`` encoder: entries :math:`\mathcal N(0, 1/d_{\mathrm{model}})` (bounded in probability).

    Layer 0 also holds the symbol embedding ``E`` (``n_symbols x d_model``).
    """
    if n_layers < 1 or d_model < 1 or n_symbols < 2:
        raise ValueError(f"need n_layers >= 1, d_model >= 1, n_symbols >= 2; got {n_layers}, {d_model}, {n_symbols}")
    dev = generator.device if generator is not None else torch.device("cpu")

    def gauss(*shape: int) -> Tensor:
        return rng.randn(*shape, generator=generator, device=dev, dtype=torch.float64) / math.sqrt(d_model)

    layers = [{name: gauss(d_model, d_model) for name in ("W_Q", "W_K", "W_V", "W_O", "W_1", "W_2")}
              for _ in range(n_layers)]
    layers[0]["E"] = gauss(n_symbols, d_model) * math.sqrt(d_model)
    return layers


def positional_encoding(n: int, d_model: int) -> Float[Tensor, "n d_model"]:
    r"""Sinusoidal positions :math:`\sin(t/10^{4j/d}), \cos(t/10^{4j/d})` (bounded by 1)."""
    t = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10_000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(t * freq)
    pe[:, 1::2] = torch.cos(t * freq)[:, : d_model // 2]
    return pe


def encoder_forward(layers: list[Params], tokens: Int[Tensor, "batch n"]) -> Float[Tensor, "batch n d_model"]:
    r"""Post-LN soft-attention encoder: :math:`z \leftarrow \mathrm{LN}(z + \mathrm{softmax}(zW_Q (zW_K)^\top/\sqrt{d})\, z W_V W_O)`,
    then :math:`z \leftarrow \mathrm{LN}(z + \mathrm{ReLU}(z W_1) W_2)`."""
    d_model = layers[0]["W_Q"].shape[0]
    z = layers[0]["E"][tokens] + positional_encoding(tokens.shape[1], d_model).to(layers[0]["E"].device)
    for p in layers:
        scores = (z @ p["W_Q"]) @ (z @ p["W_K"]).transpose(1, 2) / math.sqrt(d_model)  # (batch, n, n)
        z = torch.nn.functional.layer_norm(z + torch.softmax(scores, -1) @ z @ p["W_V"] @ p["W_O"], (d_model,))
        z = torch.nn.functional.layer_norm(z + torch.relu(z @ p["W_1"]) @ p["W_2"], (d_model,))
    return z


def flip_sensitivity(
    layers: list[Params], n: int, n_trials: int, generator: torch.Generator | None = None
) -> float:
    r"""Mean :math:`\|y_n(x) - y_n(x^{\oplus i})\|_2` over random binary strings and random :math:`i < n`."""
    if n < 2 or n_trials < 1:
        raise ValueError(f"need n >= 2 and n_trials >= 1, got n={n}, n_trials={n_trials}")
    dev = layers[0]["E"].device
    tokens = rng.randint(0, 2, (n_trials, n), generator=generator, device=dev)
    i = rng.randint(0, n - 1, (n_trials,), generator=generator, device=dev)
    flipped = tokens.clone()
    rows = torch.arange(n_trials, device=dev)
    flipped[rows, i] = 1 - flipped[rows, i]
    y, y_flip = encoder_forward(layers, tokens)[:, -1], encoder_forward(layers, flipped)[:, -1]
    return float((y - y_flip).norm(dim=1).mean())


def loglog_slope(x: Float[Tensor, " m"], y: Float[Tensor, " m"]) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x`."""
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("loglog_slope needs positive x and y")
    lx, ly = x.double().log(), y.double().log()
    return float(((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum())
