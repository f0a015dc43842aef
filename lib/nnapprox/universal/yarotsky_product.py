r"""Yarotsky's product gadget and a binary tree of products: depth for compositional targets.

Universal approximation chapter, section "Depth buys exponential efficiency" (Yarotsky 2017,
``yarotsky2017error``; compositional functions: ``mhaskar2016deep``, ``poggio2017why``).
With :math:`q_m` the squaring network of :mod:`nnapprox.universal.yarotsky`,

.. math::  P_m(x, y) = 2 q_m\big(\tfrac{x+y}{2}\big) - \tfrac12 q_m(x) - \tfrac12 q_m(y)
           \qquad (x, y \in [0, 1])

equals :math:`xy = 2(\tfrac{x+y}{2})^2 - \tfrac12x^2 - \tfrac12y^2` up to the squaring errors
:math:`e = q_m - (\cdot)^2 \in [0, 2^{-2m-2}]`, so :math:`P_m - xy \in [-2^{-2m-2}, 2^{-2m-1}]`
and :math:`\max|P_m - xy| = 2^{-2m-1}`, attained where :math:`x, y` are grid points
:math:`k2^{-m}` and :math:`(x+y)/2` is a cell midpoint. Three squaring networks side by side:
:math:`9m` hidden units.

A product of :math:`d = 2^L` numbers in :math:`[0,1]` is computed by a binary tree of gadgets,
each output clamped to :math:`[0, 1]` by :math:`\sigma(t) - \sigma(t - 1)` (two more units).
Since :math:`|ab - a'b'| \le |a - a'| + |b - b'|` on :math:`[0,1]` and clamping towards the true
value's range never increases the error, the root's error is at most
:math:`(d - 1)\,2^{-2m-1}` with :math:`(d-1)(9m + 2)` hidden units: logarithmic in
:math:`1/\varepsilon` and linear in :math:`d`.

Weights are plain dicts for :func:`nnapprox.universal.relu_mlp`; :func:`parallel` and
:func:`compose` build bigger networks from smaller ones.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .mlp import Params, n_layers
from .yarotsky import yarotsky_square_reference, yarotsky_square_weights


def parallel(*nets: Params) -> Params:
    r"""Networks of equal depth side by side: input and output are the concatenations (block-diagonal weights)."""
    if not nets:
        raise ValueError("parallel needs at least one network")
    L = n_layers(nets[0])
    if any(n_layers(n) != L for n in nets):
        raise ValueError(f"parallel needs networks of equal depth, got {[n_layers(n) for n in nets]}")
    out: Params = {}
    for l in range(1, L + 1):
        out[f"W_{l}"] = torch.block_diag(*[n[f"W_{l}"] for n in nets])
        out[f"b_{l}"] = torch.cat([n[f"b_{l}"] for n in nets])
    return out


def compose(first: Params, second: Params) -> Params:
    r"""The network computing ``second(first(x))``: first's read-out and second's first layer merge into one affine map."""
    L1, L2 = n_layers(first), n_layers(second)
    if second["W_1"].shape[1] != first[f"W_{L1}"].shape[0]:
        raise ValueError(
            f"second takes {second['W_1'].shape[1]} inputs but first returns {first[f'W_{L1}'].shape[0]}"
        )
    out: Params = {f"W_{l}": first[f"W_{l}"] for l in range(1, L1)}
    out.update({f"b_{l}": first[f"b_{l}"] for l in range(1, L1)})
    out[f"W_{L1}"] = second["W_1"] @ first[f"W_{L1}"]
    out[f"b_{L1}"] = second["W_1"] @ first[f"b_{L1}"] + second["b_1"]
    for l in range(2, L2 + 1):
        out[f"W_{L1 + l - 1}"] = second[f"W_{l}"]
        out[f"b_{L1 + l - 1}"] = second[f"b_{l}"]
    return out


def clamp01_weights(dtype: torch.dtype = torch.float64) -> Params:
    r""":math:`t \mapsto \sigma(t) - \sigma(t - 1)`, the clamp of :math:`t` to :math:`[0, 1]` (2 hidden units)."""
    t = lambda v: torch.tensor(v, dtype=dtype)  # noqa: E731
    return {"W_1": t([[1.0], [1.0]]), "b_1": t([0.0, -1.0]), "W_2": t([[1.0, -1.0]]), "b_2": t([0.0])}


def yarotsky_product_weights(m: int, dtype: torch.dtype = torch.float64) -> Params:
    r"""Weights of :math:`P_m(x, y) = 2q_m(\tfrac{x+y}2) - \tfrac12 q_m(x) - \tfrac12 q_m(y)` on :math:`[0,1]^2` (:math:`9m` units)."""
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    sq = yarotsky_square_weights(m, dtype)
    three = parallel(sq, sq, sq)  # input (s, x, y) -> (q_m(s), q_m(x), q_m(y))
    L = n_layers(three)
    mix_in = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]], dtype=dtype)  # (x, y) -> (s, x, y)
    mix_out = torch.tensor([[2.0, -0.5, -0.5]], dtype=dtype)
    three["W_1"] = three["W_1"] @ mix_in
    three[f"W_{L}"] = mix_out @ three[f"W_{L}"]
    three[f"b_{L}"] = mix_out @ three[f"b_{L}"]
    return three


def yarotsky_product_reference(x: Float[Tensor, " n"], y: Float[Tensor, " n"], m: int) -> Float[Tensor, " n"]:
    r"""Readable reference for :math:`P_m(x, y)` from :func:`yarotsky_square_reference`."""
    f = lambda t: yarotsky_square_reference(t, m)  # noqa: E731
    return 2 * f((x + y) / 2) - 0.5 * f(x) - 0.5 * f(y)


def yarotsky_product_max_error_theory(m: int) -> float:
    r""":math:`\max_{[0,1]^2}|P_m(x,y) - xy| = 2^{-2m-1}`."""
    return 2.0 ** (-2 * m - 1)


def product_tree_weights(d: int, m: int, dtype: torch.dtype = torch.float64) -> Params:
    r"""Binary tree of clamped product gadgets computing :math:`x_1 x_2 \cdots x_d` on :math:`[0,1]^d` (:math:`d = 2^L`)."""
    if not isinstance(d, int) or d < 2 or d & (d - 1):
        raise ValueError(f"d must be a power of two >= 2, got {d!r}")
    node = compose(yarotsky_product_weights(m, dtype), clamp01_weights(dtype))
    net = parallel(*[node] * (d // 2))
    width = d // 2
    while width > 1:
        net = compose(net, parallel(*[node] * (width // 2)))
        width //= 2
    return net


def product_tree_error_bound(d: int, m: int) -> float:
    r""":math:`(d - 1)\,2^{-2m-1}`: one gadget error per internal node, propagated with Lipschitz constant 1."""
    return (d - 1) * yarotsky_product_max_error_theory(m)
