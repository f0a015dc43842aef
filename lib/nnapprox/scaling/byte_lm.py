r"""A byte-level MLP language model: the smallest model that shows a language-model scaling law.

Chapter *Neural scaling laws*, section "A real corpus, offline" (``kaplan2020scaling``;
the architecture is Bengio et al.'s neural probabilistic LM on bytes).

The model reads the previous :math:`k` bytes, embeds each in :math:`\mathbb R^{e}`, and
predicts the next byte with one hidden layer of width :math:`W`:

.. math::  h = \mathrm{ReLU}\bigl(W_1 [E x_{t-k}; \dots; E x_{t-1}] + b_1\bigr), \qquad
           p(x_t \mid x_{<t}) = \mathrm{softmax}(W_2 h + b_2).

As in ``kaplan2020scaling`` the size :math:`N` counts the parameters *without* the
embedding table :math:`E`: :math:`N = (k e + 1) W + (W + 1) \cdot 256`. The loss is the
cross-entropy in nats per byte.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int, UInt8
from torch import Tensor, nn

VOCAB = 256


def non_embedding_params(width: int, context: int, d_emb: int) -> int:
    """:math:`N = (k e + 1) W + (W + 1) 256`."""
    return (context * d_emb + 1) * width + (width + 1) * VOCAB


class ByteMLP(nn.Module):
    """One model of the sweep, written plainly: the reference for the batched trainer."""

    def __init__(self, width: int, context: int = 8, d_emb: int = 16) -> None:
        super().__init__()
        if width < 1 or context < 1 or d_emb < 1:
            raise ValueError(f"width, context and d_emb must be >= 1, got {width}, {context}, {d_emb}")
        self.context, self.d_emb = context, d_emb
        self.E = nn.Embedding(VOCAB, d_emb)
        self.W_1 = nn.Linear(context * d_emb, width)
        self.W_2 = nn.Linear(width, VOCAB)

    def forward(self, x: Int[Tensor, "batch context"]) -> Float[Tensor, "batch vocab"]:
        e = self.E(x).flatten(1)  # (batch, context * d_emb)
        return self.W_2(torch.relu(self.W_1(e)))


def make_contexts(
    stream: UInt8[Tensor, " n"], positions: Int[Tensor, "*shape"], context: int
) -> tuple[Int[Tensor, "*shape context"], Int[Tensor, "*shape"]]:
    """Inputs ``stream[p : p + k]`` and targets ``stream[p + k]`` for every start position ``p``."""
    offsets = torch.arange(context, device=positions.device)
    x = stream[positions.unsqueeze(-1) + offsets].long()  # (*shape, context)
    y = stream[positions + context].long()
    return x, y
