r"""Power laws in one variable: log-log regression and the saturating law :math:`E + A N^{-\alpha}`.

Chapter *Neural scaling laws*, sections "Power laws in nature" and "A model where the
exponent is known".

A pure power law :math:`y = k x^{\alpha}` is a straight line in log-log coordinates,
:math:`\log y = \log k + \alpha \log x`, so ordinary least squares on the logs gives the
exponent, its standard error and :math:`R^2` (the allometry of ``west1997general``).

A learning curve does not go to zero: it saturates at the irreducible loss :math:`E`,

.. math::  L(N) = E + A N^{-\alpha}, \qquad
           \log \hat L(N) = \operatorname{LSE}\bigl(\log A - \alpha \log N,\ \log E\bigr),

which is how Hoffmann et al. (``hoffmann2022training``) parameterise it: the fit is done on
:math:`\log L` with a Huber loss *summed* over the points, from many starts, with
L-BFGS (see :mod:`nnapprox.scaling.huber_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Real

from .huber_fit import FitResult, fit_huber_log


@dataclass(frozen=True)
class LogLogFit:
    """Least-squares line through :math:`(\\log x, \\log y)`."""

    slope: float
    intercept: float  # log k
    slope_se: float  # standard error of the slope
    r2: float
    n: int

    def predict(self, x: Real[np.ndarray, " n"]) -> Float[np.ndarray, " n"]:
        return np.exp(self.intercept) * np.asarray(x, dtype=float) ** self.slope


def fit_loglog(x: Real[np.ndarray, " n"], y: Real[np.ndarray, " n"]) -> LogLogFit:
    r"""OLS fit of :math:`\log y = \log k + \alpha \log x`.

    Returns the slope :math:`\alpha`, the intercept :math:`\log k`, the slope's standard
    error :math:`\hat\sigma / \sqrt{\sum (\log x_i - \overline{\log x})^2}` and :math:`R^2`
    of the regression in log space.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 3:
        raise ValueError(f"fit_loglog needs two 1-d arrays of equal length >= 3, got {x.shape} and {y.shape}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError("fit_loglog needs positive x and y (it fits in log space)")
    u, v = np.log(x), np.log(y)
    du = u - u.mean()
    slope = float((du * (v - v.mean())).sum() / (du**2).sum())
    intercept = float(v.mean() - slope * u.mean())
    resid = v - (intercept + slope * u)
    ss_res = float((resid**2).sum())
    ss_tot = float(((v - v.mean()) ** 2).sum())
    se = float(np.sqrt(ss_res / (len(x) - 2) / (du**2).sum()))
    return LogLogFit(slope, intercept, se, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0, len(x))


def saturating_power_law(
    N: Real[np.ndarray, " n"], E: float, A: float, alpha: float
) -> Float[np.ndarray, " n"]:
    r""":math:`L(N) = E + A N^{-\alpha}`."""
    return E + A * np.asarray(N, dtype=float) ** (-alpha)


def _log_pred_saturating(
    theta: Float[np.ndarray, " 3"], N: Float[np.ndarray, "n 1"]
) -> tuple[Float[np.ndarray, " n"], Float[np.ndarray, "n 3"]]:
    """log L-hat and its gradient for theta = (log A, alpha, log E)."""
    a, alpha, e = theta
    logN = N[:, 0]
    z = np.stack([a - alpha * logN, np.full_like(logN, e)], axis=1)
    zmax = z.max(axis=1, keepdims=True)
    w = np.exp(z - zmax)
    s = w.sum(axis=1, keepdims=True)
    lse = (zmax + np.log(s))[:, 0]
    w = w / s  # softmax weights
    grad = np.stack([w[:, 0], -w[:, 0] * logN, w[:, 1]], axis=1)
    return lse, grad


def saturating_starts() -> Float[np.ndarray, "starts 3"]:
    """A grid of starting points (log A, alpha, log E) in the spirit of Hoffmann et al."""
    grid = np.array(np.meshgrid(np.arange(0.0, 21.0, 5.0), np.arange(0.0, 2.01, 0.5),
                                np.arange(-1.0, 1.51, 0.5), indexing="ij"))
    return grid.reshape(3, -1).T


def fit_saturating_power_law(
    N: Real[np.ndarray, " n"],
    L: Float[np.ndarray, " n"],
    *,
    delta: float = 1e-3,
    starts: Float[np.ndarray, "starts 3"] | None = None,
    reduction: str = "sum",
    tight: bool = True,
    n_best: int | None = 32,
) -> FitResult:
    r"""Fit :math:`L = E + A N^{-\alpha}` by summed Huber on :math:`\log L` (many starts, L-BFGS).

    Returns a :class:`~nnapprox.scaling.huber_fit.FitResult` whose ``params`` are
    ``{"E", "A", "alpha"}``.
    """
    N = np.asarray(N, dtype=float)
    L = np.asarray(L, dtype=float)
    if N.shape != L.shape or N.ndim != 1 or len(N) < 4:
        raise ValueError(f"need 1-d N and L of equal length >= 4, got {N.shape} and {L.shape}")
    if (N <= 0).any() or (L <= 0).any():
        raise ValueError("N and L must be positive")
    res = fit_huber_log(
        _log_pred_saturating, np.log(N)[:, None], np.log(L),
        saturating_starts() if starts is None else starts, delta=delta, reduction=reduction, tight=tight, n_best=n_best,
    )
    a, alpha, e = res.theta
    return res.with_params({"E": float(np.exp(e)), "A": float(np.exp(a)), "alpha": float(alpha)})
