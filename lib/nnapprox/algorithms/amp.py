r"""Approximate message passing (AMP) for sparse regression, its state evolution, the replica
prediction of the Bayes risk, and the exact Bayes estimator by enumeration of supports.

Chapter "Functions versus algorithms" (``chapters/algorithms.md``), section "Benefit 1:
hardness". The model: :math:`y = Ax + w`, :math:`A \in \mathbb R^{n\times d}` with i.i.d.
:math:`\mathcal N(0, 1/n)` entries, :math:`\delta = n/d`, :math:`w \sim \mathcal N(0,
\sigma^2 I_n)`, and a Bernoulli-Gaussian signal :math:`x_i \sim (1-\varepsilon)\,\delta_0 +
\varepsilon\,\mathcal N(0, 1)` (so :math:`\mathbb E x_i^2 = \varepsilon`).

AMP (``donoho2009message``; ``bayati2011dynamics``) from :math:`x^0 = 0`,
:math:`z^{-1} = 0`:

.. math::  x^{t+1} = \eta_t(x^t + A^\top z^t), \qquad
           z^t = y - A x^t + \tfrac1\delta\, z^{t-1}\,
           \langle \eta_{t-1}'(x^{t-1} + A^\top z^{t-1}) \rangle,

with :math:`\langle v \rangle = \frac1d\sum_i v_i` (the last term is the *Onsager
correction*; without it the iteration is plain iterative thresholding, the foil). The
denoiser is the scalar posterior mean :math:`\eta_t(r) = \mathbb E[X \mid X + \tau_t Z = r]`,
whose derivative is :math:`\operatorname{Var}(X \mid r)/\tau_t^2`. State evolution
(``bayati2011dynamics``, for Lipschitz denoisers; ``donoho2009message``):

.. math::  \tau_0^2 = \sigma^2 + \varepsilon/\delta, \qquad
           \tau_{t+1}^2 = \sigma^2 + \tfrac1\delta\,\mathrm{mmse}(\tau_t^2), \qquad
           \tfrac1d\|x^{t+1} - x\|^2 \to \mathrm{mmse}(\tau_t^2),

with :math:`\mathrm{mmse}(\tau^2) = \mathbb E\operatorname{Var}(X \mid X + \tau Z)`. The
Bayes risk is given by the replica-symmetric potential (``reeves2016replica``,
``barbier2016mutual``): :math:`\frac1d I(x; y \mid A) \to \min_{\tau^2} \Phi(\tau^2)`,

.. math::  \Phi(\tau^2) = I(X; X + \tau Z) + \tfrac\delta2\Bigl(\tfrac{\sigma^2}{\tau^2} - 1
           - \log\tfrac{\sigma^2}{\tau^2}\Bigr),

whose stationary points are the fixed points of state evolution; the MMSE is
:math:`\mathrm{mmse}(\tau_\star^2)` at the global minimiser, AMP's limit the largest fixed
point. When they differ, AMP is stuck in a *hard phase*.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox import rng

_L = 12.0  # quadrature half-width, in standard deviations of the wider mixture component


def _check_prior(eps: float, sigma2: float) -> None:
    if not (0.0 < eps < 1.0) or not (sigma2 > 0.0 and math.isfinite(sigma2)):
        raise ValueError(f"need 0 < eps < 1 and finite sigma2 > 0, got eps={eps}, sigma2={sigma2}")


def _posterior(r: Tensor, tau2: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """Posterior mean and variance of X given X + tau Z = r (broadcasting)."""
    s1 = 1.0 + tau2
    logit = (math.log(eps / (1 - eps)) + 0.5 * torch.log(tau2 / s1)
             + 0.5 * r**2 * (1.0 / tau2 - 1.0 / s1))
    pi = torch.sigmoid(logit)  # P(X != 0 | r)
    m1 = r / s1
    return pi * m1, pi * tau2 / s1 + pi * (1 - pi) * m1**2


def bg_denoiser(
    r: Float[Tensor, "*shape"], tau2: float | Tensor, eps: float
) -> tuple[Float[Tensor, "*shape"], Float[Tensor, "*shape"]]:
    r""":math:`\eta(r) = \mathbb E[X \mid X + \tau Z = r]` and :math:`\eta'(r) =
    \operatorname{Var}(X\mid r)/\tau^2` for the Bernoulli-Gaussian prior."""
    tau2 = torch.as_tensor(tau2, dtype=r.dtype, device=r.device)
    mean, var = _posterior(r, tau2, eps)
    return mean, var / tau2


def _grid(tau2: Tensor, N: int = 801) -> tuple[Tensor, Tensor]:
    r"""Nodes :math:`r = \tau\sinh v` on a uniform grid in ``v`` (fine near 0, where the
    narrow component lives, coarse in the tails) and trapezoid weights ``dr`` (m, N)."""
    tau = torch.sqrt(tau2)[:, None]
    V = torch.asinh(_L * torch.sqrt(1.0 + tau2)[:, None] / tau)
    v = V * torch.linspace(-1.0, 1.0, N, dtype=tau2.dtype, device=tau2.device)
    return tau * torch.sinh(v), tau * torch.cosh(v) * (2 * V / (N - 1))


def _density(r: Tensor, tau2: Tensor, eps: float) -> Tensor:
    def normal(v: Tensor) -> Tensor:
        return torch.exp(-0.5 * r**2 / v) / torch.sqrt(2 * math.pi * v)
    return (1 - eps) * normal(tau2) + eps * normal(1.0 + tau2)


def bg_mmse(tau2: Float[Tensor, " m"], eps: float) -> Float[Tensor, " m"]:
    r""":math:`\mathrm{mmse}(\tau^2) = \int \operatorname{Var}(X\mid r)\,p(r)\,dr` by the
    trapezoid rule in :math:`v = \operatorname{asinh}(r/\tau)` (deterministic; the integrand
    is analytic and decays fast, so the rule converges spectrally)."""
    if not (tau2 > 0).all():
        raise ValueError("tau2 must be > 0")
    r, w = _grid(tau2)
    t = tau2[:, None]
    return (_posterior(r, t, eps)[1] * _density(r, t, eps) * w).sum(1)


def bg_mutual_information(tau2: Float[Tensor, " m"], eps: float) -> Float[Tensor, " m"]:
    r""":math:`I(X; X + \tau Z) = h(X + \tau Z) - \tfrac12\log(2\pi e\tau^2)` (nats),
    by quadrature."""
    if not (tau2 > 0).all():
        raise ValueError("tau2 must be > 0")
    r, w = _grid(tau2)
    p = _density(r, tau2[:, None], eps)
    entropy = -(p * torch.log(p.clamp_min(1e-300)) * w).sum(1)
    return entropy - 0.5 * torch.log(2 * math.pi * math.e * tau2)


def state_evolution(
    delta: float, eps: float, sigma2: float, n_iter: int, dtype: torch.dtype = torch.float64
) -> tuple[Float[Tensor, " T"], Float[Tensor, " T_plus_one"]]:
    r""":math:`(\tau_t^2)_{t<T}` and the predicted MSE of :math:`x^t`, :math:`t = 0..T`
    (:math:`\varepsilon` at :math:`t = 0`, then :math:`\mathrm{mmse}(\tau_{t-1}^2)`)."""
    _check_prior(eps, sigma2)
    if not delta > 0 or n_iter < 1:
        raise ValueError(f"need delta > 0 and n_iter >= 1, got delta={delta}, n_iter={n_iter}")
    tau2 = torch.tensor([sigma2 + eps / delta], dtype=dtype)
    taus, mse = [], [torch.tensor([eps], dtype=dtype)]
    for _ in range(n_iter):
        taus.append(tau2)
        mse.append(bg_mmse(tau2, eps))
        tau2 = sigma2 + mse[-1] / delta
    return torch.cat(taus), torch.cat(mse)


def rs_potential(
    tau2: Float[Tensor, " m"], delta: float, eps: float, sigma2: float
) -> Float[Tensor, " m"]:
    r"""The replica-symmetric potential :math:`\Phi(\tau^2)` (nats per coordinate of ``x``)."""
    _check_prior(eps, sigma2)
    q = sigma2 / tau2
    return bg_mutual_information(tau2, eps) + 0.5 * delta * (q - 1 - torch.log(q))


def se_fixed_points(
    delta: float, eps: float, sigma2: float, n_grid: int = 200, n_bisect: int = 50
) -> Float[Tensor, " k"]:
    r"""All :math:`\tau^2 \in [\sigma^2, \sigma^2 + \varepsilon/\delta]` with
    :math:`\tau^2 = \sigma^2 + \mathrm{mmse}(\tau^2)/\delta`, increasing (sign changes on a
    log grid, refined by bisection). Stable and unstable alternate; the largest is stable."""
    _check_prior(eps, sigma2)
    lo, hi = math.log(sigma2), math.log(sigma2 + eps / delta)
    g = torch.exp(torch.linspace(lo, hi, n_grid, dtype=torch.float64))

    def F(t: Tensor) -> Tensor:
        return sigma2 + bg_mmse(t, eps) / delta - t

    f = F(g)
    idx = torch.nonzero((f[:-1] > 0) != (f[1:] > 0)).flatten()  # a sign change in each cell
    a, b, fa_pos = g[idx], g[idx + 1], f[idx] > 0
    for _ in range(n_bisect):
        mid = 0.5 * (a + b)
        left = (F(mid) > 0) == fa_pos  # the root lies in [mid, b]
        a, b = torch.where(left, mid, a), torch.where(left, b, mid)
    return 0.5 * (a + b)


def replica_prediction(delta: float, eps: float, sigma2: float) -> dict[str, float]:
    r"""The Bayes-optimal MMSE (fixed point of least :math:`\Phi`) and AMP's limit (the
    largest fixed point), with the number of fixed points (> 1 signals a first-order
    transition)."""
    fp = se_fixed_points(delta, eps, sigma2)
    phi = rs_potential(fp, delta, eps, sigma2)
    mm = bg_mmse(fp, eps)
    return {"mmse_bayes": float(mm[phi.argmin()]), "mmse_amp": float(mm[-1]),
            "tau2_bayes": float(fp[phi.argmin()]), "tau2_amp": float(fp[-1]),
            "n_fixed_points": int(fp.numel())}


def sample_instances(
    batch: int, d: int, delta: float, eps: float, sigma2: float, *,
    generator: torch.Generator, device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float64,
) -> tuple[Float[Tensor, "batch n d"], Float[Tensor, "batch d"], Float[Tensor, "batch n"]]:
    r"""``(A, x, y)``: :math:`A_{ij} \sim \mathcal N(0, 1/n)`, Bernoulli-Gaussian ``x``,
    :math:`y = Ax + w`, with :math:`n = \mathrm{round}(\delta d)`."""
    _check_prior(eps, sigma2)
    n = round(delta * d)
    if batch < 1 or d < 1 or n < 1:
        raise ValueError(f"need batch >= 1, d >= 1 and n = round(delta d) >= 1, "
                         f"got {batch}, {d}, {n}")
    kw = dict(generator=generator, device=device, dtype=dtype)
    A = rng.randn(batch, n, d, **kw) / math.sqrt(n)
    x = (rng.rand(batch, d, **kw) < eps).to(dtype) * rng.randn(batch, d, **kw)
    y = torch.einsum("bnd,bd->bn", A, x) + math.sqrt(sigma2) * rng.randn(batch, n, **kw)
    return A, x, y


def soft_denoiser(
    r: Float[Tensor, "*shape"], tau2: float | Tensor, alpha: float
) -> tuple[Float[Tensor, "*shape"], Float[Tensor, "*shape"]]:
    r"""Soft thresholding at :math:`\alpha\tau`, :math:`\eta(r) = \mathrm{sign}(r)(|r| -
    \alpha\tau)_+`, and :math:`\eta'(r) = 1\{|r| > \alpha\tau\}`. AMP with it
    (``donoho2009message``) has the Lasso's solutions as its fixed points, for a penalty set by
    :math:`\alpha` (``bayati2012lasso``): the convex alternative to the Bayes denoiser."""
    theta = alpha * torch.as_tensor(tau2, dtype=r.dtype, device=r.device).sqrt()
    return torch.sign(r) * torch.relu(r.abs() - theta), (r.abs() > theta).to(r.dtype)


def amp(
    A: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], eps: float, n_iter: int,
    tau2: Float[Tensor, " T"] | None = None, onsager: bool = True,
    x0: Float[Tensor, "batch d"] | None = None, alpha: float | None = None,
) -> Float[Tensor, "T_plus_one batch d"]:
    r"""AMP iterates :math:`x^0, \dots, x^T` with the Bayes denoiser.

    ``tau2``: the noise levels :math:`\tau_t^2` the denoiser assumes (e.g. from
    :func:`state_evolution`); ``None`` estimates them as :math:`\|z^t\|^2/n`.
    ``onsager=False`` drops the Onsager term (the foil: iterative thresholding).
    ``x0``: the start (default :math:`0`), with :math:`z^0 = y - Ax^0`; state evolution then
    starts at :math:`\tau_0^2 = \sigma^2 + \|x^0 - x\|^2/(n)`, so an *informed* start near
    :math:`x` follows the recursion from a small :math:`\tau_0^2`. ``alpha``: soft thresholding
    at :math:`\alpha\tau_t` (:func:`soft_denoiser`, the Lasso's AMP) instead of the Bayes
    denoiser.
    """
    if A.ndim != 3 or y.shape != A.shape[:2] or n_iter < 1:
        raise ValueError(f"need A (batch, n, d), y (batch, n), n_iter >= 1; got "
                         f"{tuple(A.shape)}, {tuple(y.shape)}, {n_iter}")
    if tau2 is not None and (tau2.shape != (n_iter,) or not (tau2 > 0).all()):
        raise ValueError(f"tau2 must be a positive vector of shape ({n_iter},)")
    if not 0.0 < eps < 1.0:
        raise ValueError(f"need 0 < eps < 1, got {eps}")
    if x0 is not None and x0.shape != (A.shape[0], A.shape[2]):
        raise ValueError(f"x0 must have shape (batch, d) = {(A.shape[0], A.shape[2])}, got {tuple(x0.shape)}")
    if alpha is not None and not (alpha > 0 and math.isfinite(alpha)):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha}")
    n, d = A.shape[1], A.shape[2]
    x = torch.zeros(A.shape[0], d, dtype=A.dtype, device=A.device) if x0 is None else x0.to(A)
    z = y - torch.einsum("bnd,bd->bn", A, x)
    out = [x]
    for t in range(n_iter):
        t2 = (z**2).mean(1, keepdim=True) if tau2 is None else tau2[t].to(A)
        r = x + torch.einsum("bnd,bn->bd", A, z)  # effective observation x + tau Z
        x, deta = bg_denoiser(r, t2, eps) if alpha is None else soft_denoiser(r, t2, alpha)
        z_new = y - torch.einsum("bnd,bd->bn", A, x)
        z = z_new + (d / n) * z * deta.mean(1, keepdim=True) if onsager else z_new
        out.append(x)
    return torch.stack(out)


def projected_denoising(
    A: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], eps: float, sigma2: float,
    n_iter: int,
) -> Float[Tensor, "T_plus_one batch d"]:
    r"""An iteration with AMP's denoiser but no Onsager term: the pseudo-data
    :math:`r^t = x^t + A^\top(AA^\top)^{-1}(y - Ax^t)` (the residual projected back on the row
    space), denoised at :math:`\hat\tau_t^2 = \sigma^2 + \frac{1-\delta}{\delta}\,
    \|A^\top(AA^\top)^{-1}(y - Ax^t)\|^2/d`, from :math:`x^0 = 0`. State evolution does not
    describe it: the foil of the trajectory finding."""
    if A.ndim != 3 or y.shape != A.shape[:2] or n_iter < 1:
        raise ValueError(f"need A (batch, n, d), y (batch, n), n_iter >= 1; got "
                         f"{tuple(A.shape)}, {tuple(y.shape)}, {n_iter}")
    _check_prior(eps, sigma2)
    n, d = A.shape[1], A.shape[2]
    delta = n / d
    G = A @ A.transpose(1, 2)  # (batch, n, n)
    x = torch.zeros(A.shape[0], d, dtype=A.dtype, device=A.device)
    out = [x]
    for _ in range(n_iter):
        u = torch.einsum("bnd,bn->bd", A, torch.linalg.solve(G, y - torch.einsum("bnd,bd->bn", A, x)))
        t2 = sigma2 + (1 - delta) / delta * u.pow(2).mean(1, keepdim=True)
        x = bg_denoiser(x + u, t2, eps)[0]
        out.append(x)
    return torch.stack(out)


def lmmse(A: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], eps: float, sigma2: float,
          ) -> Float[Tensor, "batch d"]:
    r"""The best *linear* estimator of :math:`x` (mean 0, covariance :math:`\varepsilon I_d`):
    :math:`\hat x = \varepsilon A^\top(\varepsilon AA^\top + \sigma^2 I_n)^{-1}y`. An estimator
    that ignores the sparsity, shown beside AMP in the hard phase."""
    if A.ndim != 3 or y.shape != A.shape[:2]:
        raise ValueError(f"need A (batch, n, d) and y (batch, n); got {tuple(A.shape)}, {tuple(y.shape)}")
    _check_prior(eps, sigma2)
    n = A.shape[1]
    G = eps * A @ A.transpose(1, 2) + sigma2 * torch.eye(n, dtype=A.dtype, device=A.device)
    return eps * torch.einsum("bnd,bn->bd", A, torch.linalg.solve(G, y))


def _supports(d: int, device: torch.device) -> Tensor:
    """All 2^d supports as a (2^d, d) float mask."""
    bits = torch.arange(2**d, device=device)[:, None] >> torch.arange(d, device=device)
    return (bits & 1).to(torch.float64)


def bayes_posterior_mean(
    A: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], eps: float, sigma2: float,
    chunk: int = 4096,
) -> Float[Tensor, "batch d"]:
    r""":math:`\mathbb E[x \mid y, A]` exactly, by summing over all :math:`2^d` supports.

    Given the support :math:`S` (prior weight :math:`\varepsilon^{|S|}(1-\varepsilon)^{d-|S|}`),
    :math:`y \sim \mathcal N(0, \sigma^2 I + A_S A_S^\top)` and :math:`\mathbb E[x_S\mid y, S]
    = (\sigma^2 I + A_S^\top A_S)^{-1} A_S^\top y`. With :math:`M_S = \sigma^2 I + (m m^\top)
    \circ A^\top A` (``m`` the support mask), :math:`\log\det(\sigma^2 I_n + A_S A_S^\top) =
    \log\det M_S + (n-d)\log\sigma^2` and :math:`y^\top(\sigma^2 I + A_SA_S^\top)^{-1}y =
    (\|y\|^2 - b_S^\top M_S^{-1} b_S)/\sigma^2`, :math:`b = m\circ A^\top y`: one batched
    Cholesky per support. In float64; ``d <= 20``.
    """
    _check_prior(eps, sigma2)
    if A.ndim != 3 or y.shape != A.shape[:2] or A.shape[2] > 20:
        raise ValueError(f"need A (batch, n, d) with d <= 20 and y (batch, n); got "
                         f"{tuple(A.shape)}, {tuple(y.shape)}")
    A, y = A.double(), y.double()
    d = A.shape[2]
    G = A.transpose(1, 2) @ A  # (batch, d, d)
    b = torch.einsum("bnd,bn->bd", A, y)
    masks = _supports(d, A.device)  # (S, d)
    eye = torch.eye(d, dtype=A.dtype, device=A.device)
    logw, means = [], []
    for m in masks.split(chunk):
        M = sigma2 * eye + (m[:, :, None] * m[:, None, :]) * G[:, None]  # (batch, s, d, d)
        Lc = torch.linalg.cholesky(M)
        mb = m * b[:, None]  # (batch, s, d)
        u = torch.cholesky_solve(mb[..., None], Lc)[..., 0]  # E[x | y, S], zero off S
        logdet = 2 * torch.log(torch.diagonal(Lc, dim1=-2, dim2=-1)).sum(-1)
        k = m.sum(1)
        logw.append(k * math.log(eps / (1 - eps)) - 0.5 * logdet
                    + (mb * u).sum(-1) / (2 * sigma2))
        means.append(u)
    w = torch.softmax(torch.cat(logw, 1), dim=1)  # (batch, 2^d) posterior of the support
    return torch.einsum("bs,bsd->bd", w, torch.cat(means, 1))
