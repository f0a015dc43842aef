"""Linear bandits: LinUCB (OFUL) and linear Thompson sampling, vectorised over instances.

Instance ``i`` has an unknown ``theta_i`` with ``||theta_i|| <= S``; at round ``t`` it is shown
``K`` actions ``x_{t,1..K}`` (``||x|| <= L``), plays one and observes
``<x, theta_i> + sigma * noise``. Regret is measured against the best action of each round.
All instances run at once as batched tensors; ``*_loop`` are plain per-instance loops used to
test them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class Problem:
    """``theta`` (B, d), ``actions`` (T, B, K, d), ``noise`` (T, B) standard normal, ``sigma``."""

    theta: torch.Tensor
    actions: torch.Tensor
    noise: torch.Tensor
    sigma: float
    S: float
    L: float


def make_problem(B: int, T: int, K: int, d: int, sigma: float, generator: torch.Generator,
                 S: float = 1.0) -> Problem:
    """``theta`` uniform on the sphere of radius ``S``, actions uniform on the unit sphere."""
    if min(B, T, K, d) < 1 or sigma <= 0 or S <= 0:
        raise ValueError(f"need B, T, K, d >= 1, sigma > 0, S > 0; got {B, T, K, d, sigma, S}")
    g = generator
    th = torch.randn(B, d, generator=g, dtype=torch.float64)
    th = S * th / th.norm(dim=-1, keepdim=True)
    a = torch.randn(T, B, K, d, generator=g, dtype=torch.float64)
    a = a / a.norm(dim=-1, keepdim=True)
    z = torch.randn(T, B, generator=g, dtype=torch.float64)
    return Problem(th, a, z, float(sigma), float(S), 1.0)


def beta(logdetV: torch.Tensor, d: int, lam: float, sigma: float, S: float, delta: float):
    r"""Radius of Abbasi-Yadkori et al.'s confidence ellipsoid (their Theorem 2):
    :math:`\sigma\sqrt{2\log(\det(V)^{1/2}\det(\lambda I)^{-1/2}/\delta)} + \sqrt\lambda S`."""
    if not 0 < delta < 1 or lam <= 0:
        raise ValueError(f"need 0 < delta < 1 and lam > 0; got {delta}, {lam}")
    return sigma * torch.sqrt(2 * math.log(1 / delta) + logdetV - d * math.log(lam)) + math.sqrt(lam) * S


def regret_bound(T: int, d: int, lam: float, sigma: float, S: float, L: float, delta: float) -> float:
    r"""Their Theorem 3: :math:`4\sqrt{T d \log(\lambda + T L/d)}\,(\sqrt\lambda S +
    \sigma\sqrt{2\log(1/\delta) + d\log(1 + TL/(\lambda d))})`, valid when :math:`|\langle x,\theta\rangle| \le 1`."""
    return 4 * math.sqrt(T * d * math.log(lam + T * L / d)) * (
        math.sqrt(lam) * S + sigma * math.sqrt(2 * math.log(1 / delta) + d * math.log(1 + T * L / (lam * d)))
    )


def _run(p: Problem, lam: float, choose) -> dict:
    T, B, K, d = p.actions.shape
    V = lam * torch.eye(d, dtype=torch.float64).expand(B, d, d).clone()
    bvec = torch.zeros(B, d, dtype=torch.float64)
    regret = torch.zeros(T, B, dtype=torch.float64)
    err = torch.zeros(T, B, dtype=torch.float64)
    rad = torch.zeros(T, B, dtype=torch.float64)
    idx = torch.arange(B)
    xs = torch.zeros(B, T, d, dtype=torch.float64)
    ys = torch.zeros(B, T, dtype=torch.float64)
    acts = torch.zeros(T, B, dtype=torch.long)
    width = torch.zeros(T, B, dtype=torch.float64)
    for t in range(T):
        X = p.actions[t]
        th_hat = torch.linalg.solve(V, bvec)
        dlt = th_hat - p.theta
        err[t] = torch.sqrt(torch.einsum("bi,bij,bj->b", dlt, V, dlt))
        a, r = choose(t, X, V, th_hat)
        rad[t] = r
        acts[t] = a
        x = X[idx, a]
        width[t] = torch.sqrt((x * torch.linalg.solve(V, x)).sum(-1))  # ||x_t||_{V_t^-1}
        mean = (X @ p.theta[:, :, None])[..., 0]
        regret[t] = mean.max(-1).values - mean[idx, a]
        y = (x * p.theta).sum(-1) + p.sigma * p.noise[t]
        xs[:, t], ys[:, t] = x, y
        V = V + x[:, :, None] * x[:, None, :]
        bvec = bvec + y[:, None] * x
    return dict(regret=regret, err=err, radius=rad, V=V, b=bvec, X=xs, y=ys, action=acts,
                width=width)


def linucb(p: Problem, lam: float = 1.0, delta: float = 0.01) -> dict:
    r"""OFUL: play :math:`\arg\max_x x^\top\hat\theta + \beta_t\|x\|_{V^{-1}}`. Returns per-round
    ``regret`` (T, B), the estimation error :math:`\|\hat\theta-\theta\|_{V}` (``err``),
    :math:`\beta_t` (``radius``) and the played action's :math:`\|x_t\|_{V_t^{-1}}` (``width``),
    all before each play, and the final ``V``."""
    d = p.theta.shape[1]

    def choose(t, X, V, th):
        r = beta(torch.logdet(V), d, lam, p.sigma, p.S, delta)
        Vi = torch.linalg.inv(V)
        w = torch.sqrt(torch.einsum("bki,bij,bkj->bk", X, Vi, X))
        return ((X @ th[:, :, None])[..., 0] + r[:, None] * w).argmax(-1), r

    return _run(p, lam, choose)


def thompson(p: Problem, generator: torch.Generator, lam: float = 1.0, v: float | None = None) -> dict:
    r"""Linear Thompson sampling: draw :math:`\tilde\theta \sim N(\hat\theta, v^2 V^{-1})`, play its
    best action (``v`` defaults to ``sigma``: the posterior under a :math:`N(0, \sigma^2/\lambda)` prior)."""
    v = p.sigma if v is None else v
    B, d = p.theta.shape

    def choose(t, X, V, th):
        z = torch.randn(B, d, generator=generator, dtype=torch.float64)
        C = torch.linalg.cholesky(torch.linalg.inv(V))
        s = th + v * (C @ z[:, :, None])[..., 0]
        return (X @ s[:, :, None])[..., 0].argmax(-1), torch.full((B,), float("nan"), dtype=torch.float64)

    return _run(p, lam, choose)


def linucb_loop(p: Problem, lam: float = 1.0, delta: float = 0.01) -> torch.Tensor:
    """Per-instance reference implementation of :func:`linucb`; returns the regret (T, B)."""
    T, B, K, d = p.actions.shape
    out = torch.zeros(T, B, dtype=torch.float64)
    for i in range(B):
        V = lam * torch.eye(d, dtype=torch.float64)
        bv = torch.zeros(d, dtype=torch.float64)
        for t in range(T):
            th = torch.linalg.solve(V, bv)
            r = p.sigma * math.sqrt(2 * math.log(1 / delta) + float(torch.logdet(V)) - d * math.log(lam))
            r += math.sqrt(lam) * p.S
            Vi = torch.linalg.inv(V)
            best, a = -math.inf, 0
            for k in range(K):
                x = p.actions[t, i, k]
                u = float(x @ th) + r * math.sqrt(float(x @ Vi @ x))
                if u > best:
                    best, a = u, k
            means = [float(p.actions[t, i, k] @ p.theta[i]) for k in range(K)]
            out[t, i] = max(means) - means[a]
            x = p.actions[t, i, a]
            y = means[a] + p.sigma * float(p.noise[t, i])
            V = V + torch.outer(x, x)
            bv = bv + y * x
    return out
