r"""Linear-periodic targets :math:`\psi(r\,u^\top x)` with Gaussian inputs (Shamir, 2016).

Chapter "When gradient descent fails", section "Linear-periodic targets"
({cite}`shamir2018distribution`, {cite}`shalevshwartz2017failures` §2.2).

The family is :math:`\mathcal H_r = \{x \mapsto \cos(r\,u^\top x) : \|u\| = 1\}` with
:math:`x \sim \mathcal N(0, I_d)`. Every member is a one-neuron network with a periodic
activation, yet for any predictor :math:`p_w`

.. math::  \mathrm{Var}(\mathcal H_r, F, w) \le O\!\left(e^{-\Omega(d)} + e^{-\Omega(r)}\right),

so the gradient carries almost no information about :math:`u` when :math:`d` or :math:`r` is
large. :func:`periodic_gradient_variance` estimates that variance over random directions
without bias (two independent halves of the sample, cross-fitted);
:func:`periodic_variance_bound` is the explicit constant of that bound for Gaussian inputs
(Theorem 1's argument with the family's Gram kernel in place of orthogonality);
:func:`train_periodic_ensemble` fits several ``(d, r)`` pairs at once with Adam.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from ..progress import progress
from .grad_variance import Model, Params, per_example_gradients
from nnapprox import rng


def _device(generator: torch.Generator | None) -> torch.device:
    return generator.device if generator is not None else torch.device("cpu")


def random_directions(n: int, d: int, generator: torch.Generator | None = None) -> Float[Tensor, "n d"]:
    """``n`` independent directions uniform on the unit sphere of :math:`\\mathbb{R}^d`."""
    if n < 1 or d < 1:
        raise ValueError(f"n and d must be >= 1, got n={n}, d={d}")
    u = rng.randn(n, d, generator=generator, device=_device(generator))
    return u / u.norm(dim=1, keepdim=True)


def linear_periodic(x: Float[Tensor, "batch d"], u: Float[Tensor, " d"], r: float) -> Float[Tensor, " batch"]:
    r""":math:`h_u(x) = \cos(r\, u^\top x)` with :math:`\|u\| = 1`."""
    return torch.cos(r * (x @ u))


def r_squared(prediction: Float[Tensor, "*batch n"], target: Float[Tensor, "*batch n"]) -> Float[Tensor, "*batch"]:
    r"""Coefficient of determination :math:`1 - \sum (y - \hat y)^2 / \sum (y - \bar y)^2` along the last axis."""
    residual = ((target - prediction) ** 2).sum(-1)
    total = ((target - target.mean(-1, keepdim=True)) ** 2).sum(-1)
    return 1.0 - residual / total


def periodic_gradient_variance(
    model: Model, params: Params, d: int, rs: list[float], n_directions: int, n_samples: int,
    generator: torch.Generator | None = None, return_G2: bool = False,
) -> Float[Tensor, " n_r"] | tuple[Float[Tensor, " n_r"], float]:
    r"""Unbiased estimates of :math:`\mathrm{Var}(\mathcal H_r, F, w)` (square loss), one per ``r`` in ``rs``.

    :math:`\nabla F_u = \mathbb{E}[(p_w - h_u) g] = \mathbb{E}[p_w g] - b_u` with
    :math:`b_u = \mathbb{E}_x[h_u(x) g(x)]`, so the variance over :math:`u` is that of
    :math:`b_u`. Two independent samples of ``n_samples`` inputs give estimates
    :math:`\hat b^{(1)}_u, \hat b^{(2)}_u`; the cross-fitted
    :math:`\mathbb{E}_u\langle \hat b^{(1)}_u - \bar b^{(1)}, \hat b^{(2)}_u - \bar b^{(2)}\rangle`
    has exactly the expectation of the variance over the sampled directions (it can be
    negative when the variance is below the sampling noise). The per-example gradients are
    computed once and shared by every ``r``.

    With ``return_G2`` it returns ``(var, G2)``, where ``G2`` is the unbiased estimate
    :math:`\frac{1}{2n}\sum_i \|g(x_i)\|^2` of :math:`G(w)^2` from the same ``2 n_samples``
    inputs. Repeats with independent generators then give independent pairs, so the
    per-repeat excess :math:`\widehat{\mathrm{Var}} - \kappa\,\widehat{G^2}` over a bound
    :math:`\kappa G^2` has the sampling error of both estimates in its spread.
    """
    if n_samples < 2 or n_directions < 2:
        raise ValueError(f"n_samples and n_directions must be >= 2, got {n_samples}, {n_directions}")
    if not rs or any(r <= 0 for r in rs):
        raise ValueError(f"rs must be a non-empty list of positive frequencies, got {rs!r}")
    dtype = next(iter(params.values())).dtype
    u = random_directions(n_directions, d, generator).to(dtype)
    r = torch.tensor([float(r) for r in rs], dtype=dtype, device=u.device)
    halves, G2 = [], 0.0
    for _ in range(2):
        x = rng.randn(n_samples, d, generator=generator, device=_device(generator)).to(dtype)
        g = per_example_gradients(model, params, x)  # (n_samples, P)
        G2 += float(g.pow(2).sum()) / (2 * n_samples)
        h = torch.cos(r[:, None, None] * (x @ u.T)[None])  # (n_r, n_samples, n_directions)
        b = h.transpose(1, 2) @ g / n_samples  # (n_r, n_directions, P)
        halves.append(b - b.mean(1, keepdim=True))
    var = (halves[0] * halves[1]).sum(2).mean(1)
    return (var, G2) if return_G2 else var


def periodic_variance_bound(d: int, r: float) -> float:
    r"""Explicit :math:`\kappa_d(r^2)` with :math:`\mathrm{Var}(\mathcal H_r, F, w) \le \kappa_d(r^2)\,G(w)^2`.

    For :math:`x \sim \mathcal N(0, I_d)`, the square loss and :math:`u` uniform on the sphere,
    the family's Gram kernel is :math:`\mathbb{E}_x[\cos(r u^\top x)\cos(r v^\top x)]
    = e^{-r^2}\cosh(r^2 u^\top v)`. By the Funk–Hecke formula its eigenvalue on spherical
    harmonics of even degree :math:`\ell` is
    :math:`e^{-t}\,\Gamma(d/2)\,(2/t)^{d/2-1} I_{\ell+d/2-1}(t)` with :math:`t = r^2`
    (odd degrees: 0), and the variance over :math:`u` sees only degrees :math:`\ell \ge 2`, so

    .. math::  \kappa_d(t) = e^{-t}\,\Gamma(d/2)\,(2/t)^{d/2-1}\, I_{d/2+1}(t)

    (:math:`I_\nu` decreases in :math:`\nu`). For :math:`t^2 \ll d`,
    :math:`\kappa_d(t) \approx t^2 e^{-t}/(d(d+2))`. Chapter "When gradient descent fails",
    section "Linear-periodic targets".
    """
    if not isinstance(d, int) or d < 2:
        raise ValueError(f"d must be an integer >= 2 (for d = 1 the variance is 0), got {d!r}")
    if not r > 0:
        raise ValueError(f"r must be positive, got {r!r}")
    from scipy.special import ive  # exponentially scaled: ive(nu, t) = I_nu(t) e^{-t}

    t = float(r) ** 2
    log_prefactor = math.lgamma(d / 2) + (d / 2 - 1) * math.log(2 / t)
    scaled = float(ive(d / 2 + 1, t))
    if scaled > 1e-280:
        return math.exp(log_prefactor + math.log(scaled))  # in log space: the prefactor overflows for large d
    return math.exp(log_prefactor + _log_bessel_i(d / 2 + 1, t) - t)  # ive underflowed: its series


def _log_bessel_i(nu: float, t: float) -> float:
    r"""log I_nu(t) from the series :math:`\sum_k (t/2)^{2k+\nu} / (k!\,\Gamma(k+\nu+1))`, summed in
    log space (for large ``nu``, where ``ive`` underflows)."""
    log_half = math.log(t / 2)
    terms = [(2 * k + nu) * log_half - math.lgamma(k + 1) - math.lgamma(k + nu + 1)
             for k in range(int(t) + 60)]
    top = max(terms)
    return top + math.log(sum(math.exp(x - top) for x in terms))


def init_mlp_ensemble(
    E: int, d: int, width: int, depth: int, generator: torch.Generator | None = None
) -> list[tuple[Tensor, Tensor]]:
    """``E`` stacked ReLU MLPs ``d -> width (x depth) -> 1``, PyTorch default uniform init."""
    if min(E, d, width, depth) < 1:
        raise ValueError(f"E, d, width and depth must be >= 1, got {E}, {d}, {width}, {depth}")
    sizes = [d] + [width] * depth + [1]
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = fan_in**-0.5
        W = (2 * rng.rand(E, fan_in, fan_out, generator=generator, device=_device(generator)) - 1) * bound
        b = (2 * rng.rand(E, 1, fan_out, generator=generator, device=_device(generator)) - 1) * bound
        layers.append((W, b))
    return layers


def mlp_ensemble_forward(layers: list[tuple[Tensor, Tensor]], x: Float[Tensor, "E batch d"]) -> Float[Tensor, "E batch"]:
    """Forward pass of every member: ``ReLU`` between the stacked affine layers."""
    z = x
    for i, (W, b) in enumerate(layers):
        z = torch.baddbmm(b, z, W)  # (E, batch, fan_out)
        if i < len(layers) - 1:
            z = torch.relu(z)
    return z[..., 0]


def train_periodic_ensemble(
    configs: list[tuple[int, float]],
    n_steps: int,
    generator: torch.Generator,
    *,
    width: int = 100,
    depth: int = 2,
    batch: int = 256,
    lr: float = 1e-3,
    n_test: int = 4096,
) -> tuple[Float[Tensor, " E"], Float[Tensor, "steps E"]]:
    r"""Fit :math:`\cos(r\,u^\top x)` for every ``(d, r)`` in ``configs`` (one random ``u`` each) with Adam.

    Members with :math:`d < d_{\max}` see zero-padded inputs, which leaves them exactly the
    same network (padded input weights get no gradient). Returns ``(r2, loss_curve)``: the
    test :math:`R^2` of each member and its training loss at every step.
    """
    if not configs or any(d < 1 or r <= 0 for d, r in configs):
        raise ValueError(f"configs must be a non-empty list of (d >= 1, r > 0), got {configs!r}")
    dev = _device(generator)
    E, d_max = len(configs), max(d for d, _ in configs)
    ds = torch.tensor([d for d, _ in configs], device=dev)
    rs = torch.tensor([float(r) for _, r in configs], device=dev)
    active = (torch.arange(d_max, device=dev)[None, :] < ds[:, None]).float()  # (E, d_max)
    u = rng.randn(E, d_max, generator=generator, device=dev) * active
    u = u / u.norm(dim=1, keepdim=True)

    def sample(n: int) -> tuple[Tensor, Tensor]:
        x = rng.randn(E, n, d_max, generator=generator, device=dev) * active[:, None, :]
        return x, torch.cos(rs[:, None] * torch.einsum("end,ed->en", x, u))

    layers = init_mlp_ensemble(E, d_max, width, depth, generator)
    flat = [t.requires_grad_(True) for layer in layers for t in layer]
    opt = torch.optim.Adam(flat, lr=lr)
    losses = []
    for _ in progress(range(n_steps), desc="periodic fits"):
        x, y = sample(batch)
        loss = ((mlp_ensemble_forward(layers, x) - y) ** 2).mean(1)  # (E,)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
        losses.append(loss.detach())  # on the device; one copy back after the loop
    x, y = sample(n_test)
    with torch.no_grad():
        r2 = r_squared(mlp_ensemble_forward(layers, x), y).cpu()
    return r2, torch.stack(losses).cpu()


def periodic_loss_landscape(
    w: Float[Tensor, "*grid d"], u: Float[Tensor, " d"], r: float
) -> Float[Tensor, "*grid"]:
    r"""Closed-form :math:`F_u(w) = \mathbb{E}_x[(\cos(w^\top x) - \cos(r\,u^\top x))^2]`, :math:`x \sim \mathcal N(0, I_d)`.

    From :math:`\mathbb{E}[\cos(a^\top x)\cos(b^\top x)] = \tfrac12(e^{-\|a-b\|^2/2} + e^{-\|a+b\|^2/2})`:
    :math:`F_u(w) = 1 + \tfrac12 e^{-2\|w\|^2} + \tfrac12 e^{-2r^2} - e^{-\|w - ru\|^2/2} - e^{-\|w + ru\|^2/2}`,
    flat away from the two wells at :math:`w = \pm r u` (the landscape of {cite}`shamir2018distribution`).
    """
    target = r * u
    sq = lambda z: (z**2).sum(-1)  # noqa: E731
    return (1.0 + 0.5 * torch.exp(-2 * sq(w)) + 0.5 * math.exp(-2 * r**2)
            - torch.exp(-sq(w - target) / 2) - torch.exp(-sq(w + target) / 2))
