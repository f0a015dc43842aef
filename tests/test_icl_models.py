"""Tasks, baselines and the trainable models of nnapprox.icl."""

import math

import pytest
import torch

from nnapprox import icl
from nnapprox.icl import baselines as bl


def test_tasks_shapes_and_validation():
    g = torch.Generator().manual_seed(0)
    X, y, w, s = icl.mixed_noise_tasks(7, 5, 3, g, sigmas=(0.1, 0.5))
    assert X.shape == (7, 5, 3) and y.shape == (7, 5)
    assert all(min(abs(v - 0.1), abs(v - 0.5)) < 1e-6 for v in s.tolist())
    X, y, w = icl.sparse_linear_tasks(7, 5, 6, g, s=2)
    assert ((w != 0).sum(1) <= 2).all()
    with pytest.raises(ValueError, match="x_dist"):
        icl.sample_x(2, 2, 2, g, x_dist="cauchy")
    with pytest.raises(ValueError, match="sparsity"):
        icl.sparse_linear_tasks(2, 2, 2, g, s=3)


def test_least_squares_error_matches_theory():
    g = torch.Generator().manual_seed(1)
    d = 5
    X, y, _ = icl.linear_tasks(20000, 4, d, g, dtype=torch.float64)
    err = ((bl.least_squares(X[:, :3], y[:, :3], X[:, 3]) - y[:, 3]) ** 2).mean() / d
    assert abs(float(err) - (d - 3) / d) < 0.03


def test_ridge_is_posterior_mean_and_best_eta_is_optimal():
    g = torch.Generator().manual_seed(2)
    X, y, _ = icl.linear_tasks(4000, 11, 5, g, sigma=0.5, w_scale=5 ** -0.5, dtype=torch.float64)
    Xc, yc, xq, yq = X[:, :-1], y[:, :-1], X[:, -1], y[:, -1]
    bayes = ((bl.ridge(Xc, yc, xq, 0.25 * 5 / 10) - yq) ** 2).mean()
    for lam in (0.01, 2.0):
        assert bayes < ((bl.ridge(Xc, yc, xq, lam) - yq) ** 2).mean()
    eta = bl.best_one_step_eta(Xc, yc, xq, yq)
    loss = lambda e: float(((bl.one_step_gd(Xc, yc, xq, e) - yq) ** 2).mean())
    assert loss(eta) <= min(loss(0.9 * eta), loss(1.1 * eta))


def test_gpt_starts_with_gpt2_initialisation():
    torch.manual_seed(0)
    m = icl.GPT(icl.GPTConfig(d=3, n_layer=4, n_embd=128, n_head=4, n_positions=64)).requires_grad_(False)
    residual_std = 0.02 / math.sqrt(2 * 4)
    for b in m.blocks:
        pairs = ((b.W_QKV, 0.02), (b.W_O, residual_std), (b.mlp[0], 0.02), (b.mlp[2], residual_std))
        for lin, std in pairs:
            assert torch.equal(lin.bias, torch.zeros_like(lin.bias))
            assert abs(float(lin.weight.std()) / std - 1) < 0.05  # >= 16,384 draws: s.e. of std/std < 0.6 %
        assert torch.equal(b.ln_1.weight, torch.ones(128)) and torch.equal(b.ln_2.bias, torch.zeros(128))
    assert abs(float(m.wpe.weight.std()) / 0.02 - 1) < 0.05
    bound = 1 / math.sqrt(4)  # the read-in keeps nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert float(m.read_in.weight.abs().max()) <= bound and float(m.read_in.weight.std()) > 0.5 * bound
    torch.manual_seed(0)
    again = icl.GPT(icl.GPTConfig(d=3, n_layer=4, n_embd=128, n_head=4, n_positions=64))
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), again.state_dict().values()))


def test_gpt_sdpa_matches_reference_and_is_causal():
    torch.manual_seed(0)
    m = icl.GPT(icl.GPTConfig(d=3, n_layer=2, n_embd=16, n_head=2, n_positions=20)).double()
    g = torch.Generator().manual_seed(3)
    X, y, _ = icl.linear_tasks(4, 6, 3, g, dtype=torch.float64)
    p_fast, p_ref = m.predict(X, y), m.predict(X, y, fast=False)
    torch.testing.assert_close(p_fast, p_ref, atol=1e-10, rtol=0)
    y2 = y.clone()
    y2[:, 3:] += 1.0  # changing later labels must not change earlier predictions
    torch.testing.assert_close(m.predict(X, y2)[:, :4], p_fast[:, :4], atol=1e-12, rtol=0)


def test_interleave_layout_and_shape_check():
    g = torch.Generator().manual_seed(6)
    X, y, _ = icl.linear_tasks(3, 4, 2, g)
    tok = icl.interleave(X, y)
    assert tok.shape == (3, 8, 3)
    torch.testing.assert_close(tok[:, 0::2, 1:], X, atol=0, rtol=0)  # x-tokens (0, x_i)
    torch.testing.assert_close(tok[:, 1::2, 0], y, atol=0, rtol=0)  # y-tokens (y_i, 0)
    assert (tok[:, 0::2, 0] == 0).all() and (tok[:, 1::2, 1:] == 0).all()
    with pytest.raises(TypeError):  # under pytest the shape annotations are checked first
        icl.interleave(X, y[:, :3])
    unchecked = getattr(icl.interleave, "__wrapped__", icl.interleave)  # what a chapter calls
    with pytest.raises(ValueError, match="y must have shape"):
        unchecked(X, y[:, :3])


def test_strided_reference_attention_is_the_causal_rows_at_those_positions():
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(2, 3, 9, 4, generator=g, dtype=torch.float64) for _ in range(3))
    full = icl.causal_attention_reference(q, k, v)
    for stride in (2, 3):
        torch.testing.assert_close(icl.causal_attention_reference(q[:, :, ::stride], k, v, stride),
                                   full[:, :, ::stride], atol=1e-14, rtol=0)


@pytest.mark.parametrize("n_layer", [1, 3])
def test_gpt_predict_equals_full_forward_at_x_tokens(n_layer):
    # predict drops the y_N token and runs the last block at the x-tokens only (fast and reference
    # attention); it must give the numbers of the plain forward pass over all 2N tokens
    torch.manual_seed(1)
    m = icl.GPT(icl.GPTConfig(d=3, n_layer=n_layer, n_embd=16, n_head=4, n_positions=20)).double()
    g = torch.Generator().manual_seed(8)
    X, y, _ = icl.linear_tasks(5, 7, 3, g, dtype=torch.float64)
    tokens = icl.interleave(X, y)
    for fast in (True, False):
        full = m(tokens, fast)
        assert full.shape == (5, 14)
        torch.testing.assert_close(m.predict(X, y, fast), full[:, ::2], atol=1e-12, rtol=0)
        torch.testing.assert_close(m(tokens, fast, stride=3), full[:, ::3], atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="stride"):
        m(tokens, stride=0)


def test_gpt_predict_gradients_equal_full_forward_gradients():
    # the training step differentiates predict: same gradients as the loss on the full forward pass
    torch.manual_seed(2)
    m = icl.GPT(icl.GPTConfig(d=3, n_layer=2, n_embd=16, n_head=2, n_positions=20)).double()
    g = torch.Generator().manual_seed(9)
    X, y, _ = icl.linear_tasks(4, 6, 3, g, dtype=torch.float64)
    grads = []
    for pred in (lambda: m.predict(X, y), lambda: m(icl.interleave(X, y))[:, ::2]):
        m.zero_grad()
        (pred() - y).pow(2).mean().backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_committed_gpt_checkpoint_loads_and_predict_matches_full_forward():
    # icl_garg was trained before predict skipped the unread positions: its state dict must load
    # unchanged (the causal-mask buffer is not in it) and the fast predict must give the full pass
    from nnapprox import checkpoints

    m = checkpoints.load("icl_garg")
    assert "blocks.0.allowed" not in m.state_dict()
    g = torch.Generator().manual_seed(10)
    X, y, _ = icl.linear_tasks(64, 11, 5, g)
    with torch.no_grad():
        torch.testing.assert_close(m.predict(X, y), m(icl.interleave(X, y), fast=False)[:, ::2], atol=1e-5, rtol=0)


def test_relu_transformer_runs_hand_built_layers():
    g = torch.Generator().manual_seed(4)
    m = icl.ReLUTransformer(3, 10, 1, 3, 12, generator=g)
    with torch.no_grad():
        layer = icl.ridge_gd_layers(3, 0.3, 0.1, 1, dtype=torch.float32)[0]
        m.Q[0].copy_(layer["Q"]); m.K[0].copy_(layer["K"]); m.V[0].copy_(layer["V"])
        m.W_1.zero_(); m.W_2.zero_()
    X, y, _ = icl.linear_tasks(5, 8, 3, g)
    H = icl.transformer(icl.embed(X[:, :-1], y[:, :-1], X[:, -1], 10), [layer])
    torch.testing.assert_close(icl.transformer(icl.embed(X[:, :-1], y[:, :-1], X[:, -1], 10), m.layers()), H)


@pytest.mark.slow
def test_trained_lsa_layer_matches_one_gd_step():
    g = torch.Generator().manual_seed(5)
    m = icl.LSA(5, 1, init_scale=0.1, generator=g)
    icl.train_icl(m, lambda b, gg: icl.linear_tasks(b, 11, 5, gg, x_dist="uniform")[:2], n_steps=300, batch=512,
                  lr=1e-2, decay=True, generator=g)
    X, y, _ = icl.linear_tasks(4000, 11, 5, g, x_dist="uniform")
    Xc, yc, xq, yq = X[:, :-1], y[:, :-1], X[:, -1], y[:, -1]
    eta = bl.best_one_step_eta(Xc, yc, xq, yq)
    with torch.no_grad():
        l_tf = float(((m.predict(X, y) - yq) ** 2).mean())
    l_gd = float(((bl.one_step_gd(Xc, yc, xq, eta) - yq) ** 2).mean())
    assert abs(l_tf / l_gd - 1) < 0.05 and math.isfinite(l_tf)


def test_relu_transformer_default_init_is_finite_at_full_profile_size():
    # un-normalised ReLU attention is cubic in the hidden state per layer: a too-large init overflows
    # (the full profile's 6-layer, 64-wide encoder at init_scale=0.1 gave a loss of 1e31, then NaN)
    g = torch.Generator().manual_seed(0)
    X, y, _ = icl.linear_tasks(64, 11, 5, g, sigma=0.5, w_scale=5 ** -0.5)
    with torch.no_grad():
        ok = icl.ReLUTransformer(5, 64, 6, M=2, D_ff=128, generator=g).predict(X, y)
        bad = icl.ReLUTransformer(5, 64, 6, M=2, D_ff=128, generator=g, init_scale=0.1).predict(X, y)
    assert torch.isfinite(ok).all() and float((ok - y[:, -1]).pow(2).mean()) < 2 * float(y[:, -1].pow(2).mean())
    assert not torch.isfinite(bad).all() or float(bad.abs().max()) > 1e3
