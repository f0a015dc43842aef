r"""Random Markov chains in context: the Bayes predictor, its unigram baseline and a token GPT.

Chapter "Universal prediction and decision making in context", section "A transformer as the
Bayes predictor for first-order chains" (``edelman2024evolution``). A prompt is a sequence
:math:`x_1, \dots, x_T` over :math:`S` states from a Markov chain whose transition matrix is
drawn afresh for every prompt, each row independently from the uniform distribution on the
simplex (Dirichlet with all parameters 1). Under this prior the Bayes-optimal prediction of
:math:`x_{t+1}` from :math:`x_{1:t}` is the posterior-mean transition row of the current state
(Laplace's rule per state),

.. math:: p(x_{t+1} = j \mid x_{1:t}) = \frac{n_t(x_t, j) + 1}{n_t(x_t) + S},

with :math:`n_t(i, j)` the number of transitions :math:`i \to j` in :math:`x_{1:t}` and
:math:`n_t(i) = \sum_j n_t(i, j)`; the first symbol is uniform, independent of the chain, which
makes this rule exactly Bayes (Edelman et al. draw it from the chain's stationary distribution,
under which the rule is close to but not exactly Bayes). The *unigram* predictor, the
intermediate stage Edelman et al. observe (after uniform predictions, before the bigram rule),
uses the symbol counts alone:
:math:`(m_t(j) + 1)/(t + S)`. A trained causal transformer (:class:`TokenGPT`) is compared
with both by its log loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from .. import rng
from ..icl.gpt import Block, GPTConfig, adam
from ..progress import progress


def dirichlet_chains(batch: int, S: int, generator: torch.Generator) -> Float[Tensor, "batch S S"]:
    r"""Transition matrices with rows uniform on the simplex: normalised standard exponentials."""
    if batch < 1 or S < 2:
        raise ValueError(f"need batch >= 1 and S >= 2 states; got batch={batch}, S={S}")
    E = -torch.log1p(-rng.rand(batch, S, S, generator=generator, dtype=torch.float64))  # Exp(1)
    return (E / E.sum(-1, keepdim=True)).float()


def sample_chains(P: Float[Tensor, "batch S S"], T: int, generator: torch.Generator) -> Int[Tensor, "batch T"]:
    """``T`` symbols of each chain ``P[b]``, the first uniform over the states."""
    B, S, _ = P.shape
    if T < 1:
        raise ValueError(f"need T >= 1 symbols, got {T}")
    u = rng.rand(B, T, generator=generator, dtype=torch.float64)
    x = torch.empty(B, T, dtype=torch.long)
    x[:, 0] = (u[:, 0] * S).long().clamp(max=S - 1)
    cum = P.double().cumsum(-1)  # (B, S, S)
    rows = torch.arange(B)
    for t in range(1, T):  # inverse-CDF draw from the current state's row
        c = cum[rows, x[:, t - 1]]  # (B, S)
        x[:, t] = (c < u[:, t : t + 1]).sum(-1).clamp(max=S - 1)
    return x


def bigram_bayes_probs(x: Int[Tensor, "batch T"], S: int) -> Float[Tensor, "batch T S"]:
    r"""Posterior predictive :math:`p(x_{t+1} \mid x_{1:t})` for every :math:`t` (row ``t`` predicts ``x[:, t]``).

    Row 0 is uniform; row :math:`t \ge 1` is :math:`(n(x_{t-1}, \cdot) + 1)/(n(x_{t-1}) + S)` with the
    transitions counted in ``x[:, :t]`` (0-based positions).
    """
    B, T = x.shape
    onehot = F.one_hot(x, S).double()  # (B, T, S)
    # transitions i -> j completed before position t: counts[b, t] = sum_{s < t} e_{x_{s-1}} e_{x_s}^T
    pair = onehot[:, :-1, :, None] * onehot[:, 1:, None, :]  # (B, T-1, S, S)
    counts = torch.cat([pair.new_zeros(B, 1, S, S), pair.cumsum(1)], 1)  # (B, T, S, S): before t
    probs = torch.full((B, T, S), 1.0 / S, dtype=torch.float64)
    if T > 1:
        prev = x[:, :-1]  # state whose row predicts position t = 1..T-1
        row = counts[:, :-1].gather(2, prev[:, :, None, None].expand(B, T - 1, 1, S))[:, :, 0]  # (B, T-1, S)
        probs[:, 1:] = (row + 1) / (row.sum(-1, keepdim=True) + S)
    return probs


def unigram_probs(x: Int[Tensor, "batch T"], S: int) -> Float[Tensor, "batch T S"]:
    r"""Laplace's rule on the symbol counts: row ``t`` is :math:`(m_t(\cdot) + 1)/(t + S)` over ``x[:, :t]``."""
    B, T = x.shape
    m = torch.cat([torch.zeros(B, 1, S, dtype=torch.float64), F.one_hot(x, S).double().cumsum(1)[:, :-1]], 1)
    return (m + 1) / (torch.arange(T, dtype=torch.float64)[None, :, None] + S)


def log_loss(probs: Float[Tensor, "batch T S"], x: Int[Tensor, "batch T"]) -> Float[Tensor, "batch T"]:
    """Per-position log loss in nats, :math:`-\\log p(x_t)`."""
    return -probs.gather(2, x[..., None])[..., 0].log()


@dataclass(frozen=True)
class TokenGPTConfig:
    """``S`` symbols, ``n_layer`` pre-LN blocks of width ``n_embd`` with ``n_head`` heads, ``T`` positions."""

    S: int = 3
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    T: int = 64


class TokenGPT(nn.Module):
    """Causal transformer over symbols (the blocks of :class:`nnapprox.icl.GPT`): next-symbol logits at every position."""

    def __init__(self, S: int = 3, n_layer: int = 2, n_embd: int = 64, n_head: int = 4, T: int = 64) -> None:
        super().__init__()
        if min(S, n_layer, n_embd, n_head, T) < 1 or S < 2:
            raise ValueError(f"need S >= 2 and positive sizes; got S={S}, n_layer={n_layer}, n_embd={n_embd}, "
                             f"n_head={n_head}, T={T}")
        self.cfg = TokenGPTConfig(S, n_layer, n_embd, n_head, T)
        block_cfg = GPTConfig(d=1, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_positions=T)
        self.wte = nn.Embedding(S, n_embd)
        self.wpe = nn.Embedding(T, n_embd)
        self.blocks = nn.ModuleList(Block(block_cfg) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, S)

    def forward(self, x: Int[Tensor, "batch T"]) -> Float[Tensor, "batch T S"]:
        """Logits of :math:`x_{t+1}` from :math:`x_{1:t}` at position ``t`` (0-based)."""
        T = x.shape[1]
        if T > self.cfg.T:
            raise ValueError(f"sequence of {T} symbols is longer than T={self.cfg.T}")
        h = self.wte(x) + self.wpe.weight[:T]  # (B, T, C)
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))

    def probs(self, x: Int[Tensor, "batch T"]) -> Float[Tensor, "batch T S"]:
        """Predictive probabilities in the layout of :func:`bigram_bayes_probs`: row 0 uniform, row ``t`` from ``x[:, :t]``."""
        B, T = x.shape
        p = self(x[:, :-1]).double().softmax(-1)  # (B, T-1, S): predicts positions 1..T-1
        return torch.cat([torch.full((B, 1, self.cfg.S), 1.0 / self.cfg.S, dtype=torch.float64), p], 1)


def train_token_gpt(model: TokenGPT, s: dict[str, Any], generator: torch.Generator) -> list[float]:
    """Adam on the mean next-symbol cross-entropy over fresh random chains; returns the loss per step."""
    opt = adam(model.parameters(), s["lr"])
    n = s["steps"]
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: min(1.0, (t + 1) / max(s["warmup"], 1)) * (1 - t / n if s["decay"] else 1.0))
    losses = []
    model.train()
    for _ in progress(range(n), desc="markov chains"):
        x = sample_chains(dirichlet_chains(s["batch"], s["S"], generator), s["T"], generator)
        logits = model(x[:, :-1])  # (B, T-1, S)
        loss = F.cross_entropy(logits.reshape(-1, s["S"]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.detach())
    model.eval()
    return torch.stack(losses).tolist() if losses else []


def forward_with_attention(
    model: TokenGPT, x: Int[Tensor, "batch T"], ablate: Sequence[tuple[int, int]] = ()
) -> tuple[Float[Tensor, "batch T S"], Float[Tensor, "layer batch head T T"]]:
    r"""Logits of :meth:`TokenGPT.forward` and every head's attention probabilities.

    The blocks' computation written out: in block :math:`\ell` head :math:`h` attends with
    :math:`A^{\ell h}_{ts} = \mathrm{softmax}_s(q_t^\top k_s/\sqrt{d_k})` over :math:`s \le t`, and
    its output :math:`\sum_s A^{\ell h}_{ts} v_s` enters the output projection. Every pair
    ``(l, h)`` in ``ablate`` sets head ``h`` of block ``l`` to zero output (a knock-out: the other
    heads and the rest of the network unchanged). Without ``ablate`` the logits equal ``model(x)``.
    """
    B, T = x.shape
    L = len(model.blocks)
    if T > model.cfg.T:
        raise ValueError(f"sequence of {T} symbols is longer than T={model.cfg.T}")
    ablate = [tuple(pair) for pair in ablate]
    if any(len(p) != 2 or not (0 <= p[0] < L and 0 <= p[1] < model.cfg.n_head) for p in ablate):
        raise ValueError(f"ablate must hold (layer, head) pairs with layer in [0, {L}) and head in "
                         f"[0, {model.cfg.n_head}); got {ablate}")
    h = model.wte(x) + model.wpe.weight[:T]  # (B, T, C)
    C, nh = h.shape[-1], model.cfg.n_head
    hs = C // nh
    future = torch.ones(T, T, dtype=torch.bool).triu(1)  # s > t: not attended
    maps = []
    for layer, block in enumerate(model.blocks):
        q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in block.W_QKV(block.ln_1(h)).split(C, 2))
        A = (q @ k.transpose(-1, -2) / math.sqrt(hs)).masked_fill(future, float("-inf")).softmax(-1)
        out = A @ v  # (B, nh, T, hs)
        off = [head for lay, head in ablate if lay == layer]
        if off:
            out = out.clone()
            out[:, off] = 0.0
        h = h + block.W_O(out.transpose(1, 2).reshape(B, T, C))
        h = h + block.mlp(block.ln_2(h))
        maps.append(A)
    return model.head(model.ln_f(h)), torch.stack(maps)


def induction_targets(x: Int[Tensor, "batch T"]) -> tuple[Float[Tensor, "batch T T"], ...]:
    r"""Where a previous-token head, a statistical induction head and a same-symbol head would attend.

    ``prev[b, t, s] = 1`` iff :math:`s = t - 1`; ``succ[b, t, s] = 1`` iff :math:`1 \le s \le t`
    and :math:`x_{s-1} = x_t`: the positions right after an earlier occurrence of the current
    symbol, whose symbols are the transitions out of the current state that the Bayes predictor
    counts (Edelman et al.'s statistical induction head reads them); ``same[b, t, s] = 1`` iff
    :math:`s \le t` and :math:`x_s = x_t`, the positions a single layer can find by comparing
    symbols (0-based positions; row ``t`` is the query).
    """
    B, T = x.shape
    t = torch.arange(T)
    causal = (t[None, :] <= t[:, None]).float()  # (T, T): s <= t
    prev = (t[None, :] == t[:, None] - 1).float().expand(B, T, T)
    succ = torch.zeros(B, T, T)
    succ[:, :, 1:] = (x[:, :, None] == x[:, None, :-1]).float()  # x_t == x_{s-1}
    same = (x[:, :, None] == x[:, None, :]).float() * causal
    return prev, succ * causal, same


def expected_row_entropy(S: int) -> float:
    r"""Expected entropy (nats) of a row uniform on the simplex, :math:`H_S - 1` with :math:`H_S = \sum_{i\le S} 1/i`.

    For a Dirichlet(1, ..., 1) row, :math:`\mathbb E[-\sum_j p_j \log p_j] = \psi(S+1) - \psi(2) = H_S - 1`:
    the expected loss of the predictor that knows the chain at a state chosen independently of
    the chain (the first transition). Along a sequence the visited states depend on the rows, so
    the oracle's loss averaged over positions differs (it is lower for :math:`S = 3`).
    """
    if S < 2:
        raise ValueError(f"need S >= 2, got {S}")
    return sum(1.0 / i for i in range(1, S + 1)) - 1.0
