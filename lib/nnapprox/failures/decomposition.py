r"""Decomposition versus end-to-end training on :math:`k`-tuples.

Chapter "When gradient descent fails", section "Remedies: decomposition and added
supervision" (§3 of {cite}`shalevshwartz2017failures`, in a synthetic Gaussian stand-in for
the paper's tuples of images).

An input is a tuple :math:`x = (x_1, \dots, x_k)` of independent parts
:math:`x_i \sim \mathcal N(0, I_d)`. Each part has a latent label
:math:`l_i = \mathrm{sign}(u^{\ast\top} x_i)` and the end-to-end label is their product
:math:`y = \prod_i l_i`. One shared per-part predictor :math:`N_w(x_i) = \tanh(w^\top x_i)`
serves both approaches:

* end to end, :math:`p_w(x) = \prod_i N_w(x_i)` trained on :math:`\tfrac12(p_w(x) - y)^2`;
* decomposed (added supervision), :math:`\tfrac1k\sum_i \tfrac12(N_w(x_i) - l_i)^2`.

Because the parts are independent, the target-dependent part of the end-to-end gradient
factorises,

.. math::  \mathbb{E}[y\,\nabla_w p_w] = \sum_{i=1}^k \Big(\prod_{j \ne i}\mathbb{E}[l_j N_w(x_j)]\Big)\,
           \mathbb{E}[l_i \nabla_w N_w(x_i)] = k\,c^{k-1}\, s,
           \qquad c = \mathbb{E}[l\,N_w(x_1)],\; s = \mathbb{E}[l\,\nabla_w N_w(x_1)],

while that of the decomposed gradient is :math:`s` for every :math:`k`. A per-part predictor
that is no better than chance at the start (:math:`|c| \ll 1`) therefore hands the end-to-end
learner a signal smaller by :math:`k|c|^{k-1}`, exponentially small in :math:`k`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..progress import progress
from .parity import _device
from .parity_sgd import sgd_step
from nnapprox import rng


def sample_tuples(
    n: int, k: int, u: Float[Tensor, " d"], generator: torch.Generator | None = None
) -> tuple[Float[Tensor, "n k d"], Float[Tensor, "n k"], Float[Tensor, " n"]]:
    r"""``n`` tuples of ``k`` Gaussian parts, the part labels :math:`l_i = \mathrm{sign}(u^\top x_i)` and :math:`y = \prod_i l_i`."""
    if n < 1 or k < 1:
        raise ValueError(f"n and k must be >= 1, got n={n}, k={k}")
    x = rng.randn(n, k, u.shape[0], generator=generator, dtype=u.dtype, device=u.device)
    l = torch.sign(x @ u)  # (n, k)
    return x, l, l.prod(1)


def part_predictor(w: Float[Tensor, " d"], x: Float[Tensor, "n k d"]) -> Float[Tensor, "n k"]:
    r""":math:`N_w(x_i) = \tanh(w^\top x_i)` for every part."""
    return torch.tanh(x @ w)


def end_to_end_predictor(w: Float[Tensor, " d"], x: Float[Tensor, "n k d"]) -> Float[Tensor, " n"]:
    r""":math:`p_w(x) = \prod_i N_w(x_i)`."""
    return part_predictor(w, x).prod(1)


def part_moments(w: Float[Tensor, " d"], u: Float[Tensor, " d"], grid: int = 1600) -> tuple[float, float]:
    r"""Exact one-part moments :math:`c = \mathbb{E}[l N_w]` and :math:`s^\top u^\ast = \mathbb{E}[l (1 - N_w^2)\, u^{\ast\top} x]`.

    Both depend on :math:`x` only through :math:`z_1 = u^{\ast\top}x` and :math:`z_2 = e^\top x`
    (:math:`e` the unit vector of :math:`w` orthogonal to a unit :math:`u^\ast`), so they are
    two-dimensional Gaussian integrals, computed by the midpoint rule on :math:`[-8, 8]^2`
    (no node on the jump of :math:`\mathrm{sign}\,z_1`; error far below Monte Carlo error).
    """
    w64, u64 = w.detach().double().cpu(), u.detach().double().cpu()
    if abs(float(u64.norm()) - 1.0) > 1e-9:
        raise ValueError("u must be a unit vector")
    a = float(w64 @ u64)
    b = float((w64 - a * u64).norm())
    h = 16.0 / grid
    z = -8.0 + h * (torch.arange(grid, dtype=torch.float64) + 0.5)
    weight = torch.exp(-0.5 * z**2) * h / (2 * torch.pi) ** 0.5  # (grid,)
    N = torch.tanh(a * z[:, None] + b * z[None, :])  # (grid z1, grid z2)
    W2 = weight[:, None] * weight[None, :]
    l = torch.sign(z)[:, None]
    c = float((W2 * l * N).sum())
    s_u = float((W2 * l * (1.0 - N**2) * z[:, None]).sum())
    return c, s_u


def gradient_signals(
    w: Float[Tensor, " d"], u: Float[Tensor, " d"], k: int, n: int, generator: torch.Generator | None = None,
    chunk: int = 2**16,
) -> dict[str, float]:
    r"""Monte Carlo estimate of the end-to-end signal along :math:`u^\ast`, against the factorised prediction.

    From ``n`` tuples, the mean of :math:`q = y\,\nabla_w p_w \cdot u^\ast` (per-example gradient
    :math:`\nabla_w p_w = \sum_i \prod_{j\ne i} N_j\,(1 - N_i^2)\,x_i`) and its standard error;
    ``predicted`` :math:`= k c^{k-1} s^\top u^\ast` from :func:`part_moments`; ``z`` the difference
    in standard errors; ``ratio_measured`` :math:`= \bar q / s^\top u^\ast` and
    ``ratio_predicted`` :math:`= k c^{k-1}` (the end-to-end signal relative to the decomposed one).
    """
    if w.shape != u.shape:
        raise ValueError(f"w and u must have the same shape, got {tuple(w.shape)} and {tuple(u.shape)}")
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    q_all = []
    done = 0
    while done < n:
        m = min(chunk, n - done)
        x, l, y = sample_tuples(m, k, u, generator)
        N = part_predictor(w, x)  # (m, k)
        dN_u = (1.0 - N**2) * (x @ u)  # (m, k): gradient of N_w(x_i) in w, projected on u
        others = torch.stack([torch.cat([N[:, :i], N[:, i + 1:]], 1).prod(1) for i in range(k)], 1)  # (m, k)
        q_all.append(y * (others * dN_u).sum(1))
        done += m
    q = torch.cat(q_all).double()
    c, s_u = part_moments(w, u)
    mean, se = float(q.mean()), float(q.std() / n**0.5)
    predicted = k * c ** (k - 1) * s_u
    return dict(mean=mean, se=se, predicted=predicted, z=(mean - predicted) / se, c=c, s_u=s_u,
                ratio_measured=mean / s_u, ratio_predicted=k * c ** (k - 1))


def train_decomposition(
    ks: list[int], d: int, n_steps: int, generator: torch.Generator, *, lr: float = 0.5, batch: int = 128,
    eval_every: int = 50, n_eval: int = 4096,
) -> tuple[Int[Tensor, " evals"], Float[Tensor, "evals 2 K"], dict[str, Float[Tensor, "K d"]]]:
    r"""Train end to end (row 0) and decomposed (row 1) for every ``k`` in ``ks`` with SGD; return accuracy curves.

    Every member ``j`` (one per entry of ``ks``; a value may repeat, for independent runs of
    the same ``k``) gets its own random unit :math:`u^\ast` and its own
    :math:`w_0 \sim \mathcal N(0, I_d/d)`; both approaches start from that :math:`w_0` and see
    the same batches. Returns ``(steps, accuracy, init)``: ``accuracy[t, a, j]`` is the
    fraction of ``n_eval`` fresh tuples (drawn per member) with
    :math:`\mathrm{sign}\,p_w(x) = y` after ``steps[t]`` steps (the decomposed learner is scored
    on the same end-to-end task); ``init`` holds ``"u"`` and ``"w0"``, one row per member (for
    the initial moments :func:`part_moments`).
    """
    if not ks or any(k < 1 for k in ks) or d < 1 or n_steps < 1 or eval_every < 1:
        raise ValueError(f"need ks >= 1, d >= 1, n_steps >= 1, eval_every >= 1; got {ks}, {d}, {n_steps}, {eval_every}")
    dev = _device(generator)
    K, k_max = len(ks), max(ks)
    u = rng.randn(K, d, generator=generator, device=dev)
    u = u / u.norm(dim=1, keepdim=True)
    w0 = rng.randn(K, d, generator=generator, device=dev) / d**0.5
    w = torch.stack([w0, w0.clone()]).requires_grad_(True)  # (2, K, d): end to end, decomposed
    mask = (torch.arange(k_max, device=dev)[None, :] < torch.tensor(ks, device=dev)[:, None])  # (K, k_max)

    def draw(n: int) -> tuple[Tensor, Tensor, Tensor]:
        x = rng.randn(K, n, k_max, d, generator=generator, device=dev)
        l = torch.where(mask[:, None, :], torch.sign(torch.einsum("knjd,kd->knj", x, u)), torch.ones(()))  # (K, n, k_max)
        return x, l, l.prod(-1)

    def parts(x: Tensor) -> Tensor:  # (2, K, n, k_max), padded parts set to 1
        return torch.where(mask[None, :, None, :], torch.tanh(torch.einsum("knjd,akd->aknj", x, w)), torch.ones(()))

    x_eval, _, y_eval = draw(n_eval)

    def accuracy() -> Tensor:
        with torch.no_grad():
            return (torch.sign(parts(x_eval).prod(-1)) == y_eval[None]).float().mean(-1).cpu()

    k_t = torch.tensor(ks, device=dev, dtype=torch.float32)
    steps, curve = [0], [accuracy()]
    for step in progress(range(1, n_steps + 1), desc="decomposition SGD"):
        x, l, y = draw(batch)
        N = parts(x)
        e2e = 0.5 * (N[0].prod(-1) - y) ** 2  # (K, batch)
        dec = (0.5 * (N[1] - l) ** 2 * mask[:, None, :]).sum(-1) / k_t[:, None]  # (K, batch)
        loss = e2e.mean(1).sum() + dec.mean(1).sum()  # members are independent
        sgd_step({"w": w}, loss, lr)
        if step % eval_every == 0 or step == n_steps:
            steps.append(step)
            curve.append(accuracy())
    return torch.tensor(steps), torch.stack(curve), {"u": u.detach().clone(), "w0": w0.detach().clone()}
