"""Tests of the decomposition-versus-end-to-end module of the failures chapter."""

import pytest
import torch

import nnapprox.failures as F
import nnapprox


def _w_u(d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(d, generator=g, dtype=torch.float64)
    return torch.randn(d, generator=g, dtype=torch.float64) / d**0.5, u / u.norm()


def test_part_moments_match_monte_carlo():
    w, u = _w_u()
    x = torch.randn(500_000, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    l, N = torch.sign(x @ u), torch.tanh(x @ w)
    c, s_u = F.part_moments(w, u)
    assert c == pytest.approx(float((l * N).mean()), abs=5e-3)
    assert s_u == pytest.approx(float((l * (1 - N**2) * (x @ u)).mean()), abs=5e-3)


def test_per_example_gradient_matches_autograd():
    w, u = _w_u()
    x, l, y = F.sample_tuples(5, 3, u, torch.Generator().manual_seed(2))
    wr = w.clone().requires_grad_(True)
    p = F.end_to_end_predictor(wr, x)
    auto = torch.stack([torch.autograd.grad(p[i], wr, retain_graph=True)[0] for i in range(5)])  # (5, d)
    N = F.part_predictor(w, x)
    others = torch.stack([torch.cat([N[:, :i], N[:, i + 1:]], 1).prod(1) for i in range(3)], 1)
    manual = (others[..., None] * (1 - N**2)[..., None] * x).sum(1)
    torch.testing.assert_close(manual, auto, rtol=0, atol=1e-12)
    assert torch.equal(y, l.prod(1))


def test_signal_factorises_within_sampling_error():
    w, u = _w_u(seed=3)
    for k in (1, 2, 3):
        r = F.gradient_signals(w, u, k, 2**17, torch.Generator().manual_seed(k))
        assert abs(r["z"]) < 4.5
        assert r["ratio_predicted"] == pytest.approx(k * r["c"] ** (k - 1))


def test_a_wrong_prediction_fails_the_claim():
    """Dropping the factor k from the prediction gives a large z: the chapter's claim can fail."""
    w, u = _w_u(seed=3)
    r = F.gradient_signals(w, u, 2, 2**17, torch.Generator().manual_seed(5))
    wrong_z = (r["mean"] - r["predicted"] / 2) / r["se"]
    assert abs(r["z"]) <= 4.0
    claims = nnapprox.Claims()
    assert not claims.check("wrong factorisation", value=abs(wrong_z), op="<=", threshold=4.0, kind="empirical", basis="derived", source="test",
                            foil=("a wrong factorisation", 1e9))


def test_train_decomposition_shapes_and_validation():
    steps, acc, init = F.train_decomposition([1, 3], 4, 20, torch.Generator().manual_seed(0), eval_every=10, n_eval=64)
    assert steps.tolist() == [0, 10, 20] and acc.shape == (3, 2, 2)
    assert init["u"].shape == init["w0"].shape == (2, 4)
    torch.testing.assert_close(init["u"].norm(dim=1), torch.ones(2))
    assert torch.equal(acc[0, 0], acc[0, 1])  # same initialisation for both learners
    with pytest.raises(ValueError):
        F.train_decomposition([0], 4, 10, torch.Generator())


def test_staircase_target_values():
    x = F.hypercube(4)
    f = F.evaluate_target(F.staircase(4), x)
    expected = x[:, 0] + x[:, 0] * x[:, 1] + x[:, :3].prod(1) + x.prod(1)
    torch.testing.assert_close(f, expected, rtol=0, atol=0)
    # orthonormality of parities: the coefficient of x1x2x3x4 in the staircase is exactly 1
    assert float((f * x.prod(1)).mean()) == 1.0
    with pytest.raises(ValueError):
        F.staircase(0)


def test_train_targets_ensemble_shapes():
    steps, coef = F.train_targets_ensemble([F.staircase(2), [(1.0, [0, 1])]], 5, 10, torch.Generator().manual_seed(0),
                                           [0, 1], width_factor=2, eval_every=5, n_eval=64)
    assert steps.tolist() == [0, 5, 10] and coef.shape == (3, 2)
