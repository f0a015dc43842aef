"""Tests of nnapprox.algorithms.probes: the task, the ridge target, hidden states and probes."""

import math

import pytest
import torch

from nnapprox.algorithms import probes as P
from nnapprox.icl.encoder import BaiEncoder


def g(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_relu_second_moment_matches_monte_carlo():
    z = torch.randn(2_000_000, generator=g(1), dtype=torch.float64)
    for beta in (-0.5, 0.0, 1.0):
        mc = float(torch.relu(z - beta).pow(2).mean())
        assert P.relu_second_moment(beta) == pytest.approx(mc, rel=1e-2)
    assert P.relu_second_moment(0.0) == pytest.approx(0.5)


def test_tasks_shapes_and_labels():
    A = P.representation(3, 7, g(0))
    X, y, Phi, w = P.representation_tasks(5, 9, A, g(1), sigma=0.0, beta=0.5)
    assert X.shape == (5, 10, 3) and y.shape == (5, 10)
    assert Phi.shape == (5, 10, 7) and w.shape == (5, 7)
    torch.testing.assert_close(Phi, P.phi(X, A, 0.5))
    torch.testing.assert_close(y, torch.einsum("bnD,bD->bn", Phi, w))
    assert (Phi >= 0).all()


def test_same_generator_same_task():
    A = P.representation(4, 6, g(3))
    a = P.representation_tasks(2, 5, A, g(4))
    b = P.representation_tasks(2, 5, A, g(4))
    for s, t in zip(a, b):
        torch.testing.assert_close(s, t)


def test_ridge_prediction_against_normal_equations_float64():
    A = P.representation(3, 5, g(0)).double()
    X, y, Phi, _ = P.representation_tasks(4, 8, A.float(), g(2), sigma=0.3)
    Phi, y = Phi.double(), y.double()
    lam = 0.7
    got = P.ridge_prediction(Phi, y, lam)
    for b in range(4):
        F, t = Phi[b, :-1], y[b, :-1]
        w = torch.linalg.inv(F.T @ F + lam * torch.eye(5, dtype=torch.float64)) @ F.T @ t
        # the same ridge estimator, written with the inverse
        assert float(got[b]) == pytest.approx(float(Phi[b, -1] @ w), abs=1e-10)


def test_ridge_weights_give_the_ridge_prediction():
    A = P.representation(3, 5, g(0))
    X, y, Phi, _ = P.representation_tasks(4, 8, A, g(2), sigma=0.3)
    Phi, y = Phi.double(), y.double()
    w = P.ridge_weights(Phi, y, 0.7)
    assert w.shape == (4, 5)
    # ridge_prediction penalises the mean loss: its lam is N times the weights' penalty
    torch.testing.assert_close((Phi[:, -1] * w).sum(-1), P.ridge_prediction(Phi, y, 0.7),
                               atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="lam"):
        P.ridge_weights(Phi, y, 0.0)


def test_ridge_recovers_noiseless_readout():
    A = P.representation(3, 4, g(0))
    X, y, Phi, w = P.representation_tasks(6, 40, A, g(5), sigma=0.0, beta=0.0)
    pred = P.ridge_prediction(Phi.double(), y.double(), 1e-8)
    torch.testing.assert_close(pred, y[:, -1].double(), atol=1e-4, rtol=0)


def test_hidden_states_end_at_the_encoders_prediction():
    torch.manual_seed(0)
    model = BaiEncoder(d=3, n_layer=2, n_embd=16, n_head=2).eval()
    A = P.representation(3, 5, g(0))
    X, y, _, _ = P.representation_tasks(4, 6, A, g(1))
    H = P.hidden_states(model, X, y)
    assert H.shape == (3, 4, 7, 16)
    with torch.no_grad():
        torch.testing.assert_close(model.read_out(H[-1, :, -1])[..., 0], model.predict(X, y))
    y2 = y.clone()
    y2[:, -1] += 100.0  # the query's label is hidden
    torch.testing.assert_close(P.hidden_states(model, X, y2), H)


def test_probe_recovers_a_linear_map_and_fails_on_noise():
    H = torch.randn(500, 6, generator=g(0), dtype=torch.float64)
    W = torch.randn(6, 3, generator=g(1), dtype=torch.float64)
    Z = H @ W + 2.0
    assert P.probe_r2(H[:300], Z[:300], H[300:], Z[300:], lam=1e-8) == pytest.approx(1.0, abs=1e-8)
    noise = torch.randn(500, 3, generator=g(2), dtype=torch.float64)  # the claim can fail
    assert P.probe_r2(H[:300], noise[:300], H[300:], noise[300:]) < 0.05


def test_r2_is_one_minus_relative_error():
    Z = torch.tensor([[1.0], [2.0], [3.0]])
    assert float(P.r2(Z, Z)) == 1.0
    assert float(P.r2(torch.full_like(Z, 2.0), Z)) == 0.0


def test_probe_profile_and_statistics_shapes():
    torch.manual_seed(0)
    model = BaiEncoder(d=3, n_layer=2, n_embd=16, n_head=2)
    A = P.representation(3, 5, g(0))
    out = P.probe_profile(model, A, g(1), N=6, sigma=0.1, n_train=200, n_test=100)
    assert out["phi"].shape == (3,) and out["ridge"].shape == (3,)
    assert (out["phi"] <= 1).all() and (out["ridge"] <= 1).all()
    stats = P.layer_statistics(out["phi"], out["ridge"])
    assert set(stats) >= {"phi_lower", "ridge_top", "ridge_gain", "phi_peak", "ridge_peak"}


def test_control_probes_are_added_with_an_alternative_representation():
    torch.manual_seed(0)
    model = BaiEncoder(d=3, n_layer=2, n_embd=16, n_head=2)
    A, A_alt = P.representation(3, 5, g(0)), P.representation(3, 5, g(5))
    out = P.probe_profile(model, A, g(1), N=6, sigma=0.1, n_train=200, n_test=100, A_alt=A_alt)
    assert set(out) == {"phi", "ridge", "phi_alt", "ridge_x", "ridge_alt", "label", "context_mean", "weights"}
    assert all(v.shape == (3,) and (v <= 1).all() for v in out.values())
    several = P.probe_profile(model, A, g(1), N=6, sigma=0.1, n_train=200, n_test=100,
                              A_alt=torch.stack([A_alt, P.representation(3, 5, g(6))]))
    assert several["phi_alt"].shape == (2, 3) and several["ridge_alt"].shape == (2, 3)
    assert several["ridge"].shape == (3,)
    with pytest.raises(ValueError, match="A_alt"):
        P.probe_profile(model, A, g(1), N=6, sigma=0.1, n_train=20, n_test=10, A_alt=A[:2])



def test_dual_ridge_is_the_ridge_prediction():
    Phi = torch.randn(4, 7, 30, generator=g(2), dtype=torch.float64)
    y = torch.randn(4, 7, generator=g(3), dtype=torch.float64)
    assert torch.allclose(P.dual_ridge_prediction(Phi, y, 0.5), P.ridge_prediction(Phi, y, 0.5), atol=1e-10)
    with pytest.raises(ValueError, match="lam"):
        P.dual_ridge_prediction(Phi, y, 0.0)


def test_random_feature_probe_and_errors_with_many_random_directions():
    """``A_rf`` adds the probe for ridge on generic random features and the held-out errors of
    the encoder, ridge on Phi and ridge on those features; the encoder's error is the one of
    its own predictions."""
    torch.manual_seed(0)
    model = BaiEncoder(d=3, n_layer=2, n_embd=16, n_head=2)
    A, A_rf = P.representation(3, 5, g(0)), P.representation(3, 60, g(7))
    out = P.probe_profile(model, A, g(1), N=6, sigma=0.1, n_train=200, n_test=100, A_rf=A_rf)
    assert set(out) == {"phi", "ridge", "ridge_rf", "errors"} and out["ridge_rf"].shape == (3,)
    g1 = g(1)
    P.representation_tasks(200, 6, A, g1, sigma=0.1)  # the probes' training prompts
    X, y, Phi, _ = P.representation_tasks(100, 6, A, g1, sigma=0.1)
    with torch.no_grad():
        own = float((model.predict(X, y).double() - y[:, -1].double()).pow(2).mean())
    bayes = float((P.ridge_prediction(Phi.double(), y.double(), 0.1 ** 2 * 5) - y[:, -1].double()).pow(2).mean())
    assert out["errors"][0] == pytest.approx(own) and out["errors"][1] == pytest.approx(bayes)
    with pytest.raises(ValueError, match="A_rf"):
        P.probe_profile(model, A, g(1), N=6, sigma=0.1, n_train=20, n_test=10, A_rf=A_rf[:, :2])

def test_bad_input_is_refused():
    A = P.representation(3, 5, g(0))
    with pytest.raises(ValueError, match="d >= 1"):
        P.representation(0, 5, g(0))
    with pytest.raises(ValueError, match="coordinates"):
        P.phi(torch.zeros(2, 4), A)
    with pytest.raises(ValueError, match="sigma"):
        P.representation_tasks(2, 3, A, g(0), sigma=-1.0)
    with pytest.raises(ValueError, match="lam"):
        P.ridge_prediction(torch.zeros(1, 3, 5), torch.zeros(1, 3), 0.0)
    with pytest.raises(ValueError, match="paired rows"):
        P.fit_probe(torch.zeros(3, 2), torch.zeros(4, 1))
    with pytest.raises(ValueError, match="X of shape"):
        model = BaiEncoder(d=3, n_layer=1, n_embd=8, n_head=2)
        P.hidden_states(model, torch.zeros(2, 4, 5), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="same length"):
        P.layer_statistics(torch.zeros(4), torch.zeros(5))


def test_short_training_lowers_the_loss():
    s = dict(P.PROFILES["full"], steps=40, batch=16, warmup=5)
    torch.manual_seed(0)
    model = BaiEncoder(**dict(P.CONFIG, n_layer=2))
    curve = P.train(model, s, g(0))
    assert len(curve) == 40 and all(math.isfinite(v) for v in curve)
    assert sum(curve[-10:]) < sum(curve[:10])


def test_untrained_model_is_the_checkpoints_starting_point_and_keeps_global_state():
    before = torch.random.get_rng_state()
    foil = P.untrained_model(3)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(3)
    start = BaiEncoder(**P.CONFIG)
    for (k, a), (_, b) in zip(foil.state_dict().items(), start.state_dict().items()):
        assert torch.equal(a, b), k
