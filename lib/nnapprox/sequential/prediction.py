"""Universal sequential prediction of binary sequences under log loss (bits).

Every predictor here assigns a probability ``p_t = P(x_t = 1 | x_<t)`` and pays
``-log2 P(x_t | x_<t)``; the total loss is ``-log2`` of the probability the predictor assigns to
the whole sequence. Implemented: the Krichevsky-Trofimov (KT) estimator, KT per context of a
fixed Markov order, context-tree weighting (CTW, Willems-Shtarkov-Tjalkens) with a brute-force
mixture over tree sources for checking, and the incremental-parsing (LZ78) predictor of
Feder-Merhav-Gutman. Sources: random Markov chains of order ``k`` with their exact entropy rate.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

LOG2E = 1.0 / math.log(2.0)


def _binary(x) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"need a 1-d binary sequence; got shape {x.shape}")
    if x.size and not np.isin(x, (0, 1)).all():
        raise ValueError("a binary sequence has entries 0 and 1 only")
    return x.astype(np.int64)


def kt_log2_prob(a, b):
    r"""Closed form :math:`\log_2 P_e(a,b) = \log_2 \Gamma(a+\frac12)\Gamma(b+\frac12) / (\pi\,\Gamma(a+b+1))`."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if (a < 0).any() or (b < 0).any():
        raise ValueError("counts a, b must be >= 0")
    lg = np.vectorize(math.lgamma)
    return (lg(a + 0.5) + lg(b + 0.5) - math.log(math.pi) - lg(a + b + 1.0)) * LOG2E


def kt_losses(x) -> np.ndarray:
    r"""Per-symbol log loss of the KT estimator :math:`P(1) = (b + \frac12)/(a + b + 1)`."""
    x = _binary(x)
    ones = np.concatenate([[0], np.cumsum(x)[:-1]])
    t = np.arange(x.size)
    p1 = (ones + 0.5) / (t + 1.0)
    return -np.log2(np.where(x == 1, p1, 1.0 - p1))


def gamma_fn(z) -> np.ndarray:
    r"""WST's :math:`\gamma(z) = z` for :math:`0 \le z < 1`, :math:`\frac12\log_2 z + 1` for :math:`z \ge 1`."""
    z = np.asarray(z, dtype=float)
    return np.where(z < 1, z, 0.5 * np.log2(np.maximum(z, 1.0)) + 1.0)


def ml_loss(a, b) -> np.ndarray:
    r"""Log loss of the best i.i.d. coin in hindsight: :math:`n\,h(b/n)` bits (0 for n = 0)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        ta = np.where(a > 0, a * np.log2(np.where(n > 0, n, 1) / np.where(a > 0, a, 1)), 0.0)
        tb = np.where(b > 0, b * np.log2(np.where(n > 0, n, 1) / np.where(b > 0, b, 1)), 0.0)
    return ta + tb


def contexts(x, k: int) -> np.ndarray:
    """Context index of each position ``t >= k``: the previous ``k`` symbols, most recent first bit 0."""
    x = _binary(x)
    if k < 0 or k > 20:
        raise ValueError(f"order k must be in 0..20; got {k}")
    n = x.size
    c = np.zeros(max(n - k, 0), dtype=np.int64)
    for j in range(1, k + 1):
        c |= x[k - j : n - j] << (j - 1)
    return c


def markov_kt_losses(x, k: int) -> np.ndarray:
    """Per-symbol loss of KT run separately in each order-``k`` context, on ``x[k:]``."""
    x = _binary(x)
    c = contexts(x, k)
    y = x[k:]
    counts = np.zeros((2**k, 2))
    out = np.empty(y.size)
    for t in range(y.size):
        a, b = counts[c[t]]
        p = (counts[c[t], y[t]] + 0.5) / (a + b + 1.0)
        out[t] = -math.log2(p)
        counts[c[t], y[t]] += 1
    return out


def best_markov_loss(x, k: int) -> float:
    """Loss on ``x[k:]`` of the best order-``k`` Markov predictor chosen in hindsight."""
    x = _binary(x)
    c = contexts(x, k)
    y = x[k:]
    ones = np.bincount(c, weights=y, minlength=2**k)
    tot = np.bincount(c, minlength=2**k)
    return float(ml_loss(tot - ones, ones).sum())


class CTW:
    r"""Context-tree weighting of depth ``D`` on a binary sequence, updated one symbol at a time.

    Node ``s`` (a context of length at most ``D``) keeps KT counts and
    :math:`\log_2 P_w^s = \log_2(\frac12 P_e^s + \frac12 P_w^{0s} P_w^{1s})`
    (:math:`P_w^s = P_e^s` at depth ``D``). The first ``D`` symbols are the given past.
    """

    def __init__(self, depth: int):
        if not isinstance(depth, int) or depth < 0 or depth > 24:
            raise ValueError(f"depth must be an int in 0..24; got {depth!r}")
        self.D = depth
        self.counts: dict[tuple, list] = {}
        self.le: dict[tuple, float] = {}
        self.lw: dict[tuple, float] = {}

    def _lw(self, s: tuple) -> float:
        return self.lw.get(s, 0.0)

    def update(self, past: tuple, bit: int) -> float:
        """Add ``bit`` after context ``past`` (most recent first, length ``D``); return its loss."""
        before = self._lw(())
        path = [past[:j] for j in range(self.D + 1)]
        for s in reversed(path):
            a = self.counts.setdefault(s, [0, 0])
            self.le[s] = self.le.get(s, 0.0) + math.log2((a[bit] + 0.5) / (a[0] + a[1] + 1.0))
            a[bit] += 1
            if len(s) == self.D:
                self.lw[s] = self.le[s]
            else:
                kids = self._lw(s + (0,)) + self._lw(s + (1,))
                m = max(self.le[s], kids)
                self.lw[s] = m - 1.0 + math.log2(2.0 ** (self.le[s] - m) + 2.0 ** (kids - m))
        return before - self._lw(())


def ctw_losses(x, depth: int) -> np.ndarray:
    """Per-symbol loss of CTW of depth ``depth`` on ``x[depth:]`` (the first symbols are the past)."""
    x = _binary(x)
    m = CTW(depth)
    out = np.empty(max(x.size - depth, 0))
    for t in range(depth, x.size):
        past = tuple(int(v) for v in x[t - depth : t][::-1])
        out[t - depth] = m.update(past, int(x[t]))
    return out


def tree_sources(depth: int):
    """All proper complete binary suffix trees of depth at most ``depth``, as tuples of leaves."""
    if depth < 0:
        raise ValueError("depth must be >= 0")

    def grow(s, d):
        yield (s,)
        if d > 0:
            for left in grow(s + (0,), d - 1):
                for right in grow(s + (1,), d - 1):
                    yield left + right

    return list(grow((), depth))


def tree_cost(leaves, depth: int) -> int:
    r"""WST's :math:`\Gamma_D(S) = |S| - 1 + |\{s \in S: \ell(s) < D\}|` bits."""
    return len(leaves) - 1 + sum(1 for s in leaves if len(s) < depth)


def leaf_counts(x, leaves, depth: int) -> np.ndarray:
    """KT counts (zeros, ones) at each leaf of a tree source, for positions ``t >= depth``."""
    x = _binary(x)
    out = np.zeros((len(leaves), 2), dtype=np.int64)
    for t in range(depth, x.size):
        past = tuple(int(v) for v in x[t - depth : t][::-1])
        for i, s in enumerate(leaves):
            if past[: len(s)] == s:
                out[i, x[t]] += 1
                break
    return out


def ctw_mixture_brute_force(x, depth: int) -> float:
    r""":math:`\log_2 \sum_S 2^{-\Gamma_D(S)} \prod_{s\in S} P_e(a_s, b_s)` by enumerating all trees."""
    terms = []
    for leaves in tree_sources(depth):
        cnt = leaf_counts(x, leaves, depth)
        terms.append(-tree_cost(leaves, depth) + float(kt_log2_prob(cnt[:, 0], cnt[:, 1]).sum()))
    m = max(terms)
    return m + math.log2(sum(2.0 ** (v - m) for v in terms))


def lz78_losses(x) -> np.ndarray:
    r"""Per-symbol loss of the incremental-parsing predictor.

    The sequence is parsed into LZ78 phrases (each the shortest string not parsed before); the
    parse tree's current node predicts :math:`P(b) = (N_b + 1)/(N_0 + N_1 + 2)`, where
    :math:`N_b` counts the earlier visits that left the node by symbol ``b``. At a leaf the
    phrase ends and prediction restarts at the root.
    """
    x = _binary(x)
    kids: list[list[int]] = [[-1, -1]]
    visits: list[list[int]] = [[0, 0]]
    node = 0
    out = np.empty(x.size)
    for t, b in enumerate(x):
        n0, n1 = visits[node]
        out[t] = -math.log2((visits[node][b] + 1.0) / (n0 + n1 + 2.0))
        visits[node][b] += 1
        if kids[node][b] < 0:
            kids[node][b] = len(kids)
            kids.append([-1, -1])
            visits.append([0, 0])
            node = 0
        else:
            node = kids[node][b]
    return out


def random_markov(k: int, rng: np.random.Generator, low: float = 0.05) -> np.ndarray:
    """Transition probabilities ``P(1 | context)`` of an order-``k`` chain, uniform on ``[low, 1-low]``."""
    if k < 0 or k > 16 or not 0 <= low < 0.5:
        raise ValueError(f"need 0 <= k <= 16 and 0 <= low < 0.5; got k={k}, low={low}")
    return rng.uniform(low, 1 - low, size=2**k)


def stationary(theta: np.ndarray) -> np.ndarray:
    """Stationary distribution over the ``2^k`` contexts of the chain ``theta``."""
    theta = np.asarray(theta, dtype=float)
    m = theta.size
    k = int(round(math.log2(m)))
    if 2**k != m:
        raise ValueError("theta must have 2^k entries")
    P = np.zeros((m, m))
    for c in range(m):
        for b in (0, 1):
            nxt = ((c << 1) | b) & (m - 1)
            P[c, nxt] += theta[c] if b else 1 - theta[c]
    w, v = np.linalg.eig(P.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    return pi / pi.sum()


def entropy_rate(theta: np.ndarray) -> float:
    r"""Entropy rate :math:`\sum_c \pi(c)\,h(\theta_c)` bits per symbol of the stationary chain."""
    theta = np.asarray(theta, dtype=float)
    h = -(theta * np.log2(theta) + (1 - theta) * np.log2(1 - theta))
    return float(stationary(theta) @ h)


def sample_markov(theta: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` symbols of the chain, started from its stationary distribution."""
    theta = np.asarray(theta, dtype=float)
    m = theta.size
    k = int(round(math.log2(m)))
    if 2**k != m or n < k:
        raise ValueError(f"theta must have 2^k entries and n >= k; got {m} entries, n={n}")
    c = int(rng.choice(m, p=stationary(theta)))
    x = np.empty(n, dtype=np.int64)
    # the first k symbols spell the initial context, most recent last
    for j in range(k):
        x[j] = (c >> (k - 1 - j)) & 1
    u = rng.random(n)
    for t in range(k, n):
        b = int(u[t] < theta[c])
        x[t] = b
        c = ((c << 1) | b) & (m - 1)
    return x


def true_losses(x, theta: np.ndarray) -> np.ndarray:
    """Per-symbol loss on ``x[k:]`` of the source itself (the predictor that knows ``theta``)."""
    theta = np.asarray(theta, dtype=float)
    k = int(round(math.log2(theta.size)))
    x = _binary(x)
    # contexts() puts the most recent symbol in bit 0; the chain uses the most recent in bit 0 too
    c = contexts(x, k)
    p = theta[c]
    y = x[k:]
    return -np.log2(np.where(y == 1, p, 1 - p))
