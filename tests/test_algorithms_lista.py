"""LISTA at ISTA's weights is ISTA (float64); Lasso targets certified; members train alone."""

import math

import pytest
import torch
from jaxtyping import TypeCheckError, install_import_hook

from nnapprox import ista as intro_ista

with install_import_hook("nnapprox.algorithms.lista", "beartype.beartype"):  # shape checks
    from nnapprox.algorithms import lista as L

f64 = dict(dtype=torch.float64)
LAM = 0.1


def _task(runs=2, m=12, n=20, s=3, N=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    D = L.random_dictionary(runs, m, n, g)
    x = L.sparse_codes(runs, N, n, s, g) @ D.transpose(1, 2)
    return D, x, g


def test_dictionary_and_codes():
    D, _, g = _task()
    assert torch.allclose(D.norm(dim=1), torch.ones(2, 20, **f64), atol=1e-14)
    z = L.sparse_codes(3, 50, 20, 4, g)
    assert z.shape == (3, 50, 20) and ((z != 0).sum(-1) == 4).all()


@pytest.mark.parametrize("K", [1, 3, 7])
def test_lista_at_ista_weights_is_k_ista_iterations(K):
    D, x, _ = _task()
    z_lista = L.lista(x, L.lista_ista_weights(D, LAM), K)
    assert (z_lista - L.ista(x, D, LAM, K)).abs().max() <= 1e-13
    assert (z_lista != 0).any() and (z_lista == 0).any()  # the thresholds act


def test_lista_agrees_with_the_intros_ista_step():
    """A tall dictionary makes D^T D positive definite, which nnapprox.ista.ista_step requires."""
    D, x, _ = _task(runs=1, m=16, n=10, N=5)
    A, eta, K = D[0].T @ D[0], float(L.ista_step_size(D)[0]), 6
    z_lista = L.lista(x, L.lista_ista_weights(D, LAM), K)[0]
    for i in range(x.shape[1]):
        step, _ = intro_ista.ista_step(A, x[0, i] @ D[0], LAM, eta)
        z = torch.zeros(1, 10, **f64)
        for _ in range(K):
            z = step(z)
        assert (z[0] - z_lista[i]).abs().max() <= 1e-13


def test_module_and_curve_match_the_functions():
    D, x, _ = _task()
    w = L.lista_ista_weights(D, LAM)
    assert torch.equal(L.LISTA(w, 4)(x), L.lista(x, w, 4))
    z_star = L.lasso_solution(x, D, LAM)
    curve = L.ista_nmse_curve(x, D, LAM, z_star, 12)
    for k in (1, 5, 12):
        assert torch.allclose(curve[k - 1], L.nmse_db(L.ista(x, D, LAM, k), z_star), atol=1e-9)
    assert (curve[-1] < curve[0]).all()


def test_lasso_solution_is_certified_and_a_fixed_point_of_ista():
    D, x, _ = _task()
    z_star = L.lasso_solution(x, D, LAM)
    assert L.lasso_kkt_residual(z_star, x, D, LAM).max() <= 1e-9
    assert (L.ista(x, D, LAM, 1) != 0).any()
    w = L.lista_ista_weights(D, LAM)
    u = x @ w["W_e"].transpose(1, 2) + z_star @ w["S"].transpose(1, 2)
    step = torch.relu(u - w["theta"][:, None]) - torch.relu(-u - w["theta"][:, None])
    assert (step - z_star).abs().max() <= 1e-8  # z* = S_theta(W_e x + S z*)
    with pytest.raises(RuntimeError, match="KKT residual"):
        L.lasso_solution(x, D, LAM, n_iter=50)


def test_iterations_to_match_can_fail():
    curve = torch.tensor([[-1.0, -2.0], [-3.0, -2.5], [-5.0, -2.6]])
    assert L.iterations_to_match(curve, torch.tensor([-2.5, -2.0])).tolist() == [2, 1]
    assert L.iterations_to_match(curve, torch.tensor([-9.0, -9.0])).tolist() == [4, 4]


def test_equal_size_mlp():
    m, n = 20, 40
    target = L.lista_n_params(m, n)
    assert target == 2440
    for depth in (1, 2, 4):
        width = L.equal_size_width(target, m, n, depth)
        assert L.mlp_n_params(m, n, width, depth) >= target > L.mlp_n_params(m, n, width - 1, depth)
        net = L.MLP(3, m, n, width, depth, torch.Generator().manual_seed(0))
        assert sum(p[0].numel() for p in net.parameters()) == L.mlp_n_params(m, n, width, depth)
        assert net(torch.randn(3, 7, m)).shape == (3, 7, n)


def test_members_train_as_if_alone():
    D, x, _ = _task()
    z_star = L.lasso_solution(x, D, LAM)
    w = L.lista_ista_weights(D, LAM)
    both = L.LISTA(w, 3)
    L.train_members(both, x, z_star, torch.tensor([1e-3, 0.0], **f64), 20, 8,
                    torch.Generator().manual_seed(5))
    alone = L.LISTA({k: v[:1] for k, v in w.items()}, 3)
    L.train_members(alone, x[:1], z_star[:1], torch.tensor([1e-3], **f64), 20, 8,
                    torch.Generator().manual_seed(5))
    assert (both.S[0] - alone.S[0]).abs().max() <= 1e-12
    assert (both.S[0] - w["S"][0]).abs().max() > 1e-6  # it moved ...
    assert torch.equal(both.S[1], w["S"][1])  # ... and the member with lr 0 did not


@pytest.mark.slow
def test_lista_vs_mlp_smoke():
    out = L.lista_vs_mlp(runs=2, m=8, n=12, s=2, lam=LAM, K=2, n_train=64, n_test=32,
                         n_steps=30, batch_size=16, lrs=(1e-3, 1e-2), depths=(1, 2), k_max=15,
                         generator=torch.Generator().manual_seed(0))
    assert out["lista"].shape == out["mlp"].shape == (2,)
    assert out["mlp_by_depth"].shape == (2, 2) and out["ista_curve"].shape == (15, 2)
    assert (out["n_params_mlp"] >= out["n_params_lista"]).all()
    assert (out["lista"] < out["ista_curve"][1] + 1e-4).all()  # started at ISTA: no worse
    assert out["step_ista"].shape == (2,)
    assert (out["step_ista"] < out["ista_curve"][1] + 1e-4).all()  # started at ISTA too


def test_step_ista_at_its_start_is_ista():
    D, x, _ = _task()
    m = L.StepISTA(D, LAM, 3)
    with torch.no_grad():
        torch.testing.assert_close(m(x), L.ista(x, D, LAM, 3))
        m.log_c.fill_(math.log(0.5))
        m.log_a.fill_(math.log(2.0))  # half the step, twice the threshold multiplier
        eta = L.ista_step_size(D)
        z = torch.zeros(x.shape[0], x.shape[1], D.shape[2], dtype=x.dtype)
        for _ in range(3):
            e = (0.5 * eta)[:, None, None]
            u = z - e * ((z @ D.transpose(1, 2) - x) @ D)
            z = torch.sign(u) * torch.relu(u.abs() - e * LAM * 2.0)
        torch.testing.assert_close(m(x), z)
    assert sum(p.numel() for p in m.parameters()) == 2 * 3 * D.shape[0]


def test_bad_input_is_refused_before_any_work():
    D, x, g = _task()
    with pytest.raises(ValueError, match="lam >= 0"):
        L.lista_ista_weights(D, -1.0)
    with pytest.raises(ValueError, match="K must be a positive integer"):
        L.lista(x, L.lista_ista_weights(D, LAM), 0)
    with pytest.raises(ValueError, match="s <= n"):
        L.sparse_codes(1, 4, 5, 6, g)
    with pytest.raises(ValueError, match="float64"):
        L.lasso_solution(x.float(), D.float(), LAM)
    with pytest.raises((ValueError, TypeCheckError)):  # one lr per member (the hook sees it first)
        L.train_members(L.LISTA(L.lista_ista_weights(D, LAM), 2), x, x[..., :1].expand(-1, -1, 20),
                        torch.ones(3), 1, 4, g)
    with pytest.raises(ValueError, match="some lrs"):
        L.lista_vs_mlp(runs=1, m=4, n=6, s=1, lam=LAM, K=1, n_train=8, n_test=8, n_steps=1,
                       batch_size=4, lrs=(), depths=(1,), k_max=2, generator=g)
    with pytest.raises(ValueError, match="as many step_lrs"):
        L.lista_vs_mlp(runs=1, m=4, n=6, s=1, lam=LAM, K=1, n_train=8, n_test=8, n_steps=1,
                       batch_size=4, lrs=(1e-3,), depths=(1,), k_max=2, generator=g,
                       step_lrs=(1e-2, 1e-1))
    with pytest.raises(ValueError, match="lam >= 0"):
        L.StepISTA(D, -1.0, 2)
