"""One ISTA step: exact ReLU network, contraction, fixed point = Lasso minimiser (float64)."""

import pytest
import torch

from nnapprox import ista
from nnapprox.composition import unroll_with_errors

f64 = dict(dtype=torch.float64)


def _problem(d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, **f64))
    A = Q @ torch.diag(torch.linspace(0.3, 1.0, d, **f64)) @ Q.T
    return A, torch.randn(d, generator=g, **f64), g


def test_soft_threshold_is_the_prox_and_two_relus():
    u = torch.linspace(-3, 3, 601, **f64)
    tau = 0.7
    direct = torch.where(u.abs() <= tau, torch.zeros_like(u), u - tau * torch.sign(u))
    assert torch.equal(ista.soft_threshold(u, tau), direct)
    assert torch.allclose(torch.relu(u - tau) - torch.relu(-u - tau), direct, atol=0, rtol=0)
    with pytest.raises(ValueError, match="tau must be >= 0"):
        ista.soft_threshold(u, -1.0)


def test_relu_network_equals_the_step_exactly():
    A, b, g = _problem()
    step, rho = ista.ista_step(A, b, lam=0.3, eta=1.0)
    net = ista.relu_network_step(ista.ista_relu_weights(A, b, lam=0.3, eta=1.0))
    z = 3 * torch.randn(500, 6, generator=g, **f64)
    assert (net(z) - step(z)).abs().max() <= 1e-14
    assert ista.ista_relu_weights(A, b, 0.3, 1.0)["W1"].shape == (12, 6)
    assert rho == pytest.approx(0.7)


def test_step_is_a_contraction_and_its_fixed_point_is_the_lasso_minimiser():
    A, b, g = _problem()
    step, rho = ista.ista_step(A, b, lam=0.3, eta=1.0)
    z1, z2 = torch.randn(2, 200, 6, generator=g, **f64)
    ratio = (step(z1) - step(z2)).norm(dim=1) / (z1 - z2).norm(dim=1)
    assert ratio.max() <= rho + 1e-12
    z = torch.zeros(1, 6, **f64)
    for _ in range(400):
        z = step(z)
    assert ista.lasso_kkt_residual(z, A, b, 0.3).item() <= 1e-12
    assert (z == 0).any()  # the l1 penalty sets some coordinates exactly to zero
    e = unroll_with_errors(step, torch.randn(64, 6, generator=g, **f64), 200, 1e-3, generator=g)
    assert e.max() <= 1e-3 / (1 - rho)


def test_bad_input_is_refused_before_any_work():
    A, b, _ = _problem()
    with pytest.raises(ValueError, match="positive definite"):
        ista.ista_step(-A, b, 0.1, 1.0)
    with pytest.raises(ValueError, match="lam >= 0 and eta > 0"):
        ista.ista_step(A, b, -0.1, 1.0)
    with pytest.raises(ValueError, match=r"b must be a vector of shape \(6,\)"):
        ista.ista_step(A, b[:3], 0.1, 1.0)
    with pytest.raises(ValueError, match=r"A must be a square \(d, d\) matrix"):
        ista.ista_relu_weights(A[:, :4], b, 0.1, 1.0)
    with pytest.raises(ValueError, match="lam >= 0 and eta > 0"):
        ista.ista_step(A, b, 0.1, 0.0)


def test_non_symmetric_A_is_refused_not_silently_symmetrised():
    """eigvalsh reads one triangle only: a non-symmetric A must be refused before any work."""
    A, b, _ = _problem()
    skew = A.clone()
    skew[0, 1] += 0.5  # lower triangle unchanged: eigvalsh(skew) would equal eigvalsh(A)
    with pytest.raises(ValueError, match="A must be symmetric"):
        ista.ista_step(skew, b, 0.1, 1.0)
    with pytest.raises(ValueError, match="A must be symmetric"):
        ista.ista_relu_weights(skew, b, 0.1, 1.0)
    ista.ista_step(A, b, 0.1, 1.0)  # the symmetric original passes


def test_singular_A_is_refused_as_not_strongly_convex():
    """rho = 1 for a singular A (a Lasso with more features than samples): not a contraction."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(3, 6, generator=g, **f64)  # n = 3 samples, d = 6 features
    A = X.T @ X / 3  # rank 3
    with pytest.raises(ValueError, match="positive definite"):
        ista.ista_step(A, torch.zeros(6, **f64), 0.1, 0.5)


def test_strict_complementarity_margin_at_the_minimiser():
    A, b, _ = _problem()
    step, rho = ista.ista_step(A, b, lam=0.3, eta=1.0)
    z = torch.zeros(1, 6, **f64)
    for _ in range(400):
        z = step(z)
    zero = z[0] == 0
    g = z @ A.T - b
    expected = float((0.3 - g[0, zero].abs()).min())
    margin = ista.strict_complementarity_margin(z, A, b, 0.3)
    assert margin.shape == (1,) and float(margin) == pytest.approx(expected, abs=0, rel=0)
    assert float(margin) > 0  # optimality holds strictly at the zeros of this problem
    no_zeros = torch.ones(2, 6, **f64)
    assert torch.isinf(ista.strict_complementarity_margin(no_zeros, A, b, 0.3)).all()
