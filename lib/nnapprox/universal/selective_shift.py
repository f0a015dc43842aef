r"""Hardmax attention computes a contextual mapping: Yun et al.'s selective shift stack.

Universal approximation chapter, section "Transformers" (``yun2020transformers``, the key
step of the proof of their Theorem 2). Inputs are quantised to the grid
:math:`\{0, \delta, \dots, 1-\delta\}^{d\times n}` and have distinct columns. With
:math:`u = (1, \delta^{-1}, \dots, \delta^{-d+1})`, every column gets a scalar id
:math:`l_j = u^\top L_{:,j}`, distinct for distinct columns. One hardmax head

.. math::  \Psi(Z; b_Q) = e_1\, u^\top Z\, \sigma_H\big[(u^\top Z)^\top (u^\top Z - b_Q 1_n^\top)\big]

returns, in column :math:`j`, :math:`\max_k l_k` if :math:`l_j > b_Q` and :math:`\min_k l_k`
otherwise. The attention layer with two such heads

.. math::  Z \mapsto Z + \delta^{-d}\Psi(Z; l - \tfrac\delta2) - \delta^{-d}\Psi(Z; l + \tfrac\delta2)

*selectively shifts* the column whose id is :math:`l`: its id grows by
:math:`\delta^{-d}(\max_k l_k - \min_k l_k)`, every other column is untouched. Scanning
:math:`l = 0, \delta, \dots, \delta^{-d+1}-\delta` (:math:`\delta^{-d}` layers) shifts the columns
in increasing order; the last id, :math:`\tilde l_n`, then encodes the whole set of columns.
A final head adds :math:`\delta^{-(n+1)d}\max_k \tilde l_k` to every column. The resulting ids
:math:`q(L) = u^\top g(L)` form a *contextual mapping*: all distinct within a sequence, and
distinct between sequences that are not permutations of each other.

The heads use the modified (hardmax) attention of the proof and a query bias :math:`b_Q`.
"""

from __future__ import annotations

import itertools

import torch
from jaxtyping import Float
from torch import Tensor


def hardmax_columns(S: Float[Tensor, "batch n_keys n_queries"]) -> Float[Tensor, "batch n_keys n_queries"]:
    r""":math:`\sigma_H`: per column, weight 1 on the largest entry (shared equally between ties)."""
    top = S == S.max(dim=1, keepdim=True).values
    return top.to(S.dtype) / top.sum(dim=1, keepdim=True)


def selective_shift_heads(d: int, n: int, delta: float, dtype: torch.dtype = torch.float64) -> list[list[dict]]:
    r"""The layers of the contextual-mapping stack: a list of layers, each a list of heads ``{u, b_Q, W_O}``.

    Every head has :math:`W_Q = W_K = W_V = u^\top` (head size 1), query bias ``b_Q`` and
    output matrix ``W_O`` :math:`= c\, e_1` (shape ``(d, 1)``).
    """
    inv = round(1.0 / delta)
    if inv < 2 or abs(inv * delta - 1.0) > 1e-12:
        raise ValueError(f"delta must be 1/k for an integer k >= 2, got {delta}")
    if d < 1 or n < 2:
        raise ValueError(f"need d >= 1 and n >= 2, got d={d}, n={n}")
    u = torch.tensor([delta ** (-i) for i in range(d)], dtype=dtype)
    e1 = torch.zeros(d, 1, dtype=dtype)
    e1[0, 0] = 1.0
    scale = delta ** (-d)
    layers = []
    for i in range(inv**d):  # l = 0, delta, ..., delta^{-d+1} - delta
        l = i * delta
        layers.append([
            {"u": u, "b_Q": l - delta / 2, "W_O": scale * e1},
            {"u": u, "b_Q": l + delta / 2, "W_O": -scale * e1},
        ])
    layers.append([{"u": u, "b_Q": -delta / 2, "W_O": delta ** (-(n + 1) * d) * e1}])  # global shift
    return layers


def hardmax_attention_layer(heads: list[dict], Z: Float[Tensor, "batch d n"]) -> Float[Tensor, "batch d n"]:
    r""":math:`Z + \sum_i W_O^i W_V^i Z\, \sigma_H[(W_K^i Z)^\top (W_Q^i Z - b_Q^i 1^\top)]`."""
    out = Z
    for head in heads:
        l = torch.einsum("d,bdn->bn", head["u"], Z)  # W_K Z = W_V Z = W_Q Z = u^T Z
        S = l[:, :, None] * (l[:, None, :] - head["b_Q"])  # (batch, keys, queries)
        picked = torch.einsum("bk,bkq->bq", l, hardmax_columns(S))  # (batch, n)
        out = out + head["W_O"][None, :, :] * picked[:, None, :]
    return out


def contextual_ids(L: Float[Tensor, "batch d n"], delta: float) -> Float[Tensor, "batch n"]:
    r""":math:`q(L) = u^\top g(L)` after the whole selective-shift stack."""
    d, n = L.shape[1], L.shape[2]
    Z = L
    layers = selective_shift_heads(d, n, delta, dtype=L.dtype)
    for heads in layers:
        Z = hardmax_attention_layer(heads, Z)
    return torch.einsum("d,bdn->bn", layers[0][0]["u"], Z)


def grid_sequences_distinct_columns(d: int, n: int, delta: float) -> Float[Tensor, "batch d n"]:
    r"""Every sequence of :math:`n` distinct columns of :math:`\{0, \delta, \dots, 1-\delta\}^d` (ordered), float64."""
    inv = round(1.0 / delta)
    columns = torch.tensor(list(itertools.product(range(inv), repeat=d)), dtype=torch.float64) * delta  # (inv^d, d)
    index = torch.tensor(list(itertools.permutations(range(len(columns)), n)), dtype=torch.long)  # (batch, n)
    return columns[index].transpose(1, 2).contiguous()  # (batch, d, n)


def check_contextual_mapping(L: Float[Tensor, "batch d n"], q: Float[Tensor, "batch n"]) -> dict[str, bool | int]:
    r"""Exhaustive test of the two properties of a contextual mapping on the sequences ``L``.

    ``within``: the :math:`n` ids of every sequence are distinct. ``across``: an id never occurs
    in two sequences that are not permutations of each other (each id belongs to one column of
    one *set* of columns). ``equivariant``: permuted sequences get permuted ids.
    """
    owner: dict[float, tuple] = {}
    across, equivariant = True, True
    for seq, ids in zip(L.transpose(1, 2).tolist(), q.tolist()):
        key = tuple(sorted(map(tuple, seq)))
        for column, value in zip(seq, ids):
            entry = (key, tuple(column))
            if owner.setdefault(value, entry) != entry:
                if owner[value][0] != key:
                    across = False
                else:
                    equivariant = False
    within = bool((q.sort(dim=1).values.diff(dim=1) > 0).all())
    return {"within": within, "across": across, "equivariant": equivariant, "n_sequences": len(q), "n_ids": len(owner)}
