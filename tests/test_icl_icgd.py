"""In-context gradient descent on a two-layer ReLU network (nnapprox.icl.icgd) and the task-diversity baselines."""

import math

import pytest
import torch

from nnapprox import icl
from nnapprox.icl import baselines as bl

D64 = torch.float64


def _problem(seed=0, batch=4, n=10, d=3, K=3):
    g = torch.Generator().manual_seed(seed)
    X, y, _, _ = icl.relu_teacher_tasks(batch, n + 1, d, g, width=K, dtype=D64)
    a0 = torch.randn(batch, K, generator=g, dtype=D64) * math.sqrt(2 / K)
    V0 = torch.randn(batch, K, d, generator=g, dtype=D64) / math.sqrt(d)
    return X[:, :-1], y[:, :-1], X[:, -1], a0, V0


def _run(X, y, xq, a0, V0, eta, delta, c, L):
    d, K, n = X.shape[2], a0.shape[1], X.shape[1]
    H = icl.transformer(icl.icgd_embed(X, y, xq, a0, V0), icl.icgd_layers(d, K, n, eta, L, delta, c))
    return H, icl.read_weights(H, d, K)


def test_layout_is_a_partition():
    s = icl.icgd_layout(3, 4, 5)
    used = []
    for name, f in s.items():
        if name != "D":
            used += [f] if isinstance(f, int) else list(range(f.start, f.stop))
    assert sorted(used) == list(range(s["D"]))


def test_exact_when_no_preactivation_in_the_band():
    X, y, xq, a0, V0 = _problem()
    eta, c, delta, L = 0.2, 2.0, 1e-7, 8
    a, V = a0, V0
    for _ in range(L):  # the autograd trajectory; check the band stays empty along it
        assert float(icl.ramp_error_bound(X, y, a, V, delta).max()) == 0.0
        a, V = icl.projected_gd_reference(X, y, a, V, eta, c)
    H, (a_tf, V_tf) = _run(X, y, xq, a0, V0, eta, delta, c, L)
    torch.testing.assert_close(a_tf, a, atol=1e-10, rtol=0)
    torch.testing.assert_close(V_tf, V, atol=1e-10, rtol=0)
    s = icl.icgd_layout(X.shape[2], a0.shape[1], X.shape[1])
    for name in ("u", "p", "s", "g"):  # scratch cleared after every block
        assert float(H[:, :, s[name]].abs().max()) < 1e-12
    assert float((H[:, :, s["a"]] - H[:, -1:, s["a"]]).abs().max()) < 1e-12  # every token holds the iterate


def test_per_step_error_within_ramp_bound():
    X, y, xq, a0, V0 = _problem(seed=1, n=16)
    eta, c, delta = 0.3, 2.0, 0.5  # wide ramp: many pre-activations fall in the band
    d, K, n = X.shape[2], a0.shape[1], X.shape[1]
    H = icl.icgd_embed(X, y, xq, a0, V0)
    a, V, hits = a0, V0, 0.0
    for _ in range(6):
        a_ref, V_ref = icl.projected_gd_reference(X, y, a, V, eta, c)
        bound = eta * icl.ramp_error_bound(X, y, a, V, delta)
        H = icl.transformer(H, icl.icgd_step_layers(d, K, n, eta, delta, c))
        a, V = icl.read_weights(H, d, K)
        err = torch.cat([a - a_ref, (V - V_ref).flatten(1)], 1).norm(dim=1)
        assert bool((err <= bound + 1e-12).all())
        hits += float(bound.sum())
    assert hits > 0  # the test exercised the approximate branch


def test_projection_is_active_and_exact():
    X, y, xq, a0, V0 = _problem(seed=2)
    eta, c, delta = 1.0, 0.3, 1e-7
    a, V = a0, V0
    for _ in range(3):
        a, V = icl.projected_gd_reference(X, y, a, V, eta, c)
    _, (a_tf, V_tf) = _run(X, y, xq, a0, V0, eta, delta, c, 3)
    assert float(torch.cat([a_tf, V_tf.flatten(1)], 1).abs().max()) == pytest.approx(c)
    torch.testing.assert_close(V_tf, V, atol=1e-10, rtol=0)


def test_readout_is_the_network():
    X, y, xq, a0, V0 = _problem(seed=3)
    d, K, n = X.shape[2], a0.shape[1], X.shape[1]
    H = icl.transformer(icl.icgd_embed(X, y, xq, a0, V0), icl.icgd_readout_layers(d, K, n))
    r = H[:, :, icl.icgd_layout(d, K, n)["r"]]
    torch.testing.assert_close(r[:, -1], icl.relu_net(xq[:, None], a0, V0)[:, 0], atol=1e-10, rtol=0)
    torch.testing.assert_close(r[:, :-1], icl.relu_net(X, a0, V0) - y, atol=1e-10, rtol=0)


def test_wrong_step_size_breaks_the_check():
    """The comparison can fail: the construction with eta is not GD with 1.1 eta."""
    X, y, xq, a0, V0 = _problem()
    _, (a_tf, _) = _run(X, y, xq, a0, V0, 0.2, 1e-7, 2.0, 1)
    a_wrong, _ = icl.projected_gd_reference(X, y, a0, V0, 0.22, 2.0)
    assert float((a_tf - a_wrong).abs().max()) > 1e-4


def test_discrete_bayes_limits():
    g = torch.Generator().manual_seed(0)
    pool = icl.task_pool(1, 3, g, dtype=D64)
    X, y, w = icl.pool_tasks(50, 8, pool, g, sigma=0.3)
    xq = torch.randn(50, 3, generator=g, dtype=D64)
    torch.testing.assert_close(bl.discrete_bayes(X, y, xq, pool, 0.3), xq @ pool[0], atol=1e-12, rtol=0)  # one task
    pool = icl.task_pool(8, 3, g, dtype=D64)
    X, y, w = icl.pool_tasks(50, 30, pool, g, sigma=1e-3)  # tiny noise: the posterior is a point mass on the true task
    torch.testing.assert_close(bl.discrete_bayes(X, y, xq, pool, 1e-3), (w * xq).sum(-1), atol=1e-9, rtol=0)


def test_bayes_ridge_beats_discrete_bayes_on_fresh_tasks():
    g = torch.Generator().manual_seed(1)
    d, k, sigma = 4, 8, 0.5
    pool = icl.task_pool(16, d, g, dtype=D64)
    X, y, _ = icl.linear_tasks(4000, k + 1, d, g, sigma=sigma, dtype=D64)
    err = lambda p: float((p - y[:, -1]).pow(2).mean())
    assert err(bl.bayes_ridge(X[:, :-1], y[:, :-1], X[:, -1], sigma)) < err(bl.discrete_bayes(X[:, :-1], y[:, :-1], X[:, -1], pool, sigma))


def test_relu_net_fit_recovers_a_teacher_it_can_represent():
    g = torch.Generator().manual_seed(0)
    X, y, _, _ = icl.relu_teacher_tasks(64, 41, 2, g, width=2)
    p = bl.relu_net_fit(X[:, :-1], y[:, :-1], X[:, -1], 4, g, n_steps=400)
    assert 1 - float((p - y[:, -1]).pow(2).mean() / y[:, -1].var()) > 0.8
