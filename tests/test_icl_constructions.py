"""Exactness of the hand-built in-context transformers (float64, explicit tolerances)."""

import pytest
import torch

from nnapprox import compare
from nnapprox import icl
from nnapprox.icl import baselines as bl

D64 = torch.float64


def _prompt(seed=0, batch=6, N=12, d=4, kind="linear"):
    g = torch.Generator().manual_seed(seed)
    if kind == "logistic":
        X, y, _ = icl.logistic_tasks(batch, N, d, g, dtype=D64)
    else:
        X, y, _ = icl.linear_tasks(batch, N, d, g, sigma=0.1, dtype=D64)
    xq = torch.randn(batch, d, generator=g, dtype=D64)
    return X, y, xq


def test_relu_attention_matches_reference():
    X, y, xq = _prompt()
    H = icl.embed(X, y, xq, 12)
    g = torch.Generator().manual_seed(1)
    Q, K, V = (torch.randn(3, 12, 12, generator=g, dtype=D64) for _ in range(3))
    torch.testing.assert_close(icl.relu_attention(H, Q, K, V), icl.relu_attention_reference(H, Q, K, V), atol=1e-10, rtol=0)


def test_lsa_layer_matches_reference_and_gd():
    X, y, xq = _prompt()
    E = icl.lsa_tokens(X, y, xq)
    w = icl.gd_weights(4, 0.3)
    torch.testing.assert_close(icl.lsa_layer(E, **w), icl.lsa_layer_reference(E, **w), atol=1e-12, rtol=0)
    for L in range(1, 6):
        gap = (icl.lsa_predict([w] * L, X, y, xq) - icl.gd_predictions(X, y, xq, 0.3, L)[L]).abs().max()
        assert gap <= 1e-12


def test_lsa_construction_fp32():
    X, y, xq = (t.float() for t in _prompt())
    w = {k: v.float() for k, v in icl.gd_weights(4, 0.3).items()}
    gap = (icl.lsa_predict([w] * 3, X, y, xq) - icl.gd_predictions(X, y, xq, 0.3, 3)[3]).abs().max()
    assert gap <= 1e-5


def _ridge_gd(X, y, eta, lam, L):
    w = torch.zeros(X.shape[0], X.shape[2], dtype=X.dtype)
    for _ in range(L):
        w = w - eta * (torch.einsum("bnd,bn->bd", X, torch.einsum("bnd,bd->bn", X, w) - y) / X.shape[1] + lam * w)
    return w


def test_ridge_construction_equals_gd_and_converges():
    X, y, xq = _prompt()
    H = icl.embed(X, y, xq, icl.layout(4)["D"])
    out = icl.transformer(H, icl.ridge_gd_layers(4, 0.3, 0.5, 12) + [icl.readout_layer(4)])
    w = _ridge_gd(X, y, 0.3, 0.5, 12)
    assert (icl.read_w(out, 4) - w).abs().max() <= 1e-10
    assert (out[:, -1, icl.layout(4)["y_hat"]] - (w * xq).sum(-1)).abs().max() <= 1e-10
    out = icl.transformer(H, icl.ridge_gd_layers(4, 0.3, 0.5, 200))
    assert (icl.read_w(out, 4) - bl.ridge_weights(X, y, 0.5)).abs().max() <= 1e-8


def test_lasso_construction_equals_ista():
    X, y, xq = _prompt(seed=3)
    H = icl.embed(X, y, xq, icl.layout(4)["D"])
    out = icl.transformer(H, icl.lasso_ista_layers(4, 0.2, 0.1, 15))
    assert (icl.read_w(out, 4) - bl.ista(X, y, 0.1, 0.2, 15)[-1]).abs().max() <= 1e-8


def test_logistic_construction_error_decreases_like_m_squared():
    X, y, xq = _prompt(kind="logistic", batch=16)
    H = icl.embed(X, y, xq, icl.layout(4)["D"])
    ref = bl.logistic_gd(X, y, 1.0, 5)[-1]
    errs = [float((icl.read_w(icl.transformer(H, icl.logistic_gd_layers(4, 1.0, 5, M)), 4) - ref).norm(dim=1).mean())
            for M in (8, 16, 32)]
    assert errs[0] > errs[1] > errs[2]
    assert 2.5 < errs[0] / errs[1] < 6 and 2.5 < errs[1] / errs[2] < 6  # ~4 per doubling of M


def test_sigmoid_interpolant_error_within_bound():
    t = torch.linspace(-6, 6, 2001, dtype=D64)
    for M in (5, 17, 65):
        err = (icl.sigmoid_interpolant_eval(t, M, 6.0) - torch.sigmoid(t)).abs().max()
        assert err <= icl.sigmoid_interpolation_bound(M, 6.0) + 1e-15


def test_claim_check_can_fail_with_wrong_step_size():
    X, y, xq = _prompt()
    wrong = (icl.lsa_predict([icl.gd_weights(4, 0.31)], X, y, xq) - icl.gd_predictions(X, y, xq, 0.3, 1)[1]).abs().max()
    assert not compare(float(wrong), "<=", 1e-12)


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="eta"):
        icl.ridge_gd_layers(3, -1.0, 0.1, 2)
    with pytest.raises(ValueError, match="M >= 2"):
        icl.sigmoid_interpolant(1, 6.0)
    with pytest.raises(ValueError, match="D="):
        icl.embed(*_prompt(), D=3)


def test_lasso_mlp_has_2d_plus_1_units():
    """S_tau(w) - w = relu(w - tau) - relu(w + tau) + tau: two units per coordinate and one constant unit."""
    for d in (1, 3, 7):
        layer = icl.lasso_ista_layers(d, 0.2, 0.1, 1)[0]
        assert layer["W_1"].shape[0] == 2 * d + 1 and layer["W_2"].shape[1] == 2 * d + 1
