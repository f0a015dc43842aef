"""TwoNN intrinsic-dimension estimator (Facco et al. 2017)."""

import numpy as np
import pytest
import torch

from nnapprox.scaling import (
    flat_torus, flat_torus_angles, torus_embedding, torus_geodesic_distances, two_nn,
    two_nn_dimension, two_nn_mle, two_nn_ratios, two_nn_torus,
)


@pytest.mark.parametrize("d", [1.0, 3.0, 7.5])
def test_fit_is_exact_on_pareto_quantiles(d):
    """Ratios at the exact quantiles of F(mu) = 1 - mu^-d make the empirical line exact: slope d."""
    n = 1000
    mu = (1 - np.arange(1, n) / n) ** (-1 / d)  # F(mu_i) = i/n, i = 1..n-1
    mu = np.r_[mu, mu[-1] * 2]  # the n-th (largest) ratio is discarded by the fit anyway
    assert abs(two_nn_dimension(mu, discard_fraction=0.1) - d) < 1e-12


def test_mle_is_unbiased_for_pareto_samples():
    """log mu ~ Exp(d): (n-1)/sum log mu is unbiased, with s.e. d/sqrt(n-2) (500 samples of n = 50)."""
    rng = np.random.default_rng(0)
    d, n = 4.0, 50
    est = np.array([two_nn_mle(np.exp(rng.exponential(1 / d, n)))[0] for _ in range(500)])
    assert abs(est.mean() - d) < 4 * est.std(ddof=1) / np.sqrt(len(est))
    assert abs(est.std(ddof=1) / (d / np.sqrt(n - 2)) - 1) < 0.15


@pytest.mark.parametrize("d", [1, 2, 4])
def test_recovers_the_dimension_of_a_torus_in_high_dimension(d):
    """n = 3000 uniform points on the flat torus (S^1)^d, rotated into R^64: both estimates within 6%."""
    g = torch.Generator().manual_seed(d)
    Q, _ = torch.linalg.qr(torch.randn(64, 64, generator=g, dtype=torch.float64))
    X = flat_torus(3000, d, g) @ Q[: 2 * d]  # (3000, 64), isometric image of the torus
    est = two_nn(X)
    assert abs(est.d_fit / d - 1) < 0.06 and abs(est.d_mle / d - 1) < 0.06
    assert est.n == 3000 and est.se_mle > 0


def test_ratios_are_invariant_under_rotation_and_scaling():
    g = torch.Generator().manual_seed(5)
    X = torch.randn(200, 6, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(6, 6, generator=g, dtype=torch.float64))
    np.testing.assert_allclose(two_nn_ratios(3.0 * X @ Q), two_nn_ratios(X), rtol=1e-10)
    assert (two_nn_ratios(X) >= 1).all()


def test_bad_input_raises():
    X = torch.randn(10, 3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="repeated points"):
        two_nn_ratios(torch.cat([X, X[:1]]))
    with pytest.raises(ValueError, match="n >= 3"):
        two_nn_ratios(X[:2])
    with pytest.raises(ValueError, match="discard_fraction"):
        two_nn_dimension(np.array([1.5, 2.0, 3.0]), discard_fraction=1.0)
    with pytest.raises(ValueError, match="ratios"):
        two_nn_mle(np.array([0.5, 2.0, 3.0]))
    with pytest.raises(ValueError, match="n and d"):
        flat_torus(0, 2, torch.Generator())


def test_torus_geodesic_distances_equal_the_shortest_lattice_image():
    """Flat-torus distance = min over the 3^d images theta' + 2 pi k of the Euclidean distance."""
    g = torch.Generator().manual_seed(3)
    theta = flat_torus_angles(40, 3, g)
    shifts = torch.cartesian_prod(*[torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)] * 3)
    diff = theta[:, None, None, :] - theta[None, :, None, :] + 2 * torch.pi * shifts  # (n, n, 27, d)
    brute = diff.norm(dim=3).min(dim=2).values  # (n, n)
    np.testing.assert_allclose(torus_geodesic_distances(theta), brute, atol=1e-12)


def test_torus_ratios_equal_euclidean_ratios_without_wrapping():
    """Angles in a small box never wrap: geodesic ratios are the Euclidean ratios of the angles."""
    g = torch.Generator().manual_seed(4)
    theta = 0.1 * torch.rand(300, 4, generator=g, dtype=torch.float64)
    np.testing.assert_allclose(two_nn_torus(theta).d_mle, two_nn(theta).d_mle, rtol=1e-12)


def test_torus_embedding_is_flat_torus():
    g1, g2 = torch.Generator().manual_seed(6), torch.Generator().manual_seed(6)
    theta = flat_torus_angles(50, 2, g2)
    np.testing.assert_array_equal(flat_torus(50, 2, g1), torus_embedding(theta))


def test_geodesic_two_nn_recovers_the_torus_dimension():
    """Uniform points, geodesic distances: each log mu ~ Exp(d) exactly, so the MLE is within 5 of
    its (first-order) standard errors of d (n = 3000, d = 3 and 5)."""
    g = torch.Generator().manual_seed(7)
    for d in (3, 5):
        est = two_nn_torus(flat_torus_angles(3000, d, g))
        assert abs(est.d_mle - d) < 5 * est.se_mle
        assert est.n == 3000


def test_torus_bad_input_raises():
    with pytest.raises(ValueError, match="n >= 3"):
        two_nn_torus(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="n and d"):
        flat_torus_angles(3, 0, torch.Generator())
