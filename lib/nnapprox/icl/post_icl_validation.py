r"""Post-ICL validation: a hand-built ReLU transformer that selects a ridge penalty in context.

Chapter "In-context learning as gradient descent", part I ("What a transformer can compute"),
section "Algorithm selection by post-ICL validation" (``bai2023transformers``,
Section 4.1: Proposition 15 and Theorem 16, proofs in their Appendix H.1-H.2).

The prompt's :math:`N` examples are split into a training part (the first :math:`n_{\rm tr}`)
and a validation part (the other :math:`n_{\rm val} = N - n_{\rm tr}`), marked as in Bai et al.
by :math:`t_i = 1` (train), :math:`t_i = -1` (validation) and :math:`t_{N+1} = 0` (query).
For fixed penalties :math:`\lambda_1, \dots, \lambda_K` the network computes, exactly,

1. :math:`L` steps of gradient descent from 0 on each training-split ridge loss
   :math:`\frac1{2n_{\rm tr}}\sum_{t_j = 1}(w^\top x_j - y_j)^2 + \frac{\lambda_k}2\|w\|^2`,
   all :math:`K` in parallel (:func:`parallel_ridge_layers`: the chapter's ridge layer of
   :func:`~nnapprox.icl.constructions.ridge_gd_layers`, 3 heads, once per penalty in its own
   slots), then :math:`f_k(x_i) = w_k^\top x_i` in every token (the chapter's read-out layer);
2. the validation losses :math:`\hat L_k = \frac1{2n_{\rm val}}\sum_{t_j = -1}(f_k(x_j) - y_j)^2`
   (:func:`validation_loss_layer`: :math:`\sigma(a)\,a + \sigma(-a)(-a) = a^2`, two heads per
   penalty, the mask :math:`B(-t_j - 1)` keeps the validation tokens);
3. the selection (:func:`selection_layers`, Bai et al.'s Proposition H.2 with a margin
   :math:`\gamma`): :math:`c_k = \sum_{l} \sigma(\hat L_k - \hat L_l)`,
   :math:`u_k = \sigma(1 - c_k/\gamma)`, :math:`s_k = \sigma(1 - u_1 - \dots - u_k)`
   (:math:`s_0 = 1`), weights :math:`\alpha_k = s_{k-1} - s_k` and the prediction
   :math:`\hat y = \sum_k \alpha_k f_k(x_{N+1})` (two heads per penalty).

What the selection computes (:func:`selection_weights` is its plain reference): the
:math:`\alpha_k` are non-negative and sum to 1, and :math:`\alpha_k > 0` only if
:math:`\hat L_k < \min_l \hat L_l + \gamma`. If the *margin* (second-smallest minus smallest
validation loss) exceeds :math:`\gamma`, then :math:`u` is the indicator of the argmin and
:math:`\hat y` is exactly the prediction of the ridge with the smallest validation loss; inside
the margin it is a convex combination of the near-best candidates, whose validation loss is
at most :math:`\min_k \hat L_k + \gamma` (the loss is convex in the predictor). A ReLU network
is continuous, so no choice of weights gives the discontinuous argmin on every prompt.

Every score stays below the mask constant ``B`` when the iterates and labels are bounded
(:math:`|w^\top x - y|`, :math:`|f_k|` and :math:`|\alpha_k f_k|` below ``B``).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .constructions import layout as ridge_layout
from .constructions import readout_layer, ridge_gd_layers
from .relu_attention import Layer


def validation_layout(d: int, K: int) -> dict[str, int | slice]:
    """Token fields ``x, y, w, f, loss, c, u, alpha, y_hat, one, t`` and ``D = d + 4 + K(d + 5)``.

    ``w`` holds the :math:`K` iterates one after the other (``w[k*d:(k+1)*d]``); ``f``,
    ``loss``, ``c``, ``u`` and ``alpha`` hold one number per penalty.
    """
    if d < 1 or K < 1:
        raise ValueError(f"need d >= 1 and K >= 1 penalties, got d={d}, K={K}")
    sizes = [("x", d), ("y", 1), ("w", K * d), ("f", K), ("loss", K), ("c", K), ("u", K), ("alpha", K),
             ("y_hat", 1), ("one", 1), ("t", 1)]
    out, i = {}, 0
    for name, size in sizes:
        out[name] = i if size == 1 and name in ("y", "y_hat", "one", "t") else slice(i, i + size)
        i += size
    out["D"] = i
    return out


def _check_split(N: int, n_train: int) -> None:
    if not 1 <= n_train < N:
        raise ValueError(f"need 1 <= n_train < N (at least one training and one validation example), "
                         f"got n_train={n_train}, N={N}")


def validation_embed(
    X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], x_query: Float[Tensor, "batch d"],
    n_train: int, K: int,
) -> Float[Tensor, "batch N_plus_1 D"]:
    r"""Tokens :math:`[x_i; y_i; 0; \dots; 0; 1; t_i]`: the first ``n_train`` examples train (:math:`t = 1`), the rest validate (:math:`t = -1`), the query last (:math:`y = 0`, :math:`t = 0`)."""
    B, N, d = X.shape
    _check_split(N, n_train)
    s = validation_layout(d, K)
    H = torch.zeros(B, N + 1, s["D"], dtype=X.dtype, device=X.device)
    H[:, :N, s["x"]] = X
    H[:, N, s["x"]] = x_query
    H[:, :N, s["y"]] = y
    H[:, :, s["one"]] = 1.0
    H[:, :n_train, s["t"]] = 1.0
    H[:, n_train:N, s["t"]] = -1.0
    return H


def _lift(layer: Layer, index: list[int | None], D: int) -> Layer:
    """Embed an attention layer written for a small token layout into the slots ``index`` of width ``D``.

    ``index[a]`` is the slot of the big token that plays the small token's slot ``a`` (``None``:
    a slot the layer must not touch). Query/key feature rows are padded with zeros.
    """
    out = {}
    M, D0, _ = layer["Q"].shape
    keep = [a for a in range(D0) if index[a] is not None]
    dropped = [a for a in range(D0) if index[a] is None]
    for name in ("Q", "K", "V"):
        W = layer[name]
        if dropped and (W[:, :, dropped].abs().max() > 0 or (name == "V" and W[:, dropped].abs().max() > 0)):
            raise ValueError(f"the layer uses slot(s) {dropped}, which the lift drops")
        big = torch.zeros(M, D, D, dtype=W.dtype)
        cols = [index[a] for a in keep]
        if name == "V":  # value: output slots (rows) and input slots (columns) are token slots
            big[:, torch.tensor(cols)[:, None], torch.tensor(cols)[None, :]] = W[:, keep][:, :, keep]
        else:  # query/key: rows are feature coordinates, columns token slots
            big[:, :D0, cols] = W[:, :, keep]
        out[name] = big
    return out


def parallel_ridge_layers(d: int, lams: list[float], eta: float, n_steps: int, N: int, n_train: int,
                          B: float = 1e4, dtype: torch.dtype = torch.float64) -> list[Layer]:
    r""":math:`L` = ``n_steps`` layers of :math:`3K` heads, then a read-out layer of :math:`2K` heads.

    Layer :math:`\ell` maps every iterate :math:`w_k \leftarrow w_k - \eta\bigl(\frac1{n_{\rm tr}}
    \sum_{t_j = 1}(w_k^\top x_j - y_j)x_j + \lambda_k w_k\bigr)`; the read-out writes
    :math:`f_k(x_i) = w_k^\top x_i` into every token. Attention averages over all :math:`N`
    context tokens but only :math:`n_{\rm tr}` of them are unmasked, so the chapter's ridge
    layer is used with step :math:`\eta N / n_{\rm tr}` and the read-out's value is scaled by
    :math:`N / n_{\rm tr}`.
    """
    _check_split(N, n_train)
    if len(lams) < 1 or min(lams) < 0 or eta <= 0 or n_steps < 0:
        raise ValueError(f"need at least one penalty, every lambda >= 0, eta > 0 and n_steps >= 0; "
                         f"got lams={list(lams)}, eta={eta}, n_steps={n_steps}")
    K, s, r = len(lams), validation_layout(d, len(lams)), ridge_layout(d)
    scale = N / n_train
    gd, read = [], []
    for k, lam in enumerate(lams):
        index: list[int | None] = [None] * r["D"]
        for a in range(d):
            index[a] = a                                   # x
            index[r["w"].start + a] = s["w"].start + k * d + a  # w -> w_k
        index[r["y"]], index[r["one"]], index[r["t"]] = s["y"], s["one"], s["t"]
        gd.append(_lift(ridge_gd_layers(d, eta * scale, lam, 1, B=B, dtype=dtype)[0], index, s["D"]))
        index[r["y_hat"]] = s["f"].start + k               # the read-out writes f_k
        lifted = _lift(readout_layer(d, B=B, dtype=dtype), index, s["D"])
        lifted["V"] = lifted["V"] * scale
        read.append(lifted)
    step = {name: torch.cat([g[name] for g in gd]) for name in ("Q", "K", "V")}
    readout = {name: torch.cat([g[name] for g in read]) for name in ("Q", "K", "V")}
    return [dict(step) for _ in range(n_steps)] + [readout]


def validation_loss_layer(d: int, K: int, N: int, n_train: int, B: float = 1e4,
                          dtype: torch.dtype = torch.float64) -> Layer:
    r"""Attention, :math:`2K` heads: :math:`\hat L_k = \frac1{2n_{\rm val}}\sum_{t_j = -1}(f_k(x_j) - y_j)^2` into every token.

    Heads :math:`\pm`: score :math:`\pm(f_k(x_j) - y_j) + B(-t_j - 1)`, value
    :math:`\pm(f_k(x_j) - y_j)\, N / (2n_{\rm val})`, so each validation token contributes
    :math:`\sigma(a)a + \sigma(-a)(-a) = a^2` and the others nothing.
    """
    _check_split(N, n_train)
    s = validation_layout(d, K)
    D = s["D"]
    Q, K_, V = (torch.zeros(2 * K, D, D, dtype=dtype) for _ in range(3))
    c = N / (2 * (N - n_train))
    for k in range(K):
        f = s["f"].start + k
        for h, sign in enumerate((1.0, -1.0)):
            m = 2 * k + h
            Q[m, 0, s["one"]] = sign        # score sign (f_k(x_j) - y_j) ...
            K_[m, 0, f], K_[m, 0, s["y"]] = 1.0, -1.0
            Q[m, 1, s["one"]] = B           # ... + B (-t_j - 1): only validation tokens
            K_[m, 1, s["t"]], K_[m, 1, s["one"]] = -1.0, -1.0
            V[m, s["loss"].start + k, f] = sign * c
            V[m, s["loss"].start + k, s["y"]] = -sign * c
    return {"Q": Q, "K": K_, "V": V}


def selection_layers(d: int, K: int, N: int, n_train: int, gamma: float, B: float = 1e4,
                     dtype: torch.dtype = torch.float64) -> list[Layer]:
    r"""Three MLPs and one attention layer: :math:`c_k`, :math:`u_k`, :math:`\alpha_k`, then :math:`\hat y_i = \sum_k \alpha_k f_k(x_i)`.

    MLPs (units): :math:`c_k = \sum_{l \ne k}\sigma(\hat L_k - \hat L_l)` (:math:`K(K-1)`),
    :math:`u_k = \sigma(1 - c_k/\gamma)` (:math:`K`), :math:`s_k = \sigma(1 - u_1 - \dots - u_k)`
    for :math:`k = 0, \dots, K` and :math:`\alpha_k = s_{k-1} - s_k` (:math:`K + 1`). The
    attention layer multiplies :math:`\alpha_k` (the key's) by :math:`f_k(x_i)` (the query's)
    with two heads, score :math:`\pm\alpha_k f_k(x_i) + B(t_j - 1)` and value :math:`\pm N/n_{\rm tr}`.
    """
    _check_split(N, n_train)
    if gamma <= 0:
        raise ValueError(f"need a margin gamma > 0, got {gamma}")
    s = validation_layout(d, K)
    D = s["D"]
    L, c, u, al, one = s["loss"].start, s["c"].start, s["u"].start, s["alpha"].start, s["one"]
    pairs = [(k, l) for k in range(K) for l in range(K) if l != k]
    W1c, W2c = torch.zeros(max(len(pairs), 1), D, dtype=dtype), torch.zeros(D, max(len(pairs), 1), dtype=dtype)
    for unit, (k, l) in enumerate(pairs):
        W1c[unit, L + k], W1c[unit, L + l] = 1.0, -1.0   # sigma(L_k - L_l)
        W2c[c + k, unit] = 1.0                          # summed into c_k
    W1u, W2u = torch.zeros(K, D, dtype=dtype), torch.zeros(D, K, dtype=dtype)
    for k in range(K):
        W1u[k, one], W1u[k, c + k] = 1.0, -1.0 / gamma   # sigma(1 - c_k / gamma)
        W2u[u + k, k] = 1.0
    W1a, W2a = torch.zeros(K + 1, D, dtype=dtype), torch.zeros(D, K + 1, dtype=dtype)
    for k in range(K + 1):
        W1a[k, one] = 1.0                                # s_k = sigma(1 - u_1 - ... - u_k)
        W1a[k, u : u + k] = -1.0
    for k in range(K):
        W2a[al + k, k], W2a[al + k, k + 1] = 1.0, -1.0   # alpha_k = s_{k-1} - s_k (0-based: s_k - s_{k+1})
    Q, K_, V = (torch.zeros(2 * K, D, D, dtype=dtype) for _ in range(3))
    for k in range(K):
        for h, sign in enumerate((1.0, -1.0)):
            m = 2 * k + h
            Q[m, 0, s["f"].start + k] = sign             # score sign f_k(x_i) alpha_k ...
            K_[m, 0, al + k] = 1.0
            Q[m, 1, one] = B                             # ... + B (t_j - 1): training tokens
            K_[m, 1, s["t"]], K_[m, 1, one] = 1.0, -1.0
            V[m, s["y_hat"], one] = sign * N / n_train
    return [{"W_1": W1c, "W_2": W2c}, {"W_1": W1u, "W_2": W2u}, {"W_1": W1a, "W_2": W2a},
            {"Q": Q, "K": K_, "V": V}]


def post_icl_validation_layers(d: int, lams: list[float], eta: float, n_steps: int, N: int, n_train: int,
                               gamma: float, B: float = 1e4, dtype: torch.dtype = torch.float64) -> list[Layer]:
    r"""The whole network: :func:`parallel_ridge_layers`, :func:`validation_loss_layer`, :func:`selection_layers`.

    :math:`L + 5` layers for :math:`L` gradient steps (the validation attention and the first
    selection MLP share a layer); the prediction is the query token's ``y_hat`` slot.
    """
    K = len(lams)
    layers = parallel_ridge_layers(d, lams, eta, n_steps, N, n_train, B=B, dtype=dtype)
    if gamma <= 0:
        raise ValueError(f"need a margin gamma > 0, got {gamma}")
    sel = selection_layers(d, K, N, n_train, gamma, B=B, dtype=dtype)
    return layers + [{**validation_loss_layer(d, K, N, n_train, B=B, dtype=dtype), **sel[0]}] + sel[1:]


def read_selection(H: Float[Tensor, "batch T D"], d: int, K: int) -> dict[str, Tensor]:
    """The query token's fields: ``w`` (batch, K, d), ``f``, ``loss``, ``alpha`` (batch, K) and ``y_hat`` (batch,)."""
    s = validation_layout(d, K)
    q = H[:, -1]
    return {"w": q[:, s["w"]].reshape(-1, K, d), "f": q[:, s["f"]], "loss": q[:, s["loss"]],
            "alpha": q[:, s["alpha"]], "y_hat": q[:, s["y_hat"]]}


def selection_weights(val_loss: Float[Tensor, "batch K"], gamma: float) -> Float[Tensor, "batch K"]:
    r"""Plain reference of the selection rule: :math:`\alpha_k = s_{k-1} - s_k`, :math:`s_k = \max(0, 1 - \sum_{l \le k} u_l)`, :math:`u_k = \max(0, 1 - c_k/\gamma)`."""
    if gamma <= 0:
        raise ValueError(f"need a margin gamma > 0, got {gamma}")
    batch, K = val_loss.shape
    alpha = torch.zeros_like(val_loss)
    for b in range(batch):
        Lb = [float(v) for v in val_loss[b]]
        u = [max(0.0, 1.0 - sum(max(0.0, Lb[k] - Lb[l]) for l in range(K)) / gamma) for k in range(K)]
        s_prev, total = 1.0, 0.0
        for k in range(K):
            total += u[k]
            s_k = max(0.0, 1.0 - total)
            alpha[b, k] = s_prev - s_k
            s_prev = s_k
    return alpha


def post_icl_validation_reference(
    X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], x_query: Float[Tensor, "batch d"],
    lams: list[float], eta: float, n_steps: int, n_train: int,
) -> dict[str, Tensor]:
    r"""The algorithm without a transformer: ridge by gradient descent on the training split, validation losses, argmin.

    Returns ``w`` (batch, K, d): :math:`L` steps of gradient descent from 0 on each
    training-split ridge loss; ``f`` (batch, K): the :math:`K` predictions at the query;
    ``loss`` (batch, K): :math:`\hat L_k = \frac1{2n_{\rm val}}\sum_{\rm val}(w_k^\top x_j - y_j)^2`;
    ``k_star`` (batch,): :math:`\arg\min_k \hat L_k`; ``prediction`` (batch,):
    :math:`f_{k^\star}(x_{N+1})`; ``margin`` (batch,): second-smallest minus smallest loss
    (``inf`` for one penalty).
    """
    N = X.shape[1]
    _check_split(N, n_train)
    Xt, yt, Xv, yv = X[:, :n_train], y[:, :n_train], X[:, n_train:], y[:, n_train:]
    ws = []
    for lam in lams:
        w = torch.zeros(X.shape[0], X.shape[2], dtype=X.dtype, device=X.device)
        for _ in range(n_steps):
            residual = torch.einsum("bnd,bd->bn", Xt, w) - yt
            w = w - eta * (torch.einsum("bnd,bn->bd", Xt, residual) / n_train + lam * w)
        ws.append(w)
    w = torch.stack(ws, 1)  # (batch, K, d)
    f = torch.einsum("bkd,bd->bk", w, x_query)
    loss = (torch.einsum("bkd,bnd->bkn", w, Xv) - yv[:, None]).pow(2).sum(-1) / (2 * (N - n_train))
    k_star = loss.argmin(1)
    top2 = loss.topk(min(2, len(lams)), dim=1, largest=False).values
    margin = top2[:, 1] - top2[:, 0] if len(lams) > 1 else torch.full_like(top2[:, 0], float("inf"))
    return {"w": w, "f": f, "loss": loss, "k_star": k_star, "prediction": f.gather(1, k_star[:, None])[:, 0],
            "margin": margin}
