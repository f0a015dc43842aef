r"""The unrolled-VI ResNet: one residual block per mean-field step, tanh realised by ReLUs.

Chapter "Diffusion models as variational inference", sections 3–4 and 7 ({cite}`mei2023deep`).

The chapter's ResNet (our construction, in the spirit of {cite}`mei2023deep`) is

.. math::  u^{\ell} = u^{\ell-1} + W_1^{\ell}\,\sigma(W_2^{\ell} u^{\ell-1}), \qquad u^0 = W_{\mathrm{in}}[h; 1],
           \qquad \hat m = W_{\mathrm{out}} u^L,

with :math:`\sigma` = ReLU. With the state :math:`u = [m; h; 1]` a block computes one mean-field
step :math:`m \leftarrow \tanh(A_\ell m + \gamma_\ell h)`: its hidden units are

* ``M + 1`` ReLUs per coordinate, :math:`\sigma(v_i - b_k)` at knots
  :math:`b_k = -R + 2Rk/M`, whose combination :math:`c + \sum_k a_k \sigma(v - b_k)` is the
  piecewise-linear interpolant of tanh on :math:`[-R, R]` (constant outside), where
  :math:`v = A_\ell m + \gamma_\ell h`;
* two ReLUs :math:`\sigma(m_i), \sigma(-m_i)` that remove the old iterate
  (:math:`-m = -\sigma(m) + \sigma(-m)`), so the residual update *replaces* :math:`m`.

:class:`UnrolledVIResNet` stores only the block parameters
:math:`(A_\ell, \gamma_\ell, a_\ell, c_\ell)` (the weights the construction does not fix to 0/±1);
:func:`dense_blocks` expands them to the literal matrices :math:`W_1^\ell, W_2^\ell`, and
:func:`dense_forward` runs that ResNet, as a readable reference.
The hand-built weights come from :func:`unrolled_vi_weights`; trained weights from
:func:`init_weights` and :func:`nnapprox.diffusion.train_denoiser`.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn
from nnapprox import rng


def knots(M: int, R: float, dtype: torch.dtype = torch.float64) -> Float[Tensor, " knots"]:
    """The ``M + 1`` equispaced knots :math:`b_k = -R + 2Rk/M` of the ReLU tanh."""
    if M < 1 or R <= 0:
        raise ValueError(f"need M >= 1 and R > 0, got M={M}, R={R}")
    return torch.linspace(-R, R, M + 1, dtype=dtype)


def relu_tanh_weights(M: int, R: float, dtype: torch.dtype = torch.float64
                      ) -> tuple[Float[Tensor, " knots"], float]:
    r"""Weights ``(a, c)`` with :math:`c + \sum_k a_k \sigma(v - b_k)` = piecewise-linear tanh on ``M`` intervals.

    The interpolation error is at most :math:`\frac{(2R/M)^2}{8} \max|\tanh''| + (1 - \tanh R)`.
    """
    b = knots(M, R, dtype)
    slopes = torch.diff(torch.tanh(b)) / torch.diff(b)  # (M,)
    slopes = torch.cat([torch.zeros(1, dtype=dtype), slopes, torch.zeros(1, dtype=dtype)])
    a = torch.diff(slopes)  # (M+1,): change of slope at each knot
    return a, math.tanh(-R)


def relu_tanh(v: Float[Tensor, "*batch"], a: Float[Tensor, " knots"], c: float | Tensor,
              b: Float[Tensor, " knots"]) -> Float[Tensor, "*batch"]:
    r""":math:`c + \sum_k a_k \sigma(v - b_k)` applied entrywise (``a``, ``b``, ``c`` are moved to ``v``'s device).

    Evaluated without expanding the ``M + 1`` units: with the knots increasing and
    :math:`j(v) = \#\{k : b_k < v\}`, the sum is
    :math:`c + v \sum_{k < j(v)} a_k - \sum_{k < j(v)} a_k b_k`, two cumulative sums read at
    :math:`j(v)`: the same function and the same gradients (the ReLU's derivative taken 0 at 0),
    at a cost independent of ``M``. :func:`dense_forward` runs the literal ReLU units.
    """
    a, b = a.to(v), b.to(v)
    c = c.to(v) if isinstance(c, Tensor) else c
    j = torch.searchsorted(b, v.detach().contiguous())  # knots strictly below v, (*batch)
    zero = a.new_zeros(1)
    slope = torch.cat([zero, torch.cumsum(a, 0)])  # (knots + 1,): sum_{k < j} a_k
    offset = torch.cat([zero, torch.cumsum(a * b, 0)])  # sum_{k < j} a_k b_k
    flat = j.reshape(-1)
    return c + v * slope.gather(0, flat).view(j.shape) - offset.gather(0, flat).view(j.shape)


def relu_tanh_sup_error_bound(M: int, R: float) -> float:
    r"""Interpolation bound :math:`\frac{h^2}{8}\max|\tanh''| + 1 - \tanh R`, :math:`h = 2R/M`, :math:`\max|\tanh''| = 4/(3\sqrt3)`."""
    return (2 * R / M) ** 2 / 8 * 4 / (3 * math.sqrt(3)) + (1 - math.tanh(R))


class UnrolledVIResNet(nn.Module):
    r"""``L`` residual blocks, block :math:`\ell`: :math:`m \leftarrow m + \phi_\ell(A_\ell m + \gamma_\ell h) - m`.

    :math:`\phi_\ell = c_\ell + \sum_k a_{\ell k}\sigma(\cdot - b_k)` (``exact_tanh=True``
    replaces it by tanh itself). Input: the field :math:`h = \lambda_t z/\sigma_t^2`, shape
    ``(batch, d)``; output: the estimate :math:`\hat m` of the posterior mean, shape ``(batch, d)``.
    """

    def __init__(self, d: int, L: int, M: int, R: float = 4.0, dtype: torch.dtype = torch.float32,
                 exact_tanh: bool = False) -> None:
        super().__init__()
        if d < 1 or L < 1:
            raise ValueError(f"need d >= 1 and L >= 1, got d={d}, L={L}")
        self.d, self.L, self.M, self.R, self.exact_tanh = d, L, M, R, exact_tanh
        self.register_buffer("b", knots(M, R, dtype))
        self.A = nn.Parameter(torch.zeros(L, d, d, dtype=dtype))
        self.gamma = nn.Parameter(torch.ones(L, dtype=dtype))
        self.a = nn.Parameter(torch.zeros(L, M + 1, dtype=dtype))
        self.c = nn.Parameter(torch.zeros(L, dtype=dtype))

    def block(self, ell: int, m: Float[Tensor, "batch d"], h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        r"""Block :math:`\ell` (0-based): :math:`m \mapsto \phi_\ell(A_\ell m + \gamma_\ell h)`."""
        return self._block(m, h, self.A[ell], self.gamma[ell], self.a[ell], self.c[ell])

    def _block(self, m: Float[Tensor, "batch d"] | None, h: Float[Tensor, "batch d"], A: Float[Tensor, "d d"],
               gamma: Tensor, a: Float[Tensor, " knots"], c: Tensor) -> Float[Tensor, "batch d"]:
        v = gamma * h if m is None else m @ A.T + gamma * h  # None stands for m = 0
        phi = torch.tanh(v) if self.exact_tanh else relu_tanh(v, a, c, self.b)
        return phi  # = m + phi - relu(m) + relu(-m): the skip units cancel m (see dense_forward)

    def trajectory(self, h: Float[Tensor, "batch d"]) -> Float[Tensor, "L_plus_one batch d"]:
        r"""All block outputs :math:`\hat m^0 = 0, \hat m^1, \dots, \hat m^L` (the last one is ``forward(h)``)."""
        ms, m = [torch.zeros_like(h)], None  # None: m^0 = 0, as in forward
        for weights in self._block_weights():
            m = self._block(m, h, *weights)
            ms.append(m)
        return torch.stack(ms)

    def forward(self, h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        m = None  # m^0 = 0: the first block skips its product A_1 m^0
        for weights in self._block_weights():
            m = self._block(m, h, *weights)
        return m

    def _block_weights(self):
        """Per block ``(A_l, gamma_l, a_l, c_l)``, unbound once: the backward of ``unbind`` stacks the
        ``L`` gradients, where indexing in every block fills a zero ``(L, d, d)`` tensor per block."""
        return zip(self.A.unbind(0), self.gamma.unbind(0), self.a.unbind(0), self.c.unbind(0))

    def n_parameters(self) -> int:
        """Number of trainable scalars (the weights the construction does not fix)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def unrolled_vi_weights(A: Float[Tensor, "d d"], L: int, M: int, R: float = 4.0) -> dict[str, Tensor]:
    r"""Hand-built state dict: :math:`A_\ell = A`, :math:`\gamma_\ell = 1`, :math:`(a_\ell, c_\ell)` = ReLU tanh.

    With these weights block :math:`\ell` performs the mean-field step
    :math:`m^\ell = \tanh(A m^{\ell-1} + h)` up to the tanh interpolation error.
    """
    a, c = relu_tanh_weights(M, R, A.dtype)
    return {
        "b": knots(M, R, A.dtype).to(A.device),
        "A": A.expand(L, *A.shape).clone(),
        "gamma": torch.ones(L, dtype=A.dtype, device=A.device),
        "a": a.to(A.device).expand(L, M + 1).clone(),
        "c": torch.full((L,), c, dtype=A.dtype, device=A.device),
    }


def init_weights(d: int, L: int, M: int, R: float = 4.0, generator: torch.Generator | None = None,
                 dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    r"""Initial weights for training: small random :math:`A_\ell`, each :math:`\phi_\ell` the clip to :math:`[-1, 1]`.

    :math:`A_\ell \sim \mathcal N(0, 0.1^2/d)` entrywise, :math:`\gamma_\ell = 1`, and
    :math:`(a_\ell, c_\ell)` the ReLU form of :math:`\mathrm{clip}(v) = \sigma(v+1) - \sigma(v-1) - 1`
    (the knots closest to :math:`\pm 1`) plus :math:`\mathcal N(0, 0.1^2)` noise centred to sum
    to zero over the knots: the network knows that means lie in :math:`[-1,1]`, and nothing about
    :math:`A` or tanh.

    The centring matters. For :math:`v \ge R` every unit is active and :math:`\phi_\ell` has
    slope :math:`\sum_k a_{\ell k}`; with raw noise that slope has standard deviation
    :math:`0.1\sqrt{M+1}`, and since the fields :math:`h = \lambda_t z/\sigma_t^2` of small times
    are large, the network would start far outside :math:`[-1,1]`. With
    :math:`\sum_k a_{\ell k} = 0` each :math:`\phi_\ell` is constant outside :math:`[-R, R]`, as
    tanh nearly is.
    """
    b = knots(M, R, dtype)
    a = 0.1 * rng.randn(L, M + 1, generator=generator, dtype=dtype)
    a = a - a.mean(dim=1, keepdim=True)  # zero total slope: phi is flat beyond the last knot
    a[:, int(torch.argmin((b + 1).abs()))] += 1.0
    a[:, int(torch.argmin((b - 1).abs()))] -= 1.0
    return {
        "b": b,
        "A": 0.1 / d**0.5 * rng.randn(L, d, d, generator=generator, dtype=dtype),
        "gamma": torch.ones(L, dtype=dtype),
        "a": a,
        "c": torch.full((L,), -1.0, dtype=dtype),
    }


def dense_blocks(model: UnrolledVIResNet) -> list[tuple[Float[Tensor, "width hidden"], Float[Tensor, "hidden width"]]]:
    r"""The literal ResNet matrices :math:`(W_1^\ell, W_2^\ell)` acting on :math:`u = [m; h; 1]`.

    Width :math:`2d + 1`; hidden units: ``d * (M + 1)`` knot units (coordinate-major), then
    :math:`\sigma(m_i)`, :math:`\sigma(-m_i)` and one constant unit :math:`\sigma(1) = 1`.
    """
    d, M = model.d, model.M
    K = M + 1
    width, hidden = 2 * d + 1, d * K + 2 * d + 1
    eye = torch.eye(d, dtype=model.A.dtype, device=model.A.device)
    blocks = []
    for ell in range(model.L):
        W2 = torch.zeros(hidden, width, dtype=model.A.dtype, device=model.A.device)
        W1 = torch.zeros(width, hidden, dtype=model.A.dtype, device=model.A.device)
        # knot unit (i, k): sigma(A_i m + gamma h_i - b_k)
        W2[: d * K, :d] = model.A[ell].detach().repeat_interleave(K, dim=0)
        W2[: d * K, d:2 * d] = model.gamma[ell].detach() * eye.repeat_interleave(K, dim=0)
        W2[: d * K, 2 * d] = -model.b.repeat(d)
        W1[:d, : d * K] = torch.kron(eye, model.a[ell].detach()[None, :])
        # skip units sigma(m_i), sigma(-m_i) with weights -1, +1: subtract the old m
        W2[d * K: d * K + d, :d] = eye
        W2[d * K + d: d * K + 2 * d, :d] = -eye
        W1[:d, d * K: d * K + d] = -eye
        W1[:d, d * K + d: d * K + 2 * d] = eye
        # constant unit sigma(1) = 1 carries the bias c
        W2[-1, 2 * d] = 1.0
        W1[:d, -1] = model.c[ell].detach()
        blocks.append((W1, W2))
    return blocks


def dense_forward(model: UnrolledVIResNet, h: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
    r"""Reference forward pass through the literal ResNet :math:`u^\ell = u^{\ell-1} + W_1^\ell\sigma(W_2^\ell u^{\ell-1})`."""
    d = model.d
    ones = torch.ones(h.shape[0], 1, dtype=h.dtype, device=h.device)
    u = torch.cat([torch.zeros_like(h), h, ones], dim=1)  # u^0 = W_in [h; 1] = [0; h; 1]
    for W1, W2 in dense_blocks(model):
        u = u + torch.relu(u @ W2.T) @ W1.T
    return u[:, :d]  # W_out u^L = m
