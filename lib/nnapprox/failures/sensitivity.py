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
generator) and measures the change per random flip (:func:`flip_changes`, with the last layer
evaluated at the last position only, :func:`encoder_last`) and its mean
(:func:`flip_sensitivity`); the chapter fits the exponent of the mean change against :math:`n`
(:func:`loglog_slope`) for many random encoders.
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


def _block(p: Params, z: Float[Tensor, "batch n d_model"], last_only: bool) -> Float[Tensor, "batch q d_model"]:
    r"""One post-LN layer at every position (``q = n``) or at the last position only (``q = 1``).

    Attention at a position reads every position's keys and values, so only the queries (and
    everything after the attention) can be restricted to the last position.
    """
    d_model = p["W_Q"].shape[0]
    q = z[:, -1:] if last_only else z
    scores = (q @ p["W_Q"]) @ (z @ p["W_K"]).transpose(1, 2) / math.sqrt(d_model)  # (batch, q, n)
    h = torch.nn.functional.layer_norm(q + torch.softmax(scores, -1) @ z @ p["W_V"] @ p["W_O"], (d_model,))
    return torch.nn.functional.layer_norm(h + torch.relu(h @ p["W_1"]) @ p["W_2"], (d_model,))


def _embed(layers: list[Params], tokens: Int[Tensor, "batch n"]) -> Float[Tensor, "batch n d_model"]:
    d_model = layers[0]["W_Q"].shape[0]
    return layers[0]["E"][tokens] + positional_encoding(tokens.shape[1], d_model).to(layers[0]["E"].device)


def encoder_forward(layers: list[Params], tokens: Int[Tensor, "batch n"]) -> Float[Tensor, "batch n d_model"]:
    r"""Post-LN soft-attention encoder: :math:`z \leftarrow \mathrm{LN}(z + \mathrm{softmax}(zW_Q (zW_K)^\top/\sqrt{d})\, z W_V W_O)`,
    then :math:`z \leftarrow \mathrm{LN}(z + \mathrm{ReLU}(z W_1) W_2)`."""
    z = _embed(layers, tokens)
    for p in layers:
        z = _block(p, z, last_only=False)
    return z


def encoder_last(layers: list[Params], tokens: Int[Tensor, "batch n"]) -> Float[Tensor, "batch d_model"]:
    r""":math:`y_n^{(L)}`, the last position of :func:`encoder_forward`, with the last layer evaluated there only.

    Same numbers as ``encoder_forward(layers, tokens)[:, -1]``; the last layer costs
    :math:`O(n)` instead of :math:`O(n^2)`.
    """
    z = _embed(layers, tokens)
    for p in layers[:-1]:
        z = _block(p, z, last_only=False)
    return _block(layers[-1], z, last_only=True)[:, 0]


def flip_changes(
    layers: list[Params], n: int, n_trials: int, generator: torch.Generator | None = None, chunk: int = 32,
    last: bool = False,
) -> Float[Tensor, " n_trials"]:
    r"""One :math:`\|y_n(x) - y_n(x^{\oplus i})\|_2` per trial: a random binary string and a random :math:`i < n`.

    The trials are independent draws (string, position) and are run ``chunk`` at a time (the
    attention scores take ``chunk * n^2`` numbers per layer). With ``last`` the flipped
    symbol is the last one, :math:`i = n`, which the lemma excludes: the read-out position
    sees its own symbol directly, not through an attention weight.
    """
    if n < 2 or n_trials < 1 or chunk < 1:
        raise ValueError(f"need n >= 2, n_trials >= 1 and chunk >= 1, got n={n}, n_trials={n_trials}, chunk={chunk}")
    dev = layers[0]["E"].device
    tokens = rng.randint(0, 2, (n_trials, n), generator=generator, device=dev)
    i = rng.randint(0, n - 1, (n_trials,), generator=generator, device=dev)
    if last:
        i = torch.full_like(i, n - 1)
    flipped = tokens.clone()
    rows = torch.arange(n_trials, device=dev)
    flipped[rows, i] = 1 - flipped[rows, i]
    out = []
    for start in range(0, n_trials, chunk):
        part = slice(start, start + chunk)
        y, y_flip = encoder_last(layers, tokens[part]), encoder_last(layers, flipped[part])
        out.append((y - y_flip).norm(dim=1))
    return torch.cat(out)


def flip_sensitivity(
    layers: list[Params], n: int, n_trials: int, generator: torch.Generator | None = None
) -> float:
    r"""Mean :math:`\|y_n(x) - y_n(x^{\oplus i})\|_2` over random binary strings and random :math:`i < n` (:func:`flip_changes`)."""
    return float(flip_changes(layers, n, n_trials, generator).mean())


def loglog_slope(x: Float[Tensor, " m"], y: Float[Tensor, " m"]) -> float:
    r"""Least-squares slope of :math:`\log y` against :math:`\log x`."""
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("loglog_slope needs positive x and y")
    lx, ly = x.double().log(), y.double().log()
    return float(((lx - lx.mean()) * (ly - ly.mean())).sum() / ((lx - lx.mean()) ** 2).sum())
