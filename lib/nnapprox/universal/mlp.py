r"""Fully connected ReLU networks stored as a dict of weight tensors.

Universal approximation chapter, all sections. A network with hidden widths
:math:`N_1, \dots, N_{L-1}` computes

.. math::  h_0 = x, \qquad h_\ell = \sigma(h_{\ell-1} W_\ell^\top + b_\ell)\ (\ell < L),
           \qquad \mathrm{NN}(x) = h_{L-1} W_L^\top + b_L,

with :math:`\sigma = \mathrm{ReLU}`. The weights are a plain dict ``{"W_1", "b_1", ...,
"W_L", "b_L"}`` so that a hand-built construction (a pure function returning such a dict,
e.g. :func:`nnapprox.universal.yarotsky_square_weights`) and a trained network run through
the same :func:`relu_mlp`. A leading *ensemble* axis on every tensor of the dict is handled
by :func:`relu_mlp_ensemble` with ``torch.func.vmap``.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

Params = dict[str, Tensor]


def n_layers(params: Params) -> int:
    """Number of affine layers :math:`L` of a weight dict."""
    L = sum(1 for k in params if k.startswith("W_"))
    if L == 0 or any(f"W_{l}" not in params or f"b_{l}" not in params for l in range(1, L + 1)):
        raise ValueError(f"weights must be named W_1, b_1, ..., W_L, b_L; got {sorted(params)}")
    return L


def relu_mlp(params: Params, x: Float[Tensor, "batch d_in"]) -> Float[Tensor, "batch d_out"]:
    r"""Evaluate the ReLU network :math:`\mathrm{NN}(x)` of a weight dict (no activation on the output)."""
    L = n_layers(params)
    h = x
    for l in range(1, L + 1):
        h = h @ params[f"W_{l}"].T + params[f"b_{l}"]
        if l < L:
            h = torch.relu(h)
    return h


def relu_mlp_ensemble(params: Params, x: Float[Tensor, "batch d_in"]) -> Float[Tensor, "ensemble batch d_out"]:
    """:func:`relu_mlp` for a stack of networks (leading axis of every weight), one input batch."""
    return torch.func.vmap(relu_mlp, in_dims=(0, None))(params, x)


def init_relu_mlp(
    widths: list[int] | tuple[int, ...],
    generator: torch.Generator,
    ensemble: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
) -> Params:
    r"""``nn.Linear``'s default initialisation for widths ``(d_in, N_1, ..., d_out)``.

    Weights and biases are uniform on :math:`[-1/\sqrt{\text{fan-in}}, 1/\sqrt{\text{fan-in}}]`. With ``ensemble=E`` every tensor gets a leading axis of size ``E``
    (independent draws), ready for :func:`relu_mlp_ensemble`.
    """
    if len(widths) < 2 or any(int(w) < 1 for w in widths):
        raise ValueError(f"widths must list at least input and output sizes, all >= 1; got {widths}")
    if ensemble is not None and ensemble < 1:
        raise ValueError(f"ensemble must be None or >= 1, got {ensemble}")
    lead = () if ensemble is None else (ensemble,)
    params: Params = {}
    for l, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:]), start=1):
        bound = 1.0 / math.sqrt(fan_in)
        W = (2 * rng.rand(*lead, fan_out, fan_in, generator=generator, dtype=dtype) - 1) * bound
        b = (2 * rng.rand(*lead, fan_out, generator=generator, dtype=dtype) - 1) * bound
        params[f"W_{l}"], params[f"b_{l}"] = W.to(device), b.to(device)
    return params


def count_parameters(params: Params) -> int:
    """Number of scalar weights of one network (leading ensemble axis not counted)."""
    L = n_layers(params)
    return sum(params[f"W_{l}"].shape[-1] * params[f"W_{l}"].shape[-2] + params[f"b_{l}"].shape[-1] for l in range(1, L + 1))


def count_hidden_units(params: Params) -> int:
    """Number of ReLU units (sum of hidden widths)."""
    L = n_layers(params)
    return sum(params[f"b_{l}"].shape[-1] for l in range(1, L))
