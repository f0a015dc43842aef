r"""Composing approximate layers: the curse of depth and how stable algorithms break it.

Introduction (``book/intro.md``), section "Breaking the curse of depth"; the algorithm
approximation view of ``mei2023deep`` and ``bai2023transformers`` (bib keys of
``book/references.bib``).

A target computed by an algorithm is a composition :math:`f = U_L \circ \cdots \circ U_1`.
A network imitates each layer up to an error, :math:`\mathrm{NN}_\ell = U_\ell + \varepsilon_\ell`
with :math:`\|\varepsilon_\ell\| \le \varepsilon`. The error of the composition obeys

.. math::  e_\ell = \|z_\ell - \hat z_\ell\| \le K e_{\ell-1} + \varepsilon
           \quad\Longrightarrow\quad e_L \le \varepsilon \frac{K^L - 1}{K - 1},

for :math:`K`-Lipschitz layers: exponential in depth when :math:`K > 1` (the curse of depth).
When each layer is a step of a *stable* algorithm, a contraction with factor
:math:`\rho < 1` (gradient descent on a strongly convex loss), the same recursion gives
:math:`e_L \le \varepsilon / (1 - \rho)` for every :math:`L`. A merely non-expansive step
(:math:`\rho = 1`) gives only :math:`e_L \le L\varepsilon`.

Everything is batched: ``z`` has shape ``(batch, d)`` and every trajectory of the batch is
run at once.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor
from nnapprox import rng

Step = Callable[[Float[Tensor, "batch d"]], Float[Tensor, "batch d"]]


def _count(name: str, value: object, minimum: int) -> int:
    """``value`` as an int if it is an integer (Python or numpy) ``>= minimum``, else ValueError."""
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}") from None
    if n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return n


def unroll_with_errors(
    step: Step,
    z0: Float[Tensor, "batch d"],
    n_layers: int,
    eps: float,
    generator: torch.Generator | None = None,
    return_states: bool = False,
) -> Float[Tensor, "layers_plus_one batch"] | tuple[Tensor, Tensor, Tensor]:
    r"""Run ``step`` exactly and with a per-layer error of norm ``eps``; return the gap.

    With ``return_states=True`` it returns ``(errors, z_L, z_hat_L)``, the last exact and
    perturbed states ``(batch, d)`` as well.

    The perturbed run is :math:`\hat z_\ell = U(\hat z_{\ell-1}) + \varepsilon_\ell` with
    :math:`\varepsilon_\ell` uniform on the sphere of radius ``eps`` (independent per layer
    and per trajectory). Returns :math:`e_\ell = \|z_\ell - \hat z_\ell\|_2` for
    :math:`\ell = 0, \dots, L`, shape ``(n_layers + 1, batch)``.

    For :math:`U(z) = KQz` with ``Q`` orthogonal (:func:`expanding_layer`) the introduction's
    theorem gives :math:`e_\ell = K^\ell \|S_\ell\|` with
    :math:`S_\ell = \sum_{j \le \ell} K^{-j} P_j^\top \varepsilon_j`, :math:`P_j = Q^j`, and
    :math:`\mathbb E\, e_\ell^2 = \varepsilon^2 (K^{2\ell} - 1)/(K^2 - 1)`.

    Raises ``ValueError`` (before any step is run) unless ``z0`` is 2-D ``(batch, d)`` with
    ``batch, d >= 1``, ``n_layers`` is an integer ``>= 0`` and ``eps >= 0``.
    """
    if not isinstance(z0, Tensor) or z0.ndim != 2 or z0.shape[0] < 1 or z0.shape[1] < 1:
        shape = tuple(z0.shape) if isinstance(z0, Tensor) else type(z0).__name__
        raise ValueError(f"z0 must be a 2-D tensor (batch, d) with batch, d >= 1, got {shape}")
    n_layers = _count("n_layers", n_layers, 0)
    if not eps >= 0:  # also refuses NaN
        raise ValueError(f"eps must be >= 0, got {eps}")
    z, z_hat = z0, z0.clone()
    errors = [torch.zeros(z0.shape[0], dtype=z0.dtype, device=z0.device)]
    for _ in range(n_layers):
        noise = rng.randn(z0.shape, generator=generator, dtype=z0.dtype, device=z0.device)
        noise = eps * noise / noise.norm(dim=1, keepdim=True)
        z, z_hat = step(z), step(z_hat) + noise
        errors.append((z - z_hat).norm(dim=1))
    if return_states:
        return torch.stack(errors), z, z_hat
    return torch.stack(errors)


def error_bound(K: float, eps: float, n_layers: int) -> float:
    r""":math:`\varepsilon \sum_{j<L} K^j`: the worst case of :math:`e_\ell \le K e_{\ell-1} + \varepsilon`."""
    if K == 1.0:
        return eps * n_layers
    return eps * (K**n_layers - 1.0) / (K - 1.0)


def expanding_layer(
    K: float, d: int, generator: torch.Generator | None = None, dtype: torch.dtype = torch.float64
) -> tuple[Step, Float[Tensor, "d d"]]:
    r"""A generic :math:`K`-Lipschitz linear layer :math:`U(z) = K Q z` with a random orthogonal ``Q``.

    It stretches every error by exactly ``K``, so the composed error grows at rate ``K`` (the
    introduction's theorem, case 2, when the errors do not cancel). Its size stays below the
    worst case unless the fresh errors all point the same way: with independent uniformly
    random directions of norm ``eps``,
    :math:`\mathbb E\, e_\ell^2 = \varepsilon^2 (K^{2\ell} - 1)/(K^2 - 1)` exactly, so the root
    mean square is about :math:`\varepsilon K^\ell/\sqrt{K^2 - 1}` against the bound
    :math:`\varepsilon (K^\ell - 1)/(K - 1)`. Returns ``(step, Q)``.
    """
    gaussian = rng.randn(d, d, generator=generator, dtype=dtype)
    Q, R = torch.linalg.qr(gaussian)
    Q = Q * torch.sign(torch.diagonal(R))  # Haar-distributed orthogonal matrix

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return K * z @ Q.T

    return step, Q


def check_quadratic(A: Tensor, b: Tensor) -> Float[Tensor, " d"]:
    r"""Check that ``A`` is a symmetric positive definite ``(d, d)`` matrix and ``b`` a ``(d,)``
    vector; return the eigenvalues of ``A`` (ascending).

    :func:`torch.linalg.eigvalsh` reads only one triangle of its argument, so a non-symmetric
    ``A`` would pass silently; symmetry is checked first, to ``100`` rounding units of ``A``'s
    dtype relative to its largest entry.
    """
    if not isinstance(A, Tensor) or A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 1:
        shape = tuple(A.shape) if isinstance(A, Tensor) else type(A).__name__
        raise ValueError(f"A must be a square (d, d) matrix with d >= 1, got {shape}")
    if not isinstance(b, Tensor) or b.shape != (A.shape[0],):
        shape = tuple(b.shape) if isinstance(b, Tensor) else type(b).__name__
        raise ValueError(f"b must be a vector of shape ({A.shape[0]},) to match A, got {shape}")
    if not A.is_floating_point() or not bool(torch.isfinite(A).all()):
        raise ValueError("A must be a finite floating-point matrix")
    tol = 100 * torch.finfo(A.dtype).eps * float(A.abs().max())
    asym = float((A - A.mT).abs().max())
    if asym > tol:
        raise ValueError(
            f"A must be symmetric (the quadratic's Hessian): max |A - A^T| = {asym:.3g} > {tol:.3g}; "
            "pass (A + A.T) / 2 if that is what you mean"
        )
    eigenvalues = torch.linalg.eigvalsh(A)
    if eigenvalues.min() <= 0:
        raise ValueError(
            f"A must be symmetric positive definite (a strongly convex loss), "
            f"smallest eigenvalue {float(eigenvalues.min()):.3g}"
        )
    return eigenvalues


def gradient_descent_layer(
    A: Float[Tensor, "d d"], b: Float[Tensor, " d"], eta: float
) -> tuple[Step, float]:
    r"""One step of gradient descent on :math:`F(z) = \tfrac12 z^\top A z - b^\top z` (``A`` s.p.d.).

    :math:`U(z) = z - \eta (A z - b)` is a contraction with factor
    :math:`\rho = \max_i |1 - \eta \lambda_i(A)|`, which is :math:`< 1` for
    :math:`0 < \eta < 2 / \lambda_{\max}` (introduction, theorem "Error composition", case 3,
    and exercise ``ex-intro-gd``). A larger ``eta`` is accepted and returns :math:`\rho \ge 1`
    (an expanding step). Returns ``(step, rho)``.

    Raises ``ValueError`` before any work unless ``A`` is symmetric positive definite
    ``(d, d)``, ``b`` has shape ``(d,)`` and ``eta > 0``.
    """
    if not eta > 0 or not math.isfinite(eta):
        raise ValueError(f"the step size eta must be a finite number > 0, got {eta}")
    eigenvalues = check_quadratic(A, b)
    rho = float((1.0 - eta * eigenvalues).abs().max())

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        return z - eta * (z @ A.T - b)

    return step, rho


def growth_rate(errors: Float[Tensor, " layers"]) -> float:
    r"""Geometric growth rate of a positive sequence: :math:`\exp` of the least-squares slope of :math:`\log e_\ell`.

    Needs a 1-D tensor of at least two positive entries (a slope needs two points).
    """
    if not isinstance(errors, Tensor) or errors.ndim != 1 or errors.shape[0] < 2:
        shape = tuple(errors.shape) if isinstance(errors, Tensor) else type(errors).__name__
        raise ValueError(f"growth_rate needs a 1-D tensor of at least 2 errors, got shape {shape}")
    if not bool((errors > 0).all()):
        raise ValueError("growth_rate needs positive errors (it fits a line to their logarithms)")
    ell = torch.arange(len(errors), dtype=torch.float64)
    log_e = errors.detach().double().cpu().log()
    slope = ((ell - ell.mean()) * (log_e - log_e.mean())).sum() / ((ell - ell.mean()) ** 2).sum()
    return float(slope.exp())


def relu_step_network(d: int, width: int, generator: torch.Generator | None = None) -> torch.nn.Sequential:
    r"""A one-hidden-layer ReLU network :math:`\mathrm{NN}(u) = W_2\,\mathrm{relu}(W_1 u + b_1) + b_2`.

    The plain network (``d -> width -> d``), initialised uniformly in
    :math:`\pm 1/\sqrt{\text{fan-in}}` from ``generator``; :func:`fit_step_network` adds the
    residual connection, :math:`z \mapsto z + \mathrm{NN}(z - c)`.
    """
    if d < 1 or width < 1:
        raise ValueError(f"d and width must be positive integers, got d={d}, width={width}")
    net = torch.nn.Sequential(torch.nn.Linear(d, width), torch.nn.ReLU(), torch.nn.Linear(width, d))
    with torch.no_grad():
        for layer in (net[0], net[2]):
            bound = 1.0 / layer.in_features**0.5
            layer.weight.copy_(rng.uniform_like(layer.weight, -bound, bound, generator))
            layer.bias.copy_(rng.uniform_like(layer.bias, -bound, bound, generator))
    return net


def fit_step_network(
    step: Step,
    d: int,
    *,
    width: int = 64,
    radius: float = 3.0,
    center: Float[Tensor, " d"] | None = None,
    n_steps: int = 2000,
    batch: int = 512,
    lr: float = 3e-3,
    generator: torch.Generator | None = None,
    shuffle_labels: bool = False,
) -> Step:
    r"""Train a ReLU network to imitate one algorithm step on the cube :math:`c + [-r, r]^d`.

    The network learns the increment :math:`U(z) - z` (a residual block) as a function of the
    offset :math:`u = z - c` from the cube's centre ``center`` (the origin by default), by Adam
    on the squared error at fresh uniform points each step. Returns the trained step
    :math:`z \mapsto z + \mathrm{NN}(z - c)` in float64, ready for :func:`unroll_pair`
    (its error :math:`\varepsilon(z) = \|z + \mathrm{NN}(z - c) - U(z)\|` is *systematic*, not
    random). A network is accurate only where it was trained: the cube should contain the
    points the iterations visit, starting points and fixed point included (introduction,
    section "Networks that imitate the step").

    ``shuffle_labels=True`` trains the *foil*: the same inputs, steps and optimiser, with the
    targets permuted within each batch, so that the label says nothing about its input (the
    network can learn at most the mean increment).

    Raises ``ValueError`` before training unless ``d, width, n_steps, batch >= 1``,
    ``radius > 0``, ``lr > 0`` and ``center`` (if given) has shape ``(d,)``.
    """
    from .progress import progress

    d, width = _count("d", d, 1), _count("width", width, 1)
    n_steps, batch = _count("n_steps", n_steps, 1), _count("batch", batch, 1)
    if not radius > 0 or not lr > 0:
        raise ValueError(f"radius and lr must be > 0, got radius={radius}, lr={lr}")
    if center is None:
        c = torch.zeros(d, dtype=torch.float64)
    elif not isinstance(center, Tensor) or center.shape != (d,):
        shape = tuple(center.shape) if isinstance(center, Tensor) else type(center).__name__
        raise ValueError(f"center must be a tensor of shape ({d},), got {shape}")
    else:
        c = center.detach().to(dtype=torch.float64, device="cpu")

    net = relu_step_network(d, width, generator)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, n_steps)
    for _ in progress(range(n_steps), desc="fit step network"):
        u = (2 * rng.rand(batch, d, generator=generator) - 1) * radius  # offsets, (batch, d)
        z = u.double() + c
        target = (step(z) - z).float()
        if shuffle_labels:
            target = target[torch.randperm(batch, generator=generator)]
        loss = ((net(u) - target) ** 2).sum(dim=1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    net = net.double().eval()

    def learned(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        with torch.no_grad():
            return z + net(z - c.to(z.device))

    return learned


def fixed_point_distance_bound(
    step: Step, z: Float[Tensor, "batch d"], rho: float
) -> Float[Tensor, " batch"]:
    r"""A posteriori bound on the distance from ``z`` to the fixed point of a contraction.

    If :math:`U` is a :math:`\rho`-contraction with fixed point :math:`z^\ast`, then for every
    :math:`z`, :math:`\|z - z^\ast\| \le \|z - U(z)\| + \|U(z) - U(z^\ast)\| \le
    \|z - U(z)\| + \rho\|z - z^\ast\|`, hence

    .. math::  \|z - z^\ast\| \le \frac{\|U(z) - z\|}{1 - \rho}.

    Computable without knowing :math:`z^\ast` (introduction, section "A nonlinear stable step").
    Returns one bound per row of ``z``; ``rho`` must lie in ``[0, 1)``.
    """
    if not 0 <= rho < 1:
        raise ValueError(f"the bound needs a contraction, 0 <= rho < 1, got rho={rho}")
    if not isinstance(z, Tensor) or z.ndim != 2:
        shape = tuple(z.shape) if isinstance(z, Tensor) else type(z).__name__
        raise ValueError(f"z must be a 2-D tensor (batch, d), got {shape}")
    return (step(z) - z).norm(dim=1) / (1.0 - rho)


def unroll_pair(
    exact: Step, approx: Step, z0: Float[Tensor, "batch d"], n_layers: int
) -> tuple[Float[Tensor, "layers_plus_one batch d"], Float[Tensor, "layers_plus_one batch d"], Float[Tensor, "layers batch"]]:
    r"""Run the exact algorithm and its approximation side by side.

    Returns the trajectories :math:`z_\ell`, :math:`\hat z_\ell` (``(L+1, batch, d)``) and the
    per-layer errors *at the visited points*, :math:`\varepsilon_\ell =
    \|\mathrm{NN}(\hat z_{\ell-1}) - U(\hat z_{\ell-1})\|` (``(L, batch)``): with them the bound
    :math:`e_\ell \le \rho e_{\ell-1} + \varepsilon_\ell` can be checked exactly.
    """
    z, z_hat = [z0], [z0]
    local = []
    for _ in range(n_layers):
        nxt_hat = approx(z_hat[-1])
        local.append((nxt_hat - exact(z_hat[-1])).norm(dim=1))
        z.append(exact(z[-1]))
        z_hat.append(nxt_hat)
    return torch.stack(z), torch.stack(z_hat), torch.stack(local)


def unroll_pair_errors(
    exact: Step,
    approx: Step,
    z0: Float[Tensor, "batch d"],
    n_layers: int,
    center: Float[Tensor, " d"] | None = None,
) -> tuple[
    Float[Tensor, "layers_plus_one batch"],
    Float[Tensor, "layers batch"],
    Float[Tensor, "batch d"],
    Float[Tensor, " batch"],
]:
    r""":func:`unroll_pair` without storing the trajectories: memory :math:`O(L\,\text{batch})`.

    Returns the distances :math:`e_\ell = \|z_\ell - \hat z_\ell\|` (``(L+1, batch)``), the
    per-layer errors at the visited points :math:`\varepsilon_\ell =
    \|\widehat U(\hat z_{\ell-1}) - U(\hat z_{\ell-1})\|` (``(L, batch)``), the last approximate
    iterate :math:`\hat z_L` (``(batch, d)``) and each approximate trajectory's reach
    :math:`\max_\ell \|\hat z_\ell - c\|_\infty` from ``center`` :math:`c` (the origin by default;
    ``(batch,)``), which tells whether it stayed in a training cube :math:`c + [-r, r]^d`
    (introduction, section "Networks that imitate the step").
    """
    if not isinstance(z0, Tensor) or z0.ndim != 2:
        shape = tuple(z0.shape) if isinstance(z0, Tensor) else type(z0).__name__
        raise ValueError(f"z0 must be a 2-D tensor (batch, d), got {shape}")
    n_layers = _count("n_layers", n_layers, 0)
    c = torch.zeros_like(z0[0]) if center is None else center.to(z0)
    if c.shape != z0.shape[1:]:
        raise ValueError(f"center must have shape ({z0.shape[1]},), got {tuple(c.shape)}")
    z, z_hat = z0, z0
    gaps = [torch.zeros(z0.shape[0], dtype=z0.dtype, device=z0.device)]
    local = []
    reach = (z0 - c).abs().amax(dim=1)
    for _ in range(n_layers):
        nxt_hat = approx(z_hat)
        local.append((nxt_hat - exact(z_hat)).norm(dim=1))
        z, z_hat = exact(z), nxt_hat
        gaps.append((z - z_hat).norm(dim=1))
        reach = torch.maximum(reach, (z_hat - c).abs().amax(dim=1))
    empty = torch.zeros(0, z0.shape[0], dtype=z0.dtype, device=z0.device)
    return torch.stack(gaps), torch.stack(local) if local else empty, z_hat, reach


def tent_layer(K: float) -> Step:
    r"""The tent map with slope ``K`` on the cube, coordinatewise: a bounded expanding step.

    .. math::  U(z)_i = K \min(\pi(z)_i,\, 1 - \pi(z)_i), \qquad 1 < K < 2,

    with :math:`\pi` the projection onto :math:`[0, 1]^d` (so that a perturbed point that
    leaves the cube is mapped back, and :math:`U` is :math:`K`-Lipschitz on all of
    :math:`\mathbb R^d`). :math:`U` maps the cube into :math:`[0, K/2]^d`, so iterates stay
    bounded while small errors are stretched by :math:`K` at every layer: they grow like
    :math:`K^\ell` until they are as large as the state itself, after about
    :math:`\log(1/\varepsilon)/\log K` layers (introduction, section "Expanding and
    contracting layers on the same scale").
    Along an exact orbit the derivative is :math:`\mathrm{diag}(\pm K)`, ``K`` times an
    orthogonal matrix, so case 2 of the theorem describes small errors exactly until they
    straddle the kink at 1/2. ``K = 2`` is refused: in floating point its orbits collapse
    to 0 (it shifts the binary digits).
    """
    if not 1.0 < K < 2.0:
        raise ValueError(f"the tent map needs a slope 1 < K < 2, got K={K}")

    def step(z: Float[Tensor, "batch d"]) -> Float[Tensor, "batch d"]:
        x = z.clamp(0.0, 1.0)
        return K * torch.minimum(x, 1.0 - x)

    return step


def loss_depth(rms: Float[Tensor, " layers_plus_one"], tau: float) -> float:
    r"""The depth at which an error first reaches ``tau``, interpolated in :math:`\log e`.

    ``rms[l]`` is the error after ``l`` layers. Returns the real :math:`\ell` where the
    piecewise-linear interpolation of :math:`\log` ``rms`` crosses :math:`\log\tau` for the
    first time, and ``inf`` if it never does (the error stays below ``tau``).
    """
    if not isinstance(rms, Tensor) or rms.ndim != 1 or rms.shape[0] < 2:
        raise ValueError("loss_depth needs a 1-D tensor of at least 2 errors")
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    above = (rms >= tau).nonzero()
    if len(above) == 0:
        return math.inf
    l = int(above[0])
    if l == 0:
        return 0.0
    lo, hi = float(rms[l - 1]), float(rms[l])
    if lo <= 0:
        return float(l)
    return (l - 1) + (math.log(tau) - math.log(lo)) / (math.log(hi) - math.log(lo))


def predicted_loss_depth(K: float, eps: float, tau: float) -> float:
    r"""Depth at which :math:`\varepsilon K^\ell/\sqrt{K^2 - 1}` reaches ``tau``.

    Case 2 of the theorem gives the root mean square
    :math:`\sqrt{\mathbb E e_\ell^2} = \varepsilon\sqrt{(K^{2\ell} - 1)/(K^2 - 1)}
    \approx \varepsilon K^\ell/\sqrt{K^2 - 1}`; it reaches :math:`\tau` at
    :math:`\ell^\ast = \log(\tau\sqrt{K^2-1}/\varepsilon)/\log K`.
    """
    if not (K > 1 and eps > 0 and tau > 0):
        raise ValueError(f"need K > 1, eps > 0 and tau > 0, got K={K}, eps={eps}, tau={tau}")
    return math.log(tau * math.sqrt(K * K - 1.0) / eps) / math.log(K)


def additive_prediction(eps_hat: float, rho: float, n_layers: int) -> Float[Tensor, " layers_plus_one"]:
    r"""The stacked error predicted from a one-step error, ignoring any expansion.

    .. math::  P_\ell = \hat\varepsilon \sum_{j < \ell} \bar\rho^{\,j}, \qquad \bar\rho = \min(\rho, 1),

    the bound of case 3 for a :math:`\rho`-contraction (:math:`P_\ell \le \hat\varepsilon/(1-\rho)`)
    and plain accumulation, :math:`\ell\hat\varepsilon`, for a step that is not one; for an
    expanding step that is *not* a bound (case 1 of the theorem gives
    :math:`\hat\varepsilon (K^\ell - 1)/(K - 1)` there).
    Shape ``(n_layers + 1,)``, with :math:`P_0 = 0`.
    """
    n_layers = _count("n_layers", n_layers, 0)
    if not (eps_hat >= 0 and rho >= 0):
        raise ValueError(f"need eps_hat >= 0 and rho >= 0, got {eps_hat}, {rho}")
    ell = torch.arange(n_layers + 1, dtype=torch.float64)
    r = min(rho, 1.0)
    terms = ell if r == 1.0 else (1.0 - r**ell) / (1.0 - r)
    return eps_hat * terms


def prediction_ratio(
    errors: Float[Tensor, "layers_plus_one batch"], prediction: Float[Tensor, " layers_plus_one"]
) -> float:
    r""":math:`\max_{\ell \ge 1,\,i} e_{\ell,i}/P_\ell`: at most 1 when the prediction holds."""
    if errors.ndim != 2 or prediction.shape != errors.shape[:1]:
        raise ValueError(f"errors (L+1, batch) and prediction (L+1,) must match, got "
                         f"{tuple(errors.shape)} and {tuple(prediction.shape)}")
    return float((errors[1:] / prediction[1:, None].to(errors)).max())


def relative_error(
    z: Float[Tensor, "batch d"], z_hat: Float[Tensor, "batch d"]
) -> Float[Tensor, " batch"]:
    r"""Each run's error relative to the spread of the exact states,
    :math:`\lVert \hat z - z\rVert / \lVert z - \bar z\rVert` with :math:`\bar z` the mean over runs.

    About :math:`\sqrt 2` when :math:`\hat z` is an independent draw from the law of the
    states (the state is lost), and small when the error is small against the states'
    spread, whatever their scale (introduction, section "Expanding and contracting layers on
    the same scale").
    """
    if z.shape != z_hat.shape or z.ndim != 2 or z.shape[0] < 2:
        raise ValueError(f"z and z_hat must be (batch, d) with batch >= 2, got {tuple(z.shape)}, "
                         f"{tuple(z_hat.shape)}")
    return (z_hat - z).norm(dim=1) / (z - z.mean(dim=0)).norm(dim=1)

