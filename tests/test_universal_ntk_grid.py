"""Tests for the kernel-regime learning times, the simplicial interpolant and the per-sequence
reversal errors of nnapprox.universal (issue 18 additions)."""

import math

import jaxtyping
import pytest
import torch

from nnapprox import universal as ua


# ----------------------------------------------------------------- NTK on the circle
def test_relu_ntk_gram_is_circulant_and_matches_monte_carlo():
    theta, u = ua.circle_inputs(16)
    K = ua.relu_ntk_gram(u)
    torch.testing.assert_close(K, K.T, rtol=0, atol=1e-15)
    # circulant: row j is row 0 shifted by j
    for j in range(16):
        torch.testing.assert_close(K[j], K[0].roll(j), rtol=0, atol=1e-12)
    # E[1(w.u>0) 1(w.u'>0)] (u.u') with w ~ N(0, I_3), by Monte Carlo
    g = torch.Generator().manual_seed(0)
    W = torch.randn(400_000, 3, generator=g, dtype=torch.float64)
    act = (W @ u.T > 0).double()
    K_mc = (act.T @ act) / len(W) * (u @ u.T)
    assert float((K_mc - K).abs().max()) < 0.01


def test_output_layer_kernel_matches_monte_carlo_and_decays_like_k_to_the_fourth():
    theta, u = ua.circle_inputs(16)
    K = ua.relu_output_layer_gram(u)
    g = torch.Generator().manual_seed(1)
    W = torch.randn(400_000, 3, generator=g, dtype=torch.float64)
    feats = (W @ u.T).clamp_min(0)
    K_mc = feats.T @ feats / len(W)  # E[relu(w.u) relu(w.u')]
    assert float((K_mc - K).abs().max()) < 0.02
    theta, u = ua.circle_inputs(512)
    K = ua.relu_output_layer_gram(u)
    scaled = [ua.ntk_eigenvalue(K, theta, k) * k**4 for k in (16, 32, 64)]
    assert max(scaled) / min(scaled) < 1.1  # k^4 mu_k nearly constant: faster decay than the NTK


def test_ntk_eigenvalues_decay_like_k_squared():
    theta, u = ua.circle_inputs(256)
    K = ua.relu_ntk_gram(u)
    scaled = [ua.ntk_eigenvalue(K, theta, k) * k**2 for k in (8, 16, 32)]
    assert max(scaled) / min(scaled) < 1.05  # k^2 mu_k is nearly constant for large k
    assert ua.ntk_eigenvalue(K, theta, 3) > ua.ntk_eigenvalue(K, theta, 4)
    with pytest.raises(ValueError, match="1 <= k < N/2"):
        ua.ntk_eigenvalue(K, theta, 128)


def test_ntk_learning_time_formula():
    # (1 - 0.1)^t <= 1/2 first at t = 7 (0.9^6 = 0.531, 0.9^7 = 0.478)
    assert ua.ntk_learning_time(0.1, 1.0) == 7
    with pytest.raises(ValueError, match="eta \\* mu"):
        ua.ntk_learning_time(2.0, 1.0)


def test_harmonic_amplitude_reads_the_amplitude():
    theta, _ = ua.circle_inputs(64)
    f = torch.stack([0.7 * torch.cos(3 * theta + 1.0), 2.0 * torch.sin(5 * theta)])
    amp = ua.harmonic_amplitude(f, theta, torch.tensor([3.0, 5.0], dtype=torch.float64))
    torch.testing.assert_close(amp, torch.tensor([0.7, 2.0], dtype=torch.float64))


def test_train_harmonics_follows_its_linearisation_in_the_lazy_regime():
    ks = [2, 4, 6]
    out = ua.train_harmonics(ks, torch.Generator().manual_seed(1), width=256, n_repeats=3,
                             amplitude=1e-5)
    assert out["t_train"].shape == (3, 3) and out["t_linear"].shape == (3, 3)
    assert float(out["t_train"].max()) <= out["n_steps"]  # all learned
    # tiny amplitude: training equals its linearised dynamics to within one step
    assert float((out["t_train"] - out["t_linear"]).abs().max()) <= 1.0
    # and learning time grows with frequency for every repeat
    assert bool((out["t_train"].diff(dim=1) > 0).all())


def test_crossing_gap_ratio_implies_at_most_one_step():
    ks = [2, 4]
    out = ua.train_harmonics(ks, torch.Generator().manual_seed(2), width=128, n_repeats=2,
                             amplitude=1e-5)
    assert out["amp_train"].shape == out["amp_linear"].shape
    assert out["amp_train"].shape[:2] == (2, 2)
    ratio = ua.crossing_gap_ratio(out["amp_train"], out["amp_linear"], out["t_linear"], 0.5e-5)
    assert ratio.shape == (2, 2)
    steps = (out["t_train"] - out["t_linear"]).abs()
    assert bool((steps[ratio < 1] <= 1).all())  # the crossing argument


def test_crossing_gap_ratio_detects_a_path_off_its_linearisation():
    # linear path crosses 0.5 at T = 3 with margins 0.1; a trained path shifted down by 0.2
    lin = torch.tensor([0.0, 0.2, 0.4, 0.5, 0.6, 0.7], dtype=torch.float64).reshape(1, 1, 6)
    t_lin = torch.tensor([[3.0]], dtype=torch.float64)
    ratio_same = ua.crossing_gap_ratio(lin.clone(), lin, t_lin, 0.5)
    assert float(ratio_same) == 0.0
    ratio_off = ua.crossing_gap_ratio(lin - 0.2, lin, t_lin, 0.5)
    torch.testing.assert_close(ratio_off, torch.tensor([[2.0]], dtype=torch.float64))
    # a path whose step T + 1 was not recorded cannot be certified
    assert math.isinf(float(ua.crossing_gap_ratio(lin[..., :4], lin[..., :4], t_lin, 0.5)))
    # mismatched paths are refused (jaxtyping's check fires first under pytest)
    with pytest.raises((ValueError, jaxtyping.TypeCheckError)):
        ua.crossing_gap_ratio(lin, lin[..., :4], t_lin, 0.5)


def test_train_harmonics_rejects_bad_input():
    g = torch.Generator()
    with pytest.raises(ValueError, match="ks must be"):
        ua.train_harmonics([40], g, n_points=64)
    with pytest.raises(ValueError, match="width must be an even"):
        ua.train_harmonics([3], g, width=7)
    with pytest.raises(ValueError, match="n_repeats"):
        ua.train_harmonics([3], g, n_repeats=1)


def test_power_law_exponents_recovers_a_power():
    ks = [2, 3, 5, 8]
    t = torch.tensor([[k**2.0 for k in ks], [3 * k**1.5 for k in ks]])
    torch.testing.assert_close(ua.power_law_exponents(ks, t),
                               torch.tensor([2.0, 1.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        ua.power_law_exponents(ks, t[:, :2])


# ----------------------------------------------------------- simplicial interpolant
@pytest.mark.parametrize("d", [1, 2, 3])
def test_simplicial_interpolant_is_exact_on_affine_functions_and_at_nodes(d):
    g = torch.Generator().manual_seed(d)
    w = torch.randn(d, generator=g, dtype=torch.float64)
    affine = lambda x: 0.3 + x @ w
    values = ua.grid_values(affine, 5, d)
    x = torch.rand(500, d, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ua.simplicial_interpolate(values, x), affine(x), rtol=0, atol=1e-13)
    f = lambda x: torch.exp(-((x - 0.3) ** 2).sum(-1))
    values = ua.grid_values(f, 5, d)
    axis = torch.linspace(0, 1, 5, dtype=torch.float64)
    nodes = torch.stack(torch.meshgrid(*([axis] * d), indexing="ij"), -1).reshape(-1, d)
    torch.testing.assert_close(ua.simplicial_interpolate(values, nodes), f(nodes), rtol=0,
                               atol=1e-14)


def test_simplicial_interpolant_is_piecewise_linear_and_differs_from_multilinear():
    # on one cell with values of x1*x2 at the corners, multilinear gives x1*x2 (not piecewise
    # linear), simplicial gives min(x1, x2) (the Kuhn triangulation's interpolant)
    values = torch.tensor([[0.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    x = torch.rand(200, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    torch.testing.assert_close(ua.simplicial_interpolate(values, x), x.min(1).values, rtol=0,
                               atol=1e-15)
    torch.testing.assert_close(ua.multilinear_interpolate(values, x), x.prod(1), rtol=0,
                               atol=1e-15)


def test_interpolation_rmse_rejects_unknown_method():
    with pytest.raises(ValueError, match="method must be one of"):
        ua.interpolation_rmse(lambda x: x.sum(-1), 3, 2, torch.Generator(), method="cubic")


# ----------------------------------------------------------------- reversal errors
def test_reverse_sequence_errors_add_up_to_the_test_error():
    g0 = torch.Generator().manual_seed(3)
    blocks = [ua.init_block(8, 2, 8, 16, g0) for _ in range(2)]
    err, norm = ua.reverse_sequence_errors(blocks, None, torch.Generator().manual_seed(5),
                                           d=8, d_x=4, n=4, n_test=256)
    assert err.shape == norm.shape == (256,) and err.dtype == torch.float64
    total = ua.reverse_test_error(blocks, None, torch.Generator().manual_seed(5), d=8, d_x=4, n=4,
                                  n_test=256)
    assert math.isclose(float(err.sum() / norm.sum()), total, rel_tol=1e-5)
    with pytest.raises(ValueError, match="n_test"):
        ua.reverse_sequence_errors(blocks, None, g0, d=8, d_x=4, n=4, n_test=1)


def test_equivariant_mean_predictor_has_no_negative_excess():
    # the best equivariant map (mean of the other tokens) sits at excess 0 in expectation
    g = torch.Generator().manual_seed(4)
    n = 4
    X, Y = ua.reverse_batch(50_000, 4, 4, n, g)
    pred = (X.sum(2, keepdim=True) - X) / (n - 1)
    D = ((pred - Y) ** 2).sum((1, 2)) - ua.best_equivariant_reverse_error(n) * (Y**2).sum((1, 2))
    assert abs(float(D.mean())) < 4 * float(D.std()) / math.sqrt(len(D))


def test_kernel_time_exponent_recovers_a_planted_power_law_and_rejects_bad_shapes():
    # a circulant Gram matrix with eigenvalues c k^-p at frequency k (and a larger constant mode)
    theta, _ = ua.circle_inputs(64)
    diff = theta[:, None] - theta[None, :]
    for p in (2.0, 4.0):
        gram = 1.0 + sum(k**-p * torch.cos(k * diff) for k in range(1, 32))
        got = ua.kernel_time_exponent(gram, theta, [3, 4, 6, 8, 11])
        assert abs(got - p) < 0.1, (p, got)
    # the chapter's kernels: the first layer's NTK near 2, the output layer's near 4
    theta, u = ua.circle_inputs(64)
    ks = [3, 4, 6, 8, 11]
    assert 1.8 < ua.kernel_time_exponent(ua.relu_ntk_gram(u), theta, ks) < 2.3
    assert 3.8 < ua.kernel_time_exponent(ua.relu_output_layer_gram(u), theta, ks) < 4.4
    with pytest.raises((ValueError, jaxtyping.TypeCheckError)):  # the shape check, or jaxtyping's
        ua.kernel_time_exponent(torch.eye(8, dtype=torch.float64), theta, ks)
