r"""Glauber (heat-bath) dynamics: ground-truth samples of an Ising model when :math:`2^d` is too many.

Chapter "Diffusion models as variational inference", section 5 ({cite}`mei2023deep`).

One sweep visits the sites :math:`i = 1, \dots, d` in order and resamples each from its
conditional law given the others,

.. math::  \Pr(x_i = +1 \mid x_{-i}) = \frac{1 + \tanh(\textstyle\sum_{j} A_{ij} x_j + h_i)}{2},

which leaves :math:`\mu_h(x) \propto \exp\{x^\top A x/2 + \langle h, x\rangle\}` invariant
(``A`` with zero diagonal). All chains move at once: the state is a ``(chains, d)`` tensor.
Mixing must be checked, e.g. by comparing two independent groups of chains.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng


def glauber(
    A: Float[Tensor, "d d"],
    n_chains: int,
    n_sweeps: int,
    generator: torch.Generator | None = None,
    h: Float[Tensor, " d"] | None = None,
    x0: Float[Tensor, "chains d"] | None = None,
) -> Float[Tensor, "chains d"]:
    """Run ``n_sweeps`` systematic heat-bath sweeps of ``n_chains`` chains; return the final states.

    Chains start from uniform random spins unless ``x0`` is given.
    """
    d = A.shape[0]
    if n_chains < 1 or n_sweeps < 0:
        raise ValueError(f"need n_chains >= 1 and n_sweeps >= 0, got {n_chains}, {n_sweeps}")
    if bool((torch.diagonal(A) != 0).any()):
        raise ValueError("Glauber dynamics here needs a zero diagonal of A (zero it first)")
    h = torch.zeros(d, dtype=A.dtype, device=A.device) if h is None else h.to(A)
    if x0 is None:
        u = rng.rand(n_chains, d, generator=generator, dtype=A.dtype, device=A.device)
        x = torch.where(u < 0.5, 1.0, -1.0).to(A.dtype)
    else:
        if x0.shape != (n_chains, d):
            raise ValueError(f"x0 must have shape ({n_chains}, {d}), got {tuple(x0.shape)}")
        x = x0.to(A).clone()
    for _ in range(n_sweeps):
        u = rng.rand(n_chains, d, generator=generator, dtype=A.dtype, device=A.device)
        for i in range(d):
            local = x @ A[i] + h[i]  # (chains,)
            p_plus = 0.5 * (1.0 + torch.tanh(local))
            x[:, i] = torch.where(u[:, i] < p_plus, 1.0, -1.0).to(A.dtype)
    return x


def glauber_trace(
    A: Float[Tensor, "d d"],
    n_chains: int,
    n_sweeps: int,
    every: int,
    generator: torch.Generator | None = None,
    x0: Float[Tensor, "chains d"] | None = None,
) -> Float[Tensor, "snapshots chains d"]:
    """States at sweep 0 and after every ``every`` sweeps (burn-in plots, two-chain mixing checks).

    Snapshot ``k`` is the state after ``k * every`` sweeps; chains start from ``x0`` if given,
    else from uniform random spins.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    x = glauber(A, n_chains, 0, generator, x0=x0)
    snapshots = [x.clone()]
    for _ in range(n_sweeps // every):
        x = glauber(A, n_chains, every, generator, x0=x)
        snapshots.append(x.clone())
    return torch.stack(snapshots)
