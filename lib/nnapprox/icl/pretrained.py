r"""The chapter's trained transformers: settings, training functions and registered checkpoints.

Chapter "In-context learning as gradient descent", part II "What training finds". Each entry of
:data:`SETTINGS` is the *full profile* of one model: the chapter's full profile trains it from
scratch with :func:`nnapprox.checkpoints.train`, and the committed checkpoint (``make
checkpoints``) was produced by the same call, so the quick profile can evaluate the committed
weights on freshly drawn prompts. The settings are chosen so that each model trains in under
an hour of one CPU thread (the manifest records each run); the papers train far longer
(Garg et al.: 500,000 steps of a 12-layer, 256-wide GPT-2 at batch 64; Bai et al.: 12-layer
encoders; Raventós et al.: 500,000 steps of an 8-layer, 128-wide GPT-2).

In every setting :math:`d` is the input dimension. For ``icl_garg``, ``N`` is the number of
points per prompt (every prefix is a prediction); for the other models a prompt has ``N``
in-context examples and one query, :math:`N + 1` points.

=====================  ==================================================================
checkpoint             model, task distribution, loss
=====================  ==================================================================
``icl_garg``           :class:`~nnapprox.icl.GPT` (3 layers, width 64, 2 heads) on
                       noiseless linear regression, :math:`d = 5`, :math:`N = 11`,
                       :math:`w\sim\mathcal N(0, I)`; squared error averaged over all
                       prefixes (Garg et al.)
``icl_bai_noise``      :class:`~nnapprox.icl.BaiEncoder` (4 post-LN layers, width 64, 4
                       heads) on linear regression with :math:`\sigma \in \{0.1, 0.5\}` drawn
                       per prompt, :math:`d = 5`, :math:`N = 10`,
                       :math:`w\sim\mathcal N(0, I/d)`; plain squared error of the query
                       (Bai et al.'s noise-level selection)
``icl_bai_regcls``     the same encoder on regression (:math:`\sigma = 0.1`) and sign
                       classification; one Adam step on each task in turn, squared error for
                       regression and logistic loss for classification (Bai et al.'s pre-ICL
                       test)
``icl_relu_teacher``   :class:`~nnapprox.icl.GPT` (4 layers, width 64, 4 heads) on random
                       two-layer ReLU teachers with 4 hidden units, :math:`d = 4`,
                       :math:`N = 24`; squared error over every prefix (Wu et al.'s
                       numerical study)
``icl_tasks_4``        the same GPT on noisy linear tasks drawn uniformly from a fixed pool
                       of :math:`2^2` tasks :math:`w_m\sim\mathcal N(0, I)`, :math:`d = 8`,
                       :math:`N = 16`, :math:`\sigma = 0.5`; squared error over every prefix
                       (Raventós et al.'s task diversity)
``icl_tasks_65536``    the same with a pool of :math:`2^{16}` tasks
=====================  ==================================================================
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..checkpoints import Spec
from ..progress import progress
from .encoder import BaiEncoder
from .gpt import GPT, GPTConfig, adam, train_icl
from .tasks import linear_tasks, mixed_noise_tasks, pool_tasks, relu_teacher_tasks, sign_tasks, task_pool

#: Full-profile settings of each trained model (the committed checkpoints were trained with them).
SETTINGS: dict[str, dict[str, Any]] = {
    "icl_garg": dict(d=5, N=11, steps=10_000, batch=64, lr=1e-3, warmup=500, decay=True),
    "icl_bai_noise": dict(d=5, N=10, sigmas=[0.1, 0.5], steps=12_000, batch=128, lr=1e-3, warmup=500,
                          decay=True),
    "icl_bai_regcls": dict(d=5, N=10, sigma=0.1, steps=6_000, batch=128, lr=1e-3, warmup=500, decay=True),
    "icl_relu_teacher": dict(d=4, N=24, width=4, steps=20_000, batch=64, lr=1e-3, warmup=500, decay=True),
    "icl_tasks_4": dict(d=8, N=16, sigma=0.5, n_tasks=4, pool_seed=99, steps=30_000, batch=64, lr=1e-3,
                        warmup=500, decay=True),
    "icl_tasks_65536": dict(d=8, N=16, sigma=0.5, n_tasks=65_536, pool_seed=65631, steps=30_000, batch=64,
                            lr=1e-3, warmup=500, decay=True),
}

GARG_CONFIG = dict(d=5, n_layer=3, n_embd=64, n_head=2, n_positions=22)
ENCODER_CONFIG = dict(d=5, n_layer=4, n_embd=64, n_head=4)
RELU_TEACHER_CONFIG = dict(d=4, n_layer=4, n_embd=64, n_head=4, n_positions=50)
TASKS_CONFIG = dict(d=8, n_layer=4, n_embd=64, n_head=4, n_positions=34)


def gpt_model(**config: int) -> GPT:
    """:class:`GPT` from the fields of :class:`GPTConfig` (the form a checkpoint spec needs)."""
    return GPT(GPTConfig(**config))


def train_garg(model: nn.Module, s: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Garg et al.'s objective: noiseless linear tasks, squared error over every prefix."""
    return train_icl(model, lambda b, g: linear_tasks(b, s["N"], s["d"], g)[:2], n_steps=s["steps"],
                     batch=s["batch"], lr=s["lr"], warmup=s["warmup"], decay=s["decay"], generator=generator,
                     desc="icl_garg")


def train_noise(model: nn.Module, s: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Noise levels drawn per prompt, plain squared error of the query (no weighting)."""
    def sample(b: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return mixed_noise_tasks(b, s["N"] + 1, s["d"], g, sigmas=s["sigmas"], w_scale=s["d"] ** -0.5)[:2]

    return train_icl(model, sample, n_steps=s["steps"], batch=s["batch"], lr=s["lr"], warmup=s["warmup"],
                     decay=s["decay"], generator=generator, desc="icl_bai_noise")


def train_regcls(model: nn.Module, s: dict[str, Any], generator: torch.Generator) -> list[float]:
    """One Adam step on a regression batch (squared error), then one on a classification batch (logistic loss).

    As in Bai et al.'s code, a training step takes one optimiser step per task in turn. The
    returned curve holds, per step, the mean of the two losses.
    """
    opt = adam(model.parameters(), s["lr"])
    n = 2 * s["steps"]

    def rate(t: int) -> float:
        return min(1.0, (t + 1) / max(2 * s["warmup"], 1)) * (1 - t / n if s["decay"] else 1.0)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    losses: list[float] = []
    model.train()
    for _ in progress(range(s["steps"]), desc="icl_bai_regcls"):
        pair = []
        for classification in (False, True):
            if classification:
                X, y, _ = sign_tasks(s["batch"], s["N"] + 1, s["d"], generator, w_scale=s["d"] ** -0.5)
                loss = F.softplus(-y[:, -1] * model.predict(X, y)).mean()
            else:
                X, y, _ = linear_tasks(s["batch"], s["N"] + 1, s["d"], generator, sigma=s["sigma"],
                                       w_scale=s["d"] ** -0.5)
                loss = F.mse_loss(model.predict(X, y), y[:, -1])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            pair.append(loss.detach())
        losses.append(torch.stack(pair).mean())
    model.eval()
    return torch.stack(losses).tolist() if losses else []


def train_relu_teacher(model: nn.Module, s: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Prompts from random two-layer ReLU teachers (Wu et al.'s numerical study), squared error over every prefix."""
    return train_icl(model, lambda b, g: relu_teacher_tasks(b, s["N"] + 1, s["d"], g, width=s["width"])[:2],
                     n_steps=s["steps"], batch=s["batch"], lr=s["lr"], warmup=s["warmup"], decay=s["decay"],
                     generator=generator, desc="icl_relu_teacher")


def pool(s: dict[str, Any]) -> torch.Tensor:
    """The finite task pool of a task-diversity checkpoint: drawn from ``pool_seed``, part of its task distribution."""
    return task_pool(s["n_tasks"], s["d"], torch.Generator().manual_seed(s["pool_seed"]))


def train_tasks(model: nn.Module, s: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Linear tasks drawn uniformly from a pool of ``n_tasks`` (Raventos et al.), squared error over every prefix."""
    tasks = pool(s)
    return train_icl(model, lambda b, g: pool_tasks(b, s["N"] + 1, tasks, g, sigma=s["sigma"])[:2],
                     n_steps=s["steps"], batch=s["batch"], lr=s["lr"], warmup=s["warmup"], decay=s["decay"],
                     generator=generator, desc=f"icl_tasks_{s['n_tasks']}")


#: Registered with :mod:`nnapprox.checkpoints` (see its docstring for the contract).
CHECKPOINTS: dict[str, Spec] = {
    "icl_garg": Spec("icl", gpt_model, GARG_CONFIG, train_garg, SETTINGS["icl_garg"], seed=0),
    "icl_bai_noise": Spec("icl", BaiEncoder, ENCODER_CONFIG, train_noise, SETTINGS["icl_bai_noise"], seed=0),
    "icl_bai_regcls": Spec("icl", BaiEncoder, ENCODER_CONFIG, train_regcls, SETTINGS["icl_bai_regcls"], seed=0),
    "icl_relu_teacher": Spec("icl", gpt_model, RELU_TEACHER_CONFIG, train_relu_teacher,
                             SETTINGS["icl_relu_teacher"], seed=0),
    "icl_tasks_4": Spec("icl", gpt_model, TASKS_CONFIG, train_tasks, SETTINGS["icl_tasks_4"], seed=0),
    "icl_tasks_65536": Spec("icl", gpt_model, TASKS_CONFIG, train_tasks, SETTINGS["icl_tasks_65536"], seed=0),
}
