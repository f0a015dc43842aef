r"""The fitting engine behind every scaling law of the chapter: Huber on log loss, many starts, L-BFGS.

Chapter *Neural scaling laws*, section "How fits go wrong" (``hoffmann2022training``,
``besiroglu2024chinchilla``).

Given a model :math:`\log \hat L(x; \theta)` and observed losses :math:`L_i`, minimise

.. math::  \mathcal{J}(\theta) = \sum_i H_\delta\bigl(\log \hat L(x_i;\theta) - \log L_i\bigr),
           \qquad H_\delta(r) = \begin{cases} r^2/2 & |r| \le \delta \\
                                              \delta(|r| - \delta/2) & |r| > \delta\end{cases}

from every point of a grid of starts with L-BFGS (scipy), and keep the best. Two details
matter (``besiroglu2024chinchilla``): the objective is a *sum*, not a mean, and the
tolerances are tight. ``reduction="mean", tight=False`` reproduces the pitfall.

Why the mean stops early: L-BFGS's iterates do not change when the objective is multiplied
by a constant :math:`c > 0` (its search directions and line-search conditions are ratios of
gradients and values), but its stopping tests do. Scipy stops when
:math:`\max_j |\partial_j f| \le` ``gtol`` :math:`= 10^{-5}` or when one iteration lowers
:math:`f` by at most ``ftol`` :math:`\cdot \max(|f|, 1)`, ``ftol`` :math:`\approx 2.2\cdot 10^{-9}`
(the defaults). For :math:`f = \mathcal J / n` these are the tests
:math:`\max_j |\partial_j \mathcal J| \le n \cdot` ``gtol`` and (while :math:`\mathcal J < n`)
:math:`\Delta \mathcal J \le n \cdot` ``ftol`` on the sum: :math:`n` times looser. With the
same L-BFGS memory (``maxcor``) the mean fit follows the summed fit's path and stops sooner
on it; ``tight=True`` also doubles the memory to 20, which changes the path only after the
tenth iteration. Every fit keeps its per-start runs (:class:`StartRuns`) so that this can be
measured (chapter section "How fits go wrong").
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import numpy as np
from jaxtyping import Bool, Float, Int
from scipy.optimize import minimize

LogModel = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
REDUCTIONS = ("sum", "mean")


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run scipy's bundled OpenBLAS on one thread inside the block (restored afterwards).

    L-BFGS-B calls BLAS on vectors of a few entries; with OpenBLAS's thread pool on a busy
    machine each call costs milliseconds instead of microseconds (a 10-20x slowdown measured
    on a 2-core CPU). Where the library cannot be found this does nothing.
    """
    lib = None
    try:
        import scipy

        libs = glob.glob(os.path.join(os.path.dirname(scipy.__file__) + ".libs", "libscipy_openblas*.so*"))
        lib = ctypes.CDLL(libs[0]) if libs else None
        previous = lib.scipy_openblas_get_num_threads() if lib is not None else None
    except (OSError, AttributeError):
        lib, previous = None, None
    if lib is not None:
        lib.scipy_openblas_set_num_threads(1)
    try:
        yield
    finally:
        if lib is not None and previous:
            lib.scipy_openblas_set_num_threads(int(previous))


def huber(r: Float[np.ndarray, " n"], delta: float) -> Float[np.ndarray, " n"]:
    r""":math:`H_\delta(r)`, elementwise."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))


def huber_grad(r: Float[np.ndarray, " n"], delta: float) -> Float[np.ndarray, " n"]:
    r""":math:`H_\delta'(r) = \operatorname{clip}(r, -\delta, \delta)`."""
    return np.clip(r, -delta, delta)


@dataclass(frozen=True)
class StartRuns:
    r"""One L-BFGS run per start (after screening), in the order they ran.

    ``objective_sum`` is the *summed* Huber objective :math:`\mathcal J` at each end point,
    whatever reduction the fit minimised, so that runs of a mean and a summed fit from the
    same starts can be compared on one scale.
    """

    starts: Float[np.ndarray, "S p"]
    theta: Float[np.ndarray, "S p"]
    objective_sum: Float[np.ndarray, " S"]
    n_iter: Int[np.ndarray, " S"]
    success: Bool[np.ndarray, " S"]


@dataclass(frozen=True)
class FitResult:
    """Best fit over all starts: raw parameter vector, named parameters, objective, diagnostics.

    ``objective`` is in the fit's own reduction (the mean for ``reduction="mean"``); ``runs``
    holds every start's run.
    """

    theta: np.ndarray
    objective: float
    n_starts: int
    n_converged: int
    params: dict[str, float] = field(default_factory=dict)
    runs: StartRuns | None = None

    def with_params(self, params: dict[str, float]) -> "FitResult":
        return replace(self, params=params)

    def __getitem__(self, name: str) -> float:
        return self.params[name]


def fit_huber_log(
    log_model: LogModel,
    X: Float[np.ndarray, "n k"],
    log_L: Float[np.ndarray, " n"],
    starts: Float[np.ndarray, "starts p"],
    *,
    delta: float = 1e-3,
    reduction: str = "sum",
    tight: bool = True,
    n_best: int | None = 32,
    max_iter: int = 10_000,
) -> FitResult:
    r"""Minimise the Huber objective from every start with L-BFGS-B; return the best.

    Parameters
    ----------
    log_model : ``(theta, X) -> (log_L_hat, d log_L_hat / d theta)``, shapes ``(n,)`` and ``(n, p)``.
    X : covariates, one row per observation (already in log space where the model wants it).
    log_L : observed log losses.
    starts : one row per starting point.
    delta : Huber threshold on the log residual (``1e-3`` as in ``hoffmann2022training``).
    reduction : ``"sum"`` (correct) or ``"mean"`` (the pitfall).
    tight : tight tolerances (``ftol = gtol = 1e-12``) or scipy's defaults.
    n_best : run L-BFGS from the ``n_best`` starts with the lowest initial objective
        (``None``: from every start). Screening the grid first costs one evaluation per
        start and rarely changes the optimum; the tests check it against ``None``.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}: valid reductions are {REDUCTIONS}")
    if delta <= 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    X = np.asarray(X, dtype=float)
    log_L = np.asarray(log_L, dtype=float)
    starts = np.atleast_2d(np.asarray(starts, dtype=float))
    if X.shape[0] != log_L.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but log_L has {log_L.shape[0]}")
    scale = 1.0 if reduction == "sum" else 1.0 / len(log_L)

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        pred, grad = log_model(theta, X)
        r = pred - log_L
        return scale * float(huber(r, delta).sum()), scale * (huber_grad(r, delta) @ grad)

    options = {"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-12, "maxcor": 20} if tight else {}
    if n_best is not None and n_best < len(starts):
        initial = np.array([objective(theta0)[0] for theta0 in starts])
        initial = np.where(np.isfinite(initial), initial, np.inf)
        starts = starts[np.argsort(initial, kind="stable")[:n_best]]
    best, best_f = None, np.inf
    thetas, values, n_iter, success = [], [], [], []
    with single_threaded_blas():
        for theta0 in starts:
            res = minimize(objective, theta0, jac=True, method="L-BFGS-B", options=options)
            thetas.append(np.asarray(res.x, dtype=float))
            values.append(float(res.fun))
            n_iter.append(int(res.nit))
            success.append(bool(res.success))
            if np.isfinite(res.fun) and res.fun < best_f:
                best, best_f = res.x, float(res.fun)
    if best is None:
        raise RuntimeError("no start gave a finite objective")
    runs = StartRuns(starts=starts.copy(), theta=np.array(thetas), objective_sum=np.array(values) / scale,
                     n_iter=np.array(n_iter), success=np.array(success))
    return FitResult(theta=np.asarray(best), objective=best_f, n_starts=len(starts),
                     n_converged=int(runs.success.sum()), runs=runs)
