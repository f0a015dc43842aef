r"""Parity with ReLU networks and with Boolean circuits.

Chapter "Depth separation", section "Parity and circuits" (``hastad1987computational``).

:math:`\mathrm{PAR}_n(x) = x_1 \oplus \dots \oplus x_n` for :math:`x \in \{0,1\}^n`. Three
constructions:

* **XOR tree** (depth :math:`\lceil \log_2 n \rceil`, :math:`n - 1` gates): on bits,
  :math:`a \oplus b = \sigma(a + b) - 2\sigma(a + b - 1)`, so each gate is 2 ReLUs and the
  tree is a ReLU network of depth :math:`\lceil \log_2 n \rceil`.
* **One hidden layer of** :math:`n` **ReLUs**: parity depends only on
  :math:`s = \sum_i x_i \in \{0..n\}`, and the zig-zag through :math:`(k, k \bmod 2)` is
  :math:`s + \sum_{k=1}^{n-1} 2(-1)^k \sigma(s - k)`. So for ReLU networks parity is *not*
  hard in depth 2: Håstad's theorem is about AND/OR circuits.
* **Depth-2 DNF** (OR of ANDs of literals): every term must be a full minterm, so it needs
  all :math:`2^{n-1}` odd-weight minterms (elementary). Håstad (1986): any depth-:math:`k`
  circuit of unbounded fan-in AND/OR gates (NOT at the inputs) for parity has size
  :math:`2^{\Omega(n^{1/(k-1)})}`.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights


def all_bit_strings(n: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, "two_to_n n"]:
    """Every :math:`x \\in \\{0,1\\}^n`, row :math:`i` = binary digits of :math:`i` (most significant first)."""
    if not isinstance(n, int) or not 1 <= n <= 24:
        raise ValueError(f"n must be an integer in 1..24, got {n!r}")
    i = torch.arange(2**n)
    return ((i[:, None] >> torch.arange(n - 1, -1, -1)[None, :]) & 1).to(dtype)


def parity(x: Float[Tensor, "batch n"]) -> Float[Tensor, " batch"]:
    """Reference parity :math:`\\sum_i x_i \\bmod 2`."""
    return x.sum(dim=1).remainder(2)


def xor_gate(a: Tensor, b: Tensor) -> Tensor:
    r""":math:`a \oplus b = \sigma(a + b) - 2\sigma(a + b - 1)` (exact on bits)."""
    return torch.relu(a + b) - 2 * torch.relu(a + b - 1)


def xor_tree(x: Float[Tensor, "batch n"]) -> tuple[Float[Tensor, " batch"], int, int]:
    """Parity by a balanced tree of XOR gates; returns ``(output, depth, n_gates)``.

    Each round XORs neighbours pairwise (an odd one out passes through), so the depth is
    :math:`\\lceil \\log_2 n \\rceil` and there are :math:`n - 1` gates.
    """
    layer, depth, gates = [x[:, i] for i in range(x.shape[1])], 0, 0
    while len(layer) > 1:
        nxt = [xor_gate(layer[i], layer[i + 1]) for i in range(0, len(layer) - 1, 2)]
        gates += len(nxt)
        if len(layer) % 2:
            nxt.append(layer[-1])
        layer, depth = nxt, depth + 1
    return layer[0], depth, gates


def parity_one_hidden_layer_weights(n: int, dtype: torch.dtype = torch.float64) -> Weights:
    r"""One hidden layer of :math:`n` ReLUs, :math:`\sigma(s - k)` for :math:`k = 0..n-1`, computing parity."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    k = torch.arange(n, dtype=dtype)
    out = torch.where(k == 0, torch.ones_like(k), 2.0 * (-1.0) ** k)
    return {"W0": torch.ones(n, n, dtype=dtype), "b0": -k, "W1": out[None, :], "b1": torch.zeros(1, dtype=dtype)}


def parity_dnf_terms(n: int, dtype: torch.dtype = torch.float64) -> Float[Tensor, "terms n"]:
    """The :math:`2^{n-1}` odd-weight minterms (one row per term: the bit string it accepts)."""
    x = all_bit_strings(n, dtype)
    return x[parity(x) == 1]


def dnf_weights(terms: Float[Tensor, "terms n"]) -> Weights:
    r"""A DNF as a depth-2 ReLU network: term :math:`v` is :math:`\sigma(\sum_i (2v_i - 1) x_i - |v| + 1)`.

    The term unit is 1 exactly on :math:`x = v` and 0 on every other bit string; the OR of
    disjoint minterms is their sum.
    """
    signs = 2 * terms - 1
    return {
        "W0": signs,
        "b0": 1 - terms.sum(dim=1),
        "W1": torch.ones(1, terms.shape[0], dtype=terms.dtype),
        "b1": torch.zeros(1, dtype=terms.dtype),
    }


def xor_tree_size(n: int) -> tuple[int, int]:
    r"""``(depth, gates)`` of the XOR tree: :math:`(\lceil \log_2 n \rceil, n - 1)`."""
    return math.ceil(math.log2(n)) if n > 1 else 0, n - 1
