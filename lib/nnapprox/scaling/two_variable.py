r"""Scaling laws in two variables, model size :math:`N` and data size :math:`D`.

Chapter *Neural scaling laws*, sections "A real corpus, offline" and "How fits go wrong".

Chinchilla's form (``hoffmann2022training``, eq. 2), fitted in log-sum-exp form,

.. math::  L(N, D) = E + \frac{A}{N^{\alpha}} + \frac{B}{D^{\beta}}, \qquad
           \log \hat L = \operatorname{LSE}(a - \alpha \log N,\ b - \beta \log D,\ e),

and Kaplan et al.'s eq. (1.5) (``kaplan2020scaling``), which has no irreducible term,

.. math::  L(N, D) = \Bigl[\Bigl(\frac{N_c}{N}\Bigr)^{\alpha_N/\alpha_D} + \frac{D_c}{D}\Bigr]^{\alpha_D},
           \qquad \log \hat L = \alpha_D \operatorname{LSE}\Bigl(\tfrac{\alpha_N}{\alpha_D}(\log N_c - \log N),\
           \log D_c - \log D\Bigr).

Both are fitted with :func:`~nnapprox.scaling.huber_fit.fit_huber_log` (summed Huber on
log loss, many starts, L-BFGS); the gradients below are analytic.
"""

from __future__ import annotations

import itertools

import numpy as np
from jaxtyping import Float, Real

from .huber_fit import FitResult, fit_huber_log

FORMS = ("chinchilla", "kaplan")


def _lse_softmax(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    zmax = z.max(axis=1, keepdims=True)
    w = np.exp(z - zmax)
    s = w.sum(axis=1, keepdims=True)
    return (zmax + np.log(s))[:, 0], w / s


def chinchilla_log_model(theta: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log L-hat and gradient for theta = (a, b, e, alpha, beta); X = (log N, log D)."""
    a, b, e, alpha, beta = theta
    logN, logD = X[:, 0], X[:, 1]
    z = np.stack([a - alpha * logN, b - beta * logD, np.full_like(logN, e)], axis=1)
    lse, w = _lse_softmax(z)
    grad = np.stack([w[:, 0], w[:, 1], w[:, 2], -w[:, 0] * logN, -w[:, 1] * logD], axis=1)
    return lse, grad


def kaplan_log_model(theta: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log L-hat and gradient for theta = (log N_c, log D_c, alpha_N, alpha_D); X = (log N, log D)."""
    lNc, lDc, aN, aD = theta
    logN, logD = X[:, 0], X[:, 1]
    u1 = (aN / aD) * (lNc - logN)
    z = np.stack([u1, lDc - logD], axis=1)
    S, w = _lse_softmax(z)
    grad = np.stack([aN * w[:, 0], aD * w[:, 1], w[:, 0] * (lNc - logN), S - w[:, 0] * u1], axis=1)
    return aD * S, grad


def chinchilla_loss(N, D, E: float, A: float, B: float, alpha: float, beta: float):
    r""":math:`E + A N^{-\alpha} + B D^{-\beta}` (arrays or floats)."""
    return E + A * np.asarray(N, dtype=float) ** (-alpha) + B * np.asarray(D, dtype=float) ** (-beta)


def kaplan_loss(N, D, N_c: float, D_c: float, alpha_N: float, alpha_D: float):
    r"""Kaplan et al. eq. (1.5): :math:`[(N_c/N)^{\alpha_N/\alpha_D} + D_c/D]^{\alpha_D}`."""
    N = np.asarray(N, dtype=float)
    D = np.asarray(D, dtype=float)
    return ((N_c / N) ** (alpha_N / alpha_D) + D_c / D) ** alpha_D


def sample_chinchilla_runs(
    n: int,
    rng: np.random.Generator,
    *,
    E: float, A: float, B: float, alpha: float, beta: float,
    log10_C: tuple[float, float] = (18.5, 21.5),
    log10_N: tuple[float, float] = (7.8, 10.2),
    noise: float = 0.01,
) -> tuple[Float[np.ndarray, " n"], Float[np.ndarray, " n"], Float[np.ndarray, " n"]]:
    r"""Synthetic training runs: :math:`C, N` log-uniform, :math:`D = C/(6N)`, :math:`L = L(N, D)\,e^{\text{noise}\cdot\varepsilon}`.

    Returns ``(N, D, L)``. Used to check a fitting procedure against known constants
    (``besiroglu2024chinchilla``); draws come from ``rng`` only.
    """
    if n < 1 or noise < 0:
        raise ValueError(f"need n >= 1 and noise >= 0, got n={n}, noise={noise}")
    C = 10 ** rng.uniform(*log10_C, n)
    N = 10 ** rng.uniform(*log10_N, n)
    D = C / (6 * N)
    L = chinchilla_loss(N, D, E, A, B, alpha, beta) * np.exp(noise * rng.standard_normal(n))
    return N, D, L


def chinchilla_starts() -> Float[np.ndarray, "starts 5"]:
    """Hoffmann et al.'s grid of initialisations (a, b, e, alpha, beta), thinned to 4x4x3x3x3 = 432."""
    grid = itertools.product(np.linspace(0, 25, 4), np.linspace(0, 25, 4), np.linspace(-1, 1, 3),
                             np.linspace(0, 2, 3), np.linspace(0, 2, 3))
    return np.array(list(grid), dtype=float)


def kaplan_starts() -> Float[np.ndarray, "starts 4"]:
    """A grid of initialisations (log N_c, log D_c, alpha_N, alpha_D)."""
    grid = itertools.product(np.linspace(0, 30, 4), np.linspace(0, 30, 4), np.array([0.05, 0.3, 1.0]),
                             np.array([0.05, 0.3, 1.0]))
    return np.array(list(grid), dtype=float)


def _check(N, D, L) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    N, D, L = (np.asarray(v, dtype=float) for v in (N, D, L))
    if not (N.shape == D.shape == L.shape) or N.ndim != 1:
        raise ValueError(f"N, D and L must be 1-d arrays of equal length, got {N.shape}, {D.shape}, {L.shape}")
    if (N <= 0).any() or (D <= 0).any() or (L <= 0).any():
        raise ValueError("N, D and L must be positive")
    return N, D, L


def fit_chinchilla(
    N: Real[np.ndarray, " n"],
    D: Real[np.ndarray, " n"],
    L: Float[np.ndarray, " n"],
    *,
    delta: float = 1e-3,
    starts: Float[np.ndarray, "starts 5"] | None = None,
    reduction: str = "sum",
    tight: bool = True,
    n_best: int | None = 32,
) -> FitResult:
    r"""Fit :math:`E + A/N^\alpha + B/D^\beta`; ``params`` holds ``E, A, B, alpha, beta``."""
    N, D, L = _check(N, D, L)
    if len(L) < 6:
        raise ValueError(f"fit_chinchilla needs at least 6 points for 5 parameters, got {len(L)}")
    X = np.stack([np.log(N), np.log(D)], axis=1)
    res = fit_huber_log(chinchilla_log_model, X, np.log(L), chinchilla_starts() if starts is None else starts,
                        delta=delta, reduction=reduction, tight=tight, n_best=n_best)
    a, b, e, alpha, beta = res.theta
    return res.with_params({"E": float(np.exp(e)), "A": float(np.exp(a)), "B": float(np.exp(b)),
                            "alpha": float(alpha), "beta": float(beta)})


def fit_kaplan(
    N: Real[np.ndarray, " n"],
    D: Real[np.ndarray, " n"],
    L: Float[np.ndarray, " n"],
    *,
    delta: float = 1e-3,
    starts: Float[np.ndarray, "starts 4"] | None = None,
    reduction: str = "sum",
    tight: bool = True,
    n_best: int | None = 32,
) -> FitResult:
    r"""Fit Kaplan et al.'s eq. (1.5); ``params`` holds ``N_c, D_c, alpha_N, alpha_D``."""
    N, D, L = _check(N, D, L)
    if len(L) < 5:
        raise ValueError(f"fit_kaplan needs at least 5 points for 4 parameters, got {len(L)}")
    X = np.stack([np.log(N), np.log(D)], axis=1)
    res = fit_huber_log(kaplan_log_model, X, np.log(L), kaplan_starts() if starts is None else starts,
                        delta=delta, reduction=reduction, tight=tight, n_best=n_best)
    lNc, lDc, aN, aD = res.theta
    return res.with_params({"N_c": float(np.exp(lNc)), "D_c": float(np.exp(lDc)),
                            "alpha_N": float(aN), "alpha_D": float(aD)})


def predict(fit: FitResult, form: str, N, D):
    """Loss predicted by a fitted ``form`` (``"chinchilla"`` or ``"kaplan"``) at ``(N, D)``."""
    if form == "chinchilla":
        return chinchilla_loss(N, D, **fit.params)
    if form == "kaplan":
        return kaplan_loss(N, D, **fit.params)
    raise ValueError(f"unknown form {form!r}: valid forms are {FORMS}")
