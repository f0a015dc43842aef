"""Exactness tests (float64) for the hand-built constructions of nnapprox.universal."""

import math

import pytest
import torch

from nnapprox import universal as ua
from nnapprox.claims import compare


@pytest.mark.parametrize("m", range(1, 9))
def test_yarotsky_network_matches_reference_and_error(m):
    x = ua.dyadic_grid(m)
    net = ua.relu_mlp(ua.yarotsky_square_weights(m), x[:, None])[:, 0]
    torch.testing.assert_close(net, ua.yarotsky_square_reference(x, m), rtol=0, atol=1e-15)
    assert abs(float((net - x**2).abs().max()) - 2.0 ** (-2 * m - 2)) <= 1e-15
    assert ua.count_hidden_units(ua.yarotsky_square_weights(m)) == 3 * m


def test_yarotsky_is_interpolant_of_square_on_dyadic_grid():
    m = 5
    knots = torch.arange(2**m + 1, dtype=torch.float64) / 2**m
    net = ua.relu_mlp(ua.yarotsky_square_weights(m), knots[:, None])[:, 0]
    torch.testing.assert_close(net, knots**2, rtol=0, atol=1e-15)


def test_yarotsky_rejects_bad_m():
    with pytest.raises(ValueError, match="m must be an integer >= 1"):
        ua.yarotsky_square_weights(0)


def test_relu_interpolant_is_exact_at_knots_and_linear_between():
    g = torch.Generator().manual_seed(0)
    knots = torch.sort(torch.rand(9, generator=g, dtype=torch.float64)).values
    knots[0], knots[-1] = 0.0, 1.0
    values = torch.randn(9, generator=g, dtype=torch.float64)
    p = ua.relu_interpolant_weights(knots, values)
    torch.testing.assert_close(ua.relu_mlp(p, knots[:, None])[:, 0], values, rtol=0, atol=1e-12)
    mid = (knots[1:] + knots[:-1]) / 2
    torch.testing.assert_close(ua.relu_mlp(p, mid[:, None])[:, 0], (values[1:] + values[:-1]) / 2, rtol=0, atol=1e-12)


def test_fitted_output_layer_error_nonincreasing_in_l2():
    f = lambda x: torch.sin(5 * x) + x**2  # noqa: E731
    x = torch.linspace(0, 1, 1001, dtype=torch.float64)
    errors = []
    for N in [2, 4, 8, 16, 32]:
        p = ua.fit_relu_output_layer(ua.uniform_knots(N), x, f(x))
        errors.append(float(((ua.relu_mlp(p, x[:, None])[:, 0] - f(x)) ** 2).mean()))
    assert all(b <= a * (1 + 1e-10) for a, b in zip(errors, errors[1:]))


@pytest.mark.parametrize("delta", [0.005, 0.01, 0.1, 0.3])
def test_relu_bump_error_is_sqrt_delta_over_six(delta):
    assert abs(ua.relu_bump_l2_error(delta) - math.sqrt(delta / 6)) < 1e-12
    assert ua.count_parameters(ua.relu_bump_weights(delta)) == 13


def test_relu_bump_rejects_bad_delta():
    with pytest.raises(ValueError, match="delta must lie in"):
        ua.relu_bump_weights(0.0)


def test_legendre_and_fourier_errors_match_parseval():
    c = ua.legendre_bump_coefficients(12)
    parseval = math.sqrt(0.5 - sum(float(c[j]) ** 2 / (2 * j + 1) for j in range(13)))
    assert abs(ua.legendre_bump_l2_error(12) - parseval) < 1e-12
    a0, al, be = ua.fourier_bump_coefficients(6)
    parseval = math.sqrt(0.5 - float(a0) ** 2 - float(((al**2 + be**2) / 2).sum()))
    assert abs(ua.fourier_bump_l2_error(6) - parseval) < 1e-10


def test_fourier_overshoot_tends_to_gibbs_constant():
    assert abs(ua.fourier_overshoot(200) - ua.GIBBS_CONSTANT) < 1e-3
    gibbs = 0.5 * (2 / math.pi) * sum((-1) ** k * math.pi ** (2 * k + 1) / ((2 * k + 1) * math.factorial(2 * k + 1)) for k in range(30)) - 0.5
    assert abs(gibbs - ua.GIBBS_CONSTANT) < 1e-12  # Si(pi)/pi - 1/2 from its series


def test_multilinear_interpolation_reproduces_multilinear_functions():
    f = lambda x: 1 + 2 * x[:, 0] - x[:, 1] + 3 * x[:, 0] * x[:, 1] * x[:, 2]  # noqa: E731
    values = ua.grid_values(f, 5, 3)
    x = torch.rand(100, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(ua.multilinear_interpolate(values, x), f(x), rtol=0, atol=1e-12)


def test_selective_shift_is_contextual_exhaustive_small():
    for d, n in [(1, 2), (1, 3), (2, 2)]:
        L = ua.grid_sequences_distinct_columns(d, n, 0.25)
        result = ua.check_contextual_mapping(L, ua.contextual_ids(L, 0.25))
        assert result["within"] and result["across"] and result["equivariant"]


def test_contextual_check_can_fail_without_global_shift():
    # drop the final global-shift layer: sets with equal min and max columns then share an id
    L = ua.grid_sequences_distinct_columns(1, 3, 0.25)
    Z = L
    for heads in ua.selective_shift_heads(1, 3, 0.25)[:-1]:
        Z = ua.hardmax_attention_layer(heads, Z)
    q = Z[:, 0, :]
    result = ua.check_contextual_mapping(L, q)
    assert not result["across"]
    assert not compare(result["across"], "==", True)


def test_selective_shift_shifts_exactly_one_column():
    delta, d, n = 0.25, 1, 3
    L = torch.tensor([[[0.5, 0.0, 0.75]]], dtype=torch.float64)
    layer = ua.selective_shift_heads(d, n, delta)[2]  # l = 2 * delta = 0.5
    out = ua.hardmax_attention_layer(layer, L)
    expected = L.clone()
    expected[0, 0, 0] += delta ** (-d) * (0.75 - 0.0)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
