r"""The transformer of the seed lecture: ReLU attention and a ReLU MLP, with residuals.

Chapter "In-context learning as gradient descent", part I, sections "ReLU attention runs
gradient descent for ridge, Lasso and logistic regression" and "Algorithm selection by post-ICL
validation", and part II, "Why post-LayerNorm" (seed lecture 000; ``bai2023transformers``).

A prompt is a matrix :math:`H = [h_1, \dots, h_{N+1}] \in \mathbb R^{D\times(N+1)}` of
tokens. An :math:`M`-head ReLU-attention layer and an MLP layer act as

.. math::

    h_i &\leftarrow h_i + \sum_{m=1}^M \frac1N \sum_{j=1}^{N+1}
          \sigma(\langle Q_m h_i, K_m h_j\rangle)\, V_m h_j, \\
    h_i &\leftarrow h_i + W_2\, \sigma(W_1 h_i),

with :math:`\sigma` the ReLU. The transformer alternates them,
:math:`\mathrm{TF}_\theta = \mathrm{MLP}_{W^{(L)}} \circ \mathrm{Attn}_{A^{(L)}} \circ \cdots`.
The normalisation :math:`1/N` uses the number of *context* tokens (the query is the last
token). Weights are plain dicts ``{"Q", "K", "V"}`` of shape ``(M, D, D)`` and
``{"W_1", "W_2"}`` of shapes ``(D', D)`` and ``(D, D')``; a layer may have either or both,
so hand-built (:mod:`.constructions`) and trained (:class:`ReLUTransformer`) weights run
through the same :func:`transformer`.

Token layout (Bai et al.): :math:`h_i = [x_i; y_i; 0; \dots; 0; 1; t_i]` with
:math:`t_i = 1` for the context and :math:`t_{N+1} = 0`, :math:`y_{N+1} = 0`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor, nn
from nnapprox import rng

Layer = dict[str, Tensor]


def relu_attention(
    H: Float[Tensor, "batch T D"], Q: Float[Tensor, "M D D"], K: Float[Tensor, "M D D"], V: Float[Tensor, "M D D"]
) -> Float[Tensor, "batch T D"]:
    r""":math:`h_i + \sum_m \frac1N \sum_j \sigma(\langle Q_m h_i, K_m h_j\rangle) V_m h_j`, :math:`N = T - 1`."""
    N = H.shape[1] - 1
    q = torch.einsum("mab,tb->tma", Q, H.reshape(-1, H.shape[-1])).reshape(*H.shape[:2], *Q.shape[:2])  # (B, T, M, D)
    k = torch.einsum("mab,tb->tma", K, H.reshape(-1, H.shape[-1])).reshape(*H.shape[:2], *K.shape[:2])
    v = torch.einsum("mab,tb->tma", V, H.reshape(-1, H.shape[-1])).reshape(*H.shape[:2], *V.shape[:2])
    scores = torch.relu(torch.einsum("bima,bjma->bmij", q, k))  # (B, M, T, T)
    return H + torch.einsum("bmij,bjma->bia", scores, v) / N


def relu_attention_reference(
    H: Float[Tensor, "batch T D"], Q: Float[Tensor, "M D D"], K: Float[Tensor, "M D D"], V: Float[Tensor, "M D D"]
) -> Float[Tensor, "batch T D"]:
    """:func:`relu_attention` as explicit loops over heads and tokens (slow; for the tests)."""
    out = H.clone()
    T, N = H.shape[1], H.shape[1] - 1
    for m in range(Q.shape[0]):
        for i in range(T):
            for j in range(T):
                a = torch.relu(((H[:, i] @ Q[m].T) * (H[:, j] @ K[m].T)).sum(-1))
                out[:, i] += a[:, None] * (H[:, j] @ V[m].T) / N
    return out


def mlp(H: Float[Tensor, "batch T D"], W_1: Float[Tensor, "Dff D"], W_2: Float[Tensor, "D Dff"]) -> Float[Tensor, "batch T D"]:
    r""":math:`h_i + W_2 \sigma(W_1 h_i)` token by token."""
    return H + torch.relu(H @ W_1.T) @ W_2.T


def transformer(H: Float[Tensor, "batch T D"], layers: list[Layer]) -> Float[Tensor, "batch T D"]:
    """Apply each layer's attention (if it has ``Q``) then its MLP (if it has ``W_1``)."""
    for layer in layers:
        if "Q" in layer:
            H = relu_attention(H, layer["Q"], layer["K"], layer["V"])
        if "W_1" in layer:
            H = mlp(H, layer["W_1"], layer["W_2"])
    return H


def embed(
    X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], x_query: Float[Tensor, "batch d"], D: int
) -> Float[Tensor, "batch N_plus_1 D"]:
    r"""Tokens :math:`[x_i; y_i; 0_{D-d-3}; 1; t_i]` (query last, with :math:`y = 0`, :math:`t = 0`)."""
    B, N, d = X.shape
    if D < d + 3:
        raise ValueError(f"embedding dimension D={D} must be at least d + 3 = {d + 3}")
    H = torch.zeros(B, N + 1, D, dtype=X.dtype, device=X.device)
    H[:, :N, :d] = X
    H[:, N, :d] = x_query
    H[:, :N, d] = y
    H[:, :, D - 2] = 1.0
    H[:, :N, D - 1] = 1.0
    return H


class ReLUTransformer(nn.Module):
    r"""Trainable ReLU-attention transformer on the token layout of :func:`embed`.

    The prediction is read at coordinate ``read`` (default :math:`d+1`, the slot after
    :math:`y`) of the query token, as for the hand-built weights.
    """

    def __init__(self, d: int, D: int, n_layer: int, M: int, D_ff: int, generator: torch.Generator | None = None,
                 init_scale: float = 0.02) -> None:
        super().__init__()
        if min(d, n_layer, M, D_ff) < 1 or D < d + 4:
            raise ValueError(f"need d, n_layer, M, D_ff >= 1 and D >= d + 4; got {d}, {n_layer}, {M}, {D_ff}, D={D}")
        self.d, self.D, self.read = d, D, d + 1

        def p(*shape: int) -> nn.Parameter:
            return nn.Parameter(init_scale * rng.randn(*shape, generator=generator))

        self.Q, self.K, self.V = p(n_layer, M, D, D), p(n_layer, M, D, D), p(n_layer, M, D, D)
        self.W_1, self.W_2 = p(n_layer, D_ff, D), p(n_layer, D, D_ff)

    def layers(self) -> list[Layer]:
        return [{"Q": self.Q[l], "K": self.K[l], "V": self.V[l], "W_1": self.W_1[l], "W_2": self.W_2[l]}
                for l in range(self.Q.shape[0])]

    def predict(self, X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"]) -> Float[Tensor, " batch"]:
        """Prediction of the last label from the others."""
        H = embed(X[:, :-1], y[:, :-1], X[:, -1], self.D)
        return transformer(H, self.layers())[:, -1, self.read]
