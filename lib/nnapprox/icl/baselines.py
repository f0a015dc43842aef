r"""Classical in-context estimators: what a transformer's prediction is compared with.

Chapter "In-context learning as gradient descent", section "The phenomenon" and the
sections of part II (``garg2022what``, ``bai2023transformers``, ``akyurek2023what``).

Every estimator takes a batch of prompts ``X`` of shape ``(batch, k, d)``, ``y`` of shape
``(batch, k)`` and queries ``x_query`` of shape ``(batch, d)`` and returns predictions of
shape ``(batch,)``. :func:`prefix_predictions` applies one to every prefix of a prompt,
which is how a causal transformer is evaluated (prediction of :math:`y_{k+1}` from the first
:math:`k` examples).

* least squares (minimum-norm): :math:`\hat w = X^+ y` (its exact risk with Gaussian inputs, :func:`least_squares_risk`);
* ridge: :math:`\hat w_\lambda = (X^\top X + k\lambda I)^{-1} X^\top y`, the minimiser of
  :math:`\frac1{2k}\|Xw - y\|^2 + \frac\lambda2 \|w\|^2`; with :math:`w\sim\mathcal N(0,
  s^2 I)` and noise :math:`\sigma`, the Bayes choice is :math:`\lambda = \sigma^2 / (k s^2)`;
* Lasso by ISTA, logistic regression by gradient descent;
* :math:`k`-nearest neighbours, averaging :math:`\hat w = \frac1k\sum_i y_i x_i` (and its
  exact risk under any input covariance, :func:`averaging_risk`);
* one gradient step from 0 with the step size that minimises the expected loss.
"""

from __future__ import annotations

from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

from ..ista import soft_threshold  # noqa: F401 - re-exported: the prox of tau ||.||_1

from .tasks import relu_net

Estimator = Callable[[Tensor, Tensor, Tensor], Tensor]


def least_squares(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"]
) -> Float[Tensor, " batch"]:
    r"""Minimum-norm least squares :math:`\hat y = x_{\rm q}^\top X^+ y` (exact interpolation when :math:`k \le d`)."""
    w = torch.linalg.lstsq(X.double().cpu(), y.double().cpu()[..., None], driver="gelsd").solution[..., 0]
    return (w.to(X) * x_query).sum(-1)


def ridge_weights(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], lam: float | Float[Tensor, " batch"]
) -> Float[Tensor, "batch d"]:
    r"""Ridge minimiser of :math:`\frac1{2k}\|Xw-y\|^2 + \frac\lambda2\|w\|^2`: :math:`(X^\top X/k + \lambda I)^{-1} X^\top y / k`."""
    k, d = X.shape[1], X.shape[2]
    lam_t = torch.as_tensor(lam, dtype=X.dtype, device=X.device).reshape(-1, 1, 1)
    A = X.transpose(1, 2) @ X / k + lam_t * torch.eye(d, dtype=X.dtype, device=X.device)
    b = (X.transpose(1, 2) @ y[..., None]) / k
    return torch.linalg.solve(A, b)[..., 0]


def ridge(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"],
    lam: float | Float[Tensor, " batch"] = 1e-3,
) -> Float[Tensor, " batch"]:
    r"""Ridge prediction :math:`x_{\rm q}^\top \hat w_\lambda`."""
    return (ridge_weights(X, y, lam) * x_query).sum(-1)


def ista(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], lam: float, eta: float, n_steps: int,
    w0: Float[Tensor, "batch d"] | None = None,
) -> Float[Tensor, "steps_plus_one batch d"]:
    r"""ISTA on :math:`\frac1{2k}\|Xw-y\|^2 + \lambda\|w\|_1`: :math:`w \leftarrow S_{\eta\lambda}(w - \eta X^\top(Xw-y)/k)`; all iterates."""
    if eta <= 0 or lam < 0 or n_steps < 0:
        raise ValueError(f"need eta > 0, lam >= 0, n_steps >= 0; got {eta}, {lam}, {n_steps}")
    k = X.shape[1]
    w = torch.zeros(X.shape[0], X.shape[2], dtype=X.dtype, device=X.device) if w0 is None else w0
    out = [w]
    for _ in range(n_steps):
        grad = torch.einsum("bkd,bk->bd", X, torch.einsum("bkd,bd->bk", X, w) - y) / k
        w = soft_threshold(w - eta * grad, eta * lam)
        out.append(w)
    return torch.stack(out)


def logistic_gd(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], eta: float, n_steps: int,
    w0: Float[Tensor, "batch d"] | None = None,
) -> Float[Tensor, "steps_plus_one batch d"]:
    r"""Gradient descent on the logistic loss :math:`\frac1k\sum_i \log(1+e^{w^\top x_i}) - y_i w^\top x_i`; all iterates.

    :math:`w \leftarrow w - \frac\eta k \sum_i (\mathrm{sigmoid}(w^\top x_i) - y_i) x_i`.
    """
    if eta <= 0 or n_steps < 0:
        raise ValueError(f"need eta > 0 and n_steps >= 0; got {eta}, {n_steps}")
    k = X.shape[1]
    w = torch.zeros(X.shape[0], X.shape[2], dtype=X.dtype, device=X.device) if w0 is None else w0
    out = [w]
    for _ in range(n_steps):
        r = torch.sigmoid(torch.einsum("bkd,bd->bk", X, w)) - y
        w = w - eta * torch.einsum("bkd,bk->bd", X, r) / k
        out.append(w)
    return torch.stack(out)


def knn(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"], n_neighbors: int = 3
) -> Float[Tensor, " batch"]:
    r"""Mean label of the ``n_neighbors`` nearest examples (all of them when :math:`k` is smaller)."""
    m = min(n_neighbors, X.shape[1])
    dist = (X - x_query[:, None, :]).pow(2).sum(-1)
    idx = dist.topk(m, largest=False).indices
    return y.gather(1, idx).mean(1)


def averaging(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"]
) -> Float[Tensor, " batch"]:
    r"""Averaging :math:`\hat w = \frac1k \sum_i y_i x_i` (Garg et al.'s baseline; one GD step of size 1 from 0)."""
    w = torch.einsum("bkd,bk->bd", X, y) / X.shape[1]
    return (w * x_query).sum(-1)


def averaging_risk(Sigma: Float[Tensor, "d d"], k: int) -> float:
    r"""Exact normalised risk of :func:`averaging` after :math:`k` examples, :math:`x\sim\mathcal N(0,\Sigma)`, :math:`w\sim\mathcal N(0,I_d)`.

    With :math:`S = \frac1k\sum_i x_i x_i^\top` and Isserlis' theorem
    :math:`\mathbb E[x x^\top x x^\top] = 2\Sigma^2 + \operatorname{tr}(\Sigma)\Sigma`,

    .. math::
        \frac{\mathbb E(\hat y - y)^2}{\mathbb E y^2}
        = \frac{(1 + \tfrac1k)\operatorname{tr}\Sigma^3 + \tfrac1k\operatorname{tr}\Sigma\,\operatorname{tr}\Sigma^2
                 - 2\operatorname{tr}\Sigma^2 + \operatorname{tr}\Sigma}{\operatorname{tr}\Sigma},

    which is :math:`(d+1)/k` for :math:`\Sigma = I_d` and :math:`(c^2-1)^2 + c^4 (d+1)/k` for
    :math:`\Sigma = c^2 I_d`.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    S = Sigma.double()
    t1, t2, t3 = torch.trace(S), torch.trace(S @ S), torch.trace(S @ S @ S)
    return float(((1 + 1 / k) * t3 + t1 * t2 / k - 2 * t2 + t1) / t1)


def least_squares_risk(d: int, k: int, sigma: float) -> float:
    r"""Exact test risk :math:`\mathbb E(\hat y - y)^2` of :func:`least_squares` on :math:`k` noisy examples, :math:`x \sim \mathcal N(0, I_d)`.

    With :math:`y = w^\top x + \sigma\varepsilon`, the fitted :math:`\hat w - w = (X^\top X)^{-1} X^\top \sigma\varepsilon`
    is independent of the query, and :math:`(X^\top X)^{-1}` is inverse Wishart with mean
    :math:`I_d / (k - d - 1)`, so

    .. math::
        \mathbb E(\hat y - y)^2 = \sigma^2 \Bigl(1 + \frac{d}{k - d - 1}\Bigr) \qquad (k \ge d + 2),

    whatever the prior on :math:`w`.
    """
    if k < d + 2 or sigma < 0:
        raise ValueError(f"need k >= d + 2 (the inverse Wishart mean is finite) and sigma >= 0; got d={d}, k={k}, sigma={sigma}")
    return sigma ** 2 * (1 + d / (k - d - 1))


def logistic_regression(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"],
    eta: float = 2.0, n_steps: int = 200,
) -> Float[Tensor, " batch"]:
    r"""Score :math:`x_{\rm q}^\top \hat w` of logistic regression fitted by :func:`logistic_gd` (labels in :math:`\{0, 1\}`).

    Predict class 1 where the score is positive. On separable prompts the iterates grow
    without bound, but their direction, and with it the predicted class, settles.
    """
    w = logistic_gd(X, y, eta, n_steps)[-1]
    return (w * x_query).sum(-1)


def one_step_gd(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"], eta: float
) -> Float[Tensor, " batch"]:
    r"""One GD step from :math:`w_0=0` on :math:`\frac1{2k}\|Xw-y\|^2`: :math:`\hat y = \eta\, x_{\rm q}^\top X^\top y / k`."""
    return eta * averaging(X, y, x_query)


def best_one_step_eta(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"],
    y_query: Float[Tensor, " batch"],
) -> float:
    r"""Line search for :func:`one_step_gd`: the loss is quadratic in :math:`\eta`, so :math:`\eta^\star = \mathbb E[y_{\rm q} s] / \mathbb E[s^2]`, :math:`s = x_{\rm q}^\top X^\top y / k`."""
    s = averaging(X, y, x_query).double()
    return float((s * y_query.double()).sum() / (s * s).sum())


def prefix_predictions(
    estimator: Estimator, X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], **kwargs
) -> Float[Tensor, "batch N"]:
    r"""Prediction of :math:`y_{k+1}` from the first :math:`k` examples, for :math:`k = 0, \dots, N-1` (0 at :math:`k=0`)."""
    preds = [torch.zeros_like(y[:, 0])]
    for k in range(1, X.shape[1]):
        preds.append(estimator(X[:, :k], y[:, :k], X[:, k], **kwargs))
    return torch.stack(preds, dim=1)


def bootstrap_band(
    errors: Float[Tensor, "tasks k"], generator: torch.Generator, n_boot: int = 200, level: float = 0.9
) -> tuple[Float[Tensor, " k"], Float[Tensor, " k"]]:
    r"""Percentile bootstrap band of the mean over tasks, column by column: ``(lo, hi)`` at ``level``."""
    if not 0 < level < 1 or n_boot < 1:
        raise ValueError(f"need 0 < level < 1 and n_boot >= 1, got {level}, {n_boot}")
    n = errors.shape[0]
    idx = rng.randint(n, (n_boot, n), generator=generator, device=errors.device)
    means = errors[idx].mean(1)  # (n_boot, k)
    q = torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=means.dtype, device=means.device)
    lo, hi = torch.quantile(means, q, dim=0)
    return lo, hi


def prediction_distance(p: Float[Tensor, " batch"], q: Float[Tensor, " batch"]) -> float:
    r"""Squared prediction difference :math:`\mathbb E (p - q)^2` (Akyürek et al.'s probe of which algorithm a model runs)."""
    return float((p - q).double().pow(2).mean())


def discrete_bayes(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"],
    pool: Float[Tensor, "M d"], sigma: float, chunk: int | None = None,
) -> Float[Tensor, " batch"]:
    r"""Posterior mean for a uniform prior on a finite pool of tasks (``raventos2023pretraining``, dMMSE).

    :math:`\hat w = \sum_m \pi_m w_m` with
    :math:`\pi_m \propto \exp(-\|y - X w_m\|^2 / 2\sigma^2)`; the Bayes estimator for prompts
    whose task is drawn uniformly from ``pool`` and whose noise is :math:`\mathcal N(0, \sigma^2)`.
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    P = pool.to(device=X.device, dtype=torch.float64)
    chunk = chunk or max(1, 2 ** 22 // P.numel())  # about 32 MB of (b, M, d) float64 per chunk
    out = []
    for s in range(0, X.shape[0], chunk):  # ||y - X w_m||^2 = |y|^2 - 2 w_m.X^T y + w_m^T X^T X w_m, in chunks of prompts
        Xs, ys = X[s:s + chunk].double(), y[s:s + chunk].double()
        A, c = Xs.transpose(1, 2) @ Xs, torch.einsum("bkd,bk->bd", Xs, ys)  # (b, d, d), (b, d)
        quad = (torch.einsum("md,bde->bme", P, A) * P).sum(-1)  # (b, M): w_m^T A w_m
        sq = ys.pow(2).sum(1)[:, None] - 2 * c @ P.T + quad
        post = torch.softmax(-sq / (2 * sigma ** 2), dim=1)  # (b, M)
        out.append(((post @ P) * x_query[s:s + chunk].double()).sum(-1))
    return torch.cat(out).to(X.dtype)


def bayes_ridge(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"],
    sigma: float, w_scale: float = 1.0,
) -> Float[Tensor, " batch"]:
    r"""Posterior mean for :math:`w\sim\mathcal N(0, s^2 I)`, noise :math:`\sigma`: ridge with :math:`\lambda = \sigma^2/(k s^2)` (0 at :math:`k = 0`)."""
    if X.shape[1] == 0:
        return torch.zeros_like(x_query[:, 0])
    return ridge(X, y, x_query, sigma ** 2 / (X.shape[1] * w_scale ** 2))


def relu_net_fit(
    X: Float[Tensor, "batch k d"], y: Float[Tensor, "batch k"], x_query: Float[Tensor, "batch d"], K: int,
    generator: torch.Generator, n_steps: int = 500, lr: float = 3e-2,
) -> Float[Tensor, " batch"]:
    r"""A two-layer ReLU network :math:`\sum_{k\le K} a_k\sigma(v_k^\top x)` trained by Adam on each prompt's examples.

    One network per prompt (all trained at once; the prompts' losses do not interact),
    initialised :math:`V_{kj}\sim\mathcal N(0, 1/d)`, :math:`a_k\sim\mathcal N(0, 2/K)`; the
    baseline of ``wu2025incontext``'s numerical study ("training with prompt samples").
    """
    if K < 1 or n_steps < 0 or lr <= 0:
        raise ValueError(f"need K >= 1, n_steps >= 0, lr > 0; got {K}, {n_steps}, {lr}")
    b, _, d = X.shape
    V = (rng.randn(b, K, d, generator=generator, dtype=X.dtype, device=X.device) / d ** 0.5).requires_grad_(True)
    a = (rng.randn(b, K, generator=generator, dtype=X.dtype, device=X.device) * (2 / K) ** 0.5).requires_grad_(True)

    def net(Z: Tensor) -> Tensor:
        return relu_net(Z, a, V)

    opt = torch.optim.Adam([a, V], lr=lr)
    with torch.enable_grad():
        for _ in range(n_steps):
            loss = (net(X) - y).pow(2).mean(1).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return net(x_query[:, None, :])[:, 0].detach()
