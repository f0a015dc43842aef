r"""Linear probes of a transformer trained in context on a fixed representation.

Chapter "Functions versus algorithms: what the algorithmic view buys", section "Benefit 2:
interpretability" (``guo2023transformers``; the encoder is ``bai2023transformers``'s).

A fixed representation :math:`\Phi:\mathbb R^d\to\mathbb R^D`, a random one-hidden-layer ReLU
map drawn once, and a linear read-out drawn afresh for every prompt:

.. math::

    \Phi(x) = \frac{\mathrm{ReLU}(A x - \beta)}{\sqrt{m(\beta)}},\quad A_{jk}\sim\mathcal N(0, 1/d),
    \qquad y_i = w^\top \Phi(x_i) + \sigma\varepsilon_i,\quad w\sim\mathcal N(0, I_D/D),

with :math:`x_i\sim\mathcal N(0, I_d)` and :math:`m(\beta) = \mathbb E\,\mathrm{ReLU}(z-\beta)^2`,
:math:`z\sim\mathcal N(0,1)`. The threshold :math:`\beta = 1` makes each feature active on about
16% of inputs, so that :math:`\Phi` is far from linear in :math:`x` (the best linear fit of
:math:`\mathrm{ReLU}(z - 1)` explains 37% of its variance; of :math:`\mathrm{ReLU}(z)`, 73%).

The Bayes predictor of the query's label is ridge regression *on the representations*,

.. math::

    \hat y_{\rm ridge} = \Phi(x_{N+1})^\top (\Phi_{1:N}^\top\Phi_{1:N} + \lambda I_D)^{-1}
    \Phi_{1:N}^\top y_{1:N}, \qquad \lambda = \sigma^2 D,

so an algorithm that solves the task computes :math:`\Phi(x_i)` at every token and then runs
linear in-context learning on :math:`(\Phi(x_i), y_i)`. Guo et al. find this split in trained
transformers with linear probes: :math:`\Phi(x_i)` is linearly decodable from the lower layers'
hidden states, the ridge prediction from the upper layers' state at the query token.

A prompt is :math:`N + 1` tokens :math:`(x_i, y_i)` with the query's label set to 0
(:class:`~nnapprox.icl.BaiEncoder`). :func:`hidden_states` returns the state after the read-in
(layer 0) and after each of the ``n_layer`` layers; :func:`probe_r2` fits a ridge least-squares
probe on one set of prompts and reports :math:`R^2` on held-out prompts;
:func:`layer_statistics` condenses the two profiles into numbers. The comparisons are the same
encoder untrained (:func:`untrained_model`: its random layers already make part of :math:`\Phi`
linearly decodable, random features of :math:`x`), unused representations :math:`\Phi'` of
the same family (the foil of the finding that training makes :math:`\Phi` decodable), and a
generic random-feature regressor (``A_rf`` of :func:`probe_profile`), whose prediction is built
up across the layers about as much as ridge on :math:`\Phi`.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from .. import rng
from ..icl import baselines as bl
from ..icl.encoder import BaiEncoder
from ..icl.gpt import train_icl

#: Size of the probed encoder (the ``config`` of its checkpoints).
CONFIG: dict[str, int] = dict(d=4, n_layer=5, n_embd=32, n_head=4)

#: Task and training settings per profile; ``"full"`` is the one the checkpoints are trained with.
PROFILES: dict[str, dict[str, Any]] = {
    "full": dict(d=4, D=12, N=24, sigma=0.1, beta=1.0, phi_seed=2310, steps=1000, batch=64,
                 lr=1e-3, warmup=100, decay=True),
}


def representation(d: int, D: int, generator: torch.Generator, *,
                   device: torch.device | str | None = None) -> Float[Tensor, "D d"]:
    r"""The first layer :math:`A` of :math:`\Phi`, entries :math:`\mathcal N(0, 1/d)`."""
    if d < 1 or D < 1:
        raise ValueError(f"need d >= 1 and D >= 1, got d={d}, D={D}")
    return rng.randn(D, d, generator=generator, device=device) / d ** 0.5


def relu_second_moment(beta: float) -> float:
    r""":math:`m(\beta) = \mathbb E\,\mathrm{ReLU}(z-\beta)^2`, in closed form.

    :math:`m(\beta) = (1+\beta^2)\bar\Phi(\beta) - \beta\varphi(\beta)` for
    :math:`z\sim\mathcal N(0,1)`, :math:`\varphi` its density, :math:`\bar\Phi` its upper tail.
    """
    tail = 0.5 * math.erfc(beta / math.sqrt(2))
    return (1 + beta ** 2) * tail - beta * math.exp(-beta ** 2 / 2) / math.sqrt(2 * math.pi)


def phi(X: Float[Tensor, "*batch d"], A: Float[Tensor, "D d"], beta: float = 1.0,
        ) -> Float[Tensor, "*batch D"]:
    r""":math:`\Phi(x) = \mathrm{ReLU}(Ax - \beta)/\sqrt{m(\beta)}` (:math:`\mathbb E\,\Phi_j^2 = 1`
    for a row :math:`\|A_j\| = 1`)."""
    if X.shape[-1] != A.shape[1]:
        raise ValueError(f"X has {X.shape[-1]} coordinates, A expects d={A.shape[1]}")
    return torch.relu(X @ A.T - beta) / relu_second_moment(beta) ** 0.5


def representation_tasks(
    batch: int, N: int, A: Float[Tensor, "D d"], generator: torch.Generator, *, sigma: float = 0.1,
    beta: float = 1.0, device: torch.device | str | None = None,
) -> tuple[Float[Tensor, "batch N_plus_1 d"], Float[Tensor, "batch N_plus_1"],
           Float[Tensor, "batch N_plus_1 D"], Float[Tensor, "batch D"]]:
    r"""Prompts of :math:`N` examples and a query (the last point): ``(X, y, Phi, w)``.

    :math:`x_i\sim\mathcal N(0, I_d)`, :math:`w\sim\mathcal N(0, I_D/D)`,
    :math:`y_i = w^\top\Phi(x_i) + \sigma\varepsilon_i` for every point, the query included.
    """
    if batch < 1 or N < 1 or sigma < 0:
        raise ValueError(f"need batch >= 1, N >= 1, sigma >= 0; got {batch}, {N}, {sigma}")
    D, d = A.shape
    X = rng.randn(batch, N + 1, d, generator=generator, device=device)
    Phi = phi(X, A.to(X.device), beta)  # (B, N+1, D)
    w = rng.randn(batch, D, generator=generator, device=device) / D ** 0.5
    noise = rng.randn(batch, N + 1, generator=generator, device=device)
    y = torch.einsum("bnD,bD->bn", Phi, w) + sigma * noise
    return X, y, Phi, w


def ridge_prediction(Phi: Float[Tensor, "batch N_plus_1 D"], y: Float[Tensor, "batch N_plus_1"],
                     lam: float) -> Float[Tensor, " batch"]:
    r"""Ridge regression on :math:`(\Phi(x_i), y_i)_{i\le N}`, evaluated at
    :math:`\Phi(x_{N+1})`."""
    if lam <= 0:
        raise ValueError(f"the ridge penalty lam must be > 0, got {lam}")
    N = Phi.shape[1] - 1  # icl's ridge penalises (1/2N)||Pw - t||^2 + (lam'/2)||w||^2: lam' = lam/N
    return bl.ridge(Phi[:, :-1], y[:, :-1], Phi[:, -1], lam / N)


def dual_ridge_prediction(Phi: Float[Tensor, "batch N_plus_1 D"], y: Float[Tensor, "batch N_plus_1"],
                          lam: float) -> Float[Tensor, " batch"]:
    r"""The same ridge prediction as :func:`ridge_prediction`, in its dual form
    :math:`\Phi(x_{N+1})^\top\Phi_{1:N}^\top(\Phi_{1:N}\Phi_{1:N}^\top + \lambda I_N)^{-1}y_{1:N}`,
    an :math:`N\times N` solve: cheaper when there are many more features than examples."""
    if lam <= 0:
        raise ValueError(f"the ridge penalty lam must be > 0, got {lam}")
    P, q = Phi[:, :-1], Phi[:, -1]
    K = P @ P.transpose(-1, -2) + lam * torch.eye(P.shape[1], dtype=P.dtype, device=P.device)
    alpha = torch.linalg.solve(K, y[:, :-1, None])  # (batch, N, 1)
    return torch.einsum("bnD,bD,bn->b", P, q, alpha[..., 0])


def ridge_weights(Phi: Float[Tensor, "batch N_plus_1 D"], y: Float[Tensor, "batch N_plus_1"],
                  lam: float) -> Float[Tensor, "batch D"]:
    r"""The ridge coefficients :math:`\hat w = (\Phi_{1:N}^\top\Phi_{1:N} + \lambda I_D)^{-1}
    \Phi_{1:N}^\top y_{1:N}` of :func:`ridge_prediction` (the query is ignored)."""
    if lam <= 0:
        raise ValueError(f"the ridge penalty lam must be > 0, got {lam}")
    N = Phi.shape[1] - 1  # the penalty convention of ridge_prediction
    return bl.ridge_weights(Phi[:, :-1], y[:, :-1], lam / N)


def hidden_states(model: BaiEncoder, X: Float[Tensor, "batch N_plus_1 d"],
                  y: Float[Tensor, "batch N_plus_1"]) -> Float[Tensor, "layer batch N_plus_1 C"]:
    """The residual stream after the read-in (layer 0) and after each layer; the query's label
    is hidden (set to 0), as in :meth:`~nnapprox.icl.BaiEncoder.predict`."""
    if X.shape[-1] != model.cfg.d or X.shape[:2] != y.shape:
        raise ValueError(f"need X of shape (batch, N+1, {model.cfg.d}) and y of shape "
                         f"(batch, N+1); got {tuple(X.shape)}, {tuple(y.shape)}")
    y_in = torch.cat([y[:, :-1], torch.zeros_like(y[:, :1])], dim=1)
    h = model.read_in(torch.cat([X, y_in[..., None]], dim=-1))  # (B, N+1, C)
    states = [h]
    for layer in model.layers:
        h = layer(h)
        states.append(h)
    return torch.stack(states)  # (L+1, B, N+1, C)


def fit_probe(H: Float[Tensor, "n C"], Z: Float[Tensor, "n k"], lam: float = 1e-3,
              ) -> tuple[Float[Tensor, "C k"], Float[Tensor, " k"]]:
    r"""Ridge least squares :math:`\min_{W, b} \|H W + b - Z\|^2 + \lambda n \|W\|^2` (float64)."""
    if H.shape[0] != Z.shape[0] or H.shape[0] < 2:
        raise ValueError(f"need >= 2 paired rows, got H {tuple(H.shape)} and Z {tuple(Z.shape)}")
    H64, Z64 = H.double(), Z.double()
    mu_H, mu_Z = H64.mean(0), Z64.mean(0)
    Hc = H64 - mu_H
    eye = torch.eye(H.shape[1], dtype=torch.float64, device=H.device)
    G = Hc.T @ Hc + lam * H.shape[0] * eye
    W = torch.linalg.solve(G, Hc.T @ (Z64 - mu_Z))  # (C, k)
    return W, mu_Z - mu_H @ W


def r2(pred: Float[Tensor, "n k"], Z: Float[Tensor, "n k"]) -> Float[Tensor, " k"]:
    r""":math:`R^2 = 1 - \sum (z - \hat z)^2 / \sum (z - \bar z)^2` per column."""
    Z = Z.double()
    return 1 - (Z - pred.double()).pow(2).sum(0) / (Z - Z.mean(0)).pow(2).sum(0)


def probe_r2(H_train: Float[Tensor, "n C"], Z_train: Float[Tensor, "n k"],
             H_test: Float[Tensor, "m C"], Z_test: Float[Tensor, "m k"], lam: float = 1e-3,
             ) -> float:
    r"""Held-out :math:`R^2` of a linear probe, pooled over the ``k`` target coordinates.

    :math:`1 - \sum_j \mathrm{SSE}_j / \sum_j \mathrm{SST}_j`: the per-coordinate :math:`R^2`
    averaged with weights :math:`\propto` each coordinate's variance. A plain mean is undefined
    when a rarely active feature :math:`\Phi_j` happens to be 0 on every held-out token.
    """
    W, b = fit_probe(H_train, Z_train, lam)
    Z = Z_test.double()
    sse = (Z - (H_test.double() @ W + b)).pow(2).sum()
    return float(1 - sse / (Z - Z.mean(0)).pow(2).sum())


@torch.no_grad()
def probe_profile(model: BaiEncoder, A: Float[Tensor, "D d"], generator: torch.Generator, *,
                  N: int, sigma: float, beta: float = 1.0, n_train: int = 2000, n_test: int = 1000,
                  lam: float = 1e-3, A_alt: Float[Tensor, "k D d"] | None = None,
                  A_rf: Float[Tensor, "D_rf d"] | None = None,
                  ) -> dict[str, Float[Tensor, "*k layer"]]:
    r"""Held-out :math:`R^2` per layer of two probes: ``"phi"`` (:math:`\Phi(x_i)` at every context
    token, pooled over its :math:`D` coordinates) and ``"ridge"`` (the ridge prediction with
    :math:`\lambda = \sigma^2 D`, at the query token). Probes are fitted on ``n_train`` prompts and
    scored on ``n_test`` others, all drawn here.

    With ``A_alt`` (an independent representation :math:`\Phi'` of the same family) six control
    probes are added, the alternatives a skeptic would name: ``"phi_alt"`` (:math:`\Phi'(x_i)`,
    which the task never uses), ``"ridge_x"`` (ridge with an intercept on the raw inputs,
    :math:`\lambda = 1`: linear in-context learning without the representation), ``"ridge_alt"``
    (ridge on :math:`\Phi'`, :math:`\lambda = \sigma^2 D`: any random features), ``"label"``
    (the query's true label :math:`y_{N+1}`, whose part that the prompt determines is the ridge
    prediction, the Bayes predictor), ``"context_mean"`` (the mean of the context labels, a
    predictor that learns nothing from the inputs) and ``"weights"`` (the ridge coefficients
    :math:`\hat w\in\mathbb R^D`, pooled over coordinates, at the query token: the state an explicit
    ridge solver would hold). ``A_alt`` of shape ``(k, D, d)`` holds :math:`k` independent
    :math:`\Phi'`; then ``"phi_alt"`` and ``"ridge_alt"`` have shape ``(k, layer)``, one row per
    draw (the gain of ridge on :math:`\Phi'` depends on how much a draw overlaps :math:`\Phi`).

    With ``A_rf`` (many random directions, not :math:`A`: a generic random-feature regressor
    with the same cut-off :math:`\beta`), ``"ridge_rf"`` is the probe for ridge on those
    features (:math:`\lambda = 1`), and ``"errors"`` holds the held-out mean squared errors, on
    the query's label, of the encoder itself, of ridge on :math:`\Phi` (the Bayes predictor)
    and of ridge on the random features, in that order."""
    if n_train < 2 or n_test < 2:
        raise ValueError(f"need n_train >= 2 and n_test >= 2, got {n_train}, {n_test}")
    if A_alt is not None and A_alt.shape[-2:] != A.shape or A_alt is not None and A_alt.ndim not in (2, 3):
        raise ValueError(f"A_alt must have the shape of A, {tuple(A.shape)}, or (k, *that shape); "
                         f"got {tuple(A_alt.shape)}")
    if A_rf is not None and (A_rf.ndim != 2 or A_rf.shape[1] != A.shape[1]):
        raise ValueError(f"A_rf must have shape (D_rf, {A.shape[1]}), got {tuple(A_rf.shape)}")
    alts = None if A_alt is None else (A_alt[None] if A_alt.ndim == 2 else A_alt)
    model.eval()
    D = A.shape[0]
    lam_ridge = max(sigma ** 2 * D, 1e-6)
    data = []
    for n in (n_train, n_test):
        X, y, Phi, _ = representation_tasks(n, N, A, generator, sigma=sigma, beta=beta,
                                            device=A.device)
        target = ridge_prediction(Phi.double(), y.double(), lam_ridge)  # (n,)
        extra = {}
        if alts is not None:
            X1 = torch.cat([X, torch.ones_like(X[..., :1])], -1)  # raw inputs with an intercept
            Phi_alt = [phi(X, a, beta) for a in alts]
            extra = {"phi_alt": Phi_alt,
                     "ridge_x": ridge_prediction(X1.double(), y.double(), 1.0)[:, None],
                     "ridge_alt": [ridge_prediction(P.double(), y.double(), lam_ridge)[:, None]
                                   for P in Phi_alt],
                     "label": y[:, -1:].double(),
                     "context_mean": y[:, :-1].double().mean(-1, keepdim=True),
                     "weights": ridge_weights(Phi.double(), y.double(), lam_ridge)}
        if A_rf is not None:
            extra["ridge_rf"] = dual_ridge_prediction(phi(X, A_rf, beta).double(), y.double(), 1.0)[:, None]
        data.append((hidden_states(model, X, y), Phi, target, extra))
    errors = None
    if A_rf is not None:  # on the held-out prompts (the last X, y drawn)
        label = y[:, -1].double()
        with torch.no_grad():
            own = model.predict(X, y).double()
        errors = torch.stack([(own - label).pow(2).mean(), (data[1][2] - label).pow(2).mean(),
                              (data[1][3]["ridge_rf"][:, 0] - label).pow(2).mean()])
    (Hs, Phis, rs, es), (Ht, Phit, rt, et) = data
    C = Hs.shape[-1]
    out = {"phi": [], "ridge": [], **{k: [] for k in es}}
    if alts is not None:
        out["phi_alt"] = [[] for _ in alts]
        out["ridge_alt"] = [[] for _ in alts]
    for ell in range(Hs.shape[0]):
        ctx_s = Hs[ell, :, :-1].reshape(-1, C)  # (n_train N, C): every context token
        ctx_t = Ht[ell, :, :-1].reshape(-1, C)
        out["phi"].append(probe_r2(ctx_s, Phis[:, :-1].reshape(-1, D), ctx_t,
                                   Phit[:, :-1].reshape(-1, D), lam))
        out["ridge"].append(probe_r2(Hs[ell, :, -1], rs[:, None], Ht[ell, :, -1], rt[:, None], lam))
        if alts is not None:
            for j in range(len(alts)):
                out["phi_alt"][j].append(probe_r2(ctx_s, es["phi_alt"][j][:, :-1].reshape(-1, D), ctx_t,
                                                  et["phi_alt"][j][:, :-1].reshape(-1, D), lam))
                out["ridge_alt"][j].append(probe_r2(Hs[ell, :, -1], es["ridge_alt"][j], Ht[ell, :, -1],
                                                    et["ridge_alt"][j], lam))
            for key in ("ridge_x", "label", "context_mean", "weights"):  # at the query token
                out[key].append(probe_r2(Hs[ell, :, -1], es[key], Ht[ell, :, -1], et[key], lam))
        if "ridge_rf" in es:
            out["ridge_rf"].append(probe_r2(Hs[ell, :, -1], es["ridge_rf"], Ht[ell, :, -1], et["ridge_rf"], lam))
    result = {k: torch.tensor(v) for k, v in out.items()}
    if errors is not None:
        result["errors"] = errors
    if A_alt is not None and A_alt.ndim == 2:  # one draw: one row, as the other probes
        result["phi_alt"], result["ridge_alt"] = result["phi_alt"][0], result["ridge_alt"][0]
    return result


def task_representation(settings: dict[str, Any], device: torch.device | str | None = None
                        ) -> Float[Tensor, "D d"]:
    """The fixed :math:`A` of a profile, drawn from its own generator seeded with ``phi_seed``."""
    g = torch.Generator().manual_seed(settings["phi_seed"])
    return representation(settings["d"], settings["D"], g, device=device)


def train(model: nn.Module, settings: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Adam on the query's squared error over fresh prompts; one loss per step (a checkpoint's
    ``train``)."""
    s = settings
    A = task_representation(s)

    def sample(b: int, g: torch.Generator) -> tuple[Tensor, Tensor]:
        return representation_tasks(b, s["N"], A, g, sigma=s["sigma"], beta=s["beta"])[:2]

    return train_icl(model, sample, n_steps=s["steps"], batch=s["batch"], lr=s["lr"],
                     warmup=s["warmup"], decay=s["decay"], generator=generator, desc="probes")


def layer_statistics(r2_phi: Float[Tensor, " layer"], r2_ridge: Float[Tensor, " layer"],
                     ) -> dict[str, float]:
    r"""The split "representation below, linear ICL above" as numbers, for layers :math:`0..L`.

    Lower layers are :math:`1..\lfloor L/2\rfloor` (layer 0 is the read-in, linear in the token).
    ``phi_lower``: best :math:`R^2(\Phi)` among them; ``phi_gain``: that minus layer 0's;
    ``ridge_top``: :math:`R^2` of the ridge prediction at layer :math:`L`; ``ridge_gain``: that
    minus the best among the lower layers; ``phi_peak``, ``ridge_peak``: the layers of the maxima.
    """
    L = r2_phi.shape[0] - 1
    if r2_ridge.shape != r2_phi.shape or L < 2:
        raise ValueError(f"need two profiles of the same length >= 3, got {tuple(r2_phi.shape)}, "
                         f"{tuple(r2_ridge.shape)}")
    low = slice(1, L // 2 + 1)
    phi_lower = float(r2_phi[low].max())
    return dict(phi_lower=phi_lower, phi_gain=phi_lower - float(r2_phi[0]),
                ridge_top=float(r2_ridge[L]), ridge_gain=float(r2_ridge[L] - r2_ridge[low].max()),
                phi_peak=int(r2_phi.argmax()), ridge_peak=int(r2_ridge.argmax()))


def untrained_model(seed: int, config: dict[str, int] | None = None) -> BaiEncoder:
    """The foil: the encoder exactly as a checkpoint of this ``seed`` starts training.

    :mod:`nnapprox.checkpoints` builds a model right after ``torch.manual_seed(seed)``; this
    does the same inside :func:`torch.random.fork_rng`, so torch's global state is left as it was.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BaiEncoder(**(CONFIG if config is None else config))
