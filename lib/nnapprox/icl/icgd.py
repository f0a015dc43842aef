r"""In-context gradient descent on a two-layer ReLU network, by a hand-built ReLU transformer.

Chapter "In-context learning as gradient descent", section "In-context deep learning"
(seed lecture 003; ``wu2025incontext``, Theorem 1, built on the layers of
:mod:`.relu_attention`).

The network is :math:`f(w, x) = \sum_{k=1}^K a_k\, \sigma(v_k^\top x)`, :math:`w = (a, V)`,
:math:`V \in \mathbb R^{K\times d}` (two layers, :math:`N = 2` in Wu et al.'s count), and the
loss on the prompt is :math:`\mathcal L_n(w) = \frac1{2n}\sum_{j=1}^n (f(w, x_j) - y_j)^2`.
Its gradient is

.. math::

    \partial_{a_k}\mathcal L_n = \frac1n\sum_j r_j\, p_{jk}, \qquad
    \nabla_{v_k}\mathcal L_n = \frac1n\sum_j a_k\, r_j\, s_{jk}\, x_j,

with :math:`u_{jk} = v_k^\top x_j`, :math:`p_{jk} = \sigma(u_{jk})`,
:math:`s_{jk} = \mathbf 1[u_{jk} > 0]` and :math:`r_j = f(w, x_j) - y_j`. One step of projected
gradient descent :math:`w \leftarrow \mathrm{Proj}_{[-c, c]}(w - \eta\nabla\mathcal L_n(w))`
is four transformer layers (:func:`icgd_step_layers`):

1. attention :math:`u_{ik}`, then an MLP :math:`p_{ik} = \sigma(u_{ik})` and
   :math:`s_{ik} = \sigma(u_{ik}/\delta) - \sigma(u_{ik}/\delta - 1)` (the step function up to the
   band :math:`0 < u < \delta`: the only approximation, with accuracy parameter :math:`\delta`);
2. attention :math:`r_i = \sum_k a_k p_{ik} - y_i` (on the query, :math:`y = 0`, so :math:`r` is the prediction);
3. attention :math:`g_{ik} = r_i s_{ik}`;
4. attention: the gradient averaged over the context, written into the weight slots of every
   token, and the scratch slots cleared; then an MLP clamps the weights to :math:`[-c, c]`
   (:math:`\mathrm{clamp}(w) = w - \sigma(w - c) + \sigma(-w - c)`, exact).

The products of two quantities held by the *same* token (:math:`v_k^\top x_i`, :math:`a^\top p_i`,
:math:`r_i s_{ik}`) use a head that attends only to itself: tokens carry a one-hot position
:math:`e_i`, and the score :math:`\pm\langle q_i, k_j\rangle + B(\langle e_i, e_j\rangle - 1)` is
switched off for :math:`j \ne i`, so with value :math:`\pm n` the pair of heads returns the bilinear
form exactly (:math:`\sigma(z) - \sigma(-z) = z`). This replaces Wu et al.'s element-wise
multiplication layers, which approximate products; it costs :math:`n + 1` extra token
coordinates. Averages over the context use the query mask :math:`B(t_j - 1)` of
:mod:`.constructions`. Both tricks need every score to be smaller than :math:`B`.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_attention import Layer
from .tasks import relu_net


def icgd_layout(d: int, K: int, n: int) -> dict[str, int | slice]:
    """Token fields ``x, y, a, v, u, p, s, r, g, one, t, pos`` (slices or indices) and ``D``; ``v`` is row-major ``(K, d)``."""
    if min(d, K, n) < 1:
        raise ValueError(f"need d, K, n >= 1, got {d}, {K}, {n}")
    sizes = [("x", d), ("y", 1), ("a", K), ("v", K * d), ("u", K), ("p", K), ("s", K), ("r", 1), ("g", K),
             ("one", 1), ("t", 1), ("pos", n + 1)]
    out, i = {}, 0
    for name, size in sizes:
        out[name] = i if name in ("y", "r", "one", "t") else slice(i, i + size)
        i += size
    out["D"] = i
    return out


def _idx(field: int | slice, k: int = 0) -> int:
    return field if isinstance(field, int) else field.start + k


def icgd_embed(
    X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], x_query: Float[Tensor, "batch d"],
    a0: Float[Tensor, "batch K"], V0: Float[Tensor, "batch K d"],
) -> Float[Tensor, "batch n_plus_1 D"]:
    r"""Tokens :math:`[x_i; y_i; a; \mathrm{vec} V; 0; 1; t_i; e_i]`, the query last (:math:`y = 0`, :math:`t = 0`)."""
    B, n, d = X.shape
    K = a0.shape[1]
    s = icgd_layout(d, K, n)
    H = torch.zeros(B, n + 1, s["D"], dtype=X.dtype, device=X.device)
    H[:, :n, s["x"]] = X
    H[:, n, s["x"]] = x_query
    H[:, :n, s["y"]] = y
    H[:, :, s["a"]] = a0[:, None, :]
    H[:, :, s["v"]] = V0.reshape(B, 1, K * d)
    H[:, :, s["one"]] = 1.0
    H[:, :n, s["t"]] = 1.0
    H[:, :, s["pos"]] = torch.eye(n + 1, dtype=X.dtype, device=X.device)
    return H


def read_weights(H: Float[Tensor, "batch T D"], d: int, K: int) -> tuple[Float[Tensor, "batch K"], Float[Tensor, "batch K d"]]:
    """The iterate :math:`(a, V)` stored in the query token."""
    s = icgd_layout(d, K, H.shape[1] - 1)
    return H[:, -1, s["a"]], H[:, -1, s["v"]].reshape(-1, K, d)


def _heads(M: int, D: int, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    return torch.zeros(M, D, D, dtype=dtype), torch.zeros(M, D, D, dtype=dtype), torch.zeros(M, D, D, dtype=dtype)


def _self_mask(Q: Tensor, K_: Tensor, m: int, row: int, s: dict, n: int, B: float) -> None:
    r"""Rows ``row..row+n+1`` of head ``m``: score term :math:`B(\langle e_i, e_j\rangle - 1)` (attend to yourself only)."""
    for p in range(n + 1):
        Q[m, row + p, s["pos"].start + p] = B
        K_[m, row + p, s["pos"].start + p] = 1.0
    Q[m, row + n + 1, s["one"]] = B
    K_[m, row + n + 1, s["one"]] = -1.0


def _context_mask(Q: Tensor, K_: Tensor, m: int, row: int, s: dict, B: float) -> None:
    r"""Row ``row`` of head ``m``: score term :math:`B(t_j - 1)` (the query is not a key)."""
    Q[m, row, s["one"]] = B
    K_[m, row, s["t"]] = 1.0
    K_[m, row, s["one"]] = -1.0


def icgd_step_layers(d: int, K: int, n: int, eta: float, delta: float, c: float, B: float = 1e3,
                     dtype: torch.dtype = torch.float64) -> list[Layer]:
    r"""Four layers: one step :math:`w \leftarrow \mathrm{clamp}_{[-c,c]}(w - \eta \nabla\mathcal L_n(w))` (module docstring).

    ``delta`` is the width of the ReLU ramp that replaces :math:`\mathbf 1[u > 0]`; ``B`` must
    exceed every score (:math:`|u_{jk}|`, :math:`|r_j|`, :math:`|a_k r_j|`).
    """
    if eta <= 0 or delta <= 0 or c <= 0 or B <= 0:
        raise ValueError(f"need eta, delta, c, B > 0; got {eta}, {delta}, {c}, {B}")
    s = icgd_layout(d, K, n)
    D, one = s["D"], s["one"]
    signs = (1.0, -1.0)

    # layer 1: u_ik = v_k . x_i (self-attention), then p = relu(u), s = ramp(u / delta)
    Q, K_, V = _heads(2 * K, D, dtype)
    for k in range(K):
        for h, sg in enumerate(signs):
            m = 2 * k + h
            for c_ in range(d):
                Q[m, c_, _idx(s["v"], k * d + c_)] = sg
                K_[m, c_, _idx(s["x"], c_)] = 1.0
            _self_mask(Q, K_, m, d, s, n, B)
            V[m, _idx(s["u"], k), one] = sg * n
    W_1 = torch.zeros(3 * K, D, dtype=dtype)
    W_2 = torch.zeros(D, 3 * K, dtype=dtype)
    for k in range(K):
        u = _idx(s["u"], k)
        W_1[3 * k, u] = 1.0
        W_1[3 * k + 1, u] = 1.0 / delta
        W_1[3 * k + 2, u] = 1.0 / delta
        W_1[3 * k + 2, one] = -1.0
        W_2[_idx(s["p"], k), 3 * k] = 1.0
        W_2[_idx(s["s"], k), 3 * k + 1] = 1.0
        W_2[_idx(s["s"], k), 3 * k + 2] = -1.0
    layer1 = {"Q": Q, "K": K_, "V": V, "W_1": W_1, "W_2": W_2}

    # layer 2: r_i = sum_k a_k p_ik - y_i (self-attention, 2 heads)
    Q, K_, V = _heads(2, D, dtype)
    for h, sg in enumerate(signs):
        for k in range(K):
            Q[h, k, _idx(s["a"], k)] = sg
            K_[h, k, _idx(s["p"], k)] = 1.0
        Q[h, K, one] = sg
        K_[h, K, s["y"]] = -1.0
        _self_mask(Q, K_, h, K + 1, s, n, B)
        V[h, s["r"], one] = sg * n
    layer2 = {"Q": Q, "K": K_, "V": V}

    # layer 3: g_ik = r_i s_ik (self-attention, 2 heads per k)
    Q, K_, V = _heads(2 * K, D, dtype)
    for k in range(K):
        for h, sg in enumerate(signs):
            m = 2 * k + h
            Q[m, 0, s["r"]] = sg
            K_[m, 0, _idx(s["s"], k)] = 1.0
            _self_mask(Q, K_, m, 1, s, n, B)
            V[m, _idx(s["g"], k), one] = sg * n
    layer3 = {"Q": Q, "K": K_, "V": V}

    # layer 4: the gradient step (context average) and clearing the scratch slots; MLP: clamp to [-c, c]
    Q, K_, V = _heads(2 + 2 * K + 1, D, dtype)
    for h, sg in enumerate(signs):  # a_k -= eta/n sum_j r_j p_jk
        Q[h, 0, one] = sg
        K_[h, 0, s["r"]] = 1.0
        _context_mask(Q, K_, h, 1, s, B)
        for k in range(K):
            V[h, _idx(s["a"], k), _idx(s["p"], k)] = -sg * eta
    for k in range(K):  # v_k -= eta/n sum_j a_k g_jk x_j
        for h, sg in enumerate(signs):
            m = 2 + 2 * k + h
            Q[m, 0, _idx(s["a"], k)] = sg
            K_[m, 0, _idx(s["g"], k)] = 1.0
            _context_mask(Q, K_, m, 1, s, B)
            for c_ in range(d):
                V[m, _idx(s["v"], k * d + c_), _idx(s["x"], c_)] = -sg * eta
    m = 2 + 2 * K  # clear u, p, s, r, g: score 1 on yourself, value -n h
    Q[m, 0, one] = 1.0
    K_[m, 0, one] = 1.0
    _self_mask(Q, K_, m, 1, s, n, B)
    for name in ("u", "p", "s", "g"):
        for k in range(K):
            V[m, _idx(s[name], k), _idx(s[name], k)] = -float(n)
    V[m, s["r"], s["r"]] = -float(n)
    n_w = K + K * d  # the a and v slots are contiguous
    w0 = s["a"].start
    W_1 = torch.zeros(2 * n_w, D, dtype=dtype)
    W_2 = torch.zeros(D, 2 * n_w, dtype=dtype)
    for q in range(n_w):
        W_1[2 * q, w0 + q], W_1[2 * q, one] = 1.0, -c       # relu(w - c)
        W_1[2 * q + 1, w0 + q], W_1[2 * q + 1, one] = -1.0, -c  # relu(-w - c)
        W_2[w0 + q, 2 * q], W_2[w0 + q, 2 * q + 1] = -1.0, 1.0
    layer4 = {"Q": Q, "K": K_, "V": V, "W_1": W_1, "W_2": W_2}
    return [layer1, layer2, layer3, layer4]


def icgd_layers(d: int, K: int, n: int, eta: float, n_steps: int, delta: float, c: float, B: float = 1e3,
                dtype: torch.dtype = torch.float64) -> list[Layer]:
    r""":math:`4L` layers running :math:`L` = ``n_steps`` steps of projected GD (:func:`icgd_step_layers` repeated)."""
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    return icgd_step_layers(d, K, n, eta, delta, c, B, dtype) * n_steps


def icgd_readout_layers(d: int, K: int, n: int, B: float = 1e3, dtype: torch.dtype = torch.float64) -> list[Layer]:
    r"""Layers 1-2 of a step (the forward pass): the query's ``r`` slot then holds :math:`f(w, x_{n+1})`."""
    l1, l2 = icgd_step_layers(d, K, n, 1.0, 1.0, 1.0, B, dtype)[:2]
    return [l1, l2]


def projected_gd_reference(
    X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], a: Float[Tensor, "batch K"], V: Float[Tensor, "batch K d"],
    eta: float, c: float,
) -> tuple[Float[Tensor, "batch K"], Float[Tensor, "batch K d"]]:
    r"""One step of projected GD with the gradient from ``torch.autograd`` (ReLU derivative :math:`\mathbf 1[u>0]`)."""
    a_, V_ = a.detach().clone().requires_grad_(True), V.detach().clone().requires_grad_(True)
    loss = (relu_net(X, a_, V_) - y).pow(2).sum() / (2 * X.shape[1])  # sum over prompts: prompts do not interact
    g_a, g_V = torch.autograd.grad(loss, (a_, V_))
    return (a - eta * g_a).clamp(-c, c), (V - eta * g_V).clamp(-c, c)


def ramp_error_bound(
    X: Float[Tensor, "batch n d"], y: Float[Tensor, "batch n"], a: Float[Tensor, "batch K"], V: Float[Tensor, "batch K d"],
    delta: float,
) -> Float[Tensor, " batch"]:
    r"""Bound :math:`\varepsilon(\delta)` on the gradient error of the ramp: :math:`\frac1n\sum_{k}\sum_{j:\,0<u_{jk}<\delta}|a_k r_j|\,\|x_j\|`.

    The construction's step differs from the exact projected step by at most
    :math:`\eta\,\varepsilon(\delta)` (the clamp is non-expansive); :math:`\varepsilon(\delta) = 0`
    when no pre-activation falls in :math:`(0, \delta)`.
    """
    u = torch.einsum("bkd,bnd->bnk", V, X)
    r = relu_net(X, a, V) - y
    band = ((u > 0) & (u < delta)).to(X.dtype)  # (batch, n, K)
    return torch.einsum("bnk,bk,bn,bn->b", band, a.abs(), r.abs(), X.norm(dim=-1)) / X.shape[1]
