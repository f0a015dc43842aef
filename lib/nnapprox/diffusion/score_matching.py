r"""Learning the score by denoising, in the :math:`x_0`-prediction parametrisation.

Chapter "Diffusion models as variational inference", sections 4 and 6 ({cite}`vincent2011connection`,
{cite}`ho2020denoising`, {cite}`mei2023deep`).

Denoising score matching {cite}`vincent2011connection` fits :math:`\hat s_t` by minimising
:math:`\frac1n\sum_i \|\sigma_t^{-1} g_i + \mathrm{NN}(\lambda_t x_i + \sigma_t g_i)\|^2`,
whose population minimiser is the score. Its scale blows up as :math:`\sigma_t \to 0`, so we
fit instead the posterior mean: with :math:`h = \lambda_t z/\sigma_t^2`,

.. math::  \hat m = \arg\min_{\mathrm{NN}} \frac1n \sum_{i} \mathbb E_{t, g}\,\|x_i - \mathrm{NN}(h_i)\|_2^2,
           \qquad \hat s_t(z) = (\lambda_t \hat m(h) - z)/\sigma_t^2,

an equivalent problem (Tweedie): the population minimiser is :math:`m_t(z) = \mathbb E[x\mid z]`, and
:math:`\mathbb E\|x - \hat m\|^2 = \mathbb E\|x - m\|^2 + \mathbb E\|m - \hat m\|^2`. Because the
posterior is the Ising model with field :math:`h`, one network :math:`h \mapsto m` serves all times.
Times are drawn log-uniformly on :math:`[t_{\min}, t_{\max}]`; the ``n`` samples are fixed and
the noise is redrawn at every step. :func:`train_denoisers` trains many networks of one
architecture at once, :func:`tune_denoisers` gives each network of the chapter the same search
over width and learning rate (selection by :func:`held_out_loss`), and
:func:`as_ensemble_denoiser` runs many trained samplers in one reverse SDE.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

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


def validation_draws(
    x_val: Float[Tensor, "n_val d"],
    val_draws: int = 64,
    generator: torch.Generator | None = None,
    t_min: float = 1e-2,
    t_max: float = 5.0,
) -> tuple[Float[Tensor, "m d"], Float[Tensor, "m d"]]:
    r"""Fixed held-out draws ``(h, x)``: each held-out sample with ``val_draws`` (time, noise) pairs.

    ``m = n_val * val_draws``; times log-uniform on ``[t_min, t_max]`` as in training,
    :math:`h = \lambda_t(\lambda_t x + \sigma_t g)/\sigma_t^2`. Evaluated by :func:`held_out_loss`.
    """
    if x_val.ndim != 2 or len(x_val) == 0 or val_draws < 1:
        raise ValueError(f"x_val must be a non-empty (n_val, d) tensor and val_draws >= 1, "
                         f"got shape {tuple(x_val.shape)}, val_draws={val_draws}")
    xv = x_val.repeat_interleave(val_draws, dim=0)
    tv = log_uniform_times(len(xv), t_min, t_max, generator, xv.dtype, x_val.device)
    return field(noise(xv, tv, generator), tv), xv


def held_out_loss(model: nn.Module, h: Float[Tensor, "m d"], x: Float[Tensor, "m d"]) -> float:
    r"""The denoising loss :math:`\frac1m\sum_i \|x_i - \mathrm{model}(h_i)\|^2/d` on fixed draws, no gradients.

    Its expectation is :math:`\mathbb E\|x - m_t\|^2/d + \mathbb E\|\hat m - m_t\|^2/d`: the
    Bayes error plus the excess error, so it ranks denoisers without knowing :math:`m_t`.
    """
    param = next(model.parameters())
    with torch.no_grad():
        return float(((x.to(param) - model(h.to(param))) ** 2).sum(1).mean() / x.shape[1])


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
    validation: tuple[Float[Tensor, "m d"], Float[Tensor, "m d"]] | None = None,
) -> list[float]:
    r"""Adam on the :math:`x_0`-prediction loss :math:`\|x - \mathrm{model}(h)\|^2/d`, cosine-decayed lr.

    Batches are drawn with replacement from the ``n`` training samples; each gets fresh
    times and noise. Returns the training losses.

    With ``x_val`` (held-out samples, disjoint from ``x_train``) this is *early stopping*:
    every ``eval_every`` steps the same loss is computed on ``x_val``, each sample paired with
    ``val_draws`` fixed (time, noise) draws, and at the end the model is reset to the weights
    with the lowest held-out loss. Without it, a long run on few samples memorises them: the
    minimiser of the empirical loss over ``n`` points is the posterior mean of the *empirical*
    distribution, not of :math:`\mu`. ``validation`` passes fixed held-out draws
    ``(h_val, x_val)`` from :func:`validation_draws` instead of ``x_val`` (several runs then
    compare on the same problem, as :func:`tune_denoisers` does).
    """
    if n_steps < 1 or batch_size < 1:
        raise ValueError(f"need n_steps >= 1 and batch_size >= 1, got {n_steps}, {batch_size}")
    if lr <= 0:
        raise ValueError(f"need lr > 0, got {lr}")
    if x_val is not None and validation is not None:
        raise ValueError("pass x_val or validation (fixed held-out draws), not both")
    if x_val is not None and (x_val.ndim != 2 or x_val.shape[1] != x_train.shape[1] or len(x_val) == 0
                              or eval_every < 1 or val_draws < 1):
        raise ValueError(f"x_val must be a non-empty (n_val, {x_train.shape[1]}) tensor and eval_every, val_draws >= 1")
    if validation is not None and (len(validation) != 2 or validation[0].shape != validation[1].shape
                                   or validation[1].ndim != 2 or validation[1].shape[1] != x_train.shape[1]
                                   or len(validation[1]) == 0 or eval_every < 1):
        raise ValueError(f"validation must be (h_val, x_val), two non-empty (m, {x_train.shape[1]}) tensors "
                         "(see validation_draws), and eval_every >= 1")
    param = next(model.parameters())  # the model's dtype and device; data are moved there
    device = x_train.device
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, n_steps)
    if x_val is not None:  # fixed validation draws: every evaluation compares the same problem
        validation = validation_draws(x_val, val_draws, generator, t_min, t_max)
    if validation is not None:
        hv, xv = validation[0].to(param), validation[1].to(param)
        best_val, best_state = math.inf, None

    def validate() -> None:
        nonlocal best_val, best_state
        val = held_out_loss(model, hv, xv)
        if val < best_val:
            best_val, best_state = val, {k: v.detach().clone() for k, v in model.state_dict().items()}

    losses = []
    for step in progress(range(n_steps), desc=desc):
        if validation is not None and step % eval_every == 0:
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
    if validation is not None:
        validate()
        model.load_state_dict(best_state)
    return torch.stack(losses).tolist()


def train_denoisers(
    models: Sequence[nn.Module],
    x_train: Float[Tensor, "E n d"],
    n_steps: int,
    lrs: Sequence[float],
    generator: torch.Generator | None = None,
    batch_size: int = 256,
    t_min: float = 1e-2,
    t_max: float = 5.0,
    validation: tuple[Float[Tensor, "E m d"], Float[Tensor, "E m d"]] | None = None,
    eval_every: int = 50,
    desc: str | None = None,
) -> Float[Tensor, "E n_steps"]:
    r"""Train ``E`` denoisers of one architecture at once: :func:`train_denoiser` for each, in one pass.

    Member ``e`` is ``models[e]``, trained on its own samples ``x_train[e]`` with its own learning
    rate ``lrs[e]`` (Adam, :math:`\beta = (0.9, 0.999)`, cosine-decayed to 0 over ``n_steps``,
    as in :func:`train_denoiser`), its own batches, times and noise, and, with ``validation``
    (``(h, x)`` of shape ``(E, m, d)``, e.g. stacked :func:`validation_draws`), its own early
    stopping every ``eval_every`` steps. The parameters are stacked
    (``torch.func.stack_module_state``), the forward pass is ``torch.func.vmap`` of the module,
    and Adam is written out with a learning rate per member: it is elementwise, and member
    ``e``'s loss involves only its own weights, so each member receives exactly its own update;
    the members share each step's batched operations instead of running ``E`` loops. With
    ``E = 1`` the draws and updates are those of :func:`train_denoiser`. At the end the kept
    weights are loaded back into ``models``. Returns the training losses, ``(E, n_steps)``.
    Chapter "Diffusion models as variational inference", sections 4 and 6.
    """
    models, lrs = list(models), [float(lr) for lr in lrs]
    E = len(models)
    if E == 0 or len(lrs) != E or any(lr <= 0 for lr in lrs):
        raise ValueError(f"need one learning rate > 0 per model, got {len(models)} models and lrs {lrs}")
    if n_steps < 1 or batch_size < 1 or eval_every < 1:
        raise ValueError(f"need n_steps, batch_size, eval_every >= 1, got {n_steps}, {batch_size}, {eval_every}")
    if x_train.ndim != 3 or x_train.shape[0] != E or x_train.shape[1] == 0:
        raise ValueError(f"x_train must have shape (E, n, d) with E = {E} models, got {tuple(x_train.shape)}")
    shapes = {k: v.shape for k, v in models[0].state_dict().items()}
    if any(type(m) is not type(models[0]) or {k: v.shape for k, v in m.state_dict().items()} != shapes
           for m in models):
        raise ValueError("all models must be the same class with the same parameter shapes (one architecture)")
    E_, n, d = x_train.shape
    if validation is not None and (len(validation) != 2 or validation[0].shape != validation[1].shape
                                   or validation[1].ndim != 3 or validation[1].shape[0] != E
                                   or validation[1].shape[2] != d or validation[1].shape[1] == 0):
        raise ValueError(f"validation must be (h, x), two (E, m, d) tensors with E = {E}, d = {d}")
    params, buffers = torch.func.stack_module_state(models)
    ref = models[0]
    param0 = next(iter(params.values()))
    device = x_train.device

    def one(p, b, h):
        return torch.func.functional_call(ref, (p, b), (h,))

    forward = torch.func.vmap(one)  # (E, batch, d) -> (E, batch, d)
    lr = torch.tensor(lrs, dtype=param0.dtype, device=param0.device)
    moments = {k: (torch.zeros_like(v), torch.zeros_like(v)) for k, v in params.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    rows = torch.arange(E, device=device)[:, None]
    if validation is not None:
        hv, xv = validation[0].to(param0), validation[1].to(param0)
        best_val = torch.full((E,), math.inf, dtype=param0.dtype, device=param0.device)
        best = {k: v.detach().clone() for k, v in params.items()}

    def validate() -> None:
        with torch.no_grad():
            val = ((xv - forward(params, buffers, hv)) ** 2).sum(2).mean(1) / d  # (E,)
            better = val < best_val
            best_val[better] = val[better]
            for k, v in params.items():
                best[k][better] = v.detach()[better]

    losses = []
    for step in progress(range(n_steps), desc=desc):
        if validation is not None and step % eval_every == 0:
            validate()
        idx = rng.randint(0, n, (E, batch_size), generator=generator, device=device)
        x = x_train[rows, idx].reshape(E * batch_size, d)
        t = log_uniform_times(E * batch_size, t_min, t_max, generator, x.dtype, device)
        h = field(noise(x, t, generator), t).reshape(E, batch_size, d)
        x = x.reshape(E, batch_size, d).to(param0)
        loss = ((x - forward(params, buffers, h.to(param0))) ** 2).sum(2).mean(1) / d  # (E,)
        grads = torch.autograd.grad(loss.sum(), list(params.values()))
        with torch.no_grad():
            k_step = step + 1
            scale = lr * 0.5 * (1 + math.cos(math.pi * step / n_steps)) / (1 - beta1**k_step)
            for (key, p), g in zip(params.items(), grads):
                m1, m2 = moments[key]
                m1.mul_(beta1).add_(g, alpha=1 - beta1)
                m2.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                denom = (m2.sqrt() / math.sqrt(1 - beta2**k_step)).add_(eps)
                p.sub_(scale.view(E, *([1] * (p.ndim - 1))) * m1 / denom)
        losses.append(loss.detach())
    if validation is not None:
        validate()
    final = best if validation is not None else params
    for e, model in enumerate(models):
        with torch.no_grad():
            for key, value in model.named_parameters():
                value.copy_(final[key][e])
    return torch.stack(losses, 1)


def tune_denoisers(
    build: Callable[[int, torch.Generator | None], nn.Module],
    widths: Sequence[int],
    lrs: Sequence[float],
    x_train: Float[Tensor, "R n d"],
    n_steps: int,
    generator: torch.Generator | None = None,
    val_fraction: float = 0.2,
    val_draws: int = 64,
    desc: str | None = None,
    **train_kwargs,
) -> tuple[list[nn.Module], list[tuple[int, float]], Float[Tensor, "R widths lrs"]]:
    r"""For each of ``R`` training sets, a grid search over (width, learning rate) by held-out loss.

    Repeat ``r`` holds out its first ``floor(val_fraction * n)`` samples and fixes
    :func:`validation_draws` of them; every configuration is built by ``build(width, generator)``,
    trained on the rest of ``x_train[r]`` for ``n_steps`` steps with early stopping on those
    draws, and the configuration with the lowest :func:`held_out_loss` on the same draws is
    kept (the first on ties). The held-out loss is the Bayes error plus the excess error, so the
    selection needs no exact posterior mean. All (repeat, learning rate) pairs of one width
    train together (:func:`train_denoisers`). Returns the ``R`` selected models, their
    ``(width, lr)``, and the held-out losses of every configuration, ``(R, len(widths), len(lrs))``.
    Chapter "Diffusion models as variational inference", section 4: both denoisers get this same
    search, so neither is compared untuned; section 6 runs it on every training set at every d.
    """
    widths, lrs = list(widths), [float(lr) for lr in lrs]
    if not widths or not lrs or any(w < 1 for w in widths) or any(lr <= 0 for lr in lrs):
        raise ValueError(f"need non-empty widths >= 1 and learning rates > 0, got {widths}, {lrs}")
    if x_train.ndim != 3 or x_train.shape[0] < 1:
        raise ValueError(f"x_train must have shape (R, n, d), one training set per repeat, got {tuple(x_train.shape)}")
    R, n, d = x_train.shape
    n_val = int(val_fraction * n)
    if not 0 < val_fraction < 1 or n_val < 1 or n_val >= n:
        raise ValueError(f"val_fraction must leave at least one held-out and one training sample "
                         f"(0 < val_fraction < 1), got {val_fraction} with n = {n}")
    t_range = (train_kwargs.get("t_min", 1e-2), train_kwargs.get("t_max", 5.0))
    draws = [validation_draws(x_train[r, :n_val], val_draws, generator, *t_range) for r in range(R)]
    h_val, x_val = torch.stack([h for h, _ in draws]), torch.stack([x for _, x in draws])
    member_r = torch.arange(R).repeat_interleave(len(lrs))  # members: repeat-major, then lr
    table = torch.empty(R, len(widths), len(lrs), dtype=torch.float64)
    trained = []
    for i, width in enumerate(widths):
        members = [build(width, generator) for _ in range(R * len(lrs))]
        name = None if desc is None else f"{desc} width {width}"
        train_denoisers(members, x_train[member_r, n_val:], n_steps, lrs * R, generator,
                        validation=(h_val[member_r], x_val[member_r]), desc=name, **train_kwargs)
        for e, model in enumerate(members):
            r, j = divmod(e, len(lrs))
            table[r, i, j] = held_out_loss(model, h_val[r], x_val[r])
        trained.append(members)
    chosen, configs = [], []
    for r in range(R):
        flat = int(torch.argmin(table[r].flatten()))  # first minimum: width-major, then lr
        i, j = divmod(flat, len(lrs))
        chosen.append(trained[i][r * len(lrs) + j])
        configs.append((widths[i], lrs[j]))
    return chosen, configs, table


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


def as_ensemble_denoiser(models: Sequence[nn.Module]):
    r"""``E`` trained modules as one map on stacked blocks of rows, no gradients.

    The input ``(E * n, d)`` is read as ``E`` consecutive blocks of ``n`` rows; block ``e`` goes
    through ``models[e]``, so one call of :func:`nnapprox.diffusion.reverse_sde` with ``E * n``
    samples runs ``E`` samplers at once (rows ``e * n`` to ``(e + 1) * n - 1`` are sampler
    ``e``'s). Models of the same class and parameter shapes run together (``torch.func.vmap``
    over their stacked weights); models may differ in width. Returned in ``h``'s dtype and device.
    """
    models = list(models)
    if not models:
        raise ValueError("need at least one model")
    groups: dict[tuple, list[int]] = {}
    for e, model in enumerate(models):
        key = (type(model), tuple((k, tuple(v.shape)) for k, v in model.state_dict().items()))
        groups.setdefault(key, []).append(e)
    runners = []
    for members in groups.values():
        params, buffers = torch.func.stack_module_state([models[e] for e in members])
        params = {k: v.detach() for k, v in params.items()}
        ref = models[members[0]]
        forward = torch.func.vmap(lambda p, b, h, ref=ref: torch.func.functional_call(ref, (p, b), (h,)))
        runners.append((torch.tensor(members), params, buffers, forward, next(iter(params.values()))))
    E = len(models)

    def denoiser(h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        if h.shape[0] % E:
            raise ValueError(f"the batch ({h.shape[0]} rows) must be {E} equal blocks, one per model")
        blocks = h.reshape(E, h.shape[0] // E, h.shape[1])
        out = torch.empty_like(blocks)
        with torch.no_grad():
            for members, params, buffers, forward, param0 in runners:
                idx = members.to(h.device)
                out[idx] = forward(params, buffers, blocks[idx].to(param0)).to(h)
        return out.reshape(h.shape)

    return denoiser
