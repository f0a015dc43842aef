r"""A hand-built ReLU transformer that computes LinUCB's upper confidence bounds in context.

Chapter "Universal prediction and decision making in context", section 3, subsection "A
transformer that computes LinUCB's scores" (our construction; ``lin2023transformers`` prove
that ReLU transformers can approximate LinUCB; the gradient-descent heads are those of
:func:`nnapprox.icl.constructions.ridge_gd_layers`, ``bai2023transformers``).

At round :math:`t` with :math:`n = t - 1` past rounds :math:`(x_s, y_s)` and a candidate action
:math:`x`, the prompt is :math:`d` *prior tokens* :math:`(\sqrt\lambda e_c, 0)`, the :math:`n`
past rounds, and a query token for :math:`x`. With the prior tokens the context matrix
:math:`\tilde X` has :math:`\tilde X^\top\tilde X = \lambda I + X^\top X = V`, so ridge
regression is least squares on :math:`N = n + d` context tokens, and the attention's average
:math:`1/N` gives :math:`A = V/N`. Each of the first :math:`L` layers takes one gradient step
with step :math:`\eta` on two quadratics:

.. math::

    w &\leftarrow w - \eta(A w - \tilde X^\top \tilde y/N)
        &&\to \hat\theta = V^{-1}X^\top y, \\
    u &\leftarrow u - \eta(A u - z), \quad z = \beta x
        &&\to u^\star = A^{-1} z = N V^{-1} z.

The :math:`w` step is :func:`~nnapprox.icl.constructions.ridge_gd_layers` with
:math:`\lambda = 0` (its two residual heads); the :math:`u` step has the same two heads without
the label, and an MLP adding :math:`\eta z = \eta(\sigma(z) - \sigma(-z))`, exact. The final
layer writes the score :math:`w^\top x + f_M(s)` into the query token: :math:`w^\top x` by
:func:`~nnapprox.icl.constructions.readout_layer`, :math:`s = z^\top u / N \approx \beta^2
\|x\|^2_{V^{-1}}` by two heads in which the query attends to itself, and :math:`f_M`, the
piecewise-linear interpolant of :math:`\sqrt{\cdot}` on the knots :math:`R(k/M)^2`, by an
:math:`(M+1)`-unit ReLU MLP.

Token layout (``D = 4d + 5``, :func:`linucb_layout`): the :math:`2d + 4` slots of
:func:`nnapprox.icl.constructions.layout` (``x, y, y_hat, w, one, t``; ``y_hat`` holds the
score), then ``u`` (:math:`d`), ``z`` (:math:`d`) and ``s``.
"""
from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox.icl.constructions import layout, readout_layer, ridge_gd_layers
from nnapprox.icl.relu_attention import Layer, transformer


def linucb_layout(d: int) -> dict[str, int | slice]:
    """Slots of the token: those of :func:`nnapprox.icl.constructions.layout`, then ``u, z, s``."""
    s = dict(layout(d))
    D0 = s.pop("D")
    s.update(u=slice(D0, D0 + d), z=slice(D0 + d, D0 + 2 * d), s=D0 + 2 * d, D=D0 + 2 * d + 1)
    return s


def _lift(layer: Layer, D: int) -> Layer:
    """Zero-pad a layer of the ICL layout to ``D`` slots (its first slots are ours)."""
    out = {}
    for k, W in layer.items():
        P = W.new_zeros(*W.shape[:-2], D, D)
        P[..., : W.shape[-2], : W.shape[-1]] = W
        out[k] = P
    return out


def sqrt_interpolant(M: int, R: float, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    r"""Knots :math:`a_k = R(k/M)^2`, :math:`k = 0..M`, and slopes changes :math:`c_k` with
    :math:`f_M(s) = \sum_k c_k\sigma(s - a_k)` equal to :math:`\sqrt s` at the knots, linear
    between, constant :math:`\sqrt R` beyond :math:`R`."""
    if M < 1 or R <= 0:
        raise ValueError(f"need M >= 1 pieces and R > 0, got M={M}, R={R}")
    k = torch.arange(M + 1, dtype=dtype)
    knots = R * (k / M) ** 2
    slopes = torch.diff(knots.sqrt()) / torch.diff(knots)  # (M,)
    c = torch.diff(torch.cat([slopes.new_zeros(1), slopes, slopes.new_zeros(1)]))  # (M + 1,)
    return knots, c


def sqrt_interpolant_eval(s: Tensor, M: int, R: float) -> Tensor:
    r""":math:`f_M(s)` of :func:`sqrt_interpolant`."""
    knots, c = sqrt_interpolant(M, R, dtype=s.dtype)
    return (torch.relu(s[..., None] - knots) * c).sum(-1)


def sqrt_interpolation_bound(M: int, R: float) -> float:
    r"""Sup of :math:`|f_M - \sqrt{\cdot}|` on :math:`[0, R]`: on the piece between :math:`p^2` and
    :math:`q^2` the chord misses :math:`\sqrt s` by at most :math:`(q-p)^2/(4(p+q))`, largest on the
    first piece: :math:`\sqrt R/(4M)`."""
    if M < 1 or R <= 0:
        raise ValueError(f"need M >= 1 pieces and R > 0, got M={M}, R={R}")
    return math.sqrt(R) / (4 * M)


def linucb_layers(d: int, eta: float, n_steps: int, M: int, R: float, B: float = 1e4,
                  dtype: torch.dtype = torch.float64) -> list[Layer]:
    r""":math:`L` = ``n_steps`` gradient layers (4 heads and a :math:`2d`-unit MLP each), then
    :func:`score_layer`; see the module docstring (:math:`\lambda` enters by the prior tokens)."""
    if d < 1 or eta <= 0 or n_steps < 0 or B <= 0:
        raise ValueError(f"need d >= 1, eta > 0, n_steps >= 0, B > 0; "
                         f"got {d}, {eta}, {n_steps}, {B}")
    s = linucb_layout(d)
    D, one, t = s["D"], s["one"], s["t"]
    u, z = (list(range(D))[s[k]] for k in ("u", "z"))
    ridge = _lift(ridge_gd_layers(d, eta, 0.0, 1, B, dtype)[0], D)
    ridge = {k: W[:2] for k, W in ridge.items()}  # its two residual heads; the third is 0 at lam=0
    Q, K, V = (torch.zeros(2, D, D, dtype=dtype) for _ in range(3))
    for m, sign in enumerate((1.0, -1.0)):  # -(eta/N) sum_{j <= N} (u^T x_j) x_j
        for a in range(d):
            Q[m, a, u[a]] = sign
            K[m, a, a] = 1.0
            V[m, u[a], a] = -sign * eta
        Q[m, d, one], K[m, d, t], K[m, d, one] = B, 1.0, -1.0  # + B (t_j - 1): not the query
    W_1 = torch.zeros(2 * d, D, dtype=dtype)  # + eta z = eta (relu(z) - relu(-z))
    W_2 = torch.zeros(D, 2 * d, dtype=dtype)
    for a in range(d):
        W_1[2 * a, z[a]], W_1[2 * a + 1, z[a]] = 1.0, -1.0
        W_2[u[a], 2 * a], W_2[u[a], 2 * a + 1] = eta, -eta
    step = {"Q": torch.cat([ridge["Q"], Q]), "K": torch.cat([ridge["K"], K]),
            "V": torch.cat([ridge["V"], V]), "W_1": W_1, "W_2": W_2}
    return [dict(step) for _ in range(n_steps)] + [score_layer(d, M, R, B, dtype)]


def score_layer(d: int, M: int, R: float, B: float = 1e4,
                dtype: torch.dtype = torch.float64) -> Layer:
    r"""Attention: :math:`w^\top x` into ``y_hat``
    (:func:`nnapprox.icl.constructions.readout_layer`) and :math:`s = z^\top u/N` (the query
    attends to itself: score :math:`\pm u_i^\top z_j - Bt_j`, value 1); MLP: ``y_hat``
    :math:`\mathrel{+}= f_M(s)`
    (:func:`sqrt_interpolant`)."""
    s = linucb_layout(d)
    D, one, t = s["D"], s["one"], s["t"]
    u, z = (list(range(D))[s[k]] for k in ("u", "z"))
    read = _lift(readout_layer(d, B, dtype), D)
    Q, K, V = (torch.zeros(2, D, D, dtype=dtype) for _ in range(3))
    for m, sign in enumerate((1.0, -1.0)):
        for a in range(d):
            Q[m, a, u[a]] = sign
            K[m, a, z[a]] = 1.0
        Q[m, d, one], K[m, d, t] = -B, 1.0
        V[m, s["s"], one] = sign
    knots, c = sqrt_interpolant(M, R, dtype)
    W_1 = torch.zeros(M + 1, D, dtype=dtype)
    W_1[:, s["s"]], W_1[:, one] = 1.0, -knots
    W_2 = torch.zeros(D, M + 1, dtype=dtype)
    W_2[s["y_hat"]] = c
    return {"Q": torch.cat([read["Q"], Q]), "K": torch.cat([read["K"], K]),
            "V": torch.cat([read["V"], V]), "W_1": W_1, "W_2": W_2}


def _check(X: Tensor, y: Tensor, actions: Tensor, radius: Tensor, lam: float) -> None:
    if X.ndim != 3 or actions.ndim != 3 or lam <= 0:
        raise ValueError(f"need X (B, n, d), actions (B, K, d) and lam > 0; got "
                         f"{tuple(X.shape)}, {tuple(actions.shape)}, lam={lam}")
    Bn, n, d = X.shape
    if y.shape != (Bn, n) or actions.shape[0] != Bn or actions.shape[2] != d \
            or radius.shape != (Bn,):
        raise ValueError(f"need y (B, n), actions (B, K, d), radius (B,) for X {tuple(X.shape)}; "
                         f"got {tuple(y.shape)}, {tuple(actions.shape)}, {tuple(radius.shape)}")


def linucb_embed(X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"],
                 actions: Float[Tensor, "batch K d"], radius: Float[Tensor, " batch"], lam: float
                 ) -> Float[Tensor, "batchK N_plus_1 D"]:
    r"""One prompt per (instance, action), :math:`N + 1 = d + n + 1` tokens: the prior tokens
    :math:`x = \sqrt\lambda e_c`, :math:`y = 0`; the past rounds :math:`(x_s, y_s)` (both with
    ``one = t = 1``); the query :math:`x`, ``z`` :math:`= \beta x`, ``one = 1``, ``t = 0``."""
    _check(X, y, actions, radius, lam)
    Bn, n, d = X.shape
    K = actions.shape[1]
    s = linucb_layout(d)
    H = X.new_zeros(Bn, K, d + n + 1, s["D"])
    H[:, :, :d, s["x"]] = math.sqrt(lam) * torch.eye(d, dtype=X.dtype)
    H[:, :, d:d + n, s["x"]] = X[:, None]
    H[:, :, d:d + n, s["y"]] = y[:, None]
    H[:, :, :, s["one"]] = 1.0
    H[:, :, :d + n, s["t"]] = 1.0
    H[:, :, -1, s["x"]] = actions
    H[:, :, -1, s["z"]] = radius[:, None, None] * actions
    return H.reshape(Bn * K, d + n + 1, s["D"])  # (B K, N + 1, D)


def linucb_tf(X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"],
              actions: Float[Tensor, "batch K d"], radius: Float[Tensor, " batch"],
              lam: float, eta: float, n_steps: int, M: int, R: float) -> dict[str, Tensor]:
    """Run the construction; the query tokens' ``score``, ``s`` (B, K), ``w``, ``u`` (B, K, d)."""
    H = linucb_embed(X, y, actions, radius, lam)
    Bn, K, d = actions.shape
    H = transformer(H, linucb_layers(d, eta, n_steps, M, R, dtype=X.dtype))
    q = H[:, -1].reshape(Bn, K, -1)  # the query tokens, (B, K, D)
    s = linucb_layout(d)
    return dict(score=q[..., s["y_hat"]], w=q[..., s["w"]], u=q[..., s["u"]], s=q[..., s["s"]])


def gd_reference(X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"],
                 z: Float[Tensor, "batch K d"], lam: float, eta: float, n_steps: int
                 ) -> tuple[Float[Tensor, "batch d"], Float[Tensor, "batch K d"]]:
    r"""Plain gradient descent from 0, :math:`A = (\lambda I + X^\top X)/N`, :math:`N = n + d`:
    :math:`w \leftarrow w - \eta(Aw - X^\top y/N)`, :math:`u \leftarrow u - \eta(Au - z)`."""
    if n_steps < 0 or eta <= 0 or lam <= 0:
        raise ValueError(f"need n_steps >= 0, eta > 0, lam > 0; got {n_steps}, {eta}, {lam}")
    n, d = X.shape[1], X.shape[2]
    N = n + d
    A = (lam * torch.eye(d, dtype=X.dtype) + X.transpose(1, 2) @ X) / N  # (B, d, d)
    b = (X.transpose(1, 2) @ y[..., None])[..., 0] / N
    w, u = torch.zeros_like(b), torch.zeros_like(z)
    for _ in range(n_steps):
        w = w - eta * ((A @ w[..., None])[..., 0] - b)
        u = u - eta * (u @ A - z)  # A is symmetric
    return w, u


def score_error_bound(X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"],
                      actions: Float[Tensor, "batch K d"], radius: Float[Tensor, " batch"],
                      lam: float, eta: float, n_steps: int, M: int, R: float) -> dict[str, Tensor]:
    r"""LinUCB's exact scores ``ucb`` and the proven bound ``error`` on the construction's error
    (chapter, proof of the proposition): with :math:`\rho = 1 - \eta\lambda_{\min}(V)/N`, valid
    when :math:`\eta\lambda_{\max}(V) \le N` and :math:`s \le R`,
    :math:`|\widehat{\mathrm{ucb}} - \mathrm{ucb}|
    \le \rho^L(\|x\|\|\hat\theta\| + \beta\|x\|_{V^{-1}}) + \sqrt R/(4M)`. Also ``rho`` (B,),
    ``theta`` (B, d) and ``s`` :math:`= \beta^2\|x\|^2_{V^{-1}}` (B, K)."""
    _check(X, y, actions, radius, lam)
    n, d = X.shape[1], X.shape[2]
    V = lam * torch.eye(d, dtype=X.dtype) + X.transpose(1, 2) @ X
    ev = torch.linalg.eigvalsh(V)  # (B, d), ascending
    if bool((eta * ev[:, -1] > (n + d) * (1 + 1e-12)).any()):
        raise ValueError(f"eta={eta} too large: need eta * lambda_max(V) <= n + d = {n + d}")
    rho = 1 - eta * ev[:, 0] / (n + d)
    theta = torch.linalg.solve(V, X.transpose(1, 2) @ y[..., None])[..., 0]  # (B, d)
    Vi = torch.linalg.inv(V)
    s = radius[:, None] ** 2 * torch.einsum("bki,bij,bkj->bk", actions, Vi, actions)
    if bool((s > R).any()):
        raise ValueError(f"R={R} too small: the largest beta^2 ||x||^2_V^-1 is {float(s.max())}")
    ucb = (actions @ theta[..., None])[..., 0] + s.sqrt()
    rL = (rho ** n_steps)[:, None]
    err = rL * (actions.norm(dim=-1) * theta.norm(dim=-1, keepdim=True) + s.sqrt())
    return dict(ucb=ucb, error=err + sqrt_interpolation_bound(M, R), rho=rho, theta=theta, s=s)
