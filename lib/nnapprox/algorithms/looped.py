r"""Looped transformers: one weight-tied block applied :math:`T` times runs :math:`T` steps.

Chapter "Functions versus algorithms", section "Looped transformers run iterative algorithms".

**Exact construction** (``vonoswald2023transformers``). With the gradient-step weights of
:func:`nnapprox.icl.lsa.gd_weights`, one linear-self-attention block maps the tokens
:math:`e_j = (x_j, r_j)` to those of one step of gradient descent on
:math:`\frac1{2N}\|Xw - y\|^2`; applying the *same* block :math:`T` times,

.. math:: E_{t+1} = \mathrm{LSA}_\eta(E_t), \qquad \hat y_T = -r_{N+1}(E_T) = w_T^\top x_{N+1},

gives :math:`T` steps, and :math:`w_T \to \hat w_{\rm LS}` as :math:`T\to\infty` whenever
:math:`0 < \eta < 2/\lambda_{\max}(X^\top X/N)` and :math:`X^\top X` is invertible
(:func:`looped_lsa_predictions`, :func:`gd_step_bound`).

**Trained looped transformer** (``yang2024looped``). Tokens :math:`z_i = (x_i, y_i)` (queries
:math:`(x, 0)`) are read in linearly, :math:`P = z W_{\rm in} + b_{\rm in}`, and one pre-LayerNorm
transformer block :math:`M_\theta` (softmax attention whose keys and values are the context
tokens, an optional MLP, a final LayerNorm) is looped with *input injection*,

.. math:: Y_0 = 0, \qquad Y_{t+1} = M_\theta(Y_t + P), \qquad
          \hat y_t = Y_t W_{\rm out} + b_{\rm out} \text{ at the queries}.

Training minimises the squared error averaged over a window of loop counts,
:math:`\frac1{|W|}\sum_{t\in W}(\hat y_t - y)^2` with :math:`W = \{T-\Delta+1, \dots, T\}`
(Yang et al.: :math:`\Delta = 15`, :math:`T = 30` for linear regression; here :math:`T = 4`
and :math:`\Delta = T`). The foil drops
input injection only (:math:`Y_0 = P`, :math:`Y_{t+1} = M_\theta(Y_t)`) and keeps the same window
loss, so that the comparison isolates injection. :class:`LoopedTransformer`
holds ``n_runs`` independent models stacked along a leading axis, trained as one program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from nnapprox import rng
from nnapprox.icl.lsa import LSAWeights, lsa_layer, lsa_tokens
from nnapprox.icl import baselines as bl
from nnapprox.icl.tasks import linear_tasks

from ..progress import progress


# --- exact construction -------------------------------------------------------------------


def looped_apply(
    weights: LSAWeights, E: Float[Tensor, "batch n D"], T: int
) -> Float[Tensor, "T_plus_1 batch n D"]:
    r"""Apply the same LSA block :math:`T` times; all states :math:`E_0, \dots, E_T`."""
    if T < 0:
        raise ValueError(f"the number of loops T must be >= 0, got {T}")
    states = [E]
    for _ in range(T):
        states.append(lsa_layer(states[-1], weights["W_Q"], weights["W_K"], weights["W_V"]))
    return torch.stack(states)


def looped_lsa_predictions(
    weights: LSAWeights, X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"],
    x_query: Float[Tensor, "batch d"], T: int,
) -> Float[Tensor, "T_plus_1 batch"]:
    r"""Predictions :math:`\hat y_t = -r_{N+1}(E_t)` after :math:`t = 0..T` loops."""
    return -looped_apply(weights, lsa_tokens(X, y, x_query), T)[:, :, -1, -1]


def gd_step_bound(X: Float[Tensor, "batch N d"]) -> Float[Tensor, " batch"]:
    r"""The largest stable step :math:`2/\lambda_{\max}(X^\top X/N)` of GD, per prompt."""
    H = X.transpose(1, 2) @ X / X.shape[1]
    return 2.0 / torch.linalg.eigvalsh(H)[:, -1]


# --- trained looped transformer ------------------------------------------------------------


def _layer_norm(z: Tensor, gain: Tensor, bias: Tensor) -> Tensor:
    """LayerNorm over the last axis with per-run gain and bias of shape (runs, D)."""
    return F.layer_norm(z, z.shape[-1:]) * gain[:, None, None] + bias[:, None, None]


class LoopedTransformer(nn.Module):
    r"""``n_runs`` looped transformers (module docstring) stacked along a leading run axis.

    The config is JSON-serialisable: ``d`` (input dimension), ``width`` (:math:`D`), ``n_runs``,
    ``injection`` (add :math:`P` at every loop, or start from :math:`Y_0 = P`) and ``mlp`` (an
    MLP sublayer after the attention; the quick profile leaves it out). Single-head attention;
    a final LayerNorm ends the block, as GPT-2's ``ln_f`` ends Yang et al.'s looped backbone.
    """

    def __init__(self, d: int, width: int = 16, n_runs: int = 1, injection: bool = True,
                 mlp: bool = False, generator: torch.Generator | None = None,
                 device: torch.device | str = "cpu") -> None:
        super().__init__()
        if d < 1 or width < 1 or n_runs < 1:
            raise ValueError(f"need d, width, n_runs >= 1, got d={d}, width={width}, "
                             f"n_runs={n_runs}")
        self.config = {"d": d, "width": width, "n_runs": n_runs, "injection": bool(injection),
                       "mlp": bool(mlp)}
        R, D = n_runs, width

        def w(*shape: int, fan_in: int) -> nn.Parameter:
            draw = rng.randn(R, *shape, generator=generator, device=device)
            return nn.Parameter(draw / math.sqrt(fan_in))

        def const(value: float, *shape: int) -> nn.Parameter:
            return nn.Parameter(torch.full((R, *shape), value, device=device))

        self.W_in, self.b_in = w(d + 1, D, fan_in=d + 1), const(0.0, D)
        self.ln1_g, self.ln1_b = const(1.0, D), const(0.0, D)
        self.lnf_g, self.lnf_b = const(1.0, D), const(0.0, D)
        self.W_Q, self.W_K, self.W_V, self.W_O = (w(D, D, fan_in=D) for _ in range(4))
        self.W_out, self.b_out = w(D, fan_in=D), const(0.0)
        if mlp:
            self.ln2_g, self.ln2_b = const(1.0, D), const(0.0, D)
            self.W_1, self.b_1 = w(D, 4 * D, fan_in=D), const(0.0, 4 * D)
            self.W_2, self.b_2 = w(4 * D, D, fan_in=4 * D), const(0.0, D)

    def block(
        self, Y: Float[Tensor, "runs batch n D"], n_context: int
    ) -> Float[Tensor, "runs batch n D"]:
        r"""One block :math:`M_\theta`: attention to the context, [MLP], LayerNorm."""
        R, D = Y.shape[0], Y.shape[-1]
        h = _layer_norm(Y, self.ln1_g, self.ln1_b)
        q = h @ self.W_Q[:, None]  # (R, B, n, D)
        kv = h[:, :, :n_context]
        k, v = kv @ self.W_K[:, None], kv @ self.W_V[:, None]  # (R, B, N, D)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D), dim=-1)  # (R, B, n, N)
        Y = Y + (att @ v) @ self.W_O[:, None]
        if self.config["mlp"]:
            h = _layer_norm(Y, self.ln2_g, self.ln2_b)
            h = torch.relu(h @ self.W_1[:, None] + self.b_1[:, None, None])
            Y = Y + h @ self.W_2[:, None] + self.b_2[:, None, None]
        return _layer_norm(Y, self.lnf_g, self.lnf_b)

    def forward(
        self, X: Float[Tensor, "runs batch N d"], y: Float[Tensor, "runs batch N"],
        x_query: Float[Tensor, "runs batch Q d"], n_loops: int,
    ) -> Float[Tensor, "n_loops runs batch Q"]:
        r"""Predictions :math:`\hat y_t` at every query after :math:`t = 1..T` loops."""
        if n_loops < 1:
            raise ValueError(f"n_loops must be >= 1, got {n_loops}")
        N = X.shape[2]
        z = torch.cat([torch.cat([X, y[..., None]], -1),
                       F.pad(x_query, (0, 1))], dim=2)  # (R, B, N + Q, d + 1): queries carry y = 0
        P = z @ self.W_in[:, None] + self.b_in[:, None, None]  # (R, B, N + Q, D)
        Y = torch.zeros_like(P) if self.config["injection"] else P
        preds = []
        for _ in range(n_loops):
            Y = self.block(Y + P if self.config["injection"] else Y, N)
            preds.append(Y[:, :, N:] @ self.W_out[:, None, :, None])
        return torch.stack(preds)[..., 0] + self.b_out[None, :, None, None]


@dataclass
class LoopedSettings:
    """Training settings: task (``d``, ``N``, ``Q`` queries per prompt, ``sigma``) and optimiser."""

    d: int = 4
    N: int = 16
    Q: int = 4
    sigma: float = 0.1
    T: int = 4
    window: int = 4  # = T: the loss over every loop count (Delta = 2 overfits loops 3-4)
    n_steps: int = 400
    batch: int = 16
    lr: float = 1e-2


def sample_prompts(
    n_runs: int, batch: int, s: LoopedSettings, generator: torch.Generator,
    device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Tasks :math:`y = w^\top x + \sigma\varepsilon`, :math:`w\sim\mathcal N(0, I_d/d)`.

    Returns ``(X, y, x_query, y_query)`` with ``N`` context examples and ``Q`` queries each.
    """
    X, y, _ = linear_tasks(n_runs * batch, s.N + s.Q, s.d, generator, sigma=s.sigma,
                           w_scale=1 / math.sqrt(s.d), dtype=dtype, device=device)
    X, y = X.reshape(n_runs, batch, s.N + s.Q, s.d), y.reshape(n_runs, batch, s.N + s.Q)
    return X[:, :, :s.N], y[:, :, :s.N], X[:, :, s.N:], y[:, :, s.N:]


def train(model: LoopedTransformer, settings: LoopedSettings,
          generator: torch.Generator) -> list[float]:
    r"""Adam on the MSE averaged over loops :math:`T-\Delta+1..T` (:math:`\Delta` = ``window``).

    Fresh prompts every step; the loss summed over runs trains each run as if alone. Returns
    the mean loss over runs at every step.
    """
    s = settings
    if not 1 <= s.window <= s.T or s.n_steps < 0:
        raise ValueError(f"need 1 <= window <= T and n_steps >= 0, got window={s.window}, T={s.T}, "
                         f"n_steps={s.n_steps}")
    device = model.W_in.device
    R = model.config["n_runs"]
    opt = torch.optim.Adam(model.parameters(), lr=s.lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(s.n_steps, 1))
    losses = []
    for _ in progress(range(s.n_steps), desc="looped transformer", leave=False):
        X, y, xq, yq = sample_prompts(R, s.batch, s, generator, device=device)
        pred = model(X, y, xq, s.T)[s.T - s.window:]  # (window, R, B, Q)
        loss = (pred - yq).pow(2).mean(dim=(0, 2, 3))  # (R,)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach().mean()))
    return losses


@torch.no_grad()
def loop_errors(
    model: LoopedTransformer, X: Float[Tensor, "runs batch N d"], y: Float[Tensor, "runs batch N"],
    x_query: Float[Tensor, "runs batch Q d"], y_query: Float[Tensor, "runs batch Q"], n_loops: int,
) -> Float[Tensor, "n_loops runs"]:
    r"""Test mean squared error of every run after :math:`t = 1..T` loops."""
    return (model(X, y, x_query, n_loops) - y_query).pow(2).mean(dim=(2, 3))


def reference_errors(
    X: Float[Tensor, "runs batch N d"], y: Float[Tensor, "runs batch N"],
    x_query: Float[Tensor, "runs batch Q d"], y_query: Float[Tensor, "runs batch Q"], sigma: float,
) -> dict[str, Float[Tensor, " runs"]]:
    r"""Test MSE of least squares, of Bayes ridge, :math:`\lambda = \sigma^2 d / N`, and of one
    step of gradient descent from :math:`w = 0` with the step size best on these prompts
    (``"gd_one_step"``: :math:`\hat y = \eta^\ast x^\top X^\top y/N`, :math:`\eta^\ast` the
    least-squares fit of :math:`y` on :math:`x^\top X^\top y/N` over all queries of a run).

    (:math:`\lambda = \sigma^2/(N s^2)` for the prior :math:`w\sim\mathcal N(0, s^2 I_d)`,
    :math:`s^2 = 1/d`.) One prompt per query; shape ``(runs,)`` each.
    """
    R, B, N, d = X.shape
    Q = x_query.shape[2]
    Xf = X.double().repeat_interleave(Q, dim=1).reshape(R * B * Q, N, d)  # one prompt per query
    yf = y.double().repeat_interleave(Q, dim=1).reshape(R * B * Q, N)
    xq, yq = x_query.double().reshape(R * B * Q, d), y_query.double().reshape(R * B * Q)
    out = {"least_squares": bl.least_squares(Xf, yf, xq),
           "ridge": bl.ridge(Xf, yf, xq, lam=sigma ** 2 * d / N)}
    errors = {k: (v - yq).pow(2).reshape(R, B * Q).mean(1) for k, v in out.items()}
    a = (torch.einsum("knd,kn->kd", Xf, yf) / N * xq).sum(-1).reshape(R, B * Q)  # x^T X^T y / N
    eta = (a * yq.reshape(R, B * Q)).sum(1, keepdim=True) / a.pow(2).sum(1, keepdim=True)
    errors["gd_one_step"] = (eta * a - yq.reshape(R, B * Q)).pow(2).mean(1)
    return errors


def extrapolation_experiment(
    settings: LoopedSettings, generator: torch.Generator, n_runs: int = 5, width: int = 16,
    mlp: bool = False, n_test: int = 500, max_factor: int = 4, device: torch.device | str = "cpu",
) -> dict[str, Tensor]:
    r"""Train ``n_runs`` looped models and the alternatives a skeptic would name, each
    ``n_runs`` times: foils without input injection (the same window loss), one-pass blocks
    (with injection, trained at :math:`T = 1`: the same network without iteration), one-pass
    blocks trained for :math:`T` times the steps (as many block applications in training as the
    looped model) and untrained looped blocks.

    Returns test MSE after :math:`t = 1..\text{max\_factor}\,T` loops, shape
    ``(max_factor * T, n_runs)``, for ``"model"``, ``"foil"``, ``"single"`` (the one-pass blocks,
    looped; row 0 is their trained pass) and ``"untrained"``; ``"single_long"`` (the longer
    trained one-pass blocks after their pass), ``"zero"`` (the zero predictor,
    :math:`\mathbb E\,y^2`), ``"least_squares"`` and ``"ridge"``: shape ``(n_runs,)``, all on the
    same test prompts. The statistics are :func:`extrapolation_ratio` and :func:`refinement_ratio`.
    """
    if max_factor < 1 or n_test < 1:
        raise ValueError(f"need max_factor >= 1 and n_test >= 1, got {max_factor}, {n_test}")
    out: dict[str, Tensor] = {}
    one_pass = replace(settings, T=1, window=1)
    models = {"model": (True, settings), "foil": (False, settings), "single": (True, one_pass),
              "single_long": (True, replace(one_pass, n_steps=settings.n_steps * settings.T)),
              "untrained": (True, None)}
    trained = {}
    for name, (injection, s) in models.items():
        trained[name] = LoopedTransformer(settings.d, width, n_runs, injection=injection, mlp=mlp,
                                          generator=generator, device=device)
        if s is not None:
            train(trained[name], s, generator)
    X, y, xq, yq = sample_prompts(n_runs, n_test, settings, generator, device=device)
    for name, m in trained.items():
        loops = 1 if name == "single_long" else max_factor * settings.T
        out[name] = loop_errors(m, X, y, xq, yq, loops).cpu()
    out["single_long"] = out["single_long"][0]
    out["zero"] = yq.pow(2).mean(dim=(1, 2)).cpu()
    ref = reference_errors(X, y, xq, yq, settings.sigma)
    out.update({k: v.float().cpu() for k, v in ref.items()})
    return out


def refinement_ratio(errors: Float[Tensor, "loops runs"], T: int) -> Float[Tensor, " runs"]:
    r""":math:`\mathrm{err}(T) / \mathrm{err}(1)` per run: what the loops up to :math:`T` add."""
    if not 1 <= T <= errors.shape[0]:
        raise ValueError(f"need 1 <= T <= {errors.shape[0]} loops, got T={T}")
    return errors[T - 1] / errors[0]


def extrapolation_score(
    errors: Float[Tensor, "loops runs"], zero: Float[Tensor, " runs"], T: int, k: int,
    ratio_max: float = 1.4, level_max: float = 0.5,
) -> float:
    r"""Whether error is *kept* at :math:`kT` loops, and is worth keeping: the larger of
    :math:`\overline{\mathrm{err}(kT)/\mathrm{err}(T)}/r_{\max}` and
    :math:`\overline{\mathrm{err}(kT)/\mathrm{err}_0}/\ell_{\max}` (means over runs;
    :math:`\mathrm{err}_0` is the zero predictor's error). Below 1 means both hold: the error at
    :math:`kT` is within :math:`r_{\max}` times the error at :math:`T` and below
    :math:`\ell_{\max}` of the zero predictor's. A block that learned nothing keeps its error
    but fails the second part."""
    if not (ratio_max > 0 and level_max > 0):
        raise ValueError(f"need ratio_max > 0 and level_max > 0, got {ratio_max}, {level_max}")
    ratio = float(extrapolation_ratio(errors, T, k).mean())
    level = float((errors[k * T - 1] / zero).mean())
    return max(ratio / ratio_max, level / level_max)


def extrapolation_ratio(
    errors: Float[Tensor, "loops runs"], T: int, k: int
) -> Float[Tensor, " runs"]:
    r""":math:`\mathrm{err}(kT) / \mathrm{err}(T)` per run, from :func:`loop_errors`' output."""
    if T < 1 or k < 1 or k * T > errors.shape[0]:
        raise ValueError(f"need T >= 1 and k >= 1 with k*T <= {errors.shape[0]} loops, "
                         f"got T={T}, k={k}")
    return errors[k * T - 1] / errors[T - 1]

