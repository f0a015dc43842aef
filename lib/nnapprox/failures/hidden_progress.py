r"""Progress measures for sparse-parity training that move while the accuracy sits at chance.

Chapter "When gradient descent fails", section "Sparse parities" ({cite}`barak2022hidden`).
Barak et al. show that SGD on a :math:`(n, k)` sparse parity makes *hidden progress*: the
population gradient on the first layer has a Fourier gap, so the weights on the :math:`k`
relevant inputs :math:`S` move steadily more than the others long before the loss or the
error move. With :math:`W` the first-layer weights (one column per input) and :math:`W_0` their
initial value, the per-input movement is

.. math::  \mu_j(t) = \big\| W_{:,j}(t) - W_{:,j}(0) \big\|_2 , \qquad j = 1, \dots, n .

If SGD did not single out :math:`S` (the null: every column only collects gradient noise), the
:math:`\mu_j` would be exchangeable, and the mean over :math:`S` minus the mean over the other
columns, in units of its standard error,

.. math::  z(t) = \frac{\bar\mu_S - \bar\mu_{\bar S}}{\hat\sigma_{\bar S}\sqrt{1/k + 1/(n-k)}} ,

would be of order one. More precisely, if the :math:`n` movements were independent draws of one
normal distribution, :math:`z` would follow Student's :math:`t` with :math:`n - k - 1` degrees
of freedom (:math:`\hat\sigma_{\bar S}` is estimated from the :math:`n - k` other columns only),
whose tails are much heavier than the normal's when :math:`n - k` is small. A scan over
:math:`M` evaluations that reports the first one with :math:`z \ge \tau` has, by the union
bound, a false-positive rate of at most :math:`M\,P(t_{n-k-1} \ge \tau)`:
:func:`scan_threshold` returns the :math:`\tau` that makes this :math:`\alpha`.
The hypotheses of that null are not met exactly: the columns share the hidden units and one
SGD path, so their movements are neither independent nor exactly normal, and :math:`\tau` is a
heuristic threshold. :func:`placebo_zscore` is its negative control: the same :math:`z` for
the :math:`k` lowest-indexed inputs *outside* :math:`S` against the other inputs outside
:math:`S`. Initialisation and data are invariant under permutations of the irrelevant inputs,
so those columns are exchangeable exactly, whatever their dependence, and the placebo shows
how the scan behaves when nothing singles the group out.
:func:`movement_zscore` computes :math:`z`, :func:`movement_ratio` the
ratio :math:`\bar\mu_S / \bar\mu_{\bar S}`, :func:`fourier_coefficient` the network's Fourier
coefficient :math:`\hat p(S) = \mathbb{E}_x[p(x)\chi_S(x)]` on a fixed test batch.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def _split_movement(
    W: Float[Tensor, "E m d_max"], W0: Float[Tensor, "E m d_max"], masks: Int[Tensor, "E d_max"], ds: list[int]
) -> list[tuple[Tensor, Tensor]]:
    r"""Per member: the movements :math:`\mu_j` of the relevant columns and of the others (first ``d`` inputs only)."""
    mu = (W - W0).norm(dim=1).cpu().double()  # (E, d_max): mu_j, one per input coordinate
    split = []
    for e, d in enumerate(ds):
        m = masks[e, :d].bool().cpu()
        split.append((mu[e, :d][m], mu[e, :d][~m]))
    return split


_NAN = float("nan")


def movement_ratio(
    W: Float[Tensor, "E m d_max"], W0: Float[Tensor, "E m d_max"], masks: Int[Tensor, "E d_max"], ds: list[int]
) -> Float[Tensor, " E"]:
    r""":math:`\bar\mu_S / \bar\mu_{\bar S}`: mean movement of the relevant first-layer columns over that of the others (NaN at :math:`t = 0` or if :math:`S = [d]`)."""
    return torch.tensor([float(rel.mean() / other.mean()) if len(other) and float(other.mean()) > 0 else _NAN
                         for rel, other in _split_movement(W, W0, masks, ds)], dtype=torch.float64)


def movement_zscore(
    W: Float[Tensor, "E m d_max"], W0: Float[Tensor, "E m d_max"], masks: Int[Tensor, "E d_max"], ds: list[int]
) -> Float[Tensor, " E"]:
    r"""Two-sample :math:`z` of the relevant columns' movement against the irrelevant ones (module docstring); NaN where undefined."""
    out = []
    for rel, other in _split_movement(W, W0, masks, ds):
        if len(rel) < 1 or len(other) < 2 or float(other.std()) == 0.0:
            out.append(_NAN)
            continue
        se = other.std() * (1.0 / len(rel) + 1.0 / len(other)) ** 0.5
        out.append(float((rel.mean() - other.mean()) / se))
    return torch.tensor(out, dtype=torch.float64)


def placebo_masks(masks: Int[Tensor, "E d_max"], ds: list[int]) -> Int[Tensor, "E d_max"]:
    r"""Per member, the indicator of the :math:`k = |S|` lowest-indexed inputs outside :math:`S` (first ``d`` inputs).

    A fixed rule given :math:`S`; since the irrelevant inputs are exchangeable, any such rule
    picks a group with the same law as a random one. Needs :math:`n - k \ge k + 2` (the
    placebo and at least two other irrelevant columns).
    """
    out = torch.zeros_like(masks)
    for e, d in enumerate(ds):
        m = masks[e, :d].bool().cpu()
        k = int(m.sum())
        outside = torch.nonzero(~m)[:, 0]
        if len(outside) < k + 2:
            raise ValueError(f"member {e}: a placebo of k = {k} inputs needs d - k >= k + 2, got d = {d}")
        out[e, outside[:k].to(out.device)] = 1
    return out


def placebo_zscore(
    W: Float[Tensor, "E m d_max"], W0: Float[Tensor, "E m d_max"], masks: Int[Tensor, "E d_max"], ds: list[int]
) -> Float[Tensor, " E"]:
    r"""The :math:`z` of :func:`movement_zscore` for the placebo group of :func:`placebo_masks` against the other
    irrelevant inputs (:math:`S` left out of both), :math:`n - 2k - 1` degrees of freedom under the normal null."""
    placebo = placebo_masks(masks, ds)
    mu = (W - W0).norm(dim=1).cpu().double()  # (E, d_max): mu_j, one per input coordinate
    out = []
    for e, d in enumerate(ds):
        p, s = placebo[e, :d].bool().cpu(), masks[e, :d].bool().cpu()
        group, rest = mu[e, :d][p], mu[e, :d][~p & ~s]
        if len(rest) < 2 or float(rest.std()) == 0.0:
            out.append(_NAN)
            continue
        se = rest.std() * (1.0 / len(group) + 1.0 / len(rest)) ** 0.5
        out.append(float((group.mean() - rest.mean()) / se))
    return torch.tensor(out, dtype=torch.float64)


def scan_threshold(df: int, n_evals: int, alpha: float = 1e-3) -> float:
    r"""Threshold :math:`\tau` with :math:`n_{\mathrm{evals}}\, P(t_{\mathrm{df}} \ge \tau) = \alpha`.

    Under the null of exchangeable, independent normal column movements each :math:`z(t)` is
    :math:`t`-distributed with ``df`` :math:`= n - k - 1` degrees of freedom, so by the union
    bound the probability that *any* of ``n_evals`` evaluations reaches :math:`\tau` is at most
    ``alpha`` (whatever the dependence between evaluations; the bound is conservative when they
    are strongly correlated, as along one training run).
    """
    if not isinstance(df, int) or df < 1 or not isinstance(n_evals, int) or n_evals < 1:
        raise ValueError(f"need integers df >= 1 and n_evals >= 1, got df={df!r}, n_evals={n_evals!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    from scipy.stats import t as student_t

    return float(student_t.isf(alpha / n_evals, df))


def fourier_coefficient(p: Float[Tensor, "E n"], chi: Float[Tensor, "E n"]) -> Float[Tensor, " E"]:
    r""":math:`\hat p(S) \approx \frac1n \sum_i p(x_i)\chi_S(x_i)` on a fixed batch (``chi`` holds :math:`\chi_S(x_i)`, the labels)."""
    if p.shape != chi.shape:
        raise ValueError(f"p and chi must have the same shape, got {tuple(p.shape)} and {tuple(chi.shape)}")
    return (p * chi).mean(-1).cpu()
