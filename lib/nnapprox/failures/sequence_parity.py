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
global random state. With ``max_position`` the transformer uses *randomised positional
encodings* ({cite}`ruoss2023randomized`): each string of length :math:`n` gets the sinusoidal
encodings of a sorted uniform random :math:`n`-subset of :math:`\{0, \dots, L - 1\}`
(:func:`random_positions`), in training and at test, so a string longer than the training
strings sees no position value that training did not.
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

    def forward(
        self, bits: Int[Tensor, "batch n"], positions: Int[Tensor, "batch n"] | None = None
    ) -> Float[Tensor, "batch n 2"]:
        n = bits.shape[1]
        if positions is None:
            pe = positional_encoding(n, self.d_model)[None]  # (1, n, d_model): positions 0..n-1
        else:
            pe = sinusoidal_encoding(positions, self.d_model)  # (batch, n, d_model)
        pe = pe.to(device=bits.device, dtype=self.embed.weight.dtype)
        causal = torch.triu(torch.full((n, n), float("-inf"), device=bits.device), diagonal=1)  # (n, n)
        h = self.encoder(self.embed(bits) + pe, mask=causal)  # (batch, n, d_model)
        return self.readout(h)


def sinusoidal_encoding(positions: Int[Tensor, "*batch n"], d_model: int) -> Float[Tensor, "*batch n d_model"]:
    r"""The sinusoidal encodings of :func:`positional_encoding` at arbitrary integer ``positions``."""
    t = positions.double().cpu()[..., None]
    freq = 10_000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(*positions.shape, d_model, dtype=torch.float64)
    pe[..., 0::2] = torch.sin(t * freq)
    pe[..., 1::2] = torch.cos(t * freq)[..., : d_model // 2]
    return pe


def random_positions(
    n_strings: int, n: int, max_position: int, generator: torch.Generator | None = None
) -> Int[Tensor, "n_strings n"]:
    r"""Per string, a sorted uniform random ``n``-subset of :math:`\{0, \dots, L - 1\}`, :math:`L` = ``max_position``."""
    if not 1 <= n <= max_position:
        raise ValueError(f"need 1 <= n <= max_position, got n={n}, max_position={max_position}")
    dev = generator.device if generator is not None else torch.device("cpu")
    keys = rng.rand(n_strings, max_position, generator=generator, device=dev)
    return keys.argsort(dim=1)[:, :n].sort(dim=1).values


def _logits(model: nn.Module, bits: Tensor, max_position: int | None, generator: torch.Generator | None) -> Tensor:
    if max_position is None:
        return model(bits)
    return model(bits, random_positions(bits.shape[0], bits.shape[1], max_position, generator).to(bits.device))


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
    max_position: int | None = None,
) -> Float[Tensor, " n_steps"]:
    r"""Adam on :func:`running_parity_loss` with fresh strings of lengths ``1..max_length``; returns the losses.

    ``max_position`` (transformers only): randomised positions from ``0..max_position-1``.
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in progress(range(n_steps), desc=type(model).__name__):
        bits, parity, lengths = sample_bit_strings(batch, max_length, generator, min_length=1)
        loss = running_parity_loss(_logits(model, bits, max_position, generator), parity, lengths)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses).cpu()


@torch.no_grad()
def parity_accuracy(
    model: nn.Module, length: int, n_strings: int, generator: torch.Generator, max_position: int | None = None
) -> float:
    r"""Fraction of ``n_strings`` strings of exactly ``length`` bits whose parity the model predicts at the last position."""
    bits, parity, _ = sample_bit_strings(n_strings, length, generator)
    prediction = _logits(model, bits, max_position, generator)[:, -1].argmax(-1)
    return float((prediction == parity[:, -1]).float().mean())


@torch.no_grad()
def flip_margin_change(
    model: nn.Module, length: int, n_strings: int, generator: torch.Generator, max_position: int | None = None
) -> Float[Tensor, " n_strings"]:
    r"""Change of the last position's logit margin :math:`z_1 - z_0` when one random bit :math:`i < n` is flipped.

    The trained-model counterpart of :func:`~nnapprox.failures.sensitivity.flip_changes`: the
    same positions are used for the string and its flipped copy.
    """
    bits, _, _ = sample_bit_strings(n_strings, length, generator)
    i = rng.randint(0, length - 1, (n_strings,), generator=generator, device=bits.device)
    flipped = bits.clone()
    rows = torch.arange(n_strings, device=bits.device)
    flipped[rows, i] = 1 - flipped[rows, i]
    if max_position is None:
        z, z_flip = model(bits)[:, -1], model(flipped)[:, -1]
    else:
        pos = random_positions(n_strings, length, max_position, generator).to(bits.device)
        z, z_flip = model(bits, pos)[:, -1], model(flipped, pos)[:, -1]
    margin = lambda logits: logits[:, 1] - logits[:, 0]  # noqa: E731
    return (margin(z) - margin(z_flip)).abs().cpu()
