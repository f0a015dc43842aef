"""Exactness tests (float64) for the constructions of the depth chapter."""

import math

import pytest
import torch

from nnapprox import depth as dp
from nnapprox.claims import Claims

f64 = dict(dtype=torch.float64)
X0, X1 = torch.zeros(1, **f64), torch.ones(1, **f64)


@pytest.mark.parametrize("L", [1, 2, 3, 7, 12])
def test_sawtooth_pieces_and_values(L):
    w = dp.sawtooth_weights(L)
    assert dp.count_pieces_along_line(w, X0, X1) == 2**L
    assert dp.count_regions_along_line(w, X0, X1) == 2**L
    grid = torch.arange(2 ** (L + 3) + 1, **f64) / 2 ** (L + 3)
    assert torch.allclose(dp.relu_net(w, grid[:, None])[:, 0], dp.sawtooth(grid, L), atol=1e-12, rtol=0)
    assert dp.count_pieces_on_grid(grid, dp.relu_net(w, grid[:, None])[:, 0]) == 2**L
    x, y = dp.alternating_points(L)
    assert dp.classification_error(dp.relu_net(w, x), y) == 0.0


def test_non_dyadic_grid_double_counts():
    L = 6
    xs = torch.linspace(0, 1, 2 ** (L + 3) + 7, **f64)
    assert dp.count_pieces_on_grid(xs, dp.relu_net(dp.sawtooth_weights(L), xs[:, None])[:, 0]) == 2 ** (L + 1) - 2


def test_shallow_piece_bound_and_counting_lemma():
    g = torch.Generator().manual_seed(0)
    m = [2, 5, 9, 17]
    fam = dp.init_shallow_family(m, g)
    x, y = dp.alternating_points(4)
    X, Y, W = dp.pad_tasks([x], [y], [len(m)])
    fam = dp.fit_output_layer(fam, X, Y, W)
    out = dp.shallow_family(fam, X)
    for j, mj in enumerate(m):
        member = dp.shallow_member(fam, j)
        assert torch.allclose(dp.relu_net(member, x)[:, 0], out[j], atol=1e-12)
        p = dp.count_pieces_along_line(member, X0, X1)
        assert p <= mj + 1
        assert dp.classification_error(out[j][:, None], y) >= dp.telgarsky_error_lower_bound(16, p)


def test_pieces_le_regions_random_nets():
    g = torch.Generator().manual_seed(1)
    for depth in (1, 3, 5):
        net = dp.random_relu_net([2] + [6] * depth + [1], g)
        a, b = torch.randn(2, generator=g, **f64), torch.randn(2, generator=g, **f64)
        t = dp.breakpoints_along_line(net, a, b)
        # between breakpoints the net is affine: midpoint value = average of the ends
        mid = (t[1:] + t[:-1]) / 2
        f = lambda s: dp.relu_net(net, a + s[:, None] * (b - a))[:, 0]
        assert torch.allclose(f(mid), (f(t[1:]) + f(t[:-1])) / 2, atol=1e-10)
        assert dp.count_pieces_along_line(net, a, b) <= dp.count_regions_along_line(net, a, b)
        assert dp.count_regions_along_line(net, a, b) <= dp.max_pieces_on_line([6] * depth)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_cantor_net_exact(n):
    g = torch.Generator().manual_seed(n)
    for levels in (dp.coarse_levels(n), dp.spread_levels(n), dp.fine_levels(n)):
        x, y = dp.sample_cantor_data(n, 2000, levels, g)
        assert bool((dp.in_cantor_set(x[:, 0], n).double() == y[:, 0]).all())
        assert bool(((dp.relu_net(dp.cantor_net_weights(n), x) >= 0).double() == y).all())


@pytest.mark.parametrize("n", [2, 5])
def test_cantor_approximation_curves(n):
    """Level-j classifiers: chance on fine negatives for j < n, 1/2 + j/(2n) on spread ones."""
    g = torch.Generator().manual_seed(0)
    x_f, y_f = dp.sample_cantor_data(n, 4000, dp.fine_levels(n), g)
    x_s, y_s = dp.sample_cantor_data(n, 40_000, dp.spread_levels(n), g)
    for j in range(1, n):
        acc_f = ((dp.relu_net(dp.cantor_net_weights(j), x_f) >= 0).double() == y_f).double().mean()
        assert float(acc_f) == 0.5
        acc_s = ((dp.relu_net(dp.cantor_net_weights(j), x_s) >= 0).double() == y_s).double().mean()
        assert abs(float(acc_s) - (0.5 + j / (2 * n))) < 4 * (0.25 / 40_000) ** 0.5
    with pytest.raises(ValueError):
        dp.spread_levels(0)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 11])
def test_parity_constructions(n):
    X = dp.all_bit_strings(n)
    target = dp.parity(X)
    out, depth, gates = dp.xor_tree(X)
    assert bool((out == target).all()) and (depth, gates) == dp.xor_tree_size(n)
    assert bool((dp.relu_net(dp.parity_one_hidden_layer_weights(n), X)[:, 0] == target).all())
    terms = dp.parity_dnf_terms(n)
    assert terms.shape[0] == 2 ** (n - 1)
    assert bool((dp.relu_net(dp.dnf_weights(terms), X)[:, 0] == target).all())


def test_width_two_hat_and_width_one_monotone():
    x = torch.linspace(-1, 2, 3001, **f64)
    assert dp.sup_error(dp.hat_width2_weights(), x, dp.hat(x)) <= 1e-12
    g = torch.Generator().manual_seed(0)
    for depth in range(1, 6):
        net = dp.random_relu_net([1] + [1] * depth + [1], g, init="default")
        vals = dp.relu_net(net, x[:, None])[:, 0]
        assert dp.is_monotone(vals)
        grid = torch.linspace(0, 1, 1001, **f64)
        assert dp.sup_error(net, grid, dp.hat(grid)) >= 0.5


@pytest.mark.parametrize("k", [1, 3, 8, 33])
def test_square_interpolant_error(k):
    xx = torch.linspace(-1, 1, 8 * k + 1, **f64)
    e = dp.relu_net(dp.square_interpolant_weights(k), xx[:, None])[:, 0] - xx**2
    assert float(e.min()) >= -1e-12
    assert abs(float(e.max()) - (2 / k) ** 2 / 4) <= 1e-12


def test_ball_indicator_exact_outside_band():
    d, k, R, delta = 6, 16, 0.7, 0.02
    P = dp.near_sphere_points(4000, d, R, 0.3, torch.Generator().manual_seed(0))
    far = ((P**2).sum(1) - R**2).abs() > delta + dp.squared_norm_error_bound(d, k)
    out = dp.relu_net(dp.ball_indicator_weights(d, k, R, delta), P)[:, 0]
    assert torch.allclose(out[far], dp.ball_indicator(P, R)[far, 0], atol=1e-9)


def test_weight_tied_equals_mlp_and_anderson():
    g = torch.Generator().manual_seed(0)
    net = dp.random_relu_net([3, 7, 5, 4, 2], g)
    tied = dp.weight_tied_from_mlp(net)
    x = torch.randn(9, 3, generator=g, **f64)
    D = tied["W_z"].shape[0]
    z0 = torch.randn(9, D, generator=g, **f64)
    assert torch.allclose(dp.output_block(tied, dp.iterate_tied(tied, x, 4, z0)), dp.relu_net(net, x), atol=1e-12, rtol=0)
    assert (dp.output_block(tied, dp.iterate_tied(tied, x, 3)) - dp.relu_net(net, x)).abs().max() > 1e-6
    z, _ = dp.anderson(lambda z: dp.tied_layer(tied, z, x), z0, tol=1e-12)
    assert torch.allclose(dp.output_block(tied, z), dp.relu_net(net, x), atol=1e-9, rtol=0)


def test_anderson_matches_plain_iteration_on_contraction():
    g = torch.Generator().manual_seed(2)
    W = torch.randn(20, 20, generator=g, **f64)
    W = 0.8 * W / torch.linalg.matrix_norm(W, ord=2)
    b = torch.randn(4, 20, generator=g, **f64)
    F = lambda z: torch.relu(z @ W.T + b)
    z_p, _ = dp.fixed_point_iteration(F, torch.zeros(4, 20, **f64), tol=1e-12, max_iter=5000)
    z_a, _ = dp.anderson(F, torch.zeros(4, 20, **f64), tol=1e-12)
    assert torch.allclose(z_p, z_a, atol=1e-9)
    assert torch.allclose(F(z_a), z_a, atol=1e-9)


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="positive integer"):
        dp.sawtooth_weights(0)
    with pytest.raises(ValueError, match="valid inits"):
        dp.random_relu_net([1, 2, 1], torch.Generator(), init="xavier")
    with pytest.raises(ValueError, match="divisor"):
        dp.equal_width_architecture(60, 7, 2)
    with pytest.raises(ValueError, match="level_probs"):
        dp.sample_cantor_data(3, 10, torch.ones(3, **f64), torch.Generator())


def test_claim_can_fail_on_wrong_construction():
    wrong = dp.sawtooth_weights(5)
    wrong["b0"] = wrong["b0"] + torch.tensor([0.0, 0.1], **f64)  # misplaced fold
    claims = Claims()
    ok = claims.check("sawtooth pieces", value=dp.count_pieces_along_line(wrong, X0, X1), op="==", threshold=2**5,
                      kind="exact", source="Telgarsky (2016)")
    assert not ok and claims.failed
    assert math.isclose(dp.telgarsky_error_lower_bound(64, 4), 48 / 192)


def test_ball_error_rate_matches_plain_monte_carlo():
    # importance sampling in the shell (rho_-, R] equals the plain estimate over the whole band
    d, k, R, delta, s, n = 6, 8, 0.7, 0.02, 0.2, 200_000
    g = torch.Generator().manual_seed(0)
    u = torch.randn(n, d, generator=g, **f64)
    rho = R + s * (2 * torch.rand(n, 1, generator=g, **f64) - 1)
    x = rho * u / u.norm(dim=1, keepdim=True)
    out = dp.relu_net(dp.ball_indicator_weights(d, k, R, delta), x)[:, 0]
    plain = float(((out > 0.5).double() != dp.ball_indicator(x, R)[:, 0]).double().mean())
    rate = dp.ball_error_rate(d, k, R, delta, s, 20_000, torch.Generator().manual_seed(1))
    se = (plain * (1 - plain) / n) ** 0.5
    assert plain > 0 and abs(rate - plain) <= 4 * se + 0.01 * plain
    # no mistake outside the shell: points with rho > R or rho^2 <= R^2 - d/k^2 are all right
    outside = (rho[:, 0] > R) | (rho[:, 0] ** 2 <= R**2 - dp.squared_norm_error_bound(d, k))
    assert bool(((out > 0.5).double() == dp.ball_indicator(x, R)[:, 0])[outside].all())


def test_ball_error_rate_falls_like_inverse_k_squared():
    d, R, s = 10, 0.8, 0.3
    rates = [dp.ball_error_rate(d, k, R, 0.01, s, 4000, torch.Generator().manual_seed(k)) for k in (32, 64)]
    for k, r in zip((32, 64), rates):
        assert abs(r * k**2 / (d / (6 * R * s)) - 1) < 0.1  # mean chord error h^2/6 per coordinate


def test_tied_output_error_bound_holds_and_is_tight_at_the_fixed_point():
    g = torch.Generator().manual_seed(3)
    mlp = dp.random_relu_net([3, 8, 8, 8, 2], g, init="he", bias_std=0.1)
    tied = dp.weight_tied_from_mlp(mlp)
    x = torch.randn(32, 3, generator=g, **f64)
    y = dp.relu_net(mlp, x)
    z_exact = dp.iterate_tied(tied, x, 4)
    assert float(dp.tied_output_error_bound(mlp, z_exact, x).max()) < 1e-12
    for scale in (1e-8, 1e-3, 1.0):
        z = z_exact + scale * torch.randn(z_exact.shape, generator=g, **f64)
        err = (dp.output_block(tied, z) - y).norm(dim=1)
        assert (err <= dp.tied_output_error_bound(mlp, z, x) * (1 + 1e-12) + 1e-14).all()
    with pytest.raises(ValueError, match="z must be"):
        dp.tied_output_error_bound(mlp, z_exact[:, :5], x)
