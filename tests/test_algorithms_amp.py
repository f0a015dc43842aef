"""AMP, state evolution, the replica potential and exact Bayes by enumeration (float64)."""

import itertools
import math

import pytest
import torch

from nnapprox.algorithms import amp as M

f64 = dict(dtype=torch.float64)


def _loop_posterior_mean(A, y, eps, sigma2):
    """Reference: a Python loop over supports with the n-dimensional Gaussian likelihood."""
    n, d = A.shape
    num, den = torch.zeros(d, **f64), 0.0
    for S in itertools.product([0, 1], repeat=d):
        idx = [j for j in range(d) if S[j]]
        C = sigma2 * torch.eye(n, **f64) + A[:, idx] @ A[:, idx].T
        lik = torch.distributions.MultivariateNormal(torch.zeros(n, **f64), C).log_prob(y).exp()
        prior = eps ** len(idx) * (1 - eps) ** (d - len(idx))
        mu = torch.zeros(d, **f64)
        if idx:
            mu[idx] = A[:, idx].T @ torch.linalg.solve(C, y)
        num, den = num + prior * lik * mu, den + prior * lik
    return num / den


@pytest.mark.parametrize("d", [2, 3])
def test_enumeration_equals_the_loop_over_supports(d):
    g = torch.Generator().manual_seed(d)
    A, x, y = M.sample_instances(4, d, 1.0, 0.4, 0.1, generator=g)
    fast = M.bayes_posterior_mean(A, y, 0.4, 0.1, chunk=3)  # several chunks
    for i in range(4):
        assert (fast[i] - _loop_posterior_mean(A[i], y[i], 0.4, 0.1)).abs().max() <= 1e-12


def test_enumeration_agrees_with_monte_carlo_over_the_prior():
    g = torch.Generator().manual_seed(1)
    A, _, y = M.sample_instances(1, 2, 1.5, 0.5, 0.3, generator=g)  # d = 2, n = 3
    N = 400_000
    X = (torch.rand(N, 2, generator=g, **f64) < 0.5) * torch.randn(N, 2, generator=g, **f64)
    logw = -((y[0] - X @ A[0].T) ** 2).sum(1) / (2 * 0.3)  # importance weights p(y | x)
    w = torch.softmax(logw, 0)
    mc = (w[:, None] * X).sum(0)
    se = torch.sqrt((w[:, None] ** 2 * (X - mc) ** 2).sum(0))
    exact = M.bayes_posterior_mean(A, y, 0.5, 0.3)[0]
    assert ((exact - mc).abs() <= 5 * se + 1e-4).all()


def test_denoiser_is_the_posterior_mean_and_its_derivative():
    r = torch.linspace(-3, 3, 61, **f64)
    tau2, eps, h = 0.2, 0.3, 1e-6
    eta, deta = M.bg_denoiser(r, tau2, eps)
    p1 = eps * torch.exp(-r**2 / (2 * (1 + tau2))) / math.sqrt(1 + tau2)
    p0 = (1 - eps) * torch.exp(-r**2 / (2 * tau2)) / math.sqrt(tau2)
    assert torch.allclose(eta, p1 / (p0 + p1) * r / (1 + tau2), atol=1e-14)
    fd = (M.bg_denoiser(r + h, tau2, eps)[0] - M.bg_denoiser(r - h, tau2, eps)[0]) / (2 * h)
    assert torch.allclose(deta, fd, atol=1e-7)


def test_mmse_quadrature_converges_and_matches_monte_carlo():
    t = torch.tensor([1e-6, 1e-4, 1e-2, 0.3, 3.0], **f64)
    r, w = M._grid(t, 3201)
    fine = (M._posterior(r, t[:, None], 0.2)[1] * M._density(r, t[:, None], 0.2) * w).sum(1)
    assert torch.allclose(M.bg_mmse(t, 0.2), fine, rtol=1e-10, atol=0)
    assert torch.allclose(M.bg_mmse(torch.tensor([1e3], **f64), 0.2),  # no information: Var X
                          torch.tensor([0.2], **f64), rtol=1e-3)
    g = torch.Generator().manual_seed(0)
    X = (torch.rand(400_000, generator=g, **f64) < 0.2) * torch.randn(400_000, generator=g, **f64)
    R = X + math.sqrt(0.3) * torch.randn(400_000, generator=g, **f64)
    err = (M.bg_denoiser(R, 0.3, 0.2)[0] - X) ** 2
    assert abs(err.mean() - M.bg_mmse(t[3:4], 0.2)) <= 4 * err.std() / math.sqrt(4e5)


def test_potential_is_stationary_at_the_fixed_points_and_mutual_information_obeys_immse():
    fp = M.se_fixed_points(0.46, 0.3, 1e-4)
    assert fp.numel() == 3  # good, unstable, bad: a first-order transition
    h = 1e-6 * fp
    phi = [M.rs_potential(t, 0.46, 0.3, 1e-4) for t in (fp + h, fp - h)]
    dphi = (phi[0] - phi[1]) / (2 * h)
    assert dphi.abs().max() <= 1e-4 * (1 / fp).max()
    s = torch.tensor([2.0, 2.0 + 1e-4], **f64)  # d I / d snr = mmse / 2 with snr = 1 / tau2
    i = M.bg_mutual_information(1 / s, 0.3)
    assert (i[1] - i[0]) / 1e-4 == pytest.approx(0.5 * M.bg_mmse(1 / s[:1], 0.3).item(), rel=1e-4)


def test_replica_formula_gives_the_gaussian_prior_mutual_information():
    """A Gaussian prior (eps -> 1) has the exact (1/2d) E log det(I + A A^T / sigma2)."""
    delta, sigma2, d = 0.5, 0.1, 400
    g = torch.Generator().manual_seed(0)
    A = torch.randn(8, round(delta * d), d, generator=g, **f64) / math.sqrt(delta * d)
    n = A.shape[1]
    exact = torch.logdet(torch.eye(n, **f64) + A @ A.transpose(1, 2) / sigma2).mean() / (2 * d)
    t = torch.exp(torch.linspace(math.log(sigma2), math.log(10.0), 4000, **f64))
    q = sigma2 / t
    phi = 0.5 * torch.log(1 + 1 / t) + 0.5 * delta * (q - 1 - torch.log(q))
    assert phi.min().item() == pytest.approx(exact.item(), rel=2e-3)


def test_state_evolution_predicts_amp_and_not_the_foil():
    delta, eps, sigma2, T = 0.5, 0.1, 1e-3, 8
    tau2, se = M.state_evolution(delta, eps, sigma2, T)
    assert se[0] == eps and tau2[0] == pytest.approx(sigma2 + eps / delta)
    g = torch.Generator().manual_seed(0)
    A, x, y = M.sample_instances(6, 1000, delta, eps, sigma2, generator=g)
    for onsager, inside in [(True, True), (False, False)]:
        mse = ((M.amp(A, y, eps, T, tau2=tau2, onsager=onsager) - x) ** 2).mean(2)
        z = (mse.mean(1) - se) / (mse.std(1) / math.sqrt(6))
        assert (z[1:].abs().max() < 4) == inside


def test_amp_is_stuck_in_the_hard_phase():
    p_hard = M.replica_prediction(0.46, 0.3, 1e-4)
    p_easy = M.replica_prediction(0.6, 0.3, 1e-4)
    assert p_hard["mmse_amp"] > 100 * p_hard["mmse_bayes"]
    assert p_easy["n_fixed_points"] == 1 and p_easy["mmse_amp"] == p_easy["mmse_bayes"]


def test_amp_from_an_informed_start_and_soft_thresholding():
    g = torch.Generator().manual_seed(1)
    A, x, y = M.sample_instances(4, 800, 0.46, 0.3, 1e-4, generator=g)
    fp = sorted(float(v) for v in M.bg_mmse(M.se_fixed_points(0.46, 0.3, 1e-4), 0.3))
    from_zero = float(((M.amp(A, y, 0.3, 30)[-1] - x) ** 2).mean())
    informed = float(((M.amp(A, y, 0.3, 30, x0=x)[-1] - x) ** 2).mean())
    assert abs(math.log10(from_zero / fp[-1])) < 0.3 and abs(math.log10(informed / fp[0])) < 0.3
    # the first iterate from x0 is the denoiser at x0 + A^T (y - A x0), with no Onsager memory
    r = x + torch.einsum("bnd,bn->bd", A, y - torch.einsum("bnd,bd->bn", A, x))
    tau2 = ((y - torch.einsum("bnd,bd->bn", A, x)) ** 2).mean(1, keepdim=True)
    torch.testing.assert_close(M.amp(A, y, 0.3, 1, x0=x)[1], M.bg_denoiser(r, tau2, 0.3)[0])
    eta, deta = M.soft_denoiser(torch.tensor([-3.0, -0.5, 0.5, 3.0], **f64), 1.0, 1.0)
    torch.testing.assert_close(eta, torch.tensor([-2.0, 0.0, 0.0, 2.0], **f64))
    torch.testing.assert_close(deta, torch.tensor([1.0, 0.0, 0.0, 1.0], **f64))
    # the Lasso's AMP has one fixed point: both starts end at the same error
    lasso = [float(((M.amp(A, y, 0.3, 60, x0=x0, alpha=1.0)[-1] - x) ** 2).mean()) for x0 in (None, x)]
    assert lasso[1] == pytest.approx(lasso[0], rel=0.05) and lasso[0] > 100 * fp[0]
    with pytest.raises(ValueError, match="x0 must have shape"):
        M.amp(A, y, 0.3, 2, x0=x[:, :3])
    with pytest.raises(ValueError, match="alpha must be"):
        M.amp(A, y, 0.3, 2, alpha=0.0)


def test_projected_denoising_fits_the_data_exactly_before_denoising():
    g = torch.Generator().manual_seed(2)
    A, x, y = M.sample_instances(2, 60, 0.5, 0.2, 1e-3, generator=g)
    out = M.projected_denoising(A, y, 0.2, 1e-3, 3)
    assert out.shape == (4, 2, 60) and (out[0] == 0).all()
    # the pseudo-data x^t + A^T (A A^T)^{-1} (y - A x^t) satisfies A r = y exactly
    u = torch.einsum("bnd,bn->bd", A, torch.linalg.solve(A @ A.transpose(1, 2), y))
    torch.testing.assert_close(torch.einsum("bnd,bd->bn", A, u), y)
    delta = 0.5
    t2 = 1e-3 + (1 - delta) / delta * u.pow(2).mean(1, keepdim=True)
    torch.testing.assert_close(out[1], M.bg_denoiser(u, t2, 0.2)[0])
    with pytest.raises(ValueError, match="n_iter >= 1"):
        M.projected_denoising(A, y, 0.2, 1e-3, 0)


def test_bad_input_is_refused_before_any_work():
    g = torch.Generator().manual_seed(0)
    A, _, y = M.sample_instances(2, 5, 1.0, 0.2, 0.1, generator=g)
    with pytest.raises(ValueError, match="0 < eps < 1"):
        M.bayes_posterior_mean(A, y, 1.5, 0.1)
    with pytest.raises(ValueError, match="d <= 20"):
        M.bayes_posterior_mean(torch.zeros(1, 3, 21, **f64), torch.zeros(1, 3, **f64), 0.2, 0.1)
    with pytest.raises(ValueError, match=r"tau2 must be a positive vector of shape \(3,\)"):
        M.amp(A, y, 0.2, 3, tau2=torch.ones(2, **f64))
    with pytest.raises(ValueError, match="y \\(batch, n\\)"):
        M.amp(A, y[:, :2], 0.2, 3)
    with pytest.raises(ValueError, match="delta > 0 and n_iter >= 1"):
        M.state_evolution(0.5, 0.2, 0.1, 0)
    with pytest.raises(ValueError, match="tau2 must be > 0"):
        M.bg_mmse(torch.tensor([0.0], **f64), 0.2)


def test_lmmse_equals_its_woodbury_form_float64():
    g = torch.Generator().manual_seed(3)
    A = torch.randn(2, 6, 9, generator=g, dtype=torch.float64) / 6 ** 0.5
    y = torch.randn(2, 6, generator=g, dtype=torch.float64)
    eps, s2 = 0.3, 0.05
    got = M.lmmse(A, y, eps, s2)
    # (A^T A / s2 + I / eps)^{-1} A^T y / s2: the same estimator through the d x d system
    G = A.transpose(1, 2) @ A / s2 + torch.eye(9, dtype=torch.float64) / eps
    want = torch.linalg.solve(G, torch.einsum("bnd,bn->bd", A, y) / s2)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    with pytest.raises(ValueError, match="eps"):
        M.lmmse(A, y, 1.5, s2)
