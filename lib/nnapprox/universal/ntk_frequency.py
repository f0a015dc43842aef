r"""Learning time vs frequency for a two-layer ReLU network: the NTK prediction and a measurement.

Universal approximation chapter, section "Spectral bias" (Basri et al. 2019, 2020:
``basri2019convergence``, ``basri2020frequency``). Inputs lie on the unit circle,
:math:`x_j = (\cos\theta_j, \sin\theta_j)`, :math:`\theta_j = 2\pi j/N`, and the network is

.. math::  f(x) = \sum_{r=1}^{m} a_r\, \sigma(w_r\cdot x + b_r),\qquad
           a_r = \pm m^{-1/2} \text{ (fixed)},\quad (w_r, b_r) \sim \mathcal N(0, I_3),

with only the first layer trained (the setting of Basri et al.). Writing :math:`u = (x, 1)`,
its neural tangent kernel at infinite width is

.. math::  K(u, u') = (u\cdot u')\,\frac{\pi - \angle(u, u')}{2\pi},

a function of :math:`\theta - \theta'` only, so on equispaced points its Gram matrix is
circulant and :math:`\cos(k\theta + \varphi)` is an eigenvector with eigenvalue :math:`\mu_k`.
Gradient descent with step :math:`\eta` on :math:`\tfrac12\sum_j (f(x_j) - y_j)^2` then shrinks
that component by :math:`(1 - \eta\mu_k)` per step, so the *learning time* (first step at which
the fit's amplitude at :math:`k` reaches half the target's) is
:math:`t_k = \lceil \ln\tfrac12 / \ln(1 - \eta\mu_k) \rceil \approx 0.69/(\eta\mu_k)`; since
:math:`\mu_k \propto k^{-2}` for large :math:`k`, :math:`t_k` grows like :math:`k^2`.

The units come in pairs with equal :math:`(w, b)` and opposite :math:`a`, so :math:`f = 0` at
initialisation and the residual starts at the target.
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor

from nnapprox import rng

from ..progress import progress


def circle_inputs(n_points: int) -> tuple[Float[Tensor, " N"], Float[Tensor, "N 3"]]:
    r"""Angles :math:`\theta_j = 2\pi j/N` and augmented inputs :math:`u_j = (\cos\theta_j, \sin\theta_j, 1)` (float64)."""
    if n_points < 2:
        raise ValueError(f"n_points must be >= 2, got {n_points}")
    theta = 2 * math.pi * torch.arange(n_points, dtype=torch.float64) / n_points
    return theta, torch.stack([theta.cos(), theta.sin(), torch.ones_like(theta)], 1)


def relu_ntk_gram(u: Float[Tensor, "N 3"]) -> Float[Tensor, "N N"]:
    r"""Infinite-width NTK Gram matrix :math:`(u\cdot u')(\pi - \angle(u, u'))/(2\pi)` of the first layer."""
    G = u @ u.T
    norms = G.diagonal().sqrt()
    angle = torch.arccos((G / torch.outer(norms, norms)).clamp(-1.0, 1.0))
    return G * (math.pi - angle) / (2 * math.pi)


def relu_output_layer_gram(u: Float[Tensor, "N 3"]) -> Float[Tensor, "N N"]:
    r"""Infinite-width kernel of the same network with only its *output* layer trained.

    With :math:`(w_r, b_r)` fixed at initialisation the network is a random-features model, and
    gradient descent on :math:`a` runs with the arc-cosine kernel of order one (Cho and Saul
    2009, ``cho2009kernel``), :math:`\mathbb E_w[\sigma(w\cdot u)\sigma(w\cdot u')]` for
    :math:`w \sim \mathcal N(0, I)`, which is half of their :math:`k_1` (they normalise by
    :math:`1/\pi`; the factor does not matter with :math:`\eta = 1/\mu_{\max}`),

    .. math::  K_{\mathrm{out}}(u, u') = \frac{|u|\,|u'|}{2\pi}\big(\sin\alpha + (\pi - \alpha)\cos\alpha\big),
               \qquad \alpha = \angle(u, u').

    Near :math:`\alpha = 0` it is smooth up to an :math:`|\alpha|^3` term, so its eigenvalues on
    the circle fall like :math:`k^{-4}` instead of the first layer's :math:`k^{-2}`.
    """
    G = u @ u.T
    norms = G.diagonal().sqrt()
    outer = torch.outer(norms, norms)
    cos = (G / outer).clamp(-1.0, 1.0)
    angle = torch.arccos(cos)
    return outer * (torch.sin(angle) + (math.pi - angle) * cos) / (2 * math.pi)


def ntk_eigenvalue(gram: Float[Tensor, "N N"], theta: Float[Tensor, " N"], k: int) -> float:
    r"""Eigenvalue :math:`\mu_k` of a circulant Gram matrix at frequency ``k`` (Rayleigh quotient of :math:`\cos k\theta`)."""
    if not 1 <= k < len(theta) / 2:
        raise ValueError(f"k must satisfy 1 <= k < N/2 = {len(theta) / 2}, got {k}")
    v = torch.cos(k * theta)
    return float(v @ gram @ v / (v @ v))


def ntk_learning_time(mu: float, eta: float, level: float = 0.5) -> int:
    r"""Steps until a component shrinking by :math:`(1 - \eta\mu)` per step is learned to ``level``."""
    if not 0 < eta * mu < 1:
        raise ValueError(f"need 0 < eta * mu < 1 for monotone decay, got eta * mu = {eta * mu}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    return math.ceil(math.log(1 - level) / math.log(1 - eta * mu))


def harmonic_amplitude(
    f: Float[Tensor, "E N"], theta: Float[Tensor, " N"], k: Float[Tensor, " E"]
) -> Float[Tensor, " E"]:
    r""":math:`|\tfrac2N\sum_j f_j e^{-ik\theta_j}|` for each row's own frequency."""
    angle = k[:, None] * theta[None, :]
    re = (f * torch.cos(angle)).sum(1)
    im = (f * torch.sin(angle)).sum(1)
    return 2.0 / f.shape[1] * torch.sqrt(re**2 + im**2)


def train_harmonics(
    ks: list[int],
    generator: torch.Generator,
    *,
    n_points: int = 64,
    width: int = 1024,
    n_repeats: int = 6,
    amplitude: float = 1e-3,
    n_steps: int | None = None,
    level: float = 0.5,
) -> dict[str, Tensor | float | int]:
    r"""Fit :math:`A\cos(k\theta + \varphi)` for each ``k`` with its own two-layer network; learning times.

    ``n_repeats`` independent networks (initialisation and phase) per frequency, trained at
    once by full-batch gradient descent (float64) with :math:`\eta = 1/\mu_{\max}` of the
    infinite-width Gram matrix, for ``n_steps`` steps (default: twice the predicted learning
    time of the highest frequency). A small ``amplitude`` keeps the weights close to their
    initial values (the lazy, kernel regime). For each network the same learning time is also
    computed for its *linearised* dynamics, gradient descent with its own finite-width kernel
    at initialisation, :math:`r \leftarrow (I - \eta\hat K)r`.

    Returns ``t_train`` and ``t_linear`` (n_repeats, M), ``t_theory`` (M,) from the
    infinite-width kernel, ``eta`` and ``n_steps``, and the amplitude paths ``amp_train`` and
    ``amp_linear`` (n_repeats, M, T) over the first T steps (T = one step past the last
    linearised crossing, at most ``n_steps + 1``). A frequency not learned within the
    recorded steps gets ``n_steps + 1``.
    """
    if not ks or any(not 1 <= k < n_points / 2 for k in ks):
        raise ValueError(f"ks must be a non-empty list of integers in [1, n_points/2) = [1, {n_points / 2}), got {ks}")
    if width < 2 or width % 2:
        raise ValueError(f"width must be an even integer >= 2 (units come in +/- pairs), got {width}")
    if n_repeats < 2:
        raise ValueError(f"n_repeats must be >= 2 (a standard error needs two repeats), got {n_repeats}")
    if amplitude <= 0:
        raise ValueError(f"amplitude must be positive, got {amplitude}")
    theta, u = circle_inputs(n_points)
    K = relu_ntk_gram(u)
    eta = 1.0 / float(torch.linalg.eigvalsh(K).max())
    t_theory = torch.tensor([float(ntk_learning_time(ntk_eigenvalue(K, theta, k), eta, level)) for k in ks])
    if n_steps is None:
        n_steps = int(2 * t_theory.max())
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    M, R = len(ks), n_repeats
    E = R * M  # network e has frequency ks[e % M]
    k_e = torch.tensor(ks, dtype=torch.float64).repeat(R)
    half = rng.randn(E, width // 2, 3, generator=generator, dtype=torch.float64)
    W = torch.cat([half, half], 1)  # (E, m, 3): rows (w_r, b_r)
    a = torch.cat([torch.ones(width // 2), -torch.ones(width // 2)]).double() / math.sqrt(width)
    phase = 2 * math.pi * rng.rand(E, 1, generator=generator, dtype=torch.float64)
    y = amplitude * torch.cos(k_e[:, None] * theta[None, :] + phase)  # (E, N)

    def amplitude_path(outputs_over_time, n_record):
        """Harmonic amplitude at each network's own frequency, steps 0..n_record - 1: (E, T)."""
        amps = []
        for t, f in outputs_over_time:
            if t >= n_record:
                break
            amps.append(harmonic_amplitude(f, theta, k_e))
        return torch.stack(amps, 1)

    def first_learned(amps):
        reached = amps >= level * amplitude  # (E, T)
        t_learn = torch.full((E,), float(n_steps + 1), dtype=torch.float64)
        any_reached = reached.any(1)
        t_learn[any_reached] = reached.double().argmax(1)[any_reached].double()
        return t_learn

    # linearised dynamics with each network's own kernel at initialisation
    act = (torch.einsum("emi,ni->emn", W, u) > 0).double()  # (E, m, N)
    K_hat = torch.einsum("emn,emp->enp", act, act) / width * (u @ u.T)[None]  # (E, N, N)

    def linear_path():
        r = -y.clone()
        for t in range(n_steps + 1):
            yield t, y + r
            r = r - eta * torch.einsum("enp,ep->en", K_hat, r)

    def training_path():
        Wt = W.clone().requires_grad_(True)
        for t in progress(range(n_steps + 1), desc="two-layer NTK"):
            f = (torch.relu(torch.einsum("emi,ni->emn", Wt, u)) * a[None, :, None]).sum(1)  # (E, N)
            yield t, f.detach()
            (grad,) = torch.autograd.grad(0.5 * ((f - y) ** 2).sum(), Wt)
            with torch.no_grad():
                Wt -= eta * grad

    amp_linear = amplitude_path(linear_path(), n_steps + 1)  # (E, n_steps + 1)
    t_linear = first_learned(amp_linear)
    # train until one step past the last linearised crossing (enough for the comparison)
    n_record = min(n_steps + 1, int(t_linear.max()) + 2)
    amp_train = amplitude_path(training_path(), n_record)  # (E, n_record)
    t_train = first_learned(amp_train)
    return {
        "t_train": t_train.reshape(R, M),
        "t_linear": t_linear.reshape(R, M),
        "amp_train": amp_train.reshape(R, M, -1),
        "amp_linear": amp_linear[:, :n_record].reshape(R, M, -1),
        "t_theory": t_theory,
        "eta": eta,
        "n_steps": n_steps,
    }


def power_law_exponents(ks: list[int], times: Float[Tensor, "R M"]) -> Float[Tensor, " R"]:
    r"""Least-squares slope of :math:`\log t` against :math:`\log k`, one per row (repeat)."""
    if times.ndim != 2 or times.shape[1] != len(ks) or len(ks) < 2:
        raise ValueError(f"times must have shape (R, len(ks)) with len(ks) >= 2, got {tuple(times.shape)}")
    x = torch.log(torch.tensor(ks, dtype=torch.float64))
    x = x - x.mean()
    logt = torch.log(times.double())
    return ((logt - logt.mean(1, keepdim=True)) * x).sum(1) / (x**2).sum()


def kernel_time_exponent(gram: Float[Tensor, "N N"], theta: Float[Tensor, " N"], ks: list[int]) -> float:
    r"""Fitted exponent of the learning times of kernel gradient descent on a circulant Gram matrix.

    With :math:`\eta = 1/\mu_{\max}` (the largest eigenvalue of ``gram``), each frequency's time
    is :math:`t_k = \lceil \ln\tfrac12/\ln(1 - \eta\mu_k)\rceil` and the exponent is the
    least-squares slope of :math:`\log t_k` against :math:`\log k` (:func:`power_law_exponents`):
    the local slope of the spectrum over ``ks``, not its asymptotic decay.
    """
    if gram.ndim != 2 or gram.shape != (len(theta), len(theta)):
        raise ValueError(f"gram must have shape (N, N) with N = len(theta) = {len(theta)}, "
                         f"got {tuple(gram.shape)}")
    eta = 1 / float(torch.linalg.eigvalsh(gram).max())
    times = [ntk_learning_time(ntk_eigenvalue(gram, theta, k), eta) for k in ks]
    return float(power_law_exponents(ks, torch.tensor([times], dtype=torch.float64))[0])


def crossing_gap_ratio(
    amp_train: Float[Tensor, "R M T"],
    amp_linear: Float[Tensor, "R M T"],
    t_linear: Float[Tensor, "R M"],
    threshold: float,
) -> Float[Tensor, "R M"]:
    r"""Trajectory gap over crossing margin: :math:`g / \min(m_-, m_+)` for each path.

    With :math:`T` the first step at which the linearised amplitude :math:`a^{lin}` reaches
    ``threshold`` (:math:`h`), the margins are
    :math:`m_- = h - \max_{s \le T-2} a^{lin}_s` (:math:`+\infty` if :math:`T < 2`) and
    :math:`m_+ = a^{lin}_{T+1} - h`, and :math:`g = \max_{t \le T+1} |a^{train}_t - a^{lin}_t|`.
    If the ratio is below 1, the trained path's first crossing lies in
    :math:`\{T-1, T, T+1\}`: :math:`a^{train}_{T+1} \ge a^{lin}_{T+1} - g > h` and
    :math:`a^{train}_s \le a^{lin}_s + g < h` for :math:`s \le T-2`. A path whose step
    :math:`T+1` was not recorded gets ratio :math:`+\infty`. Universal chapter, Section 5.
    """
    if amp_train.shape != amp_linear.shape or amp_train.ndim != 3:
        raise ValueError(
            f"amp_train and amp_linear must share a shape (R, M, T), got"
            f" {tuple(amp_train.shape)} and {tuple(amp_linear.shape)}"
        )
    if t_linear.shape != amp_train.shape[:2]:
        raise ValueError(
            f"t_linear must have shape {tuple(amp_train.shape[:2])}, got {tuple(t_linear.shape)}"
        )
    T_rec = amp_train.shape[2]
    ratio = torch.full(t_linear.shape, math.inf, dtype=torch.float64)
    for r in range(t_linear.shape[0]):
        for j in range(t_linear.shape[1]):
            T = int(t_linear[r, j])
            if T + 1 >= T_rec:
                continue  # crossing (or step T + 1) not recorded: ratio stays +inf
            a = amp_linear[r, j]
            gap = float((amp_train[r, j, : T + 2] - a[: T + 2]).abs().max())
            m_plus = float(a[T + 1]) - threshold
            m_minus = threshold - float(a[: T - 1].max()) if T >= 2 else math.inf
            margin = min(m_plus, m_minus)
            ratio[r, j] = gap / margin if margin > 0 else math.inf
    return ratio
