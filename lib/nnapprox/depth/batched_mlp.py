r"""Many ReLU networks of the same depth and different widths, trained as one batched program.

Chapter "Depth separation", section "Radial functions" (``safran2017depth``): a sweep of
2-layer networks of several widths (and, separately, of 3-layer networks) trained on the
same stream of fresh samples.

Member :math:`j` of a family is an ordinary network (:mod:`relu_net`)

.. math::  z^{[0]} = x,\qquad z^{[\ell+1]} = \mu^{[\ell]}_j \odot \sigma\big(W^{[\ell]}_j z^{[\ell]} + b^{[\ell]}_j\big),
           \qquad f_j(x) = W^{[L-1]}_j z^{[L-1]} + b^{[L-1]}_j,

with every hidden layer padded to the widest member and a 0/1 mask :math:`\mu^{[\ell]}_j`
switching the padding off. The weights are stacked along a leading member axis, so a
forward pass is one matrix product for the first layer (the input is shared) and one
``baddbmm`` per later layer. The loss is the *sum* of the members' losses and Adam acts
elementwise, so each member is trained exactly as if it were alone (the padded weights get
zero gradient and never move); ``tests/test_depth_batched_mlp.py`` checks both. With
``batches="per-member"`` every member draws its own minibatches, so the members are
independent training runs (initialisation *and* data order), as a standard error across
runs needs.
"""

from __future__ import annotations

from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from ..progress import progress
from .relu_net import Weights, n_affine_layers

Family = dict[str, Tensor]  # "W{l}": (M, m_{l+1}, m_l), "b{l}": (M, m_{l+1}), "mask{l}": (M, m_{l+1}) for hidden l
Sampler = Callable[[int, torch.Generator], tuple[Tensor, Tensor]]


def stack_mlps(nets: list[Weights], device: torch.device | str | None = None) -> Family:
    r"""Stack networks of equal depth, input and output sizes into one padded :data:`Family`.

    Hidden layer :math:`\ell` is padded with zero units to the widest member; the mask
    ``mask{l}`` marks the real ones.
    """
    if len(nets) == 0:
        raise ValueError("need at least one network")
    L = n_affine_layers(nets[0])
    if any(n_affine_layers(w) != L for w in nets):
        raise ValueError("all networks of a family must have the same depth")
    if len({(w["W0"].shape[1], w[f"W{L - 1}"].shape[0]) for w in nets}) != 1:
        raise ValueError("all networks of a family must have the same input and output sizes")
    family: Family = {}
    rows = [max(w[f"W{ell}"].shape[0] for w in nets) for ell in range(L)]  # padded widths m_1..m_L
    cols = [nets[0]["W0"].shape[1]] + rows[:-1]
    for ell in range(L):
        W = nets[0]["W0"].new_zeros(len(nets), rows[ell], cols[ell])
        b = nets[0]["W0"].new_zeros(len(nets), rows[ell])
        mask = nets[0]["W0"].new_zeros(len(nets), rows[ell])
        for j, w in enumerate(nets):
            m_out, m_in = w[f"W{ell}"].shape
            W[j, :m_out, :m_in] = w[f"W{ell}"]
            b[j, :m_out] = w[f"b{ell}"]
            mask[j, :m_out] = 1.0
        family[f"W{ell}"], family[f"b{ell}"] = W, b
        if ell < L - 1:
            family[f"mask{ell}"] = mask
    return {k: v.to(device) for k, v in family.items()} if device is not None else family


def family_size(family: Family) -> int:
    """Number of members :math:`M`."""
    return family["W0"].shape[0]


def _n_layers(family: Family) -> int:
    L = 0
    while f"W{L}" in family:
        L += 1
    return L


def mlp_family(family: Family, x: Float[Tensor, "n d"] | Float[Tensor, "M n d"]) -> Float[Tensor, "M n out"]:
    r"""Outputs :math:`f_j(x_i)` of every member on one shared batch ``(n, d)``, or member ``j`` on
    its own batch ``x[j]`` when ``x`` is ``(M, n, d)``."""
    L = _n_layers(family)
    M, m_1, d = family["W0"].shape
    if x.dim() == 3:
        if x.shape[0] != M or x.shape[2] != d:
            raise ValueError(f"per-member inputs must be (M={M}, n, d={d}), got {tuple(x.shape)}")
        z = torch.baddbmm(family["b0"][:, None, :], x, family["W0"].transpose(1, 2))  # (M, n, m_1)
    else:
        z = (x @ family["W0"].reshape(M * m_1, d).T).reshape(-1, M, m_1).transpose(0, 1)  # one GEMM: (M, n, m_1)
        z = z + family["b0"][:, None, :]
    for ell in range(1, L):
        z = torch.relu(z) * family[f"mask{ell - 1}"][:, None, :]
        z = torch.baddbmm(family[f"b{ell}"][:, None, :], z, family[f"W{ell}"].transpose(1, 2))  # (M, n, m_{ell+1})
    return z


def family_member(family: Family, j: int) -> Weights:
    """Member ``j`` without its padding, as :func:`~nnapprox.depth.relu_net.relu_net` weights."""
    L = _n_layers(family)
    keep_in = torch.ones(family["W0"].shape[2], dtype=torch.bool, device=family["W0"].device)
    out: Weights = {}
    for ell in range(L):
        if ell < L - 1:
            keep_out = family[f"mask{ell}"][j] > 0
        else:  # the output layer has no padding
            keep_out = torch.ones_like(family[f"b{ell}"][j], dtype=torch.bool)
        out[f"W{ell}"] = family[f"W{ell}"][j][keep_out][:, keep_in].clone()
        out[f"b{ell}"] = family[f"b{ell}"][j][keep_out].clone()
        keep_in = keep_out
    return out


def family_parameters(family: Family) -> list[int]:
    """Number of real (unpadded) weights and biases of each member."""
    return [sum(v.numel() for v in family_member(family, j).values()) for j in range(family_size(family))]


def family_mse(
    family: Family, x: Float[Tensor, "n d"], y: Float[Tensor, "n out"], chunk: int = 8192
) -> Float[Tensor, " M"]:
    r"""Mean squared error :math:`\frac1n \sum_i \|f_j(x_i) - y_i\|^2` of every member (evaluated in chunks)."""
    total = x.new_zeros(family_size(family))
    with torch.no_grad():
        for xs, ys in zip(x.split(chunk), y.split(chunk)):
            total += ((mlp_family(family, xs) - ys[None]) ** 2).sum(dim=(1, 2))
    return total / x.shape[0]


def train_mlp_family(
    family: Family,
    sampler: Sampler,
    n_steps: int,
    batch_size: int,
    generator: torch.Generator,
    lr: float = 1e-3,
    lr_final: float | None = None,
    desc: str | None = None,
    loss: str = "mse",
    batches: str = "shared",
) -> tuple[Family, Float[Tensor, "steps M"]]:
    r"""Adam on :math:`\sum_j \frac1B \sum_i \ell(f_j(x_i), y_i)`, a fresh batch from ``sampler`` each step.

    ``loss="mse"``: :math:`\ell(f, y) = \|f - y\|^2`; ``loss="logistic"``: labels ``y`` in
    {0, 1}, :math:`\ell` the binary cross-entropy of the logit :math:`f` (summed over outputs).
    ``sampler(B, generator)`` returns ``(x, y)`` on the family's device. With
    ``batches="shared"`` every member sees the same batch; with ``"per-member"`` the sampler is
    asked for :math:`MB` rows once per step and member :math:`j` gets rows
    :math:`jB, \dots, (j+1)B - 1`, so the members are independent training runs. With
    ``lr_final`` the step size decays geometrically from ``lr`` to it. Returns the trained
    family and the per-member training losses.
    """
    if loss not in ("mse", "logistic"):
        raise ValueError(f"unknown loss {loss!r}: valid losses are 'mse', 'logistic'")
    if batches not in ("shared", "per-member"):
        raise ValueError(f"unknown batches {batches!r}: valid values are 'shared', 'per-member'")
    if n_steps < 0 or batch_size < 1:
        raise ValueError(f"need n_steps >= 0 and batch_size >= 1, got {n_steps}, {batch_size}")
    params = {k: v.detach().clone().requires_grad_(k.startswith(("W", "b"))) for k, v in family.items()}
    opt = torch.optim.Adam([v for v in params.values() if v.requires_grad], lr=lr)
    gamma = (lr_final / lr) ** (1.0 / max(n_steps, 1)) if lr_final is not None else 1.0
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma)
    losses = family["W0"].new_empty(n_steps, family_size(family))  # on the device: no sync per step
    M = family_size(family)
    for step in progress(range(n_steps), desc=desc or "MLP family", leave=False):
        if batches == "shared":
            x, y = sampler(batch_size, generator)
            y = y[None]  # (1, B, out): the same targets for every member
        else:
            x, y = sampler(M * batch_size, generator)
            x, y = x.reshape(M, batch_size, -1), y.reshape(M, batch_size, -1)
        out = mlp_family(params, x)  # (M, B, out)
        if loss == "mse":
            per_net = ((out - y) ** 2).sum(dim=2).mean(dim=1)  # (M,)
        else:
            per_net = torch.nn.functional.binary_cross_entropy_with_logits(
                out, y.expand_as(out), reduction="none"
            ).sum(dim=2).mean(dim=1)  # (M,)
        opt.zero_grad()
        per_net.sum().backward()
        opt.step()
        sched.step()
        losses[step] = per_net.detach()
    return {k: v.detach() for k, v in params.items()}, losses.double().cpu()
