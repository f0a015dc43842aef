"""Exactness tests (float64) for Yarotsky's product gadget and the tree of products."""

import pytest
import torch

from nnapprox import universal as ua


@pytest.mark.parametrize("m", range(1, 7))
def test_product_gadget_matches_reference_and_its_exact_error(m):
    n = 2 ** (m + 1)
    axis = torch.arange(n + 1, dtype=torch.float64) / n
    xy = torch.cartesian_prod(axis, axis)
    out = ua.relu_mlp(ua.yarotsky_product_weights(m), xy)[:, 0]
    ref = ua.yarotsky_product_reference(xy[:, 0], xy[:, 1], m)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-15)
    err = out - xy.prod(1)
    assert abs(float(err.max()) - 2.0 ** (-2 * m - 1)) < 1e-15
    assert abs(float(err.min()) + 2.0 ** (-2 * m - 2)) < 1e-15
    assert ua.count_hidden_units(ua.yarotsky_product_weights(m)) == 9 * m


def test_product_gadget_error_stays_in_its_range_off_the_grid():
    x = torch.rand(50_000, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for m in (2, 5):
        err = ua.relu_mlp(ua.yarotsky_product_weights(m), x)[:, 0] - x.prod(1)
        assert float(err.max()) <= 2.0 ** (-2 * m - 1) + 1e-15
        assert float(err.min()) >= -(2.0 ** (-2 * m - 2)) - 1e-15


def test_compose_and_parallel_compute_what_they_say():
    g = torch.Generator().manual_seed(1)
    a = ua.init_relu_mlp([2, 5, 3], g)
    b = ua.init_relu_mlp([3, 4, 1], g)
    a = {k: v.double() for k, v in a.items()}
    b = {k: v.double() for k, v in b.items()}
    x = torch.randn(10, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(ua.relu_mlp(ua.compose(a, b), x), ua.relu_mlp(b, ua.relu_mlp(a, x)))
    both = ua.parallel(a, a)
    x2 = torch.randn(10, 4, generator=g, dtype=torch.float64)
    torch.testing.assert_close(
        ua.relu_mlp(both, x2), torch.cat([ua.relu_mlp(a, x2[:, :2]), ua.relu_mlp(a, x2[:, 2:])], 1)
    )
    with pytest.raises(ValueError, match="equal depth"):
        ua.parallel(a, ua.compose(a, b))
    with pytest.raises(ValueError, match="inputs"):
        ua.compose(b, b)


def test_clamp_is_the_clamp():
    t = torch.linspace(-2, 3, 101, dtype=torch.float64)[:, None]
    torch.testing.assert_close(ua.relu_mlp(ua.clamp01_weights(), t), t.clamp(0, 1))


@pytest.mark.parametrize("d", [2, 4, 8])
def test_product_tree_obeys_its_bound_and_counts(d):
    x = torch.rand(20_000, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    for m in (1, 3, 5):
        params = ua.product_tree_weights(d, m)
        err = (ua.relu_mlp(params, x)[:, 0] - x.prod(1)).abs().max()
        assert float(err) <= ua.product_tree_error_bound(d, m)
        assert ua.count_hidden_units(params) == (d - 1) * (9 * m + 2)


def test_product_constructions_reject_bad_input():
    with pytest.raises(ValueError, match="power of two"):
        ua.product_tree_weights(6, 2)
    with pytest.raises(ValueError, match="m must be an integer"):
        ua.yarotsky_product_weights(0)
