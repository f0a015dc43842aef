"""The restricted Boltzmann machine of the diffusion chapter: exact enumeration (float64), mean
field on the visible units, TAP on the joint model, and input checks."""

import math

import pytest
import torch

import nnapprox
from nnapprox.diffusion import (
    field, joint_coupling, joint_field, naive_mean_field, noise, posterior_mean, rbm_coupling,
    rbm_log_weight, rbm_mean_field, rbm_mf_step, rbm_mf_trajectory, rbm_posterior_mean,
    rbm_posterior_mean_reference, rbm_sample_exact, all_states, tap, vi_free_energy,
)

from jaxtyping import TypeCheckError
from nnapprox.diffusion.rbm import _check_field

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_joint_coupling_is_the_bipartite_symmetric_matrix():
    W = rbm_coupling(5, 3, 0.7, _gen(0))
    A = joint_coupling(W)
    assert A.shape == (8, 8) and torch.equal(A, A.T)
    assert torch.all(A[:5, :5] == 0) and torch.all(A[5:, 5:] == 0) and torch.equal(A[:5, 5:], W)
    # ||A_W||_op = ||W||_op (the eigenvalues of A_W are +- the singular values of W)
    op_A = float(torch.linalg.eigvalsh(A).abs().max())
    assert abs(op_A - float(torch.linalg.matrix_norm(W, 2))) < 1e-12


def test_log_weight_is_the_sum_over_hidden_spins():
    """sum_s exp(x^T W s) = 2^k prod_a cosh((W^T x)_a), also for large |W^T x| (stable log cosh)."""
    W = rbm_coupling(4, 3, 0.9, _gen(1))
    X, S = all_states(4), all_states(3)
    brute = torch.logsumexp(X @ W @ S.T, dim=1) - 3 * math.log(2)
    torch.testing.assert_close(rbm_log_weight(X, W), brute, rtol=0, atol=1e-13)
    big = torch.tensor([[400.0, 300.0], [-900.0, 100.0]], dtype=F64)  # W^T x = (-500, 400)
    expected = torch.tensor([900.0 - 2 * math.log(2)], dtype=F64)
    torch.testing.assert_close(rbm_log_weight(torch.ones(1, 2, dtype=F64), big), expected,
                               rtol=0, atol=1e-9)


def test_posterior_mean_matches_the_brute_force_loop_and_the_joint_ising_model():
    g = _gen(2)
    W = rbm_coupling(6, 3, 0.8, g)
    h = torch.randn(3, 6, generator=g, dtype=F64)
    fast = rbm_posterior_mean(W, h)
    for i in range(3):
        loop = rbm_posterior_mean_reference(W, h[i])
        torch.testing.assert_close(fast[i], loop, rtol=0, atol=1e-12)
    joint = posterior_mean(joint_coupling(W), joint_field(h, 3))[:, :6]
    torch.testing.assert_close(fast, joint, rtol=0, atol=1e-12)


def test_exact_sampler_frequencies_match_the_marginal_law():
    g = _gen(3)
    W = rbm_coupling(4, 2, 1.5, g)
    p = torch.softmax(rbm_log_weight(all_states(4), W), dim=0)  # mu(x), (16,)
    n = 200_000
    x = rbm_sample_exact(W, n, g)
    idx = ((x > 0).long() * torch.tensor([8, 4, 2, 1])).sum(1)
    freq = torch.bincount(idx, minlength=16).double() / n
    se = torch.sqrt(p * (1 - p) / n)
    assert float(((freq - p).abs() / se).max()) < 5.0  # 5 standard errors over 16 cells


def test_mean_field_fixed_point_is_stationary_and_shared_with_the_joint_iteration():
    g = _gen(4)
    W = rbm_coupling(8, 4, 0.5, g)
    h = torch.randn(5, 8, generator=g, dtype=F64)
    m = rbm_mean_field(W, h, 300)
    torch.testing.assert_close(rbm_mf_step(m, W, h), m, rtol=0, atol=1e-14)
    # (m, n = tanh(W^T m)) is a stationary point of F_VI for the joint model (A_W, (h, 0))
    mn = torch.cat([m, torch.tanh(m @ W)], dim=1).requires_grad_(True)
    F = vi_free_energy(mn, joint_coupling(W), joint_field(h, 4))
    (grad,) = torch.autograd.grad(F.sum(), mn)
    assert float(grad.abs().max()) < 1e-12
    # the parallel (Jacobi) mean field of section 2 on the joint model has the same fixed point
    joint = naive_mean_field(joint_coupling(W), joint_field(h, 4), 600)[:, :8]
    torch.testing.assert_close(joint, m, rtol=0, atol=1e-12)


def test_iterates_obey_the_contraction_bound():
    g = _gen(5)
    W = rbm_coupling(10, 4, 0.45, g)
    rho_W = float(torch.linalg.matrix_norm(W, 2)) ** 2
    assert rho_W < 1
    ts = torch.full((64,), 1.0, dtype=F64)
    h = field(noise(rbm_sample_exact(W, 64, g), ts, g), ts)
    traj = rbm_mf_trajectory(W, h, 25)
    m_star = rbm_mean_field(W, h, 500)
    dist = (traj - m_star).norm(dim=2)  # (L+1, batch)
    bound = rho_W ** torch.arange(26, dtype=F64)[:, None] * m_star.norm(dim=1)
    assert bool((dist <= bound * (1 + 1e-9) + 1e-14).all())
    torch.testing.assert_close(traj[-1], rbm_mean_field(W, h, 25), rtol=0, atol=0)


def test_tap_on_the_joint_model_solves_the_rbm_tap_equations():
    """tap(A_W, (h, 0)) is TAP for the RBM: visible and hidden equations with Onsager terms."""
    g = _gen(6)
    W = rbm_coupling(8, 4, 0.6, g)
    h = torch.randn(4, 8, generator=g, dtype=F64)
    mn = tap(joint_coupling(W), joint_field(h, 4), 400, 0.5)
    m, n = mn[:, :8], mn[:, 8:]
    W2 = W**2
    torch.testing.assert_close(m, torch.tanh(h + n @ W.T - m * ((1 - n**2) @ W2.T)),
                               rtol=0, atol=1e-12)
    torch.testing.assert_close(n, torch.tanh(m @ W - n * ((1 - m**2) @ W2)), rtol=0, atol=1e-12)


def test_bad_inputs_raise_before_work():
    with pytest.raises(ValueError, match="d >= 1 visible and k >= 1 hidden"):
        rbm_coupling(0, 3, 0.5)
    with pytest.raises(ValueError, match="beta must be >= 0"):
        rbm_coupling(3, 3, -0.1)
    W = rbm_coupling(4, 2, 0.5, _gen(7))
    # a field of the wrong width: the library's own check (jaxtyping, active under pytest only,
    # reports it first on the public function)
    with pytest.raises(ValueError, match=r"shape \(batch, d\) with d = W.shape\[0\] = 4"):
        _check_field(W, torch.zeros(2, 5, dtype=F64))
    with pytest.raises((ValueError, TypeCheckError)):
        rbm_posterior_mean(W, torch.zeros(2, 5, dtype=F64))
    with pytest.raises(ValueError, match="n_iter must be >= 0"):
        rbm_mf_trajectory(W, torch.zeros(1, 4, dtype=F64), -1)
    with pytest.raises(ValueError, match="d \\+ k <= 20"):
        rbm_sample_exact(torch.zeros(16, 8, dtype=F64), 10)
    with pytest.raises(ValueError, match="k must be >= 1"):
        joint_field(torch.zeros(1, 4, dtype=F64), 0)


def test_the_chapters_claims_can_fail():
    """Wrong inputs fail the chapter's two checks: the pairwise approximation W W^T of the RBM
    (hidden spins dropped) is not its posterior mean, and a too-fast rate breaks the bound."""
    g = _gen(8)
    W = rbm_coupling(8, 4, 0.45, g)
    h = torch.randn(16, 8, generator=g, dtype=F64)
    A_pair = W @ W.T
    A_pair.fill_diagonal_(0)
    claims = nnapprox.Claims()
    gap = float((posterior_mean(A_pair, h) - rbm_posterior_mean(W, h)).abs().max())
    assert not claims.check("pairwise approximation is exact", gap, "<=", 1e-12, kind="exact",
                            source="test")
    traj = rbm_mf_trajectory(W, h, 20)
    m_star = rbm_mean_field(W, h, 500)
    dist = (traj - m_star).norm(dim=2)
    rho_wrong = float(torch.linalg.matrix_norm(W, 2)) ** 4  # the square of the right factor
    bound = rho_wrong ** torch.arange(21, dtype=F64)[:, None] * m_star.norm(dim=1)
    assert not claims.check("wrong rate", bool((dist <= bound * (1 + 1e-9) + 1e-14).all()), "==",
                            True, kind="bound", source="test", no_foil="a proven bound")
    assert claims.failed
