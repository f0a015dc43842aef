"""The bandit transformer: shapes, causality, equivariance, play loop, slope fit, bad input."""

import math

import pytest
import torch

from nnapprox import sequential as Q


def _model(d=3, seed=0):
    torch.manual_seed(seed)
    return Q.BanditGPT(d=d, n_layer=2, n_embd=32, n_head=4).eval()


def _trajectory(B=3, T=6, K=4, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(B, T, K, d, generator=g)
    a = torch.randint(0, K, (B, T), generator=g)
    y = torch.randn(B, T, generator=g)
    return A, a, y


def test_shapes_and_last_only_equals_the_full_pass():
    m = _model()
    A, a, y = _trajectory()
    with torch.no_grad():
        full = m(A, a, y)
        last = m(A, a, y, last_only=True)
    assert full.shape == (3, 6, 4) and last.shape == (3, 1, 4)
    assert torch.allclose(full[:, -1:], last, atol=1e-5)


def test_logits_of_round_t_ignore_later_rounds_and_round_t_outcome():
    m = _model()
    A, a, y = _trajectory(T=7)
    with torch.no_grad():
        ref = m(A, a, y)
        for t in range(7):
            A2, a2, y2 = A.clone(), a.clone(), y.clone()
            A2[:, t + 1:] = torch.randn_like(A2[:, t + 1:])
            a2[:, t:] = (a2[:, t:] + 1) % 4  # the action played at round t is not known at round t
            y2[:, t:] = y2[:, t:] + 5.0
            out = m(A2, a2, y2)
            assert torch.allclose(out[:, : t + 1], ref[:, : t + 1], atol=1e-5), t
            if t + 1 < 7:
                assert not torch.allclose(out[:, t + 1:], ref[:, t + 1:], atol=1e-3)


def test_policy_is_equivariant_under_permuting_the_rounds_actions():
    m = _model()
    A, a, y = _trajectory(T=5)
    perm = torch.tensor([2, 0, 3, 1])
    inv = torch.argsort(perm)
    A2, a2 = A[:, :, perm], inv[a]  # the same played vectors under new indices
    with torch.no_grad():
        assert torch.allclose(m(A2, a2, y), m(A, a, y)[:, :, perm], atol=1e-5)


def test_mask_layout():
    M = Q.attention_mask(3, 2)
    assert M.shape == (9, 9)
    assert M[:3, :3].equal(torch.tril(torch.ones(3, 3, dtype=torch.bool)))
    assert not M[:3, 3:].any()  # history never reads queries
    assert not M[3:5, :3].any()  # round 1 has no past
    assert M[5:7, :3].equal(torch.tensor([[1, 0, 0], [1, 0, 0]], dtype=torch.bool))
    assert M[3:, 3:].equal(torch.eye(6, dtype=torch.bool))
    L = Q.attention_mask(3, 2, last_only=True)
    assert L.shape == (5, 5)
    assert L[3:, :3].equal(torch.tensor([[1, 1, 0], [1, 1, 0]], dtype=torch.bool))


def _play_loop(m, p):  # one instance at a time, the whole history re-read every round
    T, B, K, d = p.actions.shape
    out = torch.zeros(T, B, dtype=torch.float64)
    for i in range(B):
        played, ys = [], []
        for t in range(T):
            A = p.actions[: t + 1, i].float()[None]  # (1, t+1, K, d)
            a_hist = torch.tensor(played + [0])[None]
            y_hist = torch.tensor(ys + [0.0])[None]
            with torch.no_grad():
                a = int(m(A, a_hist, y_hist)[0, t].argmax())
            means = [float(p.actions[t, i, k] @ p.theta[i]) for k in range(K)]
            out[t, i] = max(means) - means[a]
            played.append(a)
            ys.append(means[a] + p.sigma * float(p.noise[t, i]))
    return out


def test_play_matches_a_per_instance_loop():
    m = _model()
    p = Q.make_problem(3, 6, 4, 3, 0.3, torch.Generator().manual_seed(5))
    res = Q.decision_transformer_play(m, p)
    assert res["regret"].shape == (6, 3) and res["action"].shape == (6, 3)
    assert torch.allclose(res["regret"], _play_loop(m, p), atol=1e-6)
    assert (res["regret"] >= 0).all()
    sampled = Q.decision_transformer_play(m, p, torch.Generator().manual_seed(0), greedy=False)
    assert sampled["regret"].shape == (6, 3)


def test_linucb_records_its_actions():
    p = Q.make_problem(4, 10, 5, 3, 0.3, torch.Generator().manual_seed(2))
    res = Q.linucb(p)
    mean = (p.actions @ p.theta[None, :, :, None])[..., 0]  # (T, B, K)
    picked = mean.gather(2, res["action"][..., None])[..., 0]
    assert torch.allclose(res["regret"], mean.max(-1).values - picked)


def test_loglog_slope_recovers_a_power_and_its_se_shrinks():
    T, B = 64, 40
    t = torch.arange(1, T + 1, dtype=torch.float64)
    inc = (t ** 0.5 - (t - 1) ** 0.5)[:, None].expand(T, B)  # cumulative regret exactly t^0.5
    s, se = Q.loglog_slope(inc, 8)
    assert abs(s - 0.5) < 1e-12 and se < 1e-12
    g = torch.Generator().manual_seed(0)
    noisy = inc * torch.exp(0.3 * torch.randn(1, B, generator=g, dtype=torch.float64))  # scale only
    s2, _ = Q.loglog_slope(noisy, 8)
    assert abs(s2 - 0.5) < 1e-12
    lin = torch.rand(T, 400, generator=g, dtype=torch.float64)
    s3, se3 = Q.loglog_slope(lin, 8)
    assert abs(s3 - 1.0) < 4 * se3 + 0.02 and 0 < se3 < 0.05


def test_bad_input_raises():
    m = _model()
    A, a, y = _trajectory()
    with pytest.raises(ValueError, match="d=3"):
        m(A[..., :2], a, y)
    with pytest.raises(ValueError, match="played and rewards"):
        m(A, a[:, :2], y)
    with pytest.raises(ValueError, match="indices"):
        m(A, a + 4, y)
    with pytest.raises(ValueError, match="n_head"):
        Q.BanditGPT(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="d=2"):
        Q.decision_transformer_play(m, Q.make_problem(2, 3, 4, 2, 0.3, torch.Generator()))
    with pytest.raises(ValueError, match="Generator"):
        p = Q.make_problem(2, 3, 4, 3, 0.3, torch.Generator())
        Q.decision_transformer_play(m, p, greedy=False)
    with pytest.raises(ValueError, match="t0"):
        Q.loglog_slope(torch.ones(5, 3), 5)


@pytest.mark.slow
def test_training_lowers_the_loss():
    spec = Q.CHECKPOINTS["sequential_linucb"]
    s = {**spec.settings, "steps": 100, "warmup": 10, "T": 10, "batch": 16}
    torch.manual_seed(0)
    m = Q.BanditGPT(**spec.config)
    losses = Q.train_bandit_gpt(m, s, torch.Generator().manual_seed(0))
    q = len(losses) // 4
    assert sum(losses[-q:]) / q < 0.9 * sum(losses[:q]) / q
    assert sum(losses[:q]) / q < 1.1 * math.log(s["K"])


def test_committed_checkpoint_plays_like_linucb_on_a_small_run():
    from nnapprox import checkpoints

    m = checkpoints.load("sequential_linucb")
    s = Q.SETTINGS["sequential_linucb"]
    p = Q.make_problem(64, 16, s["K"], s["d"], s["sigma"], torch.Generator().manual_seed(3))
    tf = Q.decision_transformer_play(m, p)["regret"].sum(0).mean()
    ucb = Q.linucb(p, lam=s["lam"], delta=s["delta"])["regret"].sum(0).mean()
    mean = (p.actions @ p.theta[None, :, :, None])[..., 0]
    rand = (mean.max(-1).values - mean.mean(-1)).sum(0).mean()
    assert (tf - ucb) / (rand - ucb) < 0.1
