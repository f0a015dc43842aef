r"""Spectral bias: a ReLU network fits the low frequencies of its target first.

Universal approximation chapter, section "Spectral bias" (Rahaman et al. 2019,
``rahaman2019spectral``). The target is a sum of sinusoids on :math:`[0, 1]`,

.. math::  \lambda(z) = \sum_{i=1}^{M} A_i \sin(2\pi k_i z + \varphi_i),
           \qquad k_i = 5, 10, \dots, 50,

sampled at :math:`n = 200` equispaced points :math:`z_j = j/n`. During full-batch training we
record the *normalised* Fourier amplitude of the network at each target frequency,

.. math::  \hat a_i(t) = \frac{1}{A_i}\, \Big|\frac{2}{n} \sum_{j=0}^{n-1} f_t(z_j)\, e^{-2\pi i k_i z_j}\Big|,

which is exactly 1 when the network has learned component :math:`i` and 0 before. The
*learning time* :math:`t_i` of a frequency is the first recorded step with
:math:`\hat a_i(t) > 1/2`. Spectral bias means that :math:`t_i` increases with :math:`k_i`,
measured by the Spearman rank correlation of :math:`(k_i, t_i)`.

Many phase draws :math:`\varphi` train at once as one ensemble (``torch.func.vmap``).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from jaxtyping import Float, Shaped
from torch import Tensor

from ..checkpoints import load_tensors, save_tensors
from ..progress import progress
from .mlp import Params, init_relu_mlp, relu_mlp_ensemble
from nnapprox import rng


def sinusoid_target(
    z: Float[Tensor, " n"], k: Float[Tensor, " M"], A: Float[Tensor, " M"], phi: Float[Tensor, "E M"]
) -> Float[Tensor, "E n"]:
    r""":math:`\lambda(z) = \sum_i A_i \sin(2\pi k_i z + \varphi_i)` for each of ``E`` phase draws."""
    return (A[None, :, None] * torch.sin(2 * math.pi * k[None, :, None] * z[None, None, :] + phi[:, :, None])).sum(1)


def fourier_amplitudes(f: Float[Tensor, "E n"], k: Float[Tensor, " M"]) -> Float[Tensor, "E M"]:
    r""":math:`|\tfrac{2}{n}\sum_j f(z_j) e^{-2\pi i k z_j}|` on the grid :math:`z_j = j/n` (integer ``k < n/2``)."""
    n = f.shape[-1]
    z = torch.arange(n, dtype=f.dtype, device=f.device) / n
    angle = 2 * math.pi * k[:, None].to(f.dtype) * z[None, :]  # (M, n)
    re = f @ torch.cos(angle).T
    im = f @ torch.sin(angle).T
    return 2.0 / n * torch.sqrt(re**2 + im**2)


def learning_times(
    amplitudes: Float[Tensor, "T *batch M"], steps: Shaped[Tensor, " T"], level: float = 0.5
) -> Float[Tensor, "*batch M"]:
    r"""First recorded step where the normalised amplitude exceeds ``level``; ``steps[-1] + 1`` if never (censored)."""
    above = amplitudes > level
    first = torch.where(above.any(0), above.float().argmax(0), torch.full(above.shape[1:], -1, device=above.device))
    t = steps.to(amplitudes.dtype)[first.clamp(min=0)]
    return torch.where(first >= 0, t, steps[-1].to(amplitudes.dtype) + 1)


def spearman(a: Float[Tensor, " M"], b: Float[Tensor, " M"]) -> float:
    """Spearman rank correlation with average ranks for ties (Pearson correlation of the ranks)."""

    def ranks(v: Tensor) -> Tensor:
        order = torch.argsort(v)
        r = torch.empty_like(v, dtype=torch.float64)
        r[order] = torch.arange(len(v), dtype=torch.float64)
        for value in torch.unique(v):  # average ranks over ties
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    ra, rb = ranks(a.double()), ranks(b.double())
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = torch.sqrt((ra**2).sum() * (rb**2).sum())
    if denom == 0:
        raise ValueError("spearman: one of the inputs is constant")
    return float((ra * rb).sum() / denom)


def _save_state(path, settings: dict, t: int, params: dict, opt, steps, amps, losses) -> None:
    """Weights, Adam's moments and the record after ``t`` steps, to safetensors (no pickles)."""
    tensors = {f"param.{name}": p.detach().cpu().contiguous() for name, p in params.items()}
    for name, p in params.items():
        st = opt.state.get(p, {})
        for key in ("exp_avg", "exp_avg_sq", "step"):
            if key in st:
                tensors[f"adam.{key}.{name}"] = torch.as_tensor(st[key]).detach().cpu().reshape(-1)
    if steps:
        tensors["record.steps"] = torch.tensor(steps)
        tensors["record.amps"] = torch.stack(amps).cpu().contiguous()
        tensors["record.losses"] = torch.stack(losses).cpu().contiguous()
    save_tensors(path, {**tensors, "step": torch.tensor(t)}, settings)


def _load_state(path, settings: dict, params: dict, opt, dev) -> tuple[int, list, list, list]:
    """Restore what :func:`_save_state` wrote; refuse a state written with other settings."""
    tensors = load_tensors(path, settings)
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(tensors[f"param.{name}"].to(dev))
    for name, p in params.items():
        if f"adam.exp_avg.{name}" in tensors:
            opt.state[p] = {
                "step": tensors[f"adam.step.{name}"].reshape(()).clone(),
                "exp_avg": tensors[f"adam.exp_avg.{name}"].reshape(p.shape).to(dev),
                "exp_avg_sq": tensors[f"adam.exp_avg_sq.{name}"].reshape(p.shape).to(dev),
            }
    steps, amps, losses = [], [], []
    if "record.steps" in tensors:
        steps = tensors["record.steps"].tolist()
        amps = list(tensors["record.amps"].to(dev).unbind(0))
        losses = list(tensors["record.losses"].to(dev).unbind(0))
    return int(tensors["step"]), steps, amps, losses


def train_spectral_ensemble(
    A: Float[Tensor, "n_amp M"],
    k: Float[Tensor, " M"],
    generator: torch.Generator,
    *,
    n_phases: int,
    n_points: int = 200,
    depth: int = 6,
    width: int = 256,
    n_steps: int = 10_000,
    lr: float = 3e-4,
    record_every: int = 50,
    device: torch.device | str = "cpu",
    state_path: str | Path | None = None,
    save_every: int = 1000,
    stop_at: int | None = None,
) -> dict[str, Tensor] | None:
    r"""Train one ReLU MLP (``depth`` hidden layers of ``width``) per (amplitude profile, phase draw), full batch.

    ``A`` holds ``n_amp`` amplitude profiles; each is paired with ``n_phases`` phase draws
    :math:`\varphi_i \sim U(0, 2\pi)`, giving an ensemble of ``E = n_amp * n_phases``
    networks, each fitted by Adam on the mean squared error to its own target. The ensemble
    is one stacked weight dict (``torch.func.vmap``) trained by one Adam on the *sum* of the
    members' losses, so every member receives exactly its own gradient (Adam is elementwise).

    Returns ``steps`` (T,), ``amplitudes`` (T, n_amp, n_phases, M) normalised by ``A``,
    ``phi`` (n_amp, n_phases, M) and ``loss`` (T, n_amp, n_phases).

    A long run can be resumed: with ``state_path`` the weights, Adam's moments and the record
    so far are saved there (safetensors, with the settings in its metadata) every
    ``save_every`` steps, and a later call with the same settings continues from the saved
    step, with the same result as an uninterrupted run. A file written with other settings
    stops the call with an error naming the differing settings. ``stop_at`` saves and returns
    ``None`` after that many steps (a time limit, and the tests' way to interrupt a run).
    """
    if A.ndim != 2 or A.shape[1] != k.shape[0]:
        raise ValueError(f"A must have shape (n_amp, M) with M = len(k) = {k.shape[0]}, got {tuple(A.shape)}")
    if float(k.max()) >= n_points / 2:
        raise ValueError(f"every frequency must be below the Nyquist limit n_points/2 = {n_points / 2}")
    if n_phases < 1 or depth < 1 or width < 1 or n_steps < 1 or record_every < 1 or save_every < 1:
        raise ValueError("n_phases, depth, width, n_steps, record_every and save_every must all be >= 1")
    if stop_at is not None and state_path is None:
        raise ValueError("stop_at needs a state_path to save the interrupted run to")
    dev = torch.device(device)
    n_amp, M = A.shape
    E = n_amp * n_phases
    phi = (2 * math.pi * rng.rand(E, M, generator=generator, dtype=torch.float32)).to(dev)
    A_e = A.to(dev, torch.float32).repeat_interleave(n_phases, dim=0)  # (E, M)
    z = torch.arange(n_points, dtype=torch.float32, device=dev) / n_points
    k = k.to(dev, torch.float32)
    y = (A_e[:, :, None] * torch.sin(2 * math.pi * k[None, :, None] * z[None, None, :] + phi[:, :, None])).sum(1)
    params = init_relu_mlp([1] + [width] * depth + [1], generator, ensemble=E, device=dev)
    for p in params.values():
        p.requires_grad_(True)
    opt = torch.optim.Adam(params.values(), lr=lr)
    steps, amps, losses = [], [], []
    settings = {"A": A.tolist(), "k": k.tolist(), "n_phases": n_phases, "n_points": n_points,
                "depth": depth, "width": width, "n_steps": n_steps, "lr": lr,
                "record_every": record_every, "phi0": float(phi[0, 0])}
    start = 0
    if state_path is not None and Path(state_path).exists():
        start, steps, amps, losses = _load_state(state_path, settings, params, opt, dev)
    for t in progress(range(start, n_steps + 1), desc="spectral bias", initial=start,
                      total=n_steps + 1):
        if state_path is not None and t > start and (t % save_every == 0 or t == stop_at):
            _save_state(state_path, settings, t, params, opt, steps, amps, losses)
        if t == stop_at:
            return None
        f = relu_mlp_ensemble(params, z[:, None])[..., 0]  # (E, n)
        loss_each = ((f - y) ** 2).mean(1)
        if t % record_every == 0 or t == n_steps:
            with torch.no_grad():
                steps.append(t)
                amps.append(fourier_amplitudes(f.detach(), k) / A_e)
                losses.append(loss_each.detach())
        if t == n_steps:
            break
        opt.zero_grad(set_to_none=True)
        loss_each.sum().backward()
        opt.step()
    T = len(steps)
    return {
        "steps": torch.tensor(steps),
        "amplitudes": torch.stack(amps).cpu().reshape(T, n_amp, n_phases, M),
        "phi": phi.cpu().reshape(n_amp, n_phases, M),
        "loss": torch.stack(losses).cpu().reshape(T, n_amp, n_phases),
    }
