"""Tests for the shallow side of the deep-vs-shallow comparison and the Gibbs overshoot closed form."""

import math

import pytest
import torch

from nnapprox import universal as ua


def test_random_relu_features_parameter_count_and_least_squares_optimality():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(500, 4, generator=g, dtype=torch.float64)
    y = torch.sin(x.sum(1))
    W = ua.shallow_width(6 * 20 + 1, 4)
    assert W == 20
    params = ua.fit_random_relu_features(x, y, W, g)
    assert ua.count_parameters(params) == 6 * W + 1
    H = torch.cat([torch.relu(x @ params["W_1"].T + params["b_1"]), torch.ones(500, 1, dtype=x.dtype)], 1)
    residual = ua.relu_mlp(params, x)[:, 0] - y
    # normal equations: the residual is orthogonal to every hidden unit and the constant
    assert float((H.T @ residual).abs().max()) < 1e-9
    # a target in the span of the same units is fitted exactly (same generator state: same units)
    coef = torch.linspace(-1, 1, W + 1, dtype=x.dtype)
    g_a, g_b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    units = ua.fit_random_relu_features(x, y, W, g_a)
    H_u = torch.cat([torch.relu(x @ units["W_1"].T + units["b_1"]), torch.ones(500, 1, dtype=x.dtype)], 1)
    fit = ua.fit_random_relu_features(x, H_u @ coef, W, g_b)
    torch.testing.assert_close(fit["W_2"][0], coef[:W], rtol=0, atol=1e-8)


def test_random_relu_features_kinks_pass_through_training_inputs():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(300, 3, generator=g, dtype=torch.float64)
    params = ua.fit_random_relu_features(x, x.prod(1), 30, g)
    pre = x @ params["W_1"].T + params["b_1"]  # (300, 30)
    assert float(pre.abs().min(0).values.max()) < 1e-12  # every unit has a kink at a data point
    assert torch.allclose(params["W_1"].norm(dim=1), torch.ones(30, dtype=torch.float64))


def test_random_relu_features_reject_bad_input():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(10, 2, generator=g)
    with pytest.raises(ValueError, match="width"):
        ua.fit_random_relu_features(x, x.sum(1), 10, g)
    with pytest.raises(ValueError, match="width"):
        ua.fit_random_relu_features(x, x.sum(1), 0, g)
    with pytest.raises(ValueError, match="n_params"):
        ua.shallow_width(3, 2)


@pytest.mark.parametrize("K", [1, 2, 5, 6, 12, 24, 48, 96])
def test_fourier_overshoot_closed_form_and_grid_bound(K):
    exact = ua.fourier_overshoot_exact(K)
    grid = ua.fourier_overshoot(K)
    bound = ua.fourier_overshoot_grid_error(K)
    assert grid <= exact + 1e-14  # a grid maximum never exceeds the true maximum
    assert exact - grid <= bound
    n = (K + 1) // 2
    # overshoot = Gibbs constant + 1/(24 n^2) + O(n^-4), from above
    assert exact > ua.GIBBS_CONSTANT
    assert abs(exact - ua.GIBBS_CONSTANT - 1 / (24 * n**2)) < 1 / n**4


def test_fourier_overshoot_exact_rejects_bad_K():
    with pytest.raises(ValueError, match="K must be"):
        ua.fourier_overshoot_exact(0)
    assert math.isclose(ua.fourier_overshoot_exact(10**5), ua.GIBBS_CONSTANT, abs_tol=1e-10)
