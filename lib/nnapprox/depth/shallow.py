r"""Many one-hidden-layer ReLU networks of different widths, trained at once.

Chapter "Depth separation", section "Shallow networks need exponential width"
(``telgarsky2015representation``).

Network :math:`j` of the family has width :math:`m_j` and computes

.. math::  g_j(x) = \sum_{u=1}^{m_j} v_{ju}\, \sigma(w_{ju} x + c_{ju}) + a_j,
           \qquad x \in \mathbb R,

a piecewise-linear function with at most :math:`m_j + 1` pieces. All widths are stored
padded to :math:`\max_j m_j` with a 0/1 mask, so one batched tensor program (one Adam
optimiser, one loss summed over the family) trains every width together; since the loss
is a sum of per-network losses, each network receives exactly its own gradient.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from ..progress import progress
from .relu_net import Weights
from nnapprox import rng

ShallowFamily = dict[str, Tensor]


def init_shallow_family(
    m: list[int],
    generator: torch.Generator,
    *,
    scale: float = 4.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
) -> ShallowFamily:
    r"""Random family with widths ``m``; kinks :math:`-c/w` uniform on [0, 1], :math:`|w| = ` ``scale``."""
    if len(m) == 0 or any(int(mj) < 1 for mj in m):
        raise ValueError(f"widths must be positive integers, got {m}")
    M, m_max = len(m), max(m)
    kw = dict(dtype=dtype)
    sign = rng.randint(0, 2, (M, m_max), generator=generator).to(dtype) * 2 - 1
    w = scale * sign
    kinks = rng.rand(M, m_max, generator=generator, **kw)
    v = rng.randn(M, m_max, generator=generator, **kw) / torch.tensor(m, **kw).sqrt()[:, None]
    mask = (torch.arange(m_max)[None, :] < torch.tensor(m)[:, None]).to(dtype)
    family = {"w": w, "c": -w * kinks, "v": v * mask, "a": torch.full((M,), 0.5, **kw), "mask": mask}
    return {k: t.to(device) for k, t in family.items()}


def shallow_family(family: ShallowFamily, x: Float[Tensor, "M n"]) -> Float[Tensor, "M n"]:
    r"""Outputs :math:`g_j(x_{ji})` of every network on its own inputs, shape ``(M, n)``.

    Broadcast one input set to all networks with ``x.expand(M, -1)``.
    """
    h = torch.relu(family["w"][:, None, :] * x[:, :, None] + family["c"][:, None, :])  # (M, n, m_max)
    return torch.einsum("jnu,ju->jn", h, family["v"] * family["mask"]) + family["a"][:, None]


def shallow_member(family: ShallowFamily, j: int) -> Weights:
    """Network ``j`` of the family as ordinary :func:`~nnapprox.depth.relu_net.relu_net` weights."""
    keep = family["mask"][j] > 0
    return {
        "W0": family["w"][j, keep][:, None].clone(),
        "b0": family["c"][j, keep].clone(),
        "W1": family["v"][j, keep][None, :].clone(),
        "b1": family["a"][j : j + 1].clone(),
    }


def train_shallow_family(
    family: ShallowFamily,
    x: Float[Tensor, "M n"],
    y: Float[Tensor, "M n"],
    n_steps: int,
    lr: float = 1e-2,
    sample_weight: Float[Tensor, "M n"] | None = None,
    desc: str | None = None,
) -> tuple[ShallowFamily, Float[Tensor, "steps M"]]:
    r"""Adam on :math:`\sum_j \sum_i \omega_{ji} (g_j(x_{ji}) - y_{ji})^2`; returns the trained family and per-network losses.

    Each network has its own data set ``(x[j], y[j])``; ``sample_weight`` (rows summing to
    one; default uniform) lets data sets of different sizes share one padded tensor.
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    if sample_weight is None:
        sample_weight = torch.full_like(x, 1.0 / x.shape[1])
    params = {k: t.detach().clone().requires_grad_(k != "mask") for k, t in family.items()}
    opt = torch.optim.Adam([t for k, t in params.items() if k != "mask"], lr=lr)
    losses = torch.empty(n_steps, family["w"].shape[0], dtype=torch.float64, device=x.device)  # read back after the loop
    for step in progress(range(n_steps), desc=desc or "shallow nets", leave=False):
        per_net = (sample_weight * (shallow_family(params, x) - y) ** 2).sum(dim=1)  # (M,)
        opt.zero_grad()
        per_net.sum().backward()
        opt.step()
        losses[step] = per_net.detach()
    return {k: t.detach() for k, t in params.items()}, losses.cpu()


def pad_tasks(
    xs: list[Tensor], ys: list[Tensor], repeats: list[int]
) -> tuple[Float[Tensor, "M n"], Float[Tensor, "M n"], Float[Tensor, "M n"]]:
    r"""Stack data sets of different sizes into padded ``(x, y, sample_weight)`` for :func:`train_shallow_family`.

    Data set ``t`` (1-D tensors or ``(n_t, 1)`` columns) is repeated ``repeats[t]`` times
    (one row per network trained on it); padding has weight 0, real points weight
    :math:`1/n_t`.
    """
    if not (len(xs) == len(ys) == len(repeats)):
        raise ValueError("xs, ys and repeats must have the same length")
    n_max = max(len(x) for x in xs)
    rows_x, rows_y, rows_w = [], [], []
    for x, y, r in zip(xs, ys, repeats):
        x, y = x.reshape(-1), y.reshape(-1)
        pad = n_max - len(x)
        xp = torch.cat([x, x.new_zeros(pad)])
        yp = torch.cat([y, y.new_zeros(pad)])
        wp = torch.cat([x.new_full((len(x),), 1.0 / len(x)), x.new_zeros(pad)])
        rows_x += [xp] * r
        rows_y += [yp] * r
        rows_w += [wp] * r
    return torch.stack(rows_x), torch.stack(rows_y), torch.stack(rows_w)


def fit_output_layer(
    family: ShallowFamily,
    x: Float[Tensor, "M n"],
    y: Float[Tensor, "M n"],
    sample_weight: Float[Tensor, "M n"] | None = None,
    ridge: float = 1e-10,
) -> ShallowFamily:
    r"""Solve for the output weights :math:`(v_j, a_j)` of every network by weighted ridge regression.

    With the hidden layer frozen, :math:`g_j` is linear in :math:`(v_j, a_j)`, so the
    best output layer is a least-squares problem, solved for all networks at once:
    :math:`\min \sum_i \omega_{ji}(H_j[v; a] - y_j)_i^2 + \lambda \|v\|^2`.
    """
    if sample_weight is None:
        sample_weight = torch.full_like(x, 1.0 / x.shape[1])
    h = torch.relu(family["w"][:, None, :] * x[:, :, None] + family["c"][:, None, :]) * family["mask"][:, None, :]
    H = torch.cat([h, torch.ones_like(h[..., :1])], dim=2)  # (M, n, m_max + 1)
    s = sample_weight.sqrt()[:, :, None]
    A = (s * H).transpose(1, 2) @ (s * H)  # (M, m_max + 1, m_max + 1)
    reg = torch.cat([family["mask"], torch.zeros_like(family["mask"][:, :1])], dim=1)
    pad = torch.cat([1 - family["mask"], torch.zeros_like(family["mask"][:, :1])], dim=1)
    # ridge on the real units; padded units get an identity row, so v = 0 there
    A = A + torch.diag_embed(ridge * reg + pad)
    rhs = ((s * H).transpose(1, 2) @ (s[..., 0] * y)[:, :, None])[..., 0]
    sol = torch.linalg.solve(A, rhs)
    out = dict(family)
    out["v"], out["a"] = sol[:, :-1] * family["mask"], sol[:, -1]
    return out
