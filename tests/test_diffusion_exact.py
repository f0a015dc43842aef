"""Exactness tests (float64) for the Ising / enumeration / Tweedie part of nnapprox.diffusion."""

import math

import pytest
import torch

import nnapprox
from nnapprox.diffusion import (
    all_states, exact_score, log_partition, log_uniform_times, noise, posterior_mean,
    posterior_mean_reference, probabilities, sample_exact, score_autograd, sk_coupling,
    state_index, tv_distance, ks_energy, exact_second_moment, correlation_error, resampled_quality,
)

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_all_states_are_the_hypercube():
    X = all_states(5)
    assert X.shape == (32, 5) and X.dtype == F64
    assert set(X.unique().tolist()) == {-1.0, 1.0}
    assert len({tuple(r) for r in X.tolist()}) == 32
    assert torch.equal(state_index(X), torch.arange(32))


def test_sk_coupling_is_symmetric_with_zero_diagonal():
    A = sk_coupling(50, 0.7, _gen())
    assert torch.equal(A, A.T)
    assert torch.all(torch.diagonal(A) == 0)
    # off-diagonal variance beta^2/d
    off = A[~torch.eye(50, dtype=torch.bool)]
    assert abs(float(off.var()) * 50 / 0.49 - 1) < 0.1


def test_posterior_mean_matches_the_readable_loop():
    g = _gen(1)
    A = sk_coupling(6, 0.8, g)
    h = torch.randn(3, 6, generator=g, dtype=F64)
    fast = posterior_mean(A, h)
    for i in range(3):
        torch.testing.assert_close(fast[i], posterior_mean_reference(A, h[i]), rtol=0, atol=1e-12)


def test_posterior_mean_is_gradient_of_log_partition():
    g = _gen(2)
    A = sk_coupling(7, 0.6, g)
    h = torch.randn(4, 7, generator=g, dtype=F64).requires_grad_(True)
    (grad,) = torch.autograd.grad(log_partition(A, h).sum(), h)
    torch.testing.assert_close(grad, posterior_mean(A, h.detach()), rtol=0, atol=1e-12)


def test_score_autograd_equals_tweedie():
    g = _gen(3)
    A = sk_coupling(8, 0.6, g)
    x = sample_exact(A, 64, g)
    t = log_uniform_times(64, 0.01, 5.0, g)
    z = noise(x, t, g)
    torch.testing.assert_close(score_autograd(A, z, t), exact_score(A, z, t), rtol=0, atol=1e-8)


def test_exact_sampler_frequencies_match_probabilities():
    g = _gen(4)
    A = sk_coupling(4, 1.0, g)
    x = sample_exact(A, 200_000, g)
    p = probabilities(A)
    freq = torch.bincount(state_index(x), minlength=16).double() / 200_000
    assert float((freq - p).abs().max()) < 5 * math.sqrt(0.25 / 200_000)


def test_sample_quality_metrics_vanish_on_the_exact_law():
    g = _gen(5)
    A = sk_coupling(5, 0.5, g)
    x = sample_exact(A, 100_000, g)
    assert tv_distance(x, probabilities(A)) < 0.02
    assert ks_energy(x, A) < 0.01
    assert correlation_error(x, exact_second_moment(A)) < 0.05


def test_bad_parameters_raise_before_work():
    with pytest.raises(ValueError, match="1 <= d <= 20"):
        all_states(25)
    with pytest.raises(ValueError, match="d must be >= 2"):
        sk_coupling(1, 0.5)
    with pytest.raises(ValueError, match="t > 0"):
        exact_score(sk_coupling(3, 0.5), torch.zeros(1, 3, dtype=F64), torch.zeros(1, dtype=F64))


def test_resampled_quality_scores_each_draw_like_the_samples_themselves():
    """Each draw is a multinomial count vector; its TV and correlation error equal those of the
    samples it counts (rebuilt from the same multinomial indices), for the exact law and another."""
    g = _gen(7)
    A = sk_coupling(6, 0.8, g)
    p, C = probabilities(A), exact_second_moment(A)
    X = all_states(6)
    for q in (p, torch.full_like(p, 1 / len(p))):
        tv, corr = resampled_quality(q, p, C, 300, 5, _gen(8))
        idx = torch.multinomial(q.expand(5, -1), 300, replacement=True, generator=_gen(8))
        for r in range(5):
            assert abs(float(tv[r]) - tv_distance(X[idx[r]], p)) < 1e-12
            assert abs(float(corr[r]) - correlation_error(X[idx[r]], C)) < 1e-12
    with pytest.raises(ValueError, match="2\\^d"):
        resampled_quality(p[:10], p[:10], C, 10, 2)


def test_a_tv_claim_can_fail():
    """A wrong sampler (independent uniform spins) fails the chapter's TV test: at most 4 null
    standard deviations above the mean TV of exact samples of the same size."""
    g = _gen(6)
    A = sk_coupling(8, 1.2, g)
    p, C = probabilities(A), exact_second_moment(A)
    tv_null, _ = resampled_quality(p, p, C, 2000, 500, g)
    wrong = torch.where(torch.rand(2000, 8, generator=g) < 0.5, 1.0, -1.0).double()
    claims = nnapprox.Claims()
    sd = float(tv_null.std())
    assert not claims.check("wrong sampler", tv_distance(wrong, p) - float(tv_null.mean()), "<=", 4 * sd,
                            kind="empirical", basis="statistical", se=sd, k=4.0, source="test",
                            foil=("a wrong formula", 1e9))
    assert claims.failed
    exact = sample_exact(A, 2000, g)
    assert claims.check("exact sampler", tv_distance(exact, p) - float(tv_null.mean()), "<=", 4 * sd,
                        kind="empirical", basis="statistical", se=sd, k=4.0, source="test",
                            foil=("a wrong formula", 1e9))
