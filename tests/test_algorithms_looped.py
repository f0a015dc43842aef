"""Looped transformers: the weight-tied LSA block is T steps of gradient descent (float64), and
the trained looped model's shapes, vectorised runs and input checks."""

import pytest
import torch

from nnapprox.algorithms import looped as lp
from nnapprox.icl import baselines as bl
from nnapprox.icl.lsa import gd_predictions, gd_weights, lsa_predict
from nnapprox.icl.tasks import linear_tasks

D64 = torch.float64


def _prompt(seed=0, batch=6, N=12, d=4):
    g = torch.Generator().manual_seed(seed)
    X, y, _ = linear_tasks(batch, N, d, g, sigma=0.1, dtype=D64)
    xq = torch.randn(batch, d, generator=g, dtype=D64)
    return X, y, xq


@pytest.mark.parametrize("T", [0, 1, 2, 5, 13])
def test_looped_block_is_T_gd_steps(T):
    X, y, xq = _prompt()
    w = gd_weights(4, 0.3)
    looped = lp.looped_lsa_predictions(w, X, y, xq, T)
    gd = gd_predictions(X, y, xq, 0.3, T)
    assert looped.shape == (T + 1, 6)
    assert (looped - gd).abs().max() <= 1e-12
    # and the same as T copies of the block stacked as an untied network
    assert (looped[-1] - lsa_predict([w] * T, X, y, xq)).abs().max() <= 1e-12


def test_gd_closed_form():
    """w_T = (I - (I - eta H)^T) H^{-1} b, H = X^T X / N, b = X^T y / N (N > d: H invertible)."""
    X, y, xq = _prompt(seed=1, N=16)
    eta, T = 0.2, 9
    H = X.transpose(1, 2) @ X / 16
    b = (X.transpose(1, 2) @ y[..., None])[..., 0] / 16
    I = torch.eye(4, dtype=D64)
    M = I - torch.linalg.matrix_power(I - eta * H, T)
    w_T = (M @ torch.linalg.solve(H, b[..., None]))[..., 0]
    pred = lp.looped_lsa_predictions(gd_weights(4, eta), X, y, xq, T)[-1]
    assert (pred - (w_T * xq).sum(-1)).abs().max() <= 1e-12


def test_many_loops_converge_to_least_squares():
    X, y, xq = _prompt(seed=2, N=20)
    bound = lp.gd_step_bound(X)
    eta = 0.9 * float(bound.min())  # stable on every prompt
    pred = lp.looped_lsa_predictions(gd_weights(4, eta), X, y, xq, 400)
    ls = bl.least_squares(X, y, xq)
    gap = (pred - ls).abs().amax(dim=1)
    assert gap[-1] <= 1e-10
    assert gap[10] > 1e-4  # not there after a few loops


def test_step_beyond_bound_diverges():
    """The claim can fail: a step above 2 / lambda_max makes the looped block diverge."""
    X, y, xq = _prompt(seed=3, N=20)
    eta = 1.2 * float(lp.gd_step_bound(X).max())  # unstable on every prompt
    pred = lp.looped_lsa_predictions(gd_weights(4, eta), X, y, xq, 200)
    assert (pred[-1] - bl.least_squares(X, y, xq)).abs().min() > 1e3


def test_looped_apply_rejects_negative_T():
    X, y, xq = _prompt()
    with pytest.raises(ValueError, match="T must be >= 0"):
        lp.looped_apply(gd_weights(4, 0.3), torch.zeros(2, 3, 5, dtype=D64), -1)


# --- the trained looped transformer -------------------------------------------------------


def _small(seed=0, **kw):
    s = lp.LoopedSettings(**{"n_steps": 3, "batch": 4, **kw})
    g = torch.Generator().manual_seed(seed)
    return s, g


@pytest.mark.parametrize("injection,mlp", [(True, False), (False, False), (True, True)])
def test_looped_transformer_shapes(injection, mlp):
    s, g = _small()
    m = lp.LoopedTransformer(s.d, 8, n_runs=3, injection=injection, mlp=mlp, generator=g)
    X, y, xq, yq = lp.sample_prompts(3, 5, s, g)
    assert X.shape == (3, 5, s.N, s.d) and xq.shape == (3, 5, s.Q, s.d) and yq.shape == (3, 5, s.Q)
    assert m(X, y, xq, 6).shape == (6, 3, 5, s.Q)
    assert lp.loop_errors(m, X, y, xq, yq, 6).shape == (6, 3)


def test_runs_are_independent_models():
    """Run j of a stacked model equals a one-run model holding run j's parameters."""
    s, g = _small()
    m = lp.LoopedTransformer(s.d, 8, n_runs=3, generator=g)
    X, y, xq, _ = lp.sample_prompts(3, 5, s, g)
    one = lp.LoopedTransformer(s.d, 8, n_runs=1)
    one.load_state_dict({k: v[1:2] for k, v in m.state_dict().items()})
    torch.testing.assert_close(one(X[1:2], y[1:2], xq[1:2], 4), m(X, y, xq, 4)[:, 1:2])


def test_queries_do_not_see_each_other():
    """Keys and values are the context tokens only: a query's prediction ignores the other queries."""
    s, g = _small()
    m = lp.LoopedTransformer(s.d, 8, n_runs=2, generator=g)
    X, y, xq, _ = lp.sample_prompts(2, 3, s, g)
    full = m(X, y, xq, 5)
    alone = m(X, y, xq[:, :, :1], 5)
    torch.testing.assert_close(alone[..., 0], full[..., 0])


def test_injection_changes_the_recursion():
    s, g = _small()
    m = lp.LoopedTransformer(s.d, 8, n_runs=1, injection=True, generator=g)
    X, y, xq, _ = lp.sample_prompts(1, 3, s, g)
    P = torch.cat([torch.cat([X, y[..., None]], -1), torch.nn.functional.pad(xq, (0, 1))], 2)
    P = P @ m.W_in[:, None] + m.b_in[:, None, None]
    Y = m.block(P, s.N)  # loop 1 from Y_0 = 0: M(0 + P)
    Y2 = m.block(Y + P, s.N)  # loop 2: M(Y_1 + P)
    pred = (Y2[:, :, s.N:] @ m.W_out[:, None, :, None])[..., 0] + m.b_out
    torch.testing.assert_close(m(X, y, xq, 2)[1], pred)


def test_training_reduces_the_loss():
    s, g = _small(n_steps=40, batch=8, T=2, window=1, Q=2)
    m = lp.LoopedTransformer(s.d, 8, n_runs=2, generator=g)
    losses = lp.train(m, s, g)
    assert len(losses) == 40
    assert sum(losses[-10:]) < 0.8 * sum(losses[:10])


def test_reference_errors_least_squares_beats_ridge_noiseless():
    s, g = _small(sigma=0.0)
    X, y, xq, yq = lp.sample_prompts(2, 50, s, g, dtype=D64)
    ref = lp.reference_errors(X, y, xq, yq, 0.0)
    assert ref["least_squares"].shape == (2,) and ref["least_squares"].max() < 1e-10


def test_one_gradient_step_reference_is_least_squares_in_eta():
    s, g = _small(sigma=0.1)
    X, y, xq, yq = lp.sample_prompts(2, 40, s, g, dtype=D64)
    ref = lp.reference_errors(X, y, xq, yq, 0.1)
    R, B, N, d = X.shape
    a = torch.einsum("rbnd,rbn->rbd", X, y)[:, :, None, :].mul(xq).sum(-1) / N  # (R, B, Q)
    for r in range(R):
        etas = torch.linspace(0.0, 3.0, 3001, dtype=D64)
        grid = ((etas[:, None] * a[r].reshape(-1) - yq[r].reshape(-1)) ** 2).mean(1)
        assert float(ref["gd_one_step"][r]) <= float(grid.min()) + 1e-12  # the best eta
        assert float(ref["gd_one_step"][r]) >= float(grid.min()) - 1e-4


def test_extrapolation_ratio():
    e = torch.tensor([[4.0, 1.0], [2.0, 1.0], [3.0, 1.0], [1.0, 5.0]])
    torch.testing.assert_close(lp.extrapolation_ratio(e, 2, 2), torch.tensor([0.5, 5.0]))
    with pytest.raises(ValueError, match="k\\*T"):
        lp.extrapolation_ratio(e, 2, 3)


def test_refinement_ratio_and_extrapolation_score():
    e = torch.tensor([[4.0, 1.0], [2.0, 1.0], [3.0, 1.0], [1.0, 5.0]])  # (loops, runs)
    torch.testing.assert_close(lp.refinement_ratio(e, 2), torch.tensor([0.5, 1.0]))
    zero = torch.tensor([10.0, 10.0])
    # ratio err(4)/err(2): mean(0.5, 5) = 2.75; level err(4)/zero: mean(0.1, 0.5) = 0.3
    assert lp.extrapolation_score(e, zero, 2, 2) == pytest.approx(max(2.75 / 1.4, 0.3 / 0.5))
    flat = torch.ones(4, 2)  # keeps its error but learned nothing: the level part fails
    assert lp.extrapolation_score(flat, torch.ones(2), 2, 2) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="T <= 4"):
        lp.refinement_ratio(e, 5)
    with pytest.raises(ValueError, match="ratio_max"):
        lp.extrapolation_score(e, zero, 2, 2, ratio_max=0.0)


def test_bad_input_raises():
    s, g = _small()
    with pytest.raises(ValueError, match="width"):
        lp.LoopedTransformer(4, 0)
    m = lp.LoopedTransformer(4, 8, generator=g)
    with pytest.raises(ValueError, match="window"):
        lp.train(m, lp.LoopedSettings(T=3, window=4), g)
    X, y, xq, _ = lp.sample_prompts(1, 2, s, g)
    with pytest.raises(ValueError, match="n_loops"):
        m(X, y, xq, 0)


@pytest.mark.slow
def test_quick_profile_finding():
    """The chapter's findings on seed 0 (five runs): the looped model keeps a useful error at 4T
    and its loops refine the prediction; no injection, one pass looped and the untrained block
    do not keep it, and neither one pass looped nor the untrained block refines."""
    s = lp.LoopedSettings()
    out = lp.extrapolation_experiment(s, torch.Generator().manual_seed(0))
    score = {k: lp.extrapolation_score(out[k], out["zero"], s.T, 4)
             for k in ("model", "foil", "single", "untrained")}
    assert score["model"] < 1.0 < min(score["foil"], score["single"], score["untrained"])
    refine = {k: float(lp.refinement_ratio(out[k], s.T).mean()) for k in ("model", "single", "untrained")}
    assert refine["model"] < 0.8 < min(refine["single"], refine["untrained"])
    assert out["single_long"].shape == out["zero"].shape == (5,)
