r"""Depth by iteration: any MLP as a weight-tied, input-injected network.

Chapter "Depth separation", section "Depth by iteration" (``bai2019deep``,
``dehghani2019universal``).

An :math:`L`-layer network :math:`z^{[\ell+1]} = \sigma^{[\ell]}(W^{[\ell]} z^{[\ell]} + b^{[\ell]})`,
:math:`z^{[0]} = x`, is reproduced by iterating *one* layer

.. math::  \tilde z \leftarrow \sigma(W_z \tilde z + W_x x + \tilde b),

with the block-shift weights (Bai, Kolter & Koltun 2019, Theorem 3)

.. math::  W_z = \begin{pmatrix} 0 & & & \\ W^{[1]} & 0 & & \\ & \ddots & \ddots & \\
           & & W^{[L-1]} & 0 \end{pmatrix},\quad
           W_x = \begin{pmatrix} W^{[0]} \\ 0 \\ \vdots \\ 0 \end{pmatrix},\quad
           \tilde b = \begin{pmatrix} b^{[0]} \\ \vdots \\ b^{[L-1]} \end{pmatrix},

and :math:`\sigma` acting blockwise (ReLU on hidden blocks, identity on the last block
when the output layer is linear). Block :math:`\ell` is correct after :math:`\ell`
iterations whatever the start, so after :math:`L` iterations
:math:`\tilde z = (z^{[1]}, \dots, z^{[L]})`. :math:`W_z` is strictly block lower
triangular, hence nilpotent (:math:`W_z^L = 0`): the fixed point is unique, and it is the
network's output, so a fixed-point solver finds it too.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights, n_affine_layers


def weight_tied_from_mlp(weights: Weights) -> dict[str, Tensor]:
    """Block-shift weights ``{"W_z", "W_x", "b", "relu_mask"}`` of the weight-tied equivalent of an MLP.

    ``relu_mask`` is 1 on coordinates with a ReLU (hidden blocks) and 0 on the linear output block.
    """
    L = n_affine_layers(weights)
    sizes = [weights[f"W{ell}"].shape[0] for ell in range(L)]
    offsets = [0]
    for m in sizes:
        offsets.append(offsets[-1] + m)
    D, d = offsets[-1], weights["W0"].shape[1]
    like = weights["W0"]
    W_z = like.new_zeros(D, D)
    for ell in range(1, L):  # block row ell reads block ell - 1
        W_z[offsets[ell] : offsets[ell + 1], offsets[ell - 1] : offsets[ell]] = weights[f"W{ell}"]
    W_x = like.new_zeros(D, d)
    W_x[: sizes[0]] = weights["W0"]
    b = torch.cat([weights[f"b{ell}"] for ell in range(L)])
    relu_mask = like.new_ones(D)
    relu_mask[offsets[L - 1] :] = 0.0
    return {"W_z": W_z, "W_x": W_x, "b": b, "relu_mask": relu_mask}


def tied_layer(tied: dict[str, Tensor], z: Float[Tensor, "batch D"], x: Float[Tensor, "batch d"]) -> Float[Tensor, "batch D"]:
    r"""One application :math:`\sigma(W_z z + W_x x + \tilde b)` (ReLU where ``relu_mask`` is 1)."""
    pre = z @ tied["W_z"].T + x @ tied["W_x"].T + tied["b"]
    return torch.where(tied["relu_mask"] > 0, torch.relu(pre), pre)


def iterate_tied(
    tied: dict[str, Tensor], x: Float[Tensor, "batch d"], n_iter: int, z0: Float[Tensor, "batch D"] | None = None
) -> Float[Tensor, "batch D"]:
    """Apply the tied layer ``n_iter`` times from ``z0`` (zeros by default)."""
    if n_iter < 0:
        raise ValueError(f"n_iter must be >= 0, got {n_iter}")
    z = x.new_zeros(x.shape[0], tied["W_z"].shape[0]) if z0 is None else z0
    for _ in range(n_iter):
        z = tied_layer(tied, z, x)
    return z


def output_block(tied: dict[str, Tensor], z: Float[Tensor, "batch D"]) -> Float[Tensor, "batch out"]:
    """The last block of :math:`\\tilde z`: the MLP's output once converged."""
    return z[:, tied["relu_mask"] == 0]


def tied_output_error_bound(
    weights: Weights, z: Float[Tensor, "batch D"], x: Float[Tensor, "batch d"]
) -> Float[Tensor, " batch"]:
    r"""A posteriori bound on :math:`\|\text{output block of } z - \text{MLP}(x)\|_2`, per row.

    With the residual :math:`r = F(z) - z` of the tied layer split into blocks
    :math:`r_1, \dots, r_L` and :math:`e_\ell = \|z_\ell - z^{[\ell]}\|_2`: block 1 of
    :math:`F(z)` is exact, so :math:`e_1 \le \|r_1\|`; block :math:`\ell` of :math:`F` reads
    block :math:`\ell - 1` through :math:`W^{[\ell-1]}` and a 1-Lipschitz activation, so

    .. math::  e_\ell \le \|r_\ell\|_2 + \|W^{[\ell-1]}\|_2\, e_{\ell-1}.

    The returned :math:`e_L` bounds the output error (whose sup norm is at most its 2-norm).
    """
    tied = weight_tied_from_mlp(weights)
    if z.shape[1] != tied["W_z"].shape[0] or z.shape[0] != x.shape[0]:
        raise ValueError(
            f"z must be (batch, {tied['W_z'].shape[0]}) with x's batch {x.shape[0]}, "
            f"got {tuple(z.shape)}"
        )
    r = tied_layer(tied, z, x) - z
    L = n_affine_layers(weights)
    start, e = 0, None
    for ell in range(L):
        m = weights[f"W{ell}"].shape[0]
        r_ell = r[:, start : start + m].norm(dim=1)
        e = r_ell if ell == 0 else r_ell + torch.linalg.matrix_norm(weights[f"W{ell}"], ord=2) * e
        start += m
    return e
