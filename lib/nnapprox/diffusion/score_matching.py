r"""Learning the score by denoising, in the :math:`x_0`-prediction parametrisation.

Chapter "Diffusion models as variational inference", sections 4 and 6 ({cite}`vincent2011connection`,
{cite}`ho2020denoising`, {cite}`mei2023deep`).

The seed lecture fits :math:`\hat s_t` by minimising
:math:`\frac1n\sum_i \|\sigma_t^{-1} g_i + \mathrm{NN}(\lambda_t x_i + \sigma_t g_i)\|^2`,
whose population minimiser is the score. Its scale blows up as :math:`\sigma_t \to 0`, so we
fit instead the posterior mean: with :math:`h = \lambda_t z/\sigma_t^2`,

.. math::  \hat m = \arg\min_{\mathrm{NN}} \frac1n \sum_{i} \mathbb E_{t, g}\,\|x_i - \mathrm{NN}(h_i)\|_2^2,
           \qquad \hat s_t(z) = (\lambda_t \hat m(h) - z)/\sigma_t^2,

an equivalent problem (Tweedie): the population minimiser is :math:`m_t(z) = \mathbb E[x\mid z]`, and
:math:`\mathbb E\|x - \hat m\|^2 = \mathbb E\|x - m\|^2 + \mathbb E\|m - \hat m\|^2`. Because the
posterior is the Ising model with field :math:`h`, one network :math:`h \mapsto m` serves all times.
Times are drawn log-uniformly on :math:`[t_{\min}, t_{\max}]`; the ``n`` samples are fixed and
the noise is redrawn at every step.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ..progress import progress
from .enumeration import posterior_mean, sample_exact
from .ising import field, noise, ou_schedule
from nnapprox import rng


def log_uniform_times(n: int, t_min: float, t_max: float, generator: torch.Generator | None = None,
                      dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
                      ) -> Float[Tensor, " n"]:
    """``n`` times drawn log-uniformly on ``[t_min, t_max]``."""
    if not 0 < t_min <= t_max:
        raise ValueError(f"need 0 < t_min <= t_max, got {t_min}, {t_max}")
    u = rng.rand(n, generator=generator, dtype=dtype, device=device)
    return torch.exp(math.log(t_min) + u * (math.log(t_max) - math.log(t_min)))


def train_denoiser(
    model: nn.Module,
    x_train: Float[Tensor, "n d"],
    n_steps: int,
    generator: torch.Generator | None = None,
    batch_size: int = 256,
    lr: float = 1e-2,
    t_min: float = 1e-2,
    t_max: float = 5.0,
    desc: str | None = None,
    x_val: Float[Tensor, "n_val d"] | None = None,
    eval_every: int = 50,
    val_draws: int = 64,
) -> list[float]:
    r"""Adam on the :math:`x_0`-prediction loss :math:`\|x - \mathrm{model}(h)\|^2/d`, cosine-decayed lr.

    Batches are drawn with replacement from the ``n`` training samples; each gets fresh
    times and noise. Returns the training losses.

    With ``x_val`` (held-out samples, disjoint from ``x_train``) this is *early stopping*:
    every ``eval_every`` steps the same loss is computed on ``x_val``, each sample paired with
    ``val_draws`` fixed (time, noise) draws, and at the end the model is reset to the weights
    with the lowest held-out loss. Without it, a long run on few samples memorises them: the
    minimiser of the empirical loss over ``n`` points is the posterior mean of the *empirical*
    distribution, not of :math:`\mu`.
    """
    if n_steps < 1 or batch_size < 1:
        raise ValueError(f"need n_steps >= 1 and batch_size >= 1, got {n_steps}, {batch_size}")
    if x_val is not None and (x_val.ndim != 2 or x_val.shape[1] != x_train.shape[1] or len(x_val) == 0
                              or eval_every < 1 or val_draws < 1):
        raise ValueError(f"x_val must be a non-empty (n_val, {x_train.shape[1]}) tensor and eval_every, val_draws >= 1")
    param = next(model.parameters())  # the model's dtype and device; data are moved there
    device = x_train.device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, n_steps)
    if x_val is not None:  # fixed validation draws: every evaluation compares the same problem
        xv = x_val.repeat_interleave(val_draws, dim=0)
        tv = log_uniform_times(len(xv), t_min, t_max, generator, xv.dtype, device)
        hv = field(noise(xv, tv, generator), tv).to(param)
        xv = xv.to(param)
        best_val, best_state = math.inf, None

    def validate() -> None:
        nonlocal best_val, best_state
        with torch.no_grad():
            val = float(((xv - model(hv)) ** 2).sum(1).mean() / xv.shape[1])
        if val < best_val:
            best_val, best_state = val, {k: v.detach().clone() for k, v in model.state_dict().items()}

    losses = []
    for step in progress(range(n_steps), desc=desc):
        if x_val is not None and step % eval_every == 0:
            validate()
        idx = rng.randint(0, x_train.shape[0], (batch_size,), generator=generator, device=device)
        x = x_train[idx]
        t = log_uniform_times(batch_size, t_min, t_max, generator, x.dtype, device)
        h = field(noise(x, t, generator), t)
        loss = ((x.to(param) - model(h.to(param))) ** 2).sum(1).mean() / x.shape[1]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.detach())  # read back once at the end: a per-step sync would stall a GPU's queue
    if x_val is not None:
        validate()
        model.load_state_dict(best_state)
    return torch.stack(losses).tolist()


def posterior_mean_error(
    denoiser, A: Float[Tensor, "d d"], t: float, n_test: int, generator: torch.Generator | None = None
) -> float:
    r""":math:`\mathbb E\|\hat m(h) - m_t(z)\|_2^2/d` at time ``t`` over fresh data, exact :math:`m_t` by enumeration.

    The score error is this times :math:`\lambda_t^2/\sigma_t^4`. ``denoiser`` maps fields
    ``(batch, d)`` to means; it is evaluated in its own dtype and compared in float64.
    """
    x = sample_exact(A, n_test, generator)
    ts = torch.full((n_test,), float(t), dtype=A.dtype, device=A.device)
    h = field(noise(x, ts, generator), ts)
    m = posterior_mean(A, h)
    m_hat = denoiser(h).to(A.dtype)
    return float(((m_hat - m) ** 2).sum(1).mean() / A.shape[0])


def score_error(
    denoiser, A: Float[Tensor, "d d"], t: float, n_test: int, generator: torch.Generator | None = None
) -> float:
    r""":math:`\mathbb E\|\hat s_t(z) - s_t(z)\|_2^2/d = \lambda_t^2\sigma_t^{-4}\,\mathbb E\|\hat m - m_t\|^2/d`."""
    lambda_t, sigma_t = ou_schedule(torch.tensor(float(t), dtype=torch.float64))
    return float(lambda_t**2 / sigma_t**4) * posterior_mean_error(denoiser, A, t, n_test, generator)


def as_denoiser(model: nn.Module):
    """Wrap a trained module as a map ``h -> m`` without gradients, returned in ``h``'s dtype and device."""
    param = next(model.parameters())

    def denoiser(h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        with torch.no_grad():
            return model(h.to(param)).to(h)

    return denoiser
