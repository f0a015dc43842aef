r"""Learning parities with SGD: several input dimensions trained at once as one batched ensemble.

Chapter "When gradient descent fails", section "Parity with SGD" (the setting of §2.1 of
{cite}`shalevshwartz2017failures`): inputs uniform on :math:`\{\pm1\}^d`, label
:math:`y = \chi_S(x)` for a hidden subset of size :math:`k`, a one-hidden-layer network of
:math:`10d` ReLUs, hinge loss :math:`[1 - y\,p_w(x)]_+`, plain SGD

.. math::  w_{t+1} = w_t - \eta\, \frac{1}{B}\sum_{i=1}^{B} \nabla_w [1 - y_i\, p_{w_t}(x_i)]_+ .

Member :math:`e` of the ensemble has its own :math:`d_e`; all members are zero-padded to
:math:`d_{\max}` inputs and :math:`10 d_{\max}` hidden units and advanced by one batched
matrix product. The padding is exact: a padded input is always 0 and a padded unit has zero
weights, :math:`\mathrm{ReLU}(0) = 0` and :math:`\mathrm{ReLU}'(0) = 0`, so neither ever
receives a gradient. :func:`train_parity_reference` trains one member the readable way.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..progress import progress
from .hidden_progress import fourier_coefficient, movement_ratio, movement_zscore, placebo_zscore
from .parity import random_subset, sample_parity
from nnapprox import rng

Params = dict[str, Tensor]


def init_ensemble(
    ds: list[int], width_factor: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float32
) -> Params:
    r"""Stacked, zero-padded weights of one-hidden-layer nets of widths ``width_factor * d`` (PyTorch default init)."""
    if not ds or any(not isinstance(d, int) or d < 1 for d in ds):
        raise ValueError(f"ds must be a non-empty list of positive integers, got {ds!r}")
    if width_factor < 1:
        raise ValueError(f"width_factor must be >= 1, got {width_factor}")
    dev = generator.device if generator is not None else torch.device("cpu")
    E, d_max = len(ds), max(ds)
    m_max = width_factor * d_max
    params = {k: torch.zeros(s, dtype=dtype, device=dev) for k, s in
              {"W": (E, m_max, d_max), "b": (E, m_max), "v": (E, m_max), "c": (E,)}.items()}
    for e, d in enumerate(ds):
        m = width_factor * d
        u = lambda shape, fan_in: (2 * rng.rand(shape, generator=generator, dtype=dtype, device=dev) - 1) / fan_in**0.5  # noqa: E731
        params["W"][e, :m, :d] = u((m, d), d)
        params["b"][e, :m] = u((m,), d)
        params["v"][e, :m] = u((m,), m)
        params["c"][e] = u((), m)
    return params


def ensemble_forward(params: Params, x: Float[Tensor, "E batch d_max"]) -> Float[Tensor, "E batch"]:
    r""":math:`p_e(x) = v_e^\top \mathrm{ReLU}(W_e x + b_e) + c_e` for every member at once."""
    hidden = torch.relu(torch.bmm(x, params["W"].transpose(1, 2)) + params["b"][:, None, :])  # (E, batch, m_max)
    return (hidden * params["v"][:, None, :]).sum(-1) + params["c"][:, None]


def sample_ensemble_batch(
    masks: Int[Tensor, "E d_max"], ds: list[int], n: int, generator: torch.Generator | None = None
) -> tuple[Float[Tensor, "E n d_max"], Float[Tensor, "E n"]]:
    r"""``n`` fresh uniform :math:`\pm1` inputs per member (zero beyond :math:`d_e`) and their parities."""
    dev = generator.device if generator is not None else torch.device("cpu")
    E, d_max = masks.shape
    x = 1.0 - 2.0 * rng.randint(0, 2, (E, n, d_max), generator=generator, device=dev).float()
    active = (torch.arange(d_max, device=dev)[None, :] < torch.tensor(ds, device=dev)[:, None]).float()  # (E, d_max)
    x = x * active[:, None, :]
    y = torch.where(masks.bool().to(dev)[:, None, :], x, torch.ones_like(x)).prod(-1)
    return x, y


def sgd_step(params: Params, loss: Tensor, lr: float) -> None:
    r"""One plain SGD step in place: :math:`\theta \leftarrow \theta - \eta \nabla_\theta\, \text{loss}` for every tensor of ``params``."""
    grads = torch.autograd.grad(loss, list(params.values()))
    with torch.no_grad():
        for t, g in zip(params.values(), grads):
            t -= lr * g


def train_parity_ensemble(
    ds: list[int],
    ks: list[int],
    n_steps: int,
    generator: torch.Generator,
    *,
    width_factor: int = 10,
    batch: int = 128,
    lr: float = 0.01,
    eval_every: int = 500,
    n_eval: int = 2048,
    stop_at: float | None = None,
) -> tuple[Int[Tensor, " evals"], Float[Tensor, "evals E"], dict[str, Float[Tensor, "evals E"]], Int[Tensor, "E d_max"]]:
    r"""Train one network per ``(d, k)`` pair with hinge loss and SGD; return the accuracy curves.

    Returns ``(steps, accuracy, progress, masks)``: ``accuracy[t, e]`` is the fraction of
    ``n_eval`` fresh inputs whose sign :math:`\mathrm{sign}\,p_e(x)` equals the parity, after
    ``steps[t]`` SGD steps; ``progress`` holds progress measures on the same grid (each
    ``(evals, E)``): ``"norm_ratio"`` (:func:`relevance`), ``"movement_ratio"`` and
    ``"movement_z"`` (:mod:`nnapprox.failures.hidden_progress`, NaN at step 0), ``"placebo_z"``
    (the same :math:`z` for a group of :math:`k` irrelevant inputs, its negative control; NaN
    where :math:`d - k < k + 2` or at step 0), ``"fourier"``
    (:math:`\hat p_e(S)` on the test inputs) and ``"hinge"`` (test hinge loss);
    ``masks[e]`` is the hidden subset (a uniformly random ``k``-subset). With ``stop_at``,
    training ends at the first evaluation at which every member's accuracy is at least
    ``stop_at`` (the returned grid then ends there).
    """
    if len(ds) != len(ks) or any(not 0 < k <= d for d, k in zip(ds, ks)):
        raise ValueError(f"need one subset size 0 < k <= d per d, got ds={ds}, ks={ks}")
    if n_steps < 1 or eval_every < 1:
        raise ValueError(f"n_steps and eval_every must be >= 1, got {n_steps}, {eval_every}")
    if stop_at is not None and not 0.0 < stop_at <= 1.0:
        raise ValueError(f"stop_at must be None or in (0, 1], got {stop_at!r}")
    d_max = max(ds)
    masks = torch.zeros(len(ds), d_max, dtype=torch.long)
    for e, (d, k) in enumerate(zip(ds, ks)):
        masks[e, :d] = random_subset(d, k, generator)
    params = init_ensemble(ds, width_factor, generator)
    for t in params.values():
        t.requires_grad_(True)
    x_eval, y_eval = sample_ensemble_batch(masks, ds, n_eval, generator)

    W0 = params["W"].detach().clone()
    names = ("norm_ratio", "movement_ratio", "movement_z", "placebo_z", "fourier", "hinge")
    with_placebo = [d - k >= k + 2 for d, k in zip(ds, ks)]
    record: dict[str, list[Tensor]] = {name: [] for name in names}

    def evaluate() -> Tensor:
        with torch.no_grad():
            p, W = ensemble_forward(params, x_eval), params["W"].detach()
            record["norm_ratio"].append(relevance(W, masks, ds))
            record["movement_ratio"].append(movement_ratio(W, W0, masks, ds).float())
            record["movement_z"].append(movement_zscore(W, W0, masks, ds).float())
            placebo = torch.full((len(ds),), float("nan"))
            if any(with_placebo):
                rows = [e for e, ok in enumerate(with_placebo) if ok]
                placebo[rows] = placebo_zscore(W[rows], W0[rows], masks[rows], [ds[e] for e in rows]).float()
            record["placebo_z"].append(placebo)
            record["fourier"].append(fourier_coefficient(p, y_eval))
            record["hinge"].append(torch.relu(1.0 - y_eval * p).mean(1).cpu())
            return (torch.sign(p) == y_eval).float().mean(1).cpu()

    steps, curve = [0], [evaluate()]
    for step in progress(range(1, n_steps + 1), desc="parity SGD"):
        x, y = sample_ensemble_batch(masks, ds, batch, generator)
        hinge = torch.relu(1.0 - y * ensemble_forward(params, x)).mean(1).sum()  # members are independent
        sgd_step(params, hinge, lr)
        if step % eval_every == 0 or step == n_steps:
            steps.append(step)
            curve.append(evaluate())
            if stop_at is not None and bool((curve[-1] >= stop_at).all()):
                break
    return torch.tensor(steps), torch.stack(curve), {k: torch.stack(v) for k, v in record.items()}, masks


def relevance(W: Float[Tensor, "E m d_max"], masks: Int[Tensor, "E d_max"], ds: list[int]) -> Float[Tensor, " E"]:
    r"""Hidden progress: mean first-layer weight norm on the relevant inputs over that on the others.

    :math:`\rho = \operatorname{mean}_{j \in S}\|W_{:,j}\| \,/\, \operatorname{mean}_{j \notin S, j < d}\|W_{:,j}\|`,
    about 1 at initialisation; it grows while the accuracy still sits at chance
    ({cite}`barak2022hidden`). Members with :math:`S = [d]` get NaN.
    """
    norms = W.norm(dim=1).cpu()  # (E, d_max): one norm per input coordinate
    out = []
    for e, d in enumerate(ds):
        m = masks[e, :d].bool()
        out.append(norms[e, :d][m].mean() / norms[e, :d][~m].mean() if (~m).any() else torch.tensor(float("nan")))
    return torch.stack(out)
