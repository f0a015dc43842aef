"""Property tests for the estimators, fits and training helpers of nnapprox.universal."""

import math

import pytest
import torch

from nnapprox import universal as ua
from nnapprox.claims import Claims


def test_maurey_constant_matches_monte_carlo_in_closed_form():
    g = torch.Generator().manual_seed(0)
    for d in [2, 10]:
        x = torch.randn(200_000, d, generator=g, dtype=torch.float64) * (2.0 / d) ** 0.5
        r2 = (x**2).sum(1)
        mc = float((0.5 * (1 + torch.exp(-2 * r2)) - torch.exp(-r2)).mean())
        assert abs(mc - ua.maurey_constant(d)) < 3e-3


def test_maurey_mse_is_unbiased_and_slope_minus_one():
    ns = [4, 16, 64, 256]
    mse = ua.maurey_mse(10, ns, torch.Generator().manual_seed(3), n_repeats=60, n_test=128)
    ratio = torch.tensor(ns) * mse / ua.maurey_constant(10)
    assert 0.8 < float(ratio.mean()) < 1.2
    assert -1.15 < ua.loglog_slope(torch.tensor(ns, dtype=torch.float64), mse) < -0.85


def test_maurey_mse_repeats_average_to_the_mean():
    ns = [4, 16]
    reps = ua.maurey_mse(
        2, ns, torch.Generator().manual_seed(5), n_repeats=7, n_test=32, return_repeats=True
    )
    mean = ua.maurey_mse(2, ns, torch.Generator().manual_seed(5), n_repeats=7, n_test=32)
    assert reps.shape == (7, 2)
    assert torch.allclose(reps.mean(0), mean, rtol=0, atol=1e-15)


def test_bump_closed_forms_match_quadrature_and_parseval():
    assert abs(ua.fourier_bump_l2_error_exact(6) - 0.1294) < 5e-5
    for K in [1, 6, 20]:
        assert abs(ua.fourier_bump_l2_error_exact(K) - ua.fourier_bump_l2_error(K)) < 1e-10
    for p in [0, 3, 12]:
        assert abs(ua.legendre_bump_l2_error_exact(p) - ua.legendre_bump_l2_error(p)) < 1e-10
    for bad in [dict(a=0.5, b=0.25), dict(a=0.0, b=0.5)]:
        with pytest.raises(ValueError, match="0 < a < b < 1"):
            ua.fourier_bump_l2_error_exact(3, **bad)
    with pytest.raises(ValueError, match="non-negative int"):
        ua.legendre_bump_l2_error_exact(-1)


def test_loglog_slope_recovers_known_exponent():
    n = torch.tensor([1.0, 10.0, 100.0], dtype=torch.float64)
    assert abs(ua.loglog_slope(n, 3 * n**-0.7) + 0.7) < 1e-12


def test_grid_interpolation_rate_two_over_d():
    f = lambda x: torch.exp(-((x - 0.3) ** 2).sum(-1))  # noqa: E731
    g = torch.Generator().manual_seed(0)
    ms = [17, 33, 65]
    errs = torch.tensor([ua.interpolation_rmse(f, m, 2, g, n_test=4000) for m in ms])
    slope = ua.loglog_slope(torch.tensor([m**2 for m in ms], dtype=torch.float64), errs)
    assert -1.2 < slope < -0.8


def test_fourier_amplitudes_recover_pure_sinusoids():
    z = torch.arange(200, dtype=torch.float64) / 200
    k = torch.tensor([5.0, 10.0, 30.0], dtype=torch.float64)
    A = torch.tensor([1.0, 0.3, 2.0], dtype=torch.float64)
    phi = torch.tensor([[0.1, 1.0, 2.0]], dtype=torch.float64)
    amps = ua.fourier_amplitudes(ua.sinusoid_target(z, k, A, phi), k)
    torch.testing.assert_close(amps[0], A, rtol=0, atol=1e-12)


def test_learning_times_and_censoring():
    amps = torch.tensor([[0.0, 0.0], [0.6, 0.1], [0.9, 0.2]])[:, None, :]  # (T=3, E=1, M=2)
    steps = torch.tensor([0, 10, 20])
    t = ua.learning_times(amps, steps)
    assert t.tolist() == [[10.0, 21.0]]


def test_spearman_known_values():
    a = torch.arange(5.0)
    assert ua.spearman(a, a**3) == pytest.approx(1.0)
    assert ua.spearman(a, -a) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="constant"):
        ua.spearman(a, torch.ones(5))


def test_spearman_claim_can_fail():
    claims = Claims()
    k = torch.arange(1.0, 11.0)
    reversed_order = ua.spearman(k, k.flip(0))
    assert not claims.check("deliberately wrong: reversed learning times", value=reversed_order, op=">=",
                            threshold=0.8, kind="empirical", basis="convention",
                            source="test", foil=("a random order", 0.0))


def test_ensemble_training_equals_member_training():
    """A stacked (vmapped) ensemble gives each member exactly its own gradient."""
    g = torch.Generator().manual_seed(0)
    params = ua.init_relu_mlp([1, 8, 1], g, ensemble=3, dtype=torch.float64)
    x = torch.rand(20, 1, generator=g, dtype=torch.float64)
    y = torch.randn(3, 20, generator=g, dtype=torch.float64)
    stacked = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    (((ua.relu_mlp_ensemble(stacked, x)[..., 0] - y) ** 2).mean(1).sum()).backward()
    for e in range(3):
        member = {k: v[e].clone().requires_grad_(True) for k, v in params.items()}
        (((ua.relu_mlp(member, x)[:, 0] - y[e]) ** 2).mean()).backward()
        for k in params:
            torch.testing.assert_close(stacked[k].grad[e], member[k].grad, rtol=1e-12, atol=1e-12)


def test_spectral_training_rejects_bad_shapes():
    # a 1-D A is refused: by the shape annotation under pytest, by the ValueError otherwise
    with pytest.raises((ValueError, TypeError)):
        ua.train_spectral_ensemble(torch.ones(10), torch.arange(1.0, 11.0), torch.Generator(), n_phases=1)
    with pytest.raises(ValueError, match="Nyquist"):
        ua.train_spectral_ensemble(torch.ones(1, 2), torch.tensor([5.0, 150.0]), torch.Generator(), n_phases=1)


def test_transformer_block_is_permutation_equivariant_fp64():
    g = torch.Generator().manual_seed(0)
    blocks = [ua.init_block(6, 2, 3, 16, g, dtype=torch.float64) for _ in range(3)]
    X = torch.randn(16, 6, 5, generator=g, dtype=torch.float64)
    assert ua.permutation_equivariance_error(blocks, X, g) < 1e-13


def test_attention_columns_are_convex_combinations():
    """With W_O W_V = I and no skip contribution from FF, Attn(X) - X is a softmax average of columns."""
    g = torch.Generator().manual_seed(1)
    d, n = 3, 4
    block = ua.init_block(d, 1, d, 4, g, dtype=torch.float64)
    block["W_V"] = torch.eye(d, dtype=torch.float64)[None]
    block["W_O"] = torch.eye(d, dtype=torch.float64)[None]
    X = torch.randn(2, d, n, generator=g, dtype=torch.float64)
    mixed = ua.attention_layer(block, X) - X
    scores = torch.einsum("md,bdk,me,beq->bkq", block["W_K"][0], X, block["W_Q"][0], X)
    torch.testing.assert_close(mixed, X @ torch.softmax(scores, dim=1), rtol=1e-12, atol=1e-12)


def test_best_equivariant_reverse_error_is_attained_by_mean_of_others():
    g = torch.Generator().manual_seed(2)
    n = 6
    X, Y = ua.reverse_batch(20_000, 3, 3, n, g)
    others = (X.sum(2, keepdim=True) - X) / (n - 1)
    err = float(((others - Y) ** 2).sum() / (Y**2).sum())
    assert abs(err - ua.best_equivariant_reverse_error(n)) < 0.02
    with pytest.raises(ValueError, match="even"):
        ua.best_equivariant_reverse_error(5)


def test_fourier_feature_map_shapes_and_identity():
    v = torch.linspace(0, 1, 7)
    assert ua.fourier_feature_map(v, None).shape == (7, 1)
    B = torch.tensor([0.0, 1.0])
    feats = ua.fourier_feature_map(v, B)
    assert feats.shape == (7, 4)
    torch.testing.assert_close(feats[:, 0], torch.ones(7))
    with pytest.raises(ValueError, match="sigma"):
        ua.fit_fourier_features(v, v, -1.0, torch.Generator())


@pytest.mark.slow
def test_reverse_with_positional_encoding_learns():
    g = torch.Generator().manual_seed(0)
    blocks, E, _ = ua.train_reverse(g, positional=True, n_steps=600, batch=128, lr=1e-2)
    assert ua.reverse_test_error(blocks, E, g, d=8, d_x=4, n=4) < 0.05


def test_spectral_ensemble_resumes_exactly_where_it_stopped(tmp_path):
    A, k = torch.tensor([[1.0, 0.5]]), torch.tensor([2.0, 5.0])
    kw = dict(n_phases=2, n_points=32, depth=2, width=8, n_steps=7, lr=1e-2, record_every=2)
    whole = ua.train_spectral_ensemble(A, k, torch.Generator().manual_seed(3), **kw)
    state = tmp_path / "spectral.safetensors"
    first = ua.train_spectral_ensemble(A, k, torch.Generator().manual_seed(3), **kw,
                                       state_path=state, save_every=2, stop_at=5)
    assert first is None and state.exists()
    resumed = ua.train_spectral_ensemble(A, k, torch.Generator().manual_seed(3), **kw,
                                         state_path=state, save_every=2)
    for key in whole:
        assert torch.equal(whole[key], resumed[key]), key
    # a state written with other settings is refused, naming them
    with pytest.raises(ValueError, match="lr"):
        ua.train_spectral_ensemble(A, k, torch.Generator().manual_seed(3), **{**kw, "lr": 2e-2},
                                   state_path=state)
    with pytest.raises(ValueError, match="state_path"):
        ua.train_spectral_ensemble(A, k, torch.Generator().manual_seed(3), **kw, stop_at=3)
