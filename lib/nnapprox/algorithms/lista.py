r"""LISTA: ISTA unrolled into a network whose weights are then trained.

Chapter "Functions versus algorithms" (``chapters/algorithms.md``), section "Benefit 3:
architecture design" (``gregor2010learning``). Sparse coding of :math:`x \in \mathbb R^m` in a
dictionary :math:`D \in \mathbb R^{m\times n}` solves the Lasso

.. math::  z^\ast(x) = \arg\min_z \tfrac12\|x - Dz\|^2 + \lambda\|z\|_1 ,

and ISTA (``beck2009fast``; one step is the intro's ReLU layer, :mod:`nnapprox.ista`) iterates
:math:`z_{k+1} = S_{\eta\lambda}\bigl(z_k - \eta D^\top(Dz_k - x)\bigr)` from :math:`z_0 = 0`
with :math:`\eta = 1/\|D\|_2^2`. Written as a layer that is

.. math::  z_{k+1} = S_\theta(W_e x + S z_k), \qquad W_e = \eta D^\top,\quad
           S = I - \eta D^\top D,\quad \theta = \eta\lambda\,\mathbf 1 ,

and LISTA (Gregor and LeCun 2010) keeps this architecture for :math:`K` layers but *learns*
:math:`W_e, S, \theta` by regressing the Lasso solution :math:`z^\ast(x)` (they computed it by
coordinate descent; here FISTA ``beck2009fast`` with a KKT certificate). As in the paper the
three are shared across the :math:`K` layers (tied) and :math:`\theta \in \mathbb R^n` has one
threshold per code coordinate. :func:`lista_ista_weights` are the weights at which LISTA *is*
ISTA; training starts there. The soft threshold with a vector :math:`\theta` is computed in
its ReLU form :math:`S_\theta(u) = \mathrm{relu}(u - \theta) - \mathrm{relu}(-u - \theta)`.

Everything is vectorised over a leading axis of independent *members* (training runs, each
with its own dictionary and data, times learning rates): tensors ``(M, N, m)`` in,
``(M, N, n)`` out.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from nnapprox import rng
from nnapprox.ista import lasso_kkt_residual as intro_kkt
from nnapprox.ista import soft_threshold
from nnapprox.progress import progress

Weights = dict[str, Tensor]  # "W_e": (M, n, m), "S": (M, n, n), "theta": (M, n)


def _positive(**kw: int) -> None:
    for name, v in kw.items():
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")


def random_dictionary(
    runs: int, m: int, n: int, generator: torch.Generator, *, dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Float[Tensor, "runs m n"]:
    """One Gaussian dictionary per run with unit-norm columns (atoms)."""
    _positive(runs=runs, m=m, n=n)
    D = rng.randn(runs, m, n, generator=generator, dtype=dtype, device=device)
    return D / D.norm(dim=1, keepdim=True)


def sparse_codes(
    runs: int, N: int, n: int, s: int, generator: torch.Generator, *,
    dtype: torch.dtype = torch.float64, device: torch.device | str | None = None,
) -> Float[Tensor, "runs N n"]:
    """Codes with exactly ``s`` non-zero :math:`\\mathcal N(0, 1)` coordinates at random places."""
    _positive(runs=runs, N=N, n=n, s=s)
    if s > n:
        raise ValueError(f"need s <= n, got s={s}, n={n}")
    support = rng.rand(runs, N, n, generator=generator, device=device).argsort(dim=-1)[..., :s]
    values = rng.randn(runs, N, s, generator=generator, dtype=dtype, device=device)
    return torch.zeros(runs, N, n, dtype=dtype, device=device).scatter_(-1, support, values)


def ista_step_size(D: Float[Tensor, "runs m n"]) -> Float[Tensor, " runs"]:
    r""":math:`\eta = 1/\|D\|_2^2`, the inverse Lipschitz constant of the gradient."""
    return 1.0 / torch.linalg.matrix_norm(D, ord=2) ** 2


def lista_ista_weights(D: Float[Tensor, "runs m n"], lam: float) -> Weights:
    r"""The LISTA weights at which :math:`K` layers are :math:`K` ISTA iterations."""
    if not (lam >= 0 and math.isfinite(lam)):
        raise ValueError(f"need a finite lam >= 0, got {lam}")
    eta = ista_step_size(D)[:, None, None]  # (runs, 1, 1)
    eye = torch.eye(D.shape[2], dtype=D.dtype, device=D.device)
    return {
        "W_e": eta * D.transpose(1, 2),  # (runs, n, m)
        "S": eye - eta * D.transpose(1, 2) @ D,  # (runs, n, n)
        "theta": (eta[:, :, 0] * lam).expand(-1, D.shape[2]).clone(),  # (runs, n)
    }


def lista(
    x: Float[Tensor, "M N m"], weights: Weights, K: int
) -> Float[Tensor, "M N n"]:
    r""":math:`K` LISTA layers :math:`z_{k+1} = S_\theta(W_e x + S z_k)` from :math:`z_0 = 0`."""
    _positive(K=K)
    b = x @ weights["W_e"].transpose(1, 2)  # (M, N, n): W_e x, computed once
    theta = weights["theta"][:, None, :]
    z = torch.relu(b - theta) - torch.relu(-b - theta)  # first layer: z_0 = 0
    for _ in range(K - 1):
        u = torch.baddbmm(b, z, weights["S"].transpose(1, 2))
        z = torch.relu(u - theta) - torch.relu(-u - theta)
    return z


def ista(x: Float[Tensor, "runs N m"], D: Float[Tensor, "runs m n"], lam: float,
         n_iter: int) -> Float[Tensor, "runs N n"]:
    r"""Reference ISTA :math:`z \leftarrow S_{\eta\lambda}(z - \eta D^\top(Dz - x))`, run by run."""
    eta = ista_step_size(D)
    out = []
    for r in range(D.shape[0]):  # soft_threshold takes one threshold: loop over runs
        z = x.new_zeros(x.shape[1], D.shape[2])
        for _ in range(n_iter):
            z = soft_threshold(z - eta[r] * ((z @ D[r].T - x[r]) @ D[r]), float(eta[r] * lam))
        out.append(z)
    return torch.stack(out)


def lasso_kkt_residual(z: Float[Tensor, "runs N n"], x: Float[Tensor, "runs N m"],
                       D: Float[Tensor, "runs m n"], lam: float) -> Float[Tensor, "runs N"]:
    r"""Distance of :math:`-D^\top(Dz - x)` from :math:`\lambda\partial\|z\|_1`, per row: the
    intro's :func:`nnapprox.ista.lasso_kkt_residual` with :math:`A = D^\top D`,
    :math:`b = D^\top x`, run by run."""
    return torch.stack([intro_kkt(z[r], D[r].T @ D[r], x[r] @ D[r], lam)
                        for r in range(D.shape[0])])


def lasso_solution(
    x: Float[Tensor, "runs N m"], D: Float[Tensor, "runs m n"], lam: float, *,
    n_iter: int = 3000, tol: float = 1e-9,
) -> Float[Tensor, "runs N n"]:
    r"""The Lasso minimiser :math:`z^\ast(x)`: FISTA with adaptive restart, certified by KKT.

    Runs FISTA (``beck2009fast``) with O'Donoghue and Candès' gradient restart until every
    row's :func:`lasso_kkt_residual` is below ``tol`` (checked every 50 iterations); raises
    ``RuntimeError`` if ``n_iter`` iterations do not reach it.
    """
    if x.dtype != torch.float64:
        raise ValueError(f"solve the Lasso in float64 (got {x.dtype}): the target must be exact")
    eta = ista_step_size(D)
    out = []
    for r in range(D.shape[0]):  # soft_threshold takes one threshold: one run at a time
        G, b = D[r].T @ D[r], x[r] @ D[r]  # (n, n), (N, n)
        z = torch.zeros_like(b)
        y, t = z.clone(), torch.ones_like(b[:, :1])  # per-row momentum
        for it in range(1, n_iter + 1):
            z_new = soft_threshold(y - eta[r] * (y @ G - b), float(eta[r] * lam))
            restart = ((y - z_new) * (z_new - z)).sum(-1, keepdim=True) > 0  # gradient restart
            t_new = torch.where(restart, torch.ones_like(t), (1 + torch.sqrt(1 + 4 * t * t)) / 2)
            y = z_new + torch.where(restart, 0.0, (t - 1) / t_new) * (z_new - z)
            z, t = z_new, t_new
            kkt = lasso_kkt_residual(z[None], x[r:r + 1], D[r:r + 1], lam) if it % 50 == 0 else None
            if kkt is not None and kkt.max() <= tol:
                break
        else:
            raise RuntimeError(f"FISTA did not reach a KKT residual of {tol} in {n_iter} "
                               "iterations")
        out.append(z)
    return torch.stack(out)


def nmse_db(z_hat: Float[Tensor, "M N n"], z: Float[Tensor, "M N n"]) -> Float[Tensor, " M"]:
    r"""NMSE in dB, :math:`10\log_{10}(\sum\|\hat z - z\|^2 / \sum\|z\|^2)`, per member."""
    return 10 * torch.log10(((z_hat - z) ** 2).sum(dim=(1, 2)) / (z**2).sum(dim=(1, 2)))


def ista_nmse_curve(x: Float[Tensor, "runs N m"], D: Float[Tensor, "runs m n"], lam: float,
                    z_star: Float[Tensor, "runs N n"], k_max: int) -> Float[Tensor, "k_max runs"]:
    """NMSE (dB) of ISTA's iterates :math:`k = 1..k_{max}` (LISTA at ISTA's weights)."""
    _positive(k_max=k_max)
    w = lista_ista_weights(D, lam)
    b, theta = x @ w["W_e"].transpose(1, 2), w["theta"][:, None, :]
    z, curve = torch.zeros_like(z_star), []
    for _ in range(k_max):
        u = torch.baddbmm(b, z, w["S"].transpose(1, 2))
        z = torch.relu(u - theta) - torch.relu(-u - theta)
        curve.append(nmse_db(z, z_star))
    return torch.stack(curve)


def iterations_to_match(
    curve: Float[Tensor, "k_max runs"], target: Float[Tensor, " runs"]
) -> Tensor:
    """Per run, the first ISTA iteration whose NMSE is <= ``target`` (``k_max + 1`` if none)."""
    hit = curve <= target[None]
    first = hit.int().argmax(dim=0) + 1
    return torch.where(hit.any(dim=0), first, curve.shape[0] + 1)


class LISTA(nn.Module):
    """``M`` tied LISTA networks of ``K`` layers, vectorised; ``forward`` is :func:`lista`."""

    def __init__(self, weights: Weights, K: int) -> None:
        super().__init__()
        _positive(K=K)
        self.K = K
        self.W_e = nn.Parameter(weights["W_e"].detach().clone())
        self.S = nn.Parameter(weights["S"].detach().clone())
        self.theta = nn.Parameter(weights["theta"].detach().clone())

    def forward(self, x: Float[Tensor, "M N m"]) -> Float[Tensor, "M N n"]:
        return lista(x, {"W_e": self.W_e, "S": self.S, "theta": self.theta}, self.K)


class StepISTA(nn.Module):
    r"""``M`` ISTA runs of ``K`` steps whose step size and threshold per step are trained.

    .. math:: z_{k+1} = S_{c_k\eta\lambda a_k}\bigl(z_k - c_k\eta D^\top(Dz_k - x)\bigr),
              \qquad z_0 = 0,

    with the dictionary fixed and only :math:`\log c_k, \log a_k` trained (:math:`2K` numbers per
    member, started at 0, i.e. at ISTA). Tuned steps and thresholds alone are the alternative to
    LISTA's learned matrices (``ablin2019learning``, ``liu2019alista``).
    """

    def __init__(self, D: Float[Tensor, "M m n"], lam: float, K: int) -> None:
        super().__init__()
        _positive(K=K)
        if not (lam >= 0 and math.isfinite(lam)):
            raise ValueError(f"need a finite lam >= 0, got {lam}")
        self.K, self.lam = K, lam
        self.register_buffer("D", D.detach().clone())
        self.register_buffer("eta", ista_step_size(D).detach())
        self.log_c = nn.Parameter(D.new_zeros(D.shape[0], K))
        self.log_a = nn.Parameter(D.new_zeros(D.shape[0], K))

    def forward(self, x: Float[Tensor, "M N m"]) -> Float[Tensor, "M N n"]:
        z = x.new_zeros(*x.shape[:2], self.D.shape[2])
        for k in range(self.K):
            step = (self.eta * self.log_c[:, k].exp())[:, None, None]  # (M, 1, 1)
            theta = step * self.lam * self.log_a[:, k].exp()[:, None, None]
            u = z - step * ((z @ self.D.transpose(1, 2) - x) @ self.D)
            z = torch.relu(u - theta) - torch.relu(-u - theta)
        return z


def lista_n_params(m: int, n: int) -> int:
    """Trained numbers of one tied LISTA network: :math:`nm + n^2 + n`."""
    return n * m + n * n + n


def mlp_n_params(m: int, n: int, width: int, depth: int) -> int:
    """Weights and biases of a ReLU MLP ``m -> width (x depth) -> n``."""
    return (m + 1) * width + (depth - 1) * (width + 1) * width + (width + 1) * n


def equal_size_width(n_params: int, m: int, n: int, depth: int) -> int:
    """The smallest width whose MLP has at least ``n_params`` trained numbers."""
    _positive(n_params=n_params, m=m, n=n, depth=depth)
    width = 1
    while mlp_n_params(m, n, width, depth) < n_params:
        width += 1
    return width


class MLP(nn.Module):
    """``M`` ReLU MLPs ``m -> width (x depth) -> n``, vectorised, PyTorch's default uniform init."""

    def __init__(self, M: int, m: int, n: int, width: int, depth: int, generator: torch.Generator,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        _positive(M=M, m=m, n=n, width=width, depth=depth)
        dims = [m] + [width] * depth + [n]
        self.W, self.b = nn.ParameterList(), nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            bound = 1 / math.sqrt(d_in)
            self.W.append(nn.Parameter((2 * rng.rand(M, d_out, d_in, generator=generator,
                                                     device=device) - 1) * bound))
            self.b.append(nn.Parameter((2 * rng.rand(M, d_out, generator=generator,
                                                     device=device) - 1) * bound))

    def forward(self, x: Float[Tensor, "M N m"]) -> Float[Tensor, "M N n"]:
        for ell, (W, b) in enumerate(zip(self.W, self.b)):
            x = torch.baddbmm(b[:, None, :], x if ell == 0 else torch.relu(x), W.transpose(1, 2))
        return x


def train_members(
    model: nn.Module, x: Float[Tensor, "M N m"], z: Float[Tensor, "M N n"], lr: Float[Tensor, " M"],
    n_steps: int, batch_size: int, generator: torch.Generator, *, lr_final_ratio: float = 0.1,
    desc: str = "LISTA",
) -> Float[Tensor, "steps M"]:
    r"""Adam on :math:`\sum_j \frac1B\sum_i \|f_j(x_{ji}) - z_{ji}\|^2`, one step size per member.

    Member ``j`` trains on its own data ``x[j], z[j]`` (a fresh minibatch of row indices per
    step, shared by the members). Adam (:math:`\beta = (0.9, 0.999)`) is written out because
    ``torch.optim.Adam`` has one learning rate per tensor and the members share tensors; the
    loss is a sum over members and Adam acts elementwise, so each member trains as if alone.
    The step size decays geometrically from ``lr`` to ``lr_final_ratio * lr``.
    """
    if n_steps < 0 or batch_size < 1 or x.shape[0] != lr.shape[0]:
        raise ValueError(f"need n_steps >= 0, batch_size >= 1 and one lr per member, got "
                         f"{n_steps}, {batch_size}, lr {tuple(lr.shape)} for {x.shape[0]} members")
    params = [p for p in model.parameters() if p.requires_grad]
    moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    gamma = lr_final_ratio ** (1.0 / max(n_steps, 1))
    losses = x.new_empty(n_steps, x.shape[0])
    for step in progress(range(n_steps), desc=desc, leave=False):
        idx = rng.randint(x.shape[1], (batch_size,), generator=generator, device=x.device)
        per_member = ((model(x[:, idx]) - z[:, idx]) ** 2).sum(-1).mean(-1)  # (M,)
        grads = torch.autograd.grad(per_member.sum(), params)
        t, step_size = step + 1, lr * gamma**step
        with torch.no_grad():
            for p, g, (m1, m2) in zip(params, grads, moments):
                m1.lerp_(g, 0.1)
                m2.lerp_(g * g, 0.001)
                update = (m1 / (1 - 0.9**t)) / ((m2 / (1 - 0.999**t)).sqrt() + 1e-8)
                p.sub_(step_size.view(-1, *[1] * (p.dim() - 1)) * update)
        losses[step] = per_member.detach()
    return losses


def lista_vs_mlp(
    *, runs: int, m: int, n: int, s: int, lam: float, K: int, n_train: int, n_test: int,
    n_steps: int, batch_size: int, lrs: tuple[float, ...], depths: tuple[int, ...], k_max: int,
    generator: torch.Generator, sigma: float = 0.0, device: torch.device | str | None = None,
    step_lrs: tuple[float, ...] | None = None,
) -> dict[str, Tensor]:
    r"""The section's experiment: trained LISTA against ISTA, against ISTA with trained step sizes
    and thresholds (:class:`StepISTA`) and against MLPs of equal size.

    Per run: a dictionary, ``n_train`` training, ``n_test`` validation and ``n_test`` test
    signals :math:`x = Dz + \sigma\varepsilon` (``s``-sparse ``z``), targets the Lasso
    solutions :math:`z^\ast(x)`. LISTA (``K`` tied layers, started at ISTA's weights) and one
    MLP per depth in ``depths`` (at least LISTA's number of trained numbers) are trained with
    every learning rate in ``lrs``; per run, the learning rate (and the MLP's depth) with the
    lowest validation NMSE is kept. Returns test NMSEs in dB, each ``(runs,)``: ``"lista"``,
    ``"mlp"``, ``"mlp_by_depth"`` ``(len(depths), runs)``, ``"ista_curve"`` ``(k_max, runs)``
    (``"ista_curve"[K - 1]`` is the untrained LISTA), ``"ista_match"`` (ISTA iterations to
    reach LISTA's NMSE), ``"step_ista"`` (its learning rate from ``step_lrs``, as many as ``lrs``;
    by default ten times each of ``lrs``, since it trains :math:`2K` log-scales), and the sizes ``"n_params_lista"``, ``"n_params_mlp"``, ``"widths"``.
    """
    _positive(runs=runs, n_train=n_train, n_test=n_test, K=K, k_max=k_max)
    step_lrs = tuple(10 * r for r in lrs) if step_lrs is None else tuple(step_lrs)
    if len(lrs) == 0 or len(depths) == 0 or not sigma >= 0 or len(step_lrs) != len(lrs):
        raise ValueError(f"need some lrs, as many step_lrs, some depths and sigma >= 0, got {lrs}, "
                         f"{step_lrs}, {depths}, {sigma}")
    D = random_dictionary(runs, m, n, generator, device=device)
    z0 = sparse_codes(runs, n_train + 2 * n_test, n, s, generator, device=device)
    x = z0 @ D.transpose(1, 2)  # (runs, N, m)
    x = x + sigma * rng.randn(*x.shape, generator=generator, dtype=x.dtype, device=device)
    z_star = lasso_solution(x, D, lam)
    x, z_star, D = x.float(), z_star.float(), D.float()
    parts = [slice(0, n_train), slice(n_train, n_train + n_test), slice(n_train + n_test, None)]
    G = len(lrs)
    lr = torch.tensor(lrs, device=x.device).repeat(runs)  # member j: run j // G, lr lrs[j % G]
    x_tr, z_tr = x[:, parts[0]].repeat_interleave(G, 0), z_star[:, parts[0]].repeat_interleave(G, 0)

    def fit(model: nn.Module, desc: str, lr: Tensor = lr) -> tuple[Tensor, Tensor]:
        train_members(model, x_tr, z_tr, lr, n_steps, batch_size, generator, desc=desc)
        with torch.no_grad():  # (runs, G) validation and test NMSE
            return tuple(nmse_db(model(x[:, p].repeat_interleave(G, 0)),
                                 z_star[:, p].repeat_interleave(G, 0)).view(runs, G)
                         for p in parts[1:])

    def best(val: Tensor, test: Tensor) -> Tensor:  # per run, the test NMSE at the best validation
        return test.reshape(runs, -1).gather(1, val.reshape(runs, -1).argmin(1, keepdim=True))[:, 0]

    start = {k: v.repeat_interleave(G, 0) for k, v in lista_ista_weights(D, lam).items()}
    lista_val, lista_test = fit(LISTA(start, K), "LISTA")
    step_lr = torch.tensor(step_lrs, device=x.device).repeat(runs)
    step_val, step_test = fit(StepISTA(D.repeat_interleave(G, 0), lam, K), "step-tuned ISTA", step_lr)
    mlp_val, mlp_test, widths = [], [], []
    for depth in depths:
        widths.append(equal_size_width(lista_n_params(m, n), m, n, depth))
        v, t = fit(MLP(runs * G, m, n, widths[-1], depth, generator, device), f"MLP depth {depth}")
        mlp_val.append(v)
        mlp_test.append(t)
    mlp_val_t, mlp_test_t = torch.stack(mlp_val, 1), torch.stack(mlp_test, 1)  # (runs, depths, G)
    lista_best = best(lista_val, lista_test)
    curve = ista_nmse_curve(x[:, parts[2]], D, lam, z_star[:, parts[2]], k_max)
    return {
        "lista": lista_best, "mlp": best(mlp_val_t, mlp_test_t), "step_ista": best(step_val, step_test),
        "mlp_by_depth": torch.stack([best(mlp_val_t[:, i], mlp_test_t[:, i])
                                     for i in range(len(depths))]),
        "ista_curve": curve, "ista_match": iterations_to_match(curve, lista_best),
        "n_params_lista": torch.tensor(lista_n_params(m, n)), "widths": torch.tensor(widths),
        "n_params_mlp": torch.tensor([mlp_n_params(m, n, w, d) for w, d in zip(widths, depths)]),
    }
