r"""Bai et al.'s ReLU-attention encoder, with post-LayerNorm, as in their public code.

Chapter "In-context learning as gradient descent", part II ("What training finds"), section
"Does a trained encoder select its algorithm?" (``bai2023transformers``; the architecture follows their repository
``allenbai01/transformers-as-statisticians``, ``src/models.py``).

A prompt :math:`(x_1, y_1, \dots, x_N, y_N, x_{N+1})` becomes :math:`N + 1` tokens
:math:`(x_i, y_i) \in \mathbb R^{d+1}`, the query's label set to 0. A linear read-in maps them
to width :math:`D`; each of ``n_layer`` layers applies

.. math::

    H &\leftarrow \mathrm{LN}\Bigl(H + \sum_{m=1}^M \tfrac1T\, \sigma\bigl(Q_m H (K_m H)^\top\bigr) V_m H\Bigr), \\
    H &\leftarrow \mathrm{LN}\bigl(H + W_2\, \sigma(W_1 H)\bigr),

with :math:`\sigma` the ReLU, :math:`T = N + 1` tokens and an MLP of width :math:`D`; a linear
read-out of the query token is the prediction. The LayerNorms after each residual keep the
hidden states at unit scale, so the cubic growth of un-normalised ReLU attention (the
hand-built :class:`~nnapprox.icl.ReLUTransformer`) cannot overflow.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor, nn


@dataclass(frozen=True)
class EncoderConfig:
    """``n_layer`` post-LN layers of width ``n_embd`` with ``n_head`` ReLU-attention heads, on ``d`` inputs."""

    d: int = 5
    n_layer: int = 4
    n_embd: int = 64
    n_head: int = 4

    def __post_init__(self) -> None:
        if min(self.d, self.n_layer, self.n_embd, self.n_head) < 1:
            raise ValueError(f"every EncoderConfig field must be >= 1, got {self}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}")


class EncoderLayer(nn.Module):
    """ReLU attention, residual, LayerNorm; MLP of the same width, residual, LayerNorm."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.W_QKV = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.W_O = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, cfg.n_embd), nn.ReLU(), nn.Linear(cfg.n_embd, cfg.n_embd))
        self.ln_2 = nn.LayerNorm(cfg.n_embd)

    def forward(self, h: Float[Tensor, "batch T C"]) -> Float[Tensor, "batch T C"]:
        B, T, C = h.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in self.W_QKV(h).split(C, dim=2))
        att = torch.relu(q @ k.transpose(-1, -2)) @ v / T  # (B, heads, T, C/heads)
        h = self.ln_1(h + self.W_O(att.transpose(1, 2).reshape(B, T, C)))
        return self.ln_2(h + self.mlp(h))


class BaiEncoder(nn.Module):
    r"""Bai et al.'s encoder: ``predict(X, y)`` returns the prediction of ``y[:, -1]`` from the rest."""

    def __init__(self, d: int = 5, n_layer: int = 4, n_embd: int = 64, n_head: int = 4) -> None:
        super().__init__()
        self.cfg = EncoderConfig(d, n_layer, n_embd, n_head)
        self.read_in = nn.Linear(d + 1, n_embd)
        self.layers = nn.ModuleList(EncoderLayer(self.cfg) for _ in range(n_layer))
        self.read_out = nn.Linear(n_embd, 1)

    def predict(self, X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"]) -> Float[Tensor, " batch"]:
        """Prediction of the last label from the other examples and the last input (its label is hidden)."""
        if X.shape[-1] != self.cfg.d or X.shape[:2] != y.shape:
            raise ValueError(f"need X of shape (batch, N, {self.cfg.d}) and y of shape (batch, N); "
                             f"got {tuple(X.shape)}, {tuple(y.shape)}")
        y_in = torch.cat([y[:, :-1], torch.zeros_like(y[:, :1])], dim=1)
        h = self.read_in(torch.cat([X, y_in[..., None]], dim=-1))
        for layer in self.layers:
            h = layer(h)
        return self.read_out(h[:, -1])[..., 0]
