r"""Counting predictors on bytes: KT per context of order ``k`` and the Bayes mixture over orders.

Chapter "Universal prediction and decision making in context", section "Counting against a
network on real text". The alphabet has :math:`A = 256` symbols. The order-:math:`k` KT
predictor estimates the next byte after the context :math:`c = (x_{t-k}, \dots, x_{t-1})` by

.. math:: p_k(j \mid c) = \frac{n(c, j) + \frac12}{n(c) + \frac A2},

the posterior mean under a Dirichlet(½, …, ½) prior on each context's row, with counts
:math:`n(c, j)` of ``j`` after ``c`` in the training bytes; like a trained network, the
predictor is then *frozen* and scored on held-out bytes. Run sequentially on the training
bytes, the same rule assigns them the probability (the model's evidence)

.. math:: P_k(x) = \prod_c \frac{\Gamma(A/2)}{\Gamma(n(c) + A/2)}
          \prod_j \frac{\Gamma(n(c, j) + \frac12)}{\Gamma(\frac12)},

and the Bayes mixture over orders :math:`k \in K` with a uniform prior predicts with
:math:`\sum_k w_k\, p_k` where :math:`w_k \propto P_k(x)`: the order the training data support.
All losses are in nats.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch

A = 256


def _bytes(x, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1 or (x.size and (x.min() < 0 or x.max() >= A)):
        raise ValueError(f"{name} must be a 1-d sequence of bytes (integers 0..255); got shape {x.shape}")
    return x.astype(np.int64)


def byte_contexts(x, k: int, first: int) -> np.ndarray:
    """Context id :math:`\\sum_{i=1}^k x_{t-i} 256^{i-1}` of every position ``t >= first``."""
    x = _bytes(x, "x")
    if not 0 <= k <= 7 or first < k:
        raise ValueError(f"need order k in 0..7 (ids fit in 64 bits) and first >= k; got k={k}, first={first}")
    n = x.size
    c = np.zeros(max(n - first, 0), dtype=np.int64)
    for i in range(1, k + 1):
        c += x[first - i : n - i] << (8 * (i - 1))
    return c


def _counts(train: np.ndarray, k: int, first: int):
    c = byte_contexts(train, k, first)
    pairs, n_pair = np.unique(c * A + train[first:], return_counts=True)
    ctx, n_ctx = np.unique(c, return_counts=True)
    return pairs, n_pair, ctx, n_ctx


def _lookup(keys: np.ndarray, counts: np.ndarray, query: np.ndarray) -> np.ndarray:
    if keys.size == 0:
        return np.zeros(query.shape, dtype=np.int64)
    i = np.minimum(np.searchsorted(keys, query), keys.size - 1)
    return np.where(keys[i] == query, counts[i], 0)


def kt_byte_probs(train, test, k: int, first: int) -> np.ndarray:
    """Frozen order-``k`` KT probability of each test byte ``test[t]``, ``t >= first``."""
    train, test = _bytes(train, "train"), _bytes(test, "test")
    pairs, n_pair, ctx, n_ctx = _counts(train, k, k)
    c = byte_contexts(test, k, first)
    num = _lookup(pairs, n_pair, c * A + test[first:]) + 0.5
    return num / (_lookup(ctx, n_ctx, c) + A / 2)


def kt_byte_losses(train, test, k: int, first: int) -> np.ndarray:
    """Log loss (nats) of the frozen order-``k`` KT predictor on ``test[first:]``."""
    return -np.log(kt_byte_probs(train, test, k, first))


def kt_log_evidence(x, k: int, first: int) -> float:
    """:math:`\\log P_k` (nats) of ``x[first:]`` under sequential order-``k`` KT (closed form)."""
    x = _bytes(x, "x")
    _, n_pair, _, n_ctx = _counts(x, k, first)
    lg = torch.lgamma
    pair_term = float((lg(torch.tensor(n_pair + 0.5, dtype=torch.float64)) - math.lgamma(0.5)).sum())
    ctx_term = float((lg(torch.tensor(n_ctx + A / 2, dtype=torch.float64)) - math.lgamma(A / 2)).sum())
    return pair_term - ctx_term


def order_mixture_losses(train, test, orders: Sequence[int], first: int) -> tuple[np.ndarray, np.ndarray]:
    """Log loss on ``test[first:]`` of the Bayes mixture over ``orders``, and the posterior weights.

    The evidences are computed on the same training bytes ``train[max(orders):]`` for every order,
    so that they are comparable (each member's predictive counts use ``train[k:]``, a few more
    bytes); the mixture is frozen after training like each of its members.
    """
    orders = list(orders)
    if not orders or first < max(orders):
        raise ValueError(f"need at least one order and first >= max(orders); got {orders}, first={first}")
    log_ev = np.array([kt_log_evidence(train, k, max(orders)) for k in orders])
    w = np.exp(log_ev - log_ev.max())
    w /= w.sum()
    p = sum(w_k * kt_byte_probs(train, test, k, first) for w_k, k in zip(w, orders))
    return -np.log(p), w


def clustered_mean_se(d, clusters) -> tuple[float, float]:
    r"""Mean of ``d`` and its standard error with the observations grouped in ``clusters``.

    For dependent observations that are independent across groups (bytes of different files):
    with :math:`\bar d` the mean of all :math:`N` values and :math:`S_g = \sum_{i \in g} (d_i - \bar d)`,
    :math:`\mathrm{se}^2 = \frac{G}{G-1} \sum_g S_g^2 / N^2` over the :math:`G` groups (the
    cluster-robust variance of a mean).
    """
    d = np.asarray(d, dtype=np.float64)
    clusters = np.asarray(clusters)
    if d.ndim != 1 or clusters.shape != d.shape:
        raise ValueError(f"d and clusters must be 1-d of the same length; got {d.shape} and {clusters.shape}")
    labels, idx = np.unique(clusters, return_inverse=True)
    if len(labels) < 2:
        raise ValueError(f"need at least 2 clusters, got {len(labels)}")
    S = np.bincount(idx, weights=d - d.mean())
    G = len(labels)
    return float(d.mean()), float(np.sqrt(G / (G - 1) * (S**2).sum()) / d.size)
