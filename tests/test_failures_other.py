"""Tests of the linear-periodic, sensitivity and training modules of the failures chapter."""

import math

import pytest
import torch

import nnapprox.failures as F


def test_landscape_matches_monte_carlo():
    g = torch.Generator().manual_seed(0)
    u = torch.tensor([0.6, 0.8], dtype=torch.float64)
    w = torch.tensor([[0.3, -0.2], [1.0, 1.0], [1.2, 1.6]], dtype=torch.float64)
    x = torch.randn(400_000, 2, generator=g, dtype=torch.float64)
    mc = ((torch.cos(x @ w.T) - torch.cos(2.0 * x @ u)[:, None]) ** 2).mean(0)
    torch.testing.assert_close(F.periodic_loss_landscape(w, u, 2.0), mc, rtol=0, atol=5e-3)
    assert float(F.periodic_loss_landscape(2.0 * u, u, 2.0)) == pytest.approx(0.0, abs=1e-12)


def test_periodic_variance_unbiased_against_large_sample():
    """Cross-fitted estimator: a small sample agrees with a large one for the same directions."""
    d, rs = 3, [1.0, 2.0]
    params = F.mlp_init(d, 8, torch.Generator().manual_seed(0))
    big = F.periodic_gradient_variance(F.mlp_forward, params, d, rs, 16, 2**17, torch.Generator().manual_seed(1))
    small = F.periodic_gradient_variance(F.mlp_forward, params, d, rs, 16, 2**12, torch.Generator().manual_seed(1))
    # same directions (same generator start), smaller sample: agrees within sampling error
    assert torch.allclose(small, big, rtol=0.3)


def test_periodic_variance_returns_G2_of_its_own_inputs():
    """return_G2: same variance, and G^2 is the mean ||g||^2 over the same 2 n_samples inputs."""
    d, rs, n = 3, [1.0, 2.0], 512
    params = F.mlp_init(d, 8, torch.Generator().manual_seed(0))
    var = F.periodic_gradient_variance(F.mlp_forward, params, d, rs, 16, n, torch.Generator().manual_seed(1))
    var2, G2 = F.periodic_gradient_variance(
        F.mlp_forward, params, d, rs, 16, n, torch.Generator().manual_seed(1), return_G2=True
    )
    torch.testing.assert_close(var2, var, rtol=0, atol=0)
    g = torch.Generator().manual_seed(1)
    F.random_directions(16, d, g)  # the draws of the function, in its order
    x = torch.cat([torch.randn(n, d, generator=g).double() for _ in range(2)])
    expected = float(F.per_example_gradients(F.mlp_forward, params, x).pow(2).sum(1).mean())
    assert G2 == pytest.approx(expected, rel=1e-12)
    x_big = torch.randn(2**16, d, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    G2_big = float(F.per_example_gradients(F.mlp_forward, params, x_big).pow(2).sum(1).mean())
    assert G2 == pytest.approx(G2_big, rel=0.1)  # unbiased: agrees with a large sample


def test_per_repeat_excess_is_below_zero_under_the_bound():
    """Var - kappa G^2 per repeat: its mean is <= 0 within a few s.e. (the bound holds)."""
    d, r, reps = 5, 1.0, 8
    params = F.mlp_init(d, 16, torch.Generator().manual_seed(3))
    kappa = F.periodic_variance_bound(d, r)
    excess = []
    for i in range(reps):
        v, G2 = F.periodic_gradient_variance(
            F.mlp_forward, params, d, [r], 32, 1024, torch.Generator().manual_seed(10 + i), return_G2=True
        )
        excess.append(float(v[0]) * 32 / 31 - kappa * G2)
    excess = torch.tensor(excess)
    assert float(excess.mean()) <= 4 * float(excess.std() / reps**0.5)


@pytest.mark.parametrize("d", [2, 3, 5, 10, 20])
@pytest.mark.parametrize("t", [0.25, 1.0, 4.0, 9.0, 16.0])
def test_variance_bound_is_the_funk_hecke_eigenvalue(d, t):
    """kappa_d(t) = eigenvalue of the kernel e^{-t} cosh(t u.v) on degree-2 harmonics (quadrature)."""
    from scipy.integrate import quad

    p2 = lambda s: (d * s * s - 1) / (d - 1)  # noqa: E731  Gegenbauer, normalised p2(1) = 1
    weight = lambda th: math.sin(th) ** (d - 2)  # noqa: E731  law of s = cos(th) = u.v
    # cosh - 1 = 2 sinh^2(./2): the constant term integrates to 0 against p2 (less cancellation)
    kernel = lambda s: 2 * math.exp(-t) * math.sinh(t * s / 2) ** 2  # noqa: E731
    num = quad(lambda th: kernel(math.cos(th)) * p2(math.cos(th)) * weight(th),
               0, math.pi, epsabs=0, epsrel=1e-12, limit=200)[0]
    den = quad(weight, 0, math.pi, epsabs=0, epsrel=1e-12)[0]
    assert F.periodic_variance_bound(d, t**0.5) == pytest.approx(num / den, rel=1e-8)


def test_variance_bound_attained_by_a_degree_two_feature():
    """p_w(x) = w (x_1^2 - x_2^2): Var = 4 t^2 e^{-t} / (d(d+2)) exactly, G^2 = 4; tight as r -> 0."""
    d = 6
    exact = lambda r: 4 * r**4 * math.exp(-(r**2)) / (d * (d + 2))  # noqa: E731
    ratios = [exact(r) / (4 * F.periodic_variance_bound(d, r)) for r in (0.05, 0.5, 1.0, 2.0)]
    assert max(ratios) <= 1 + 1e-12 and ratios[-1] < 0.9
    assert ratios[0] == pytest.approx(1, abs=1e-3)
    # the cross-fitted estimator finds the exact value (population over directions: n/(n-1))
    model = lambda p, x: p["w"] * (x[:, 0] ** 2 - x[:, 1] ** 2)  # noqa: E731
    params = {"w": torch.tensor(0.0, dtype=torch.float64)}
    n_dir = 256
    est = F.periodic_gradient_variance(model, params, d, [1.0], n_dir, 2**16, torch.Generator().manual_seed(0))
    truth = 4 * math.exp(-1.0) / (d * (d + 2))
    assert float(est[0]) * n_dir / (n_dir - 1) == pytest.approx(truth, rel=0.25)


def test_variance_bound_validation():
    with pytest.raises(ValueError, match="d must be"):
        F.periodic_variance_bound(1, 1.0)
    with pytest.raises(ValueError, match="r must be"):
        F.periodic_variance_bound(3, 0.0)


def test_r_squared_perfect_and_constant():
    y = torch.randn(100, generator=torch.Generator().manual_seed(0))
    assert float(F.r_squared(y, y)) == 1.0
    assert float(F.r_squared(torch.full_like(y, float(y.mean())), y)) == pytest.approx(0.0, abs=1e-6)


def test_periodic_training_ensemble_shapes_and_validation():
    r2, losses = F.train_periodic_ensemble([(2, 1.0), (3, 1.0)], 5, torch.Generator().manual_seed(0), width=8)
    assert r2.shape == (2,) and losses.shape == (5, 2)
    with pytest.raises(ValueError, match="configs"):
        F.train_periodic_ensemble([(2, -1.0)], 5, torch.Generator())


def test_parity_training_learns_small_d():
    steps, acc, progress, masks = F.train_parity_ensemble([4], [2], 1500, torch.Generator().manual_seed(0), eval_every=500, lr=0.05)
    assert masks.sum() == 2 and acc[-1, 0] > 0.95


def test_sensitivity_decays_like_one_over_n():
    layers = F.init_encoder(2, 8, torch.Generator().manual_seed(0))
    ns = torch.tensor([16.0, 64.0, 256.0])
    change = torch.tensor([F.flip_sensitivity(layers, int(n), 16, torch.Generator().manual_seed(int(n))) for n in ns])
    assert -1.3 < F.loglog_slope(ns, change) < -0.7


def test_encoder_last_equals_full_forward_and_flip_changes_consistent():
    layers = F.init_encoder(2, 8, torch.Generator().manual_seed(1))
    tokens = torch.randint(0, 2, (5, 40), generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(F.encoder_last(layers, tokens), F.encoder_forward(layers, tokens)[:, -1],
                               rtol=0, atol=1e-12)
    one_by_one = F.flip_changes(layers, 40, 6, torch.Generator().manual_seed(3), chunk=1)
    batched = F.flip_changes(layers, 40, 6, torch.Generator().manual_seed(3), chunk=32)
    assert one_by_one.shape == (6,) and (one_by_one > 0).all()
    torch.testing.assert_close(one_by_one, batched, rtol=0, atol=1e-12)
    mean = F.flip_sensitivity(layers, 40, 6, torch.Generator().manual_seed(3))
    assert mean == pytest.approx(float(batched.mean()), rel=1e-12)
    with pytest.raises(ValueError, match="chunk"):
        F.flip_changes(layers, 40, 6, chunk=0)


def test_loglog_slope_recovers_power():
    x = torch.tensor([1.0, 2.0, 4.0, 8.0], dtype=torch.float64)
    assert F.loglog_slope(x, 3 * x**-1.5) == pytest.approx(-1.5, abs=1e-12)
    with pytest.raises(ValueError):
        F.loglog_slope(x, -x)


def test_positional_encoding_bounded():
    pe = F.positional_encoding(50, 7)
    assert pe.shape == (50, 7) and pe.abs().max() <= 1.0 + 1e-12 and not math.isnan(float(pe.sum()))


def test_pwl_matrix_is_square_of_cumsum():
    n = 9
    T = torch.tril(torch.ones(n, n, dtype=torch.float64))
    torch.testing.assert_close(F.pwl_matrix(n), T @ T, rtol=0, atol=0)
    inverse = torch.einsum("a,aij->ij", torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64), F.shift_powers(n))
    torch.testing.assert_close(inverse @ F.pwl_matrix(n), torch.eye(n, dtype=torch.float64), rtol=0, atol=1e-12)


def test_fc_gd_matches_closed_form():
    errors = F.fc_encoder_gd(12, 200)
    steps = torch.tensor([0, 1, 10, 200])
    torch.testing.assert_close(errors[steps], F.fc_encoder_error_closed_form(12, steps), rtol=1e-9, atol=1e-12)


def test_whitened_convolution_converges_geometrically():
    errors = F.conv_encoder_gd(16, 30, whiten=True, eta=0.5)
    assert errors[-1] < 1e-15 and F.steps_to_reach(errors, 1e-2) == 4
    assert F.steps_to_reach(errors, -1.0) is None
    with pytest.raises(ValueError, match="eta"):
        F.conv_encoder_gd(16, 3, eta=1.5)


def test_relevance_is_one_for_symmetric_weights():
    W = torch.ones(1, 5, 4)
    masks = torch.tensor([[1, 1, 0, 0]])
    assert float(F.relevance(W, masks, [4])[0]) == pytest.approx(1.0)


def test_flip_of_the_last_symbol_is_the_flip_at_position_n():
    """last=True flips position n: the same change as flipping it by hand, and not O(1/n)."""
    layers = F.init_encoder(2, 8, torch.Generator().manual_seed(4))
    n = 30
    changes = F.flip_changes(layers, n, 5, torch.Generator().manual_seed(6), last=True)
    g = torch.Generator().manual_seed(6)
    tokens = torch.randint(0, 2, (5, n), generator=g)
    flipped = tokens.clone()
    flipped[:, -1] = 1 - flipped[:, -1]
    expected = (F.encoder_last(layers, tokens) - F.encoder_last(layers, flipped)).norm(dim=1)
    torch.testing.assert_close(changes, expected, rtol=0, atol=1e-12)
    ns = torch.tensor([16.0, 64.0, 256.0])
    last = torch.tensor([float(F.flip_changes(layers, int(m), 8, torch.Generator().manual_seed(int(m)),
                                              last=True).mean()) for m in ns])
    assert F.loglog_slope(ns, last) > -0.5  # the lemma excludes i = n: no 1/n decay


def test_singular_values_of_the_encoding_matrix_within_the_proven_bracket():
    """sigma_n(W) = 1/||(I - S)^2|| in [1/4, 1/sqrt 6]; ||W 1||/sqrt n <= sigma_1 <= ||W||_F."""
    for n in (4, 9, 33, 100):
        W = F.pwl_matrix(n)
        s = torch.linalg.svdvals(W)
        inverse = torch.einsum("a,aij->ij", torch.tensor([1.0, -2.0, 1.0], dtype=torch.float64), F.shift_powers(n))
        assert float(s[-1]) == pytest.approx(1 / float(torch.linalg.matrix_norm(inverse, ord=2)), rel=1e-10)
        assert 0.25 <= float(s[-1]) <= 6**-0.5 + 1e-12
        ones = torch.ones(n, dtype=torch.float64)
        assert n**2 / 20**0.5 <= float((W @ ones).norm()) / n**0.5 <= float(s[0]) <= float(W.norm())
        assert F.condition_squared(n) == pytest.approx(float(s[0] / s[-1]) ** 2, rel=1e-12)


def test_fc_lower_bound_is_the_smallest_term_and_below_the_curve():
    n, steps = 10, torch.arange(0, 3001, 100)
    curve = F.fc_encoder_gd(n, 3000)[steps]
    bound = F.fc_encoder_error_lower_bound(n, steps)
    assert bool((bound <= curve * (1 + 1e-12)).all())
    s2 = torch.linalg.svdvals(F.pwl_matrix(n)) ** 2
    torch.testing.assert_close(bound, (1 - s2[-1] / s2[0]) ** (2 * steps.double()) / n, rtol=1e-12, atol=0)
    late = F.fc_encoder_error_closed_form(n, torch.tensor([10**6]))  # long after the other terms died
    assert float(late[0]) == pytest.approx(float(F.fc_encoder_error_lower_bound(n, torch.tensor([10**6]))[0]), rel=1e-6)


def test_periodic_variance_bound_stays_finite_for_large_d():
    """At d = 1000 the prefactor alone overflows a float: the bound is computed in log space and
    matches the small-r asymptotic r^4 e^{-r^2} / (d (d + 2)) there."""
    from nnapprox.failures.periodic import _log_bessel_i
    from scipy.special import ive

    for d, r in ((1000, 2.0), (4000, 3.0), (2000, 1.0)):  # r^4 << d: the asymptotic regime
        kappa = F.periodic_variance_bound(d, r)
        asym = r**4 * math.exp(-(r**2)) / (d * (d + 2))
        assert math.isfinite(kappa) and kappa == pytest.approx(asym, rel=0.05)
    for nu, t in ((3.0, 1.0), (7.0, 9.0), (12.5, 30.0)):  # the series against scipy where both work
        assert _log_bessel_i(nu, t) == pytest.approx(math.log(ive(nu, t)) + t, rel=1e-12)
