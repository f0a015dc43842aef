r"""A GPT-2-style causal transformer for in-context regression (Garg et al.'s setting).

Chapter "In-context learning as gradient descent", section "The phenomenon"
(``garg2022what``; architecture of ``radford2019language``).

A prompt :math:`(x_1, y_1, \dots, x_N, y_N)` becomes a sequence of :math:`2N` tokens in
:math:`\mathbb R^{d+1}`: :math:`x`-tokens :math:`(0, x_i)` and :math:`y`-tokens
:math:`(y_i, 0, \dots, 0)`. The model embeds them linearly, adds learned positions, applies
``n_layer`` pre-LayerNorm blocks

.. math:: h \leftarrow h + \mathrm{Attn}(\mathrm{LN}(h)), \qquad h \leftarrow h + \mathrm{MLP}(\mathrm{LN}(h)),

with causal softmax attention :math:`\mathrm{softmax}(QK^\top/\sqrt{d_k} + \text{mask})V`,
and reads a scalar out at every :math:`x`-token: the prediction of :math:`y_i` from
:math:`(x_1, y_1, \dots, x_{i-1}, y_{i-1}, x_i)`. Training minimises the squared error
averaged over all prefixes,
:math:`\frac1N \sum_{i=1}^N (\mathrm{TF}_\theta(x_{1:i}, y_{1:i-1}) - y_i)^2`.

The weights start as GPT-2's (:func:`gpt2_init_`), the initialisation of the Hugging Face
``GPT2Model`` that Garg et al. train.

The fast path uses :func:`torch.nn.functional.scaled_dot_product_attention`;
:func:`causal_attention_reference` is the same computation written out, for the tests.
:meth:`GPT.predict` computes only what the read-out needs, the same numbers as the full
forward pass: no prediction reads the last label :math:`y_N`, so its token is left out, and
the last block evaluates its queries, output projection and MLP at the :math:`x`-tokens only
(its keys and values at every token): the last block does about half its work and the
sequence is one token shorter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from ..progress import progress


@dataclass(frozen=True)
class GPTConfig:
    """Size of the model: ``n_layer`` blocks of width ``n_embd`` with ``n_head`` heads; ``n_positions`` tokens at most."""

    d: int = 5
    n_layer: int = 3
    n_embd: int = 64
    n_head: int = 2
    n_positions: int = 64

    def __post_init__(self) -> None:
        if min(self.d, self.n_layer, self.n_embd, self.n_head, self.n_positions) < 1:
            raise ValueError(f"every GPTConfig field must be >= 1, got {self}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}")


def interleave(X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"]) -> Float[Tensor, "batch two_N d_plus_1"]:
    r"""Tokens :math:`(0, x_1), (y_1, 0), (0, x_2), \dots, (y_N, 0)` of dimension :math:`d+1`."""
    B, N, d = X.shape
    if y.shape != (B, N):
        raise ValueError(f"y must have shape (batch, N) = {(B, N)} to match X of shape {tuple(X.shape)}, "
                         f"got {tuple(y.shape)}")
    tokens = X.new_zeros(B, N, 2, d + 1)  # (B, N, x- or y-token, d+1)
    tokens[:, :, 0, 1:] = X
    tokens[:, :, 1, 0] = y
    return tokens.view(B, 2 * N, d + 1)


def causal_attention_reference(
    q: Float[Tensor, "batch head T_q dk"], k: Float[Tensor, "batch head T dk"], v: Float[Tensor, "batch head T dk"],
    stride: int = 1,
) -> Float[Tensor, "batch head T_q dk"]:
    r""":math:`\mathrm{softmax}(q k^\top / \sqrt{d_k} + M) v` with :math:`M_{ts} = -\infty` for :math:`s > \mathrm{stride}\cdot t`.

    Query :math:`t` sits at position :math:`\mathrm{stride}\cdot t` of the sequence of keys
    (``stride=1``: every position; ``stride=2``: the :math:`x`-tokens) and sees the keys up to it.
    """
    T_q, T = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, nh, T_q, T)
    mask = torch.arange(T, device=q.device) > stride * torch.arange(T_q, device=q.device)[:, None]  # (T_q, T)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Block(nn.Module):
    r"""One pre-LN block: causal multi-head self-attention, then a 4x-wide GELU MLP.

    ``block(h, stride=s)`` returns the block's output at positions :math:`0, s, 2s, \dots` only.
    The attention at those positions still reads the keys and values of every position, so
    for ``s = 2`` (the :math:`x`-tokens, where :meth:`GPT.predict` reads out) the last block
    skips the queries, the output projection and the MLP at the :math:`y`-tokens: the same
    numbers as ``block(h)[:, ::2]`` with less work.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.W_QKV = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)  # rows: W_Q, W_K, W_V
        self.W_O = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd))
        # allowed[t, s] = (s <= t); stride-s queries use the rows 0, s, 2s, ... (a view, no new mask per step)
        allowed = torch.ones(cfg.n_positions, cfg.n_positions, dtype=torch.bool).tril()
        self.register_buffer("allowed", allowed, persistent=False)  # not in the state dict

    def attention(
        self, a: Float[Tensor, "batch T C"], fast: bool = True, stride: int = 1,
        mask: Tensor | None = None,
    ) -> Float[Tensor, "batch T_q C"]:
        B, T, C = a.shape
        hs = C // self.n_head
        if stride == 1:
            q, k, v = self.W_QKV(a).split(C, dim=2)  # one (C, 3C) product: (B, T, C) each
        else:  # queries only at positions 0, stride, 2 stride, ...; keys and values everywhere
            W_Q, W_KV = self.W_QKV.weight.split([C, 2 * C])
            b_Q, b_KV = self.W_QKV.bias.split([C, 2 * C])
            q = F.linear(a[:, ::stride], W_Q, b_Q)  # (B, T_q, C)
            k, v = F.linear(a, W_KV, b_KV).split(C, dim=2)  # (B, T, C) each
        T_q = q.shape[1]
        q = q.view(B, T_q, self.n_head, hs).transpose(1, 2)  # (B, nh, T_q, hs)
        k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (k, v))  # (B, nh, T, hs)
        if mask is not None:  # a caller's own (T, T) boolean mask, True where allowed
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        elif not fast:
            out = causal_attention_reference(q, k, v, stride)
        elif stride == 1:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.allowed[:T:stride, :T])
        return self.W_O(out.transpose(1, 2).reshape(B, T_q, C))  # (B, T_q, C)

    def forward(
        self, h: Float[Tensor, "batch T C"], fast: bool = True, stride: int = 1,
        mask: Tensor | None = None,
    ) -> Float[Tensor, "batch T_q C"]:
        """``mask`` (boolean ``(T, T)``, ``True`` where attention is allowed) replaces the causal
        mask, for token layouts that are not a plain sequence (``stride`` must then be 1)."""
        if mask is not None and stride != 1:
            raise ValueError(f"a custom mask needs stride 1, got stride={stride}")
        h_q = h if stride == 1 else h[:, ::stride]
        h_q = h_q + self.attention(self.ln_1(h), fast, stride, mask)
        return h_q + self.mlp(self.ln_2(h_q))


class GPT(nn.Module):
    r"""GPT-2-style regression transformer: ``predict(X, y)`` returns :math:`\hat y_i` for every :math:`i`."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.read_in = nn.Linear(cfg.d + 1, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.read_out = nn.Linear(cfg.n_embd, 1)
        gpt2_init_(self)

    def forward(
        self, tokens: Float[Tensor, "batch T d_plus_1"], fast: bool = True, stride: int = 1
    ) -> Float[Tensor, "batch T_out"]:
        """Scalar outputs at positions ``0, stride, 2 stride, ...`` (all positions by default)."""
        T = tokens.shape[1]
        if T > self.cfg.n_positions:
            raise ValueError(f"prompt of {T} tokens is longer than n_positions={self.cfg.n_positions}")
        if stride < 1:
            raise ValueError(f"stride must be >= 1, got {stride}")
        h = self.read_in(tokens) + self.wpe.weight[:T]  # (B, T, C): token + learned position
        for block in self.blocks[:-1]:
            h = block(h, fast)
        h = self.blocks[-1](h, fast, stride)  # (B, T_out, C): only the positions read out
        return self.read_out(self.ln_f(h))[..., 0]

    def predict(self, X: Float[Tensor, "batch N d"], y: Float[Tensor, "batch N"], fast: bool = True) -> Float[Tensor, "batch N"]:
        """Prediction of each :math:`y_i` from the prompt before it (outputs at the :math:`x`-tokens).

        Equal to ``self(interleave(X, y))[:, ::2]``, with less work: no prediction reads the
        last label :math:`y_N`, so its token is left out (by causality no other output
        changes), and the last block runs its queries and MLP at the :math:`x`-tokens only.
        """
        return self(interleave(X, y)[:, :-1], fast, stride=2)  # 2N - 1 tokens in, N outputs


def gpt2_init_(model: GPT, std: float = 0.02) -> None:
    r"""GPT-2's initialisation of the blocks and positions, in place (``radford2019language``).

    Every weight of the blocks and every position embedding is drawn from
    :math:`\mathcal N(0, \mathrm{std}^2)` and every bias of the blocks is 0, except that the two
    projections that write into the residual stream, :math:`W_O` and the MLP's second layer,
    have standard deviation :math:`\mathrm{std}/\sqrt{2L}` for :math:`L` blocks. Radford et al.
    scale the weights of the residual layers by :math:`1/\sqrt{N}`, :math:`N` the number of
    residual layers; Hugging Face's ``GPT2Model``, which Garg et al. train, counts two per block
    and draws the rest with ``std = 0.02`` (its default). LayerNorms start at the identity; the
    read-in and read-out keep :class:`torch.nn.Linear`'s default, as in Garg et al.'s model, whose
    read-in and read-out sit outside the ``GPT2Model``. The draws come from torch's global
    generator, seeded before the model is built. Like Hugging Face's, the residual projections
    are drawn twice (first with ``std``); the second draw is the one kept.
    """
    L = len(model.blocks)
    with torch.no_grad():
        nn.init.normal_(model.wpe.weight, std=std)
        for block in model.blocks:
            for linear in (block.W_QKV, block.W_O, block.mlp[0], block.mlp[2]):
                nn.init.normal_(linear.weight, std=std)
                nn.init.zeros_(linear.bias)
            for linear in (block.W_O, block.mlp[2]):  # the residual projections
                nn.init.normal_(linear.weight, std=std / math.sqrt(2 * L))


def adam(parameters, lr: float) -> torch.optim.Adam:
    """Adam as every trainer of the chapter uses it: the fused kernel where PyTorch has one.

    The fused kernel (CPU and CUDA) updates all parameters at once instead of looping over
    them in Python; the update is Adam's, equal to the loop's up to floating-point rounding.
    """
    params = list(parameters)
    fused = bool(params) and all(p.device.type in ("cpu", "cuda") for p in params)
    return torch.optim.Adam(params, lr=lr, fused=fused)


def train_icl(
    model: nn.Module,
    sample: Callable[[int, torch.Generator], tuple[Tensor, ...]],
    *,
    n_steps: int,
    batch: int,
    lr: float,
    generator: torch.Generator,
    warmup: int = 0,
    decay: bool = False,
    clip: float | None = None,
    curriculum: Callable[[int], dict] | None = None,
    skip_nonfinite: bool = False,
    desc: str = "training",
) -> list[float]:
    r"""Adam on the prefix-averaged squared error; ``sample(batch, generator) -> (X, y)``; returns the loss curve.

    The same loop trains every model of the chapter whose ``predict(X, y)`` returns
    predictions of shape ``(batch, N)`` (all prefixes) or ``(batch,)`` (the last example).
    ``warmup`` steps of linear learning-rate warm-up; ``decay`` lowers the rate linearly to 0;
    ``clip`` caps the gradient norm (deep linear attention is cubic in its weights and can diverge without it).
    ``curriculum(step)`` returns keyword arguments for the sampler, ``sample(batch, generator, **curriculum(step))``
    (Garg et al.'s growing problem size: :class:`nnapprox.icl.Curriculum`).
    A sampler may return a third tensor ``weight`` of shape ``(batch,)``: the loss is then
    :math:`\frac1B\sum_b \mathrm{weight}_b\,\overline{(\hat y_b - y_b)^2}` (the bar averages over prefixes).
    ``skip_nonfinite`` leaves the weights and Adam's moments untouched on a step whose loss or
    gradient norm is not finite (as a mixed-precision loss scaler does). The returned curve keeps
    every step's loss, so a non-finite entry marks a skipped step; a step skipped because only its
    gradient overflowed has a finite entry. A model whose output is a polynomial of high degree in
    its input (ReLU attention stacked six deep) can overflow on one rare batch, and one such step
    would otherwise turn every weight into NaN. The check costs one device synchronisation per step.
    """
    if n_steps < 0 or batch < 1 or lr <= 0:
        raise ValueError(f"need n_steps >= 0, batch >= 1, lr > 0; got {n_steps}, {batch}, {lr}")
    opt = adam(model.parameters(), lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: min(1.0, (t + 1) / max(warmup, 1)) * (1 - t / n_steps if decay else 1.0))
    losses = []
    model.train()
    for step in progress(range(n_steps), desc=desc):
        X, y, *weight = sample(batch, generator, **(curriculum(step) if curriculum is not None else {}))
        if len(weight) > 1 or (weight and weight[0].shape != (X.shape[0],)):
            raise ValueError("sample must return (X, y) or (X, y, weight) with weight of shape (batch,); got "
                             f"{2 + len(weight)} tensors" + (f", weight of shape {tuple(weight[0].shape)}" if weight else "")
                             + " (slice a task sampler's output with [:2])")
        pred = model.predict(X, y)
        target = y if pred.dim() == 2 else y[:, -1]
        if weight:
            err = (pred - target).pow(2)
            loss = (weight[0] * (err.mean(1) if err.dim() == 2 else err)).mean()
        else:
            loss = F.mse_loss(pred, target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        elif skip_nonfinite:
            norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
        if not skip_nonfinite or bool(torch.isfinite(loss) & torch.isfinite(norm)):
            opt.step()
        sched.step()
        losses.append(loss.detach())  # no .item() here: a per-step sync would stall a GPU's queue (skip_nonfinite pays one)
    model.eval()
    return torch.stack(losses).tolist() if losses else []
