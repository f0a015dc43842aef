"""Distribution-shift probes and the regression/classification mixture of nnapprox.icl."""

import pytest
import torch

from nnapprox import icl
from nnapprox.icl import baselines as bl


def test_skewed_sqrt_cov_has_the_stated_spectrum():
    A = icl.skewed_sqrt_cov(8, torch.Generator().manual_seed(0), dtype=torch.float64)
    ev = torch.linalg.eigvalsh(A @ A.T).flip(0)
    assert abs(float(ev.sum()) - 8) < 1e-10
    i = torch.arange(1, 9, dtype=torch.float64)
    assert torch.allclose(ev / ev[0], i.pow(-2.0), atol=1e-10)
    with pytest.raises(ValueError, match="decay"):
        icl.skewed_sqrt_cov(3, torch.Generator(), decay=-1.0)


def test_shifted_inputs_and_bad_shapes():
    g = torch.Generator().manual_seed(1)
    A = icl.skewed_sqrt_cov(4, g, dtype=torch.float64)
    X, y, w = icl.linear_tasks(50_000, 2, 4, g, x_sqrt_cov=A, dtype=torch.float64)
    emp = torch.einsum("bnd,bne->de", X, X) / (2 * 50_000)
    assert torch.allclose(emp, A @ A.T, atol=0.05)
    assert torch.allclose(y, torch.einsum("bnd,bd->bn", X, w))
    X2, _, _ = icl.linear_tasks(3, 2, 4, torch.Generator().manual_seed(2), x_scale=2.0)
    X1, _, _ = icl.linear_tasks(3, 2, 4, torch.Generator().manual_seed(2))
    assert torch.allclose(X2, 2 * X1)
    with pytest.raises(ValueError, match="x_sqrt_cov"):
        icl.linear_tasks(2, 2, 4, g, x_sqrt_cov=torch.eye(3))
    with pytest.raises(ValueError, match="x_scale"):
        icl.linear_tasks(2, 2, 4, g, x_scale=0.0)


@pytest.mark.parametrize("which", ["identity", "scaled", "skewed"])
def test_averaging_risk_matches_simulation(which):
    d, k, n = 6, 4, 200_000
    g = torch.Generator().manual_seed(3)
    A = {"identity": torch.eye(d, dtype=torch.float64), "scaled": 2 * torch.eye(d, dtype=torch.float64),
         "skewed": icl.skewed_sqrt_cov(d, g, dtype=torch.float64)}[which]
    X, y, _ = icl.linear_tasks(n, k + 1, d, g, x_sqrt_cov=A, dtype=torch.float64)
    e = (bl.averaging(X[:, :k], y[:, :k], X[:, k]) - y[:, k]).pow(2) / float(torch.trace(A @ A.T))
    exact = bl.averaging_risk(A @ A.T, k)
    assert abs(float(e.mean()) - exact) < 5 * float(e.std()) / n ** 0.5
    if which == "identity":
        assert exact == pytest.approx((d + 1) / k)
    if which == "scaled":
        assert exact == pytest.approx(9 + 16 * (d + 1) / k)


def test_sign_tasks_and_the_mixture():
    g = torch.Generator().manual_seed(4)
    X, y, w = icl.sign_tasks(100, 7, 3, g)
    assert set(y.unique().tolist()) <= {-1.0, 1.0}
    assert (y == torch.einsum("bnd,bd->bn", X, w).sign()).all()
    X, y, w, is_cls = icl.regression_or_classification_tasks(4000, 7, 3, g, sigma=0.1, p_classification=0.25)
    assert abs(float(is_cls.mean()) - 0.25) < 0.03
    cls = is_cls > 0
    assert set(y[cls].unique().tolist()) <= {-1.0, 1.0}
    assert (y[~cls].abs() != 1).all()  # regression labels are a continuum
    resid = y[~cls] - torch.einsum("bnd,bd->bn", X[~cls], w[~cls])
    assert 0.08 < float(resid.std()) < 0.12
    with pytest.raises(ValueError, match="p_classification"):
        icl.regression_or_classification_tasks(2, 2, 2, g, p_classification=1.5)


def test_logistic_regression_classifies_separable_prompts():
    g = torch.Generator().manual_seed(5)
    X, y, _ = icl.sign_tasks(2000, 41, 3, g)
    score = bl.logistic_regression(X[:, :-1], (y[:, :-1] + 1) / 2, X[:, -1])
    err = float((score.sign() != y[:, -1]).float().mean())
    assert err < 0.06  # 40 separable examples in 3 dimensions pin the direction down
    blind = bl.logistic_regression(X[:, :-1], (y[:, :-1] + 1) / 2, X[:, -1], n_steps=0)
    assert (blind == 0).all()  # no steps: the zero vector, no decision


@pytest.mark.parametrize("sigma", [0.1, 0.5])
def test_least_squares_risk_matches_simulation(sigma):
    d, k, n = 5, 10, 200_000
    X, y, _ = icl.linear_tasks(n, k + 1, d, torch.Generator().manual_seed(5), sigma=sigma, dtype=torch.float64)
    e = (bl.least_squares(X[:, :k], y[:, :k], X[:, k]) - y[:, k]).pow(2)
    exact = bl.least_squares_risk(d, k, sigma)
    assert exact == pytest.approx(sigma ** 2 * 9 / 4)
    assert abs(float(e.mean()) - exact) < 5 * float(e.std()) / n ** 0.5
    with pytest.raises(ValueError, match="k >= d \\+ 2"):
        bl.least_squares_risk(5, 6, 0.1)
