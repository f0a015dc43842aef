r"""The Transformer block of Yun et al. (2020), exactly as written, and what it can represent.

Universal approximation chapter, section "Transformers" (``yun2020transformers``). A
sequence is a matrix :math:`X \in \mathbb R^{d\times n}` (one column per token). One block is

.. math::
   \mathrm{Attn}(X) &= X + \sum_{i=1}^{h} W_O^i W_V^i X\, \sigma\big[(W_K^i X)^\top W_Q^i X\big],\\
   \mathrm{FF}(X) &= \mathrm{Attn}(X) + W_2\, \mathrm{ReLU}\big(W_1 \mathrm{Attn}(X) + b_1 1_n^\top\big) + b_2 1_n^\top,

with :math:`\sigma` the column-wise softmax, :math:`W_Q^i, W_K^i, W_V^i \in \mathbb R^{m\times d}`,
:math:`W_O^i \in \mathbb R^{d\times m}`, :math:`W_1 \in \mathbb R^{r\times d}`,
:math:`W_2 \in \mathbb R^{d\times r}`. Every block is permutation equivariant,
:math:`t(XP) = t(X)P`; adding a positional encoding :math:`E \in \mathbb R^{d\times n}`,
:math:`g(X + E)`, removes that restriction.

Tensors are batched: ``X`` has shape ``(batch, d, n)``; a block's weights are a dict.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from ..progress import progress
from nnapprox import rng

Block = dict[str, Tensor]


def init_block(d: int, h: int, m: int, r: int, generator: torch.Generator, dtype: torch.dtype = torch.float32) -> Block:
    r"""Random block weights: entries :math:`\mathcal N(0, 1/\text{fan-in})`, biases zero."""
    if min(d, h, m, r) < 1:
        raise ValueError(f"d, h, m and r must be >= 1, got d={d}, h={h}, m={m}, r={r}")
    randn = lambda *shape: rng.randn(*shape, generator=generator, dtype=dtype)  # noqa: E731
    return {
        "W_Q": randn(h, m, d) / math.sqrt(d),
        "W_K": randn(h, m, d) / math.sqrt(d),
        "W_V": randn(h, m, d) / math.sqrt(d),
        "W_O": randn(h, d, m) / math.sqrt(m * h),
        "W_1": randn(r, d) / math.sqrt(d),
        "b_1": torch.zeros(r, dtype=dtype),
        "W_2": randn(d, r) / math.sqrt(r),
        "b_2": torch.zeros(d, dtype=dtype),
    }


def attention_layer(block: Block, X: Float[Tensor, "batch d n"]) -> Float[Tensor, "batch d n"]:
    r""":math:`\mathrm{Attn}(X) = X + \sum_i W_O^i W_V^i X \sigma[(W_K^i X)^\top W_Q^i X]` (softmax over keys, per column)."""
    Q = torch.einsum("hmd,bdn->bhmn", block["W_Q"], X)
    K = torch.einsum("hmd,bdn->bhmn", block["W_K"], X)
    V = torch.einsum("hmd,bdn->bhmn", block["W_V"], X)
    scores = torch.einsum("bhmk,bhmq->bhkq", K, Q)  # (batch, h, n_keys, n_queries)
    P = torch.softmax(scores, dim=2)  # each column (query) sums to 1 over the keys
    heads = torch.einsum("bhmk,bhkq->bhmq", V, P)  # (batch, h, m, n)
    return X + torch.einsum("hdm,bhmn->bdn", block["W_O"], heads)


def feed_forward_layer(block: Block, A: Float[Tensor, "batch d n"]) -> Float[Tensor, "batch d n"]:
    r""":math:`\mathrm{FF}(A) = A + W_2 \mathrm{ReLU}(W_1 A + b_1 1^\top) + b_2 1^\top`, token by token."""
    hidden = torch.relu(torch.einsum("rd,bdn->brn", block["W_1"], A) + block["b_1"][None, :, None])
    return A + torch.einsum("dr,brn->bdn", block["W_2"], hidden) + block["b_2"][None, :, None]


def transformer(
    blocks: list[Block], X: Float[Tensor, "batch d n"], E: Float[Tensor, "d n"] | None = None
) -> Float[Tensor, "batch d n"]:
    r"""The network :math:`g(X + E) = t_L \circ \dots \circ t_1 (X + E)` (no positional encoding if ``E`` is None)."""
    Z = X if E is None else X + E
    for block in blocks:
        Z = feed_forward_layer(block, attention_layer(block, Z))
    return Z


def permutation_equivariance_error(
    blocks: list[Block], X: Float[Tensor, "batch d n"], generator: torch.Generator
) -> float:
    r"""Relative equivariance defect :math:`\max |g(XP) - g(X)P| / \max |g(X)|` over the batch.

    One random permutation :math:`P` per sequence. Exact arithmetic gives 0; in floating point
    the permuted sums are rounded in another order, so the defect is a few units of the
    format's machine epsilon (about :math:`10^{-7}` in float32).
    """
    n = X.shape[2]
    perms = torch.stack([rng.randperm(n, generator=generator) for _ in range(X.shape[0])])  # (batch, n)
    index = perms[:, None, :].expand(-1, X.shape[1], -1)
    out = transformer(blocks, X)
    return float((transformer(blocks, X.gather(2, index)) - out.gather(2, index)).abs().max() / out.abs().max())


# ------------------------------------------------------------------- the "reverse" task
def reverse_batch(
    batch: int, d: int, d_x: int, n: int, generator: torch.Generator
) -> tuple[Float[Tensor, "batch d n"], Float[Tensor, "batch d n"]]:
    r"""Inputs with i.i.d. :math:`\mathcal N(0, 1)` tokens in the first ``d_x`` rows (zeros below) and targets :math:`XJ` (columns reversed)."""
    if not 1 <= d_x <= d:
        raise ValueError(f"need 1 <= d_x <= d, got d_x={d_x}, d={d}")
    X = torch.zeros(batch, d, n)
    X[:, :d_x] = rng.randn(batch, d_x, n, generator=generator)
    return X, X.flip(2)


def best_equivariant_reverse_error(n: int) -> float:
    r"""Smallest normalised MSE :math:`\mathbb E\|g(X) - XJ\|^2 / \mathbb E\|X\|^2` of any permutation-equivariant ``g``.

    For i.i.d. tokens and even :math:`n`, an equivariant map sees token :math:`x_j` and the
    multiset of tokens but not the position :math:`j`; given these, the token that must land in
    column :math:`j` is equally likely to be any of the other :math:`n-1`. The best guess is their
    mean, with normalised error :math:`(n-2)/(n-1)`.
    """
    if n < 2 or n % 2:
        raise ValueError(f"the closed form needs an even sequence length n >= 2, got {n}")
    return (n - 2) / (n - 1)


def train_reverse(
    generator: torch.Generator,
    *,
    positional: bool,
    d: int = 8,
    d_x: int = 4,
    n: int = 4,
    n_blocks: int = 2,
    h: int = 2,
    m: int = 8,
    r: int = 64,
    batch: int = 256,
    n_steps: int = 2000,
    lr: float = 3e-3,
    device: torch.device | str = "cpu",
) -> tuple[list[Block], Tensor | None, Tensor]:
    r"""Train a Transformer (with a learned :math:`E` iff ``positional``) to reverse sequences; Adam, fresh batches.

    Returns ``(blocks, E, losses)`` where ``losses`` is the normalised training MSE per step.
    """
    dev = torch.device(device)
    blocks = [{k: v.to(dev).requires_grad_(True) for k, v in init_block(d, h, m, r, generator).items()} for _ in range(n_blocks)]
    E = (0.1 * rng.randn(d, n, generator=generator)).to(dev).requires_grad_(True) if positional else None
    params = [p for b in blocks for p in b.values()] + ([E] if E is not None else [])
    opt = torch.optim.Adam(params, lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, n_steps)
    losses = torch.empty(n_steps)
    for t in progress(range(n_steps), desc="reverse" + (" + E" if positional else "")):
        X, Y = reverse_batch(batch, d, d_x, n, generator)
        X, Y = X.to(dev), Y.to(dev)
        loss = ((transformer(blocks, X, E) - Y) ** 2).sum() / (Y**2).sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        schedule.step()
        losses[t] = loss.detach()
    detached = [{k: v.detach() for k, v in b.items()} for b in blocks]
    return detached, (E.detach() if E is not None else None), losses


@torch.no_grad()
def reverse_sequence_errors(
    blocks: list[Block], E: Tensor | None, generator: torch.Generator, *, d: int, d_x: int, n: int, n_test: int = 4096
) -> tuple[Float[Tensor, " n_test"], Float[Tensor, " n_test"]]:
    r"""Per fresh sequence, :math:`\|g(X+E) - XJ\|^2` and :math:`\|XJ\|^2` (float64), for sampling errors.

    The theorem of Exercise ``ex-universal-reverse`` bounds the expectation of
    :math:`D = \|g(X) - XJ\|^2 - \tfrac{n-2}{n-1}\|XJ\|^2` below by 0 for every equivariant
    ``g``; the mean of ``D`` over ``n_test`` i.i.d. sequences estimates it with standard error
    ``D.std() / sqrt(n_test)``.
    """
    if n_test < 2:
        raise ValueError(f"n_test must be >= 2 (a standard error needs two sequences), got {n_test}")
    X, Y = reverse_batch(n_test, d, d_x, n, generator)
    dev = blocks[0]["W_Q"].device
    X, Y = X.to(dev), Y.to(dev)
    err = ((transformer(blocks, X, E) - Y) ** 2).sum((1, 2))
    return err.double().cpu(), (Y**2).sum((1, 2)).double().cpu()


@torch.no_grad()
def reverse_test_error(
    blocks: list[Block], E: Tensor | None, generator: torch.Generator, *, d: int, d_x: int, n: int, n_test: int = 4096
) -> float:
    """Normalised test MSE :math:`\\sum\\|g(X+E) - XJ\\|^2 / \\sum\\|XJ\\|^2` on fresh sequences."""
    X, Y = reverse_batch(n_test, d, d_x, n, generator)
    dev = blocks[0]["W_Q"].device
    X, Y = X.to(dev), Y.to(dev)
    return float(((transformer(blocks, X, E) - Y) ** 2).sum() / (Y**2).sum())
