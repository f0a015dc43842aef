r"""Exact variance of the loss gradient over a whole orthonormal family of targets.

Chapter "When gradient descent fails", section "The theorem" (Theorem 1 of
{cite}`shalevshwartz2017failures`).

For targets :math:`h \in \mathcal H` and a predictor :math:`p_w` with per-example gradient
:math:`g(x) = \partial_w p_w(x)`, the population gradient is
:math:`\nabla F_h(w) = \mathbb{E}_x[\ell'(p_w(x), h(x))\, g(x)]` and

.. math::  \mathrm{Var}(\mathcal H, F, w) = \mathbb{E}_h \big\|\nabla F_h(w) - \mathbb{E}_{h'}\nabla F_{h'}(w)\big\|^2
           \le \frac{G(w)^2}{|\mathcal H|}, \qquad G(w)^2 = \mathbb{E}_x\|g(x)\|^2 .

For :math:`\pm1` labels write :math:`\ell'(p, h) = \alpha(x) + \beta(x) h` with
:math:`\beta = \tfrac12(\ell'(p, 1) - \ell'(p, -1))` (:math:`\beta = -1` for the square loss,
:math:`|\beta| \le 1` for :math:`\ell = r(p h)` with :math:`r` 1-Lipschitz). Only the second
term depends on :math:`h`, so for the :math:`2^d` parities with :math:`x` uniform on the cube

.. math::  \nabla F_{\chi_S}(w) = \mathbb{E}_x[\alpha g] + 2^{-d}\,(H\,[\beta g])_S ,

all :math:`2^d` gradients from one fast Walsh–Hadamard transform of the per-example gradients
(:func:`parity_gradient_variance`). :func:`parity_gradient_variance_reference` computes the
same number the readable way: one autograd call per parity.
"""

from __future__ import annotations

from typing import Callable

import torch
from jaxtyping import Float
from torch import Tensor

from .parity import all_parities, hypercube
from .walsh_hadamard import butterflies_, fwht_
from nnapprox import rng

Params = dict[str, Tensor]
Model = Callable[[Params, Tensor], Tensor]
LOSSES = ("square", "hinge", "logistic")


def loss_fn(p: Float[Tensor, " batch"], y: Float[Tensor, " batch"], loss: str) -> Float[Tensor, " batch"]:
    r"""Per-example loss: square :math:`\tfrac12(p-y)^2`, hinge :math:`[1-py]_+`, logistic :math:`\log(1+e^{-py})`."""
    if loss == "square":
        return 0.5 * (p - y) ** 2
    if loss == "hinge":
        return torch.relu(1.0 - p * y)
    if loss == "logistic":
        return torch.nn.functional.softplus(-p * y)
    raise ValueError(f"unknown loss {loss!r}: valid losses are {', '.join(map(repr, LOSSES))}")


def loss_derivative(p: Float[Tensor, " batch"], y: Float[Tensor, " batch"], loss: str) -> Float[Tensor, " batch"]:
    r""":math:`\partial \ell(p, y) / \partial p` (hinge: the subgradient :math:`-y\,[py < 1]`)."""
    if loss == "square":
        return p - y
    if loss == "hinge":
        return -y * (p * y < 1.0).to(p.dtype)
    if loss == "logistic":
        return -y * torch.sigmoid(-p * y)
    raise ValueError(f"unknown loss {loss!r}: valid losses are {', '.join(map(repr, LOSSES))}")


def mlp_init(d: int, width: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64) -> Params:
    r"""One hidden layer :math:`p_w(x) = v^\top \sigma(Wx + b) + c` with PyTorch's default uniform init."""
    if d < 1 or width < 1:
        raise ValueError(f"d and width must be >= 1, got d={d}, width={width}")
    dev = generator.device if generator is not None else torch.device("cpu")

    def uniform(shape: tuple[int, ...], fan_in: int) -> Tensor:
        u = rng.rand(shape, generator=generator, dtype=dtype, device=dev)
        return (2 * u - 1) / fan_in**0.5

    return {"W": uniform((width, d), d), "b": uniform((width,), d), "v": uniform((width,), width), "c": uniform((), width)}


def mlp_forward(params: Params, x: Float[Tensor, "batch d"]) -> Float[Tensor, " batch"]:
    r""":math:`p_w(x) = v^\top \mathrm{ReLU}(Wx + b) + c`."""
    return torch.relu(x @ params["W"].T + params["b"]) @ params["v"] + params["c"]


def per_example_gradients(model: Model, params: Params, x: Float[Tensor, "batch d"]) -> Float[Tensor, "batch P"]:
    r"""Rows :math:`g(x_i) = \partial_w p_w(x_i)`, all parameters flattened (``torch.func.vmap`` of ``grad``)."""

    def one(p: Params, xi: Tensor) -> Tensor:
        return model(p, xi[None, :])[0]

    grads = torch.func.vmap(torch.func.grad(one), in_dims=(None, 0))(params, x)
    return torch.cat([grads[k].reshape(x.shape[0], -1) for k in params], dim=1)  # (batch, P)


def parity_gradient_variance(
    model: Model, params: Params, d: int, loss: str = "square", chunk: int = 512
) -> tuple[float, float, Float[Tensor, "two_d P"]]:
    r"""Exact :math:`\mathrm{Var}(\mathcal H, F, w)` over all :math:`2^d` parities, and :math:`G(w)^2`.

    Uses the whole cube as the input distribution (exact expectations), batched per-example
    gradients (:func:`per_example_gradients`, one ``torch.func`` backward per block of ``chunk``
    points) and the fast Walsh–Hadamard transform of :math:`\beta(x) g(x)` in place, with no
    loop over parities. Blocks of ``chunk`` consecutive points differ only in the low
    :math:`\log_2` ``chunk`` bits, so the transform's stages along those bits run on each block
    right after its gradients are computed (while it is in cache), and the remaining stages
    once on the whole array (:func:`~nnapprox.failures.walsh_hadamard.butterflies_`). With
    :math:`B = 2^{-d} H[\beta g]` (row :math:`S` the target-dependent part of
    :math:`\nabla F_{\chi_S}`), the variance is
    :math:`2^{-d}\sum_S \|B_S\|^2 - \|2^{-d}\sum_S B_S\|^2` (the :math:`h`-independent
    term :math:`\mathbb{E}_x[\alpha g]` shifts every row equally and drops out). Returns
    ``(var, G2, grads)`` where row ``s`` of ``grads`` is :math:`\nabla F_{\chi_S}(w)`;
    :func:`parity_gradient_variance_reference` computes the same numbers the readable way.
    """
    loss_fn(torch.zeros(1), torch.zeros(1), loss)  # validates the name before any work
    if not isinstance(chunk, int) or chunk < 1 or chunk & (chunk - 1):
        raise ValueError(f"chunk must be a power of two >= 1, got {chunk!r}")
    first = next(iter(params.values()))
    x = hypercube(d, first.dtype).to(first.device)
    n, P = x.shape[0], sum(t.numel() for t in params.values())
    chunk = min(chunk, n)
    with torch.no_grad():
        p = model(params, x)
    ones = torch.ones_like(p)
    alpha = 0.5 * (loss_derivative(p, ones, loss) + loss_derivative(p, -ones, loss))
    beta = 0.5 * (loss_derivative(p, ones, loss) - loss_derivative(p, -ones, loss))
    grads = torch.empty(n, P, dtype=first.dtype, device=first.device)
    G2, shift = 0.0, torch.zeros(P, dtype=first.dtype, device=first.device)
    for start in range(0, n, chunk):
        rows = slice(start, start + chunk)
        block = grads[rows]  # (chunk, P), contiguous
        block.copy_(per_example_gradients(model, params, x[rows]))  # g(x) for this block
        G2 += float(torch.dot(block.view(-1), block.view(-1)))
        shift += alpha[rows] @ block  # accumulates sum_x alpha(x) g(x)
        fwht_(block.mul_(beta[rows, None] / n))  # stages along the low bits, within the block
    B = butterflies_(grads, chunk)  # the remaining stages: B = 2^-d H [beta g]
    mean = B.mean(0)
    flat = B.view(-1)
    var = float(torch.dot(flat, flat)) / n - float(torch.dot(mean, mean))
    grads = B.add_(shift / n)  # + E_x[alpha g], the same for every parity
    return var, G2 / n, grads


def parity_gradient_variance_reference(
    model: Model, params: Params, d: int, loss: str = "square"
) -> tuple[float, float, Float[Tensor, "two_d P"]]:
    r"""Same as :func:`parity_gradient_variance`, one autograd call per parity (readable, :math:`O(4^d)`)."""
    loss_fn(torch.zeros(1), torch.zeros(1), loss)
    dtype = next(iter(params.values())).dtype
    device = next(iter(params.values())).device
    x = hypercube(d, dtype).to(device)
    targets = all_parities(d, dtype).to(device)  # (2^d subsets, 2^d points)
    leaves = {k: t.detach().clone().requires_grad_(True) for k, t in params.items()}
    rows = []
    for y in targets:
        F = loss_fn(model(leaves, x), y, loss).mean()
        grad = torch.autograd.grad(F, list(leaves.values()))
        rows.append(torch.cat([t.reshape(-1) for t in grad]))
    grads = torch.stack(rows)
    var = float(((grads - grads.mean(0)) ** 2).sum(1).mean())
    g = per_example_gradients(model, params, x)
    return var, float((g**2).sum(1).mean()), grads


def parity_variance_parseval(
    model: Model, params: Params, d: int, loss: str = "square", chunk: int = 4096
) -> tuple[float, float, float]:
    r"""The two terms of Parseval's identity for :math:`\mathrm{Var}\cdot 2^d/G^2`, and :math:`\max|p_w|`.

    With :math:`\beta` the target-dependent part of the loss derivative (module docstring),
    Parseval's identity for the :math:`2^d` parities gives, exactly,

    .. math::  \frac{2^d\,\mathrm{Var}(\mathcal H, F, w)}{G(w)^2}
               = \frac{\mathbb{E}_x\|\beta g\|^2}{\mathbb{E}_x\|g\|^2}
               - 2^{-d}\,\frac{\beta(\mathbf 1)^2\|g(\mathbf 1)\|^2}{\mathbb{E}_x\|g\|^2},

    with :math:`\mathbf 1` the all-ones point (row 0 of :func:`~nnapprox.failures.parity.hypercube`).
    For the square loss, and for the hinge wherever :math:`|p_w| < 1`, :math:`\beta = -1`
    and the first term is 1. Computed directly from the per-example gradients, without the
    Walsh–Hadamard transform, so that it checks :func:`parity_gradient_variance`. Returns
    ``(beta_share, point_share, p_max)``: the two terms and :math:`\max_x |p_w(x)|` over the cube.
    Chapter "When gradient descent fails", section "Computing the variance exactly".
    """
    loss_fn(torch.zeros(1), torch.zeros(1), loss)
    first = next(iter(params.values()))
    x = hypercube(d, first.dtype).to(first.device)
    with torch.no_grad():
        p = model(params, x)
    ones = torch.ones_like(p)
    beta = 0.5 * (loss_derivative(p, ones, loss) - loss_derivative(p, -ones, loss))
    g2_sum = beta_g2_sum = 0.0
    for start in range(0, x.shape[0], chunk):
        rows = slice(start, start + chunk)
        sq_norm = per_example_gradients(model, params, x[rows]).pow(2).sum(1)  # (chunk,)
        if start == 0:
            g1_sq = float(sq_norm[0])  # ||g(1)||^2, the all-ones point is row 0
        g2_sum += float(sq_norm.sum())
        beta_g2_sum += float((beta[rows] ** 2 * sq_norm).sum())
    point_share = float(beta[0]) ** 2 * g1_sq / g2_sum  # 2^-d beta(1)^2 ||g(1)||^2 / E||g||^2
    return beta_g2_sum / g2_sum, point_share, float(p.abs().max())


def gradient_snr(
    model: Model, params: Params, x: Float[Tensor, "batch d"], y: Float[Tensor, " batch"], loss: str = "square"
) -> float:
    r"""Signal-to-noise ratio of the per-example loss gradient for one target:
    :math:`\|\mathbb{E}\nabla\ell\|^2 / \mathbb{E}\|\nabla\ell - \mathbb{E}\nabla\ell\|^2` over the sample."""
    with torch.no_grad():
        p = model(params, x)
    grads = loss_derivative(p, y, loss)[:, None] * per_example_gradients(model, params, x)
    mean = grads.mean(0)
    noise = ((grads - mean) ** 2).sum(1).mean()
    return float((mean**2).sum() / noise)


def family_gradient_variance(
    model: Model, params: Params, x: Float[Tensor, "n d"], targets: Float[Tensor, "m n"], loss: str = "square"
) -> tuple[float, float]:
    r"""Exact :math:`\mathrm{Var}(\mathcal H, F, w)` and :math:`G(w)^2` for any finite family, inputs uniform on ``x``.

    Row ``h`` of ``targets`` holds the values :math:`h(x_i)` of one member on the ``n``
    points of ``x``, which carry the input distribution (uniform weights: the whole cube
    for exact expectations). With the split :math:`\ell'(p, h) = \alpha + \beta h` of the
    module docstring (valid for :math:`\pm1` targets; for the square loss every real target
    works, with :math:`\beta = -1`), the target-dependent part of the gradient is
    :math:`b_h = \mathbb{E}_x[\beta\, h\, g]`, so

    .. math::  \mathrm{Var}(\mathcal H, F, w) = \frac1m\sum_h \Big\|b_h - \frac1m\sum_{h'} b_{h'}\Big\|^2 ,

    one matrix product :math:`\frac1n\,T\,[\beta g]` for all members. Theorem 1 bounds it by
    :math:`G^2/m` only when the family is orthogonal; this function has no such hypothesis,
    so it also measures families that break the bound (for all :math:`2^d` parities it
    agrees with :func:`parity_gradient_variance`). Returns ``(var, G2)``.
    """
    loss_fn(torch.zeros(1), torch.zeros(1), loss)  # validates the name before any work
    if x.ndim != 2 or targets.ndim != 2 or targets.shape[1] != x.shape[0]:
        raise ValueError(f"need x of shape (n, d) and targets of shape (m, n), got {tuple(x.shape)} and "
                         f"{tuple(targets.shape)}")
    if targets.shape[0] < 2:
        raise ValueError(f"a family needs at least 2 members, got {targets.shape[0]}")
    if loss != "square" and not bool((targets.abs() == 1).all()):
        raise ValueError(f"the {loss!r} loss splits as alpha + beta h only for targets in {{-1, +1}}; "
                         "use loss='square' for real-valued targets")
    with torch.no_grad():
        p = model(params, x)
    ones = torch.ones_like(p)
    beta = 0.5 * (loss_derivative(p, ones, loss) - loss_derivative(p, -ones, loss))
    g = per_example_gradients(model, params, x)  # (n, P)
    b = targets.to(g.dtype) @ (beta[:, None] * g) / x.shape[0]  # (m, P): b_h = E_x[beta h g]
    var = float(((b - b.mean(0)) ** 2).sum(1).mean())
    return var, float(g.pow(2).sum(1).mean())
