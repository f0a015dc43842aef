r"""A program that runs for :math:`T` steps is a network of depth :math:`T`: cellular automata as ReLU nets.

Chapter "Depth separation", section "Parity and circuits" (``sipser2012introduction``,
Section 9.3: a machine running in time :math:`T(n)` has circuits of size :math:`O(T(n)^2)`).

An elementary cellular automaton updates a row of :math:`W` bits in parallel,
:math:`x_i' = r(x_{i-1}, x_i, x_{i+1})`, where the rule number's bit
:math:`4x_{i-1} + 2x_i + x_{i+1}` gives the new value and cells outside the row read 0.
(Rule 110 is Turing complete, so this is a genuine model of computation.) One step is one
hidden layer: for every cell and every neighbourhood pattern :math:`p \in \{0,1\}^3` with
:math:`r(p) = 1`, the unit

.. math::  \sigma\Big(\sum_{j} s_j y_j - (|p| - 1)\Big), \qquad s_j = 2p_j - 1,

is 1 exactly when the three neighbours :math:`y` equal :math:`p` and 0 otherwise (on bits);
the new bit is the sum of the cell's units, read linearly by the next layer. :math:`T` steps
on :math:`W` cells give a network of depth :math:`T` with at most :math:`8W` units per layer
and :math:`O(TW)` nonzero weights; a computation confined to the light cone of :math:`T`
steps needs :math:`W = O(T)`, hence size :math:`O(T^2)`: the tableau simulation.
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights


def _check_rule(rule: int) -> None:
    if not isinstance(rule, int) or not 0 <= rule <= 255:
        raise ValueError(f"rule must be an integer in 0..255, got {rule!r}")


def automaton_step(x: Float[Tensor, "batch W"], rule: int) -> Float[Tensor, "batch W"]:
    r"""Reference update :math:`x_i' = r(x_{i-1}, x_i, x_{i+1})` with 0 outside the row."""
    _check_rule(rule)
    xi = x.round().long()
    pad = torch.nn.functional.pad(xi, (1, 1))  # (batch, W + 2), zeros at both ends
    index = 4 * pad[:, :-2] + 2 * pad[:, 1:-1] + pad[:, 2:]
    return ((rule >> index) & 1).to(x.dtype)


def automaton_network_weights(rule: int, W: int, T: int, dtype: torch.dtype = torch.float64) -> Weights:
    r"""ReLU network with :math:`T` hidden layers computing :math:`T` steps of the automaton on :math:`W` cells.

    Hidden layer :math:`\ell` has one unit per (cell, pattern with :math:`r(p) = 1`); the
    output layer sums each cell's units. Inputs and outputs are 0/1 rows of length :math:`W`.
    """
    _check_rule(rule)
    if not isinstance(W, int) or W < 1 or not isinstance(T, int) or T < 1:
        raise ValueError(f"need integers W >= 1 and T >= 1, got W={W!r}, T={T!r}")
    patterns = [p for p in range(8) if (rule >> p) & 1]
    if not patterns:
        raise ValueError(f"rule {rule} maps everything to 0: no units to build")
    m = len(patterns)
    read = torch.zeros(W * m, W, dtype=dtype)  # (units, cells): pre-activation from the bits
    bias = torch.zeros(W * m, dtype=dtype)
    for i in range(W):
        for q, p in enumerate(patterns):
            bits = ((p >> 2) & 1, (p >> 1) & 1, p & 1)  # (left, centre, right)
            u = i * m + q
            bias[u] = -(sum(bits) - 1)
            for offset, b in zip((-1, 0, 1), bits):
                if 0 <= i + offset < W:
                    read[u, i + offset] = 2 * b - 1
    collect = torch.kron(torch.eye(W, dtype=dtype), torch.ones(1, m, dtype=dtype))  # (W, W*m)
    weights: Weights = {"W0": read.clone(), "b0": bias.clone()}
    for ell in range(1, T):
        weights[f"W{ell}"], weights[f"b{ell}"] = read @ collect, bias.clone()
    weights[f"W{T}"], weights[f"b{T}"] = collect, torch.zeros(W, dtype=dtype)
    return weights
