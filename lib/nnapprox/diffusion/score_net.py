r"""The function-approximation baseline: a plain MLP from the field :math:`h` to the posterior mean.

Chapter "Diffusion models as variational inference", sections 4–6.

:math:`\hat m(h) = \tanh(W_3\,\sigma(W_2\,\sigma(W_1 h + b_1) + b_2) + b_3)`: it knows that
:math:`m \in [-1,1]^d` (the output tanh) and nothing about the Ising structure.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn
from nnapprox import rng


class MLPDenoiser(nn.Module):
    """Two hidden ReLU layers of width ``width``; input and output of size ``d``."""

    def __init__(self, d: int, width: int, dtype: torch.dtype = torch.float32,
                 generator: torch.Generator | None = None) -> None:
        super().__init__()
        if d < 1 or width < 1:
            raise ValueError(f"need d >= 1 and width >= 1, got d={d}, width={width}")
        self.d, self.width = d, width
        sizes = [(d, width), (width, width), (width, d)]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in sizes:  # He initialisation, drawn from the given generator
            W = rng.randn(fan_out, fan_in, generator=generator, dtype=dtype) * math.sqrt(2.0 / fan_in)
            self.weights.append(nn.Parameter(W))
            self.biases.append(nn.Parameter(torch.zeros(fan_out, dtype=dtype)))

    def forward(self, h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        u = h
        for i, (W, b) in enumerate(zip(self.weights, self.biases)):
            u = u @ W.T + b
            u = torch.relu(u) if i < 2 else torch.tanh(u)
        return u

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def mlp_width_for(d: int, n_parameters: int) -> int:
    """The width whose :class:`MLPDenoiser` has the parameter count closest to ``n_parameters``."""
    count = lambda w: d * w + w + w * w + w + w * d + d  # noqa: E731
    return min(range(1, 4 * int(math.sqrt(n_parameters)) + 8), key=lambda w: abs(count(w) - n_parameters))
