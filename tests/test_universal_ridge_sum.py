"""The Barron ridge target (closed forms, Maurey's identity, the fixed-basis foil) and trained shallow runs."""

import math

import pytest
import torch

from nnapprox import universal as ua


def test_directions_are_orthonormal():
    V = ua.ridge_directions(10, 3, torch.Generator().manual_seed(0))
    assert torch.allclose(V @ V.T, torch.eye(3, dtype=V.dtype), atol=1e-12)


@pytest.mark.parametrize("J,s", [(1, 1.0), (2, 2.0), (3, 0.5)])
def test_moments_match_monte_carlo(J, s):
    g = torch.Generator().manual_seed(1)
    d = 7
    V = ua.ridge_directions(d, J, g)
    x = torch.randn(400_000, d, generator=g, dtype=torch.float64)
    f = ua.ridge_sum_target(x, V, s)
    m = ua.ridge_sum_moments(J, s)
    se = float(f.var() * math.sqrt(2 / len(f)))  # s.e. of a sample variance (Gaussian approx.)
    assert abs(float(f.var()) - m["var"]) < 6 * se + 1e-4
    # C = E_x Var_{j,r} cos(r v_j.x), with E_r cos^2(r t) = (1 + exp(-2 s^2 t^2)) / 2
    t = x @ V.T
    second = (0.5 * (1 + torch.exp(-2 * s**2 * t**2))).mean(1)
    C_mc = float((second - f**2).mean())
    assert abs(C_mc - m["C"]) < 0.01 * m["C"] + 1e-4
    assert m["relative"] == pytest.approx(m["C"] / m["var"])


def test_maurey_relative_error_is_C_over_n_var_in_every_dimension():
    n_values = [8, 64]
    rel = ua.ridge_sum_moments(2, 2.0)["relative"]
    for d in (2, 50):
        reps = ua.maurey_ridge_relative_mse(d, n_values, torch.Generator().manual_seed(d), n_repeats=60,
                                             n_test=256)
        per_rep = (torch.tensor(n_values, dtype=torch.float64) * reps).mean(1) / rel
        se = float(per_rep.std() / math.sqrt(len(per_rep)))
        assert abs(float(per_rep.mean()) - 1) < 5 * se


def test_fixed_basis_pays_for_the_dimension():
    n_values = [4, 256]
    low = ua.fixed_basis_relative_mse(2, n_values, torch.Generator().manual_seed(0))
    high = ua.fixed_basis_relative_mse(100, n_values, torch.Generator().manual_seed(0))
    assert low[-1] < 0.2 * low[0]  # in d = 2 more fixed units help
    assert high[-1] > 0.5  # in d = 100 they hardly beat the constant predictor


@pytest.mark.parametrize(
    "call",
    [
        lambda g: ua.ridge_directions(2, 3, g),
        lambda g: ua.ridge_sum_moments(2, -1.0),
        lambda g: ua.maurey_ridge_relative_mse(4, [], g),
        lambda g: ua.fixed_basis_relative_mse(4, [4], g, train_factor=1),
    ],
)
def test_bad_input_is_refused(call):
    with pytest.raises(ValueError):
        call(torch.Generator().manual_seed(0))


def test_polarization_identity_and_shallow_network():
    g = torch.Generator().manual_seed(3)
    for d in (2, 3, 4):
        x = torch.rand(500, d, generator=g, dtype=torch.float64)
        assert torch.allclose(ua.polarization_product(x), x.prod(1), atol=1e-12)
    x = torch.rand(4000, 4, generator=g, dtype=torch.float64)
    errors = []
    for cells in (8, 16, 32):
        p = ua.polarization_shallow_weights(4, cells)
        assert p["W_1"].shape == (8 * cells, 4)  # 2^(d-1) ridges of `cells` units each
        errors.append(float((ua.relu_mlp(p, x)[:, 0] - x.prod(1)).abs().max()))
    # piecewise-linear interpolation of each quartic ridge: error ~ cells^-2
    assert errors[1] < errors[0] / 3 and errors[2] < errors[1] / 3
    with pytest.raises(ValueError):
        ua.polarization_shallow_weights(4, 0)
