"""The hand-built LinUCB transformer equals direct gradient descent and obeys its error bound."""
import math

import pytest
import torch

import nnapprox.sequential as Q

F64 = torch.float64


def instance(Bn, n, K, d, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(Bn, n, d, generator=g, dtype=F64)
    X = X / X.norm(dim=-1, keepdim=True) * torch.rand(Bn, n, 1, generator=g, dtype=F64)
    y = torch.randn(Bn, n, generator=g, dtype=F64)
    acts = torch.randn(Bn, K, d, generator=g, dtype=F64)
    acts = acts / acts.norm(dim=-1, keepdim=True)
    radius = 1 + torch.rand(Bn, generator=g, dtype=F64)
    return X, y, acts, radius


@pytest.mark.parametrize("n,d,lam,L", [(0, 3, 1.0, 5), (1, 3, 1.0, 7), (12, 3, 1.0, 20),
                                       (9, 2, 0.5, 11)])
def test_construction_equals_direct_gd(n, d, lam, L):
    X, y, acts, radius = instance(5, n, 4, d, seed=n + 10 * d)
    M, R = 64, 4.0 / lam
    out = Q.linucb_tf(X, y, acts, radius, lam, 1.0, L, M, R)
    w, u = Q.gd_reference(X, y, radius[:, None, None] * acts, lam, 1.0, L)
    torch.testing.assert_close(out["w"], w[:, None].expand_as(out["w"]), rtol=0, atol=1e-12)
    torch.testing.assert_close(out["u"], u, rtol=0, atol=1e-12)
    z = radius[:, None, None] * acts
    s_ref = (z * u).sum(-1) / (n + d)
    torch.testing.assert_close(out["s"], s_ref, rtol=0, atol=1e-12)
    score = (acts * w[:, None]).sum(-1) + Q.sqrt_interpolant_eval(s_ref, M, R)
    torch.testing.assert_close(out["score"], score, rtol=0, atol=1e-12)


def test_error_bound_and_convergence():
    X, y, acts, radius = instance(6, 15, 4, 3, seed=1)
    M, R, L = 128, 4.0, 40
    out = Q.linucb_tf(X, y, acts, radius, 1.0, 1.0, L, M, R)
    b = Q.score_error_bound(X, y, acts, radius, 1.0, 1.0, L, M, R)
    assert bool(((out["score"] - b["ucb"]).abs() <= b["error"]).all())
    assert bool((b["rho"] < 1).all())
    w_err = (out["w"][:, 0] - b["theta"]).norm(dim=-1)
    assert bool((w_err <= b["rho"] ** L * b["theta"].norm(dim=-1) + 1e-14).all())
    assert bool(((out["s"] - b["s"]).abs() <= (b["rho"] ** L)[:, None] * b["s"] + 1e-14).all())
    # with many layers and knots the scores approach LinUCB's
    out = Q.linucb_tf(X, y, acts, radius, 1.0, 1.0, 400, 4096, R)
    assert float((out["score"] - b["ucb"]).abs().max()) < 1e-3


def test_sqrt_interpolant_sup_error():
    M, R = 16, 3.0
    knots, _ = Q.sqrt_interpolant(M, R)
    p, q = knots[:-1].sqrt(), knots[1:].sqrt()
    s = torch.cat([torch.linspace(0, R, 20001, dtype=F64), ((p + q) / 2) ** 2])
    err = (Q.sqrt_interpolant_eval(s, M, R) - s.sqrt()).abs()
    bound = Q.sqrt_interpolation_bound(M, R)
    assert float(err.max()) <= bound * (1 + 1e-12)
    assert float(err.max()) >= bound * (1 - 1e-9)  # attained on the first piece
    torch.testing.assert_close(Q.sqrt_interpolant_eval(knots, M, R), knots.sqrt(), rtol=0,
                               atol=1e-14)
    assert float(Q.sqrt_interpolant_eval(torch.tensor([2 * R], dtype=F64), M, R)) == \
        pytest.approx(math.sqrt(R))


def test_picks_linucbs_action_when_gap_exceeds_error():
    g = torch.Generator().manual_seed(3)
    p = Q.make_problem(6, 16, 4, 3, 0.3, g)
    res = Q.linucb(p, lam=1.0, delta=0.01)
    L, M, R = 60, 512, float(res["radius"].max()) ** 2
    checked = 0
    for n in range(16):
        X, y, acts, rad = res["X"][:, :n], res["y"][:, :n], p.actions[n], res["radius"][n]
        out = Q.linucb_tf(X, y, acts, rad, 1.0, 1.0, L, M, R)
        b = Q.score_error_bound(X, y, acts, rad, 1.0, 1.0, L, M, R)
        top = b["ucb"].topk(2, -1).values
        clear = top[:, 0] - top[:, 1] > 2 * b["error"].max(-1).values
        assert bool((out["score"].argmax(-1) == res["action"][n])[clear].all())
        checked += int(clear.sum())
    assert checked > 60


def test_a_wrong_weight_breaks_equality():
    X, y, acts, radius = instance(3, 8, 4, 3, seed=5)
    layers = Q.linucb_layers(3, 1.0, 5, 32, 4.0)
    layers[2] = dict(layers[2], W_2=1.01 * layers[2]["W_2"])  # a wrong step on u
    H = Q.linucb_embed(X, y, acts, radius, 1.0)
    from nnapprox.icl.relu_attention import transformer
    u_tf = transformer(H, layers)[:, -1, Q.linucb_layout(3)["u"]].reshape(3, 4, 3)
    _, u = Q.gd_reference(X, y, radius[:, None, None] * acts, 1.0, 1.0, 5)
    assert float((u_tf - u).abs().max()) > 1e-6


def test_bad_input():
    X, y, acts, radius = instance(2, 4, 3, 3, seed=0)
    with pytest.raises(ValueError, match="y \\(B, n\\)"):
        Q.linucb_embed(X, y[:, :2], acts, radius, 1.0)
    with pytest.raises(ValueError, match="actions"):
        Q.linucb_embed(X, y, acts[..., :2], radius, 1.0)
    with pytest.raises(ValueError, match="lam > 0"):
        Q.linucb_embed(X, y, acts, radius, 0.0)
    with pytest.raises(ValueError, match="eta > 0"):
        Q.linucb_layers(3, -1.0, 2, 8, 1.0)
    with pytest.raises(ValueError, match="M >= 1"):
        Q.sqrt_interpolant(0, 1.0)
    with pytest.raises(ValueError, match="R > 0"):
        Q.sqrt_interpolation_bound(4, 0.0)
    with pytest.raises(ValueError, match="eta=.* too large"):
        Q.score_error_bound(X, y, acts, radius, 1.0, 10.0, 2, 8, 4.0)
    with pytest.raises(ValueError, match="R=.* too small"):
        Q.score_error_bound(X, y, acts, radius, 1.0, 1.0, 2, 8, 1e-3)
    with pytest.raises(ValueError, match="n_steps >= 0"):
        Q.gd_reference(X, y, acts, 1.0, 1.0, -1)
