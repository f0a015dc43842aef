"""nnapprox.composition: the error-composition theorem of the introduction, checked exactly.

Under pytest, jaxtyping's checker (conftest.py) rejects a wrongly shaped tensor before the
function body runs; the bad-input tests call ``inspect.unwrap(f)`` where they check the
ValueError that a chapter (which runs without the checker) sees.
"""

import inspect
import math

import pytest
import torch

from nnapprox.claims import compare
from nnapprox.composition import (
    error_bound, expanding_layer, fit_step_network, fixed_point_distance_bound,
    gradient_descent_layer, growth_rate, unroll_pair, unroll_pair_errors, unroll_with_errors,
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
    assert growth_rate(seq[:2]) == pytest.approx(1.37, rel=1e-12)  # two points suffice
    with pytest.raises(ValueError, match="positive errors"):
        growth_rate(torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("bad", [torch.tensor([2.0]), torch.tensor([]), torch.ones(3, 2)])
def test_growth_rate_refuses_fewer_than_two_points_or_2d_input(bad):
    with pytest.raises(ValueError, match="at least 2 errors"):
        inspect.unwrap(growth_rate)(bad)


def test_unroll_with_errors_refuses_bad_input_before_running():
    calls = []

    def step(z):
        calls.append(1)
        return z

    unroll = inspect.unwrap(unroll_with_errors)
    z0 = torch.zeros(4, 3, dtype=torch.float64)
    for bad_z0 in (torch.zeros(3, dtype=torch.float64), torch.zeros(2, 4, 3, dtype=torch.float64),
                   torch.zeros(0, 3, dtype=torch.float64)):
        with pytest.raises(ValueError, match=r"z0 must be a 2-D tensor \(batch, d\)"):
            unroll(step, bad_z0, 5, 1e-3)
    with pytest.raises(ValueError, match="n_layers must be an integer >= 0"):
        unroll(step, z0, -1, 1e-3)
    with pytest.raises(ValueError, match="n_layers must be an integer >= 0"):
        unroll(step, z0, 2.5, 1e-3)
    with pytest.raises(ValueError, match="eps must be >= 0"):
        unroll(step, z0, 5, float("nan"))
    assert calls == []  # nothing ran
    import numpy as np
    assert unroll(step, z0, np.int64(3), 0.0).shape == (4, 4)  # numpy integers are fine


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


def test_gd_layer_rejects_non_symmetric_A_and_bad_step_sizes():
    g = gen(8)
    A = spd(4, 0.3, g)
    b = torch.zeros(4, dtype=torch.float64)
    skew = A.clone()
    skew[0, 3] += 1.0  # upper triangle only: eigvalsh would not notice
    assert torch.allclose(torch.linalg.eigvalsh(skew), torch.linalg.eigvalsh(A))
    with pytest.raises(ValueError, match="A must be symmetric"):
        gradient_descent_layer(skew, b, 1.0)
    for eta in (0.0, -0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eta must be a finite number > 0"):
            gradient_descent_layer(A, b, eta)
    raw = inspect.unwrap(gradient_descent_layer)
    with pytest.raises(ValueError, match=r"b must be a vector of shape \(4,\)"):
        raw(A, torch.zeros(3, dtype=torch.float64), 1.0)
    with pytest.raises(ValueError, match=r"A must be a square \(d, d\) matrix"):
        raw(A[:3], b, 1.0)
    # float32 rounding of Q diag Q^T is not an asymmetry
    _, rho = gradient_descent_layer(A.float(), b.float(), 1.0)
    assert rho == pytest.approx(0.7, abs=1e-5)


def test_fixed_point_distance_bound_is_an_upper_bound_and_tight_near_the_fixed_point():
    g = gen(9)
    A = spd(5, 0.25, g)
    b = torch.randn(5, generator=g, dtype=torch.float64)
    step, rho = gradient_descent_layer(A, b, 1.0)
    z_star = torch.linalg.solve(A, b)
    z = z_star + torch.randn(200, 5, generator=g, dtype=torch.float64)
    bound = fixed_point_distance_bound(step, z, rho)
    true = (z - z_star).norm(dim=1)
    assert bound.shape == (200,) and torch.all(true <= bound * (1 + 1e-12))
    # along the slowest eigenvector, |U(z) - z| = mu |z - z*| and 1 - rho = mu: equality
    evals, evecs = torch.linalg.eigh(A)
    z_slow = (z_star + 0.3 * evecs[:, 0]).unsqueeze(0)
    assert float(fixed_point_distance_bound(step, z_slow, rho)) == pytest.approx(0.3, rel=1e-9)
    with pytest.raises(ValueError, match="0 <= rho < 1"):
        fixed_point_distance_bound(step, z, 1.0)
    with pytest.raises(ValueError, match="2-D tensor"):
        inspect.unwrap(fixed_point_distance_bound)(step, z[0], rho)


def test_fit_step_network_refuses_bad_settings_before_training():
    step = lambda z: 0.5 * z
    with pytest.raises(ValueError, match=r"center must be a tensor of shape \(3,\)"):
        fit_step_network(step, 3, center=torch.zeros(2), n_steps=1)
    with pytest.raises(ValueError, match="n_steps must be an integer >= 1"):
        fit_step_network(step, 3, n_steps=0)
    with pytest.raises(ValueError, match="radius and lr must be > 0"):
        fit_step_network(step, 3, radius=0.0, n_steps=1)


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


def test_unroll_pair_errors_agrees_with_the_stored_trajectories():
    g = gen(11)
    A = spd(4, 0.25, g)
    b = torch.randn(4, generator=g, dtype=torch.float64)
    step, _ = gradient_descent_layer(A, b, 1.0)
    approx = lambda z: step(z) + 1e-2 * torch.cos(3 * z)
    z0 = torch.randn(32, 4, generator=g, dtype=torch.float64)
    c = torch.linalg.solve(A, b)
    Z, Z_hat, local = unroll_pair(step, approx, z0, 40)
    gaps, local2, last, reach = unroll_pair_errors(step, approx, z0, 40, center=c)
    torch.testing.assert_close(gaps, (Z - Z_hat).norm(dim=2), atol=0, rtol=0)
    torch.testing.assert_close(local2, local, atol=0, rtol=0)
    torch.testing.assert_close(last, Z_hat[-1], atol=0, rtol=0)
    torch.testing.assert_close(reach, (Z_hat - c).abs().amax(dim=2).amax(dim=0), atol=0, rtol=0)
    gaps0, local0, last0, reach0 = unroll_pair_errors(step, approx, z0, 0)
    assert gaps0.shape == (1, 32) and local0.shape == (0, 32) and torch.equal(last0, z0)
    with pytest.raises(ValueError, match=r"center must have shape \(4,\)"):
        inspect.unwrap(unroll_pair_errors)(step, approx, z0, 3, center=torch.zeros(3))


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


@pytest.mark.slow
def test_fit_step_network_is_accurate_around_its_center_not_elsewhere():
    """Trained on a cube around z* far from the origin, the network is accurate there and only there."""
    g = gen(10)
    A = spd(2, 0.25, g)
    z_star = torch.tensor([8.0, -6.0], dtype=torch.float64)
    step, _ = gradient_descent_layer(A, A @ z_star, 1.0)
    learned = fit_step_network(step, 2, width=32, n_steps=400, lr=1e-2, center=z_star, generator=g)
    near = z_star + (2 * torch.rand(512, 2, generator=g, dtype=torch.float64) - 1) * 2
    origin = (2 * torch.rand(512, 2, generator=g, dtype=torch.float64) - 1) * 2
    err_near = (learned(near) - step(near)).norm(dim=1).mean()
    err_origin = (learned(origin) - step(origin)).norm(dim=1).mean()
    assert float(err_near) < 0.1 * float((step(near) - near).norm(dim=1).mean())
    assert float(err_origin) > 3 * float(err_near)


def test_fit_step_network_on_shuffled_labels_learns_only_the_mean_increment():
    """The foil: with the targets permuted within each batch the network cannot follow the
    step; its error is of the size of the increment itself, the trained network's far below."""
    g = gen(11)
    A = spd(2, 0.25, g)
    step, _ = gradient_descent_layer(A, torch.zeros(2, dtype=torch.float64), 1.0)
    kw = dict(width=32, n_steps=400, lr=1e-2)
    real = fit_step_network(step, 2, generator=gen(12), **kw)
    foil = fit_step_network(step, 2, generator=gen(12), shuffle_labels=True, **kw)
    z = (2 * torch.rand(512, 2, generator=g, dtype=torch.float64) - 1) * 2
    size = float((step(z) - z).norm(dim=1).mean())
    err_real = float((real(z) - step(z)).norm(dim=1).mean())
    err_foil = float((foil(z) - step(z)).norm(dim=1).mean())
    assert err_real < 0.1 * size
    assert err_foil > 0.5 * size


# ------------------------------------------------------------------ bounded expanding maps
def test_tent_layer_is_bounded_and_stretches_small_differences_by_K():
    from nnapprox.composition import tent_layer

    step = tent_layer(1.5)
    z = torch.tensor([[0.1, 0.3, 0.7, 0.9]], dtype=torch.float64)
    assert torch.allclose(step(z), 1.5 * torch.minimum(z, 1 - z))
    far = torch.tensor([[-3.0, 4.0]], dtype=torch.float64)  # projected onto the cube first
    assert torch.equal(step(far), torch.zeros(1, 2, dtype=torch.float64))
    h = 1e-9
    assert float((step(z + h) - step(z)).abs().max()) == pytest.approx(1.5 * h, rel=1e-5)
    for K in (1.0, 2.0, 2.5):
        with pytest.raises(ValueError, match="1 < K < 2"):
            tent_layer(K)


def test_loss_depth_interpolates_and_reports_never():
    from nnapprox.composition import loss_depth, predicted_loss_depth

    rms = 1e-3 * 2.0 ** torch.arange(12, dtype=torch.float64)  # doubles every layer
    assert loss_depth(rms, 1e-3 * 2**5.5) == pytest.approx(5.5)
    assert loss_depth(rms, 10.0) == math.inf
    assert loss_depth(rms, 1e-4) == 0.0
    K, eps, tau = 1.5, 1e-4, 0.02
    ell = predicted_loss_depth(K, eps, tau)
    assert eps * K**ell / math.sqrt(K * K - 1) == pytest.approx(tau)
    with pytest.raises(ValueError):
        predicted_loss_depth(1.0, eps, tau)


def test_additive_prediction_and_ratio():
    from nnapprox.composition import additive_prediction, prediction_ratio

    P = additive_prediction(0.1, 0.5, 3)
    assert torch.allclose(P, torch.tensor([0.0, 0.1, 0.15, 0.175], dtype=torch.float64))
    assert torch.allclose(additive_prediction(0.1, 1.5, 3), 0.1 * torch.arange(4.0, dtype=torch.float64))
    e = torch.tensor([[0.0, 0.0], [0.05, 0.1], [0.15, 0.0], [0.0, 0.0]], dtype=torch.float64)
    assert prediction_ratio(e, P) == pytest.approx(1.0)
    with pytest.raises((ValueError, TypeError)):  # jaxtyping's shape check under pytest, else ours
        prediction_ratio(e, P[:2])


def test_held_out_prediction_holds_for_a_contraction_and_fails_for_an_expanding_step():
    """The stacked-error prediction discriminates: same errors, contracting vs expanding step."""
    from nnapprox.composition import additive_prediction, prediction_ratio

    g = torch.Generator().manual_seed(0)
    z0 = torch.randn(16, 4, generator=g, dtype=torch.float64)
    contract, _ = expanding_layer(0.5, 4, generator=g)
    expand, _ = expanding_layer(1.5, 4, generator=g)
    eps = 1e-3
    good = prediction_ratio(unroll_with_errors(contract, z0, 30, eps, generator=g),
                            additive_prediction(1.001 * eps, 0.5, 30))  # e_1 = eps up to rounding
    bad = prediction_ratio(unroll_with_errors(expand, z0, 30, eps, generator=g),
                           additive_prediction(1.001 * eps, 1.5, 30))
    assert good <= 1.0 < bad


def test_relative_error_tells_a_lost_state_from_a_kept_one():
    from nnapprox.composition import relative_error, tent_layer

    g = torch.Generator().manual_seed(1)
    z0 = torch.rand(256, 8, generator=g, dtype=torch.float64)
    _, z, z_hat = unroll_with_errors(tent_layer(1.75), z0, 40, 1e-3, generator=g, return_states=True)
    assert float(relative_error(z, z_hat).median()) == pytest.approx(math.sqrt(2), abs=0.15)
    linear, _ = expanding_layer(1.75, 8, generator=g)
    _, z, z_hat = unroll_with_errors(linear, z0, 40, 1e-3, generator=g, return_states=True)
    assert float(relative_error(z, z_hat).median()) < 0.01
    with pytest.raises((ValueError, TypeError)):
        relative_error(z[:1], z_hat[:1])
