r"""Flat activations: a neuron with a staircase activation, trained end to end or forward-only.

Chapter "When gradient descent fails", section "Conditioning and architecture", subsection
"Flat activations" (§5 of {cite}`shalevshwartz2017failures`; the forward-only update is the
Isotron/GLMtron update of {cite}`kalai2009isotron` and {cite}`kakade2011glmtron`).

The target is :math:`y = u(w^{\ast\top} x)` with the staircase (rounding) activation

.. math::  u(z) = \Delta\, \mathrm{round}(z / \Delta), \qquad |u(z) - z| \le \Delta/2 ,

and the predictor :math:`u(w^\top x)`, with the square loss
:math:`L(w) = \frac{1}{2N}\sum_i (u(w^\top x_i) - y_i)^2` on a fixed sample. Since
:math:`u' = 0` almost everywhere, the gradient :math:`\nabla L = \frac1N\sum_i (u(w^\top x_i) - y_i)\,u'(w^\top x_i)\,x_i`
is exactly zero and end-to-end gradient descent never moves. The forward-only update keeps
the forward pass and drops :math:`u'` from the backward pass,

.. math::  w_{t+1} = w_t - \eta\, \frac1N\sum_i \big(u(w_t^\top x_i) - y_i\big)\, x_i .

Writing :math:`u(z) = z + r(z)` it is :math:`w_{t+1} - w^\ast = (I - \eta\hat\Sigma)(w_t - w^\ast) - \eta e_t`
with :math:`\hat\Sigma = X^\top X / N` and :math:`\|e_t\| \le \sqrt{\lambda_{\max}}\,\Delta`
(Cauchy–Schwarz, :math:`|r(a) - r(b)| \le \Delta`), hence for :math:`0 < \eta \le 1/\lambda_{\max}`

.. math::  \|w_T - w^\ast\| \le (1 - \eta\lambda_{\min})^T \|w_0 - w^\ast\| + \frac{\sqrt{\lambda_{\max}}\,\Delta}{\lambda_{\min}}

(:func:`forward_only_bound`), and :math:`L(w_T) \le \frac12\big(\sqrt{\lambda_{\max}}\,\|w_T - w^\ast\| + \Delta\big)^2`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor


def quantised_identity(z: Float[Tensor, "..."], delta: float) -> Float[Tensor, "..."]:
    r"""Staircase activation :math:`u(z) = \Delta\,\mathrm{round}(z/\Delta)`; its autograd derivative is 0."""
    if delta <= 0:
        raise ValueError(f"delta must be > 0, got {delta}")
    return delta * torch.round(z / delta)


def flat_neuron_loss(w: Float[Tensor, " d"], X: Float[Tensor, "N d"], y: Float[Tensor, " N"], delta: float) -> Tensor:
    r""":math:`L(w) = \frac{1}{2N}\sum_i (u(w^\top x_i) - y_i)^2`."""
    return 0.5 * ((quantised_identity(X @ w, delta) - y) ** 2).mean()


def train_flat_neuron(
    X: Float[Tensor, "N d"], y: Float[Tensor, " N"], w0: Float[Tensor, " d"], delta: float, eta: float, n_steps: int,
    mode: str = "forward_only",
) -> tuple[Float[Tensor, "steps_plus_1 d"], Float[Tensor, " steps_plus_1"]]:
    r"""Full-batch training of :math:`u(w^\top x)`; ``mode`` is ``"end_to_end"`` (autograd) or ``"forward_only"``.

    Returns the weights and the loss :math:`L(w_t)` for :math:`t = 0, \dots, T`.
    """
    if mode not in ("end_to_end", "forward_only"):
        raise ValueError(f"mode must be 'end_to_end' or 'forward_only', got {mode!r}")
    if n_steps < 0 or eta <= 0:
        raise ValueError(f"need n_steps >= 0 and eta > 0, got {n_steps}, {eta}")
    w = w0.clone()
    ws, losses = [w.clone()], [flat_neuron_loss(w, X, y, delta).detach()]
    for _ in range(n_steps):
        if mode == "end_to_end":
            w.requires_grad_(True)
            (grad,) = torch.autograd.grad(flat_neuron_loss(w, X, y, delta), w)
            w = (w - eta * grad).detach()
        else:
            residual = quantised_identity(X @ w, delta) - y  # (N,): forward pass as usual
            w = w - eta * (X.T @ residual) / X.shape[0]  # backward pass with u' replaced by 1
        ws.append(w.clone())
        losses.append(flat_neuron_loss(w, X, y, delta).detach())
    return torch.stack(ws), torch.stack(losses)


def forward_only_bound(
    X: Float[Tensor, "N d"], w0: Float[Tensor, " d"], w_star: Float[Tensor, " d"], delta: float, eta: float, n_steps: int,
) -> Float[Tensor, " steps_plus_1"]:
    r"""Upper bound :math:`(1 - \eta\lambda_{\min})^t\|w_0 - w^\ast\| + \sqrt{\lambda_{\max}}\,\Delta/\lambda_{\min}` on :math:`\|w_t - w^\ast\|`."""
    lam = torch.linalg.eigvalsh(X.T @ X / X.shape[0])
    lam_min, lam_max = lam[0], lam[-1]
    if not 0 < eta <= 1 / float(lam_max):
        raise ValueError(f"the bound needs 0 < eta <= 1/lambda_max = {1 / float(lam_max):.4g}, got {eta}")
    t = torch.arange(n_steps + 1, dtype=X.dtype, device=X.device)
    return (1 - eta * lam_min) ** t * (w0 - w_star).norm() + lam_max.sqrt() * delta / lam_min
