"""Batched families of ReLU networks and the Gaussian ball-indicator data (depth chapter, radial functions)."""

import pytest
import torch
from scipy.stats import chi2

from nnapprox import depth as dp
from nnapprox.claims import Claims

f64 = dict(dtype=torch.float64)


def _nets(archs, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [dp.random_relu_net(a, g, init="default") for a in archs]


@pytest.mark.parametrize("archs", [[[5, 3, 1], [5, 7, 1], [5, 1, 1]], [[4, 6, 2, 1], [4, 3, 5, 1]]])
def test_family_forward_equals_each_network(archs):
    nets = _nets(archs)
    fam = dp.stack_mlps(nets)
    x = torch.randn(33, archs[0][0], generator=torch.Generator().manual_seed(1), **f64)
    out = dp.mlp_family(fam, x)  # (M, n, 1)
    assert out.shape == (len(nets), 33, 1)
    for j, w in enumerate(nets):
        assert torch.allclose(out[j], dp.relu_net(w, x), atol=1e-12, rtol=0)
        member = dp.family_member(fam, j)
        assert all(torch.equal(member[k], w[k]) for k in w)
    assert dp.family_parameters(fam) == [dp.n_parameters(w) for w in nets]
    assert dp.family_size(fam) == len(nets)


def test_family_training_equals_training_each_alone():
    nets = _nets([[3, 4, 1], [3, 9, 1]], seed=2)

    def sampler(n, g):
        x = torch.randn(n, 3, generator=g, **f64)
        return x, torch.sin(x[:, :1]) * x[:, 1:2]

    together, losses = dp.train_mlp_family(dp.stack_mlps(nets), sampler, 20, 16, torch.Generator().manual_seed(3),
                                           lr=1e-2, lr_final=1e-3)
    assert losses.shape == (20, 2)
    for j, w in enumerate(nets):
        alone, _ = dp.train_mlp_family(dp.stack_mlps([w]), sampler, 20, 16, torch.Generator().manual_seed(3),
                                       lr=1e-2, lr_final=1e-3)
        a, b = dp.family_member(together, j), dp.family_member(alone, 0)
        assert all(torch.allclose(a[k], b[k], atol=1e-10, rtol=0) for k in a)
    # padding never moves: the narrow member's extra units stay exactly zero
    assert bool((together["W0"][0, 4:] == 0).all()) and bool((together["W1"][0, :, 4:] == 0).all())


def test_per_member_batches_are_independent_runs():
    """With batches="per-member" member j trains exactly as if alone on rows jB..(j+1)B-1 of
    each step's draw: its own data order, not the other members'."""
    nets = _nets([[3, 4, 1], [3, 6, 1]], seed=7)
    nets.append(nets[0])  # members 0 and 2 start from the same weights
    drawn = []

    def sampler(n, g):
        x = torch.randn(n, 3, generator=g, **f64)
        drawn.append(x)
        return x, torch.cos(x[:, :1]) + x[:, 2:3]

    B, steps = 8, 12
    together, losses = dp.train_mlp_family(dp.stack_mlps(nets), sampler, steps, B,
                                           torch.Generator().manual_seed(9), lr=1e-2,
                                           batches="per-member")
    assert losses.shape == (steps, 3) and all(x.shape == (3 * B, 3) for x in drawn)
    record = list(drawn)
    for j, w in enumerate(nets):
        replay = iter(x[j * B:(j + 1) * B] for x in record)

        def own(n, g, replay=replay):
            x = next(replay)
            return x, torch.cos(x[:, :1]) + x[:, 2:3]

        alone, _ = dp.train_mlp_family(dp.stack_mlps([w]), own, steps, B, torch.Generator(), lr=1e-2)
        a, b = dp.family_member(together, j), dp.family_member(alone, 0)
        assert all(torch.allclose(a[k], b[k], atol=1e-10, rtol=0) for k in a)
    # members 0 and 2 share their start but not their data: they end in different places
    assert not torch.allclose(dp.family_member(together, 0)["W0"], dp.family_member(together, 2)["W0"])
    with pytest.raises(ValueError, match="valid values are 'shared', 'per-member'"):
        dp.train_mlp_family(dp.stack_mlps(nets), sampler, 1, 4, torch.Generator(), batches="own")
    with pytest.raises(ValueError, match="per-member inputs must be"):
        dp.mlp_family(dp.stack_mlps(nets), torch.zeros(2, 5, 3, **f64))


def test_family_logistic_loss_matches_binary_cross_entropy():
    """With the logistic loss each member's recorded loss is the BCE of its logits, and the
    members still train as if alone."""
    nets = _nets([[2, 5, 1], [2, 3, 1]], seed=4)

    def sampler(n, g):
        x = torch.randn(n, 2, generator=g, **f64)
        return x, (x[:, :1] > 0).double()

    fam = dp.stack_mlps(nets)
    _, loss0 = dp.train_mlp_family(fam, sampler, 1, 32, torch.Generator().manual_seed(5),
                                   loss="logistic")
    x, y = sampler(32, torch.Generator().manual_seed(5))
    for j, w in enumerate(nets):
        direct = torch.nn.functional.binary_cross_entropy_with_logits(dp.relu_net(w, x), y)
        assert abs(float(loss0[0, j]) - float(direct)) < 1e-12
    together, _ = dp.train_mlp_family(fam, sampler, 10, 32, torch.Generator().manual_seed(6),
                                      lr=1e-2, loss="logistic")
    for j, w in enumerate(nets):
        alone, _ = dp.train_mlp_family(dp.stack_mlps([w]), sampler, 10, 32,
                                       torch.Generator().manual_seed(6), lr=1e-2, loss="logistic")
        a, b = dp.family_member(together, j), dp.family_member(alone, 0)
        assert all(torch.allclose(a[k], b[k], atol=1e-10, rtol=0) for k in a)
    with pytest.raises(ValueError, match="valid losses"):
        dp.train_mlp_family(fam, sampler, 1, 4, torch.Generator(), loss="hinge")


def test_family_mse_matches_direct_formula():
    nets = _nets([[6, 5, 1], [6, 2, 1]])
    fam = dp.stack_mlps(nets)
    x = torch.randn(1000, 6, generator=torch.Generator().manual_seed(4), **f64)
    y = dp.ball_indicator(x, 2.0)
    mse = dp.family_mse(fam, x, y, chunk=128)
    for j, w in enumerate(nets):
        assert float(mse[j]) == pytest.approx(float(((dp.relu_net(w, x) - y) ** 2).mean()), rel=1e-12)


@pytest.mark.parametrize("d", [1, 2, 20, 100])
def test_balanced_radius_is_the_median(d):
    R = dp.balanced_ball_radius(d)
    assert chi2.cdf(d * R**2, d) == pytest.approx(0.5, abs=1e-12)
    if d >= 20:  # Wilson-Hilferty: median of chi2_d / d ~ (1 - 2/(9d))^3
        assert R**2 == pytest.approx((1 - 2 / (9 * d)) ** 3, abs=5e-4)  # its error is O(1/d^2)


def test_gaussian_ball_data_is_balanced():
    d = 30
    R = dp.balanced_ball_radius(d)
    x, y = dp.gaussian_ball_data(200_000, d, R, torch.Generator().manual_seed(5), dtype=torch.float64)
    assert x.shape == (200_000, d) and y.shape == (200_000, 1)
    assert torch.equal(y, dp.ball_indicator(x, R))
    assert float(y.mean()) == pytest.approx(0.5, abs=0.005)  # 4.5 standard errors
    assert float((x**2).sum(1).mean()) == pytest.approx(1.0, abs=0.005)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        dp.stack_mlps([])
    with pytest.raises(ValueError):
        dp.stack_mlps(_nets([[3, 2, 1], [3, 2, 2, 1]]))
    with pytest.raises(ValueError):
        dp.stack_mlps(_nets([[3, 2, 1], [4, 2, 1]]))
    with pytest.raises(ValueError):
        dp.balanced_ball_radius(0)
    with pytest.raises(ValueError):
        dp.train_mlp_family(dp.stack_mlps(_nets([[3, 2, 1]])), lambda n, g: (None, None), -1, 4, torch.Generator())


def test_depth_comparison_claim_can_fail():
    claims = Claims()
    assert not claims.check("3-layer / best 2-layer test MSE", value=1.2, op="<", threshold=1.0, kind="empirical", basis="convention", source="test", foil=("a 2-layer network", 1.5))


def test_gaussian_slab_data_is_a_balanced_ridge_target():
    d, n = 12, 400_000
    u = torch.randn(d, generator=torch.Generator().manual_seed(3), **f64)
    x, y = dp.gaussian_slab_data(n, d, 2.5 * u, torch.Generator().manual_seed(4), dtype=torch.float64)
    assert x.shape == (n, d) and y.shape == (n, 1)
    # balanced: P[|u.x| <= Phi^-1(3/4)/sqrt(d)] = 1/2 (binomial error of n labels, 5 se)
    assert abs(float(y.mean()) - 0.5) <= 5 * (0.25 / n) ** 0.5
    # a ridge function: moving x orthogonally to u leaves every label unchanged
    v = torch.randn(d, generator=torch.Generator().manual_seed(5), **f64)
    v = v - (v @ u) / (u @ u) * u
    e = u / u.norm()
    keep = ((x @ e).abs() - dp.radial.SLAB_HALF_WIDTH / d**0.5).abs() > 1e-9  # off the two planes
    moved = ((x + 3.0 * v) @ e).abs() <= dp.radial.SLAB_HALF_WIDTH / d**0.5
    assert torch.equal(moved[keep].double(), y[keep, 0])
    with pytest.raises(ValueError, match="vector of length d"):
        dp.gaussian_slab_data(4, d, torch.ones(d + 1), torch.Generator())
    with pytest.raises(ValueError, match="nonzero direction"):
        dp.gaussian_slab_data(4, d, torch.zeros(d), torch.Generator())
