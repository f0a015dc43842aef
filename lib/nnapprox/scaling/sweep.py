r"""Train a whole sweep of model sizes and data sizes at once.

Chapter *Neural scaling laws*, section "A real corpus, offline".

A scaling-law study trains :math:`M` models (widths :math:`W_m`, data sizes :math:`D_m`).
Small models cannot keep an accelerator busy one at a time, so the sweep is trained as
*one* model: every weight gets a leading model axis, widths are padded to
:math:`W_{\max}` and the padded hidden units are masked to zero,

.. math::  h_m = \mathrm{ReLU}(W_{1,m} e_m + b_{1,m}) \odot \mathbb 1[j < W_m], \qquad
           \mathcal L = \sum_{m=1}^{M} \mathcal L_m ,

so that :math:`\partial \mathcal L / \partial \theta_m = \partial \mathcal L_m / \partial \theta_m`
and Adam, being elementwise, updates every model exactly as if it trained alone (masked
weights get zero gradients, hence zero Adam updates). That is the ``"batched"`` strategy of
:func:`train_sweep`, the one used on accelerators. On a CPU, padding costs arithmetic and
one padded model was slower than a plain loop over the models, so there the models of equal
width are stacked instead (``"by_width"``: one stacked model per distinct width, no padding);
:func:`sweep_strategy` holds the rule. Model :math:`m` sees only the first
:math:`D_m` bytes of the training stream. The test loss is evaluated every
``eval_every`` steps and the best value is kept (early stopping, as for the data-limited
runs of ``kaplan2020scaling``).

:func:`train_sweep_loop` trains the same models one after the other with
:class:`~nnapprox.scaling.byte_lm.ByteMLP`: the readable reference, tested to agree in fp64.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float, Int, UInt8
from torch import Tensor

from ..progress import progress
from .byte_lm import VOCAB, ByteMLP, make_contexts, non_embedding_params
from nnapprox import rng


def init_sweep(
    widths: list[int], context: int, d_emb: int, generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> tuple[dict[str, Tensor], Float[Tensor, "M W_max"]]:
    """Stacked, padded initial weights (PyTorch's default ``nn.Linear``/``nn.Embedding`` scales) and the width mask."""
    if not widths or min(widths) < 1:
        raise ValueError(f"widths must be a non-empty list of positive integers, got {widths}")
    M, W_max, fan_in = len(widths), max(widths), context * d_emb
    width = torch.tensor(widths, dtype=dtype).view(M, 1)
    mask = (torch.arange(W_max, dtype=dtype).view(1, W_max) < width).to(dtype)

    def uniform(shape: tuple[int, ...], bound: Tensor | float) -> Tensor:
        return (2 * rng.rand(shape, generator=generator, dtype=dtype) - 1) * bound

    params = {
        "E": rng.randn((M, VOCAB, d_emb), generator=generator, dtype=dtype),
        "W_1": uniform((M, fan_in, W_max), 1 / math.sqrt(fan_in)) * mask.unsqueeze(1),
        "b_1": uniform((M, W_max), 1 / math.sqrt(fan_in)) * mask,
        "W_2": uniform((M, W_max, VOCAB), 1 / width.sqrt().unsqueeze(-1)) * mask.unsqueeze(-1),
        "b_2": uniform((M, VOCAB), 1 / width.sqrt()),
    }
    return params, mask


def sweep_hidden(
    params: dict[str, Tensor], mask: Float[Tensor, "M W_max"], x: Int[Tensor, "M batch context"]
) -> Float[Tensor, "M batch W_max"]:
    """Hidden representations :math:`h_m` of all ``M`` models at once (padded units are 0)."""
    M, B, k = x.shape
    e = torch.gather(params["E"], 1, x.reshape(M, B * k, 1).expand(-1, -1, params["E"].shape[-1]))
    e = e.reshape(M, B, -1)  # (M, batch, context * d_emb)
    return torch.relu(torch.baddbmm(params["b_1"].unsqueeze(1), e, params["W_1"])) * mask.unsqueeze(1)


def sweep_logits(
    params: dict[str, Tensor], mask: Float[Tensor, "M W_max"], x: Int[Tensor, "M batch context"]
) -> Float[Tensor, "M batch vocab"]:
    """Forward pass of all ``M`` models at once."""
    h = sweep_hidden(params, mask, x)  # (M, batch, W_max)
    return torch.baddbmm(params["b_2"].unsqueeze(1), h, params["W_2"])  # (M, batch, vocab)


def sample_positions(
    D: list[int], n_steps: int, batch: int, context: int, generator: torch.Generator
) -> Int[Tensor, "n_steps M batch"]:
    """Start positions of every training batch: model ``m`` draws uniformly from its first ``D_m`` bytes.

    The uniform draws are shared by all models (common random numbers): models with the
    same ``D`` see the same batches, so differences between widths are not blurred by
    differences in the data order.
    """
    if min(D) <= context:
        raise ValueError(f"every data size must exceed the context {context}, got {D}")
    limit = torch.tensor([d - context for d in D], dtype=torch.float64).view(1, -1, 1)
    u = rng.rand((n_steps, 1, batch), generator=generator, dtype=torch.float64)  # (n_steps, 1, batch)
    return (u * limit).long()  # (n_steps, M, batch)


def lr_schedule(step: int, n_steps: int, lr: float) -> float:
    """Linear warm-up over the first 5% of steps, then cosine decay to ``lr / 10``."""
    warm = max(1, n_steps // 20)
    if step < warm:
        return lr * (step + 1) / warm
    t = (step - warm) / max(1, n_steps - warm)
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * t)))


def _check(widths: list[int], D: list[int], train: Tensor, eval_every: int, n_steps: int) -> None:
    if len(widths) != len(D):
        raise ValueError(f"one data size per model: got {len(widths)} widths and {len(D)} data sizes")
    if max(D) > len(train):
        raise ValueError(f"largest data size {max(D)} exceeds the training stream ({len(train)} bytes)")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")
    if n_steps < eval_every:
        raise ValueError(f"n_steps ({n_steps}) must be >= eval_every ({eval_every}): no test loss would be recorded")


STRATEGIES = ("auto", "batched", "by_width")


def sweep_strategy(device: torch.device | str) -> str:
    """The strategy that ``strategy="auto"`` uses on ``device``: ``"by_width"`` on a CPU, ``"batched"`` elsewhere.

    ``"batched"`` trains all models as one padded model: one kernel launch per operation for
    the whole sweep, which is what keeps an accelerator busy. On a CPU the padding is pure
    waste (every model computes at the largest width) and launches are cheap, so one padded
    model ran at 0.7-0.9x the speed of a plain loop over the models (``tests/bench_scaling.py``,
    1 thread). ``"by_width"`` stacks only the models of equal width (no padding): as many
    launches per step as there are distinct widths, no wasted arithmetic; it ran at 1.3-1.4x
    the loop's speed (README, benchmark table). The rule depends on the device type only,
    never on a timing taken at run time, so a run's numbers (which differ between strategies
    by float32 rounding) do not depend on the load of the machine it runs on.
    """
    return "by_width" if torch.device(device).type == "cpu" else "batched"


def _train_stacked(
    params: dict[str, Tensor],
    mask: Float[Tensor, "M W"],
    positions: Int[Tensor, "n_steps M batch"],
    train: UInt8[Tensor, " n_train"],
    x_test: Int[Tensor, "n_eval context"],
    y_test: Int[Tensor, " n_eval"],
    *,
    n_steps: int, batch: int, lr: float, context: int, eval_every: int, eval_chunk: int,
    device: torch.device, desc: str,
) -> tuple[Float[Tensor, "n_evals M"], dict[str, Tensor]]:
    """Train the stacked models ``params`` (leading model axis) together; return their test-loss curves
    and their final weights (on the CPU)."""
    params = {k: v.to(device).requires_grad_() for k, v in params.items()}
    mask = mask.to(device)
    M, n_eval = mask.shape[0], len(y_test)
    x_rep = x_test.unsqueeze(0).expand(M, -1, -1)
    opt = torch.optim.Adam(params.values(), lr=lr, foreach=False, fused=device.type in ("cpu", "cuda"))
    curves = []
    for step in progress(range(n_steps), desc=desc):
        for group in opt.param_groups:
            group["lr"] = lr_schedule(step, n_steps, lr)
        x, y = make_contexts(train, positions[step].to(device), context)  # (M, batch, context), (M, batch)
        logits = sweep_logits(params, mask, x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), reduction="none")
        loss.view(M, batch).mean(dim=1).sum().backward()  # sum over models of each model's mean loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        if (step + 1) % eval_every == 0:
            with torch.no_grad():  # test loss in chunks of contexts: (M, chunk, width) activations, not (M, n_eval, width)
                ce = torch.zeros(M, dtype=torch.float64, device=device)
                for s in range(0, n_eval, eval_chunk):
                    logits = sweep_logits(params, mask, x_rep[:, s:s + eval_chunk])
                    y_s = y_test[s:s + eval_chunk]
                    ce += torch.nn.functional.cross_entropy(
                        logits.reshape(-1, VOCAB), y_s.repeat(M), reduction="none").view(M, -1).double().sum(dim=1)
            curves.append((ce / n_eval).cpu())
    return torch.stack(curves), {k: v.detach().cpu() for k, v in params.items()}


def train_sweep(
    train: UInt8[Tensor, " n_train"],
    test: UInt8[Tensor, " n_test"],
    widths: list[int],
    D: list[int],
    generator: torch.Generator,
    *,
    n_steps: int = 1000,
    batch: int = 64,
    lr: float = 3e-3,
    context: int = 8,
    d_emb: int = 16,
    eval_every: int = 100,
    n_eval: int = 4096,
    eval_chunk: int = 8192,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    strategy: str = "auto",
    return_params: bool = False,
) -> dict[str, Tensor]:
    """Train every model of the sweep; return ``N``, ``best`` and ``final`` test losses and the ``curves``.

    With ``return_params=True`` the result also holds the final weights, ``params`` (stacked and
    padded to the largest width as in :func:`init_sweep`, on the CPU), and the width ``mask``:
    ``sweep_hidden(out["params"], out["mask"], x)`` gives every model's hidden representation.

    ``strategy`` says how the models are grouped, not what they compute: ``"batched"`` trains
    all of them as one padded model, ``"by_width"`` trains one stacked model per distinct width
    (no padding), ``"auto"`` picks :func:`sweep_strategy` of ``device``. Every strategy gives
    each model the same initial weights, batches and test contexts, and Adam updates each
    model as if it trained alone, so the strategies agree up to floating-point rounding (the
    unit tests check 1e-12 in float64 against :func:`train_sweep_loop`).

    The test loss is computed ``eval_chunk`` contexts at a time: the full profile's 40 models of
    width up to 2048 on 65,536 test contexts would otherwise hold 21 GB of hidden activations
    at once (a CPU smoke run of the full profile was killed for memory there).

    ``curves`` has shape ``(n_evals, M)`` (test loss in nats per byte at steps
    ``eval_every, 2 eval_every, ...``). Random draws (initialisation, batches, test
    positions) come from ``generator`` in a fixed order shared with :func:`train_sweep_loop`.
    """
    _check(widths, D, train, eval_every, n_steps)
    if eval_chunk < 1:
        raise ValueError(f"eval_chunk must be a positive number of test contexts, got {eval_chunk}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}: valid strategies are {STRATEGIES}")
    device = torch.device(device)
    chosen = sweep_strategy(device) if strategy == "auto" else strategy
    params, mask = init_sweep(widths, context, d_emb, generator, dtype)
    positions = sample_positions(D, n_steps, batch, context, generator)
    test_pos = rng.randint(0, len(test) - context, (n_eval,), generator=generator)
    train, test = train.to(device), test.to(device)
    x_test, y_test = make_contexts(test, test_pos.to(device), context)
    M = len(widths)
    if chosen == "batched":
        groups = [list(range(M))]
    else:  # one group per distinct width, narrowest first
        groups = [[m for m in range(M) if widths[m] == w] for w in sorted(set(widths))]
    curves_t = torch.empty(n_steps // eval_every, M, dtype=torch.float64)
    for idx in groups:
        W = max(widths[m] for m in idx)  # the group's padded width (its only width when by_width)
        sub = {"E": params["E"][idx], "W_1": params["W_1"][idx, :, :W], "b_1": params["b_1"][idx, :W],
               "W_2": params["W_2"][idx, :W, :], "b_2": params["b_2"][idx]}
        desc = f"sweep of {M} models" if chosen == "batched" else f"{len(idx)} models of width {W}"
        curves_t[:, idx], trained = _train_stacked(
            sub, mask[idx, :W], positions[:, idx], train, x_test, y_test, n_steps=n_steps, batch=batch,
            lr=lr, context=context, eval_every=eval_every, eval_chunk=eval_chunk, device=device, desc=desc)
        if return_params:  # write the group's trained weights back into the padded layout
            params["E"][idx], params["b_2"][idx] = trained["E"], trained["b_2"]
            params["W_1"][idx, :, :W], params["b_1"][idx, :W] = trained["W_1"], trained["b_1"]
            params["W_2"][idx, :W, :] = trained["W_2"]
    N = torch.tensor([non_embedding_params(w, context, d_emb) for w in widths], dtype=torch.float64)
    out = {"N": N, "D": torch.tensor(D, dtype=torch.float64), "best": curves_t.min(dim=0).values,
           "final": curves_t[-1], "curves": curves_t}
    if return_params:
        out["params"], out["mask"] = params, mask
    return out


def train_sweep_loop(
    train: UInt8[Tensor, " n_train"],
    test: UInt8[Tensor, " n_test"],
    widths: list[int],
    D: list[int],
    generator: torch.Generator,
    *,
    n_steps: int = 1000,
    batch: int = 64,
    lr: float = 3e-3,
    context: int = 8,
    d_emb: int = 16,
    eval_every: int = 100,
    n_eval: int = 4096,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> dict[str, Tensor]:
    """Reference: the same sweep as :func:`train_sweep`, one plain :class:`ByteMLP` after the other."""
    _check(widths, D, train, eval_every, n_steps)
    params, _ = init_sweep(widths, context, d_emb, generator, dtype)
    positions = sample_positions(D, n_steps, batch, context, generator)
    test_pos = rng.randint(0, len(test) - context, (n_eval,), generator=generator)
    device = torch.device(device)
    train, test = train.to(device), test.to(device)
    x_test, y_test = make_contexts(test, test_pos.to(device), context)
    curves = torch.zeros(n_steps // eval_every, len(widths), dtype=torch.float64)
    for m, W in enumerate(progress(widths, desc="sweep, one model at a time")):
        model = ByteMLP(W, context, d_emb).to(device=device, dtype=dtype)
        with torch.no_grad():  # same initial weights as model m of the batched sweep
            model.E.weight.copy_(params["E"][m])
            model.W_1.weight.copy_(params["W_1"][m, :, :W].T)
            model.W_1.bias.copy_(params["b_1"][m, :W])
            model.W_2.weight.copy_(params["W_2"][m, :W, :].T)
            model.W_2.bias.copy_(params["b_2"][m])
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        for step in range(n_steps):
            for group in opt.param_groups:
                group["lr"] = lr_schedule(step, n_steps, lr)
            x, y = make_contexts(train, positions[step, m].to(device), context)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if (step + 1) % eval_every == 0:
                with torch.no_grad():
                    curves[(step + 1) // eval_every - 1, m] = torch.nn.functional.cross_entropy(model(x_test), y_test)
    N = torch.tensor([non_embedding_params(w, context, d_emb) for w in widths], dtype=torch.float64)
    return {"N": N, "D": torch.tensor(D, dtype=torch.float64), "best": curves.min(dim=0).values,
            "final": curves[-1], "curves": curves}
