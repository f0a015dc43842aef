"""nnapprox.composition: the error-composition theorem of the introduction, checked exactly."""

import math

import pytest
import torch

from nnapprox.claims import compare
from nnapprox.composition import (
    error_bound, expanding_layer, fit_step_network, gradient_descent_layer, growth_rate,
    unroll_pair, unroll_with_errors,
)


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def spd(d, mu, g):
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return Q @ torch.diag(torch.linspace(mu, 1.0, d, dtype=torch.float64)) @ Q.T


def test_no_perturbation_no_error():
    g = gen()
    step, _ = expanding_layer(1.7, 5, generator=g)
    e = unroll_with_errors(step, torch.randn(4, 5, generator=g, dtype=torch.float64), 12, 0.0, generator=g)
    assert e.shape == (13, 4) and torch.count_nonzero(e) == 0


def test_expanding_layer_is_K_times_orthogonal():
    step, Q = expanding_layer(2.5, 6, generator=gen(1))
    torch.testing.assert_close(Q @ Q.T, torch.eye(6, dtype=torch.float64), atol=1e-12, rtol=0)
    z = torch.randn(3, 6, generator=gen(2), dtype=torch.float64)
    torch.testing.assert_close(step(z).norm(dim=1), 2.5 * z.norm(dim=1), atol=1e-12, rtol=0)


def test_first_layer_error_is_exactly_eps_and_bound_holds():
    g = gen(3)
    K, eps, L = 1.5, 1e-3, 25
    step, _ = expanding_layer(K, 8, generator=g)
    e = unroll_with_errors(step, torch.randn(64, 8, generator=g, dtype=torch.float64), L, eps, generator=g)
    torch.testing.assert_close(e[1], torch.full((64,), eps, dtype=torch.float64), atol=1e-15, rtol=0)
    for l in range(1, L + 1):
        assert (e[l] <= error_bound(K, eps, l) * (1 + 1e-12)).all()


def test_error_bound_closed_form():
    assert error_bound(2.0, 1.0, 10) == pytest.approx(2**10 - 1)
    assert error_bound(1.0, 0.5, 7) == pytest.approx(3.5)
    assert error_bound(0.5, 1.0, 60) == pytest.approx(2.0)


def test_growth_rate_recovers_a_geometric_sequence():
    seq = 3.0 * 1.37 ** torch.arange(20, dtype=torch.float64)
    assert growth_rate(seq) == pytest.approx(1.37, rel=1e-12)
    with pytest.raises(ValueError):
        growth_rate(torch.tensor([1.0, 0.0]))


def test_gd_contraction_factor_and_stability_bound():
    g = gen(4)
    d, mu, eta, eps = 6, 0.3, 1.0, 1e-3
    A = spd(d, mu, g)
    b = torch.randn(d, generator=g, dtype=torch.float64)
    step, rho = gradient_descent_layer(A, b, eta)
    assert rho == pytest.approx(1 - mu * eta, abs=1e-12)
    e = unroll_with_errors(step, torch.randn(32, d, generator=g, dtype=torch.float64), 150, eps, generator=g)
    assert float(e.max()) <= eps / (1 - rho)


def test_gd_layer_rejects_non_convex_losses():
    with pytest.raises(ValueError, match="positive definite"):
        gradient_descent_layer(-torch.eye(3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64), 0.1)


def test_stability_claim_can_fail_for_an_unstable_step():
    """The intro's claim e_L <= eps/(1-rho) fails if the step is not a contraction (eta too large)."""
    g = gen(5)
    A = spd(4, 0.3, g)
    b = torch.zeros(4, dtype=torch.float64)
    _, rho_ok = gradient_descent_layer(A, b, 1.0)
    bad_step, rho_bad = gradient_descent_layer(A, b, 2.5)  # eta > 2/lambda_max: expanding
    assert rho_bad > 1
    e = unroll_with_errors(bad_step, torch.zeros(8, 4, dtype=torch.float64), 60, 1e-3, generator=g)
    assert not compare(float(e.max() / (1e-3 / (1 - rho_ok))), "<=", 1.0)


def test_unroll_pair_local_errors_obey_the_recursion():
    g = gen(6)
    A = spd(3, 0.25, g)
    b = torch.randn(3, generator=g, dtype=torch.float64)
    step, rho = gradient_descent_layer(A, b, 1.0)
    approx = lambda z: step(z) + 1e-3 * torch.sin(7 * z)  # a systematic, state-dependent error
    Z, Z_hat, local = unroll_pair(step, approx, torch.randn(16, 3, generator=g, dtype=torch.float64), 50)
    e = (Z - Z_hat).norm(dim=2)
    assert torch.all(e[1:] <= rho * e[:-1] + local + 1e-15)
    assert float(e.max()) <= float(local.max()) / (1 - rho)


@pytest.mark.slow
def test_fit_step_network_learns_the_step():
    g = gen(7)
    A = spd(2, 0.25, g)
    b = torch.randn(2, generator=g, dtype=torch.float64)
    step, _ = gradient_descent_layer(A, b, 1.0)
    learned = fit_step_network(step, 2, width=32, n_steps=300, lr=1e-2, generator=g)
    z = (2 * torch.rand(512, 2, generator=g, dtype=torch.float64) - 1) * 2
    err = (learned(z) - step(z)).norm(dim=1)
    assert float(err.mean()) < 0.1 * float(step(z).norm(dim=1).mean())
    assert math.isfinite(float(err.max()))
