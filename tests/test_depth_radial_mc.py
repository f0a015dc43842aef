"""The d-dimensional error of the squared-norm network (nnapprox.depth.radial), float64."""

import pytest
import torch

from nnapprox import depth as dp


@pytest.mark.parametrize("d,k", [(1, 4), (3, 8), (10, 16)])
def test_squared_norm_network_is_the_sum_of_interpolants(d, k):
    g = torch.Generator().manual_seed(0)
    x = 2 * torch.rand(257, d, generator=g, dtype=torch.float64) - 1
    per_coord = dp.relu_net(dp.square_interpolant_weights(k), x.reshape(-1, 1)).reshape(257, d).sum(1)
    assert torch.allclose(dp.relu_net(dp.squared_norm_weights(d, k), x)[:, 0], per_coord, atol=1e-12, rtol=0)
    # the supremum d/k^2 is attained where every coordinate sits at an interval midpoint
    mid = torch.full((1, d), -1 + 1 / k, dtype=torch.float64)
    gap = dp.relu_net(dp.squared_norm_weights(d, k), mid)[0, 0] - (mid**2).sum()
    assert abs(float(gap) - dp.squared_norm_error_bound(d, k)) < 1e-12


@pytest.mark.parametrize("d,k", [(2, 4), (10, 8)])
def test_mc_mean_matches_two_thirds_of_the_sup(d, k):
    g = torch.Generator().manual_seed(1)
    mean, se, mx = dp.squared_norm_error_mc(d, k, 20_000, g)
    assert abs(mean - 2 * d / (3 * k**2)) <= 4 * se
    assert 0 <= mx <= dp.squared_norm_error_bound(d, k) + 1e-12
    # the standard error matches the exact variance d h^4/180
    h = 2 / k
    assert se == pytest.approx((d * h**4 / 180 / 20_000) ** 0.5, rel=0.05)


def test_mc_detects_a_wrong_mean():
    g = torch.Generator().manual_seed(2)
    mean, se, _ = dp.squared_norm_error_mc(5, 8, 20_000, g)
    assert abs(mean - 5 / (4 * 8**2)) > 4 * se  # the sup/4 guess is rejected


@pytest.mark.parametrize("call", [lambda: dp.squared_norm_weights(0, 4), lambda: dp.squared_norm_weights(3, 0),
                                  lambda: dp.squared_norm_error_mc(3, 4, 1, torch.Generator())])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
