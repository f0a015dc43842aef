r"""Width matters too: width-1 ReLU networks are monotone.

Chapter "Depth separation", section "Width matters too" (``lu2017expressive``,
``hanin2017approximating``).

With one unit per layer every layer is :math:`u \mapsto \sigma(w u + b)`, a monotone map
(non-decreasing if :math:`w \ge 0`, non-increasing otherwise), and compositions of monotone
maps are monotone. So a width-1 network of *any* depth is a monotone function of a scalar
input, and on the hat :math:`h = \sigma(t) = \max(0, 1 - |2x - 1|)`, the book's tent map
:math:`t(x) = 2\sigma(x) - 4\sigma(x - \frac12)` clipped at 0 (``book/notation.md``),
which goes :math:`0 \to 1 \to 0` on :math:`0, \frac12, 1`, its sup error is at least
:math:`\frac12`: a monotone :math:`f` has :math:`f(\frac12) \le f(1)` or
:math:`f(\frac12) \le f(0)`, and then :math:`\max(|1 - f(\tfrac12)|, |f(\cdot)|) \ge \tfrac12`.
Width 2 (= input dimension + 1) represents :math:`h` exactly (Hanin & Sellke 2017: for scalar
output the minimal width for universality in the sup norm is exactly :math:`d + 1`).
"""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .relu_net import Weights, relu_net


def hat(x: Tensor) -> Tensor:
    r"""Reference hat :math:`h(x) = \max(0, 1 - |2x - 1|) = \sigma(t(x))`: the tent map :math:`t` clipped at 0."""
    return torch.clamp(1 - (2 * x - 1).abs(), min=0)


def hat_width2_weights(dtype: torch.dtype = torch.float64) -> Weights:
    r"""An exact width-2 network for the hat: :math:`h = \sigma(t)` with the tent :math:`t(x) = 2\sigma(x) - 4\sigma(x - \tfrac12)`.

    Two hidden layers of width 2: the first makes the tent map :math:`t` (which is
    :math:`\le 0` outside [0, 1]), the second clips it at 0: :math:`h = \sigma(t)`.
    """
    kw = dict(dtype=dtype)
    return {
        "W0": torch.tensor([[1.0], [1.0]], **kw),
        "b0": torch.tensor([0.0, -0.5], **kw),
        "W1": torch.tensor([[2.0, -4.0], [0.0, 0.0]], **kw),
        "b1": torch.tensor([0.0, 0.0], **kw),
        "W2": torch.tensor([[1.0, 0.0]], **kw),
        "b2": torch.zeros(1, **kw),
    }


def sup_error(weights: Weights, x: Float[Tensor, " n"], target: Float[Tensor, " n"]) -> float:
    """:math:`\\max_i |f(x_i) - h(x_i)|` on the grid ``x``."""
    return float((relu_net(weights, x[:, None])[:, 0] - target).abs().max())


def is_monotone(values: Float[Tensor, " n"], atol: float = 0.0) -> bool:
    """Whether a sequence is non-decreasing or non-increasing (up to ``atol``)."""
    diff = values[1:] - values[:-1]
    return bool((diff >= -atol).all() or (diff <= atol).all())
