r"""Fixed-point solvers for implicit (deep-equilibrium) layers.

Chapter "Depth separation", section "Depth by iteration" (``bai2019deep``,
``walker2011anderson``).

A DEQ layer outputs the solution of :math:`z = F(z)` (here :math:`F(z) = \sigma(W_z z + W_x x + \tilde b)`).
Plain iteration :math:`z_{k+1} = F(z_k)` converges like :math:`\rho^k` for a contraction.
**Anderson acceleration** with memory :math:`m` keeps the last iterates and residuals
:math:`r_i = F(z_i) - z_i` and mixes them:

.. math::  \alpha^{(k)} = \arg\min_{\sum_i \alpha_i = 1} \Big\|\sum_{i} \alpha_i r_{k-i}\Big\|_2,
           \qquad z_{k+1} = \sum_i \alpha_i \big(\beta F(z_{k-i}) + (1-\beta) z_{k-i}\big).

The constrained least-squares problem is solved through its KKT system
:math:`\begin{pmatrix} 0 & \mathbf 1^\top \\ \mathbf 1 & G^\top G + \lambda I \end{pmatrix}
\begin{pmatrix}\nu\\ \alpha\end{pmatrix} = \begin{pmatrix}1\\0\end{pmatrix}`, batched over
inputs. On linear problems Anderson acceleration *without truncation* (all past iterates
kept) is essentially equivalent to GMRES (Walker & Ni 2011); the truncated version with
memory :math:`m` has no such equivalence.
"""

from __future__ import annotations

from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

FixedPointMap = Callable[[Float[Tensor, "batch D"]], Float[Tensor, "batch D"]]


def fixed_point_iteration(
    F: FixedPointMap, z0: Float[Tensor, "batch D"], tol: float = 1e-10, max_iter: int = 500
) -> tuple[Float[Tensor, "batch D"], list[float]]:
    r"""Plain iteration :math:`z \leftarrow F(z)` until the max relative residual is below ``tol``.

    Returns the iterate and the residual history :math:`\max_b \|F(z)-z\| / (\|F(z)\| + 10^{-30})`.
    """
    z, history = z0, []
    for _ in range(max_iter):
        fz = F(z)
        res = float(((fz - z).norm(dim=1) / (fz.norm(dim=1) + 1e-30)).max())
        history.append(res)
        z = fz
        if res < tol:
            break
    return z, history


def anderson(
    F: FixedPointMap,
    z0: Float[Tensor, "batch D"],
    m: int = 5,
    beta: float = 1.0,
    lam: float = 1e-10,
    tol: float = 1e-10,
    max_iter: int = 500,
) -> tuple[Float[Tensor, "batch D"], list[float]]:
    """Anderson acceleration with memory ``m`` and mixing ``beta``; same return as :func:`fixed_point_iteration`."""
    if m < 1 or not 0 < beta <= 1 or max_iter < 1:
        raise ValueError(f"need m >= 1, 0 < beta <= 1 and max_iter >= 1, got m={m}, beta={beta}, max_iter={max_iter}")
    batch, D = z0.shape
    Z = z0.new_zeros(batch, m, D)  # past iterates z_i            (batch, m, D)
    FZ = z0.new_zeros(batch, m, D)  # past images F(z_i)          (batch, m, D)
    Z[:, 0], FZ[:, 0] = z0, F(z0)
    history = []
    z = FZ[:, 0]
    for k in range(1, max_iter):
        n = min(k, m)
        G = FZ[:, :n] - Z[:, :n]  # residuals                     (batch, n, D)
        res = float((G[:, (k - 1) % m].norm(dim=1) / (FZ[:, (k - 1) % m].norm(dim=1) + 1e-30)).max())
        history.append(res)
        if res < tol:
            z = FZ[:, (k - 1) % m]
            break
        H = z0.new_zeros(batch, n + 1, n + 1)
        H[:, 0, 1:] = H[:, 1:, 0] = 1.0
        H[:, 1:, 1:] = G @ G.transpose(1, 2) + lam * torch.eye(n, dtype=z0.dtype, device=z0.device)
        rhs = z0.new_zeros(batch, n + 1)
        rhs[:, 0] = 1.0
        alpha = torch.linalg.solve(H, rhs)[:, 1:]  # (batch, n), sums to one
        z = torch.einsum("bn,bnd->bd", alpha, beta * FZ[:, :n] + (1 - beta) * Z[:, :n])
        Z[:, k % m], FZ[:, k % m] = z, F(z)
    return z, history
