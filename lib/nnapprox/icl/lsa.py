r"""Linear self-attention, and the layer that performs one step of gradient descent.

Chapter "In-context learning as gradient descent", part I, section "One attention layer is
one step of gradient descent", and part II, section "What algorithm does a trained
transformer run?" (``vonoswald2023transformers``).

Tokens :math:`e_j = (x_j, r_j) \in \mathbb R^{d+1}` hold an input and a *residual*
:math:`r_j = y_j - W x_j`; the prompt starts from :math:`W = 0`, so :math:`r_j = y_j` for
the :math:`N` context tokens and :math:`r_{N+1} = 0` for the query. A linear
self-attention (LSA) layer updates every token with the context tokens as keys and values,

.. math:: e_i \leftarrow e_i + \frac1N \sum_{j=1}^N W_V e_j \, (W_K e_j)^\top (W_Q e_i).

**Construction.** With :math:`W_K = W_Q = \begin{psmallmatrix} I_d & 0 \\ 0 & 0\end{psmallmatrix}`
and :math:`W_V = \begin{psmallmatrix} 0 & 0 \\ 0 & -\eta\end{psmallmatrix}` the layer maps
:math:`r_i \mapsto r_i - \frac\eta N \sum_j r_j x_j^\top x_i`, which is
:math:`y_i - W' x_i` for :math:`W' = W + \frac\eta N \sum_j r_j x_j^\top = W - \eta\nabla_W
\frac1{2N}\sum_j \|W x_j - y_j\|^2`: one gradient step. :math:`L` such layers are
:math:`L` steps, and the prediction is :math:`\hat y = -r_{N+1}`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn
from nnapprox import rng

LSAWeights = dict[str, Tensor]


def lsa_tokens(
    X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], x_query: Float[Tensor, "batch d"]
) -> Float[Tensor, "batch N_plus_1 d_plus_1"]:
    """Tokens :math:`(x_j, y_j)` for the context and :math:`(x_{N+1}, 0)` for the query (last)."""
    context = torch.cat([X, y[..., None]], dim=-1)
    query = torch.cat([x_query, torch.zeros_like(x_query[:, :1])], dim=-1)
    return torch.cat([context, query[:, None]], dim=1)


def lsa_layer(
    E: Float[Tensor, "batch T D"], W_Q: Float[Tensor, "D D"], W_K: Float[Tensor, "D D"], W_V: Float[Tensor, "D D"]
) -> Float[Tensor, "batch T D"]:
    r"""One LSA layer; keys and values come from the context tokens (all but the last)."""
    context = E[:, :-1]
    N = context.shape[1]
    scores = (context @ W_K.T) @ (E @ W_Q.T).transpose(1, 2)  # (batch, N, T): (W_K e_j)^T (W_Q e_i)
    return E + (scores.transpose(1, 2) @ (context @ W_V.T)) / N


def lsa_layer_reference(
    E: Float[Tensor, "batch T D"], W_Q: Float[Tensor, "D D"], W_K: Float[Tensor, "D D"], W_V: Float[Tensor, "D D"]
) -> Float[Tensor, "batch T D"]:
    """:func:`lsa_layer` written as the double sum over tokens (slow; for the tests)."""
    out = E.clone()
    N = E.shape[1] - 1
    for i in range(E.shape[1]):
        for j in range(N):
            out[:, i] += (W_V @ E[:, j].T).T * ((E[:, j] @ W_K.T) * (E[:, i] @ W_Q.T)).sum(-1, keepdim=True) / N
    return out


def gd_weights(d: int, eta: float, dtype: torch.dtype = torch.float64) -> LSAWeights:
    r"""The LSA weights of one gradient step of size :math:`\eta` (module docstring)."""
    if d < 1 or eta <= 0:
        raise ValueError(f"need d >= 1 and eta > 0, got d={d}, eta={eta}")
    P_x = torch.zeros(d + 1, d + 1, dtype=dtype)
    P_x[:d, :d] = torch.eye(d, dtype=dtype)
    W_V = torch.zeros(d + 1, d + 1, dtype=dtype)
    W_V[d, d] = -eta
    return {"W_Q": P_x, "W_K": P_x.clone(), "W_V": W_V}


def lsa_predict(
    layers: list[LSAWeights], X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], x_query: Float[Tensor, "batch d"]
) -> Float[Tensor, " batch"]:
    r"""Run the LSA layers on the prompt and read :math:`\hat y = -r_{N+1}`."""
    E = lsa_tokens(X, y, x_query)
    for w in layers:
        E = lsa_layer(E, w["W_Q"], w["W_K"], w["W_V"])
    return -E[:, -1, -1]


def gd_predictions(
    X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], x_query: Float[Tensor, "batch d"], eta: float, n_steps: int
) -> Float[Tensor, "steps_plus_one batch"]:
    r"""Predictions :math:`w_\ell^\top x_{N+1}` of gradient descent on :math:`\frac1{2N}\|Xw-y\|^2` from 0, :math:`\ell = 0..L`."""
    N = X.shape[1]
    w = torch.zeros_like(X[:, 0])
    out = [(w * x_query).sum(-1)]
    for _ in range(n_steps):
        w = w - eta * torch.einsum("bnd,bn->bd", X, torch.einsum("bnd,bd->bn", X, w) - y) / N
        out.append((w * x_query).sum(-1))
    return torch.stack(out)


class LSA(nn.Module):
    """``n_layer`` trainable LSA layers; ``predict(X, y)`` uses the last example as the query."""

    def __init__(self, d: int, n_layer: int = 1, init_scale: float = 0.02, generator: torch.Generator | None = None) -> None:
        super().__init__()
        D = d + 1
        self.W_Q = nn.Parameter(init_scale * rng.randn(n_layer, D, D, generator=generator))
        self.W_K = nn.Parameter(init_scale * rng.randn(n_layer, D, D, generator=generator))
        self.W_V = nn.Parameter(init_scale * rng.randn(n_layer, D, D, generator=generator))

    def weights(self) -> list[LSAWeights]:
        return [{"W_Q": q, "W_K": k, "W_V": v} for q, k, v in zip(self.W_Q, self.W_K, self.W_V)]

    def predict(self, X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"]) -> Float[Tensor, " batch"]:
        return lsa_predict(self.weights(), X[:, :-1], y[:, :-1], X[:, -1])
