r"""Parity of bit strings with sequence models: length generalisation of an LSTM and a transformer.

Chapter "When gradient descent fails", section "Transformers and sensitivity"
({cite}`deletang2023neural`, {cite}`hahn2020theoretical`). A string :math:`b_1 \dots b_n \in \{0,1\}^n`
is labelled at every position with its running parity

.. math::  y_t = b_1 \oplus b_2 \oplus \dots \oplus b_t , \qquad t = 1, \dots, n ,

and the models are trained with the cross-entropy on all positions of strings of length at
most :math:`n_{\text{train}}`, then tested on the last position of longer strings. A recurrent
network can implement the two-state automaton :math:`y_t = y_{t-1} \oplus b_t`, which works at
every length; a soft-attention transformer must read the parity off an average over
positions, which Hahn's lemma bounds by :math:`O(1/n)` per symbol.
Parameters are drawn from an explicit generator (:func:`init_parameters_`), never from the
global random state.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..progress import progress
from .sensitivity import positional_encoding
from nnapprox import rng


def sample_bit_strings(
    n_strings: int, length: int, generator: torch.Generator | None = None, min_length: int | None = None
) -> tuple[Int[Tensor, "batch length"], Int[Tensor, "batch length"], Int[Tensor, " batch"]]:
    r"""Uniform bit strings padded to ``length``, their running parities, and each string's length.

    Lengths are uniform on ``min_length..length`` (default: all equal to ``length``); positions
    beyond a string's length hold 0 and are ignored by :func:`running_parity_loss`.
    """
    if n_strings < 1 or length < 1:
        raise ValueError(f"need n_strings >= 1 and length >= 1, got {n_strings}, {length}")
    dev = generator.device if generator is not None else torch.device("cpu")
    lo = length if min_length is None else min_length
    if not 1 <= lo <= length:
        raise ValueError(f"min_length must be in 1..length, got {min_length}")
    bits = rng.randint(0, 2, (n_strings, length), generator=generator, device=dev)
    lengths = rng.randint(lo, length + 1, (n_strings,), generator=generator, device=dev)
    valid = torch.arange(length, device=bits.device)[None, :] < lengths[:, None]  # (batch, length)
    bits = bits * valid
    return bits, torch.cumsum(bits, dim=1) % 2, lengths


class ParityLSTM(nn.Module):
    r"""Embedding, one LSTM layer of width ``hidden``, linear read-out of :math:`y_t` at every position."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(2, hidden)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.readout = nn.Linear(hidden, 2)

    def forward(self, bits: Int[Tensor, "batch n"]) -> Float[Tensor, "batch n 2"]:
        h, _ = self.lstm(self.embed(bits))  # (batch, n, hidden)
        return self.readout(h)


class ParityTransformer(nn.Module):
    r"""Causal post-LayerNorm transformer encoder with sinusoidal positions (defined at every length)."""

    def __init__(self, d_model: int = 32, n_heads: int = 4, n_layers: int = 2) -> None:
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(2, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=2 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.readout = nn.Linear(d_model, 2)

    def forward(self, bits: Int[Tensor, "batch n"]) -> Float[Tensor, "batch n 2"]:
        n = bits.shape[1]
        pe = positional_encoding(n, self.d_model).to(device=bits.device, dtype=self.embed.weight.dtype)
        causal = torch.triu(torch.full((n, n), float("-inf"), device=bits.device), diagonal=1)  # (n, n)
        h = self.encoder(self.embed(bits) + pe[None], mask=causal)  # (batch, n, d_model)
        return self.readout(h)


def init_parameters_(model: nn.Module, generator: torch.Generator) -> nn.Module:
    r"""Re-draw every parameter from ``generator``: uniform :math:`\pm 1/\sqrt{\text{fan-in}}`, LayerNorm at (1, 0)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
                continue
            fan_in = p.shape[-1] if p.dim() >= 2 else p.shape[0]
            if isinstance(model, ParityLSTM) and name.startswith("lstm"):
                fan_in = model.lstm.hidden_size  # PyTorch's LSTM default scale
            u = rng.rand(tuple(p.shape), generator=generator, dtype=p.dtype, device=p.device)
            p.copy_((2 * u - 1) / math.sqrt(fan_in))
    return model


def running_parity_loss(
    logits: Float[Tensor, "batch n 2"], parity: Int[Tensor, "batch n"], lengths: Int[Tensor, " batch"]
) -> Tensor:
    r"""Cross-entropy of :math:`y_t` averaged over the valid positions :math:`t \le n_i` of every string."""
    valid = torch.arange(parity.shape[1], device=parity.device)[None, :] < lengths[:, None]
    ce = nn.functional.cross_entropy(logits.transpose(1, 2), parity, reduction="none")  # (batch, n)
    return (ce * valid).sum() / valid.sum()


def train_running_parity(
    model: nn.Module, n_steps: int, generator: torch.Generator, *, max_length: int = 20, batch: int = 64, lr: float = 3e-3,
) -> Float[Tensor, " n_steps"]:
    r"""Adam on :func:`running_parity_loss` with fresh strings of lengths ``1..max_length``; returns the losses."""
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in progress(range(n_steps), desc=type(model).__name__):
        bits, parity, lengths = sample_bit_strings(batch, max_length, generator, min_length=1)
        loss = running_parity_loss(model(bits), parity, lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu()


@torch.no_grad()
def parity_accuracy(model: nn.Module, length: int, n_strings: int, generator: torch.Generator) -> float:
    r"""Fraction of ``n_strings`` strings of exactly ``length`` bits whose parity the model predicts at the last position."""
    bits, parity, _ = sample_bit_strings(n_strings, length, generator)
    prediction = model(bits)[:, -1].argmax(-1)
    return float((prediction == parity[:, -1]).float().mean())
